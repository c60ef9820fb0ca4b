// The stand-in model's weight tensors, in the order of the atb_speed model's
// weight list: what the model allocates and what a checkpoint must fill.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "options.h"

namespace atbsim_lm {

constexpr uint32_t kWeightsPerLayer = 6;  // input_norm, qkv, o_proj, post_norm, gate_up, down

// key: "embedding", "layer<N>.<name>", "final_norm" or "lm_head"; dims as ATB Linear with
// transposeB ([out, in]) or [hidden] for a norm's gamma.
struct WeightSpec {
    std::string key;
    std::vector<int64_t> dims;
    bool norm;
};

// embedding [V,H]; per layer input_norm [H], qkv [3H,H] (q|k|v rows), o_proj [H,H],
// post_norm [H], gate_up [2F,H] (gate|up rows: SwiGLU gates the first half), down [H,F];
// final_norm [H]; lm_head [V,H].
std::vector<WeightSpec> weight_layout(const Options &opt);

}  // namespace atbsim_lm
