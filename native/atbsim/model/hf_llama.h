// `--weights DIR`: a Hugging Face LlamaForCausalLM checkpoint as the stand-in's
// model. config.json sets the options; the safetensors tensors map onto atbsim's
// fused weights (see weight_layout.h):
//   embedding        model.embed_tokens.weight
//   layerN.input_norm model.layers.N.input_layernorm.weight
//   layerN.qkv       self_attn.q_proj | k_proj | v_proj (.weight), stacked along the out dim
//   layerN.o_proj    self_attn.o_proj.weight
//   layerN.post_norm post_attention_layernorm.weight
//   layerN.gate_up   mlp.gate_proj | up_proj, stacked along the out dim
//   layerN.down      mlp.down_proj.weight
//   final_norm       model.norm.weight
//   lm_head          lm_head.weight (model.embed_tokens.weight if tie_word_embeddings)
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "options.h"

namespace atbsim_lm {

class SafetensorsDir;

// Reads opt->weights/config.json into *opt: the sizes (an option given explicitly must
// agree), rms_norm_eps, rope_theta, and --dtype unless given. Then checks that every
// tensor the model needs is present, of the right shape and a float dtype, so a bad
// checkpoint is a usage error before any model is built.
bool apply_hf_checkpoint(Options *opt, std::string *err);

class HfLlamaWeights {
public:
    // The checkpoint of opt.weights, for the shapes of opt (after apply_hf_checkpoint).
    static std::unique_ptr<HfLlamaWeights> open(const Options &opt, std::string *err);
    ~HfLlamaWeights();

    // The fp32 values of one atbsim weight (a weight_layout() key), fused as above.
    bool load(const std::string &key, const std::vector<int64_t> &dims, std::vector<float> *out,
              std::string *err) const;

private:
    HfLlamaWeights() = default;
    // The checkpoint tensors that make up one atbsim weight, stacked along dim 0.
    std::vector<std::string> sources(const std::string &key) const;
    bool check(const std::string &key, const std::vector<int64_t> &dims, std::string *err) const;

    std::unique_ptr<SafetensorsDir> dir_;
    std::string where_;
    bool tied_ = false;
};

}  // namespace atbsim_lm
