/* Overflows that real ATB's scan misses, found in a tensor's real dtype.
 * ATB's scan (OpsRunner::JudgeOverflowTensor) reads fp16 and bf16 outputs
 * as fp16 and reports an Inf, fp32 an Inf, nothing else: it never reports
 * NaN, misses bf16 +-Inf (an fp16 NaN to it) and reports a finite bf16
 * +-2^121 (an fp16 Inf to it). docs/contracts.md §7 and the README. */
#ifndef MSP_OVERFLOW_FINDING_H
#define MSP_OVERFLOW_FINDING_H

#include <stdint.h>

/* What the probe found in an output that ATB's scan does not report. */
enum msp_ovf_finding {
    MSP_OVF_NONE = 0,        /* no NaN/Inf, or ATB's scan reports the tensor */
    MSP_OVF_NAN,             /* NaN */
    MSP_OVF_BF16_PINF,       /* bf16 +Inf */
    MSP_OVF_BF16_NINF,       /* bf16 -Inf */
    MSP_OVF_UNSCANNED_INF,   /* Inf in a dtype ATB does not scan (float64) */
};

/* Does the tensor hold NaN or Inf in its real dtype (fp16, bf16, fp32,
 * fp64; other dtypes never)? A word at a time, no early exit: the hook's
 * cost for a clean tensor. */
int msp_ovf_nonfinite(int dtype, const void *data, uint64_t size);

/* The finding in a tensor that holds NaN or Inf (msp_ovf_nonfinite), or
 * MSP_OVF_NONE when ATB's scan reports it too. An Inf comes before NaN. */
enum msp_ovf_finding msp_ovf_classify(int dtype, const void *data, uint64_t size);

/* The finding's name in records ("nan", "bf16_pinf", ...). */
const char *msp_ovf_finding_name(enum msp_ovf_finding f);

#endif
