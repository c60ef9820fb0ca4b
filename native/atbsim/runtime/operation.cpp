/*
 * Operations and runners: ATB's Setup/Execute protocol with every probe hook
 * call in real ATB's order (docs/atb_hooks.md §2-§7).
 */
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <set>

#include "internal.h"

using atb::Probe;

namespace atbsim {
namespace {

std::atomic<int64_t> g_operationBaseId{0};

/* ATB resets its setup statistic just before reporting it
 * (atb_hooks.md §4 step 8). */
const char kZeroSetupStatistic[] =
    "totalTime:0, runnerCreateTime:0, runnerSetupTime:0, runnerFillHostTilingTime:0, "
    "setupTotalCount:0, setupCacheHitCount:0, setupCacheMissCount:0, "
    "opsInitLuanchBufferTime:0, tilingCacheHitCount:0, tilingCacheMissCount:0, "
    "tilingLocalCacheHitCount:0, tilingGlobalCacheHitCount:0, kernelCacheGetTilingTime:0, "
    "kernelCacheAddTilingTime:0, kernelCacheCompareRunInfoTime:0, kernelCacheGetRunInfoTime:0";

int32_t DeviceIdOrMinus1()
{
    int32_t dev = -1;
    return aclrtGetDevice(&dev) == ACL_SUCCESS ? dev : -1;
}

const char *BeforeOrAfter()
{
    return Probe::IsSaveTensorBefore() ? "before" : "after";
}

std::vector<int64_t> Append(const std::vector<int64_t> &ids, int64_t i)
{
    std::vector<int64_t> out = ids;
    out.push_back(i);
    return out;
}

bool SameDesc(const TensorDesc &a, const TensorDesc &b)
{
    return a.dtype == b.dtype && a.format == b.format && a.dims == b.dims;
}

/* Keeps `t` if it already has this desc, else allocates a fresh tensor. */
void EnsureTensor(Tensor &t, const TensorDesc &d)
{
    if (t.deviceData == nullptr || !SameDesc(t.desc, d)) {
        t = MakeTensor(d);
    }
}

/* Mki::fp16_t::IsInf: exponent all ones, mantissa zero (0x7C00, 0xFC00). */
bool ReadsAsFp16Inf(uint16_t h)
{
    return (h & 0x7FFF) == 0x7C00;
}

/* ATB's overflow scan in INF_NAN mode (OpsRunner::JudgeOverflowTensor), run
 * after each kernel over the op's outputs: fp16 and bf16 buffers are read as
 * fp16 and tested for Inf, fp32 with isinf; NaN is never an overflow. So a
 * bf16 Inf (0x7F80) is missed and a finite bf16 +-2^121 (0x7C00) reported
 * (docs/atbsim_model.md). */
bool AtbSeesOverflow(const std::vector<Tensor> &outs)
{
    for (const Tensor &t : outs) {
        const auto *p = static_cast<const uint8_t *>(t.deviceData);
        if (p == nullptr) {
            continue;
        }
        if (t.desc.dtype == atb::F32) {
            for (uint64_t off = 0; off + 4 <= t.dataSize; off += 4) {
                uint32_t v;
                std::memcpy(&v, p + off, 4);
                if ((v & 0x7FFFFFFFu) == 0x7F800000u) {
                    return true;
                }
            }
        } else if (t.desc.dtype == atb::F16 || t.desc.dtype == atb::BF16) {
            for (uint64_t off = 0; off + 2 <= t.dataSize; off += 2) {
                uint16_t v;
                std::memcpy(&v, p + off, 2);
                if (ReadsAsFp16Inf(v)) {
                    return true;
                }
            }
        }
    }
    return false;
}

template <typename T, typename Conv>
std::vector<Probe::Tensor> ProbeTensors(const std::vector<T> &tensors, const std::string &dir,
                                        const char *kind, Conv conv)
{
    std::vector<Probe::Tensor> out(tensors.size());
    for (size_t i = 0; i < tensors.size(); ++i) {
        conv(tensors[i], out[i], dir + "/" + kind + std::to_string(i) + ".bin");
    }
    return out;
}

}  // namespace

/* ---- runners ---- */

class Runner {
public:
    explicit Runner(OpImpl *op) : op_(op), tensorDir_(op->runnerName) {}
    virtual ~Runner() = default;

    /* Runner::Setup: UpdateConfig at the end of every runner setup, so
     * children report before their parent (atb_hooks.md §4). */
    Status Setup(const VariantPack &pack, Context &ctx)
    {
        Status st = SetupImpl(pack, ctx);
        Probe::UpdateConfig();
        return st;
    }

    Status Execute(const VariantPack &pack, Context &ctx);

    virtual void SetSaveTensorDir(const std::string &dir) { tensorDir_ = dir; }
    virtual uint64_t TotalTilingSize() const = 0;
    virtual void FillHostTilingBuffer() = 0;

    /* IsTensorNeedSave's answer for this runner (saveTensorFlag_). */
    bool saveTensorFlag = false;

protected:
    virtual Status SetupImpl(const VariantPack &pack, Context &ctx) = 0;
    virtual Status ExecuteImpl(const VariantPack &pack, Context &ctx) = 0;

    /* runner.cpp IsSaveTensor(): asked afresh at each use, short-circuit order. */
    bool IsSaveTensor() const
    {
        return Probe::IsExecuteCountInRange(executeCount_) && saveTensorFlag &&
               Probe::IsSaveTensorInSpecificDir(tensorDir_);
    }

    OpImpl *op_;
    std::string tensorDir_;
    /* Runner::executeCount_: number of Executes so far (0-based in hooks). */
    uint64_t executeCount_ = 0;
};

/* Runner::Execute (atb_hooks.md §5.2). */
Status Runner::Execute(const VariantPack &pack, Context &ctx)
{
    static const std::vector<std::string> kNone;
    const std::vector<std::string> &inIr = op_->isGraph ? kNone : op_->leaf.inIrNames;
    const std::vector<std::string> &outIr = op_->isGraph ? kNone : op_->leaf.outIrNames;
    if (IsSaveTensor() && Probe::IsSaveTensorBefore()) {
        SaveTensors(tensorDir_ + "/before", pack.inTensors, pack.outTensors, inIr, outIr,
                    ctx.GetExecuteStream());
    }
    Status st = ExecuteImpl(pack, ctx);
    if (IsSaveTensor() && Probe::IsSaveTensorAfter()) {
        SaveTensors(tensorDir_ + "/after", pack.inTensors, pack.outTensors, inIr, outIr,
                    ctx.GetExecuteStream());
    }
    if (IsSaveTensor() && Probe::IsSaveParam()) {
        if (!op_->ParamJson().empty()) {
            Probe::SaveParam(op_->ParamJson(), tensorDir_ + "/op_param.json");
        }
    }
    if (Probe::ReportOperationIOTensorEnable() && !op_->isGraph) {
        const std::string dir = tensorDir_ + "/" + BeforeOrAfter();
        auto ins = ProbeTensors(pack.inTensors, dir, "intensor", Probe::AtbTensorToProbeTensor);
        auto outs = ProbeTensors(pack.outTensors, dir, "outtensor", Probe::AtbTensorToProbeTensor);
        Probe::ReportOperationIOTensor(executeCount_, OperationName(op_->name, op_->ids),
                                       op_->ParamJson().empty() ? "{}" : op_->ParamJson(), ins,
                                       outs);
    }
    executeCount_++;  /* even when ExecuteImpl failed */
    return st;
}

/* A leaf op: a fixed list of kernels (ATB OpsRunner). */
class OpsRunner : public Runner {
public:
    explicit OpsRunner(OpImpl *op) : Runner(op) {}

    uint64_t TotalTilingSize() const override
    {
        uint64_t total = 0;
        for (const KernelSpec &k : op_->leaf.kernels) {
            total += k.tilingSize;
        }
        return total;
    }

    /* ops_runner.cpp FillHostTilingBuffer (atb_hooks.md §4). ATB passes a
     * double-offset pointer to SaveTiling for kernels after the first one
     * with tiling (atb_hooks.md §10 item 7); we pass the correct pointer, so
     * real tiling bytes differ. */
    void FillHostTilingBuffer() override
    {
        const std::vector<KernelSpec> &kernels = op_->leaf.kernels;
        for (size_t k = 0; k < kernels.size(); ++k) {
            if (kernels[k].tilingSize == 0) {
                continue;
            }
            std::vector<uint8_t> &buf = tiling_[k];
            if (kernels[k].fillTiling) {
                kernels[k].fillTiling(setupInputs_, buf.data(), buf.size());
            } else {
                for (size_t i = 0; i < buf.size(); ++i) {
                    buf[i] = static_cast<uint8_t>(k * 31 + i + executeCount_);
                }
            }
            const std::string kdir = KernelDir(k);
            if (kernelFlags_[k] && Probe::IsExecuteCountInRange(executeCount_) &&
                Probe::IsSaveTiling() && Probe::IsSaveTensorInSpecificDir(kdir)) {
                Probe::SaveTiling(buf.data(), buf.size(), kdir + "/kernel_tilingdata.bin");
            }
        }
    }

protected:
    Status SetupImpl(const VariantPack &pack, Context &ctx) override
    {
        (void)ctx;
        const LeafOpSpec &spec = op_->leaf;
        if (!kernelGraphReady_) {  /* InitKernelGraph: kernel flags asked once (quirk 8) */
            for (size_t k = 0; k < spec.kernels.size(); ++k) {
                kernelFlags_.push_back(
                    Probe::IsTensorNeedSave(Append(op_->ids, static_cast<int64_t>(k)), op_->name));
            }
            tiling_.resize(spec.kernels.size());
            for (size_t k = 0; k < spec.kernels.size(); ++k) {
                tiling_[k].assign(spec.kernels[k].tilingSize, 0);
            }
            kernelGraphReady_ = true;
        }
        if (pack.inTensors.size() != op_->inNum || pack.outTensors.size() != op_->outNum) {
            LogError(op_->name + ": variant pack has " + std::to_string(pack.inTensors.size()) +
                     " in / " + std::to_string(pack.outTensors.size()) + " out tensors, expected " +
                     std::to_string(op_->inNum) + " / " + std::to_string(op_->outNum));
            return atb::ERROR_INVALID_PARAM;
        }
        setupInputs_.clear();
        std::vector<TensorDesc> inDescs;
        for (const Tensor &t : pack.inTensors) {
            setupInputs_.push_back(Mki::Tensor{t.desc, t.deviceData, t.dataSize});
            inDescs.push_back(t.desc);
        }
        if (spec.inferInternal) {
            std::vector<TensorDesc> tmpDescs;
            if (!spec.inferInternal(inDescs, tmpDescs)) {
                LogError(op_->name + ": inferInternal failed");
                return atb::ERROR_INVALID_PARAM;
            }
            scratch_.resize(tmpDescs.size());
            for (size_t i = 0; i < tmpDescs.size(); ++i) {
                EnsureTensor(scratch_[i], tmpDescs[i]);
            }
        }
        return atb::NO_ERROR;
    }

    /* RunAllKernel / RunKernel (atb_hooks.md §5.3). */
    Status ExecuteImpl(const VariantPack &pack, Context &ctx) override
    {
        const std::vector<KernelSpec> &kernels = op_->leaf.kernels;
        for (size_t k = 0; k < kernels.size(); ++k) {
            const KernelSpec &kernel = kernels[k];
            KernelLaunch launch;
            if (!Resolve(kernel.inputs, pack, launch.inTensors) ||
                !Resolve(kernel.outputs, pack, launch.outTensors)) {
                LogError(op_->name + ": kernel " + kernel.name + " has a bad tensor reference");
                return atb::ERROR_INVALID_TENSOR;
            }
            launch.tiling = tiling_[k].data();
            launch.tilingSize = tiling_[k].size();
            launch.opParam = &op_->leaf.paramJson;
            launch.stream = ctx.GetExecuteStream();
            const std::string kdir = KernelDir(k);
            /* kernel order: count, before/after, then SpecificDir (quirk 3) */
            if (kernelFlags_[k] && Probe::IsExecuteCountInRange(executeCount_) &&
                Probe::IsSaveTensorBefore() && Probe::IsSaveTensorInSpecificDir(kdir)) {
                SaveKernelTensors(kdir + "/before", launch.inTensors, launch.outTensors,
                                  launch.stream);
            }
            if (!kernel.compute || !kernel.compute(launch)) {
                LogError(OperationName(op_->name, op_->ids) + ": kernel " + kernel.name + " failed");
                return atb::ERROR_RT_FAIL;
            }
            if (Probe::IsOverflowCheck()) {
                aclrtSynchronizeStream(launch.stream);
                if (AtbSeesOverflow(pack.outTensors)) {
                    Probe::ReportOverflowKernel(OperationName(op_->name, op_->ids) + ":" +
                                                kernel.name);
                    if (Probe::IsOverflowStop()) {
                        return atb::ERROR_RT_FAIL;
                    }
                }
            }
            if (Probe::ReportKernelIOTensorEnable()) {
                /* the runner's directory, and the Mki op name (quirk 6) */
                const std::string dir = tensorDir_ + "/" + BeforeOrAfter();
                auto ins = ProbeTensors(launch.inTensors, dir, "intensor",
                                        Probe::AsdopsTensorToProbeTensor);
                auto outs = ProbeTensors(launch.outTensors, dir, "outtensor",
                                         Probe::AsdopsTensorToProbeTensor);
                Probe::ReportKernelIOTensor(executeCount_, kernel.mkiOpName, kernel.param, ins,
                                            outs);
            }
            if (kernelFlags_[k] && Probe::IsExecuteCountInRange(executeCount_) &&
                Probe::IsSaveTensorAfter() && Probe::IsSaveTensorInSpecificDir(kdir)) {
                SaveKernelTensors(kdir + "/after", launch.inTensors, launch.outTensors,
                                  launch.stream);
            }
        }
        return atb::NO_ERROR;
    }

private:
    std::string KernelDir(size_t k) const
    {
        return tensorDir_ + "/" + std::to_string(k) + "_" + op_->leaf.kernels[k].name;
    }

    /* The kernel's launch tensors: views of op tensors or scratch tensors. */
    bool Resolve(const std::vector<TensorRef> &refs, const VariantPack &pack,
                 std::vector<Mki::Tensor> &out) const
    {
        for (const TensorRef &r : refs) {
            const std::vector<Tensor> &src = r.kind == TensorRef::IN    ? pack.inTensors
                                             : r.kind == TensorRef::OUT ? pack.outTensors
                                                                        : scratch_;
            if (r.index >= src.size()) {
                return false;
            }
            const Tensor &t = src[r.index];
            Mki::Tensor v{t.desc, t.deviceData, t.dataSize};
            if (r.view) {
                v.desc.dims = r.view(t.desc.dims);
                v.dataSize = DescBytes(v.desc);
                if (v.dataSize > t.dataSize) {
                    return false;
                }
            }
            out.push_back(v);
        }
        return true;
    }

    bool kernelGraphReady_ = false;
    std::vector<bool> kernelFlags_;
    std::vector<std::vector<uint8_t>> tiling_;
    std::vector<Mki::Tensor> setupInputs_;
    std::vector<Tensor> scratch_;
};

/* The descs of every graph tensor slot, inferred node by node. */
bool InferGraphDescs(const OpImpl &op, const std::vector<TensorDesc> &in,
                     std::vector<TensorDesc> &all)
{
    const GraphSpec &g = op.graph;
    all.assign(g.inTensorNum + g.outTensorNum + g.internalTensorNum, TensorDesc());
    std::vector<bool> known(all.size(), false);
    for (size_t i = 0; i < in.size() && i < g.inTensorNum; ++i) {
        all[i] = in[i];
        known[i] = true;
    }
    for (size_t n = 0; n < g.nodes.size(); ++n) {
        const GraphNode &node = g.nodes[n];
        std::vector<TensorDesc> childIn, childOut;
        for (uint32_t id : node.inTensorIds) {
            if (!known[id]) {
                LogError(op.name + ": node " + std::to_string(n) + " reads tensor " +
                         std::to_string(id) + " before any node wrote it");
                return false;
            }
            childIn.push_back(all[id]);
        }
        childOut.resize(node.outTensorIds.size());
        if (!node.op->impl()->InferShape(childIn, childOut)) {
            LogError(op.name + ": InferShape of node " + std::to_string(n) + " (" +
                     node.op->GetName() + ") failed");
            return false;
        }
        for (size_t j = 0; j < node.outTensorIds.size(); ++j) {
            all[node.outTensorIds[j]] = childOut[j];
            known[node.outTensorIds[j]] = true;
        }
    }
    return true;
}

/* A graph op (ATB GraphRunner): runs its child runners in node order. */
class GraphRunner : public Runner {
public:
    explicit GraphRunner(OpImpl *op) : Runner(op) {}

    void SetSaveTensorDir(const std::string &dir) override
    {
        tensorDir_ = dir;
        for (size_t i = 0; i < children_.size(); ++i) {
            children_[i]->SetSaveTensorDir(dir + "/" + std::to_string(i) + "_" +
                                           op_->graph.nodes[i].op->GetName());
        }
    }

    uint64_t TotalTilingSize() const override
    {
        uint64_t total = 0;
        for (const auto &c : children_) {
            total += c->TotalTilingSize();
        }
        return total;
    }

    void FillHostTilingBuffer() override
    {
        for (const auto &c : children_) {
            c->FillHostTilingBuffer();
        }
    }

    std::vector<std::unique_ptr<Runner>> children_;

protected:
    Status SetupImpl(const VariantPack &pack, Context &ctx) override
    {
        const GraphSpec &g = op_->graph;
        if (pack.inTensors.size() != g.inTensorNum || pack.outTensors.size() != g.outTensorNum) {
            LogError(op_->name + ": variant pack has " + std::to_string(pack.inTensors.size()) +
                     " in / " + std::to_string(pack.outTensors.size()) +
                     " out tensors, expected " + std::to_string(g.inTensorNum) + " / " +
                     std::to_string(g.outTensorNum));
            return atb::ERROR_INVALID_PARAM;
        }
        std::vector<TensorDesc> inDescs, all;
        for (const Tensor &t : pack.inTensors) {
            inDescs.push_back(t.desc);
        }
        if (!InferGraphDescs(*op_, inDescs, all)) {
            return atb::ERROR_INVALID_PARAM;
        }
        internals_.resize(g.internalTensorNum);
        const size_t base = g.inTensorNum + g.outTensorNum;
        for (size_t i = 0; i < internals_.size(); ++i) {
            EnsureTensor(internals_[i], all[base + i]);
        }
        for (size_t i = 0; i < children_.size(); ++i) {
            Status st = children_[i]->Setup(ChildPack(i, pack), ctx);
            if (st != atb::NO_ERROR) {
                return st;
            }
        }
        return atb::NO_ERROR;
    }

    Status ExecuteImpl(const VariantPack &pack, Context &ctx) override
    {
        for (size_t i = 0; i < children_.size(); ++i) {
            Status st = children_[i]->Execute(ChildPack(i, pack), ctx);
            if (st != atb::NO_ERROR) {
                return st;
            }
        }
        return atb::NO_ERROR;
    }

private:
    const Tensor &Slot(uint32_t id, const VariantPack &pack) const
    {
        const uint32_t in = op_->graph.inTensorNum, out = op_->graph.outTensorNum;
        if (id < in) {
            return pack.inTensors[id];
        }
        if (id < in + out) {
            return pack.outTensors[id - in];
        }
        return internals_[id - in - out];
    }

    VariantPack ChildPack(size_t i, const VariantPack &pack) const
    {
        VariantPack vp;
        for (uint32_t id : op_->graph.nodes[i].inTensorIds) {
            vp.inTensors.push_back(Slot(id, pack));
        }
        for (uint32_t id : op_->graph.nodes[i].outTensorIds) {
            vp.outTensors.push_back(Slot(id, pack));
        }
        return vp;
    }

    std::vector<Tensor> internals_;
};

/* ---- OpImpl ---- */

OpImpl::OpImpl() = default;
OpImpl::~OpImpl() = default;

const std::string &OpImpl::ParamJson() const
{
    static const std::string kNone;
    return isGraph ? kNone : leaf.paramJson;
}

bool OpImpl::InferShape(const std::vector<TensorDesc> &in, std::vector<TensorDesc> &out) const
{
    if (in.size() != inNum) {
        return false;
    }
    out.assign(outNum, TensorDesc());
    if (!isGraph) {
        return outNum == 0 || leaf.inferShape(in, out);
    }
    std::vector<TensorDesc> all;
    if (!InferGraphDescs(*this, in, all)) {
        return false;
    }
    for (uint32_t i = 0; i < outNum; ++i) {
        out[i] = all[inNum + i];
    }
    return true;
}

void OpImpl::SetIds(const std::vector<int64_t> &newIds)
{
    ids = newIds;
    if (isGraph) {
        for (size_t i = 0; i < graph.nodes.size(); ++i) {
            graph.nodes[i].op->impl()->SetIds(Append(ids, static_cast<int64_t>(i)));
        }
    }
}

std::unique_ptr<Runner> OpImpl::CreateRunner()
{
    if (!isGraph) {
        return std::unique_ptr<Runner>(new OpsRunner(this));
    }
    std::unique_ptr<GraphRunner> runner(new GraphRunner(this));
    for (const GraphNode &node : graph.nodes) {
        OpImpl *child = node.op->impl();
        std::unique_ptr<Runner> childRunner = child->CreateRunner();  /* grandchildren first */
        childRunner->saveTensorFlag = Probe::IsTensorNeedSave(child->ids, child->name);
        runner->children_.push_back(std::move(childRunner));
    }
    return runner;
}

Json OpImpl::GraphInfo() const
{
    Json info = Json::Object();
    info.Set("inTensorNum", Json::Int(inNum))
        .Set("opName", Json::Str(OperationName(name, ids)))
        .Set("opType", Json::Str(name))
        .Set("outTensorNum", Json::Int(outNum));
    if (!isGraph) {
        info.Set("param", leaf.paramJson.empty() ? Json::Null() : Json::Raw(leaf.paramJson));
        return info;
    }
    info.Set("internalTensorNum", Json::Int(graph.internalTensorNum)).Set("param", Json::Str(""));
    Json nodes = Json::Array();
    for (const GraphNode &node : graph.nodes) {
        Json n = node.op->impl()->GraphInfo();
        Json inIds = Json::Array(), outIds = Json::Array();
        for (uint32_t id : node.inTensorIds) {
            inIds.Push(Json::Int(id));
        }
        for (uint32_t id : node.outTensorIds) {
            outIds.Push(Json::Int(id));
        }
        n.Set("inTensorIds", inIds).Set("outTensorIds", outIds);
        nodes.Push(n);
    }
    info.Set("nodes", nodes);
    return info;
}

/* ---- Operation ---- */

Operation::Operation(std::unique_ptr<OpImpl> impl) : impl_(std::move(impl)) {}
Operation::~Operation() = default;

const std::string &Operation::GetName() const { return impl_->name; }
uint32_t Operation::GetInputNum() const { return impl_->inNum; }
uint32_t Operation::GetOutputNum() const { return impl_->outNum; }
const std::vector<int64_t> &Operation::GetIds() const { return impl_->ids; }

bool Operation::InferShape(const std::vector<TensorDesc> &in, std::vector<TensorDesc> &out) const
{
    return impl_->InferShape(in, out);
}

namespace {

/* OperationBase::Setup in eager mode (atb_hooks.md §4), without the
 * statistic epilogue. */
Status EagerSetup(OpImpl &op, const VariantPack &pack, Context &ctx)
{
    /* SetupPrepare: the global id at the first Setup; children get parentIds+[i] */
    if (op.ids.size() == 1 && op.ids[0] < 0) {
        op.SetIds({g_operationBaseId.fetch_add(1)});
    }
    /* SetupCheck (no hooks) */
    if (pack.inTensors.size() != op.inNum || pack.outTensors.size() != op.outNum) {
        LogError(OperationName(op.name, op.ids) + ": Setup got " +
                 std::to_string(pack.inTensors.size()) + " in / " +
                 std::to_string(pack.outTensors.size()) + " out tensors, expected " +
                 std::to_string(op.inNum) + " / " + std::to_string(op.outNum));
        return atb::ERROR_INVALID_PARAM;
    }
    /* CreateRunnerFunc */
    if (!op.runner) {
        op.runner = op.CreateRunner();
        if (Probe::ReportOperationGraphEnable()) {
            Probe::ReportOperationGraph(OperationName(op.name, op.ids), op.GraphInfo().Dump());
        }
    }
    op.runner->saveTensorFlag = Probe::IsTensorNeedSave(op.ids, op.name);  /* every Setup */
    /* Reset: IsSaveTensorDesc really means "build the dump directory tree"
     * (atb_hooks.md §3.1) */
    if (Probe::IsSaveTensorDesc()) {
        op.runner->SetSaveTensorDir(std::to_string(DeviceIdOrMinus1()) + "_" +
                                    std::to_string(syscall(SYS_getpid)) + "/" +
                                    std::to_string(op.opExecuteCount) + "/" +
                                    std::to_string(op.ids.back()) + "_" + op.name);
    }
    Status st = op.runner->Setup(pack, ctx);
    if (st != atb::NO_ERROR) {
        return st;
    }
    if (op.runner->TotalTilingSize() != 0) {
        op.runner->FillHostTilingBuffer();
    }
    op.opExecuteCount++;  /* only on success */
    return atb::NO_ERROR;
}

}  // namespace

Status Operation::Setup(const VariantPack &pack, Context &ctx)
{
    OpImpl &op = *impl_;
    if (op.isChild) {
        LogError(op.name + " is a node of a graph; call Setup on the graph");
        return atb::ERROR_INVALID_PARAM;
    }
    op.everSetUp = true;
    Status st = EagerSetup(op, pack, ctx);
    /* the epilogue runs even when the setup failed; the count is 1-based here */
    if (Probe::ReportOperationStatisticEnable()) {
        Probe::ReportOperationSetupStatistic(op.opExecuteCount, OperationName(op.name, op.ids),
                                             kZeroSetupStatistic);
    }
    return st;
}

Status Operation::Execute(const VariantPack &pack, Context &ctx)
{
    OpImpl &op = *impl_;
    if (op.isChild || !op.runner) {
        LogError(op.name + ": Execute without a successful Setup of this op");
        return atb::ERROR_INVALID_PARAM;
    }
    if (pack.inTensors.size() != op.inNum || pack.outTensors.size() != op.outNum) {
        LogError(OperationName(op.name, op.ids) + ": Execute got a variant pack of the wrong size");
        return atb::ERROR_INVALID_PARAM;
    }
    return op.runner->Execute(pack, ctx);
}

/* ---- factories ---- */

std::shared_ptr<Operation> CreateLeafOperation(LeafOpSpec spec)
{
    const std::string what = "CreateLeafOperation(" + spec.type + "): ";
    if (spec.type.empty() || spec.runnerName.empty()) {
        LogError(what + "type and runnerName must be set");
        return nullptr;
    }
    if (spec.outTensorNum > 0 && !spec.inferShape) {
        LogError(what + "inferShape is required for an op with outputs");
        return nullptr;
    }
    if ((!spec.inIrNames.empty() && spec.inIrNames.size() != spec.inTensorNum) ||
        (!spec.outIrNames.empty() && spec.outIrNames.size() != spec.outTensorNum)) {
        LogError(what + "IR names must be empty or one per tensor");
        return nullptr;
    }
    for (const KernelSpec &k : spec.kernels) {
        if (k.name.empty() || k.mkiOpName.empty() || !k.compute) {
            LogError(what + "every kernel needs a name, a mkiOpName and a compute function");
            return nullptr;
        }
        for (const auto *refs : {&k.inputs, &k.outputs}) {
            for (const TensorRef &r : *refs) {
                if ((r.kind == TensorRef::IN && r.index >= spec.inTensorNum) ||
                    (r.kind == TensorRef::OUT && r.index >= spec.outTensorNum) ||
                    (r.kind == TensorRef::INTERNAL && !spec.inferInternal)) {
                    LogError(what + "kernel " + k.name + " refers to a tensor the op lacks");
                    return nullptr;
                }
            }
        }
    }
    std::unique_ptr<OpImpl> impl(new OpImpl);
    impl->name = spec.type;
    impl->runnerName = spec.runnerName;
    impl->inNum = spec.inTensorNum;
    impl->outNum = spec.outTensorNum;
    impl->leaf = std::move(spec);
    return std::shared_ptr<Operation>(new Operation(std::move(impl)));
}

std::shared_ptr<Operation> CreateGraphOperation(GraphSpec spec)
{
    if (spec.name.empty()) {
        spec.name = "GraphOperation";
    }
    const std::string what = "CreateGraphOperation(" + spec.name + "): ";
    const uint32_t total = spec.inTensorNum + spec.outTensorNum + spec.internalTensorNum;
    std::set<const OpImpl *> seen;
    for (size_t n = 0; n < spec.nodes.size(); ++n) {
        const GraphNode &node = spec.nodes[n];
        const std::string where = what + "node " + std::to_string(n) + ": ";
        if (!node.op) {
            LogError(where + "no operation");
            return nullptr;
        }
        OpImpl *child = node.op->impl();
        if (child->isChild || child->everSetUp || !seen.insert(child).second) {
            LogError(where + node.op->GetName() +
                     " is already a graph node or a top-level op; create a new op object");
            return nullptr;
        }
        if (node.inTensorIds.size() != child->inNum || node.outTensorIds.size() != child->outNum) {
            LogError(where + "tensor id counts do not match " + node.op->GetName() + "'s " +
                     std::to_string(child->inNum) + " in / " + std::to_string(child->outNum) +
                     " out");
            return nullptr;
        }
        for (const auto *ids : {&node.inTensorIds, &node.outTensorIds}) {
            for (uint32_t id : *ids) {
                if (id >= total) {
                    LogError(where + "tensor id " + std::to_string(id) + " out of range (" +
                             std::to_string(total) + " tensors)");
                    return nullptr;
                }
            }
        }
        /* A node may write a graph input in place (ATB-Models' ReshapeAndCache writes the
         * k/v cache inputs): Slot() resolves such an id to the caller's input buffer. */
    }
    for (GraphNode &node : spec.nodes) {
        node.op->impl()->isChild = true;
    }
    std::unique_ptr<OpImpl> impl(new OpImpl);
    impl->isGraph = true;
    impl->name = spec.name;
    impl->runnerName = spec.name + "Runner";
    impl->inNum = spec.inTensorNum;
    impl->outNum = spec.outTensorNum;
    impl->graph = std::move(spec);
    return std::shared_ptr<Operation>(new Operation(std::move(impl)));
}

}  // namespace atbsim
