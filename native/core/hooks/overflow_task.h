/* The overflow task on the hooks' side: the event in progress on this
 * thread (the kernel ATB reported, waiting for its `after` save; the kernel
 * dir whose outputs belong to the event), the `overflow` records of events
 * ATB reports or the probe finds, and the `overflow_output` records of an
 * event's outputs. The answerers read the state inline (hooks.c), so a
 * predicate costs what it cost when it lived beside them. */
#ifndef MSP_OVERFLOW_TASK_H
#define MSP_OVERFLOW_TASK_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "msprobe_atb/control.h"

#include "snapshot.h"
#include "state.h"

/* This thread's event: the kernel ATB reported, waiting for its `after`
 * save, and its event's seq; the kernel dir whose `after` outputs belong to
 * event msp_t_ovf_event_seq: the one ATB reported, once ATB asked for its
 * dir, or the one the probe found. Apart, not one struct: an answerer reads
 * one of them with one load of its offset, as when they were its file's. */
extern __thread char msp_t_ovf_pending[512];
extern __thread size_t msp_t_ovf_pending_n;
extern __thread uint64_t msp_t_ovf_pending_seq;
extern __thread char msp_t_ovf_event_dir[512];
extern __thread size_t msp_t_ovf_event_dirn;
extern __thread uint64_t msp_t_ovf_event_seq;

static inline int msp_ovf_task(const struct msp_snap *s)
{
    return (s->cfg.task & MSP_TASK_OVERFLOW) != 0;
}

/* Fewer than overflow_nums events so far. */
static inline int msp_ovf_events_left(const struct msp_snap *s)
{
    int64_t limit = s->cfg.overflow_nums;
    return limit < 0 || __atomic_load_n(&g_msp.overflow_events, __ATOMIC_RELAXED) < (uint64_t)limit;
}

/* The probe scans every kernel's outputs (overflow_check.probe_scan). */
static inline int msp_ovf_probe_scans(const struct msp_snap *s)
{
    return s->cfg.overflow_scan && msp_ovf_events_left(s);
}

static inline void msp_ovf_event_dir(const char *dir, size_t n, uint64_t seq)
{
    msp_t_ovf_event_dirn = 0;
    if (n < sizeof msp_t_ovf_event_dir) {
        memcpy(msp_t_ovf_event_dir, dir, n);
        msp_t_ovf_event_dirn = n;
        msp_t_ovf_event_seq = seq;
    }
}

/* ATB's ReportOverflowKernel under the overflow task: an `overflow` record
 * if the event is within overflow_nums, and the kernel waits for its
 * `after` save. */
void msp_ovf_reported(const struct msp_snap *s, const char *kernel, size_t n);

/* A tensor ATB saves under the overflow task, before it is saved: the
 * tensors of an event's kernel are saved, and each output of ATB's report
 * says what it holds in its real dtype (an `overflow_output` record: a bf16
 * output ATB read as an fp16 Inf may be finite). While the probe scans, ATB
 * saves every kernel: any other output is read, and one holding NaN/Inf
 * that ATB's scan misses is the probe's event; otherwise ATB saves only what
 * the predicates selected. 1 if the tensor is to be saved. */
int msp_ovf_on_save(const struct msp_snap *s, const char *dtype, size_t dtypen, const void *host,
                    uint64_t size, const char *path, size_t pathn);

#endif
