/* A sliding extremum: the least (or greatest) value of a stream of (position,
 * value) pairs whose positions are still in a window that moves forward, kept
 * as a small monotone queue, so a step costs a few compares and no memory. The
 * queue (writer heads: the lowest seq of a writer's list) and the ring (the
 * most it needed over the last MSPROBE_ATB_RING_IDLE_S) keep one each.
 *
 * Entries are kept in position order with values strictly improving towards
 * the back's worse ones (min: increasing), each better than every newer one it
 * has outlived. When all MSP_WINDOW_CAP are taken the newest stands for newer
 * ones too: its value, kept until the newest of their positions leaves. So the
 * answer may lag (a min lower, a max higher than the true one), never lead. */
#ifndef MSP_WINDOW_H
#define MSP_WINDOW_H

#include <stdint.h>

#define MSP_WINDOW_CAP 8

struct msp_window {
    int n;
    struct {
        uint64_t at, v;
    } e[MSP_WINDOW_CAP];
};

/* Adds value v at position at (at least every position added before): the
 * least values are kept with `min`, the greatest without. */
void msp_window_add(struct msp_window *w, uint64_t at, uint64_t v, int min);
/* The window now starts at position `from`: entries before it leave. */
void msp_window_drop(struct msp_window *w, uint64_t from);
/* The extremum of the pairs in the window, `none` if there are none. */
static inline uint64_t msp_window_get(const struct msp_window *w, uint64_t none)
{
    return w->n ? w->e[0].v : none;
}

#endif
