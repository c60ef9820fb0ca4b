/* Overflows that real ATB's scan misses (overflow_finding.h). */
#include "overflow_finding.h"

#include <string.h>

#include "dtype.h"

/* Lanes of `bits` bits in a 64-bit word: a lane's exponent field `exp` is
 * all ones (NaN or Inf) iff (lane & exp) + low carries into the lane's top
 * bit, where low is exp's lowest bit: no carry leaves the lane. */
static int any_all_ones(const unsigned char *p, uint64_t size, uint64_t exp, uint64_t low,
                        uint64_t top)
{
    uint64_t hit = 0, w;
    uint64_t i = 0;
    for (; i + 8 <= size; i += 8) {
        memcpy(&w, p + i, 8);
        hit |= ((w & exp) + low) & top;
    }
    if (i < size) { /* zero lanes never hit */
        w = 0;
        memcpy(&w, p + i, (size_t)(size - i));
        hit |= ((w & exp) + low) & top;
    }
    return hit != 0;
}

int msp_ovf_nonfinite(int dtype, const void *data, uint64_t size)
{
    const unsigned char *p = data;
    switch (dtype) {
    case MSP_DT_FLOAT16:
        return any_all_ones(p, size & ~(uint64_t)1, UINT64_C(0x7C007C007C007C00),
                            UINT64_C(0x0400040004000400), UINT64_C(0x8000800080008000));
    case MSP_DT_BF16:
        return any_all_ones(p, size & ~(uint64_t)1, UINT64_C(0x7F807F807F807F80),
                            UINT64_C(0x0080008000800080), UINT64_C(0x8000800080008000));
    case MSP_DT_FLOAT:
        return any_all_ones(p, size & ~(uint64_t)3, UINT64_C(0x7F8000007F800000),
                            UINT64_C(0x0080000000800000), UINT64_C(0x8000000080000000));
    case MSP_DT_DOUBLE:
        /* one lane a word: its top bit is the sign, so compare instead */
        for (uint64_t i = 0; i + 8 <= size; i += 8) {
            uint64_t w;
            memcpy(&w, p + i, 8);
            if ((w & UINT64_C(0x7FF0000000000000)) == UINT64_C(0x7FF0000000000000))
                return 1;
        }
        return 0;
    default:
        return 0;
    }
}

/* NaN, +Inf, -Inf and ATB's fp16 Inf (bits 0x7C00 or 0xFC00) among 16-bit
 * values whose exponent field is `exp` and mantissa `man`. */
struct half_counts {
    uint64_t nan, pinf, ninf, atb_inf;
};

static struct half_counts count_half(const unsigned char *p, uint64_t size, uint16_t exp,
                                     uint16_t man)
{
    struct half_counts c = {0, 0, 0, 0};
    for (uint64_t i = 0; i + 2 <= size; i += 2) {
        uint16_t h;
        memcpy(&h, p + i, 2);
        if ((h & 0x7FFF) == 0x7C00)
            c.atb_inf++;
        if ((h & exp) != exp)
            continue;
        if (h & man)
            c.nan++;
        else if (h & 0x8000)
            c.ninf++;
        else
            c.pinf++;
    }
    return c;
}

enum msp_ovf_finding msp_ovf_classify(int dtype, const void *data, uint64_t size)
{
    const unsigned char *p = data;
    if (dtype == MSP_DT_FLOAT16 || dtype == MSP_DT_BF16) {
        int bf16 = dtype == MSP_DT_BF16;
        struct half_counts c = bf16 ? count_half(p, size, 0x7F80, 0x007F)
                                    : count_half(p, size, 0x7C00, 0x03FF);
        if (c.atb_inf) /* ATB reads both as fp16: it reports this */
            return MSP_OVF_NONE;
        if (c.pinf || c.ninf) /* only bf16 gets here: an fp16 Inf is ATB's */
            return c.pinf ? MSP_OVF_BF16_PINF : MSP_OVF_BF16_NINF;
        return c.nan ? MSP_OVF_NAN : MSP_OVF_NONE;
    }
    if (dtype == MSP_DT_FLOAT) {
        uint64_t nan = 0;
        for (uint64_t i = 0; i + 4 <= size; i += 4) {
            uint32_t w;
            memcpy(&w, p + i, 4);
            if ((w & 0x7FFFFFFFu) == 0x7F800000u)
                return MSP_OVF_NONE; /* std::isinf: ATB reports it */
            nan += (w & 0x7F800000u) == 0x7F800000u;
        }
        return nan ? MSP_OVF_NAN : MSP_OVF_NONE;
    }
    if (dtype == MSP_DT_DOUBLE) {
        uint64_t nan = 0;
        for (uint64_t i = 0; i + 8 <= size; i += 8) {
            uint64_t w;
            memcpy(&w, p + i, 8);
            if ((w & UINT64_C(0x7FFFFFFFFFFFFFFF)) == UINT64_C(0x7FF0000000000000))
                return MSP_OVF_UNSCANNED_INF;
            nan += (w & UINT64_C(0x7FF0000000000000)) == UINT64_C(0x7FF0000000000000);
        }
        return nan ? MSP_OVF_NAN : MSP_OVF_NONE;
    }
    return MSP_OVF_NONE;
}

const char *msp_ovf_finding_name(enum msp_ovf_finding f)
{
    switch (f) {
    case MSP_OVF_NAN: return "nan";
    case MSP_OVF_BF16_PINF: return "bf16_pinf";
    case MSP_OVF_BF16_NINF: return "bf16_ninf";
    case MSP_OVF_UNSCANNED_INF: return "unscanned_inf";
    default: return "";
    }
}
