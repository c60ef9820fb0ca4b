/* A writer's batch of records: the lines in one buffer, their room claimed in
 * the log, one write(2) for all of them, then what waits for each (recbatch.h):
 * up through a pointer, tensorrec.c's msp_tensorrec_appended. */
#include "recbatch.h"

#include <stdlib.h>
#include <string.h>

#include "pending.h"
#include "record.h"
#include "util.h"

struct msp_recbatch {
    char *buf;
    size_t len, cap;
    struct msp_recbatch_entry *e; /* the records that joined, in order */
    size_t n, ecap;
    uint64_t first_ns; /* when its first record joined (CLOCK_MONOTONIC) */
    msp_recbatch_after after;
};

/* A full batch plus its last record: a record longer than that grows it. */
#define START_CAP (MSP_RECBATCH_BYTES + (16u << 10))
#define START_RECORDS 512

struct msp_recbatch *msp_recbatch_new(msp_recbatch_after after)
{
    struct msp_recbatch *rb = calloc(1, sizeof *rb);
    if (!rb)
        return NULL;
    rb->buf = malloc(START_CAP);
    rb->e = malloc(START_RECORDS * sizeof *rb->e);
    if (!rb->buf || !rb->e) {
        free(rb->buf);
        free(rb->e);
        free(rb);
        return NULL;
    }
    rb->cap = START_CAP;
    rb->ecap = START_RECORDS;
    rb->after = after;
    return rb;
}

void msp_recbatch_reset(struct msp_recbatch *rb)
{
    rb->len = rb->n = 0;
}

/* Room for one more record of n bytes; 0 if out of memory. */
static int room(struct msp_recbatch *rb, size_t n)
{
    if (n > rb->cap - rb->len) {
        size_t cap = rb->len + n > 2 * rb->cap ? rb->len + n : 2 * rb->cap;
        char *p = realloc(rb->buf, cap);
        if (!p)
            return 0;
        rb->buf = p;
        rb->cap = cap;
    }
    if (rb->n == rb->ecap) {
        struct msp_recbatch_entry *e = realloc(rb->e, 2 * rb->ecap * sizeof *e);
        if (!e)
            return 0;
        rb->e = e;
        rb->ecap *= 2;
    }
    return 1;
}

/* A run of records of tensors of one round (the writer's items come round
 * after round): no longer pending, counted out at once. */
struct run {
    char key[MSP_ROUND_KEY_LEN];
    size_t len;
    uint64_t n;
};

static void run_end(struct run *r)
{
    if (r->n)
        msp_pending_recorded(r->key, r->len, r->n);
    r->n = 0;
}

/* Adds the tensor of e to the run, or ends the run and starts another. */
static void run_add(struct run *r, const struct msp_recbatch_entry *e)
{
    if (r->n && r->len && e->pathn > r->len && e->path[r->len] == '/' &&
        !memcmp(e->path, r->key, r->len)) {
        r->n++;
        return;
    }
    run_end(r);
    r->len = msp_round_key(e->path, e->pathn, r->key);
    r->n = 1;
}

int msp_recbatch_commit(struct msp_recbatch *rb, struct jbuf *b,
                        const struct msp_recbatch_entry *e)
{
    /* "}\n" still to come (msp_rec_close); with no memory for it, the record
     * goes out alone, after the batch, so the order stays */
    if (rb && !room(rb, b->len + 2)) {
        msp_recbatch_flush(rb);
        rb = NULL;
    }
    if (!rb) {
        int rc = msp_rec_commit(b);
        if (rc == 0 && e->path) {
            struct run r = {.n = 0};
            run_add(&r, e);
            run_end(&r);
        }
        return rc;
    }
    int joined = msp_rec_close(b) == 0;
    if (joined && !rb->n)
        rb->first_ns = msp_mono_ns();
    if (joined) {
        memcpy(rb->buf + rb->len, b->p, b->len);
        rb->len += b->len;
        rb->e[rb->n] = *e;
        rb->e[rb->n++].end = rb->len;
    }
    jb_free(b);
    return joined ? 1 : -1;
}

int msp_recbatch_due(const struct msp_recbatch *rb, uint64_t now_ns)
{
    return msp_recbatch_due_at(rb->len, rb->n, rb->first_ns, now_ns);
}

void msp_recbatch_flush(struct msp_recbatch *rb)
{
    if (!rb->n)
        return;
    size_t done = msp_rec_append(rb->buf, rb->len), landed = 0;
    while (landed < rb->n && rb->e[landed].end <= done)
        landed++;
    if (landed)
        msp_rec_landed(landed);
    struct run r = {.n = 0};
    for (size_t i = 0; i < landed; i++)
        if (rb->e[i].path)
            run_add(&r, &rb->e[i]);
    run_end(&r);
    if (landed)
        rb->after(rb->e, landed, 1);
    if (landed < rb->n)
        rb->after(rb->e + landed, rb->n - landed, 0);
    rb->len = rb->n = 0;
}
