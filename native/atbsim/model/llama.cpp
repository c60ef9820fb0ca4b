#include "llama.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "hf_llama.h"
#include "ops.h"
#include "weight_layout.h"

namespace atbsim_lm {

using atb_speed::TensorId;
using atb_speed::TensorKind;
using atbsim::Tensor;

namespace {

constexpr int kBlockSize = 128;

// Model-level input tensors, the same list for both stages.
enum ModelIn : uint32_t { IN_IDS, IN_COS, IN_SIN, IN_SLOTS, IN_SEQLEN, IN_BLOCKS, IN_LMHEAD_IDX, IN_COUNT };

// Layer graph tensor ids (ATB numbering: inputs, outputs, internals).
enum LayerT : uint32_t {
    L_HIDDEN, L_COS, L_SIN, L_SLOTS, L_SEQLEN, L_BLOCKS, L_KCACHE, L_VCACHE,
    L_W_INNORM, L_W_QKV, L_W_O, L_W_POSTNORM, L_W_GATEUP, L_W_DOWN,
    L_OUT,
    L_NORMED, L_QKV, L_Q, L_K, L_V, L_RQ, L_RK, L_ATTN, L_O, L_RESID, L_NORMED2, L_GATEUP, L_ACT, L_DOWN,
    L_END
};
constexpr uint32_t kLayerIn = L_OUT, kLayerInternal = L_END - L_OUT - 1;

TensorId T(TensorKind k, uint32_t i) { return TensorId{k, i}; }

// A model input: allocated like device memory and filled with a host-to-device copy.
Tensor upload(int dtype, std::vector<int64_t> dims, const void *src) {
    Tensor t = atbsim::MakeTensor(dtype, std::move(dims));
    if (t.dataSize) aclrtMemcpy(t.deviceData, t.dataSize, src, t.dataSize, ACL_MEMCPY_HOST_TO_DEVICE);
    return t;
}

}  // namespace

struct Llama::Phase {
    bool prefill = true;
    std::unique_ptr<atb_speed::Model> model;
    std::atomic<uint64_t> round{0};  // read by injection callbacks (maybe on the async thread)
    uint64_t executes = 0;
};

Llama::Llama(const Options &opt) : opt_(opt) {
    if (!finish_options(&opt_, &error_)) return;
    if (aclrtSetDevice(opt_.device) != ACL_SUCCESS) {
        error_ = "aclrtSetDevice(" + std::to_string(opt_.device) + ") failed";
        return;
    }
    aclrtCreateStream(&stream_);
    ctx_ = std::make_unique<atbsim::Context>();
    ctx_->SetExecuteStream(stream_);
    if (opt_.async) ctx_->SetAsyncExecute(true);
    build();
}

Llama::~Llama() {
    prefill_.reset();
    decode_.reset();
    ctx_.reset();
    if (stream_) aclrtDestroyStream(stream_);
}

std::vector<int64_t> Llama::default_request() const {
    if (!opt_.prompt_ids.empty()) return opt_.prompt_ids;
    return opt_.prompt.empty() ? default_prompt(opt_.prompt_len, opt_.vocab) : tokenize(opt_.prompt, opt_.vocab);
}

std::vector<std::string> Llama::unfired_injections() const {
    std::vector<std::string> out;
    for (const auto &site : sites_)
        if (site->fired.load() == 0) out.push_back(site->spec.describe());
    return out;
}

std::shared_ptr<atbsim::Operation> Llama::make_leaf(atbsim::LeafOpSpec spec, bool prefill, int layer,
                                                    const std::string &node, const std::string &graph,
                                                    const std::atomic<uint64_t> *round) {
    std::vector<std::shared_ptr<InjectSite>> mine;
    for (const Inject &inj : opt_.injects) {
        if ((inj.stage == Stage::Prefill) != prefill || inj.layer != layer || inj.op != node) continue;
        if (inj.device >= 0 && inj.device != opt_.device) continue;  // another rank's fault
        auto site = std::make_shared<InjectSite>();
        site->spec = inj;
        site->graph = graph;
        site->device = opt_.device;
        site->round = round;
        if (!attach_injection(spec, site, &error_)) return nullptr;
        mine.push_back(site);
    }
    std::string type = spec.type;
    auto op = atbsim::CreateLeafOperation(std::move(spec));
    if (!op) {
        error_ = "the runtime rejected the " + type + " spec of " + graph + " (see its message above)";
        return nullptr;
    }
    for (auto &site : mine) {
        site->op = op.get();
        sites_.push_back(site);
    }
    return op;
}

void Llama::build() {
    const Store dt = opt_.dtype;
    const std::vector<WeightSpec> wd = weight_layout(opt_);
    std::unique_ptr<HfLlamaWeights> checkpoint;
    if (!opt_.weights.empty() && !(checkpoint = HfLlamaWeights::open(opt_, &error_))) return;
    const size_t layers_begin = 1, layers_end = 1 + kWeightsPerLayer * static_cast<size_t>(opt_.layers);
    std::vector<float> v;
    for (size_t i = 0; i < wd.size(); i++) {
        // --no-compute shares layer 0's weights: real shapes, one layer's memory.
        if (opt_.no_compute && i >= layers_begin + kWeightsPerLayer && i < layers_end) {
            weights_.push_back(weights_[layers_begin + (i - layers_begin) % kWeightsPerLayer]);
            continue;
        }
        Tensor t = atbsim::MakeTensor(static_cast<int>(dt), wd[i].dims);
        size_t n = static_cast<size_t>(atbsim::NumElements(wd[i].dims));
        if (opt_.no_compute) {
            fill_varying(t.deviceData, t.dataSize, i);
        } else if (checkpoint) {
            if (!checkpoint->load(wd[i].key, wd[i].dims, &v, &error_)) return;
            store_f32(v.data(), n, dt, t.deviceData);
        } else {
            v.resize(n);
            float scale = wd[i].norm ? 0.1f : wd[i].key == "embedding" ? 1.0f : 1.0f / std::sqrt(static_cast<float>(wd[i].dims[1]));
            fill_uniform(opt_.seed, wd[i].key, scale, v.data(), n);
            if (wd[i].norm)
                for (float &x : v) x += 1.0f;
            store_f32(v.data(), n, dt, t.deviceData);
        }
        weights_.push_back(t);
    }
    prefill_ = std::make_unique<Phase>();
    decode_ = std::make_unique<Phase>();
    if (build_stage(*prefill_, true) && build_stage(*decode_, false)) ensure_cache(kBlockSize);
}

bool Llama::build_stage(Phase &st, bool prefill) {
    st.prefill = prefill;
    st.model = std::make_unique<atb_speed::Model>(prefill ? "DecoderModel_Prefill" : "DecoderModel_Decoder");
    atb_speed::Model &m = *st.model;
    const Store dt = opt_.dtype;
    OpEnv env;
    env.no_compute = opt_.no_compute;
    env.heads = opt_.heads;
    env.head_dim = opt_.hidden / opt_.heads;
    env.block_size = kBlockSize;
    const uint32_t L = static_cast<uint32_t>(opt_.layers);
    const float eps = static_cast<float>(opt_.rms_eps);
    const std::string layer_name = prefill ? "Prefill_layer" : "Decoder_layer";
    m.inTensorNum = IN_COUNT;
    m.outTensorNum = 1;
    m.internalTensorNum = L + 1;  // embedding output, then one per layer
    m.weightTensors = weights_;

    auto leaf = [&](atbsim::LeafOpSpec spec, int layer, const std::string &node, const std::string &graph) {
        return make_leaf(std::move(spec), prefill, layer, node, graph, &st.round);
    };
    auto graph_op = [&](atbsim::GraphSpec g) -> std::shared_ptr<atbsim::Operation> {
        for (const auto &n : g.nodes)
            if (!n.op) return nullptr;
        std::string name = g.name;
        auto op = atbsim::CreateGraphOperation(std::move(g));
        if (!op && error_.empty()) error_ = "the runtime rejected graph " + name + " (see its message above)";
        return op;
    };

    // WordEmbedding: a graph around one Gather, as atb_speed builds it.
    atbsim::GraphSpec emb;
    emb.name = "WordEmbedding";
    emb.inTensorNum = 2;
    emb.outTensorNum = 1;
    emb.nodes = {{leaf(gather_op(env, dt), -1, "WordEmbedding", emb.name), {0, 1}, {2}}};
    auto emb_op = graph_op(emb);
    if (!emb_op) return false;
    m.nodes.push_back({emb_op, {T(TensorKind::WEIGHT, 0), T(TensorKind::INPUT, IN_IDS)}, {T(TensorKind::INTERNAL, 0)}});

    for (uint32_t l = 0; l < L; l++) {
        const int li = static_cast<int>(l);
        auto node = [&](atbsim::LeafOpSpec spec, const char *name, std::vector<uint32_t> ins, std::vector<uint32_t> outs) {
            return atbsim::GraphNode{leaf(std::move(spec), li, name, layer_name), std::move(ins), std::move(outs)};
        };
        // The env of node `name`: its kernel computes in half if a --precision-fault names it.
        auto env_of = [&](const char *name) {
            OpEnv e = env;
            if (has_precision_fault(opt_.precision_faults, li, name)) e.precision_fault = dt;
            return e;
        };
        atbsim::GraphSpec g;
        g.name = layer_name;
        g.inTensorNum = kLayerIn;
        g.outTensorNum = 1;
        g.internalTensorNum = kLayerInternal;
        g.nodes = {
            node(rmsnorm_op(env_of("InputNorm"), eps), "InputNorm", {L_HIDDEN, L_W_INNORM}, {L_NORMED}),
            node(linear_op(env_of("QKV")), "QKV", {L_NORMED, L_W_QKV}, {L_QKV}),
            node(split3_op(env), "SplitQKV", {L_QKV}, {L_Q, L_K, L_V}),
            node(rope_op(env), "Rope", {L_Q, L_K, L_COS, L_SIN, L_SEQLEN}, {L_RQ, L_RK}),
            // In place: the outputs are the cache inputs, as in ATB-Models' layers.
            node(reshape_and_cache_op(env), "ReshapeAndCache", {L_RK, L_V, L_KCACHE, L_VCACHE, L_SLOTS},
                 {L_KCACHE, L_VCACHE}),
            prefill ? node(self_attention_op(env_of("Attention")), "Attention", {L_RQ, L_RK, L_V, L_SEQLEN}, {L_ATTN})
                    : node(paged_attention_op(env_of("Attention")), "Attention", {L_RQ, L_KCACHE, L_VCACHE, L_BLOCKS, L_SEQLEN},
                           {L_ATTN}),
            node(linear_op(env_of("OProj")), "OProj", {L_ATTN, L_W_O}, {L_O}),
            node(add_op(env, dt), "AttnAdd", {L_HIDDEN, L_O}, {L_RESID}),
            node(event_op(), "Event", {}, {}),
            node(rmsnorm_op(env_of("PostNorm"), eps), "PostNorm", {L_RESID, L_W_POSTNORM}, {L_NORMED2}),
            node(linear_op(env_of("GateUp")), "GateUp", {L_NORMED2, L_W_GATEUP}, {L_GATEUP}),
            node(swiglu_op(env_of("SwiGLU")), "SwiGLU", {L_GATEUP}, {L_ACT}),
            node(linear_op(env_of("Down")), "Down", {L_ACT, L_W_DOWN}, {L_DOWN}),
            node(add_op(env, dt), "MlpAdd", {L_RESID, L_DOWN}, {L_OUT}),
        };
        auto layer_op = graph_op(g);
        if (!layer_op) return false;
        std::vector<TensorId> ins = {T(TensorKind::INTERNAL, l), T(TensorKind::INPUT, IN_COS), T(TensorKind::INPUT, IN_SIN),
                                     T(TensorKind::INPUT, IN_SLOTS), T(TensorKind::INPUT, IN_SEQLEN),
                                     T(TensorKind::INPUT, IN_BLOCKS), T(TensorKind::KCACHE, l), T(TensorKind::VCACHE, l)};
        for (uint32_t w = 0; w < kWeightsPerLayer; w++) ins.push_back(T(TensorKind::WEIGHT, 1 + l * kWeightsPerLayer + w));
        m.nodes.push_back({layer_op, ins, {T(TensorKind::INTERNAL, l + 1)}});
    }

    // LmHead: last-token gather, final norm, projection to the vocabulary.
    atbsim::GraphSpec head;
    head.name = "LmHead";
    head.inTensorNum = 4;  // hidden, lm_head_indices, final_norm, lm_head weight
    head.outTensorNum = 1;
    head.internalTensorNum = 2;
    head.nodes = {{leaf(gather_op(env, dt), -1, "", head.name), {0, 1}, {5}},
                  {leaf(rmsnorm_op(env, eps), -1, "", head.name), {5, 2}, {6}},
                  {leaf(linear_op(env), -1, "LmHead", head.name), {6, 3}, {4}}};
    auto head_op = graph_op(head);
    if (!head_op) return false;
    const uint32_t wfinal = 1 + L * kWeightsPerLayer;
    m.nodes.push_back({head_op,
                       {T(TensorKind::INTERNAL, L), T(TensorKind::INPUT, IN_LMHEAD_IDX), T(TensorKind::WEIGHT, wfinal),
                        T(TensorKind::WEIGHT, wfinal + 1)},
                       {T(TensorKind::OUTPUT, 0)}});
    return true;
}

void Llama::ensure_cache(int64_t tokens) {
    int64_t blocks = (tokens + kBlockSize - 1) / kBlockSize;
    if (blocks <= cache_blocks_) return;
    const int64_t heads = opt_.heads, hd = opt_.hidden / opt_.heads;
    kcache_.clear();
    vcache_.clear();
    for (int l = 0; l < opt_.layers; l++) {
        if (opt_.no_compute && l > 0) {  // shared, like the weights
            kcache_.push_back(kcache_[0]);
            vcache_.push_back(vcache_[0]);
            continue;
        }
        for (auto *cache : {&kcache_, &vcache_}) {
            cache->push_back(atbsim::MakeTensor(static_cast<int>(opt_.dtype), {blocks, kBlockSize, heads, hd}));
            // seeds past the weights' (their index), one per cache
            if (opt_.no_compute) fill_varying(cache->back().deviceData, cache->back().dataSize, weights_.size() + (cache == &vcache_));
        }
    }
    cache_blocks_ = blocks;
    for (Phase *st : {prefill_.get(), decode_.get()}) {
        st->model->kCacheTensors = kcache_;
        st->model->vCacheTensors = vcache_;
    }
}

bool Llama::step(Phase &st, const std::vector<int64_t> &ids, int64_t pos0, int64_t *token, std::vector<float> *logits,
                 std::string *err) {
    const int64_t S = static_cast<int64_t>(ids.size());
    std::vector<int64_t> pos(ids.size());
    std::vector<int32_t> slots(ids.size());
    for (int64_t i = 0; i < S; i++) pos[i] = pos0 + i, slots[i] = static_cast<int32_t>(pos0 + i);
    int32_t context = static_cast<int32_t>(pos0 + S);
    std::vector<int32_t> blocks(static_cast<size_t>(cache_blocks_));
    for (size_t b = 0; b < blocks.size(); b++) blocks[b] = static_cast<int32_t>(b);
    int64_t last = S - 1;
    // The rotary tables for these positions, as ATB-Models hands them to RopeOperation.
    const int64_t hd = opt_.hidden / opt_.heads;
    const size_t table = static_cast<size_t>(S * hd);
    std::vector<float> cos_t(table), sin_t(table);
    rope_tables(pos.data(), ids.size(), static_cast<size_t>(hd), static_cast<float>(opt_.rope_theta), cos_t.data(),
                sin_t.data());
    const int dtype = static_cast<int>(opt_.dtype);
    std::vector<char> cos_b(table * store_size(opt_.dtype)), sin_b(cos_b.size());
    store_f32(cos_t.data(), table, opt_.dtype, cos_b.data());
    store_f32(sin_t.data(), table, opt_.dtype, sin_b.data());
    std::vector<Tensor> ins = {upload(atbsim::I64, {S}, ids.data()),      upload(dtype, {S, hd}, cos_b.data()),
                               upload(dtype, {S, hd}, sin_b.data()),
                               upload(atbsim::I32, {S}, slots.data()),    upload(atbsim::I32, {1}, &context),
                               upload(atbsim::I32, {1, cache_blocks_}, blocks.data()),
                               upload(atbsim::I64, {1}, &last)};
    std::vector<Tensor> outs(1);
    st.round.store(st.executes);
    st.executes++;
    atbsim::Status rc = st.model->Execute(*ctx_, ins, outs);
    if (rc != atb::NO_ERROR) {
        *err = st.model->GetName() + " execute failed (status " + std::to_string(rc) + ") at round " +
               std::to_string(st.executes - 1);
        return false;
    }
    const Tensor &out = outs[0];
    size_t n = static_cast<size_t>(atbsim::NumElements(out.desc.dims));
    if (n != static_cast<size_t>(opt_.vocab) || !out.deviceData) {
        *err = st.model->GetName() + " returned logits of " + std::to_string(n) + " elements, expected " +
               std::to_string(opt_.vocab);
        return false;
    }
    std::vector<char> host(out.dataSize);
    aclrtMemcpy(host.data(), host.size(), out.deviceData, out.dataSize, ACL_MEMCPY_DEVICE_TO_HOST);
    std::vector<float> f = to_f32(host.data(), static_cast<Store>(out.desc.dtype), n);
    *token = static_cast<int64_t>(argmax(f.data(), n));
    if (logits) logits->insert(logits->end(), f.begin(), f.end());
    return true;
}

bool Llama::generate(const std::vector<int64_t> &prompt, int n_new, std::vector<int64_t> *out,
                     std::vector<float> *logits, std::string *err) {
    if (!ok()) {
        *err = error_;
        return false;
    }
    if (prompt.empty() || n_new < 1) {
        *err = "a request needs at least one prompt token and one new token";
        return false;
    }
    for (int64_t id : prompt)
        if (id < 0 || id >= opt_.vocab) {
            *err = "prompt token " + std::to_string(id) + " is outside the vocabulary [0, " + std::to_string(opt_.vocab) + ")";
            return false;
        }
    ensure_cache(static_cast<int64_t>(prompt.size()) + n_new);
    out->clear();
    int64_t tok = 0;
    if (!step(*prefill_, prompt, 0, &tok, logits, err)) return false;
    out->push_back(tok);
    for (int i = 1; i < n_new; i++) {
        int64_t pos = static_cast<int64_t>(prompt.size()) + i - 1;
        // --decode-ids: teacher forcing, the given token instead of the argmax.
        const size_t k = static_cast<size_t>(i - 1);
        int64_t feed = k < opt_.decode_ids.size() ? opt_.decode_ids[k] : tok;
        if (!step(*decode_, {feed}, pos, &tok, logits, err)) return false;
        out->push_back(tok);
    }
    return true;
}

}  // namespace atbsim_lm
