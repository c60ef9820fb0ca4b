/*
 * atbsim: the public API of the stand-in ATB runtime (libatb.so) and of the
 * stand-in atb_speed model driver (libatb_speed.so). Build your code with the
 * same -D_GLIBCXX_USE_CXX11_ABI=N as the libatb.so you link (cxx_abi_N).
 *
 * Usage: a layer graph "Layer" of two leaf ops, run once.
 *
 *   atbsim::LeafOpSpec mul;                 // (set fields by name: -Wextra
 *   mul.type = "ElewiseOperation";          //  warns on partial aggregate init)
 *   mul.runnerName = "ElewiseOpsRunner"; mul.inTensorNum = 2; mul.outTensorNum = 1;
 *   mul.paramJson = R"({"elewiseType":9})"; mul.inferShape = atbsim::SameAsInput(0);
 *   atbsim::KernelSpec k; k.name = "MulKernel"; k.mkiOpName = "ElewiseOperation";
 *   k.inputs = {atbsim::In(0), atbsim::In(1)}; k.outputs = {atbsim::Out(0)};
 *   k.compute = [](atbsim::KernelLaunch &l) { ...l.inTensors[0].data...; return true; };
 *   mul.kernels.push_back(k);
 *   atbsim::GraphSpec g; g.name = "Layer"; g.inTensorNum = 3; g.outTensorNum = 1;
 *   g.internalTensorNum = 1;                // in 0..2, out 3, internal 4
 *   g.nodes = {{atbsim::CreateLeafOperation(mul), {0, 1}, {4}},
 *              {atbsim::CreateLeafOperation(add), {4, 2}, {3}}};
 *   auto layer = atbsim::CreateGraphOperation(g);
 *   aclrtSetDevice(0); atbsim::Context ctx;
 *   atbsim::VariantPack vp{{x, y, z}, {atbsim::MakeTensor(atbsim::F32, {4})}};
 *   if (layer->Setup(vp, ctx) != 0 || layer->Execute(vp, ctx) != 0) { ...error... }
 *
 * Numbering in a graph is ATB's: inputs [0,in), outputs [in,in+out),
 * internals after. Each op object is either a top-level op (you call Setup
 * on it; it takes a process-global id at its first Setup) or a child of
 * exactly one graph, never both.
 */
#ifndef ATBSIM_RUNTIME_H
#define ATBSIM_RUNTIME_H

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "acl/acl.h"

namespace atb {

/* aclDataType numbers (== Mki enums). */
enum DataType : int { F32 = 0, F16 = 1, I8 = 2, I32 = 3, I64 = 9, BOOL = 12, BF16 = 27 };
/* aclFormat numbers. */
enum Format : int { FORMAT_NCHW = 0, FORMAT_NHWC = 1, FORMAT_ND = 2, FORMAT_NZ = 29 };

struct TensorDesc {
    int dtype = F32;
    int format = FORMAT_ND;
    std::vector<int64_t> dims;
};

/* A "device" tensor. The memory is host memory kept alive by `holder`;
 * deviceData may point into the middle of it. */
struct Tensor {
    TensorDesc desc;
    void *deviceData = nullptr;
    uint64_t dataSize = 0;
    std::shared_ptr<void> holder;
};

using Status = int;
constexpr Status NO_ERROR = 0;
constexpr Status ERROR_INVALID_PARAM = 1;
constexpr Status ERROR_INVALID_TENSOR = 2;
constexpr Status ERROR_RT_FAIL = 3;

}  // namespace atb

/* The tensor a kernel sees (a view of an op tensor). */
namespace Mki {
struct Tensor {
    atb::TensorDesc desc;
    void *data = nullptr;
    uint64_t dataSize = 0;
};
}  // namespace Mki

namespace atbsim {

using atb::BF16;
using atb::BOOL;
using atb::F16;
using atb::F32;
using atb::I32;
using atb::I64;
using atb::I8;
using atb::Status;
using atb::Tensor;
using atb::TensorDesc;

size_t DTypeSize(int dtype);               /* 0 for an unknown dtype */
int64_t NumElements(const std::vector<int64_t> &dims);  /* 1 for 0-d */
uint64_t DescBytes(const TensorDesc &d);
/* A zero-filled tensor owning its memory. */
Tensor MakeTensor(const TensorDesc &d);
Tensor MakeTensor(int dtype, std::vector<int64_t> dims, int format = atb::FORMAT_ND);

struct VariantPack {
    std::vector<Tensor> inTensors;
    std::vector<Tensor> outTensors;
};

/* ---- leaf ops ("OpsRunner") ---- */

/* Which tensor of the op (or of the runner's scratch tensors) a kernel sees,
 * optionally through a view with other dims (same bytes, e.g. a flatten). */
struct TensorRef {
    enum Kind { IN, OUT, INTERNAL } kind = IN;
    uint32_t index = 0;
    std::function<std::vector<int64_t>(const std::vector<int64_t> &)> view;
};
TensorRef In(uint32_t i);
TensorRef Out(uint32_t i);
TensorRef Tmp(uint32_t i);  /* runner-internal scratch tensor i (see LeafOpSpec::inferInternal) */

struct KernelLaunch {
    std::vector<Mki::Tensor> inTensors;
    std::vector<Mki::Tensor> outTensors;
    const uint8_t *tiling = nullptr;  /* tilingSize bytes, filled at Setup */
    uint64_t tilingSize = 0;
    const std::string *opParam = nullptr;  /* the op's paramJson */
    aclrtStream stream = nullptr;
};

struct KernelSpec {
    std::string name;       /* kernel node name, e.g. "MatMulKernel" (kernel dir "<k>_<name>") */
    std::string mkiOpName;  /* Mki op name, e.g. "MatMulOperation" (ReportKernelIOTensor) */
    std::vector<TensorRef> inputs;
    std::vector<TensorRef> outputs;
    uint64_t tilingSize = 0;  /* 0: no tiling (no SaveTiling) */
    std::function<bool(KernelLaunch &)> compute;  /* false = kernel failed */
    std::string param;      /* the kernel's "Mki::Stringify(specificParam)"; may be empty */
    /* optional: fill the tiling bytes at Setup (default: a deterministic pattern) */
    std::function<void(const std::vector<Mki::Tensor> &in, uint8_t *tiling, uint64_t size)> fillTiling;
};

using InferShapeFn =
    std::function<bool(const std::vector<TensorDesc> &in, std::vector<TensorDesc> &out)>;
/* out[i] = in[idx] */
InferShapeFn SameAsInput(uint32_t idx);

struct LeafOpSpec {
    std::string type;        /* op name, e.g. "LinearOperation" */
    std::string runnerName;  /* e.g. "LinearOpsRunner" */
    uint32_t inTensorNum = 0;
    uint32_t outTensorNum = 0;
    std::vector<std::string> inIrNames;   /* empty, or one per input: "intensor0_x.bin" */
    std::vector<std::string> outIrNames;  /* empty, or one per output */
    std::string paramJson;   /* compact JSON, sorted keys; "" = no param (no op_param.json) */
    InferShapeFn inferShape; /* required when outTensorNum > 0 */
    /* optional runner scratch tensors (Tmp(i)), allocated at Setup from the inputs */
    std::function<bool(const std::vector<TensorDesc> &in, std::vector<TensorDesc> &tmp)> inferInternal;
    std::vector<KernelSpec> kernels;  /* may be empty (e.g. an EventOperation) */
};

/* ---- graphs ---- */

class Operation;

struct GraphNode {
    std::shared_ptr<Operation> op;
    std::vector<uint32_t> inTensorIds;
    std::vector<uint32_t> outTensorIds;
};

struct GraphSpec {
    std::string name;  /* "" -> "GraphOperation"; runner name is name + "Runner" */
    uint32_t inTensorNum = 0;
    uint32_t outTensorNum = 0;
    uint32_t internalTensorNum = 0;
    std::vector<GraphNode> nodes;
};

/* ---- context ---- */

class Context {
public:
    /* Calls Probe::IsOverflowCheck() (ATB ContextBase::Init). */
    Context();
    /* Calls Probe::IsOverflowCheck() (ATB ~ContextBase). */
    ~Context();
    Context(const Context &) = delete;
    Context &operator=(const Context &) = delete;
    /* Calls Probe::IsOverflowCheck() (ATB SetExecuteStream). */
    void SetExecuteStream(aclrtStream stream);
    aclrtStream GetExecuteStream() const { return stream_; }
    /* Async execute for atb_speed::Model (default: env ATB_OPERATION_EXECUTE_ASYNC=1|2). */
    void SetAsyncExecute(bool on) { async_ = on; }
    bool AsyncExecute() const { return async_; }

private:
    aclrtStream stream_ = nullptr;
    bool async_ = false;
};

/* ---- operations ---- */

struct OpImpl;

class Operation {
public:
    ~Operation();
    Operation(const Operation &) = delete;
    Operation &operator=(const Operation &) = delete;

    const std::string &GetName() const;
    uint32_t GetInputNum() const;
    uint32_t GetOutputNum() const;
    /* [-1] before the first Setup of a top-level op; parentIds+[i] for a graph child. */
    const std::vector<int64_t> &GetIds() const;
    bool InferShape(const std::vector<TensorDesc> &in, std::vector<TensorDesc> &out) const;
    /* ATB's Setup/Execute with the real probe protocol. Returns NO_ERROR (0) or an error. */
    Status Setup(const VariantPack &pack, Context &ctx);
    Status Execute(const VariantPack &pack, Context &ctx);

    OpImpl *impl() { return impl_.get(); }

private:
    friend std::shared_ptr<Operation> CreateLeafOperation(LeafOpSpec spec);
    friend std::shared_ptr<Operation> CreateGraphOperation(GraphSpec spec);
    explicit Operation(std::unique_ptr<OpImpl> impl);
    std::unique_ptr<OpImpl> impl_;
};

/* nullptr on an invalid spec (the reason goes to stderr). */
std::shared_ptr<Operation> CreateLeafOperation(LeafOpSpec spec);
std::shared_ptr<Operation> CreateGraphOperation(GraphSpec spec);

/* Compact JSON with sorted keys (nlohmann::json::dump() style) for params. */
class Json {
public:
    static Json Null();
    static Json Bool(bool b);
    static Json Int(int64_t v);
    static Json Num(double v);
    static Json Str(const std::string &s);
    static Json Array();
    static Json Object();
    static Json Raw(const std::string &json);  /* already-serialised JSON, embedded as is */
    Json &Set(const std::string &key, Json v);  /* object */
    Json &Push(Json v);                          /* array */
    std::string Dump() const;

private:
    enum Kind { RAW, ARR, OBJ } kind_ = RAW;
    std::string text_ = "null";  /* RAW: the serialised value */
    std::vector<std::pair<std::string, Json>> items_;  /* object (kept sorted) or array */
};

}  // namespace atbsim

/* ---- libatb_speed.so: the layer-by-layer model driver ---- */
namespace atb_speed {

enum class TensorKind { INPUT, OUTPUT, INTERNAL, WEIGHT, KCACHE, VCACHE };

struct TensorId {
    TensorKind kind;
    uint32_t index;
};

struct ModelNode {
    std::shared_ptr<atbsim::Operation> op;  /* a top-level op (own global id) */
    std::vector<TensorId> inTensors;
    std::vector<TensorId> outTensors;
};

class Model {
public:
    /* name e.g. "DecoderModel_Prefill" (topo modelName). */
    explicit Model(std::string name);
    ~Model();
    Model(const Model &) = delete;
    Model &operator=(const Model &) = delete;

    const std::string &GetName() const { return name_; }

    uint32_t inTensorNum = 0;
    uint32_t outTensorNum = 0;
    uint32_t internalTensorNum = 0;  /* allocated by the model from InferShape */
    std::vector<atbsim::Tensor> weightTensors;  /* set by the model author */
    std::vector<atbsim::Tensor> kCacheTensors;
    std::vector<atbsim::Tensor> vCacheTensors;
    std::vector<ModelNode> nodes;

    /* For each node in order: build its variant pack, Setup, Execute (async
     * on a worker thread if ctx.AsyncExecute()); then IsReportModelTopoInfo /
     * ReportModelTopoInfo once; then wait for the async queue. Output tensors
     * without data are allocated from InferShape. Returns the first error. */
    atbsim::Status Execute(atbsim::Context &ctx, const std::vector<atbsim::Tensor> &inTensors,
                           std::vector<atbsim::Tensor> &outTensors);

    /* The topo JSON of docs/atb_hooks.md §9 (compact, sorted keys). */
    std::string TopoJson() const;

private:
    struct Worker;
    std::string name_;
    std::vector<atbsim::Tensor> internals_;
    std::unique_ptr<Worker> worker_;
};

}  // namespace atb_speed

#endif
