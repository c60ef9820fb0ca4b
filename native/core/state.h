/* The probe's process-wide state, shared by the core's modules. One
 * instance per address space (g_msp); a forked child resets it and
 * attaches again on its own first hook call. */
#ifndef MSP_STATE_H
#define MSP_STATE_H

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>

#include "msprobe_atb/control.h"
#include "queue.h"
#include "rounds.h"

/* A copy of the published config plus what the hot path derives from it.
 * Snapshots are never freed (see snapshot.c). */
struct msp_snap {
    const struct msp_control *ctl; /* the block it was read from: a re-created
                                      block restarts its generations */
    uint64_t generation;
    int awake;
    /* The top-level ops the filters can select (msp_top_ids), -1: any. Only
     * where a top-level op they exclude needs no dump directory (neither the
     * overflow task nor the flight recorder, which name kernels by it). */
    int n_tops;
    int64_t tops[MSP_MAX_IDS];
    struct msp_config cfg;
};

enum { MSP_ATTACH_NONE = 0, MSP_ATTACH_BUSY = 1, MSP_ATTACH_DONE = 2 };

struct msp_state {
    int attach_state;          /* MSP_ATTACH_*, atomic */
    int active;                /* config path set and the block usable */
    pthread_mutex_t attach_mu;

    uint64_t pid, start_ns;
    int host_abi;              /* 0/1, -1 unknown */
    char out[MSP_PATH_LEN];    /* absolute output root */
    char dump_root[MSP_PATH_LEN]; /* <out>/atb_dump_data */
    char config[MSP_PATH_LEN];
    char python[MSP_PATH_LEN];
    int nwriters;

    /* ctl and proc are swapped (atomically) by a re-attach after the dump
     * root was removed; read them with msp_ctl_now()/msp_proc_now(). */
    struct msp_control *ctl;
    struct msp_proc *proc;     /* our slot, or a private dummy if the table is full */
    struct msp_proc dummy_proc;
    int slot;

    int rec_fd;                /* record log */
    int data_fd;               /* <dump_root>/data, opened at the first wake; atomic */
    unsigned tree_epoch;       /* atomic: bumped when data_fd names a new data/ tree */

    struct msp_snap *snap;     /* atomic; NULL until attached */
    pthread_mutex_t snap_mu;
    int awake_seen;

    struct msp_queue q;
    int closing;               /* atomic: exit drain started */
    uint64_t seq;              /* atomic: per-process SaveTensor/SaveParam order */
    uint64_t overflow_events;  /* atomic */
    struct msp_rounds rounds;  /* which rounds have all their records (rounds.h) */
};

extern struct msp_state g_msp;
/* The shim build's ABI, defined by the adapter (0 or 1). */
extern const int msp_build_abi;

static inline struct msp_control *msp_ctl_now(void)
{
    return __atomic_load_n(&g_msp.ctl, __ATOMIC_ACQUIRE);
}

static inline struct msp_proc *msp_proc_now(void)
{
    return __atomic_load_n(&g_msp.proc, __ATOMIC_ACQUIRE);
}

/* "pid N, device D" ("pid N" while the device is unknown): which process of a
 * service a console line comes from. */
static inline void msp_who(char *buf, size_t cap)
{
    int64_t dev = __atomic_load_n(&msp_proc_now()->device, __ATOMIC_RELAXED);
    if (dev >= 0)
        snprintf(buf, cap, "pid %llu, device %lld", (unsigned long long)g_msp.pid,
                 (long long)dev);
    else
        snprintf(buf, cap, "pid %llu", (unsigned long long)g_msp.pid);
}

/* Relaxed counter bump on our proc slot (several threads of this process). */
#define MSP_COUNT(field, v) \
    __atomic_fetch_add(&msp_proc_now()->field, (uint64_t)(v), __ATOMIC_RELAXED)
#define MSP_UNCOUNT(field, v) \
    __atomic_fetch_sub(&msp_proc_now()->field, (uint64_t)(v), __ATOMIC_RELAXED)

#endif
