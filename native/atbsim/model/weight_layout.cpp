#include "weight_layout.h"

namespace atbsim_lm {

std::vector<WeightSpec> weight_layout(const Options &opt) {
    const int64_t H = opt.hidden, F = opt.ffn_dim(), V = opt.vocab;
    std::vector<WeightSpec> wd = {{"embedding", {V, H}, false}};
    for (int l = 0; l < opt.layers; l++) {
        std::string p = "layer" + std::to_string(l) + ".";
        wd.push_back({p + "input_norm", {H}, true});
        wd.push_back({p + "qkv", {3 * H, H}, false});
        wd.push_back({p + "o_proj", {H, H}, false});
        wd.push_back({p + "post_norm", {H}, true});
        wd.push_back({p + "gate_up", {2 * F, H}, false});
        wd.push_back({p + "down", {H, F}, false});
    }
    wd.push_back({"final_norm", {H}, true});
    wd.push_back({"lm_head", {V, H}, false});
    return wd;
}

}  // namespace atbsim_lm
