/*
 * msprobe-atb control block: the one channel from the control plane (Python
 * daemon) to the shim (native probe in every ATB process).
 *
 * This header is the single source of truth for the layout. It is compiled
 * into the shim and fed verbatim to cffi (msprobe_atb/control/_build.py), so
 * it must stay in the subset cffi parses: integer #defines, plain structs
 * with fixed-size arrays, and function prototypes. No other preprocessor
 * logic except the include guard and the stdint include, which the cffi
 * build strips.
 *
 * The block lives in <dump_root>/.probe/control.block (dump_root is
 * <ATB_OUTPUT_DIR>/atb_dump_data) and is mmap'd MAP_SHARED by every party.
 * Concurrency rules (all accesses go through native/core/mechanisms/control.c):
 *   - `config` is written only by the daemon, under the seqlock
 *     `generation` (odd while a publish is in progress).
 *   - each `procs[i]` slot is claimed by one shim with a CAS on `pid` and
 *     its counters are written only by that process, with relaxed atomic
 *     stores; readers use relaxed atomic loads per field. `built` alone is
 *     written by the daemon.
 *   - `daemon_pid`, `published`, `error_seq`, `stop_requested` are single
 *     words accessed atomically.
 * See docs/contracts.md for the semantics of every field.
 */
#ifndef MSPROBE_ATB_CONTROL_H
#define MSPROBE_ATB_CONTROL_H

#include <stdint.h>

#define MSP_CTL_MAGIC 0x4c54434250534d31
#define MSP_CTL_VERSION 12

#define MSP_MAX_RANGES 32
#define MSP_MAX_IDS 128
#define MSP_ID_LEN 64
#define MSP_MAX_OP_NAMES 64
#define MSP_OP_NAME_LEN 128
#define MSP_MAX_DEVICES 64
#define MSP_MAX_PROCS 256
#define MSP_PATH_LEN 4096
#define MSP_ERROR_LEN 2048
#define MSP_REC_MAX_INCIDENTS 64
#define MSP_REC_PATH_LEN 1024
#define MSP_PENDING_ROUNDS 16
#define MSP_ROUND_KEY_LEN 40
#define MSP_MAX_MODELS 8
#define MSP_MODEL_NAME_LEN 128
#define MSP_MAX_WRITERS 32
#define MSP_HEAD_IDLE 0xffffffffffffffff /* writer_head[] of a writer with nothing */

/* config.state */
#define MSP_STATE_ASLEEP 0
#define MSP_STATE_AWAKE 1

/* config.task: bit set */
#define MSP_TASK_TENSOR 1
#define MSP_TASK_STATISTICS 2
#define MSP_TASK_OVERFLOW 4

/* config.exec_mode */
#define MSP_EXEC_NONE 0
#define MSP_EXEC_ALL 1
#define MSP_EXEC_RANGES 2

/* config.queue_policy */
#define MSP_POLICY_BLOCK 0
#define MSP_POLICY_DROP 1

/* config.overflow_mode */
#define MSP_OVERFLOW_ALL 0
#define MSP_OVERFLOW_INF 1
#define MSP_OVERFLOW_NAN 2

/* proc.flags */
#define MSP_PROC_AWAKE_SEEN 1
#define MSP_PROC_ABI_MISMATCH 2
#define MSP_PROC_EXITED 4
#define MSP_PROC_BAD_BLOCK 8
#define MSP_PROC_REC_TOO_SMALL 16  /* a round did not fit in recorder.budget_mb */
#define MSP_PROC_REC_EXIT_DROP 32  /* exited while armed: its ring was dropped */
#define MSP_PROC_MODELS_EXACT 64   /* awake: models[].started counts the executions begun */

/* config.rec_triggers bits; also the incident kinds (one bit each) */
#define MSP_TRIG_NAN 1
#define MSP_TRIG_INF 2
#define MSP_TRIG_OVERFLOW 4
#define MSP_TRIG_ABS_MAX 8
#define MSP_TRIG_GROWTH 16   /* evaluated by the control plane */
#define MSP_TRIG_GOLDEN 32   /* evaluated by the control plane */
#define MSP_TRIG_MANUAL 64   /* `msprobe-atb trigger DIR` */

/* proc.rec_state */
#define MSP_REC_OFF 0        /* no recorder in the config */
#define MSP_REC_ARMED 1      /* holding rounds in memory, writing nothing */
#define MSP_REC_FLUSHING 2   /* an incident is being written (ring + after_rounds) */
#define MSP_REC_DONE 3       /* max_incidents reached: disarmed, dumping nothing */

struct msp_range {
    uint64_t lo; /* inclusive */
    uint64_t hi; /* inclusive */
};

/* The compiled config, as validated by the control plane. Strings are
 * NUL-terminated; lists are already trimmed and free of empty entries. */
struct msp_config {
    uint32_t state;        /* MSP_STATE_* */
    uint32_t task;         /* MSP_TASK_* bits; tensor=1, statistics=2, all=3 */
    uint32_t exec_mode;    /* MSP_EXEC_* */
    uint32_t n_ranges;
    struct msp_range ranges[MSP_MAX_RANGES];
    uint32_t save_child;   /* 0/1 */
    uint32_t filter_level; /* 0, 1, 2 */
    uint32_t n_ids;
    uint32_t n_op_names;
    char ids[MSP_MAX_IDS][MSP_ID_LEN];              /* "2", "2_1", "2_1_0" */
    char op_names[MSP_MAX_OP_NAMES][MSP_OP_NAME_LEN]; /* lower-case prefixes */
    uint32_t n_devices;    /* 0 = every device */
    uint32_t overflow_mode; /* MSP_OVERFLOW_*; used with MSP_TASK_OVERFLOW */
    int32_t devices[MSP_MAX_DEVICES];
    int64_t overflow_nums; /* stop checking after N events; -1 = no limit */
    uint64_t queue_budget_bytes; /* byte budget of the shim's copy queue */
    uint32_t queue_policy; /* MSP_POLICY_* when the budget is exhausted */
    uint32_t save_all_stages; /* 0: only before/intensor* and after/outtensor* (msProbe's
                                 tree); 1: also before/outtensor* and after/intensor* */
    uint32_t rec_armed;    /* 1: the recorder block is in force (awake only) */
    uint32_t rec_keep_rounds;   /* rounds kept before the trigger round, per top-level op */
    uint32_t rec_after_rounds;  /* rounds dumped directly after the trigger round */
    uint32_t rec_max_incidents; /* incidents before the recorder disarms */
    uint32_t rec_triggers;      /* MSP_TRIG_* bits */
    uint32_t rec_flush_on_exit; /* 0/1 */
    uint32_t rec_arming;        /* bumped by the daemon at each new arming: the shims drop their rings */
    uint32_t overflow_scan;     /* with MSP_TASK_OVERFLOW, 1: the probe also scans every kernel's
                                   outputs for what ATB's scan misses (layout version 12) */
    uint64_t rec_budget_bytes;  /* memory of the ring, per process */
    double rec_abs_max;         /* abs_max_over bound (MSP_TRIG_ABS_MAX) */
    uint64_t rec_incident_base; /* rec_claimed when this arming began: max_incidents counts from it */
    /* exec_range "next[:N]" (with exec_mode RANGES): the next N executions of each model
     * after this edit, fixed by each process at the first execution of each model it sees
     * begin after the publish (procs[].models[].next_*); every op of no known model is
     * selected in `ranges` (0..N-1). next_request is a new value at each such edit (0:
     * another exec_range form); a re-publish of the same edit keeps it. */
    uint64_t next_request;
    uint64_t next_count;   /* N */
};

/* One incident: claimed by whoever fired (a shim, the daemon, the trigger
 * command) with a CAS on rec_claimed, filled, then published by storing
 * `ready` = its sequence number (release). Entry of sequence k (from 1) is
 * incidents[(k - 1) % MSP_REC_MAX_INCIDENTS]. */
struct msp_incident {
    uint64_t ready;        /* == seq once complete */
    uint64_t t_ns;         /* CLOCK_REALTIME of the trigger */
    uint64_t pid;          /* process that fired; 0 = control plane or a person */
    uint64_t start_ns;
    int64_t device;        /* -1 unknown */
    int64_t round;         /* {exec} of the offending tensor, -1 unknown */
    uint32_t kind;         /* one MSP_TRIG_* bit */
    uint32_t reserved;
    double value;          /* the value that fired */
    char path[MSP_REC_PATH_LEN]; /* relative path of the offending tensor (or kernel) */
};

/* Selected tensors of one round ("{dev}_{pid}/{exec}", the first two path
 * components) that have no record in the log yet: what a kill -9 or a full
 * record log would lose. `state` holds the count (low 40 bits), a claiming
 * flag and a generation (bumped at each claim, so a CAS never mistakes a
 * reclaimed entry for the one it read). An entry with count 0 is claimed by
 * a CAS that sets the flag; its key is then written and the flag cleared.
 * The key stays fixed while the count is above 0. */
struct msp_pending {
    uint64_t state;
    char key[MSP_ROUND_KEY_LEN];
};
#define MSP_PENDING_COUNT_MASK 0xffffffffff
#define MSP_PENDING_CLAIMING 0x10000000000
#define MSP_PENDING_GEN_ONE 0x20000000000

/* One model (atb_speed::Model) a process runs, by the name it reports to
 * SpeedProbe. `started` counts its executions begun (the first top-level op of
 * one was set up), `executed` those whose ops were all issued (ATB-Models asks
 * IsReportModelTopoInfo once per Model::Execute): the model's ops run round
 * `started - 1` while started > executed; its next execution is round `started`.
 * Beginnings are seen only while the process is awake (flag MSP_PROC_MODELS_EXACT);
 * asleep, started = executed and an execution may be under way unseen.
 * The name is written before `n_models` grows past the entry (release). */
struct msp_proc_model {
    char name[MSP_MODEL_NAME_LEN];
    uint64_t started;
    uint64_t executed;
    /* exec_range "next": this process dumps rounds next_first .. next_first + N - 1 of
     * this model for config.next_request == next_request (the round of the first
     * execution it saw begin after that edit); another value: not fixed yet. next_first
     * is written before next_request (release). */
    uint64_t next_request;
    uint64_t next_first;
};

/* One attached process. Written only by that process's shim. */
struct msp_proc {
    uint64_t pid;              /* 0 = free slot; claimed by CAS */
    uint64_t start_ns;         /* CLOCK_REALTIME at attach; (pid,start_ns) names the process */
    int64_t device;            /* -1 until known */
    uint32_t abi;              /* ABI of the shim build: 0 or 1 */
    uint32_t flags;            /* MSP_PROC_* */
    uint64_t ops_seen;         /* runner setups seen (UpdateConfig calls), flushed periodically */
    uint64_t tensors_selected; /* SaveTensor calls the filters selected; each ends in exactly
                                  one of tensors_written, drops, errors (params are not
                                  counted here: a lost op_param.json is in the record log) */
    uint64_t tensors_written;  /* records of complete .bin / stub / stats-only entries */
    uint64_t bytes_written;    /* payload bytes written to .bin files */
    uint64_t queue_depth;      /* items currently queued */
    uint64_t queue_bytes;      /* memory the queued items take (queue_budget_bytes bounds it) */
    uint64_t drops;            /* selected but dropped by the drop policy */
    uint64_t errors;           /* selected but failed (disk full, bad input, ...) */
    uint64_t records;          /* lines appended to this process's record log */
    uint64_t overflow_events;  /* ReportOverflowKernel calls recorded */
    uint64_t linked;           /* of tensors_written: hard links to an identical earlier
                                  tensor (filter_level >= 1), no bytes of their own */
    uint64_t link_refused;     /* of tensors_written: data= stubs because the file system
                                  refused the hard link */
    uint64_t host_ns;          /* time the host's threads spent in the probe's hands for
                                  selected tensors (checks, copy, waiting for queue room)
                                  and at exit waiting for the drain, CLOCK_MONOTONIC ns */
    uint64_t last_activity_ns; /* CLOCK_REALTIME of the last write or record */
    uint64_t config_generation;/* last config generation this process applied */
    uint64_t rec_state;        /* MSP_REC_* */
    uint64_t rec_rounds;       /* rounds held in the ring */
    uint64_t rec_bytes;        /* bytes held in the ring */
    uint64_t rec_peak_bytes;   /* most bytes ever held */
    uint64_t rec_evicted;      /* whole rounds evicted (keep_rounds or budget), by design */
    uint64_t rec_lost;         /* tensors that could not be kept (a round over the budget, ...) */
    uint64_t rec_flushed;      /* tensors moved from the ring to the writers */
    uint64_t rec_incident;     /* last incident this process applied */
    uint64_t built;            /* written by the daemon (the one field it writes): bytes of
                                  this process's record log whose records are in the derived
                                  files; the exit drain waits for its exit record's end */
    uint64_t next_picking;     /* exec_range "next": executions begun after the edit, of a
                                  model not known yet, being dumped now (their model and
                                  round are fixed when they end) */
    uint64_t params_lost;      /* op_param.json files not written (layout version 10) */
    uint64_t params_unrecorded;/* of them, those whose own `lost` record found no room */
    uint64_t pending_other;    /* like pending[], for tensors of rounds without an entry */
    struct msp_pending pending[MSP_PENDING_ROUNDS];
    uint64_t n_models;         /* entries of models[] in use (layout version 6) */
    struct msp_proc_model models[MSP_MAX_MODELS];
    /* Writer heads (layout version 11): per writer thread, the lowest seq of the
     * items handed to it (queued, in its hands, or lent to a hook thread for a
     * direct write) whose records are not in the log yet; MSP_HEAD_IDLE when it has
     * none. Raised only after those records' write(2); an item is covered from its
     * push. docs/contracts.md §3 says what a reader may conclude. */
    uint64_t n_writers;        /* writer threads started (0 before the first wake) */
    uint64_t writer_head[MSP_MAX_WRITERS];
};

struct msp_control {
    uint64_t magic;            /* MSP_CTL_MAGIC */
    uint32_t version;          /* MSP_CTL_VERSION */
    uint32_t size;             /* sizeof(struct msp_control) */
    uint64_t generation;       /* seqlock over `config`: odd while publishing */
    uint64_t published;        /* completed publishes; 0 = the daemon never published */
    uint64_t daemon_pid;       /* pid of the daemon holding the lock, 0 if none */
    uint64_t stop_requested;   /* set by `unload`: daemon finishes once drained */
    uint64_t error_seq;        /* bumped on every new config error (0 = none yet) */
    char config_path[MSP_PATH_LEN];  /* the config file the daemon watches */
    char config_error[MSP_ERROR_LEN];/* last rejected edit, "" if the last edit was good */
    struct msp_config config;
    uint64_t rec_claimed;      /* incidents claimed so far (sequence of the latest) */
    uint64_t rec_suppressed;   /* triggers not made incidents (one already pending, or max reached) */
    uint64_t rec_eval_ns;      /* control plane: statistics published before this were evaluated */
    struct msp_incident incidents[MSP_REC_MAX_INCIDENTS];
    struct msp_proc procs[MSP_MAX_PROCS];
};

/* ---- shared operations (native/core/mechanisms/control.c) ---- */

/* Open (and with create != 0, create if missing) the block of a dump root.
 * Creation is crash-safe: a fully initialised temporary file is link()ed
 * into place, so nobody ever maps a half-initialised block.
 * Returns 0 on success, -1 on an I/O error, -2 if the file holds another
 * magic/version/size (refused). errbuf gets a message a person can act on. */
int msp_ctl_open(const char *dump_root, int create, struct msp_control **out,
                 char *errbuf, uint64_t errlen);
void msp_ctl_close(struct msp_control *ctl);

/* The verified state directory <dump_root>/.probe (made 0750 with create):
 * dump_root (already resolved, see docs/contracts.md) and .probe are opened
 * with O_NOFOLLOW, so neither may be a symlink. Returns a directory fd or -1
 * with errno and a message in errbuf. */
int msp_probe_dir_open(const char *dump_root, int create, char *errbuf, uint64_t errlen);
/* Opens (flags: O_RDWR/O_WRONLY/O_APPEND, with O_CREAT to create) one of our
 * files in the .probe fd, never following a link: a symlink, hard link, FIFO
 * or directory at that name is unlinked (never its target) and a fresh file
 * created with O_EXCL, mode 0640; *replaced (if not NULL) is then 1. Returns
 * the fd or -1 with errno. */
int msp_probe_file_open(int probe_fd, const char *name, int flags, int *replaced);

/* Seqlock: single writer (the daemon). */
void msp_ctl_publish(struct msp_control *ctl, const struct msp_config *cfg);
/* Consistent copy of the config; returns the (even) generation it read. */
uint64_t msp_ctl_read_config(const struct msp_control *ctl, struct msp_config *out);
uint64_t msp_ctl_generation(const struct msp_control *ctl);

/* Records a rejected edit (msg != "") or clears it (msg == ""). */
void msp_ctl_set_error(struct msp_control *ctl, const char *msg);
void msp_ctl_set_config_path(struct msp_control *ctl, const char *path);
void msp_ctl_set_word(uint64_t *word, uint64_t value);
uint64_t msp_ctl_get_word(const uint64_t *word);

/* Process table. claim returns the slot index or -1 when full. */
int msp_ctl_claim_proc(struct msp_control *ctl, uint64_t pid, uint64_t start_ns);
void msp_ctl_release_proc(struct msp_control *ctl, int slot);
void msp_ctl_read_proc(const struct msp_control *ctl, int slot, struct msp_proc *out);

/* Incidents. claim: takes the next sequence if fewer than `max` incidents
 * were claimed since `base` and no more than `after_seq` were claimed (the
 * caller has applied every incident so far: at most one waits queued), fills
 * its entry from `inc` and publishes it. Returns the sequence, or 0 when the
 * trigger was suppressed (counted in rec_suppressed). */
uint64_t msp_ctl_claim_incident(struct msp_control *ctl, uint64_t base, uint64_t max,
                                uint64_t after_seq, const struct msp_incident *inc);
/* Copies entry `seq` if it is complete; returns 1, else 0. */
int msp_ctl_read_incident(const struct msp_control *ctl, uint64_t seq, struct msp_incident *out);

#endif
