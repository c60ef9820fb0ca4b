#include "hf_llama.h"

#include <cmath>
#include <cstring>

#include "json.h"
#include "safetensors.h"
#include "smallfile.h"
#include "weight_layout.h"

namespace atbsim_lm {

namespace {

std::string dims_text(const std::vector<int64_t> &dims) {
    std::string s = "[";
    for (size_t i = 0; i < dims.size(); i++) s += (i ? ", " : "") + std::to_string(dims[i]);
    return s + "]";
}

// config.json, with the accessors that name the field and the file in every error.
struct Config {
    JsonValue doc;
    std::string path;
    std::string *err;

    bool fail(const std::string &why) {
        *err = path + ": " + why;
        return false;
    }
    const JsonValue *present(const char *key) const {
        const JsonValue *v = doc.get(key);
        return v && v->kind != JsonValue::Null ? v : nullptr;
    }
    // A whole number in [lo, hi]; absent: `fallback` if >= 0, else an error.
    bool integer(const char *key, int lo, int hi, int fallback, int *out) {
        const JsonValue *v = present(key);
        if (!v) {
            if (fallback >= 0) return *out = fallback, true;
            return fail(std::string("no \"") + key + "\" (a LlamaForCausalLM config has it)");
        }
        if (v->kind != JsonValue::Number || std::floor(v->num) != v->num || v->num < lo || v->num > hi)
            return fail(std::string("\"") + key + "\" must be a whole number in [" + std::to_string(lo) + ", " +
                        std::to_string(hi) + "]");
        *out = static_cast<int>(v->num);
        return true;
    }
    bool positive(const JsonValue *v, const char *key, double *out) {
        if (!v) return true;  // keep the default
        if (v->kind != JsonValue::Number || !(v->num > 0) || !std::isfinite(v->num))
            return fail(std::string("\"") + key + "\" must be a positive number");
        *out = v->num;
        return true;
    }
    bool flag(const char *key, bool *out) {
        const JsonValue *v = present(key);
        if (!v) return true;
        if (v->kind != JsonValue::Bool) return fail(std::string("\"") + key + "\" must be true or false");
        *out = v->b;
        return true;
    }
};

bool is_llama(const Config &c) {
    if (const JsonValue *arch = c.present("architectures")) {
        for (const JsonValue &a : arch->arr)
            if (a.kind == JsonValue::String && a.str == "LlamaForCausalLM") return true;
        return false;
    }
    const JsonValue *type = c.present("model_type");
    return type && type->kind == JsonValue::String && type->str == "llama";
}

std::string architectures_text(const Config &c) {
    const JsonValue *arch = c.present("architectures");
    if (!arch) {
        const JsonValue *type = c.present("model_type");
        return "model_type " + (type && type->kind == JsonValue::String ? "'" + type->str + "'" : std::string("(none)"));
    }
    std::string s;
    for (const JsonValue &a : arch->arr) s += (s.empty() ? "" : ", ") + (a.kind == JsonValue::String ? a.str : "?");
    return "architectures [" + s + "]";
}

// rope_theta, from transformers >= 5's "rope_parameters" or the older flat
// "rope_theta" + "rope_scaling". Only the plain rotary embedding is computed.
bool read_rope(Config &c, double *theta) {
    const JsonValue *params = c.present("rope_parameters");
    const JsonValue *scaling = params ? params : c.present("rope_scaling");
    if (scaling) {
        if (scaling->kind != JsonValue::Object) return c.fail("\"rope_parameters\"/\"rope_scaling\" must be an object");
        const JsonValue *type = scaling->get("rope_type");
        if (!type) type = scaling->get("type");
        if (type && type->kind != JsonValue::Null && (type->kind != JsonValue::String || type->str != "default"))
            return c.fail("rope type '" + (type->kind == JsonValue::String ? type->str : std::string("?")) +
                          "': atbsim computes the default rotary embedding only");
    }
    const JsonValue *nested = params ? params->get("rope_theta") : nullptr;
    return c.positive(nested ? nested : c.present("rope_theta"), "rope_theta", theta);
}

// A Llama config.json is about a kilobyte.
constexpr size_t kMaxConfig = 1u << 20;

bool read_config(const std::string &dir, Options *opt, std::string *err) {
    Config c{JsonValue(), dir + "/config.json", err};
    std::string text, why;
    if (!read_small_file(c.path, kMaxConfig, &text, &why)) return c.fail("cannot read it: " + why);
    if (!json_parse(text, &c.doc, &why)) return c.fail("not valid JSON (" + why + ")");
    if (c.doc.kind != JsonValue::Object) return c.fail("not a JSON object");
    if (!is_llama(c)) return c.fail(architectures_text(c) + ": atbsim computes LlamaForCausalLM only");
    const JsonValue *act = c.present("hidden_act");
    if (act && (act->kind != JsonValue::String || act->str != "silu"))
        return c.fail("\"hidden_act\" " + (act->kind == JsonValue::String ? "'" + act->str + "'" : std::string("?")) +
                      ": atbsim's MLP is SwiGLU (silu) only");
    bool attention_bias = false, mlp_bias = false;
    if (!c.flag("attention_bias", &attention_bias) || !c.flag("mlp_bias", &mlp_bias) ||
        !c.flag("tie_word_embeddings", &opt->tie_embeddings))
        return false;
    if (attention_bias || mlp_bias)
        return c.fail(std::string(attention_bias ? "attention_bias" : "mlp_bias") +
                      " is true: atbsim's Linear ops have no bias");
    int kv_heads = 0, head_dim = 0;
    if (!c.integer("num_hidden_layers", 1, 1024, -1, &opt->layers) ||
        !c.integer("hidden_size", 2, 65536, -1, &opt->hidden) ||
        !c.integer("num_attention_heads", 1, 1024, -1, &opt->heads) ||
        !c.integer("intermediate_size", 1, 262144, -1, &opt->ffn) ||
        !c.integer("vocab_size", 2, 1 << 20, -1, &opt->vocab) ||
        !c.integer("num_key_value_heads", 1, 1024, opt->heads, &kv_heads) ||
        !c.integer("head_dim", 1, 65536, opt->hidden / opt->heads, &head_dim))
        return false;
    if (kv_heads != opt->heads)
        return c.fail("num_key_value_heads " + std::to_string(kv_heads) + " != num_attention_heads " +
                      std::to_string(opt->heads) + ": atbsim has no grouped-query attention");
    if (head_dim * opt->heads != opt->hidden)
        return c.fail("head_dim " + std::to_string(head_dim) + " * num_attention_heads " + std::to_string(opt->heads) +
                      " != hidden_size " + std::to_string(opt->hidden) + ": atbsim needs head_dim = hidden/heads");
    if (!c.positive(c.present("rms_norm_eps"), "rms_norm_eps", &opt->rms_eps) || !read_rope(c, &opt->rope_theta))
        return false;
    if (opt->was_given("--dtype")) return true;
    const JsonValue *dtype = c.present("dtype");
    if (!dtype) dtype = c.present("torch_dtype");
    opt->dtype = Store::F32;
    if (dtype && (dtype->kind != JsonValue::String || !parse_store(dtype->str, &opt->dtype)))
        return c.fail("dtype '" + (dtype->kind == JsonValue::String ? dtype->str : std::string("?")) +
                      "' is not float32, float16 or bfloat16; pass --dtype");
    return true;
}

bool store_of(const std::string &dtype, Store *out) {
    if (dtype == "F32") *out = Store::F32;
    else if (dtype == "F16") *out = Store::F16;
    else if (dtype == "BF16") *out = Store::BF16;
    else return false;
    return true;
}

}  // namespace

bool apply_hf_checkpoint(Options *opt, std::string *err) {
    // The sizes an explicit option may fix, to check them against the checkpoint's.
    struct Size { const char *option, *field; int *value; };
    const Size sizes[] = {{"--layers", "num_hidden_layers", &opt->layers}, {"--hidden", "hidden_size", &opt->hidden},
                          {"--heads", "num_attention_heads", &opt->heads}, {"--ffn", "intermediate_size", &opt->ffn},
                          {"--vocab", "vocab_size", &opt->vocab}};
    for (const char *random_only : {"--seed", "--no-compute"})
        if (opt->was_given(random_only)) {
            *err = std::string(random_only) + " is for random weights; --weights loads them, give one or the other";
            return false;
        }
    constexpr size_t kSizes = sizeof sizes / sizeof sizes[0];
    int asked[kSizes];
    for (size_t i = 0; i < kSizes; i++) asked[i] = *sizes[i].value;
    if (!read_config(opt->weights, opt, err)) {
        *err = "--weights: " + *err;
        return false;
    }
    for (size_t i = 0; i < kSizes; i++)
        if (opt->was_given(sizes[i].option) && asked[i] != *sizes[i].value) {
            *err = std::string(sizes[i].option) + " " + std::to_string(asked[i]) + " disagrees with the checkpoint's " +
                   sizes[i].field + " " + std::to_string(*sizes[i].value) + " (" + opt->weights +
                   "/config.json); --weights sets the model's shape, drop the option";
            return false;
        }
    return HfLlamaWeights::open(*opt, err) != nullptr;
}

HfLlamaWeights::~HfLlamaWeights() = default;

std::unique_ptr<HfLlamaWeights> HfLlamaWeights::open(const Options &opt, std::string *err) {
    std::unique_ptr<HfLlamaWeights> w(new HfLlamaWeights());
    w->where_ = opt.weights;
    w->tied_ = opt.tie_embeddings;
    w->dir_ = SafetensorsDir::open(opt.weights, err);
    if (!w->dir_) {
        *err = "--weights: " + *err;
        return nullptr;
    }
    for (const WeightSpec &spec : weight_layout(opt))
        if (!w->check(spec.key, spec.dims, err)) return nullptr;
    return w;
}

std::vector<std::string> HfLlamaWeights::sources(const std::string &key) const {
    if (key == "embedding") return {"model.embed_tokens.weight"};
    if (key == "final_norm") return {"model.norm.weight"};
    if (key == "lm_head") return {tied_ ? "model.embed_tokens.weight" : "lm_head.weight"};
    // "layer<N>.<name>"
    size_t dot = key.find('.');
    const std::string p = "model.layers." + key.substr(5, dot - 5) + ".", name = key.substr(dot + 1);
    if (name == "input_norm") return {p + "input_layernorm.weight"};
    if (name == "qkv") return {p + "self_attn.q_proj.weight", p + "self_attn.k_proj.weight", p + "self_attn.v_proj.weight"};
    if (name == "o_proj") return {p + "self_attn.o_proj.weight"};
    if (name == "post_norm") return {p + "post_attention_layernorm.weight"};
    if (name == "gate_up") return {p + "mlp.gate_proj.weight", p + "mlp.up_proj.weight"};
    return {p + "mlp.down_proj.weight"};
}

bool HfLlamaWeights::check(const std::string &key, const std::vector<int64_t> &dims, std::string *err) const {
    const std::vector<std::string> parts = sources(key);
    std::vector<int64_t> part_dims = dims;
    part_dims[0] /= static_cast<int64_t>(parts.size());
    for (const std::string &name : parts) {
        const SafeTensor *t = dir_->find(name);
        Store s;
        if (!t) *err = "--weights: " + where_ + " has no tensor '" + name + "'";
        else if (t->shape != part_dims)
            *err = "--weights: tensor '" + name + "' in " + t->file + " has shape " + dims_text(t->shape) +
                   ", config.json makes it " + dims_text(part_dims);
        else if (!store_of(t->dtype, &s))
            *err = "--weights: tensor '" + name + "' in " + t->file + " has dtype " + t->dtype +
                   "; atbsim reads F32, F16 and BF16 weights";
        else continue;
        return false;
    }
    return true;
}

bool HfLlamaWeights::load(const std::string &key, const std::vector<int64_t> &dims, std::vector<float> *out,
                          std::string *err) const {
    if (!check(key, dims, err)) return false;
    out->clear();
    std::vector<unsigned char> aligned;
    for (const std::string &name : sources(key)) {
        const SafeTensor *t = dir_->find(name);
        Store s = Store::F32;
        store_of(t->dtype, &s);
        const size_t n = t->bytes / store_size(s), at = out->size();
        out->resize(at + n);
        // The mapped bytes need not be aligned for their type: copy them first.
        aligned.assign(t->data, t->data + t->bytes);
        load_f32(aligned.data(), s, n, out->data() + at);
    }
    return true;
}

}  // namespace atbsim_lm
