/* The lifecycle's process-wide state, read by the hooks and the lifecycle
 * (a mechanism is handed what it needs). One instance per address space
 * (g_msp, state.c); a forked child resets it and attaches again on its own
 * first hook call. */
#ifndef MSP_STATE_H
#define MSP_STATE_H

#include <pthread.h>
#include <stdint.h>

#include "models.h"
#include "msprobe_atb/control.h"
#include "queue.h"
#include "selcache.h"
#include "slot.h"

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
    /* per op id below MSP_MODEL_OP_IDS, the verdicts on that top-level op
     * (MSP_TOP_*, answers.h; a larger one: tops, own_filtered). With
     * own_filtered, MSP_TOP_OWN and MSP_TOP_KNOWN are set at the op's first
     * setup under this snapshot, by whichever thread sets it up (atomics). */
    uint8_t top_verdicts[MSP_MODEL_OP_IDS];
    /* The filters can exclude a top-level op's own directory, and its runner's
     * own saves need nothing else (not the overflow task, which names kernels
     * by their dirs, not the flight recorder, not exec_range "next", which
     * follows each execute by its top-level dir): IsTensorNeedSave decides per
     * op (msp_top_op_selected). Else every op is MSP_TOP_OWN. */
    int own_filtered;
    /* IsSaveTensorInSpecificDir's verdicts on op paths, those of this
     * snapshot under sel_epoch (NULL or 0: not cached) */
    struct msp_selcache *sel;
    uint32_t sel_epoch;
    /* the op's verdict is all IsSaveTensorInSpecificDir asks (no device
     * filter, no exec_range "next", not the overflow task) */
    int sel_plain;
    struct msp_config cfg;
};

enum { MSP_ATTACH_NONE = 0, MSP_ATTACH_BUSY = 1, MSP_ATTACH_DONE = 2 };

struct msp_state {
    int attach_state;          /* MSP_ATTACH_*, atomic */
    int active;                /* config path set and the block usable */
    pthread_mutex_t attach_mu;

    int host_abi;              /* 0/1, -1 unknown */
    char out[MSP_PATH_LEN];    /* absolute output root */
    char dump_root[MSP_PATH_LEN]; /* <out>/atb_dump_data */
    char config[MSP_PATH_LEN];
    char python[MSP_PATH_LEN];
    int nwriters;

    /* the block, our slot in it and who we are: slot.h (msp_slot); the
     * record log's fd: record.h; data/: writer.h */

    struct msp_snap *snap;     /* atomic; NULL until attached */
    pthread_mutex_t snap_mu;
    uint64_t deciding;         /* atomic: odd while a refresh decides whether an edit is
                                  held and publishes it (snapshot.h) */
    int awake_seen;

    struct msp_queue q;
    int closing;               /* atomic: exit drain started */
    uint64_t overflow_events;  /* atomic */
};

extern struct msp_state g_msp;

/* The full fence of g_msp.deciding's handshake (snapshot.c). TSan models no fence
 * (it warns); every word of the handshake is atomic, so it sees no race without. */
#if defined(__SANITIZE_THREAD__)
#define MSP_DECIDING_FENCE() ((void)0)
#else
#define MSP_DECIDING_FENCE() __atomic_thread_fence(__ATOMIC_SEQ_CST)
#endif
/* The shim build's ABI, defined by the adapter (0 or 1). */
extern const int msp_build_abi;

#endif
