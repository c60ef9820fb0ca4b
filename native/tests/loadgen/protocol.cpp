#include "protocol.h"

#include <unistd.h>

#include "acl/acl.h"
#include "atb_probe_decl.h"

using atb::Probe;
using atb_speed::SpeedProbe;

namespace loadgen {
namespace {

int64_t g_operationBaseId = 0; // ATB's process-global op id (docs/atb_hooks.md §2.1)
const std::string ND = "2";    // aclFormat ND

Runner MakeRunner(const OpNode &op)
{
    Runner r;
    r.op = &op;
    for (const OpNode &n : op.nodes)
        r.nodes.push_back(MakeRunner(n));
    return r;
}

// At runner creation ATB asks once for each graph node, a nested node
// before its parent (post-order), and caches the answer.
void AskNodes(Runner &r, const std::vector<int64_t> &ids)
{
    for (size_t i = 0; i < r.nodes.size(); ++i) {
        std::vector<int64_t> child = ids;
        child.push_back((int64_t)i);
        AskNodes(r.nodes[i], child);
        r.nodes[i].flag = Probe::IsTensorNeedSave(child, r.nodes[i].op->name);
    }
}

void SetDirs(Runner &r, const std::string &dir)
{
    r.dir = dir;
    for (size_t i = 0; i < r.nodes.size(); ++i)
        SetDirs(r.nodes[i], dir + "/" + std::to_string(i) + "_" + r.nodes[i].op->name);
}

// Without IsSaveTensorDesc a runner keeps its constructor's name as its dir
// (docs/atb_hooks.md §3.1): "<graph>Runner", or "<Type>OpsRunner" for a leaf op.
void SetRunnerNames(Runner &r)
{
    const std::string &name = r.op->name;
    const size_t op = name.rfind("Operation");
    r.dir = r.op->graph() || op == std::string::npos ? name + "Runner"
                                                     : name.substr(0, op) + "OpsRunner";
    for (Runner &n : r.nodes)
        SetRunnerNames(n);
}

// Runner::Setup ends in UpdateConfig: a graph's nodes first, then the graph.
void RunnerSetup(const Runner &r)
{
    for (const Runner &n : r.nodes)
        RunnerSetup(n);
    Probe::UpdateConfig();
}

} // namespace

ModelRunner::ModelRunner(const Model &model, bool withState) : model_(model), withState_(withState)
{
    int32_t dev = -1;
    if (aclrtGetDevice(&dev) != ACL_SUCCESS)
        dev = -1; // what ATB puts in the path then
    devPid_ = std::to_string(dev) + "_" + std::to_string(getpid()) + "/";
    for (const TopOp &op : model.ops) {
        Top top;
        top.op = &op;
        top.root = MakeRunner(op.root);
        tops_.push_back(std::move(top));
    }
}

void ModelRunner::Setup(Top &top)
{
    const std::string &name = top.op->root.name;
    if (top.gid < 0) { // SetupPrepare and CreateRunner, once per op object
        top.gid = g_operationBaseId++;
        AskNodes(top.root, {top.gid});
        if (Probe::ReportOperationGraphEnable())
            Probe::ReportOperationGraph(name + "_" + std::to_string(top.gid),
                                        GraphJson(*top.op, top.gid));
    }
    top.root.flag = Probe::IsTensorNeedSave({top.gid}, name);
    if (Probe::IsSaveTensorDesc())
        SetDirs(top.root, devPid_ + std::to_string(top.setups) + "/" + std::to_string(top.gid) +
                              "_" + name);
    else
        SetRunnerNames(top.root);
    RunnerSetup(top.root);
    top.setups++;
}

void ModelRunner::SavePack(const Top &top, const Runner &r, bool before, Counts &counts)
{
    Probe::IsSaveTensorData(); // ATB syncs the stream on a yes: nothing to sync here
    const std::string dir = r.dir + (before ? "/before/" : "/after/");
    auto save = [&](const std::vector<int> &ids, const std::vector<std::string> &ir,
                    const char *kind, bool defaultStage) {
        for (size_t i = 0; i < ids.size(); ++i) {
            const TensorSpec &t = top.op->tensors[(size_t)ids[i]];
            if (t.state && !withState_)
                continue;
            const std::string file = dir + kind + std::to_string(i) +
                                     (i < ir.size() ? "_" + ir[i] : std::string()) + ".bin";
            Probe::SaveTensor(ND, t.dtype, t.dims, t.data, t.bytes, file);
            counts.calls++;
            counts.saved += defaultStage;
        }
    };
    save(r.op->in, r.op->inIr, "intensor", before);
    save(r.op->out, r.op->outIr, "outtensor", !before);
}

// Runner::Execute (docs/atb_hooks.md §5.2): IsSaveTensor() is asked afresh at each use.
void ModelRunner::Run(const Top &top, Runner &r, Counts &counts)
{
    auto isSave = [&r] {
        return Probe::IsExecuteCountInRange(r.count) && r.flag &&
               Probe::IsSaveTensorInSpecificDir(r.dir);
    };
    if (isSave() && Probe::IsSaveTensorBefore())
        SavePack(top, r, true, counts);
    for (Runner &n : r.nodes)
        Run(top, n, counts);
    if (isSave() && Probe::IsSaveTensorAfter())
        SavePack(top, r, false, counts);
    if (isSave() && Probe::IsSaveParam() && !r.op->param.empty()) {
        Probe::SaveParam(r.op->param, r.dir + "/op_param.json");
        counts.params++;
    }
    // [D] is asked for every runner; the probe answers no, so the IO report's
    // payload (Probe::Tensor lists) is not built here.
    Probe::ReportOperationIOTensorEnable();
    r.count++;
}

void ModelRunner::Execute(Counts &counts, const std::function<void()> &afterOp)
{
    for (Top &top : tops_) {
        Setup(top);
        Run(top, top.root, counts);
        afterOp();
    }
    if (SpeedProbe::IsReportModelTopoInfo(model_.name))
        SpeedProbe::ReportModelTopoInfo(model_.name, model_.topo);
}

} // namespace loadgen
