/* Which rounds have all their records: the shim's side of the `round`
 * record (docs/contracts.md §4), which lets the control plane complete a
 * round, and let go of its rows, while the process runs on, however far the
 * writers or the control plane are behind.
 *
 * A round ("{dev}_{pid}/{exec}", pending.h's key) is complete once the host
 * has moved on to another round (rounds run one after the other) and every
 * tensor of it that was selected has its record in the log. The tracker
 * counts, per round, the selected tensors without a record, and says which
 * round just became complete; its caller then appends the round record,
 * which thereby lands after every record of that round. A round the table
 * has no room for, or one with a tensor whose record could not be written
 * (it stays counted, as in pending.h), is never announced: the control plane
 * then completes it as it did before (the process's queue empty, or its exit). */
#ifndef MSP_ROUNDS_H
#define MSP_ROUNDS_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "msprobe_atb/control.h"

/* Rounds with tensors in the writers' hands at once: the queue's depth in
 * rounds (a few, or hundreds when the writers are far behind). */
#define MSP_ROUNDS_MAX 1024

struct msp_rounds {
    pthread_mutex_t mu;
    int n;
    struct {
        char key[MSP_ROUND_KEY_LEN];
        uint64_t count; /* selected, without a record */
    } e[MSP_ROUNDS_MAX];
    char current[MSP_ROUND_KEY_LEN]; /* the round the host selects in ("" before any) */
    char untracked[MSP_ROUND_KEY_LEN]; /* a round of the host's that found the table full */
};

void msp_rounds_init(struct msp_rounds *r);
/* A tensor of round `key` (pending.h's, len bytes; 0: of no round, which
 * is not tracked) was selected; `live` for the host's own selection (it
 * moves the current round), 0 for one the flight recorder hands over later.
 * Returns 1 and fills `done` when the round the host left is complete. */
int msp_rounds_selected(struct msp_rounds *r, const char *key, size_t len, int live,
                        char done[MSP_ROUND_KEY_LEN]);
/* The records of n tensors of round `key` are in the log. Returns 1 and
 * fills `done` when that completes the round. */
int msp_rounds_recorded(struct msp_rounds *r, const char *key, size_t len, uint64_t n,
                        char done[MSP_ROUND_KEY_LEN]);

#endif
