#include "ops.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <vector>

namespace atbsim_lm {

using atbsim::In;
using atbsim::KernelLaunch;
using atbsim::Out;
using atbsim::TensorDesc;
using Compute = std::function<bool(KernelLaunch &)>;

namespace {

size_t numel(const Mki::Tensor &t) { return static_cast<size_t>(atbsim::NumElements(t.desc.dims)); }
size_t last_dim(const Mki::Tensor &t) { return t.desc.dims.empty() ? 1 : static_cast<size_t>(t.desc.dims.back()); }
size_t rows_of(const Mki::Tensor &t) { return last_dim(t) ? numel(t) / last_dim(t) : 0; }
Store store_of(const Mki::Tensor &t) { return static_cast<Store>(t.desc.dtype); }
bool is_float(int dtype) { return dtype == atbsim::F32 || dtype == atbsim::F16 || dtype == atbsim::BF16; }
std::vector<float> f32(const Mki::Tensor &t) { return to_f32(t.data, store_of(t), numel(t)); }
void put(const std::vector<float> &v, Mki::Tensor &t) { store_f32(v.data(), numel(t), store_of(t), t.data); }

std::string dtype_tag(Store s) {
    switch (s) {
    case Store::F16: return "F16";
    case Store::BF16: return "BF16";
    default: return "F32";
    }
}

bool fail(const char *kernel, const std::string &why) {
    std::fprintf(stderr, "[atbsim] kernel %s failed: %s\n", kernel, why.c_str());
    return false;
}

// --no-compute: kernels do no arithmetic, so a benchmark measures the runtime
// and the probe, not CPU math; each launch fills its outputs with cheap varying
// data (fill_varying, a new seed a launch), so no two dumped tensors are alike.
Compute math_or_skip(const OpEnv &env, Compute math) {
    if (!env.no_compute) return math;
    return [](KernelLaunch &l) {
        static std::atomic<uint64_t> launches{0};
        for (Mki::Tensor &t : l.outTensors)
            if (t.data) fill_varying(t.data, t.dataSize, launches.fetch_add(1, std::memory_order_relaxed));
        return true;
    };
}

atbsim::LeafOpSpec leaf(const char *type, const char *runner, std::vector<std::string> ins,
                        std::vector<std::string> outs, std::string param, atbsim::InferShapeFn infer) {
    atbsim::LeafOpSpec s;
    s.type = type;
    s.runnerName = runner;
    s.inTensorNum = static_cast<uint32_t>(ins.size());
    s.outTensorNum = static_cast<uint32_t>(outs.size());
    s.inIrNames = std::move(ins);
    s.outIrNames = std::move(outs);
    s.paramJson = std::move(param);
    s.inferShape = std::move(infer);
    return s;
}

atbsim::KernelSpec kernel(std::string name, const char *mki, std::vector<atbsim::TensorRef> ins,
                          std::vector<atbsim::TensorRef> outs, uint64_t tiling, Compute c, std::string param = "") {
    atbsim::KernelSpec k;
    k.name = std::move(name);
    k.mkiOpName = mki;
    k.inputs = std::move(ins);
    k.outputs = std::move(outs);
    k.tilingSize = tiling;
    k.compute = std::move(c);
    k.param = std::move(param);
    return k;
}

// Output = input `idx` with the last dim replaced (or divided).
atbsim::InferShapeFn last_dim_from(std::function<bool(const std::vector<TensorDesc> &, int64_t *)> last, uint32_t idx,
                                   uint32_t outs = 1) {
    return [last, idx, outs](const std::vector<TensorDesc> &in, std::vector<TensorDesc> &out) {
        if (in.size() <= idx || in[idx].dims.empty()) return false;
        int64_t d = 0;
        if (!last(in, &d) || d <= 0) return false;
        TensorDesc t = in[idx];
        t.dims.back() = d;
        out.assign(outs, t);
        return true;
    };
}

const int32_t *i32(const Mki::Tensor &t) { return static_cast<const int32_t *>(t.data); }
const int64_t *i64(const Mki::Tensor &t) { return static_cast<const int64_t *>(t.data); }

std::string json_param(std::initializer_list<std::pair<const char *, atbsim::Json>> items) {
    atbsim::Json j = atbsim::Json::Object();
    for (const auto &kv : items) j.Set(kv.first, kv.second);
    return j.Dump();
}

}  // namespace

atbsim::LeafOpSpec rmsnorm_op(const OpEnv &env, float eps) {
    atbsim::Json norm = atbsim::Json::Object();
    norm.Set("epsilon", atbsim::Json::Num(eps));
    norm.Set("quantType", atbsim::Json::Int(0));
    auto s = leaf("RmsNormOperation", "RmsNormOpsRunner", {"x", "gamma"}, {"y"},
                  json_param({{"layerType", atbsim::Json::Int(1)}, {"normParam", norm}}), atbsim::SameAsInput(0));
    s.kernels.push_back(kernel("RmsNormKernel", "NormOperation", {In(0), In(1)}, {Out(0)}, 32,
                               math_or_skip(env, [eps, half = env.precision_fault](KernelLaunch &l) {
                                   Mki::Tensor &x = l.inTensors[0];
                                   if (numel(l.inTensors[1]) != last_dim(x)) return fail("RmsNormKernel", "gamma size != hidden");
                                   std::vector<float> y(numel(x));
                                   rmsnorm(f32(x).data(), f32(l.inTensors[1]).data(), rows_of(x), last_dim(x), eps, y.data(), half);
                                   put(y, l.outTensors[0]);
                                   return true;
                               }),
                               "NormType: RMS_NORM, epsilon: " + std::to_string(eps)));
    return s;
}

atbsim::LeafOpSpec linear_op(const OpEnv &env) {
    auto infer = last_dim_from([](const std::vector<TensorDesc> &in, int64_t *d) {
        if (in.size() < 2 || in[1].dims.size() != 2 || in[1].dims[1] != in[0].dims.back()) return false;
        *d = in[1].dims[0];
        return true;
    }, 0);
    auto s = leaf("LinearOperation", "LinearOpsRunner", {"x", "weight"}, {"output"},
                  json_param({{"hasBias", atbsim::Json::Bool(false)}, {"outDataType", atbsim::Json::Int(-1)},
                              {"transposeA", atbsim::Json::Bool(false)}, {"transposeB", atbsim::Json::Bool(true)}}),
                  infer);
    s.kernels.push_back(kernel("MatMulKernel", "MatMulOperation", {In(0), In(1)}, {Out(0)}, 64,
                               math_or_skip(env, [half = env.precision_fault](KernelLaunch &l) {
                                   Mki::Tensor &x = l.inTensors[0], &w = l.inTensors[1];
                                   size_t m = rows_of(x), k = last_dim(x), n = rows_of(w);
                                   std::vector<float> y(m * n);
                                   matmul_nt(f32(x).data(), f32(w).data(), m, k, n, y.data(), half);
                                   put(y, l.outTensors[0]);
                                   return true;
                               }),
                               "MatMul: transposeA=0, transposeB=1"));
    return s;
}

atbsim::LeafOpSpec split3_op(const OpEnv &env) {
    auto infer = last_dim_from([](const std::vector<TensorDesc> &in, int64_t *d) {
        if (in[0].dims.back() % 3 != 0) return false;
        *d = in[0].dims.back() / 3;
        return true;
    }, 0, 3);
    auto s = leaf("SplitOperation", "SplitOpsRunner", {"x"}, {"output0", "output1", "output2"},
                  json_param({{"splitDim", atbsim::Json::Int(-1)}, {"splitNum", atbsim::Json::Int(3)}}), infer);
    s.kernels.push_back(kernel("SplitKernel", "SplitOperation", {In(0)}, {Out(0), Out(1), Out(2)}, 16,
                               math_or_skip(env, [](KernelLaunch &l) {
                                   Mki::Tensor &x = l.inTensors[0];
                                   size_t esz = atbsim::DTypeSize(x.desc.dtype), part = last_dim(x) / 3 * esz;
                                   const char *src = static_cast<const char *>(x.data);
                                   for (size_t r = 0; r < rows_of(x); r++)
                                       for (size_t p = 0; p < 3; p++)
                                           std::memcpy(static_cast<char *>(l.outTensors[p].data) + r * part,
                                                       src + (r * 3 + p) * part, part);
                                   return true;
                               }),
                               "Split: splitDim=-1, splitNum=3"));
    return s;
}

atbsim::LeafOpSpec rope_op(const OpEnv &env) {
    // ATB's form: cos/sin come in per token ([tokens, headDim]), seqlen splits the batch.
    constexpr int kCoeff = 2;
    auto s = leaf("RopeOperation", "RopeOpsRunner", {"query", "key", "cos", "sin", "seqlen"}, {"ropeQuery", "ropeKey"},
                  json_param({{"cosFormat", atbsim::Json::Int(0)}, {"rotaryCoeff", atbsim::Json::Int(kCoeff)}}),
                  [](const std::vector<TensorDesc> &in, std::vector<TensorDesc> &out) {
                      if (in.size() != 5) return false;
                      out = {in[0], in[1]};
                      return true;
                  });
    // One kernel per rotated tensor, so the op has two kernel directories.
    for (uint32_t which = 0; which < 2; which++)
        s.kernels.push_back(kernel("RopeKernel", "RopeOperation", {In(which), In(2), In(3)}, {Out(which)}, 16,
                                   math_or_skip(env, [](KernelLaunch &l) {
                                       Mki::Tensor &x = l.inTensors[0];
                                       size_t head_dim = last_dim(l.inTensors[1]);
                                       if (rows_of(l.inTensors[1]) != rows_of(x) || !head_dim || last_dim(x) % head_dim)
                                           return fail("RopeKernel", "cos/sin do not match the query's tokens and heads");
                                       std::vector<float> v = f32(x);
                                       rope(v.data(), f32(l.inTensors[1]).data(), f32(l.inTensors[2]).data(), rows_of(x),
                                            last_dim(x), head_dim, kCoeff);
                                       put(v, l.outTensors[0]);
                                       return true;
                                   }),
                                   "Rope: rotaryCoeff=2"));
    return s;
}

atbsim::LeafOpSpec reshape_and_cache_op(const OpEnv &env) {
    auto s = leaf("ReshapeAndCacheOperation", "ReshapeAndCacheOpsRunner",
                  {"key", "value", "keyCache", "valueCache", "slotMapping"}, {"keyCacheOut", "valueCacheOut"},
                  json_param({{"compressType", atbsim::Json::Int(0)}, {"kvCacheCfg", atbsim::Json::Int(0)}}),
                  [](const std::vector<TensorDesc> &in, std::vector<TensorDesc> &out) {
                      if (in.size() != 5) return false;
                      out = {in[2], in[3]};
                      return true;
                  });
    Compute scatter = [](KernelLaunch &l) {
        const Mki::Tensor &slots = l.inTensors[4];
        for (int kv = 0; kv < 2; kv++) {
            const Mki::Tensor &src = l.inTensors[kv], &cache = l.inTensors[2 + kv];
            Mki::Tensor &dst = l.outTensors[kv];
            // The layer maps the outputs onto the cache inputs (in place, as ATB models do);
            // a host that hands separate buffers gets the old cache contents carried over.
            if (dst.data != cache.data) std::memcpy(dst.data, cache.data, std::min(dst.dataSize, cache.dataSize));
            size_t row = src.dataSize / std::max<size_t>(rows_of(src), 1);
            size_t slots_total = row ? dst.dataSize / row : 0;
            for (size_t r = 0; r < rows_of(src); r++) {
                int32_t slot = i32(slots)[r];
                if (slot < 0 || static_cast<size_t>(slot) >= slots_total)
                    return fail("ReshapeAndCacheNdKernel", "slot " + std::to_string(slot) + " outside the cache");
                std::memcpy(static_cast<char *>(dst.data) + static_cast<size_t>(slot) * row,
                            static_cast<const char *>(src.data) + r * row, row);
            }
        }
        return true;
    };
    s.kernels.push_back(kernel("ReshapeAndCacheNdKernel", "ReshapeAndCacheOperation",
                               {In(0), In(1), In(2), In(3), In(4)}, {Out(0), Out(1)}, 16, math_or_skip(env, scatter)));
    return s;
}

// Prefill is SelfAttentionParam's PA_ENCODER (calcType 3) with the causal mask made
// inside (maskType 9, so no mask input); decode is PagedAttentionParam with no mask
// (maskType 0): one new token sees its whole context.
static std::string attention_param(const OpEnv &env, bool prefill) {
    atbsim::Json j = atbsim::Json::Object();
    if (prefill) j.Set("calcType", atbsim::Json::Int(3));
    j.Set("headNum", atbsim::Json::Int(env.heads));
    j.Set("kvHeadNum", atbsim::Json::Int(env.heads));
    j.Set("maskType", atbsim::Json::Int(prefill ? 9 : 0));
    j.Set("qkScale", atbsim::Json::Num(1.0 / std::sqrt(static_cast<double>(env.head_dim))));
    return j.Dump();
}

atbsim::LeafOpSpec self_attention_op(const OpEnv &env) {
    auto s = leaf("SelfAttentionOperation", "SelfAttentionOpsRunner", {"query", "key", "value", "seqLen"}, {"attnOut"},
                  attention_param(env, true), atbsim::SameAsInput(0));
    int heads = env.heads;
    Store half = env.precision_fault;
    s.kernels.push_back(kernel("FlashAttentionKernel", "UnpadFlashAttentionOperation", {In(0), In(1), In(2), In(3)},
                               {Out(0)}, 128,
                               math_or_skip(env, [heads, half](KernelLaunch &l) {
                                   Mki::Tensor &q = l.inTensors[0];
                                   size_t s_len = rows_of(q), h = static_cast<size_t>(heads), d = last_dim(q) / h;
                                   if (static_cast<size_t>(i32(l.inTensors[3])[0]) != s_len)
                                       return fail("FlashAttentionKernel", "seqLen != query rows");
                                   std::vector<float> o(numel(q));
                                   attention(f32(q).data(), f32(l.inTensors[1]).data(), f32(l.inTensors[2]).data(), s_len,
                                             s_len, h, d, 0, o.data(), half);
                                   put(o, l.outTensors[0]);
                                   return true;
                               }),
                               "UnpadFlashAttention: causal"));
    return s;
}

atbsim::LeafOpSpec paged_attention_op(const OpEnv &env) {
    auto s = leaf("PagedAttentionOperation", "PagedAttentionOpsRunner",
                  {"query", "keyCache", "valueCache", "blockTables", "contextLens"}, {"attnOut"}, attention_param(env, false),
                  atbsim::SameAsInput(0));
    int heads = env.heads, block = env.block_size;
    Store half = env.precision_fault;
    s.kernels.push_back(kernel("PagedAttentionKernel", "PagedAttentionOperation",
                               {In(0), In(1), In(2), In(3), In(4)}, {Out(0)}, 128,
                               math_or_skip(env, [heads, block, half](KernelLaunch &l) {
                                   Mki::Tensor &q = l.inTensors[0];
                                   const Mki::Tensor &tables = l.inTensors[3];
                                   size_t hid = last_dim(q), h = static_cast<size_t>(heads), rows = rows_of(q);
                                   size_t n = static_cast<size_t>(std::max(i32(l.inTensors[4])[0], 0));
                                   if (n < rows || (n + block - 1) / block > numel(tables))
                                       return fail("PagedAttentionKernel", "contextLens outside the block table");
                                   size_t row_bytes = hid * store_size(store_of(q));
                                   std::vector<char> kbuf(n * row_bytes), vbuf(n * row_bytes);
                                   for (size_t j = 0; j < n; j++) {
                                       size_t slot = static_cast<size_t>(i32(tables)[j / block]) * block + j % block;
                                       if ((slot + 1) * row_bytes > l.inTensors[1].dataSize)
                                           return fail("PagedAttentionKernel", "block table points outside the cache");
                                       std::memcpy(&kbuf[j * row_bytes], static_cast<char *>(l.inTensors[1].data) + slot * row_bytes, row_bytes);
                                       std::memcpy(&vbuf[j * row_bytes], static_cast<char *>(l.inTensors[2].data) + slot * row_bytes, row_bytes);
                                   }
                                   std::vector<float> o(numel(q));
                                   attention(f32(q).data(), to_f32(kbuf.data(), store_of(q), n * hid).data(),
                                             to_f32(vbuf.data(), store_of(q), n * hid).data(), rows, n, h, hid / h,
                                             n - rows, o.data(), half);
                                   put(o, l.outTensors[0]);
                                   return true;
                               }),
                               "PagedAttention: blockSize=" + std::to_string(block)));
    return s;
}

atbsim::LeafOpSpec add_op(const OpEnv &env, Store dtype) {
    auto s = leaf("ElewiseOperation", "ElewiseOpsRunner", {"x", "y"}, {"output"},
                  json_param({{"elewiseType", atbsim::Json::Int(8)}}), atbsim::SameAsInput(0));
    std::string name = "Add" + dtype_tag(dtype) + "Kernel";
    s.kernels.push_back(kernel(name, "ElewiseOperation", {In(0), In(1)}, {Out(0)}, 16,
                               math_or_skip(env, [name](KernelLaunch &l) {
                                   if (numel(l.inTensors[0]) != numel(l.inTensors[1])) return fail(name.c_str(), "shape mismatch");
                                   std::vector<float> y(numel(l.inTensors[0]));
                                   add(f32(l.inTensors[0]).data(), f32(l.inTensors[1]).data(), y.size(), y.data());
                                   put(y, l.outTensors[0]);
                                   return true;
                               }),
                               "Elewise: ELEWISE_ADD"));
    return s;
}

atbsim::LeafOpSpec swiglu_op(const OpEnv &env) {
    auto infer = last_dim_from([](const std::vector<TensorDesc> &in, int64_t *d) {
        if (in[0].dims.back() % 2 != 0) return false;
        *d = in[0].dims.back() / 2;
        return true;
    }, 0);
    auto s = leaf("ActivationOperation", "ActivationOpsRunner", {"x"}, {"y"},
                  json_param({{"activationType", atbsim::Json::Int(6)}, {"dim", atbsim::Json::Int(-1)}}), infer);
    s.kernels.push_back(kernel("SwiGluKernel", "ActivationOperation", {In(0)}, {Out(0)}, 16,
                               math_or_skip(env, [half = env.precision_fault](KernelLaunch &l) {
                                   Mki::Tensor &y = l.outTensors[0];
                                   std::vector<float> out(numel(y));
                                   swiglu(f32(l.inTensors[0]).data(), rows_of(y), last_dim(y), out.data(), half);
                                   put(out, y);
                                   return true;
                               }),
                               "Activation: SWIGLU_FORWARD, dim=-1"));
    return s;
}

atbsim::LeafOpSpec gather_op(const OpEnv &env, Store dtype) {
    auto s = leaf("GatherOperation", "GatherOpsRunner", {"x", "indices"}, {"y"},
                  json_param({{"axis", atbsim::Json::Int(0)}, {"batchDims", atbsim::Json::Int(0)}}),
                  [](const std::vector<TensorDesc> &in, std::vector<TensorDesc> &out) {
                      if (in.size() != 2 || in[0].dims.empty()) return false;
                      TensorDesc t = in[0];
                      t.dims = in[1].dims;
                      t.dims.insert(t.dims.end(), in[0].dims.begin() + 1, in[0].dims.end());
                      out = {t};
                      return true;
                  });
    std::string name = dtype == Store::F32 ? "Gather32I64Kernel" : "Gather16I64Kernel";
    s.kernels.push_back(kernel(name, "GatherOperation", {In(0), In(1)}, {Out(0)}, 16,
                               math_or_skip(env, [name](KernelLaunch &l) {
                                   const Mki::Tensor &table = l.inTensors[0], &idx = l.inTensors[1];
                                   size_t rows = static_cast<size_t>(table.desc.dims[0]);
                                   size_t row = rows ? table.dataSize / rows : 0;
                                   for (size_t i = 0; i < numel(idx); i++) {
                                       int64_t r = i64(idx)[i];
                                       if (r < 0 || static_cast<size_t>(r) >= rows)
                                           return fail(name.c_str(), "index " + std::to_string(r) + " outside [0, " +
                                                                         std::to_string(rows) + ")");
                                       std::memcpy(static_cast<char *>(l.outTensors[0].data) + i * row,
                                                   static_cast<const char *>(table.data) + static_cast<size_t>(r) * row, row);
                                   }
                                   return true;
                               }),
                               "Gather: axis=0"));
    return s;
}

atbsim::LeafOpSpec event_op() {
    // Like ATB's EventOperation: no tensors, no kernels, only a param.
    return leaf("EventOperation", "EventRunner", {}, {},
                json_param({{"event", atbsim::Json::Int(0)}, {"operatorType", atbsim::Json::Int(1)}}), nullptr);
}

// ATB's GenerateOperationName: type + "_<id>" per id (as in ReportOverflowKernel).
static std::string atbsim_op_name(const atbsim::Operation &op) {
    std::string name = op.GetName();
    for (int64_t id : op.GetIds()) name += "_" + std::to_string(id);
    return name;
}

bool attach_injection(atbsim::LeafOpSpec &spec, std::shared_ptr<InjectSite> site, std::string *err) {
    const uint32_t want = static_cast<uint32_t>(site->spec.out);
    for (size_t k = spec.kernels.size(); k-- > 0;) {
        atbsim::KernelSpec &kern = spec.kernels[k];
        for (size_t pos = 0; pos < kern.outputs.size(); pos++) {
            if (kern.outputs[pos].kind != atbsim::TensorRef::OUT || kern.outputs[pos].index != want) continue;
            if (want < spec.outIrNames.size()) site->ir_name = spec.outIrNames[want];
            Compute inner = kern.compute;
            std::string kname = kern.name;
            kern.compute = [inner, site, pos, kname](KernelLaunch &l) {
                if (!inner(l)) return false;
                if (site->round->load() != site->spec.round) return true;
                Mki::Tensor &t = l.outTensors[pos];
                if (!is_float(t.desc.dtype)) return fail(kname.c_str(), "--inject: output is not a float tensor");
                if (site->spec.scale != 0.0) {
                    std::vector<float> v = f32(t);
                    for (float &x : v) x = static_cast<float>(x * site->spec.scale);
                    put(v, t);
                } else if (site->spec.elem >= numel(t)) {
                    return fail(kname.c_str(), "--inject " + site->spec.describe() + ": elem " +
                                                   std::to_string(site->spec.elem) + " is outside the output (" +
                                                   std::to_string(numel(t)) + " elements)");
                } else {
                    poke(t.data, store_of(t), site->spec.elem, site->spec.value);
                }
                site->fired++;
                const std::vector<int64_t> &ids = site->op->GetIds();
                std::string dir = std::to_string(site->spec.round) + "/" + std::to_string(ids[0]) + "_" + site->graph;
                if (ids.size() > 1) dir += "/" + std::to_string(ids[1]) + "_" + site->op->GetName();
                std::string file = "outtensor" + std::to_string(site->spec.out) +
                                   (site->ir_name.empty() ? "" : "_" + site->ir_name) + ".bin";
                std::fprintf(stderr, "[atbsim] injected %s (%s:%s) -> %d_%d/%s/after/%s\n",
                             site->spec.describe().c_str(), atbsim_op_name(*site->op).c_str(), kname.c_str(),
                             site->device, static_cast<int>(getpid()), dir.c_str(), file.c_str());
                return true;
            };
            return true;
        }
    }
    *err = "--inject " + site->spec.describe() + ": " + spec.type + " has no output " + std::to_string(want);
    return false;
}

}  // namespace atbsim_lm
