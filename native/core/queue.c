#define _GNU_SOURCE
#include "queue.h"

#include <errno.h>
#include <string.h>
#include <time.h>

static void cond_init_mono(pthread_cond_t *c)
{
    pthread_condattr_t a;
    pthread_condattr_init(&a);
    pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
    pthread_cond_init(c, &a);
    pthread_condattr_destroy(&a);
}

void msp_queue_init(struct msp_queue *q, int nlists)
{
    memset(q, 0, sizeof *q);
    pthread_mutex_init(&q->mu, NULL);
    cond_init_mono(&q->space);
    cond_init_mono(&q->idle);
    q->nlists = nlists < 1 ? 1 : nlists > MSP_MAX_WRITERS ? MSP_MAX_WRITERS : nlists;
    for (int i = 0; i < q->nlists; i++)
        pthread_cond_init(&q->work[i], NULL);
}

int msp_queue_push(struct msp_queue *q, int w, struct msp_item *it, uint64_t budget, int block)
{
    pthread_mutex_lock(&q->mu);
    for (;;) {
        if (q->closed) {
            pthread_mutex_unlock(&q->mu);
            return MSP_PUSH_CLOSED;
        }
        if (q->bytes == 0 || q->bytes + it->cost <= budget)
            break;
        if (!block) {
            pthread_mutex_unlock(&q->mu);
            return MSP_PUSH_DROPPED;
        }
        pthread_cond_wait(&q->space, &q->mu);
    }
    it->next = NULL;
    if (q->tail[w])
        q->tail[w]->next = it;
    else
        q->head[w] = it;
    q->tail[w] = it;
    q->depth++;
    q->bytes += it->cost;
    pthread_cond_signal(&q->work[w]);
    pthread_mutex_unlock(&q->mu);
    return MSP_PUSH_OK;
}

struct msp_item *msp_queue_pop(struct msp_queue *q, int w)
{
    pthread_mutex_lock(&q->mu);
    while (!q->head[w] && !q->closed)
        pthread_cond_wait(&q->work[w], &q->mu);
    struct msp_item *it = q->head[w];
    if (it) {
        q->head[w] = it->next;
        if (!q->head[w])
            q->tail[w] = NULL;
        q->depth--;
        q->inflight++;
    }
    pthread_mutex_unlock(&q->mu);
    return it;
}

void msp_queue_done(struct msp_queue *q, uint64_t cost)
{
    pthread_mutex_lock(&q->mu);
    q->bytes -= cost;
    q->inflight--;
    pthread_cond_broadcast(&q->space);
    if (q->depth == 0 && q->inflight == 0)
        pthread_cond_broadcast(&q->idle);
    pthread_mutex_unlock(&q->mu);
}

int msp_queue_wait_idle(struct msp_queue *q, uint64_t deadline)
{
    struct timespec ts = {(time_t)(deadline / 1000000000ULL), (long)(deadline % 1000000000ULL)};
    pthread_mutex_lock(&q->mu);
    int rc = 0;
    while ((q->depth || q->inflight) && rc != ETIMEDOUT)
        rc = pthread_cond_timedwait(&q->idle, &q->mu, &ts);
    int drained = q->depth == 0 && q->inflight == 0;
    pthread_mutex_unlock(&q->mu);
    return drained;
}

struct msp_item *msp_queue_close(struct msp_queue *q, uint64_t *inflight)
{
    struct msp_item *all = NULL, **end = &all;
    pthread_mutex_lock(&q->mu);
    q->closed = 1;
    for (int w = 0; w < q->nlists; w++) {
        *end = q->head[w];
        while (*end)
            end = &(*end)->next;
        q->head[w] = q->tail[w] = NULL;
        pthread_cond_broadcast(&q->work[w]);
    }
    q->depth = 0;
    *inflight = q->inflight;
    pthread_cond_broadcast(&q->space);
    pthread_mutex_unlock(&q->mu);
    return all;
}

void msp_queue_stats(struct msp_queue *q, uint64_t *depth, uint64_t *bytes)
{
    pthread_mutex_lock(&q->mu);
    *depth = q->depth + q->inflight;
    *bytes = q->bytes;
    pthread_mutex_unlock(&q->mu);
}
