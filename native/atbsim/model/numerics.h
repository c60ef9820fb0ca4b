// CPU numerics of the stand-in model: fp16/bf16/fp32 storage, fp32 math.
// Everything here is independent of the runtime so it can be unit-tested
// (through the model) and reused by every kernel callback.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace atbsim_lm {

// Storage type of activations and weights. Values are aclDataType numbers.
enum class Store : int { F32 = 0, F16 = 1, BF16 = 27 };

size_t store_size(Store s);
const char *store_name(Store s);              // "fp32" | "fp16" | "bf16"
bool parse_store(const std::string &text, Store *out);

uint16_t f32_to_f16(float f);                 // round to nearest even, keeps inf/nan
float f16_to_f32(uint16_t h);
uint16_t f32_to_bf16(float f);                // round to nearest even, keeps nan
float bf16_to_f32(uint16_t b);

// Whole-buffer conversions between storage and fp32 working copies.
void load_f32(const void *src, Store s, size_t n, float *dst);
void store_f32(const float *src, size_t n, Store s, void *dst);
std::vector<float> to_f32(const void *src, Store s, size_t n);

// Writes one special value (nan, +inf, -inf) into element i of a stored buffer.
void poke(void *buf, Store s, size_t i, float value);

// Deterministic weight values: a function of (seed, tensor key, element) only,
// so an fp32 and an fp16 model built with one seed hold the same numbers up to
// the storage rounding. Uniform in [-scale, scale].
void fill_uniform(uint64_t seed, const std::string &key, float scale, float *dst, size_t n);

// --no-compute's data: `bytes` of cheap varying values (a multiply a 64-bit
// word, at memory speed), different for each seed, finite in fp32, fp16 and
// bf16 alike (the exponent's top bit of every 16-bit lane is clear), so no
// two dumped tensors are alike and deduplication cannot flatter a benchmark.
void fill_varying(void *dst, size_t bytes, uint64_t seed);

// Kernels, all fp32, row-major. `half` is where a --precision-fault keeps the
// kernel's named intermediate (the run's fp16 or bf16); Store::F32, the
// default, is the clean kernel, which keeps it in fp32 (or double).
// Rounds v to `s` and back (the identity for fp32); half overflow gives inf.
float round_to(Store s, float v);
// half: the sum of squares accumulated in half (each square rounded, then each partial sum).
void rmsnorm(const float *x, const float *w, size_t rows, size_t h, float eps, float *y, Store half = Store::F32);
// y[m,n] = x[m,k] * w[n,k]^T (ATB Linear with transposeB, weight stored [out,in]).
// half: every partial sum of a dot product rounded to half (the products stay exact).
void matmul_nt(const float *x, const float *w, size_t m, size_t k, size_t n, float *y, Store half = Store::F32);
void add(const float *a, const float *b, size_t n, float *y);
// In-place rotary embedding (rotate-half) on [rows, heads*head_dim] with per-row positions.
// cos/sin tables of rotate-half RoPE for the given positions: rows x head_dim each.
void rope_tables(const int64_t *pos, size_t rows, size_t head_dim, float theta, float *cos_out, float *sin_out);
// ATB RopeOperation on x [rows, width] (width = heads * head_dim) with per-token cos/sin.
void rope(float *x, const float *cos_t, const float *sin_t, size_t rows, size_t width, size_t head_dim, size_t coeff);
// gate_up [rows, 2*ff] = [gate | up] -> y [rows, ff] = silu(gate) * up.
// half: silu(gate) rounded to half before the product.
void swiglu(const float *gate_up, size_t rows, size_t ff, float *y, Store half = Store::F32);
// Causal softmax attention of q [s, heads*d] over k, v [t, heads*d]; query row i sits at
// position q_pos0 + i and sees keys 0..q_pos0+i.
// half: the softmax without the row max subtracted, each exp and the running sum in half.
void attention(const float *q, const float *k, const float *v, size_t s, size_t t,
               size_t heads, size_t d, size_t q_pos0, float *out, Store half = Store::F32);
size_t argmax(const float *x, size_t n);

}  // namespace atbsim_lm
