/* Per-round counts of selected tensors without a record yet (control.h
 * struct msp_pending): counted when SaveTensor takes a tensor, uncounted
 * once its record (written or lost) is in the log. What is left when the
 * process dies, or when the disk has no room for the records, is the exact
 * per-round loss the control plane reports (docs/contracts.md §4). */
#ifndef MSP_PENDING_H
#define MSP_PENDING_H

#include <stddef.h>
#include <stdint.h>

#include "msprobe_atb/control.h"
#include "record.h"
#include "rounds.h"
#include "slot.h"

/* The round key of a tensor path: its first two non-empty components
 * joined by '/', as the control plane's parse_tensor_path reads them. 0 if
 * the path has fewer than three components or the key does not fit. */
size_t msp_round_key(const char *path, size_t n, char key[MSP_ROUND_KEY_LEN]);
/* Counts n tensors of round `key` (len 0: of no round) in, or out of, the
 * slot's pending[] (pending_other where the table has no entry for it). */
void msp_pending_add(struct msp_proc *p, const char *key, size_t len);
void msp_pending_done(struct msp_proc *p, const char *key, size_t len, uint64_t n);
/* The process's rounds: which have all their records (rounds.h). */
extern struct msp_rounds msp_pending_rounds;
/* The process's record order, the `seq` of tensor, param and overflow
 * records (docs/contracts.md §4); 0 again in a forked child. Atomic. */
extern uint64_t msp_seq;
static inline uint64_t msp_seq_take(void)
{
    /* a release: what the caller did before (a tensor's pending count) is
     * seen by whoever sees a later seq taken */
    return __atomic_fetch_add(&msp_seq, 1, __ATOMIC_ACQ_REL);
}
/* Counts a tensor as selected (the slot's tensors_selected) and pending,
 * then gives it its seq, in that order (docs/contracts.md §3 pending[]):
 * once the control plane reads every count 0, every tensor that took a seq
 * before has its record in the log, and every record appended later has a
 * higher seq. `live`: the host's own selection, not one the flight recorder
 * hands over (rounds.h). Appends the round record of a round the host has
 * just left complete. */
static inline uint64_t msp_pending_select(const char *path, size_t n, int live)
{
    struct msp_proc *p = msp_proc_now();
    __atomic_fetch_add(&p->tensors_selected, 1, __ATOMIC_RELAXED);
    char key[MSP_ROUND_KEY_LEN];
    size_t len = msp_round_key(path, n, key);
    msp_pending_add(p, key, len); /* until its record is in the log */
    char done[MSP_ROUND_KEY_LEN];
    if (msp_rounds_selected(&msp_pending_rounds, key, len, live, done))
        msp_rec_round(done);
    return msp_seq_take();
}
/* n tensors of round `key` (msp_round_key; len 0: of no round) have their
 * records in the log: no longer pending; appends the round record if that
 * completes the round. */
static inline void msp_pending_recorded(const char *key, size_t len, uint64_t n)
{
    msp_pending_done(msp_proc_now(), key, len, n);
    char done[MSP_ROUND_KEY_LEN];
    if (msp_rounds_recorded(&msp_pending_rounds, key, len, n, done))
        msp_rec_round(done);
}

struct jbuf;
/* Writes the non-zero counts as a JSON object {"<key>": n, ..., "": other}
 * under `key`; returns their sum. */
uint64_t msp_pending_json(struct jbuf *b, const char *key, const struct msp_proc *p);
/* Zeroes every count (after the exit record carried them). */
void msp_pending_clear(struct msp_proc *p);

#endif
