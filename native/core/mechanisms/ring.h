/* The one ring of the shim: a byte load held against a budget, and the
 * regions of mapped memory reused lap after lap that hold it (as tracing
 * ring buffers do). What happens when the budget is full is its clients'
 * policy, as in LTTng-UST: block or drop (queue.c: the copy queue waits for
 * room or refuses the item) and overwrite (ring_overwrite.c: the flight
 * recorder evicts its oldest whole rounds). Not thread-safe: each client
 * serialises its calls under its own lock. */
#ifndef MSP_RING_H
#define MSP_RING_H

#include <stdint.h>

/* ---- the load: bytes charged against a budget ---- */

struct msp_ring_load {
    uint64_t bytes; /* charged now */
    uint64_t peak;  /* the most ever charged at once */
};

/* `cost` more bytes stay within `budget` (no overflow whatever the values). */
static inline int msp_ring_fits(const struct msp_ring_load *l, uint64_t cost, uint64_t budget)
{
    return cost <= budget && l->bytes <= budget - cost;
}

static inline void msp_ring_charge(struct msp_ring_load *l, uint64_t cost)
{
    l->bytes += cost;
    if (l->bytes > l->peak)
        l->peak = l->bytes;
}

static inline void msp_ring_refund(struct msp_ring_load *l, uint64_t cost)
{
    l->bytes -= cost;
}

/* ---- the regions: a ring of mapped memory ---- */

/* A region starts with this header; its length includes it. */
struct msp_ring_region {
    uint64_t len;  /* a multiple of MSP_RING_ALIGN */
    uint64_t busy; /* MSP_REGION_* */
};
enum { MSP_REGION_FREE, MSP_REGION_BUSY, MSP_REGION_PAD };
#define MSP_RING_ALIGN 64
#define MSP_RING_HDR MSP_RING_ALIGN
/* The ring is mapped on (transparent) huge pages where the kernel allows:
 * faults, warming and trimming go by them. */
#define MSP_RING_HUGE_PAGE (UINT64_C(2) << 20)

/* `size` bytes of private anonymous memory (NULL base: none mapped).
 * Regions are allocated at `head` and released at `tail` (running
 * offsets); one that would run past the end, or past `soft` while the
 * front has room and live regions span at most half of soft, starts at 0
 * instead (the end's bytes are a pad region).
 * An empty ring starts again at 0. */
struct msp_ring {
    unsigned char *base;
    uint64_t size, head, tail;
    uint64_t soft;      /* where a region starts again at 0 if the front has room */
    uint64_t pads;      /* bytes of pad regions between tail and head */
    uint64_t reached;   /* furthest offset written: a region's end, or a pad's header */
    uint64_t span_peak; /* the most bytes live regions spanned since the client reset it */
};

/* A mapping to unmap once the client's lock is released. */
struct msp_ring_mapping {
    void *p;
    uint64_t n;
};

/* The ring's size for a budget: mmap maps whole pages. */
uint64_t msp_ring_size_for(uint64_t budget);
/* Empties the ring and maps `size` bytes (0: none; on failure base stays
 * NULL), its soft end at `soft` (at most size). Returns the old mapping for
 * msp_ring_unmap. */
struct msp_ring_mapping msp_ring_remap(struct msp_ring *r, uint64_t size, uint64_t soft);
void msp_ring_unmap(struct msp_ring_mapping m);
/* A region of `len` bytes (MSP_RING_ALIGN multiple) at the head, or NULL if
 * the free space is too small. `may_burst`: a region that finds no room at
 * the front, or live regions spanning over half of soft, may run on past soft
 * (which moves out past it, in whole huge pages): a burst may use the whole
 * ring. */
struct msp_ring_region *msp_ring_alloc(struct msp_ring *r, uint64_t len, int may_burst);
/* Releases a region; the tail moves over every released region and pad in
 * front of it. */
void msp_ring_free(struct msp_ring *r, struct msp_ring_region *g);
/* Releases a region and leaves the tail where it is: several released so,
 * one msp_ring_advance then moves the tail over them all. */
static inline void msp_ring_mark_free(struct msp_ring_region *g)
{
    g->busy = MSP_REGION_FREE;
}
/* Moves the tail over every released region and pad in front of it. */
void msp_ring_advance(struct msp_ring *r);
/* Releases the first `front` bytes of region g (an MSP_RING_ALIGN multiple,
 * 0 < front < g->len - MSP_RING_HDR) and returns the rest, a region of its
 * own whose header lies in g's bytes at `front`. */
struct msp_ring_region *msp_ring_split(struct msp_ring *r, struct msp_ring_region *g,
                                       uint64_t front);
/* No region lives at or past offset `cut` and the head is below it. A live
 * span that wraps round the end is taken as not below. */
int msp_ring_below(const struct msp_ring *r, uint64_t cut);

/* The bytes live regions span now (pads excluded). */
static inline uint64_t msp_ring_span(const struct msp_ring *r)
{
    return r->head - r->tail - r->pads;
}

#endif
