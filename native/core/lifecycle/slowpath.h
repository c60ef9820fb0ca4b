/* The hooks' slow paths: what IsTensorNeedSave, UpdateConfig and the
 * predicates of a process that has not attached call when the words of
 * hot.h cannot answer. */
#ifndef MSP_SLOWPATH_H
#define MSP_SLOWPATH_H

#include <stddef.h>
#include <stdint.h>

#include "answers.h" /* msp_bool */
#include "opcount.h" /* MSP_HIDDEN */

#ifdef __cplusplus
extern "C" {
#endif

/* Attach, or copy a config the daemon published. */
void msp_slow_refresh(void) MSP_HIDDEN;
/* IsTensorNeedSave's: msp_slow_refresh if the generation moved, and (awake) the
 * top-level op's setup counted for its model; returns the answer (a top-level op
 * named `name`: msp_hot.top_verdicts's MSP_TOP_OWN, decided here if it was not). */
msp_bool msp_slow_need_save(const int64_t *ids, size_t n, const char *name,
                            size_t namen) MSP_HIDDEN;
/* UpdateConfig's: msp_slow_refresh if the generation moved, and every MSP_OPS_BATCH ops
 * of a thread (and its first) register the thread's counter and run the
 * monitor's duties while no monitor thread exists (see monitor.h). */
void msp_slow_update(void) MSP_HIDDEN;

#ifdef __cplusplus
}
#endif

#endif
