/* The flight recorder's triggers the shim evaluates (recorder.h): the one a
 * tensor's statistics fire under the config (nan, inf, abs_max_over, and an
 * output holding NaN/Inf that ATB's overflow scan misses), and each
 * trigger's name in an incident. */
#ifndef MSP_RECTRIGGER_H
#define MSP_RECTRIGGER_H

#include <stdint.h>

#include "msprobe_atb/control.h"
#include "overflow_finding.h"
#include "queue.h"
#include "stats.h"

/* A trigger's name (MSP_TRIG_*), as incidents and the log say it. */
const char *msp_trigger_name(uint32_t kind);

/* Which shim-side trigger of c the tensor item it fires, from its
 * statistics st, with the value that fired it; 0 if none. The overflow
 * trigger reads the payload too, and says in *finding what it found
 * (left alone for the others). */
uint32_t msp_trigger_fired(const struct msp_config *c, const struct msp_item *it,
                           const struct msp_stats *st, double *value,
                           enum msp_ovf_finding *finding);

#endif
