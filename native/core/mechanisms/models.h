/* The models a process runs (atb_speed::Model, by the name it reports to
 * SpeedProbe): how many executions each has begun and finished issuing, and
 * which top-level ops belong to it (the topology's node names carry no op
 * ids, so ops are mapped by the thread that runs them). `status` shows them as each
 * model's current round. exec_range "next" is made concrete here, per process: the
 * rounds of a model start at the first execution of it seen to begin after the edit
 * (docs/contracts.md §3.2). Lock-free reads, no allocation; a model is added under a
 * mutex the first time its name is seen. An op noted by one thread is left
 * quiet for the others until that thread reports (ATB-Models sets up an op on
 * one thread), so it is that thread's execution that maps it. */
#ifndef MSP_MODELS_H
#define MSP_MODELS_H

#include <stddef.h>
#include <stdint.h>

#include "msprobe_atb/control.h"
#include "opcount.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Top-level op ids mapped to their model; a larger id is of no known model. */
#define MSP_MODEL_OP_IDS 4096
/* msp_op_models.of of an op of no known model noted by a thread that has not
 * reported its execution's end since (its mapping is pending). */
#define MSP_OP_PENDING 0xFF

/* Written by the models, read inline by IsTensorNeedSave's fast path. */
struct msp_op_models {
    /* Per `of` value: 1 while a setup of such an op needs no note, so
     * IsTensorNeedSave need not call: its model's execution under way began
     * seen (the note would begin nothing), or (MSP_OP_PENDING) it was noted.
     * Set by msp_models_note_setup outside exec_range "next"; cleared at the
     * model's execution's end and for every new config (msp_models_quiet_reset). */
    uint8_t quiet[256];
    /* Per top-level op id: its model's index + 1, MSP_OP_PENDING, or 0 (none known). */
    uint8_t of[MSP_MODEL_OP_IDS];
};
extern struct msp_op_models msp_op_models MSP_HIDDEN;

/* Does a setup of top-level op `id` (< MSP_MODEL_OP_IDS) need no note? */
static inline int msp_models_setup_quiet(uint64_t id)
{
    uint8_t m = __atomic_load_n(&msp_op_models.of[id], __ATOMIC_RELAXED);
    return __atomic_load_n(&msp_op_models.quiet[m], __ATOMIC_RELAXED);
}

struct msp_config;

/* Top-level op `top` (ids of one element: ATB asks IsTensorNeedSave at its every
 * Setup) is being set up, under the config the (awake) hooks answer from.
 * Called from IsTensorNeedSave's slow path, which runs only while awake (asleep
 * the hook stays one compare and a branch), at a setup whose op is not quiet
 * (msp_models_setup_quiet: the note would do nothing). The first of
 * an execution of a known model begins that execution; an op of no known
 * model is remembered by the thread. Asleep, executions are
 * counted at their end only: the proc flag MSP_PROC_MODELS_EXACT is set from
 * the first op set up awake, and cleared when the process goes back to sleep.
 * Under exec_range "next", an op set up by a thread that set up nothing since its
 * last execution ended begins an execution after the edit (opcount.h): its model's
 * rounds start there, or (a model not known yet) the op is selected until its
 * model is known at that execution's end. `dirs`: the op's directories are built
 * (IsSaveTensorDesc will say yes): then, in an execution "next" dumps, the op is
 * open until its execute asked its own directory (msp_models_dir_asked). */
void msp_models_note_setup(const struct msp_config *cfg, int64_t top, int dirs);
/* exec_range "next": top-level op `top`'s own directory was asked (IsSaveTensorInSpecificDir,
 * which ATB asks three times in each execute of a top-level runner, the last after
 * every save of its children and kernels). */
void msp_models_dir_asked(int64_t top);
/* Top-level op `top` is being set up (before the config is followed): if it began
 * its model's execution under way and its thread set up other runners since, that
 * execution failed before reporting its end; it is counted as ended (executed =
 * started), so it holds no edit, and this setup begins the next. ATB-Models sets up
 * each node once an execution. */
void msp_models_restarted(int64_t top);
/* The process went back to sleep: beginnings are no longer seen. */
void msp_models_asleep(void);
/* A new config: every setup notes again until it leaves its op quiet (its
 * note sees the new config: exec_range "next", beginnings seen again). */
void msp_models_quiet_reset(void);

/* IsReportModelTopoInfo(name), once per Model::Execute after every node was
 * issued: an execution of the model finished issuing; the top-level ops this
 * thread set up since its last report ([lo, hi]), of no known model, are this model's.
 * cfg: the config the hooks answer from, NULL while they answer asleep. */
void msp_models_executed(const struct msp_config *cfg, const char *name, size_t n);
/* exec_range "next" (cfg->next_request): is round `round` of top-level op `top`
 * selected? 1 or 0; -1 while the process knows no model (the config's ranges, its
 * first N rounds, decide: a host without ATB-Models, or the first executions of a
 * process started under "next"). */
int msp_models_next_selected(const struct msp_config *cfg, int64_t top, uint64_t round);
/* IsExecuteCountInRange's share: may a runner of execute count `count` be selected? */
int msp_models_next_count(const struct msp_config *cfg, uint64_t count);
/* Is an execution the config dumps under way: a model's round it selects (its exec
 * ranges, or the rounds fixed for its exec_range "next" request), or, under "next",
 * ops of a model not known yet picked for it, or ops of such an execution whose end
 * was reported before they ran (ATB's async execute) still open? The config it began
 * under then stays in force until it ends (snapshot.c), so it is dumped whole. */
int msp_models_holding(const struct msp_config *cfg);
/* A number that moves while executions make progress: begun, ended, or their ops
 * asking their directories under exec_range "next" (msp_models_dir_asked). */
uint64_t msp_models_progress(void);
/* Ends every execution that holds cfg (msp_models_holding), as if its end had been
 * reported, and tells `cut` its model and round: the monitor's, for executions that
 * called no hook for long (hold.c). Ops picked for a model not known yet are not cut. */
void msp_models_cut(const struct msp_config *cfg, void (*cut)(const char *model, uint64_t round));
/* The models whose rounds were fixed since the last call, as "M round R, N rounds
 * S-T" in out; 1 if any. Called by one thread at a time (the monitor's duties). */
int msp_models_next_news(const struct msp_config *cfg, char *out, size_t cap);
/* Writes every model into a fresh proc slot (after a re-attach). */
void msp_models_to_slot(struct msp_proc *p);
/* Forgets everything (a forked child counts its own executions). */
void msp_models_reset(void);

#ifdef __cplusplus
}
#endif

#endif
