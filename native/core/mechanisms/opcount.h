/* Runner setups seen (UpdateConfig calls). Each thread counts in its own
 * TLS word (hot.h: msp_hot_count_op, no call, no shared cache line); the
 * words of live threads are registered here so a flush can sum them, and a
 * thread's count is folded in when it exits. */
#ifndef MSP_OPCOUNT_H
#define MSP_OPCOUNT_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define MSP_HIDDEN __attribute__((visibility("hidden")))

/* Runner setups counted by this thread, plus MSP_OPS_BASE: initial-exec TLS,
 * so counting is an add on %fs with no call (hot.h: msp_hot_count_op). */
#define MSP_OPS_BATCH 256
#define MSP_OPS_BASE (MSP_OPS_BATCH - 1)
extern __thread uint64_t msp_t_ops MSP_HIDDEN __attribute__((tls_model("initial-exec")));

/* Every MSP_OPS_BATCH setups of a thread (and its first): registers the
 * thread's counter, or hands its count over when no room is left. */
void msp_ops_tick(void) MSP_HIDDEN;
uint64_t msp_ops_total(void);
/* Marks the calling thread's count (a model's execution ended on it); unmoved is
 * 1 while the thread has set up no runner since: its next top-level op then
 * begins an execution (models.c). A thread never marked, or whose count was
 * handed over (beyond the threads summed live), is never unmoved. */
void msp_ops_mark(void);
int msp_ops_unmoved(void);
/* Forked child: only the calling thread is left, with nothing counted. */
void msp_ops_reset(void);

#ifdef __cplusplus
}
#endif

#endif
