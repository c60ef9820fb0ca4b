/* The bounded copy queue between the hook threads and the writers: a FIFO per
 * writer, one byte budget, payloads in the ring (ring.h), whose block and drop
 * policies it is (queue.h). */
#define _GNU_SOURCE
#include "queue.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "slot.h"
#include "util.h"

/* Keeps the region arithmetic far from overflow (malloc would fail anyway). */
#define MAX_ITEM (UINT64_C(1) << 62)

static void cond_init_mono(pthread_cond_t *c)
{
    pthread_condattr_t a;
    pthread_condattr_init(&a);
    pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
    pthread_cond_init(c, &a);
    pthread_condattr_destroy(&a);
}

static int clamp_lists(int n)
{
    return n < 1 ? 1 : n > MSP_MAX_WRITERS ? MSP_MAX_WRITERS : n;
}

void msp_queue_init(struct msp_queue *q, int nlists)
{
    memset(q, 0, sizeof *q);
    pthread_mutex_init(&q->mu, NULL);
    cond_init_mono(&q->space);
    cond_init_mono(&q->idle);
    pthread_cond_init(&q->warmed, NULL);
    pthread_cond_init(&q->walked, NULL);
    q->nlists = clamp_lists(nlists);
    q->given_up = MSP_HEAD_IDLE;
    for (int i = 0; i < MSP_MAX_WRITERS; i++) {
        cond_init_mono(&q->work[i]); /* naps are timed */
        q->heads[i].held = q->heads[i].shown = MSP_HEAD_IDLE;
    }
}

/* Under mu: writer w's head (control.h writer_head[]): the lowest seq of its
 * list, of what it has in hand, and of what msp_queue_close handed back. */
static uint64_t head_now(const struct msp_queue *q, int w)
{
    const struct msp_head *h = &q->heads[w];
    uint64_t low = q->head[w] ? q->head[w]->seq : MSP_HEAD_IDLE;
    uint64_t dip = msp_window_get(&h->dips, MSP_HEAD_IDLE);
    if (dip < low)
        low = dip;
    if (h->held < low)
        low = h->held;
    return q->given_up < low ? q->given_up : low;
}

/* Under mu: writer w's head into the slot, if it moved. Called after every
 * change that can move it, so the slot always holds the head of the last
 * change; a raise comes after the write(2) of the records it passes, and is a
 * release, so a reader that sees it and then the log's size sees them. */
static void show_head(struct msp_queue *q, int w)
{
    uint64_t now = head_now(q, w);
    if (now == q->heads[w].shown)
        return;
    q->heads[w].shown = now;
    __atomic_store_n(&msp_proc_now()->writer_head[w], now, __ATOMIC_RELEASE);
}

static void show_heads(struct msp_queue *q)
{
    for (int w = 0; w < q->nlists; w++)
        show_head(q, w);
}

/* Under mu: every head and the number of writers, into a slot that may not
 * have them (a fresh one). */
static void show_all(struct msp_queue *q)
{
    struct msp_proc *p = msp_proc_now();
    __atomic_store_n(&p->n_writers, (uint64_t)q->nlists, __ATOMIC_RELAXED);
    for (int w = 0; w < q->nlists; w++) {
        q->heads[w].shown = head_now(q, w);
        __atomic_store_n(&p->writer_head[w], q->heads[w].shown, __ATOMIC_RELEASE);
    }
}

void msp_queue_set_lists(struct msp_queue *q, int nlists)
{
    pthread_mutex_lock(&q->mu);
    q->nlists = clamp_lists(nlists);
    show_all(q);
    pthread_mutex_unlock(&q->mu);
}

void msp_queue_show(struct msp_queue *q)
{
    pthread_mutex_lock(&q->mu);
    show_all(q);
    pthread_mutex_unlock(&q->mu);
}

int msp_item_makes_file(const struct msp_item *it)
{
    return it->kind == MSP_ITEM_PARAM || (it->task & (MSP_TASK_TENSOR | MSP_TASK_OVERFLOW));
}

uint32_t msp_item_weight(const struct msp_item *it)
{
    return msp_item_makes_file(it) ? MSP_QUEUE_FILE_WEIGHT : 1;
}

/* A queued item's link. Writer w reads its list's links with mu released
 * (msp_queue_pop) while pushes append at the tail: the store is a release, so
 * an item's fields, filled before its push, are seen with its link. */
static void set_next(struct msp_item *it, struct msp_item *next)
{
    __atomic_store_n(&it->next, next, __ATOMIC_RELEASE);
}

/* Under mu: appends `it` to list w. 1 if the list's lowest seq may have gone
 * down: it is the front, or a dip (queue.h struct msp_head). */
static int append(struct msp_queue *q, int w, struct msp_item *it)
{
    struct msp_head *h = &q->heads[w];
    struct msp_item *tail = q->tail[w];
    uint64_t at = h->pushed++;
    it->weight = msp_item_weight(it);
    h->load += it->weight;
    set_next(it, NULL);
    if (tail)
        set_next(tail, it);
    else
        q->head[w] = it;
    q->tail[w] = it;
    if (!tail || it->seq > tail->seq)
        return !tail;
    msp_window_add(&h->dips, at, it->seq, 1);
    return 1;
}

/* Under mu: n items were popped off list w: the dips among them are gone. */
static void popped(struct msp_head *h, uint64_t n)
{
    h->popped += n;
    msp_window_drop(&h->dips, h->popped);
}

/* Under mu, with nothing reserved: makes the ring match the budget (a
 * budget change remaps it, an oversize item or a trim unmaps it). Returns
 * the old mapping for the caller to unmap after unlocking. */
static struct msp_ring_mapping ring_resize(struct msp_queue *q, uint64_t size)
{
    struct msp_ring_mapping old = {NULL, 0};
    if (q->ring.base && q->ring.size == size)
        return old;
    while (q->warming || q->trimming) /* a chunk of this mapping is faulted in, or given back */
        pthread_cond_wait(&q->warmed, &q->mu);
    q->warm = 0;
    q->spans.n = 0;
    /* A ring that is warmed for a payload dump starts whole (writer 0 faults it
     * in ahead of the head). One that is not (statistics: small items) starts
     * as one huge page and grows only as far as its live regions reach, so a
     * worker holds what its records in flight need, not the budget: its first
     * lap once walked the whole budget (1 GiB by default, a quarter of the
     * record path's CPU in fresh pages' faults and zeroing), and the memory
     * stayed until the ring's idle time ran out. */
    uint64_t soft = q->warm_budget ? size : MSP_RING_HUGE_PAGE;
    old = msp_ring_remap(&q->ring, size, soft); /* on failure payloads fall back to malloc */
    q->maps += q->ring.base != NULL;
    return old;
}

/* Under mu: `cost` bytes of the budget are free again. */
static void unreserve(struct msp_queue *q, uint64_t cost)
{
    msp_ring_refund(&q->load, cost);
    pthread_cond_broadcast(&q->space);
}

/* Under mu: takes `it` out of the budget and the ring. A ring item's memory
 * is the ring's again once the caller moves the ring's tail (msp_ring_advance,
 * once for all it put back; it touches the item no more); a heap one is the
 * caller's to free, with its payload: 1. The caller then wakes the hooks
 * waiting for room (space), once too. */
static int put_back(struct msp_queue *q, struct msp_item *it)
{
    msp_ring_refund(&q->load, it->cost);
    if (!it->in_ring)
        return 1;
    msp_ring_mark_free(it->region);
    return 0;
}

/* Under mu, after put_back: the ring's tail moves over what was put back, and
 * the hooks waiting for room look again. */
static void put_back_done(struct msp_queue *q)
{
    if (q->ring.base)
        msp_ring_advance(&q->ring);
    pthread_cond_broadcast(&q->space);
}

/* Under mu: wakes the writers napping with items in their lists or hands. */
static void wake_nappers(struct msp_queue *q)
{
    for (int w = 0; w < q->nlists; w++)
        if ((q->head[w] || q->heads[w].in_hand) && !q->sleeping[w])
            pthread_cond_signal(&q->work[w]);
}

/* The places of the item and its payload in a region that starts at `region`:
 * the item and its strings (meta_len) first, then the payload; with a lead,
 * the payload `lead` bytes past the first MSP_DIO_ALIGN boundary and the item
 * after it, so a writer can give the region back from its front as it writes
 * (msp_queue_release_front). */
static struct msp_item *item_at(unsigned char *region, uint64_t payload, uint32_t lead)
{
    uintptr_t at = (uintptr_t)region + MSP_RING_HDR;
    if (lead)
        at = ((at + MSP_DIO_ALIGN - 1) & ~(uintptr_t)(MSP_DIO_ALIGN - 1)) + lead + payload;
    at = (at + MSP_RING_ALIGN - 1) & ~(uintptr_t)(MSP_RING_ALIGN - 1);
    return (struct msp_item *)(void *)at;
}

static unsigned char *payload_at(unsigned char *region, uint64_t meta_len, uint32_t lead)
{
    uintptr_t at = (uintptr_t)region + MSP_RING_HDR;
    if (lead)
        return (unsigned char *)(((at + MSP_DIO_ALIGN - 1) & ~(uintptr_t)(MSP_DIO_ALIGN - 1)) +
                                 lead);
    return (unsigned char *)(at + meta_len);
}

/* A heap payload with room for `lead` bytes before it, aligned as in the
 * ring; NULL when out of memory. */
static unsigned char *heap_payload(uint64_t payload, uint32_t lead)
{
    void *p = NULL;
    if (!lead)
        return malloc(payload ? payload : 1);
    if (posix_memalign(&p, MSP_DIO_ALIGN, lead + payload) != 0)
        return NULL;
    return (unsigned char *)p + lead;
}

uint64_t msp_item_heap_cost(uint64_t meta, uint64_t payload, uint32_t lead)
{
    return msp_malloc_cost(meta) + msp_malloc_cost(payload + (lead ? MSP_DIO_ALIGN : 0));
}

int msp_item_heap_alloc(uint64_t meta, uint64_t payload, uint32_t lead, struct msp_item **out)
{
    *out = NULL;
    if (payload > MAX_ITEM || meta > MAX_ITEM || lead >= MSP_DIO_ALIGN)
        return MSP_PUSH_NOMEM;
    struct msp_item *it = malloc(meta);
    unsigned char *data = it ? heap_payload(payload, lead) : NULL;
    if (!data) {
        free(it);
        return MSP_PUSH_NOMEM;
    }
    it->next = NULL;
    it->cost = msp_item_heap_cost(meta, payload, lead);
    it->in_ring = 0;
    it->region = NULL;
    it->stats_in_data = 0;
    it->data = data;
    it->lead = lead;
    *out = it;
    return MSP_PUSH_OK;
}

void msp_item_heap_free(struct msp_item *it)
{
    free(it->data - it->lead); /* the header's room comes first (heap_payload) */
    free(it);
}

int msp_queue_reserve(struct msp_queue *q, uint64_t meta, uint64_t payload, uint32_t lead,
                      uint64_t budget, int block, struct msp_item **out)
{
    *out = NULL;
    if (payload > MAX_ITEM || meta > MAX_ITEM || lead >= MSP_DIO_ALIGN)
        return MSP_PUSH_NOMEM;
    /* in the ring the item and its strings come first, then the payload (its
     * alignment kept, or the header's room aligned for O_DIRECT, up to a block
     * of padding before it): no malloc and no free an item */
    uint64_t meta_len = (meta + MSP_RING_ALIGN - 1) & ~(uint64_t)(MSP_RING_ALIGN - 1);
    /* up to a block less 64 bytes before the header, up to 63 after the payload */
    uint64_t align_pad = lead ? MSP_DIO_ALIGN - MSP_RING_ALIGN + lead + MSP_RING_ALIGN - 1 : 0;
    uint64_t len = (MSP_RING_HDR + meta_len + align_pad + payload + MSP_RING_ALIGN - 1) &
                   ~(uint64_t)(MSP_RING_ALIGN - 1);
    /* what it takes in memory: its region of the ring (header, the item and its
     * strings, the payload, each 64-byte aligned), or its two mallocs */
    const uint64_t heap_cost = msp_item_heap_cost(meta, payload, lead);
    struct msp_ring_mapping old = {NULL, 0};
    struct msp_ring_region *r = NULL;
    uint64_t cost;
    int rc;
    pthread_mutex_lock(&q->mu);
    q->budget = budget;
    for (;;) {
        if (q->closed) {
            rc = MSP_PUSH_CLOSED;
            break;
        }
        int alone = q->load.bytes == 0;
        if (alone) { /* the ring is empty: fit it to this budget and item (once: alone never
                        waits); sysconf and a division, so not for every item */
            uint64_t want = msp_ring_size_for(budget);
            old = ring_resize(q, len > want ? 0 : want);
        }
        int heap = q->ring.base == NULL;
        cost = heap ? heap_cost : len;
        int room = alone || msp_ring_fits(&q->load, cost, budget);
        if (room && !heap && (r = msp_ring_alloc(&q->ring, len, !q->trimming)) == NULL &&
            (q->trimming || q->ring.pads >= len)) {
            /* no room below the soft end while a trim gives back what is past
             * it, or while the head, started again at 0, has caught up with a
             * tail that has not yet stepped over the pad to the end (room the
             * budget has, held by the ring's shape): mallocs, not a wait or a
             * drop for that */
            heap = 1;
            cost = heap_cost;
            room = alone || msp_ring_fits(&q->load, cost, budget);
        }
        if (room && (heap || r)) {
            rc = MSP_PUSH_OK;
            break;
        }
        /* full: the policy, block (wait for room) or drop */
        if (!block) {
            rc = MSP_PUSH_DROPPED;
            break;
        }
        wake_nappers(q); /* what they hold back is the room this waits for */
        q->blocked++;
        pthread_cond_wait(&q->space, &q->mu);
        q->blocked--;
    }
    if (rc == MSP_PUSH_OK) {
        q->used = 1;
        msp_ring_charge(&q->load, cost);
        q->heap_items += r == NULL;
    }
    pthread_mutex_unlock(&q->mu);
    msp_ring_unmap(old);
    if (rc != MSP_PUSH_OK)
        return rc;
    struct msp_item *it;
    if (!r) {
        rc = msp_item_heap_alloc(meta, payload, lead, &it);
        if (rc != MSP_PUSH_OK) {
            pthread_mutex_lock(&q->mu);
            unreserve(q, cost);
            pthread_mutex_unlock(&q->mu);
        }
        *out = it;
        return rc;
    }
    it = item_at((unsigned char *)r, payload, lead);
    it->next = NULL;
    it->cost = cost;
    it->in_ring = 1;
    it->region = r;
    it->stats_in_data = 0;
    it->data = payload_at((unsigned char *)r, meta_len, lead);
    it->lead = lead;
    *out = it;
    return MSP_PUSH_OK;
}

uint64_t msp_queue_release_front(struct msp_queue *q, struct msp_item *it,
                                 const unsigned char *written)
{
    if (!it->in_ring || !it->lead)
        return 0;
    pthread_mutex_lock(&q->mu);
    struct msp_ring_region *r = it->region;
    /* the rest's header goes in the last whole 64 bytes written: they are on disk */
    uintptr_t cut = ((uintptr_t)written & ~(uintptr_t)(MSP_RING_ALIGN - 1)) - MSP_RING_HDR;
    uint64_t freed = 0;
    if (cut > (uintptr_t)r && cut < (uintptr_t)it) {
        freed = (uint64_t)(cut - (uintptr_t)r);
        it->region = msp_ring_split(&q->ring, r, freed);
        it->cost -= freed;
        unreserve(q, freed);
    }
    pthread_mutex_unlock(&q->mu);
    return freed;
}

void msp_queue_adopt(struct msp_queue *q, struct msp_item *it)
{
    pthread_mutex_lock(&q->mu);
    msp_ring_charge(&q->load, it->cost);
    q->used = 1;
    pthread_mutex_unlock(&q->mu);
}

/* Under mu: list w, or the least loaded of the first `span` lists if w's load
 * is more than MSP_QUEUE_SLACK above it (queue.h msp_queue_push_near). */
static int near_list(const struct msp_queue *q, int w, int span)
{
    int least = w;
    for (int i = 0; i < span && i < q->nlists; i++)
        if (q->heads[i].load < q->heads[least].load)
            least = i;
    return q->heads[w].load > q->heads[least].load + MSP_QUEUE_SLACK ? least : w;
}

static int push_locked(struct msp_queue *q, int w, int span, struct msp_item *it)
{
    pthread_mutex_lock(&q->mu);
    if (span)
        w = near_list(q, w, span);
    if (q->closed) {
        pthread_mutex_unlock(&q->mu);
        return MSP_PUSH_CLOSED;
    }
    if (append(q, w, it))
        show_head(q, w);
    q->depth++;
    if (q->sleeping[w]) /* a napping or busy writer finds it without a wake-up */
        pthread_cond_signal(&q->work[w]);
    pthread_mutex_unlock(&q->mu);
    return MSP_PUSH_OK;
}

int msp_queue_push(struct msp_queue *q, int w, struct msp_item *it)
{
    return push_locked(q, w, 0, it);
}

int msp_queue_push_near(struct msp_queue *q, int w, int span, struct msp_item *it)
{
    return push_locked(q, w, span > 0 ? span : 1, it);
}

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23 /* Linux 5.14; older kernels say EINVAL */
#endif
/* How far past the furthest offset the head reached the ring is warmed (up to
 * the soft end): a burst of this size after a quiet spell copies into warm
 * memory. A big layer's tensors go through the ring (O_DIRECT, save.c) and its
 * burst runs ahead of the writers by up to 192 MiB (a 2k-token prefill at
 * hidden 4096): faulting that in took the host 0.5-0.8 s (this VM faults fresh
 * memory in from its host), warmed by writer 0 beforehand the copies took
 * 0.06-0.18 s and the process no more CPU. A trim gives back what a dump
 * did not need (fit_to_need), so a small dump pays the zeroing once. */
#define WARM_AHEAD (UINT64_C(256) << 20)

/* Under mu, by an idle writer 0: maps the ring for the expected dump, or
 * faults in its next chunk with mu released meanwhile. 1 if it did work
 * (the caller looks at its list again), 0 if there is nothing to warm. */
static int warm_step(struct msp_queue *q)
{
    if (!q->warm_budget || q->warm_off || q->closed || q->trimming)
        return 0;
    struct msp_ring *r = &q->ring;
    if (!r->base) {
        uint64_t size = msp_ring_size_for(q->warm_budget);
        if (q->load.bytes != 0 || size == 0)
            return 0;
        ring_resize(q, size); /* nothing to unmap: there was no ring */
        return r->base != NULL;
    }
    if (q->warm < r->reached) /* the head has been there: it faulted it in */
        q->warm = r->reached & ~(MSP_RING_HUGE_PAGE - 1);
    /* not past the soft end: what the ring needs lately (a burst lifts it) */
    uint64_t target = r->reached + WARM_AHEAD < r->soft ? r->reached + WARM_AHEAD : r->soft;
    if (q->warm >= target)
        return 0;
    uint64_t from = q->warm;
    uint64_t n = target - from < MSP_RING_HUGE_PAGE ? target - from : MSP_RING_HUGE_PAGE;
    unsigned char *ring = r->base;
    q->warming = 1;
    pthread_mutex_unlock(&q->mu);
    int rc = madvise(ring + from, n, MADV_POPULATE_WRITE);
    pthread_mutex_lock(&q->mu);
    q->warming = 0;
    pthread_cond_broadcast(&q->warmed);
    if (rc != 0)
        q->warm_off = 1; /* the hooks fault it in as they go, as without warming */
    else if (q->warm == from)
        q->warm = from + n;
    return 1;
}

/* Under mu, by writer w with nothing to do: naps (unwoken by pushes) on its
 * first wait after work, else sleeps until woken. *napped says which. */
static void idle_wait(struct msp_queue *q, int w, int *napped)
{
    if (*napped) {
        q->sleeping[w] = 1;
        pthread_cond_wait(&q->work[w], &q->mu);
        q->sleeping[w] = 0;
        return;
    }
    struct timespec ts = msp_mono_timespec(msp_mono_ns() + MSP_QUEUE_NAP_NS);
    pthread_cond_timedwait(&q->work[w], &q->mu, &ts);
    *napped = 1;
}

/* The last item of the run that starts at `run` (up to MSP_QUEUE_POP_ITEMS,
 * and no more bytes than the first's or MSP_QUEUE_POP_BYTES); *n gets their
 * number, *low their lowest seq. */
static struct msp_item *run_end(struct msp_item *run, uint64_t *n, uint64_t *low)
{
    struct msp_item *last = run, *next;
    uint64_t k = 1, bytes = run->cost, lo = run->seq;
    while (k < MSP_QUEUE_POP_ITEMS && (next = __atomic_load_n(&last->next, __ATOMIC_ACQUIRE)) &&
           bytes + next->cost <= MSP_QUEUE_POP_BYTES) {
        last = next;
        bytes += last->cost;
        lo = last->seq < lo ? last->seq : lo;
        k++;
    }
    *n = k;
    *low = lo;
    return last;
}

struct msp_item *msp_queue_pop(struct msp_queue *q, int w, int wait)
{
    pthread_mutex_lock(&q->mu);
    if (wait == MSP_POP_NAP && !q->head[w] && !q->closed && !q->blocked &&
        q->load.bytes < q->budget / 2) {
        struct timespec ts = msp_mono_timespec(msp_mono_ns() + MSP_QUEUE_NAP_NS);
        pthread_cond_timedwait(&q->work[w], &q->mu, &ts);
    } else if (wait == MSP_POP_WAIT) {
        for (int napped = 0;;) {
            if (q->head[w] || q->closed)
                break;
            if (w != 0 || !warm_step(q))
                idle_wait(q, w, &napped);
        }
    }
    struct msp_item *run = q->head[w];
    if (run) {
        /* Each item was written on a host thread's core: reading its link is a
         * cache miss, and 64 of them held mu long enough that hooks slept on it
         * (a futex wait and a wake-up a run: the most of a record's CPU after
         * its JSON). So the run is found with mu released: pushes meanwhile
         * only append at the tail (their links are release stores), no other
         * thread pops list w, and msp_queue_close waits for the walk. */
        q->walking[w] = 1;
        pthread_mutex_unlock(&q->mu);
        uint64_t n, low;
        struct msp_item *last = run_end(run, &n, &low);
        pthread_mutex_lock(&q->mu);
        q->walking[w] = 0;
        pthread_cond_broadcast(&q->walked); /* no waiter, as a rule: one load */
        q->head[w] = __atomic_load_n(&last->next, __ATOMIC_ACQUIRE);
        if (!q->head[w])
            q->tail[w] = NULL;
        set_next(last, NULL);
        q->depth -= n;
        q->inflight += n;
        popped(&q->heads[w], n);
        q->heads[w].in_hand += n;
        if (low < q->heads[w].held)
            q->heads[w].held = low;
        show_head(q, w);
    }
    pthread_mutex_unlock(&q->mu);
    return run;
}

/* Gives the items of `list` back to the budget and the ring, up to 64 a lock
 * (the heap ones freed after it); then, under the last lock, they leave the
 * heads: writer w's (w >= 0: they were in its hands, which now hold no lower
 * seq than `held`), or all of them (w < 0: msp_queue_close handed them back). */
static void give_back(struct msp_queue *q, struct msp_item *list, int w, uint64_t held)
{
    do {
        struct msp_item *heap[64];
        int n = 0;
        pthread_mutex_lock(&q->mu);
        for (int k = 0; list && k < 64; k++) {
            struct msp_item *it = list;
            list = it->next; /* before a ring item's memory goes back */
            q->inflight -= w >= 0;
            if (w >= 0) {
                q->heads[w].in_hand--;
                q->heads[w].load -= it->weight;
            }
            if (put_back(q, it))
                heap[n++] = it;
        }
        put_back_done(q);
        if (!list && w >= 0) {
            q->heads[w].held = held;
            show_head(q, w);
        } else if (!list) {
            q->given_up = MSP_HEAD_IDLE;
            show_heads(q);
        }
        if (q->depth == 0 && q->inflight == 0)
            pthread_cond_broadcast(&q->idle);
        pthread_mutex_unlock(&q->mu);
        for (int i = 0; i < n; i++)
            msp_item_heap_free(heap[i]);
    } while (list);
}

void msp_queue_done(struct msp_queue *q, int w, struct msp_item *list,
                    const struct msp_item *rest)
{
    uint64_t held = MSP_HEAD_IDLE;
    for (; rest; rest = rest->next)
        held = rest->seq < held ? rest->seq : held;
    give_back(q, list, w, held);
}

void msp_queue_forget(struct msp_queue *q, struct msp_item *list)
{
    give_back(q, list, -1, MSP_HEAD_IDLE);
}

void msp_queue_release(struct msp_queue *q, struct msp_item *it)
{
    pthread_mutex_lock(&q->mu);
    int heap = put_back(q, it);
    put_back_done(q);
    pthread_mutex_unlock(&q->mu);
    if (heap)
        msp_item_heap_free(it);
}

int msp_queue_wait_idle(struct msp_queue *q, uint64_t deadline)
{
    struct timespec ts = msp_mono_timespec(deadline);
    pthread_mutex_lock(&q->mu);
    int rc = 0;
    while ((q->depth || q->inflight) && rc != ETIMEDOUT)
        rc = pthread_cond_timedwait(&q->idle, &q->mu, &ts);
    int drained = q->depth == 0 && q->inflight == 0;
    pthread_mutex_unlock(&q->mu);
    return drained;
}

struct msp_item *msp_queue_close(struct msp_queue *q, int (*keep)(const struct msp_item *),
                                 uint64_t *inflight, uint64_t *kept)
{
    struct msp_item *all = NULL, **end = &all;
    uint64_t n = 0;
    pthread_mutex_lock(&q->mu);
    q->closed = 1;
    for (int w = 0; w < q->nlists; w++)
        while (q->walking[w])
            pthread_cond_wait(&q->walked, &q->mu);
    for (int w = 0; w < q->nlists; w++) {
        struct msp_item *it = q->head[w], *next;
        q->head[w] = q->tail[w] = NULL;
        struct msp_head *h = &q->heads[w];
        h->pushed = h->popped = 0;
        h->dips.n = 0;
        for (; it; it = next) {
            next = it->next;
            h->load -= it->weight; /* handed back, or appended again */
            if (keep && keep(it)) { /* in its order again, its dips noted anew */
                append(q, w, it);
                n++;
                continue;
            }
            q->given_up = it->seq < q->given_up ? it->seq : q->given_up;
            *end = it;
            end = &it->next;
        }
        pthread_cond_broadcast(&q->work[w]);
    }
    *end = NULL;
    show_heads(q);
    q->depth = n;
    *kept = n;
    *inflight = q->inflight;
    pthread_cond_broadcast(&q->space);
    pthread_mutex_unlock(&q->mu);
    return all;
}

void msp_queue_stats(struct msp_queue *q, uint64_t *depth, uint64_t *bytes)
{
    pthread_mutex_lock(&q->mu);
    *depth = q->depth + q->inflight;
    *bytes = q->load.bytes;
    pthread_mutex_unlock(&q->mu);
}

void msp_queue_expect(struct msp_queue *q, uint64_t budget, int keep)
{
    pthread_mutex_lock(&q->mu);
    q->warm_budget = budget;
    if (budget && q->ring.base)
        q->ring.soft = q->ring.size; /* to be warmed whole, as if mapped for it */
    q->keep = keep;
    q->quiet_trims = 0; /* a config change starts the idle time again */
    pthread_cond_signal(&q->work[0]);
    pthread_mutex_unlock(&q->mu);
}

/* Under mu, at a trim while awake with the ring mapped: the soft end comes down
 * to what the ring has needed within the last keep_trims periods, and what was
 * faulted in past it goes back to the kernel (mu released meanwhile, nothing
 * placed past it, see `trimming`). */
static void fit_to_need(struct msp_queue *q)
{
    struct msp_ring *r = &q->ring;
    if (!r->reached) /* unused since mapped: what is warm waits for the first burst */
        return;
    uint64_t k = ++q->trims;
    msp_window_add(&q->spans, k, r->span_peak, 0);
    msp_window_drop(&q->spans, k >= q->keep_trims ? k - q->keep_trims + 1 : 0);
    r->span_peak = msp_ring_span(r); /* what lives on counts in the next period */
    /* in whole huge pages, at least one: the ring is faulted in by them */
    const uint64_t huge = MSP_RING_HUGE_PAGE;
    uint64_t need = msp_window_get(&q->spans, 0);
    uint64_t need_end = need > huge ? (need + huge - 1) & ~(huge - 1) : huge;
    if (need_end < r->soft)
        r->soft = need_end;
    /* what lies past the soft end goes back: now, or at a later trim where
     * regions still lived past it at the trim that lowered it */
    const uint64_t cut = r->soft;
    while (q->warming) /* writer 0 is faulting a chunk in, maybe past the cut */
        pthread_cond_wait(&q->warmed, &q->mu);
    /* to the end of the huge page of the furthest byte faulted in, which the
     * kernel may have faulted in whole */
    uint64_t touched = r->reached > q->warm ? r->reached : q->warm;
    touched = (touched + huge - 1) & ~(huge - 1);
    touched = touched < r->size ? touched : r->size;
    /* the head below the cut too: so is the header of a pad the next region
     * may leave there (a span that wraps round waits for a later trim) */
    if (touched <= cut || !msp_ring_below(r, cut))
        return; /* nothing to give back yet, or regions still live past it */
    unsigned char *ring = r->base;
    q->trimming = 1;
    pthread_mutex_unlock(&q->mu);
    madvise(ring + cut, touched - cut, MADV_DONTNEED);
    pthread_mutex_lock(&q->mu);
    q->trimming = 0;
    r->reached = r->reached < cut ? r->reached : cut;
    q->warm = q->warm < cut ? q->warm : cut;
    q->trimmed++;
    pthread_cond_broadcast(&q->warmed);
}

void msp_queue_trim_idle(struct msp_queue *q)
{
    struct msp_ring_mapping old = {NULL, 0};
    pthread_mutex_lock(&q->mu);
    int quiet = !q->used && q->load.bytes == 0;
    q->quiet_trims = quiet ? q->quiet_trims + 1 : 0;
    if (quiet && (!q->keep || (q->keep_trims && q->quiet_trims > q->keep_trims))) {
        old = ring_resize(q, 0);
        q->warm_budget = 0; /* idle too long: no warming until the next config change */
    } else if (q->ring.base && q->keep && q->keep_trims) {
        fit_to_need(q);
    }
    q->used = 0;
    pthread_mutex_unlock(&q->mu);
    msp_ring_unmap(old);
}
