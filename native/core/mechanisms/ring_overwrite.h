/* The flight recorder's ring: the "overwrite" policy beside queue.c's
 * "block or discard" one (LTTng keeps the two in separate files too).
 *
 * It holds queue items (struct msp_item, payload in its own malloc) grouped
 * by round: a round is one {exec} of one top-level op, i.e. the items whose
 * paths share "{dev}_{pid}/{exec}/{id}_{Name}". Each top-level op (a scope)
 * keeps its own rounds, oldest first. Rounds are only ever evicted whole.
 * Not thread-safe: recorder.c serialises every call. */
#ifndef MSP_RING_OVERWRITE_H
#define MSP_RING_OVERWRITE_H

#include <stddef.h>
#include <stdint.h>

#include "queue.h"

#define MSP_RING_OP 160

struct msp_ring_round {
    struct msp_ring_round *prev, *next; /* every held round, oldest first */
    struct msp_ring_round *snext;       /* the scope's rounds, oldest first */
    struct msp_ring_scope *scope;
    uint64_t exec, start_ns;
    uint64_t bytes, n;
    struct msp_item *head, *tail;       /* in SaveTensor order */
};

/* Recorder modes of a scope (recorder.c). */
enum { MSP_SCOPE_HOLD = 0, MSP_SCOPE_DIRECT, MSP_SCOPE_SKIP, MSP_SCOPE_OFF };

struct msp_ring_scope {
    uint64_t hash;                      /* of "{dev}_{pid}" and "{id}_{Name}" */
    char op[MSP_RING_OP];               /* "{id}_{Name}" (cut if longer) */
    struct msp_ring_round *oldest, *newest;
    uint32_t nrounds;
    /* the recorder's state of this op */
    int mode;                           /* MSP_SCOPE_* */
    int has_cur;                        /* cur_exec is the round in progress */
    uint64_t cur_exec;
    int64_t after_left;                 /* DIRECT: after-trigger rounds still to dump */
    int64_t wait_round;                 /* >= 0: an incident waits for this round to open */
    int cur_broken;                     /* the round in progress did not fit the budget */
};

struct msp_ring {
    struct msp_ring_scope **scopes;     /* open addressing, `cap` entries, NULL = free */
    uint32_t cap, used;
    struct msp_ring_round *oldest, *newest;
    uint64_t bytes, rounds, peak;
};

/* The scope of an item path and its {exec}; NULL if the path has no
 * "{dev}_{pid}/{exec}/{op}" shape or the table cannot grow. */
struct msp_ring_scope *msp_ring_scope_of(struct msp_ring *r, const char *path, size_t n,
                                         uint64_t *exec);
/* Starts a round of `s`; NULL when out of memory. */
struct msp_ring_round *msp_ring_open(struct msp_ring *r, struct msp_ring_scope *s, uint64_t exec,
                                     uint64_t now_ns);
void msp_ring_add(struct msp_ring *r, struct msp_ring_round *rd, struct msp_item *it);
/* Frees a round and its items. Returns the number of items. */
uint64_t msp_ring_evict(struct msp_ring *r, struct msp_ring_round *rd);
/* Unlinks a round and hands back its items (a list via ->next). */
struct msp_item *msp_ring_take(struct msp_ring *r, struct msp_ring_round *rd);
/* Evicts the oldest whole rounds that are not the newest of their scope
 * until at most `budget` bytes are held. Returns the rounds evicted; *fits
 * is 0 if only rounds in progress are left and they are still too big. */
uint64_t msp_ring_fit(struct msp_ring *r, uint64_t budget, int *fits);
/* Drops every round (a disarming edit, a new arming). Returns the items freed. */
uint64_t msp_ring_clear(struct msp_ring *r);
/* Calls fn on every scope. */
void msp_ring_each(struct msp_ring *r, void (*fn)(struct msp_ring_scope *, void *), void *arg);

/* An item with its payload in its own malloc (the queue releases it so). */
int msp_ring_item_alloc(uint64_t meta, uint64_t payload, struct msp_item **out);
void msp_ring_item_free(struct msp_item *it);

#endif
