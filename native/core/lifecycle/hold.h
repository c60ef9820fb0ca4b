/* An execution that holds an edit (snapshot.c: held) but calls no hook for long is
 * let go of: a failed execution that never reports its end, on a service that then
 * runs nothing, would hold the edit forever. */
#ifndef MSP_HOLD_H
#define MSP_HOLD_H

/* The monitor's duty (every 250 ms): while an edit is held and the executions make
 * no progress (models.h: msp_models_progress, and the runner setups counted) for
 * MSPROBE_ATB_HOLD_IDLE_MS (default 5000), they are ended, each round told as cut
 * (a `cut` record, and the console), and the edit applied. */
void msp_hold_watch(void);
/* Forked child: nothing watched yet. */
void msp_hold_reset(void);

#endif
