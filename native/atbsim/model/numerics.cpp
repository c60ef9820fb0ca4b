#include "numerics.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

namespace atbsim_lm {

size_t store_size(Store s) { return s == Store::F32 ? 4 : 2; }

const char *store_name(Store s) {
    switch (s) {
    case Store::F16: return "fp16";
    case Store::BF16: return "bf16";
    default: return "fp32";
    }
}

bool parse_store(const std::string &text, Store *out) {
    if (text == "fp32" || text == "float32" || text == "float") *out = Store::F32;
    else if (text == "fp16" || text == "float16") *out = Store::F16;
    else if (text == "bf16" || text == "bfloat16") *out = Store::BF16;
    else return false;
    return true;
}

static uint32_t bits_of(float f) {
    uint32_t u;
    std::memcpy(&u, &f, 4);
    return u;
}

static float float_of(uint32_t u) {
    float f;
    std::memcpy(&f, &u, 4);
    return f;
}

uint16_t f32_to_f16(float f) {
    uint32_t x = bits_of(f);
    uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
    uint32_t absx = x & 0x7fffffffu;
    if (absx >= 0x7f800000u)  // inf or nan; nan keeps a quiet payload bit
        return static_cast<uint16_t>(sign | 0x7c00u | (absx > 0x7f800000u ? 0x200u : 0u));
    if (absx >= 0x477ff000u)  // rounds to >= 65520: overflow to inf
        return static_cast<uint16_t>(sign | 0x7c00u);
    if (absx < 0x38800000u) {  // fp16 subnormal or zero: scale into integer units of 2^-24
        float r = float_of(absx) * 16777216.0f;  // exact power-of-two scaling
        return static_cast<uint16_t>(sign | static_cast<uint16_t>(std::nearbyint(r)));
    }
    uint32_t mant = absx & 0x7fffffu;
    uint32_t exp = (absx >> 23) - 127 + 15;
    uint32_t h = (exp << 10) | (mant >> 13);
    uint32_t rest = mant & 0x1fffu;
    if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) h++;  // carries into exp correctly
    return static_cast<uint16_t>(sign | h);
}

float f16_to_f32(uint16_t h) {
    uint32_t sign = (h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu;
    uint32_t mant = h & 0x3ffu;
    if (exp == 0x1f) return float_of(sign | 0x7f800000u | (mant << 13));
    if (exp == 0) {
        float v = static_cast<float>(mant) / 16777216.0f;
        return sign ? -v : v;
    }
    return float_of(sign | ((exp - 15 + 127) << 23) | (mant << 13));
}

uint16_t f32_to_bf16(float f) {
    uint32_t x = bits_of(f);
    if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);
    x += 0x7fffu + ((x >> 16) & 1u);
    return static_cast<uint16_t>(x >> 16);
}

float bf16_to_f32(uint16_t b) { return float_of(static_cast<uint32_t>(b) << 16); }

void load_f32(const void *src, Store s, size_t n, float *dst) {
    if (s == Store::F32) {
        std::memcpy(dst, src, n * 4);
        return;
    }
    const uint16_t *p = static_cast<const uint16_t *>(src);
    for (size_t i = 0; i < n; i++) dst[i] = s == Store::F16 ? f16_to_f32(p[i]) : bf16_to_f32(p[i]);
}

void store_f32(const float *src, size_t n, Store s, void *dst) {
    if (s == Store::F32) {
        std::memcpy(dst, src, n * 4);
        return;
    }
    uint16_t *p = static_cast<uint16_t *>(dst);
    for (size_t i = 0; i < n; i++) p[i] = s == Store::F16 ? f32_to_f16(src[i]) : f32_to_bf16(src[i]);
}

std::vector<float> to_f32(const void *src, Store s, size_t n) {
    std::vector<float> v(n);
    load_f32(src, s, n, v.data());
    return v;
}

void poke(void *buf, Store s, size_t i, float value) { store_f32(&value, 1, s, static_cast<char *>(buf) + i * store_size(s)); }

// splitmix64: a tiny, well-mixed counter-based generator, so element i needs no state.
static uint64_t mix64(uint64_t z) {
    z += 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

void fill_uniform(uint64_t seed, const std::string &key, float scale, float *dst, size_t n) {
    uint64_t h = 1469598103934665603ull;  // FNV-1a of the key separates the tensors
    for (unsigned char c : key) h = (h ^ c) * 1099511628211ull;
    uint64_t base = mix64(seed ^ h);
    for (size_t i = 0; i < n; i++) {
        double u = static_cast<double>(mix64(base + i) >> 11) / 9007199254740992.0;  // [0,1)
        dst[i] = static_cast<float>((2.0 * u - 1.0) * scale);
    }
}

void fill_varying(void *dst, size_t bytes, uint64_t seed) {
    const uint64_t base = mix64(seed), keep = 0xBFFFBFFFBFFFBFFFull;
    auto *w = static_cast<unsigned char *>(dst);
    size_t words = bytes / 8;
    for (size_t i = 0; i < words; i++) {
        uint64_t v = ((base + i) * 0x9E3779B97F4A7C15ull) & keep;
        std::memcpy(w + 8 * i, &v, 8);
    }
    for (size_t i = 8 * words; i < bytes; i++) w[i] = static_cast<unsigned char>((base + i) & 0x3f);
}

float round_to(Store s, float v) {
    switch (s) {
    case Store::F16: return f16_to_f32(f32_to_f16(v));
    case Store::BF16: return bf16_to_f32(f32_to_bf16(v));
    default: return v;
    }
}

void rmsnorm(const float *x, const float *w, size_t rows, size_t h, float eps, float *y, Store half) {
    for (size_t r = 0; r < rows; r++) {
        const float *xr = x + r * h;
        double ss = 0;
        if (half == Store::F32) {
            for (size_t i = 0; i < h; i++) ss += static_cast<double>(xr[i]) * xr[i];
        } else {
            float acc = 0.0f;
            for (size_t i = 0; i < h; i++) acc = round_to(half, acc + round_to(half, xr[i] * xr[i]));
            ss = acc;
        }
        float inv = static_cast<float>(1.0 / std::sqrt(ss / static_cast<double>(h) + eps));
        for (size_t i = 0; i < h; i++) y[r * h + i] = xr[i] * inv * w[i];
    }
}

void matmul_nt(const float *x, const float *w, size_t m, size_t k, size_t n, float *y, Store half) {
    for (size_t i = 0; i < m; i++) {
        const float *xr = x + i * k;
        for (size_t j = 0; j < n; j++) {
            const float *wr = w + j * k;
            float acc = 0.0f;
            if (half == Store::F32)
                for (size_t t = 0; t < k; t++) acc += xr[t] * wr[t];
            else
                for (size_t t = 0; t < k; t++) acc = round_to(half, acc + xr[t] * wr[t]);
            y[i * n + j] = acc;
        }
    }
}

void add(const float *a, const float *b, size_t n, float *y) {
    for (size_t i = 0; i < n; i++) y[i] = a[i] + b[i];
}

void rope_tables(const int64_t *pos, size_t rows, size_t head_dim, float theta, float *cos_out, float *sin_out) {
    size_t half = head_dim / 2;
    for (size_t r = 0; r < rows; r++)
        for (size_t i = 0; i < half; i++) {
            double freq = std::pow(static_cast<double>(theta), -2.0 * static_cast<double>(i) / static_cast<double>(head_dim));
            double ang = static_cast<double>(pos[r]) * freq;
            float c = static_cast<float>(std::cos(ang)), s = static_cast<float>(std::sin(ang));
            cos_out[r * head_dim + i] = cos_out[r * head_dim + i + half] = c;
            sin_out[r * head_dim + i] = sin_out[r * head_dim + i + half] = s;
        }
}

void rope(float *x, const float *cos_t, const float *sin_t, size_t rows, size_t width, size_t head_dim, size_t coeff) {
    // ATB's RopeOperation: each head splits into coeff/2 chunks of 2*stride elements;
    // a chunk [a, b] becomes [a, b] * cos + [-b, a] * sin, with cos/sin rows of head_dim.
    size_t stride = head_dim / coeff;
    std::vector<float> rotated(width);
    for (size_t r = 0; r < rows; r++) {
        float *v = x + r * width;
        const float *c = cos_t + r * head_dim, *s = sin_t + r * head_dim;
        for (size_t chunk = 0; chunk < width; chunk += 2 * stride)
            for (size_t i = 0; i < stride; i++) {
                rotated[chunk + i] = -v[chunk + stride + i];
                rotated[chunk + stride + i] = v[chunk + i];
            }
        for (size_t e = 0; e < width; e++) v[e] = v[e] * c[e % head_dim] + rotated[e] * s[e % head_dim];
    }
}

void swiglu(const float *gate_up, size_t rows, size_t ff, float *y, Store half) {
    for (size_t r = 0; r < rows; r++) {
        const float *g = gate_up + r * 2 * ff;
        const float *u = g + ff;
        for (size_t i = 0; i < ff; i++) y[r * ff + i] = round_to(half, g[i] / (1.0f + std::exp(-g[i]))) * u[i];
    }
}

void attention(const float *q, const float *k, const float *v, size_t s, size_t t,
               size_t heads, size_t d, size_t q_pos0, float *out, Store half) {
    size_t stride = heads * d;
    float scale = 1.0f / std::sqrt(static_cast<float>(d));
    std::vector<float> p(t);
    for (size_t i = 0; i < s; i++) {
        size_t visible = std::min(t, q_pos0 + i + 1);
        for (size_t hd = 0; hd < heads; hd++) {
            const float *qi = q + i * stride + hd * d;
            float mx = -INFINITY;
            for (size_t j = 0; j < visible; j++) {
                const float *kj = k + j * stride + hd * d;
                float acc = 0.0f;
                for (size_t e = 0; e < d; e++) acc += qi[e] * kj[e];
                p[j] = acc * scale;
                mx = std::max(mx, p[j]);
            }
            float sum = 0.0f;
            if (half == Store::F32) {
                for (size_t j = 0; j < visible; j++) {
                    p[j] = std::exp(p[j] - mx);
                    sum += p[j];
                }
            } else {  // exp(score) itself: past ln(65504) ~ 11.09 it is inf in fp16
                for (size_t j = 0; j < visible; j++) {
                    p[j] = round_to(half, std::exp(p[j]));
                    sum = round_to(half, sum + p[j]);
                }
            }
            float *o = out + i * stride + hd * d;
            for (size_t e = 0; e < d; e++) o[e] = 0.0f;
            for (size_t j = 0; j < visible; j++) {
                const float *vj = v + j * stride + hd * d;
                float wgt = p[j] / sum;
                for (size_t e = 0; e < d; e++) o[e] += wgt * vj[e];
            }
        }
    }
}

size_t argmax(const float *x, size_t n) {
    // NaN never wins, so a poisoned row still yields a valid token id (0 if all NaN).
    size_t best = 0;
    float bv = -INFINITY;
    for (size_t i = 0; i < n; i++)
        if (x[i] > bv) {
            bv = x[i];
            best = i;
        }
    return best;
}

}  // namespace atbsim_lm
