/* Fused per-pair compare metrics (offline compare; not part of the probe).
 *
 * One pass over a chunk of golden and target elements updates every
 * accumulator the metrics need; chunks of a pair (or of its element ranges,
 * computed anywhere) merge with pk_merge. Element types are converted to
 * double exactly, and every per-element formula is the one the reference
 * numpy code evaluates in float64, so counts and maxima are bit-identical;
 * sums are accumulated in 8 lanes per block and added to the totals with
 * Neumaier compensation. */
#ifndef MSPROBE_ATB_PAIR_KERNEL_H
#define MSPROBE_ATB_PAIR_KERNEL_H

#include <stdint.h>

enum { PK_F64 = 0, PK_F32 = 1, PK_F16 = 2, PK_BF16 = 3 };

typedef struct {
    int64_t n;        /* elements seen */
    int64_t both;     /* finite on both sides */
    int64_t ok;       /* finite on both sides and |t-g| <= atol + rtol*|g| */
    int64_t same_nf;  /* non-finite on both sides with the same value (NaN/NaN, same Inf) */
    int64_t nf_diff;  /* finiteness differs, or both non-finite and different */
    int64_t g_nan, g_pinf, g_ninf, t_nan, t_pinf, t_ninf;
    double gg, tt, gt, dd;         /* sums over both-finite positions: g*g, t*t, g*t, (t-g)^2 */
    double gg_c, tt_c, gt_c, dd_c; /* their compensations */
    double max_d, max_rel;         /* max |t-g|, max |t-g| / max(|g|, floor) */
    /* msProbe's Max Relative Err: max |(t-g)/g|, a zero g and its t both raised by the
     * machine epsilon first; in float32 arithmetic when neither side is PK_F64 (numpy's
     * result type of the two and float32), else in float64 */
    double max_rel_ms;
} pk_acc;

/* Adds n elements of g (type gtype) and t (type ttype) to acc. floor: the
 * denominator floor of the relative error (atol, or 1e-30 if atol is 0).
 * Returns 0, or -1 for an unknown type code. */
int pk_accumulate(pk_acc *acc, const void *g, int gtype, const void *t, int ttype, int64_t n,
                  double rtol, double atol, double floor);

/* into += from. */
void pk_merge(pk_acc *into, const pk_acc *from);

#endif
