/* The one ring: the byte ring's regions and its mapping (ring.h); the
 * block, drop and overwrite policies are its clients'. */
#define _GNU_SOURCE
#include "ring.h"

#include <sys/mman.h>
#include <unistd.h>

uint64_t msp_ring_size_for(uint64_t budget)
{
    uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);
    return budget / page * page;
}

/* Private anonymous memory, aligned to and advised for transparent huge
 * pages, so its first lap costs one fault per 2 MiB instead of one per
 * 4 KiB (the dump's largest cost once was these faults); where THP is off it
 * is plain 4 KiB pages. NULL on failure. */
static unsigned char *map_ring(uint64_t size)
{
    uint64_t span = size + MSP_RING_HUGE_PAGE;
    unsigned char *p = mmap(NULL, span, PROT_READ | PROT_WRITE,
                            MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED)
        return NULL;
    unsigned char *start = (unsigned char *)(((uintptr_t)p + MSP_RING_HUGE_PAGE - 1) &
                                             ~(uintptr_t)(MSP_RING_HUGE_PAGE - 1));
    if (start > p)
        munmap(p, (size_t)(start - p));
    if (start + size < p + span)
        munmap(start + size, (size_t)(p + span - (start + size)));
    madvise(start, size, MADV_HUGEPAGE);
    /* a forked child starts its own rings: it must not inherit this one */
    madvise(start, size, MADV_DONTFORK);
    return start;
}

struct msp_ring_mapping msp_ring_remap(struct msp_ring *r, uint64_t size, uint64_t soft)
{
    struct msp_ring_mapping old = {r->base, r->size};
    *r = (struct msp_ring){0};
    if (size == 0)
        return old;
    r->base = map_ring(size);
    if (r->base) {
        r->size = size;
        r->soft = soft < size ? soft : size;
    }
    return old;
}

void msp_ring_unmap(struct msp_ring_mapping m)
{
    if (m.p)
        munmap(m.p, m.n);
}

struct msp_ring_region *msp_ring_alloc(struct msp_ring *r, uint64_t len, int may_burst)
{
    /* one division an item: a 64-bit one takes tens of cycles, and this runs
     * under the queue's mutex */
    uint64_t at = r->head % r->size;
    uint64_t pad = at + len > r->soft ? r->size - at : 0;
    if (pad && at + len <= r->size && may_burst &&
        (r->head + pad + len - r->tail > r->size || msp_ring_span(r) > r->soft / 2)) {
        /* no room at the front, or live regions over half of it (the head,
         * started again at 0, would soon meet the tail): a burst, which may
         * take the whole ring; the soft end moves out just past it, in whole
         * huge pages, so the head starts again at 0 once the burst's front is
         * free rather than walking on through memory never touched (fresh
         * pages cost a fault and the kernel's zeroing each) */
        pad = 0;
        uint64_t end = (at + len + MSP_RING_HUGE_PAGE - 1) & ~(MSP_RING_HUGE_PAGE - 1);
        r->soft = end < r->size ? end : r->size;
    }
    if (r->head + pad + len - r->tail > r->size)
        return NULL;
    if (pad) { /* only its header is written: the tail steps over it */
        struct msp_ring_region *p = (struct msp_ring_region *)(void *)(r->base + at);
        p->len = pad;
        p->busy = MSP_REGION_PAD;
        /* where the head stood, which may be the soft end itself: its page is
         * faulted in (a huge page), and a trim gives back up to `reached` */
        if (at + MSP_RING_HDR > r->reached)
            r->reached = at + MSP_RING_HDR;
        r->pads += pad;
        r->head += pad;
        at = 0; /* a pad runs to the ring's end */
    }
    struct msp_ring_region *g = (struct msp_ring_region *)(void *)(r->base + at);
    g->len = len;
    g->busy = MSP_REGION_BUSY;
    r->head += len;
    if (at + len > r->reached)
        r->reached = at + len;
    if (msp_ring_span(r) > r->span_peak)
        r->span_peak = msp_ring_span(r);
    return g;
}

void msp_ring_advance(struct msp_ring *r)
{
    if (r->tail == r->head)
        return;
    /* no region crosses the ring's end (a pad fills it), so the tail's place
     * goes round with a compare, not a division a region */
    uint64_t at = r->tail % r->size;
    while (r->tail < r->head) {
        const struct msp_ring_region *t = (const struct msp_ring_region *)(void *)(r->base + at);
        if (t->busy == MSP_REGION_BUSY)
            break;
        r->pads -= t->busy == MSP_REGION_PAD ? t->len : 0;
        r->tail += t->len;
        at += t->len;
        at = at < r->size ? at : 0;
    }
    if (r->tail == r->head)
        r->tail = r->head = r->pads = 0;
}

void msp_ring_free(struct msp_ring *r, struct msp_ring_region *g)
{
    msp_ring_mark_free(g);
    msp_ring_advance(r);
}

struct msp_ring_region *msp_ring_split(struct msp_ring *r, struct msp_ring_region *g,
                                       uint64_t front)
{
    struct msp_ring_region *rest = (struct msp_ring_region *)(void *)((unsigned char *)g + front);
    rest->len = g->len - front;
    rest->busy = MSP_REGION_BUSY;
    g->len = front;
    msp_ring_free(r, g);
    return rest;
}

int msp_ring_below(const struct msp_ring *r, uint64_t cut)
{
    return r->tail == r->head || r->tail % r->size + (r->head - r->tail) < cut;
}
