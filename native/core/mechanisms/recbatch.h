/* A writer thread's records, appended to the log a batch at a time (docs/
 * contracts.md §4): one write(2) for up to MSP_RECBATCH_BYTES of records,
 * not one a record (~80k records a second per process under `task:
 * statistics`). A record joins the batch with its room claimed in
 * the log (record.h), so the batch's write cannot fail for want of space,
 * and whoever made it decides at once, as without a batch, what to do when
 * there is no room. The writer appends its batch once it is full and before
 * it waits for work, so a lone record is not held. What must wait until a
 * record is in the log runs after that write: its tensor is no longer
 * pending (pending.h), which may append its round's record after it; the
 * writer's own (the items' queue gauges, writer.c) after the flush. The
 * `after` it is given is the records' owner's (tensorrec.c), called through
 * that pointer. */
#ifndef MSP_RECBATCH_H
#define MSP_RECBATCH_H

#include <stddef.h>
#include <stdint.h>

#include "jsonw.h"

#define MSP_RECBATCH_BYTES (64u << 10)
/* A writer that never finds its list empty (behind, or starved of CPU) still
 * appends its batch this often: a record held in it holds back every row of a
 * higher seq in the control plane (its writer's head, control.h). At 1,500
 * records a second a writer took 0.8 s to fill 64 KiB. */
#define MSP_RECBATCH_HOLD_NS UINT64_C(20000000)

/* What a record is about, for what follows its append. */
struct msp_recbatch_entry {
    const char *path; /* the tensor it records (NULL: none), pending until the record
                         is in the log; the bytes must live until the batch is appended */
    size_t pathn;
    int what;         /* the caller's, for `after` */
    uint64_t bytes;   /* the caller's */
    size_t end;       /* the batch's: where the record's line ends in it */
};

/* What the caller does once n records that joined a batch were appended
 * (landed) or not (the batch's write failed): count what they describe as
 * written only now, so the slot never counts a tensor written whose record a
 * crash could still take with it (once a batch: the slot's counters are
 * shared with the host's threads). */
typedef void (*msp_recbatch_after)(const struct msp_recbatch_entry *e, size_t n, int landed);

struct msp_recbatch;

/* An empty batch. NULL if out of memory. */
struct msp_recbatch *msp_recbatch_new(msp_recbatch_after after);
/* Drops what it holds unappended: a forked child's copy of its parent's. */
void msp_recbatch_reset(struct msp_recbatch *rb);
/* Appends the record built in b (msp_rec_begin) and frees b's buffer: into
 * rb, or at once with rb NULL (a thread with no batch) or out of memory.
 * 1: it joined the batch (`after` follows its append); 0: it is in the log;
 * -1: it is not (no room: held back, or lost; said). */
int msp_recbatch_commit(struct msp_recbatch *rb, struct jbuf *b,
                        const struct msp_recbatch_entry *e);
/* 1 once it holds MSP_RECBATCH_BYTES, or its first record has waited
 * MSP_RECBATCH_HOLD_NS at now_ns (CLOCK_MONOTONIC, read by the caller: a
 * writer reads it once a run of records). */
int msp_recbatch_due(const struct msp_recbatch *rb, uint64_t now_ns);
/* The same for a batch of `len` bytes in `n` records, the first of which
 * joined at first_ns, at now_ns (CLOCK_MONOTONIC). */
static inline int msp_recbatch_due_at(size_t len, size_t n, uint64_t first_ns, uint64_t now_ns)
{
    /* now_ns may be older than first_ns: read before the first record joined */
    return len >= MSP_RECBATCH_BYTES ||
           (n && now_ns > first_ns && now_ns - first_ns >= MSP_RECBATCH_HOLD_NS);
}
/* Appends the batch with one write(2), then what waits for its records. */
void msp_recbatch_flush(struct msp_recbatch *rb);

#endif
