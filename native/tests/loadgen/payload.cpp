#include "payload.h"

#include <algorithm>
#include <cstring>

namespace loadgen {
namespace {

// Tensor k of the models starts SPREAD_STEP * (k * 7919 mod SLOTS) bytes into
// its dtype's buffer: an odd multiplier makes the offsets of the first SLOTS
// tensors (a few thousand per model) all different.
constexpr uint64_t SPREAD_STEP = 8, SLOTS = 1 << 17;

struct Rng {
    uint64_t s = 0x9e3779b97f4a7c15ull;
    uint64_t Next()
    {
        s ^= s >> 12;
        s ^= s << 25;
        s ^= s >> 27;
        return s * 0x2545f4914f6cdd1dull;
    }
    float Uniform() { return (float)(Next() >> 40) / (float)(1ull << 24); }
    // Irwin-Hall: four uniforms, centred and scaled to unit variance.
    float Normal() { return (Uniform() + Uniform() + Uniform() + Uniform() - 2.0f) * 1.7320508f; }
};

uint32_t Bits(float x)
{
    uint32_t f;
    std::memcpy(&f, &x, sizeof f);
    return f;
}

// Round to nearest. Normal() stays within +-3.5, far from fp16's infinity;
// the few values below its normal range are flushed to zero.
uint16_t Half(float x)
{
    const uint32_t f = Bits(x), sign = (f >> 16) & 0x8000u;
    const int exp = (int)((f >> 23) & 0xff) - 127 + 15;
    if (exp <= 0)
        return (uint16_t)sign;
    const uint32_t h = sign | ((uint32_t)exp << 10) | ((f & 0x7fffffu) >> 13);
    return (uint16_t)(h + ((f >> 12) & 1u));
}

uint16_t Bf16(float x)
{
    const uint32_t f = Bits(x);
    return (uint16_t)((f + 0x7fffu + ((f >> 16) & 1u)) >> 16);
}

void Fill(const std::string &dtype, std::vector<uint8_t> &buf, Rng &rng)
{
    const bool half = dtype == "1";
    if (half || dtype == "27") {
        for (size_t i = 0; i + 2 <= buf.size(); i += 2) {
            const float x = rng.Normal();
            const uint16_t v = half ? Half(x) : Bf16(x);
            std::memcpy(&buf[i], &v, 2);
        }
        return;
    }
    // int32 "3" / int64 "9": token ids, lengths, slots, block numbers
    const size_t width = dtype == "9" ? 8 : 4;
    for (size_t i = 0; i + width <= buf.size(); i += width) {
        const uint64_t v = rng.Next() % 4096;
        std::memcpy(&buf[i], &v, width);
    }
}

} // namespace

void Payload::Bind(std::vector<Model> &models, bool withState)
{
    std::map<std::string, uint64_t> largest;
    for (Model &m : models)
        for (TopOp &op : m.ops)
            for (TensorSpec &t : op.tensors)
                if (withState || !t.state)
                    largest[t.dtype] = std::max(largest[t.dtype], t.bytes);
    Rng rng;
    for (const auto &[dtype, bytes] : largest) {
        std::vector<uint8_t> &buf = buffers_[dtype];
        buf.resize(bytes + SPREAD_STEP * SLOTS);
        Fill(dtype, buf, rng);
    }
    uint64_t k = 0;
    for (Model &m : models)
        for (TopOp &op : m.ops)
            for (TensorSpec &t : op.tensors)
                if (withState || !t.state)
                    t.data = buffers_[t.dtype].data() + SPREAD_STEP * (k++ * 7919 % SLOTS);
}

} // namespace loadgen
