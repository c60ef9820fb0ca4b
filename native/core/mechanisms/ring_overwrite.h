/* The flight recorder's ring: the ring's "overwrite" policy beside the copy
 * queue's "block or drop" (queue.c), both clients of the one ring (ring.h):
 * its load is charged and checked against the budget there, and when the
 * budget is full the oldest whole rounds make room.
 *
 * It holds heap items (struct msp_item, msp_item_heap_alloc) grouped
 * by round: a round is one {exec} of one top-level op, i.e. the items whose
 * paths share "{dev}_{pid}/{exec}/{id}_{Name}". Each top-level op (a scope)
 * keeps its own rounds, oldest first. Rounds are only ever evicted whole.
 * Heap items, not regions of the ring's mapping: rounds go out of the order
 * they came in (never a scope's round in progress, which may be the oldest),
 * and a flushed round's items live on in the copy queue until the writers
 * are done with them, under its lock, not the recorder's; in mapped regions
 * either would hold the tail back while the load says there is room.
 * Not thread-safe: recorder.c serialises every call. */
#ifndef MSP_RING_OVERWRITE_H
#define MSP_RING_OVERWRITE_H

#include <stddef.h>
#include <stdint.h>

#include "queue.h"
#include "ring.h"

#define MSP_OW_OP 160

struct msp_ow_round {
    struct msp_ow_round *prev, *next; /* every held round, oldest first */
    struct msp_ow_round *snext;       /* the scope's rounds, oldest first */
    struct msp_ow_scope *scope;
    uint64_t exec, start_ns;
    uint64_t bytes, n;
    struct msp_item *head, *tail;       /* in SaveTensor order */
};

/* Recorder modes of a scope (recorder.c). */
enum { MSP_SCOPE_HOLD = 0, MSP_SCOPE_DIRECT, MSP_SCOPE_SKIP, MSP_SCOPE_OFF };

struct msp_ow_scope {
    uint64_t hash;                      /* of "{dev}_{pid}" and "{id}_{Name}" */
    char op[MSP_OW_OP];               /* "{id}_{Name}" (cut if longer) */
    struct msp_ow_round *oldest, *newest;
    uint32_t nrounds;
    /* the recorder's state of this op */
    int mode;                           /* MSP_SCOPE_* */
    int has_cur;                        /* cur_exec is the round in progress */
    uint64_t cur_exec;
    int64_t after_left;                 /* DIRECT: after-trigger rounds still to dump */
    int64_t wait_round;                 /* >= 0: an incident waits for this round to open */
    int cur_broken;                     /* the round in progress did not fit the budget */
};

struct msp_ow {
    struct msp_ow_scope **scopes;     /* open addressing, `cap` entries, NULL = free */
    uint32_t cap, used;
    struct msp_ow_round *oldest, *newest;
    struct msp_ring_load load;          /* the held items' cost; its peak */
    uint64_t rounds;
};

/* The scope of an item path and its {exec}; NULL if the path has no
 * "{dev}_{pid}/{exec}/{op}" shape or the table cannot grow. */
struct msp_ow_scope *msp_ow_scope_of(struct msp_ow *r, const char *path, size_t n,
                                         uint64_t *exec);
/* Starts a round of `s`; NULL when out of memory. */
struct msp_ow_round *msp_ow_open(struct msp_ow *r, struct msp_ow_scope *s, uint64_t exec,
                                     uint64_t now_ns);
void msp_ow_add(struct msp_ow *r, struct msp_ow_round *rd, struct msp_item *it);
/* Frees a round and its items. Returns the number of items. */
uint64_t msp_ow_evict(struct msp_ow *r, struct msp_ow_round *rd);
/* Unlinks a round and hands back its items (a list via ->next). */
struct msp_item *msp_ow_take(struct msp_ow *r, struct msp_ow_round *rd);
/* Evicts the oldest whole rounds that are not the newest of their scope
 * until `cost` more bytes fit in `budget`. Returns the rounds evicted; *fits
 * is 0 if only rounds in progress are left and they are still too big. */
uint64_t msp_ow_fit(struct msp_ow *r, uint64_t cost, uint64_t budget, int *fits);
/* Drops every round (a disarming edit, a new arming). Returns the items freed. */
uint64_t msp_ow_clear(struct msp_ow *r);
/* Calls fn on every scope. */
void msp_ow_each(struct msp_ow *r, void (*fn)(struct msp_ow_scope *, void *), void *arg);

#endif
