/*
 * atb_speed::Model (libatb_speed.so): runs a model as a sequence of
 * top-level ATB ops, optionally executing them on a worker thread while the
 * calling thread sets up the next node (ATB_OPERATION_EXECUTE_ASYNC), and
 * reports its topology through SpeedProbe (docs/atb_hooks.md §9).
 */
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>

#include "internal.h"

namespace atb_speed {

using atbsim::Json;
using atbsim::LogError;
using atbsim::Status;

/* One worker thread, FIFO. The first error is kept and later tasks are skipped. */
struct Model::Worker {
    explicit Worker(int32_t device) : thread_([this, device] { Run(device); }) {}

    ~Worker()
    {
        {
            std::lock_guard<std::mutex> lock(mu_);
            stop_ = true;
        }
        cv_.notify_all();
        thread_.join();
    }

    void Push(std::function<Status()> task)
    {
        {
            std::lock_guard<std::mutex> lock(mu_);
            tasks_.push_back(std::move(task));
        }
        cv_.notify_all();
    }

    /* Waits until the queue is drained; returns and clears the first error. */
    Status Wait()
    {
        std::unique_lock<std::mutex> lock(mu_);
        idle_.wait(lock, [this] { return tasks_.empty() && !busy_; });
        Status st = error_;
        error_ = atb::NO_ERROR;
        return st;
    }

private:
    void Run(int32_t device)
    {
        if (device >= 0) {
            aclrtSetDevice(device);  /* the current device is per thread */
        }
        std::unique_lock<std::mutex> lock(mu_);
        for (;;) {
            cv_.wait(lock, [this] { return stop_ || !tasks_.empty(); });
            if (tasks_.empty()) {
                return;
            }
            std::function<Status()> task = std::move(tasks_.front());
            tasks_.pop_front();
            busy_ = true;
            bool skip = error_ != atb::NO_ERROR;
            lock.unlock();
            Status st = skip ? atb::NO_ERROR : task();
            lock.lock();
            busy_ = false;
            if (st != atb::NO_ERROR && error_ == atb::NO_ERROR) {
                error_ = st;
            }
            if (tasks_.empty()) {
                idle_.notify_all();
            }
        }
    }

    std::mutex mu_;
    std::condition_variable cv_;
    std::condition_variable idle_;
    std::deque<std::function<Status()>> tasks_;
    bool busy_ = false;
    bool stop_ = false;
    Status error_ = atb::NO_ERROR;
    std::thread thread_;
};

Model::Model(std::string name) : name_(std::move(name)) {}
Model::~Model() = default;

namespace {

struct Slots {
    const std::vector<atbsim::Tensor> *in;
    std::vector<atbsim::Tensor> *out;
    std::vector<atbsim::Tensor> *internal;
    const Model *model;
};

atbsim::Tensor *SlotOf(const TensorId &id, const Slots &s)
{
    const std::vector<atbsim::Tensor> *list = nullptr;
    switch (id.kind) {
        case TensorKind::INPUT: list = s.in; break;
        case TensorKind::OUTPUT: list = s.out; break;
        case TensorKind::INTERNAL: list = s.internal; break;
        case TensorKind::WEIGHT: list = &s.model->weightTensors; break;
        case TensorKind::KCACHE: list = &s.model->kCacheTensors; break;
        case TensorKind::VCACHE: list = &s.model->vCacheTensors; break;
    }
    if (list == nullptr || id.index >= list->size()) {
        return nullptr;
    }
    return const_cast<atbsim::Tensor *>(&(*list)[id.index]);
}

const char *KindName(TensorKind k)
{
    switch (k) {
        case TensorKind::INPUT: return "input";
        case TensorKind::OUTPUT: return "output";
        case TensorKind::INTERNAL: return "internal";
        case TensorKind::WEIGHT: return "weight";
        case TensorKind::KCACHE: return "kcache";
        case TensorKind::VCACHE: return "vcache";
    }
    return "unknown";
}

bool SameDesc(const atbsim::TensorDesc &a, const atbsim::TensorDesc &b)
{
    return a.dtype == b.dtype && a.format == b.format && a.dims == b.dims;
}

}  // namespace

Status Model::Execute(atbsim::Context &ctx, const std::vector<atbsim::Tensor> &inTensors,
                      std::vector<atbsim::Tensor> &outTensors)
{
    if (inTensors.size() != inTensorNum) {
        LogError(name_ + ": Execute got " + std::to_string(inTensors.size()) +
                 " input tensors, expected " + std::to_string(inTensorNum));
        return atb::ERROR_INVALID_PARAM;
    }
    outTensors.resize(outTensorNum);
    internals_.resize(internalTensorNum);
    Slots slots{&inTensors, &outTensors, &internals_, this};
    if (ctx.AsyncExecute() && !worker_) {
        int32_t dev = -1;
        (void)aclrtGetDevice(&dev);
        worker_.reset(new Worker(dev));
    }
    Status st = atb::NO_ERROR;
    for (size_t n = 0; n < nodes.size() && st == atb::NO_ERROR; ++n) {
        const ModelNode &node = nodes[n];
        atbsim::VariantPack pack;
        std::vector<atbsim::TensorDesc> inDescs, outDescs;
        bool ok = true;
        for (const TensorId &id : node.inTensors) {
            atbsim::Tensor *t = SlotOf(id, slots);
            ok = ok && t != nullptr && t->deviceData != nullptr;
            if (ok) {
                pack.inTensors.push_back(*t);
                inDescs.push_back(t->desc);
            }
        }
        ok = ok && node.op->InferShape(inDescs, outDescs) &&
             outDescs.size() == node.outTensors.size();
        for (size_t j = 0; ok && j < node.outTensors.size(); ++j) {
            atbsim::Tensor *t = SlotOf(node.outTensors[j], slots);
            ok = t != nullptr && node.outTensors[j].kind != TensorKind::INPUT;
            if (ok && (t->deviceData == nullptr || !SameDesc(t->desc, outDescs[j]))) {
                *t = atbsim::MakeTensor(outDescs[j]);  /* outputs and internals from InferShape */
            }
            if (ok) {
                pack.outTensors.push_back(*t);
            }
        }
        if (!ok) {
            LogError(name_ + ": node " + std::to_string(n) + " (" + node.op->GetName() +
                     ") has a missing tensor or failed InferShape");
            st = atb::ERROR_INVALID_TENSOR;
            break;
        }
        st = node.op->Setup(pack, ctx);
        if (st != atb::NO_ERROR) {
            break;
        }
        if (worker_ && ctx.AsyncExecute()) {
            std::shared_ptr<atbsim::Operation> op = node.op;
            worker_->Push([op, pack, &ctx] { return op->Execute(pack, ctx); });
        } else {
            st = node.op->Execute(pack, ctx);
        }
    }
    if (st == atb::NO_ERROR && atb_speed::SpeedProbe::IsReportModelTopoInfo(name_)) {
        atb_speed::SpeedProbe::ReportModelTopoInfo(name_, TopoJson());
    }
    if (worker_) {
        Status wst = worker_->Wait();
        if (st == atb::NO_ERROR) {
            st = wst;
        }
    }
    return st;
}

std::string Model::TopoJson() const
{
    auto names = [this](TensorKind kind, size_t count) {
        Json arr = Json::Array();
        for (size_t i = 0; i < count; ++i) {
            arr.Push(Json::Str(name_ + "_" + KindName(kind) + "_" + std::to_string(i)));
        }
        return arr;
    };
    auto ids = [this](const std::vector<TensorId> &list) {
        Json arr = Json::Array();
        for (const TensorId &id : list) {
            arr.Push(Json::Str(name_ + "_" + KindName(id.kind) + "_" + std::to_string(id.index)));
        }
        return arr;
    };
    Json topo = Json::Object();
    topo.Set("modelName", Json::Str(name_));
    /* array keys only when non-empty, as ATB-Models */
    const std::pair<const char *, std::pair<TensorKind, size_t>> lists[] = {
        {"inTensors", {TensorKind::INPUT, inTensorNum}},
        {"outTensors", {TensorKind::OUTPUT, outTensorNum}},
        {"internalTensors", {TensorKind::INTERNAL, internalTensorNum}},
        {"weightTensors", {TensorKind::WEIGHT, weightTensors.size()}},
        {"kCacheTensors", {TensorKind::KCACHE, kCacheTensors.size()}},
        {"vCacheTensors", {TensorKind::VCACHE, vCacheTensors.size()}},
    };
    for (const auto &l : lists) {
        if (l.second.second != 0) {
            topo.Set(l.first, names(l.second.first, l.second.second));
        }
    }
    Json nodeArr = Json::Array();
    for (const ModelNode &node : nodes) {
        Json n = Json::Object();
        n.Set("opName", Json::Str(node.op->GetName()));
        if (!node.inTensors.empty()) {
            n.Set("inTensors", ids(node.inTensors));
        }
        if (!node.outTensors.empty()) {
            n.Set("outTensors", ids(node.outTensors));
        }
        nodeArr.Push(n);
    }
    if (!nodes.empty()) {
        topo.Set("nodes", nodeArr);
    }
    return topo.Dump();
}

}  // namespace atb_speed
