/* Tensor statistics on the writer threads: max, min, mean, norm and the
 * NaN/Inf/zero counts of each supported dtype, and their JSON (stats.h). */
#include "stats.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "dtype.h"
#include "stats_simd.h"

/* ---- exact decoders ---- */

float msp_fp16_to_float(uint16_t h)
{
    unsigned sign = h >> 15, exp = (h >> 10) & 0x1f, man = h & 0x3ff;
    float v;
    if (exp == 0)
        v = ldexpf((float)man, -24); /* zero and subnormals: man * 2^-24, exact */
    else if (exp == 31)
        v = man ? NAN : INFINITY;
    else
        v = ldexpf((float)(man | 0x400), (int)exp - 25);
    return sign ? -v : v;
}

float msp_bf16_to_float(uint16_t h)
{
    uint32_t bits = (uint32_t)h << 16;
    float v;
    memcpy(&v, &bits, sizeof v);
    return v;
}

float msp_fp8_e4m3fn_to_float(uint8_t b)
{
    /* e4m3fn: bias 7, no infinities, S.1111.111 is NaN */
    unsigned sign = b >> 7, exp = (b >> 3) & 0xf, man = b & 7;
    float v;
    if (exp == 0xf && man == 7)
        v = NAN;
    else if (exp == 0)
        v = ldexpf((float)man, -9);
    else
        v = ldexpf((float)(man | 8), (int)exp - 10);
    return sign ? -v : v;
}

float msp_fp8_e5m2_to_float(uint8_t b)
{
    /* e5m2 is the upper byte of an IEEE half */
    return msp_fp16_to_float((uint16_t)(b << 8));
}

/* 256 KiB table, built once: the per-element decode is then one load. */
static float g_fp16[65536];
static pthread_once_t g_fp16_once = PTHREAD_ONCE_INIT;

static void build_fp16(void)
{
    for (uint32_t i = 0; i < 65536; i++)
        g_fp16[i] = msp_fp16_to_float((uint16_t)i);
}

/* ---- accumulation ---- */

static inline void acc_f(struct msp_float_acc *a, double v)
{
    a->sum += v;
    a->sumsq += v * v;
    if (v != v) {
        a->nan++;
        return;
    }
    if (v == 0)
        a->zero++;
    else if (v == INFINITY)
        a->pinf++;
    else if (v == -INFINITY)
        a->ninf++;
    if (!a->seen) {
        a->max = a->min = v;
        a->seen = 1;
    } else if (msp_stats_above(v, a->max)) {
        a->max = v;
    } else if (msp_stats_above(a->min, v)) {
        a->min = v;
    }
}

#define LOOP_FLOAT(T, DECODE)                                                                     \
    do {                                                                                          \
        const unsigned char *p_ = data;                                                           \
        for (uint64_t i_ = first; i_ < n; i_++) {                                                 \
            T raw_;                                                                               \
            memcpy(&raw_, p_ + i_ * sizeof(T), sizeof(T));                                        \
            acc_f(a, (double)(DECODE));                                                           \
        }                                                                                         \
    } while (0)

/* Integers keep exact min/max in 64 bits; sums go to double like floats. */
#define LOOP_INT(T, MAXV, MINV, TYPE64)                                                           \
    do {                                                                                          \
        const unsigned char *p_ = data;                                                           \
        for (uint64_t i_ = 0; i_ < n; i_++) {                                                     \
            T v_;                                                                                 \
            memcpy(&v_, p_ + i_ * sizeof(T), sizeof(T));                                          \
            if (acc->dtype == MSP_DT_BOOL)                                                        \
                v_ = v_ != 0;                                                                     \
            double d_ = (double)v_;                                                               \
            a->sum += d_;                                                                         \
            a->sumsq += d_ * d_;                                                                  \
            if (v_ == 0)                                                                          \
                a->zero++;                                                                        \
            if ((TYPE64)v_ > acc->MAXV)                                                           \
                acc->MAXV = (TYPE64)v_;                                                           \
            if ((TYPE64)v_ < acc->MINV)                                                           \
                acc->MINV = (TYPE64)v_;                                                           \
        }                                                                                         \
        a->seen = 1;                                                                              \
    } while (0)

static void complex64(struct msp_stats_acc *acc, const void *data, uint64_t n)
{
    const unsigned char *p = data;
    struct msp_float_acc *a = &acc->a;
    for (uint64_t i = 0; i < n; i++) {
        float z[2];
        memcpy(z, p + i * 8, 8);
        double re = z[0], im = z[1], m2 = re * re + im * im;
        acc->sre += re;
        acc->sim += im;
        a->sumsq += m2;
        if (re != re || im != im) {
            a->nan++;
            continue;
        }
        /* an element with an infinite part counts once, as +inf if any part is +inf */
        if (re == INFINITY || im == INFINITY)
            a->pinf++;
        else if (re == -INFINITY || im == -INFINITY)
            a->ninf++;
        if (re == 0 && im == 0)
            a->zero++;
        if (m2 > acc->best) {
            acc->best = m2;
            acc->cmax[0] = re;
            acc->cmax[1] = im;
        }
        if (m2 < acc->worst) {
            acc->worst = m2;
            acc->cmin[0] = re;
            acc->cmin[1] = im;
        }
        a->seen = 1;
    }
}

int msp_stats_begin(struct msp_stats_acc *acc, int dtype, uint64_t size, char *note,
                    size_t notelen)
{
    memset(acc, 0, sizeof *acc);
    const char *name = msp_dtype_name(dtype);
    switch (dtype) {
    case MSP_DT_FLOAT: case MSP_DT_FLOAT16: case MSP_DT_BF16: case MSP_DT_DOUBLE:
    case MSP_DT_INT8: case MSP_DT_INT16: case MSP_DT_INT32: case MSP_DT_INT64:
    case MSP_DT_UINT8: case MSP_DT_UINT16: case MSP_DT_UINT32: case MSP_DT_UINT64:
    case MSP_DT_BOOL: case MSP_DT_COMPLEX64: case MSP_DT_FLOAT8_E4M3FN:
    case MSP_DT_FLOAT8_E5M2:
        break;
    default:
        if (name)
            snprintf(note, notelen, "unsupported dtype %s", name);
        else
            snprintf(note, notelen, "unsupported dtype %d", dtype);
        return -1;
    }
    uint64_t esize = msp_dtype_bits(dtype) / 8;
    if (size == 0) {
        snprintf(note, notelen, "empty tensor");
        return -1;
    }
    if (size % esize) {
        snprintf(note, notelen, "size %llu is not a multiple of the %s element size %llu",
                 (unsigned long long)size, name, (unsigned long long)esize);
        return -1;
    }
    acc->dtype = dtype;
    acc->esize = esize;
    /* neutral starts: any element replaces them (a tensor has one at least) */
    acc->imax = INT64_MIN;
    acc->imin = INT64_MAX;
    acc->umin = UINT64_MAX;
    acc->best = -1;
    acc->worst = INFINITY;
    return 0;
}

uint64_t msp_stats_feed(struct msp_stats_acc *acc, const void *data, uint64_t len,
                        uint64_t *lanes)
{
    uint64_t n = len / acc->esize;
    struct msp_float_acc *a = &acc->a;
    acc->count += n;
    /* fp32/fp16/bf16: the vectorised pass takes them all, where the CPU allows */
    uint64_t first = msp_stats_simd(acc->dtype, data, n, a, lanes) ? n : 0;
    switch (acc->dtype) {
    case MSP_DT_FLOAT: LOOP_FLOAT(float, raw_); break;
    case MSP_DT_DOUBLE: LOOP_FLOAT(double, raw_); break;
    case MSP_DT_FLOAT16:
        if (first < n) /* no vector pass */
            pthread_once(&g_fp16_once, build_fp16);
        LOOP_FLOAT(uint16_t, g_fp16[raw_]);
        break;
    case MSP_DT_BF16: LOOP_FLOAT(uint16_t, msp_bf16_to_float(raw_)); break;
    case MSP_DT_FLOAT8_E4M3FN: LOOP_FLOAT(uint8_t, msp_fp8_e4m3fn_to_float(raw_)); break;
    case MSP_DT_FLOAT8_E5M2: LOOP_FLOAT(uint8_t, msp_fp8_e5m2_to_float(raw_)); break;
    case MSP_DT_INT8: LOOP_INT(int8_t, imax, imin, int64_t); break;
    case MSP_DT_INT16: LOOP_INT(int16_t, imax, imin, int64_t); break;
    case MSP_DT_INT32: LOOP_INT(int32_t, imax, imin, int64_t); break;
    case MSP_DT_INT64: LOOP_INT(int64_t, imax, imin, int64_t); break;
    case MSP_DT_BOOL: LOOP_INT(uint8_t, imax, imin, int64_t); break;
    case MSP_DT_UINT8: LOOP_INT(uint8_t, umax, umin, uint64_t); break;
    case MSP_DT_UINT16: LOOP_INT(uint16_t, umax, umin, uint64_t); break;
    case MSP_DT_UINT32: LOOP_INT(uint32_t, umax, umin, uint64_t); break;
    case MSP_DT_UINT64: LOOP_INT(uint64_t, umax, umin, uint64_t); break;
    case MSP_DT_COMPLEX64: complex64(acc, data, n); break;
    }
    return first && lanes ? len / 32 * 32 : 0;
}

void msp_stats_end(const struct msp_stats_acc *acc, struct msp_stats *out)
{
    memset(out, 0, sizeof *out);
    const struct msp_float_acc *a = &acc->a;
    uint64_t n = acc->count;
    switch (acc->dtype) {
    case MSP_DT_INT8: case MSP_DT_INT16: case MSP_DT_INT32: case MSP_DT_INT64:
    case MSP_DT_BOOL:
        out->kind = MSP_STATS_INT;
        out->imax = acc->imax;
        out->imin = acc->imin;
        break;
    case MSP_DT_UINT8: case MSP_DT_UINT16: case MSP_DT_UINT32: case MSP_DT_UINT64:
        out->kind = MSP_STATS_UINT;
        out->umax = acc->umax;
        out->umin = acc->umin;
        break;
    case MSP_DT_COMPLEX64:
        out->kind = MSP_STATS_COMPLEX;
        memcpy(out->cmax, acc->cmax, sizeof out->cmax);
        memcpy(out->cmin, acc->cmin, sizeof out->cmin);
        out->cmean[0] = acc->sre / (double)n;
        out->cmean[1] = acc->sim / (double)n;
        break;
    default:
        out->kind = MSP_STATS_FLOAT;
    }
    out->count = n;
    out->nan = a->nan;
    out->pinf = a->pinf;
    out->ninf = a->ninf;
    out->zero = a->zero;
    out->has_minmax = a->seen;
    out->max = a->max;
    out->min = a->min;
    out->mean = a->sum / (double)n;
    out->norm = sqrt(a->sumsq);
}

int msp_stats_compute(int dtype, const void *data, uint64_t size, struct msp_stats *out,
                      char *note, size_t notelen)
{
    struct msp_stats_acc acc;
    if (msp_stats_begin(&acc, dtype, size, note, notelen) != 0) {
        memset(out, 0, sizeof *out);
        return -1;
    }
    msp_stats_feed(&acc, data, size, NULL);
    msp_stats_end(&acc, out);
    return 0;
}

static void pair(struct jbuf *b, const char *key, const double v[2])
{
    jb_key(b, key);
    jb_open(b, '[');
    jb_f64(b, v[0]);
    jb_f64(b, v[1]);
    jb_close(b, ']');
}

void msp_stats_json(struct jbuf *b, const struct msp_stats *s)
{
    jb_open(b, '{');
    jb_ku64(b, "count", s->count);
    switch (s->kind) {
    case MSP_STATS_FLOAT:
        jb_kf64(b, "max", s->has_minmax ? s->max : NAN);
        jb_kf64(b, "min", s->has_minmax ? s->min : NAN);
        break;
    case MSP_STATS_INT:
        jb_ki64(b, "max", s->imax);
        jb_ki64(b, "min", s->imin);
        break;
    case MSP_STATS_UINT:
        jb_ku64(b, "max", s->umax);
        jb_ku64(b, "min", s->umin);
        break;
    case MSP_STATS_COMPLEX: {
        static const double nan2[2] = {NAN, NAN};
        pair(b, "max", s->has_minmax ? s->cmax : nan2);
        pair(b, "min", s->has_minmax ? s->cmin : nan2);
        break;
    }
    }
    if (s->kind == MSP_STATS_COMPLEX) {
        pair(b, "mean", s->cmean);
    } else {
        jb_kf64(b, "mean", s->mean);
    }
    jb_kf64(b, "norm", s->norm);
    jb_ku64(b, "nan", s->nan);
    jb_ku64(b, "pinf", s->pinf);
    jb_ku64(b, "ninf", s->ninf);
    jb_ku64(b, "zero", s->zero);
    jb_close(b, '}');
}
