/* The flight recorder's triggers the shim evaluates, on a tensor's
 * statistics, and the triggers' names (rectrigger.h). */
#define _GNU_SOURCE
#include "rectrigger.h"

#include <math.h>
#include <string.h>

#include "filter.h"

const char *msp_trigger_name(uint32_t kind)
{
    switch (kind) {
    case MSP_TRIG_NAN: return "nan";
    case MSP_TRIG_INF: return "inf";
    case MSP_TRIG_OVERFLOW: return "overflow";
    case MSP_TRIG_ABS_MAX: return "abs_max_over";
    case MSP_TRIG_GROWTH: return "growth_over";
    case MSP_TRIG_GOLDEN: return "golden";
    default: return "manual";
    }
}

/* Which of nan, inf and abs_max_over the statistics fire, with its value;
 * 0 if none. */
static uint32_t fired(const struct msp_config *c, const struct msp_stats *st, double *value)
{
    if ((c->rec_triggers & MSP_TRIG_NAN) && st->nan) {
        *value = NAN;
        return MSP_TRIG_NAN;
    }
    if ((c->rec_triggers & MSP_TRIG_INF) && (st->pinf || st->ninf)) {
        *value = st->pinf ? INFINITY : -INFINITY;
        return MSP_TRIG_INF;
    }
    if (!(c->rec_triggers & MSP_TRIG_ABS_MAX) || !st->has_minmax)
        return 0;
    double hi, lo;
    switch (st->kind) {
    case MSP_STATS_FLOAT: hi = st->max, lo = st->min; break;
    case MSP_STATS_INT: hi = (double)st->imax, lo = (double)st->imin; break;
    case MSP_STATS_UINT: hi = (double)st->umax, lo = (double)st->umin; break;
    default: return 0;
    }
    double m = fabs(hi) > fabs(lo) ? fabs(hi) : fabs(lo);
    if (m > c->rec_abs_max) {
        *value = m;
        return MSP_TRIG_ABS_MAX;
    }
    return 0;
}

/* The overflow trigger: an output holding NaN/Inf that ATB's scan misses
 * (overflow_finding.h) fires it too, as the probe's find. */
static uint32_t overflow_missed(const struct msp_config *c, const struct msp_item *it,
                                const struct msp_stats *st, double *value,
                                enum msp_ovf_finding *finding)
{
    if (!(c->rec_triggers & MSP_TRIG_OVERFLOW) || !(st->nan || st->pinf || st->ninf) ||
        !msp_after_output_dir(it->path, it->pathn))
        return 0;
    *finding = msp_ovf_classify(it->dtype, it->data, it->size);
    if (*finding == MSP_OVF_NONE)
        return 0;
    *value = *finding == MSP_OVF_NAN         ? NAN
             : *finding == MSP_OVF_BF16_NINF ? -INFINITY
                                             : INFINITY;
    return MSP_TRIG_OVERFLOW;
}

uint32_t msp_trigger_fired(const struct msp_config *c, const struct msp_item *it,
                           const struct msp_stats *st, double *value,
                           enum msp_ovf_finding *finding)
{
    uint32_t kind = fired(c, st, value);
    return kind ? kind : overflow_missed(c, it, st, value, finding);
}
