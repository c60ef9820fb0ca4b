/*
 * Test-only LD_PRELOAD probe: defines every atb::Probe / atb_speed::SpeedProbe
 * hook (never the two real helpers), answers the predicates from a
 * configuration and logs every call as one JSON line.
 *
 * Environment:
 *   RECPROBE_LOG      file the JSON lines are appended to (one write(2) per line)
 *   RECPROBE_ANSWERS  base[,Hook=0|1...]; base is "defaults" (ATB's answers),
 *                     "all-true" or "desc-false" (all-true but IsSaveTensorDesc);
 *                     e.g. "all-true,IsOverflowStop=0"
 *   RECPROBE_THROW    "1": the first SaveTensor call throws std::runtime_error
 *   RECPROBE_OVERLAP  "<Hook>#<k>": the first thread's k-th call of Hook waits
 *                     (up to 5 s) inside the hook until another thread calls a
 *                     hook, and logs {"fn":"_overlap","ret":<seen>,...}: proof
 *                     that two threads were inside hooks at the same time.
 *                     Other threads' calls are held until that moment.
 *   RECPROBE_CHECK_FREE "1": remember the last SaveTensor buffer; when the host
 *                     frees it, log {"fn":"_freed","size":N,"poisoned":bytes==0xA5}
 *
 * Line: {"seq":n,"tid":t,"fn":"Name","args":{...},"ret":...}; seq is taken at entry.
 */
#include <fcntl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "atb/probe.h"

extern "C" void __libc_free(void *ptr);

namespace {

using ProbeTensors = std::vector<atb::Probe::Tensor>;

/* State the free() wrapper reads: constant-initialised globals, because free()
 * runs before and during the Recorder's own construction. */
std::atomic<int> g_logFd{-1};
std::atomic<void *> g_kept{nullptr};
std::atomic<uint64_t> g_keptSize{0};

std::string Quote(const std::string &s)
{
    std::string out = "\"";
    for (unsigned char c : s) {
        if (c == '"' || c == '\\') {
            out += '\\';
            out += static_cast<char>(c);
        } else if (c < 0x20) {
            char buf[8];
            std::snprintf(buf, sizeof buf, "\\u%04x", c);
            out += buf;
        } else {
            out += static_cast<char>(c);
        }
    }
    return out + "\"";
}

std::string Fnv(const void *data, uint64_t size)
{
    uint64_t h = 0xcbf29ce484222325ULL;
    const auto *p = static_cast<const unsigned char *>(data);
    for (uint64_t i = 0; i < size; ++i) {
        h = (h ^ p[i]) * 0x100000001b3ULL;
    }
    char hex[17];
    std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(h));
    return hex;
}

std::string TensorsJson(const ProbeTensors &ts)
{
    std::string s = "[";
    for (size_t i = 0; i < ts.size(); ++i) {
        s += (i ? "," : "");
        s += "{\"dtype\":" + Quote(ts[i].dtype) + ",\"format\":" + Quote(ts[i].format) +
             ",\"shape\":" + Quote(ts[i].shape) + ",\"filePath\":" + Quote(ts[i].filePath) + "}";
    }
    return s + "]";
}

class Recorder {
public:
    static Recorder &Get()
    {
        static Recorder r;
        return r;
    }

    /* Takes the entry sequence number and handles the overlap rendezvous. */
    uint64_t Enter(const char *fn)
    {
        const long tid = syscall(SYS_gettid);
        long none = 0;
        firstTid_.compare_exchange_strong(none, tid);
        if (!overlapFn_.empty() && tid != firstTid_.load()) {
            HoldUntilFirstThreadWaits();
        }
        const uint64_t seq = seq_.fetch_add(1);
        const long waiting = waitingTid_.load();
        if (waiting != 0 && waiting != tid) {
            uint64_t unset = 0;
            foreignSeq_.compare_exchange_strong(unset, seq + 1);
        }
        if (!overlapFn_.empty() && overlapFn_ == fn && tid == firstTid_.load() &&
            ++overlapCount_ == overlapK_) {
            WaitForOtherThread(seq, tid, fn);
        }
        return seq;
    }

    void Log(uint64_t seq, const char *fn, const std::string &args, const std::string &ret)
    {
        std::string line = "{\"seq\":" + std::to_string(seq) +
                           ",\"tid\":" + std::to_string(syscall(SYS_gettid)) + ",\"fn\":\"" + fn +
                           "\",\"args\":{" + args + "},\"ret\":" + ret + "}\n";
        Write(line);
    }

    bool Answer(const char *hook) const
    {
        auto it = overrides_.find(hook);
        if (it != overrides_.end()) {
            return it->second;
        }
        if (base_ == "defaults") {
            return std::strcmp(hook, "IsSaveTensorInSpecificDir") == 0;
        }
        if (base_ == "desc-false" && std::strcmp(hook, "IsSaveTensorDesc") == 0) {
            return false;
        }
        return true;
    }

    bool TakeThrow() { return throwOnce_.exchange(false); }

    /* RECPROBE_CHECK_FREE: the buffer of the last SaveTensor call. */
    void Remember(const void *p, uint64_t size)
    {
        if (checkFree_ && p != nullptr) {
            g_keptSize.store(size);
            g_kept.store(const_cast<void *>(p));
        }
    }

private:
    Recorder()
    {
        const char *log = std::getenv("RECPROBE_LOG");
        if (log != nullptr && *log != '\0') {
            fd_ = open(log, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0640);
            g_logFd.store(fd_);
        }
        const char *ans = std::getenv("RECPROBE_ANSWERS");
        std::string spec = ans != nullptr && *ans != '\0' ? ans : "defaults";
        size_t start = 0;
        bool first = true;
        while (start <= spec.size()) {
            size_t end = spec.find(',', start);
            if (end == std::string::npos) {
                end = spec.size();
            }
            std::string item = spec.substr(start, end - start);
            size_t eq = item.find('=');
            if (first) {
                base_ = item;
            } else if (eq != std::string::npos) {
                overrides_[item.substr(0, eq)] = item.substr(eq + 1) == "1";
            }
            first = false;
            start = end + 1;
        }
        throwOnce_ = Flag("RECPROBE_THROW");
        const char *ov = std::getenv("RECPROBE_OVERLAP");
        if (ov != nullptr && std::strchr(ov, '#') != nullptr) {
            overlapFn_.assign(ov, std::strchr(ov, '#'));
            overlapK_ = std::atoi(std::strchr(ov, '#') + 1);
        }
        checkFree_ = Flag("RECPROBE_CHECK_FREE");
    }

    static bool Flag(const char *name)
    {
        const char *v = std::getenv(name);
        return v != nullptr && std::strcmp(v, "1") == 0;
    }

    /* Other threads' hook calls wait (bounded) until the first thread is
     * parked in its Hook#k call, so the overlap cannot be missed by timing. */
    void HoldUntilFirstThreadWaits() const
    {
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
        while (waitingTid_.load() == 0 && !overlapOver_.load() &&
               std::chrono::steady_clock::now() < deadline) {
            std::this_thread::sleep_for(std::chrono::milliseconds(1));
        }
    }

    void WaitForOtherThread(uint64_t seq, long tid, const char *fn)
    {
        waitingTid_.store(tid);
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
        while (foreignSeq_.load() == 0 && std::chrono::steady_clock::now() < deadline) {
            std::this_thread::sleep_for(std::chrono::milliseconds(1));
        }
        const uint64_t other = foreignSeq_.load();
        overlapOver_.store(true);
        waitingTid_.store(0);
        Write("{\"seq\":-1,\"tid\":" + std::to_string(tid) + ",\"fn\":\"_overlap\",\"args\":{" +
              "\"hook\":" + Quote(fn) + ",\"waiting_seq\":" + std::to_string(seq) +
              ",\"other_seq\":" + std::to_string(other ? other - 1 : 0) +
              "},\"ret\":" + (other ? "true" : "false") + "}\n");
    }

    void Write(const std::string &line)
    {
        if (fd_ >= 0) {
            (void)!write(fd_, line.data(), line.size());
        }
    }

    int fd_ = -1;
    std::string base_;
    std::map<std::string, bool> overrides_;
    std::atomic<uint64_t> seq_{0};
    std::atomic<long> firstTid_{0};
    std::atomic<long> waitingTid_{0};
    std::atomic<bool> overlapOver_{false};
    std::atomic<uint64_t> foreignSeq_{0};  /* 1 + seq of the first foreign call while waiting */
    std::atomic<bool> throwOnce_{false};
    std::string overlapFn_;
    int overlapK_ = 0;
    std::atomic<int> overlapCount_{0};
    bool checkFree_ = false;
};

bool Predicate(const char *fn, const std::string &args = std::string())
{
    Recorder &r = Recorder::Get();
    uint64_t seq = r.Enter(fn);
    bool ret = r.Answer(fn);
    r.Log(seq, fn, args, ret ? "true" : "false");
    return ret;
}

void Report(const char *fn, const std::string &args)
{
    Recorder &r = Recorder::Get();
    uint64_t seq = r.Enter(fn);
    r.Log(seq, fn, args, "null");
}

std::string Arg(const char *key, const std::string &jsonValue, bool first = false)
{
    return std::string(first ? "" : ",") + "\"" + key + "\":" + jsonValue;
}

std::string IoArgs(size_t count, const std::string &opName, const std::string &param,
                   const ProbeTensors &in, const ProbeTensors &out)
{
    return Arg("count", std::to_string(count), true) + Arg("opName", Quote(opName)) +
           Arg("opParam", Quote(param)) + Arg("in", TensorsJson(in)) +
           Arg("out", TensorsJson(out));
}

}  // namespace

/* Forwarding free() lets RECPROBE_CHECK_FREE see the host buffer's bytes at
 * the moment the runtime releases it (well-defined, unlike a later read). */
static void CheckFreed(void *p)
{
    void *expected = p;
    if (p == nullptr || g_kept.load(std::memory_order_relaxed) != p ||
        !g_kept.compare_exchange_strong(expected, nullptr)) {
        return;
    }
    const uint64_t size = g_keptSize.load();
    uint64_t poisoned = 0;
    for (uint64_t i = 0; i < size; ++i) {
        poisoned += static_cast<unsigned char *>(p)[i] == 0xA5;
    }
    char line[160];  /* no allocation inside free() */
    int n = std::snprintf(line, sizeof line,
                          "{\"seq\":-1,\"tid\":%ld,\"fn\":\"_freed\",\"args\":{\"size\":%llu,"
                          "\"poisoned\":%llu},\"ret\":null}\n",
                          syscall(SYS_gettid), static_cast<unsigned long long>(size),
                          static_cast<unsigned long long>(poisoned));
    const int fd = g_logFd.load();
    if (fd >= 0 && n > 0) {
        (void)!write(fd, line, static_cast<size_t>(n));
    }
}

extern "C" void free(void *ptr)
{
    CheckFreed(ptr);
    __libc_free(ptr);
}

namespace atb {

bool Probe::IsTensorNeedSave(const std::vector<int64_t> &ids, const std::string &opType)
{
    std::string list = "[";
    for (size_t i = 0; i < ids.size(); ++i) {
        list += (i ? "," : "") + std::to_string(ids[i]);
    }
    return Predicate("IsTensorNeedSave", Arg("ids", list + "]", true) + Arg("opType", Quote(opType)));
}

bool Probe::IsSaveTensorData() { return Predicate("IsSaveTensorData"); }
bool Probe::IsSaveTensorDesc() { return Predicate("IsSaveTensorDesc"); }
bool Probe::IsExecuteCountInRange(const uint64_t executeCount)
{
    return Predicate("IsExecuteCountInRange", Arg("count", std::to_string(executeCount), true));
}
bool Probe::IsSaveTensorBefore() { return Predicate("IsSaveTensorBefore"); }
bool Probe::IsSaveTensorAfter() { return Predicate("IsSaveTensorAfter"); }

void Probe::SaveTensor(const std::string &format, const std::string &dtype, const std::string &dims,
                       const void *hostData, uint64_t dataSize, const std::string &filePath)
{
    Recorder &r = Recorder::Get();
    uint64_t seq = r.Enter("SaveTensor");
    r.Log(seq, "SaveTensor",
          Arg("format", Quote(format), true) + Arg("dtype", Quote(dtype)) + Arg("dims", Quote(dims)) +
              Arg("size", std::to_string(dataSize)) + Arg("fnv1a64", Quote(Fnv(hostData, dataSize))) +
              Arg("null_data", hostData == nullptr ? "true" : "false") + Arg("path", Quote(filePath)),
          "null");
    r.Remember(hostData, dataSize);
    if (r.TakeThrow()) {
        throw std::runtime_error("recording probe: RECPROBE_THROW");
    }
}

bool Probe::IsSaveTiling() { return Predicate("IsSaveTiling"); }

void Probe::SaveTiling(const uint8_t *data, uint64_t dataSize, const std::string &filePath)
{
    Report("SaveTiling", Arg("size", std::to_string(dataSize), true) +
                             Arg("fnv1a64", Quote(Fnv(data, dataSize))) + Arg("path", Quote(filePath)));
}

bool Probe::ReportOperationIOTensorEnable() { return Predicate("ReportOperationIOTensorEnable"); }
bool Probe::ReportOperationStatisticEnable() { return Predicate("ReportOperationStatisticEnable"); }

void Probe::ReportOperationSetupStatistic(const uint64_t executeCount, const std::string &opname,
                                          const std::string &st)
{
    Report("ReportOperationSetupStatistic", Arg("count", std::to_string(executeCount), true) +
                                                Arg("opName", Quote(opname)) + Arg("st", Quote(st)));
}

void Probe::ReportOperationExecuteStatistic(const uint64_t executeCount, const std::string &opname,
                                            const std::string &st)
{
    Report("ReportOperationExecuteStatistic", Arg("count", std::to_string(executeCount), true) +
                                                  Arg("opName", Quote(opname)) + Arg("st", Quote(st)));
}

bool Probe::ReportKernelIOTensorEnable() { return Predicate("ReportKernelIOTensorEnable"); }

void Probe::ReportOperationIOTensor(const size_t executeCount, const std::string &opName,
                                    const std::string &opParam, const ProbeTensors &tensors,
                                    const ProbeTensors &outTensors)
{
    Report("ReportOperationIOTensor", IoArgs(executeCount, opName, opParam, tensors, outTensors));
}

bool Probe::ReportOperationGraphEnable() { return Predicate("ReportOperationGraphEnable"); }

void Probe::ReportKernelIOTensor(const size_t executeCount, const std::string &opName,
                                 const std::string &opParam, const ProbeTensors &tensors,
                                 const ProbeTensors &outTensors)
{
    Report("ReportKernelIOTensor", IoArgs(executeCount, opName, opParam, tensors, outTensors));
}

void Probe::ReportOperationGraph(const std::string &opName, const std::string &graph)
{
    Report("ReportOperationGraph", Arg("opName", Quote(opName), true) + Arg("graph", Quote(graph)));
}

void Probe::SaveParam(const std::string &param, const std::string &filePath)
{
    Report("SaveParam", Arg("param", Quote(param), true) + Arg("path", Quote(filePath)));
}

bool Probe::IsSaveParam() { return Predicate("IsSaveParam"); }
bool Probe::IsOverflowCheck() { return Predicate("IsOverflowCheck"); }
bool Probe::IsOverflowStop() { return Predicate("IsOverflowStop"); }

void Probe::ReportOverflowKernel(const std::string &kernelPath)
{
    Report("ReportOverflowKernel", Arg("kernel", Quote(kernelPath), true));
}

void Probe::UpdateConfig() { Report("UpdateConfig", ""); }

bool Probe::IsSaveTensorInSpecificDir(const std::string &tensorDir)
{
    return Predicate("IsSaveTensorInSpecificDir", Arg("dir", Quote(tensorDir), true));
}

}  // namespace atb

namespace atb_speed {

bool SpeedProbe::IsReportModelTopoInfo(const std::string &modelName)
{
    return Predicate("IsReportModelTopoInfo", Arg("model", Quote(modelName), true));
}

void SpeedProbe::ReportModelTopoInfo(const std::string &modelName, const std::string &graph)
{
    Report("ReportModelTopoInfo", Arg("model", Quote(modelName), true) + Arg("graph", Quote(graph)));
}

}  // namespace atb_speed
