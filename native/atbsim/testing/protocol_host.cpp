/*
 * Test host for the stand-in runtime's probe protocol. Builds one small layer
 * graph covering every runner shape and runs setup/execute rounds:
 *
 *   Layer (in: x[2,4], w[4,4], r[2,4], alpha[] ; out: y[2,4] ; internal: h)
 *     0 LinearOperation   (x, w) -> h     IR names; kernels MatMulKernel (tiling 16,
 *                                          into a runner scratch tensor) and MulsKernel
 *                                          (tiling 8, scratch -> h, flat [8] views)
 *     1 Residual (graph)  (h, r, alpha) -> y
 *         0 ElewiseOperation    (h, r) -> s      kernel AddKernel
 *         1 ActivationOperation (s, alpha) -> y  kernel SwishKernel, no param
 *     2 EventOperation    () -> ()         no tensors, no kernels
 *
 * Usage: protocol_host_abiN [--rounds N] [--model | --leaf] [--async] [--overflow]
 *                           [--no-device] [--stream] | --bad-input
 *   --model  run "TinyModel_Prefill" (2 Layer nodes) through atb_speed::Model
 *   --async  Model execute on a worker thread (ATB_OPERATION_EXECUTE_ASYNC)
 *   --leaf   run a top-level leaf op instead: CastOperation x[2,4] f32 -> (f16, bf16)
 *            with kernels CastF16Kernel and CastBf16Kernel
 *   --overflow  an Inf in x (so every kernel's output overflows)
 *   --bad-input  misuse the API; print "<case>=ok" (refused as it should be,
 *                or accepted for the one valid case) or "<case>=WRONG" per case
 * Prints "status=<code>" and exits non-zero on error.
 */
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "atbsim/runtime.h"

using atbsim::KernelLaunch;
using atbsim::KernelSpec;
using atbsim::LeafOpSpec;

namespace {

float *F(const Mki::Tensor &t) { return static_cast<float *>(t.data); }
int64_t N(const Mki::Tensor &t) { return atbsim::NumElements(t.desc.dims); }

KernelSpec Kernel(const char *name, const char *mki, std::vector<atbsim::TensorRef> in,
                  std::vector<atbsim::TensorRef> out, uint64_t tiling,
                  std::function<bool(KernelLaunch &)> fn)
{
    KernelSpec k;
    k.name = name;
    k.mkiOpName = mki;
    k.inputs = std::move(in);
    k.outputs = std::move(out);
    k.tilingSize = tiling;
    k.compute = std::move(fn);
    return k;
}

LeafOpSpec Leaf(const char *type, const char *runner, uint32_t in, uint32_t out, const char *param)
{
    LeafOpSpec s;
    s.type = type;
    s.runnerName = runner;
    s.inTensorNum = in;
    s.outTensorNum = out;
    s.paramJson = param;
    if (out != 0) {
        s.inferShape = atbsim::SameAsInput(0);
    }
    return s;
}

std::vector<int64_t> Flat(const std::vector<int64_t> &dims) { return {atbsim::NumElements(dims)}; }

std::shared_ptr<atbsim::Operation> MakeLinear()
{
    LeafOpSpec s = Leaf("LinearOperation", "LinearOpsRunner", 2, 1,
                        R"({"hasBias":false,"transposeB":true})");
    s.inIrNames = {"x", "weight"};
    s.outIrNames = {"output"};
    s.inferInternal = [](const std::vector<atbsim::TensorDesc> &in,
                         std::vector<atbsim::TensorDesc> &tmp) {
        tmp = {in[0]};  // the unscaled product, same shape as x
        return true;
    };
    KernelSpec mm = Kernel("MatMulKernel", "MatMulOperation", {atbsim::In(0), atbsim::In(1)},
                           {atbsim::Tmp(0)}, 16, [](KernelLaunch &l) {
                               const auto &x = l.inTensors[0], &w = l.inTensors[1];
                               const int64_t m = x.desc.dims[0], k = x.desc.dims[1];
                               const int64_t n = w.desc.dims[0];
                               for (int64_t i = 0; i < m; ++i) {
                                   for (int64_t j = 0; j < n; ++j) {
                                       float acc = 0;
                                       for (int64_t p = 0; p < k; ++p) {
                                           acc += F(x)[i * k + p] * F(w)[j * k + p];
                                       }
                                       F(l.outTensors[0])[i * n + j] = acc;
                                   }
                               }
                               return true;
                           });
    mm.param = "transposeA:0,transposeB:1";
    atbsim::TensorRef flatTmp = atbsim::Tmp(0), flatOut = atbsim::Out(0);
    flatTmp.view = Flat;
    flatOut.view = Flat;
    KernelSpec muls = Kernel("MulsKernel", "ElewiseOperation", {flatTmp}, {flatOut}, 8,
                             [](KernelLaunch &l) {
                                 for (int64_t i = 0; i < N(l.outTensors[0]); ++i) {
                                     F(l.outTensors[0])[i] = F(l.inTensors[0])[i] * 0.5f;
                                 }
                                 return true;
                             });
    s.kernels = {mm, muls};
    return atbsim::CreateLeafOperation(s);
}

std::shared_ptr<atbsim::Operation> MakeResidual()
{
    LeafOpSpec add = Leaf("ElewiseOperation", "ElewiseOpsRunner", 2, 1, R"({"elewiseType":8})");
    add.kernels = {Kernel("AddKernel", "ElewiseOperation", {atbsim::In(0), atbsim::In(1)},
                          {atbsim::Out(0)}, 0, [](KernelLaunch &l) {
                              for (int64_t i = 0; i < N(l.outTensors[0]); ++i) {
                                  F(l.outTensors[0])[i] = F(l.inTensors[0])[i] + F(l.inTensors[1])[i];
                              }
                              return true;
                          })};
    LeafOpSpec act = Leaf("ActivationOperation", "ActivationOpsRunner", 2, 1, "");
    act.kernels = {Kernel("SwishKernel", "ActivationOperation", {atbsim::In(0), atbsim::In(1)},
                          {atbsim::Out(0)}, 0, [](KernelLaunch &l) {
                              const float beta = F(l.inTensors[1])[0];
                              for (int64_t i = 0; i < N(l.outTensors[0]); ++i) {
                                  const float v = F(l.inTensors[0])[i];
                                  F(l.outTensors[0])[i] = v / (1.0f + std::exp(-beta * v));
                              }
                              return true;
                          })};
    atbsim::GraphSpec g;
    g.name = "Residual";
    g.inTensorNum = 3;
    g.outTensorNum = 1;
    g.internalTensorNum = 1;  // in 0..2, out 3, internal 4
    g.nodes = {{atbsim::CreateLeafOperation(add), {0, 1}, {4}},
               {atbsim::CreateLeafOperation(act), {4, 2}, {3}}};
    return atbsim::CreateGraphOperation(g);
}

std::shared_ptr<atbsim::Operation> MakeLayer()
{
    LeafOpSpec event = Leaf("EventOperation", "EventRunner", 0, 0, R"({"eventType":1})");
    atbsim::GraphSpec g;
    g.name = "Layer";
    g.inTensorNum = 4;
    g.outTensorNum = 1;
    g.internalTensorNum = 1;  // in 0..3, out 4, internal 5
    g.nodes = {{MakeLinear(), {0, 1}, {5}},
               {MakeResidual(), {5, 2, 3}, {4}},
               {atbsim::CreateLeafOperation(event), {}, {}}};
    return atbsim::CreateGraphOperation(g);
}

uint16_t ToBf16(float f)
{
    uint32_t bits;
    std::memcpy(&bits, &f, 4);
    return static_cast<uint16_t>(bits >> 16);  // truncation is enough here
}

uint16_t ToF16(float f)
{
    uint32_t bits;
    std::memcpy(&bits, &f, 4);
    const uint16_t sign = static_cast<uint16_t>((bits >> 16) & 0x8000);
    const int exp = static_cast<int>((bits >> 23) & 0xFF) - 127 + 15;
    if (std::isnan(f)) {
        return sign | 0x7E00;
    }
    if (std::isinf(f) || exp >= 31) {
        return sign | 0x7C00;
    }
    if (exp <= 0) {
        return sign;  // flush tiny values to zero
    }
    return static_cast<uint16_t>(sign | (exp << 10) | ((bits >> 13) & 0x3FF));
}

std::shared_ptr<atbsim::Operation> MakeCast()
{
    LeafOpSpec s = Leaf("CastOperation", "CastOpsRunner", 1, 2, R"({"outTensorType":1})");
    s.inferShape = [](const std::vector<atbsim::TensorDesc> &in,
                      std::vector<atbsim::TensorDesc> &out) {
        out[0] = in[0];
        out[0].dtype = atbsim::F16;
        out[1] = in[0];
        out[1].dtype = atbsim::BF16;
        return true;
    };
    auto cast = [](uint16_t (*conv)(float)) {
        return [conv](KernelLaunch &l) {
            auto *dst = static_cast<uint16_t *>(l.outTensors[0].data);
            for (int64_t i = 0; i < N(l.inTensors[0]); ++i) {
                dst[i] = conv(F(l.inTensors[0])[i]);
            }
            return true;
        };
    };
    s.kernels = {Kernel("CastF16Kernel", "ElewiseOperation", {atbsim::In(0)}, {atbsim::Out(0)}, 0,
                        cast(ToF16)),
                 Kernel("CastBf16Kernel", "ElewiseOperation", {atbsim::In(0)}, {atbsim::Out(1)},
                        0, cast(ToBf16))};
    return atbsim::CreateLeafOperation(s);
}

atbsim::Tensor Filled(std::vector<int64_t> dims, float base)
{
    atbsim::Tensor t = atbsim::MakeTensor(atbsim::F32, std::move(dims));
    float *p = static_cast<float *>(t.deviceData);
    for (int64_t i = 0; i < atbsim::NumElements(t.desc.dims); ++i) {
        p[i] = base + 0.25f * static_cast<float>(i);
    }
    return t;
}

/* Every misuse must be refused with a message, never crash. */
int BadInput()
{
    auto report = [](const char *name, bool asExpected) {
        std::printf("%s=%s\n", name, asExpected ? "ok" : "WRONG");
    };
    LeafOpSpec noInfer = Leaf("LinearOperation", "LinearOpsRunner", 2, 1, "");
    noInfer.inferShape = nullptr;
    report("leaf_without_infershape", atbsim::CreateLeafOperation(noInfer) == nullptr);
    LeafOpSpec badRef = Leaf("ElewiseOperation", "ElewiseOpsRunner", 1, 1, "");
    badRef.kernels = {Kernel("AddKernel", "ElewiseOperation", {atbsim::In(3)}, {atbsim::Out(0)}, 0,
                             [](KernelLaunch &) { return true; })};
    report("kernel_bad_tensor_ref", atbsim::CreateLeafOperation(badRef) == nullptr);

    auto leaf = atbsim::CreateLeafOperation(Leaf("ElewiseOperation", "ElewiseOpsRunner", 1, 1, ""));
    atbsim::GraphSpec g;
    g.name = "Bad";
    g.inTensorNum = 1;
    g.outTensorNum = 1;
    g.nodes = {{leaf, {0}, {7}}};
    report("graph_id_out_of_range", atbsim::CreateGraphOperation(g) == nullptr);
    g.nodes = {{leaf, {0, 0}, {1}}};
    report("graph_wrong_tensor_count", atbsim::CreateGraphOperation(g) == nullptr);
    g.nodes = {{leaf, {0}, {1}}, {leaf, {1}, {1}}};
    report("graph_same_op_twice", atbsim::CreateGraphOperation(g) == nullptr);
    g.nodes = {{leaf, {0}, {1}}};
    auto graph = atbsim::CreateGraphOperation(g);
    report("graph_ok", graph != nullptr);
    report("op_in_two_graphs", atbsim::CreateGraphOperation(g) == nullptr);

    atbsim::Context ctx;
    atbsim::VariantPack empty;
    report("setup_child_directly", leaf->Setup(empty, ctx) != 0);
    report("execute_before_setup", graph->Execute(empty, ctx) != 0);
    report("setup_wrong_pack", graph->Setup(empty, ctx) != 0);
    return 0;
}

}  // namespace

int main(int argc, char **argv)
{
    int rounds = 2;
    bool model = false, leaf = false, async = false, overflow = false, device = true, stream = false;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if (a == "--rounds" && i + 1 < argc) {
            rounds = std::atoi(argv[++i]);
        } else if (a == "--model") {
            model = true;
        } else if (a == "--leaf") {
            leaf = true;
        } else if (a == "--async") {
            async = true;
        } else if (a == "--overflow") {
            overflow = true;
        } else if (a == "--no-device") {
            device = false;
        } else if (a == "--stream") {
            stream = true;
        } else if (a == "--bad-input") {
            return BadInput();
        } else {
            std::fprintf(stderr, "protocol_host: unknown argument %s\n", a.c_str());
            return 2;
        }
    }
    if (device && aclrtSetDevice(0) != ACL_SUCCESS) {
        return 2;
    }
    int status = 0;
    aclrtStream s = nullptr;
    {
        atbsim::Context ctx;
        if (stream) {
            aclrtCreateStream(&s);
            ctx.SetExecuteStream(s);
        }
        ctx.SetAsyncExecute(async);
        atbsim::Tensor x = Filled({2, 4}, 1.0f), w = Filled({4, 4}, -1.0f);
        atbsim::Tensor r = Filled({2, 4}, 3.0f), alpha = Filled({}, 1.0f);
        if (overflow) {
            static_cast<float *>(x.deviceData)[0] = INFINITY;
        }
        if (model) {
            atb_speed::Model m("TinyModel_Prefill");
            using atb_speed::TensorKind;
            m.inTensorNum = 3;  // x, r, alpha
            m.outTensorNum = 1;
            m.internalTensorNum = 1;
            m.weightTensors = {w, Filled({4, 4}, 0.5f)};
            m.nodes = {{MakeLayer(),
                        {{TensorKind::INPUT, 0}, {TensorKind::WEIGHT, 0}, {TensorKind::INPUT, 1},
                         {TensorKind::INPUT, 2}},
                        {{TensorKind::INTERNAL, 0}}},
                       {MakeLayer(),
                        {{TensorKind::INTERNAL, 0}, {TensorKind::WEIGHT, 1},
                         {TensorKind::INPUT, 1}, {TensorKind::INPUT, 2}},
                        {{TensorKind::OUTPUT, 0}}}};
            std::vector<atbsim::Tensor> outs;
            for (int round = 0; round < rounds && status == 0; ++round) {
                status = m.Execute(ctx, {x, r, alpha}, outs);
            }
        } else {
            auto op = leaf ? MakeCast() : MakeLayer();
            atbsim::VariantPack vp{{x, w, r, alpha}, {atbsim::MakeTensor(atbsim::F32, {2, 4})}};
            if (leaf) {
                vp = {{x}, {atbsim::MakeTensor(atbsim::F16, {2, 4}),
                            atbsim::MakeTensor(atbsim::BF16, {2, 4})}};
            }
            for (int round = 0; round < rounds && status == 0; ++round) {
                status = op->Setup(vp, ctx);
                if (status == 0) {
                    status = op->Execute(vp, ctx);
                }
            }
        }
    }
    if (s != nullptr) {
        aclrtDestroyStream(s);
    }
    std::printf("status=%d\n", status);
    return status == 0 ? 0 : 1;
}
