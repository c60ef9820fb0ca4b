// The native hook fuzzer: calls every atb::Probe / atb_speed::SpeedProbe hook
// with hostile names, sizes, dtypes, dims, params and graph/topo JSON, from
// several threads, through the real shim (linked in, built with ASan/UBSan)
// while the real control plane runs (the shim starts it) and the config file
// is rewritten now and then. What the run left on disk is checked by
// tests/fuzz/native_fuzz.py.
//
//   hook_fuzz <calls> <seed> <threads> <config path> <escape dir>
//
// <escape dir> is where the hostile absolute and ../ paths point: nothing may
// appear there. At the end it prints "calls=N saves=M", M being the SaveTensor
// calls made after the first wake (each must end as a record: written or lost).
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <pthread.h>
#include <string>
#include <unistd.h>
#include <vector>

#include "atb_probe_decl.h"

using atb::Probe;
using atb_speed::SpeedProbe;

namespace {

struct Rng {
    uint64_t s;
    uint64_t next()
    {
        uint64_t z = (s += 0x9e3779b97f4a7c15ULL);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
        return z ^ (z >> 31);
    }
    size_t below(size_t n) { return n ? (size_t)(next() % n) : 0; }
    bool chance(unsigned pct) { return below(100) < pct; }
    template <class T> const T &pick(const std::vector<T> &v) { return v[below(v.size())]; }
};

std::string g_config, g_escape;
uint64_t g_calls_per_thread;
std::atomic<uint64_t> g_calls{0}, g_saves{0};

const std::vector<std::string> NAMES = {
    "Layer", "LinearOperation", "MatMulKernel", "Add", "Op\xff\xfe", "\xc3(", "\xe7\xbb\x9f",
    "a b", "%s%n%x", "x\ny", "a\x01" "b", "Kernel", "statistic.csv", "ROUND_COMPLETE.json",
    "statistic_extra.csv", ".hidden", "..", ".", "", "before", "after", "op_param.json",
};
const std::vector<std::string> DTYPES = {
    "0", "1", "2", "3", "4", "6", "7", "8", "9", "10", "11", "12", "13", "16", "17", "27",
    "29", "30", "35", "36", "40", "999", "-1", "4294967296", "2147483648", "-2147483649",
    "", "abc", "1e3", " 1", "0000000000000001", "00000000000000001", "+1",
};
const std::vector<std::string> HOSTILE_DIMS = {
    "536870912,1073741824", "10,107367629,536903681", "4294967296,4294967296,4294967296",
    "-1", "1,,2", " 1", "1,", ",1", "99999999999999999", "1,x", "1;2", "0,0,0",
    "1000000000000000", "18446744073709551617",
};

std::string random_bytes(Rng &r, size_t max)
{
    std::string s(r.below(max + 1), '\0');
    for (auto &c : s)
        c = (char)r.next();
    return s;
}

std::string component(Rng &r)
{
    if (r.chance(8))
        return random_bytes(r, 12);
    if (r.chance(4))
        return std::string(255 + r.below(3), 'n'); // 255 is the longest allowed
    const std::string &name = r.pick(NAMES);
    if (name.empty() || name[0] == '.' || r.chance(20))
        return name;
    return std::to_string(r.below(6)) + "_" + name;
}

std::string tensor_path(Rng &r, bool param)
{
    if (r.chance(3))
        return g_escape + "/abs.bin"; // absolute
    if (r.chance(3))
        return "../../../" + g_escape.substr(g_escape.rfind('/') + 1) + "/up.bin";
    if (r.chance(2))
        return random_bytes(r, 40);
    std::string p = r.chance(5) ? component(r) : std::to_string((int)r.below(3) - (int)r.chance(5)) +
                                                     "_" + std::to_string(getpid());
    p += "/" + (r.chance(5) ? component(r) : std::to_string(r.below(4)));
    size_t depth = 1 + r.below(4);
    for (size_t i = 0; i < depth; i++)
        p += "/" + component(r);
    if (param)
        return p + (r.chance(90) ? "/op_param.json" : "/" + component(r));
    p += r.chance(50) ? "/before/" : "/after/";
    if (r.chance(85))
        return p + (r.chance(50) ? "intensor" : "outtensor") + std::to_string(r.below(4)) + ".bin";
    return p + component(r);
}

unsigned bits_of(const std::string &dtype)
{
    static const std::vector<std::pair<std::string, unsigned>> w = {
        {"0", 32}, {"1", 16}, {"2", 8}, {"3", 32}, {"4", 8}, {"6", 16}, {"7", 16}, {"8", 32},
        {"9", 64}, {"10", 64}, {"11", 64}, {"12", 8}, {"16", 64}, {"17", 128}, {"27", 16},
        {"29", 4}, {"30", 1}, {"35", 8}, {"36", 8}, {"40", 4}};
    for (auto &p : w)
        if (p.first == dtype)
            return p.second;
    return 0;
}

void save_tensor(Rng &r)
{
    std::string dtype = r.pick(DTYPES);
    std::string dims;
    uint64_t numel = 1;
    if (r.chance(15)) {
        dims = r.chance(10) ? std::string(1030, '1') : r.pick(HOSTILE_DIMS);
        // the element count as a wrapping (buggy) size check would compute it, so
        // that the size below can match the wrapped product
        numel = 1;
        uint64_t cur = 0;
        for (char c : dims + ",") {
            if (c >= '0' && c <= '9') {
                cur = cur * 10 + (uint64_t)(c - '0');
            } else {
                numel *= cur;
                cur = 0;
            }
        }
    } else {
        size_t nd = r.below(4);
        for (size_t i = 0; i < nd; i++) {
            uint64_t d = r.chance(5) ? 0 : 1 + r.below(16);
            dims += (i ? "," : "") + std::to_string(d);
            numel *= d;
        }
    }
    std::string data;
    const void *ptr;
    uint64_t size;
    unsigned bits = bits_of(dtype);
    if (r.chance(5)) {
        ptr = nullptr; // ATB never does this; the shim must refuse it, not read it
        size = r.chance(50) ? 0 : 1 + r.next() % (1ULL << 40);
    } else {
        uint64_t matching = (numel * bits + 7) / 8; // wraps for hostile dims, on purpose
        size = bits && matching <= 65536 && r.chance(80) ? matching : r.below(65);
        data = random_bytes(r, 0);
        data.resize(size);
        for (auto &c : data)
            c = (char)r.next(); // NaN, Inf and denormals come with random bits
        ptr = data.data();
    }
    std::string format = r.chance(90) ? std::to_string(r.below(30)) : r.pick(DTYPES);
    Probe::SaveTensor(format, dtype, dims, ptr, size, tensor_path(r, false));
    g_saves++;
    if (!data.empty())
        memset(&data[0], 0xA5, data.size()); // ATB frees its buffer: the copy must be taken
}

std::string json_value(Rng &r, int depth)
{
    switch (depth > 6 ? r.below(4) : r.below(8)) {
    case 0: return std::to_string((int64_t)r.next() >> r.below(64));
    case 1: return "\"" + component(r) + "\""; // raw bytes, even control characters
    case 2: return r.chance(50) ? "null" : "1e999";
    case 3: return "NaN";
    case 4: {
        std::string s = "[";
        for (size_t i = 0, n = r.below(4); i < n; i++)
            s += (i ? "," : "") + json_value(r, depth + 1);
        return s + "]";
    }
    default: {
        static const std::vector<std::string> keys = {
            "opName", "opType", "nodes", "inTensorNum", "outTensorNum", "internalTensorNum",
            "inTensors", "outTensors", "param", "modelName", "layerNames", "opId", "x"};
        std::string s = "{";
        for (size_t i = 0, n = r.below(5); i < n; i++)
            s += (i ? ",\"" : "\"") + r.pick(keys) + "\":" +
                 (r.chance(30) ? std::to_string(r.below(4097)) : json_value(r, depth + 1));
        return s + "}";
    }
    }
}

std::string graph_json(Rng &r)
{
    if (r.chance(5))
        return std::string(2000 + r.below(3000), '[') + std::string(r.below(3000), ']');
    if (r.chance(10))
        return random_bytes(r, 200);
    std::string g = "{\"opName\":\"" + component(r) + "\",\"opType\":\"" + component(r) +
                    "\",\"inTensorNum\":" + std::to_string(r.below(5)) + ",\"outTensorNum\":" +
                    std::to_string(r.below(5)) + ",\"internalTensorNum\":" +
                    std::to_string(r.below(64)) + ",\"nodes\":[";
    for (size_t i = 0, n = r.below(6); i < n; i++)
        g += (i ? "," : "") + json_value(r, 1);
    return g + "]" + (r.chance(20) ? "" : "}");
}

/* Valid configs the control plane publishes while the hooks run: every task,
 * dedup levels, the drop policy with a tiny budget, asleep and awake again.
 * All four stages, so that every SaveTensor call is selected and must end in
 * a record (the default would refuse before/outtensor and after/intensor). */
void rewrite_config(Rng &r)
{
    static const std::vector<std::string> configs = {
        R"({"dump_enable": true, "save_all_stages": true, "task": "tensor", "exec_range": "all", "save_child": true, "filter_level": 0})",
        R"({"dump_enable": true, "save_all_stages": true, "task": "all", "exec_range": "all", "save_child": true, "filter_level": 1})",
        R"({"dump_enable": true, "save_all_stages": true, "task": "statistics", "exec_range": "0,2", "ids": "1,2_3"})",
        R"({"dump_enable": true, "save_all_stages": true, "task": "tensor", "exec_range": "all", "save_child": true, "filter_level": 2, "op_name": "layer,linear"})",
        R"({"dump_enable": true, "save_all_stages": true, "task": "all", "exec_range": "all", "save_child": true, "queue_budget_mb": 1, "queue_full_policy": "drop"})",
        R"({"dump_enable": true, "save_all_stages": true, "task": "overflow_check", "overflow_check": {"overflow_nums": 3}})",
        R"({"dump_enable": true, "save_all_stages": true, "exec_range": "none"})",
        R"({"dump_enable": false, "save_all_stages": true})",
        R"({"dump_enable": true, "save_all_stages": true, "task": "all", "exec_range": "all", "device": "0,1"})",
    };
    std::string tmp = g_config + ".fuzz.tmp";
    FILE *f = fopen(tmp.c_str(), "w");
    if (!f)
        return;
    fputs(r.pick(configs).c_str(), f);
    fclose(f);
    rename(tmp.c_str(), g_config.c_str());
}

void one_call(Rng &r)
{
    switch (r.below(24)) {
    case 0: Probe::IsTensorNeedSave({(int64_t)r.next()}, component(r)); break;
    case 1: Probe::UpdateConfig(); break;
    case 2: Probe::IsSaveTensorDesc(); break;
    case 3: Probe::IsSaveTensorData(); break;
    case 4: Probe::IsExecuteCountInRange(r.chance(50) ? r.below(8) : r.next()); break;
    case 5: Probe::IsSaveTensorBefore(); break;
    case 6: Probe::IsSaveTensorAfter(); break;
    case 7: {
        std::string p = tensor_path(r, true);
        Probe::IsSaveTensorInSpecificDir(p.substr(0, p.rfind('/') == std::string::npos ? 0
                                                                                      : p.rfind('/')));
        break;
    }
    case 8: Probe::IsSaveParam(); break;
    case 9: Probe::SaveParam(r.chance(80) ? json_value(r, 0) : random_bytes(r, 300),
                             tensor_path(r, true)); break;
    case 10: Probe::ReportOperationGraphEnable(); break;
    case 11: Probe::ReportOperationGraph(r.chance(80) ? "Layer_" + std::to_string(r.below(9))
                                                      : component(r), graph_json(r)); break;
    case 12: SpeedProbe::IsReportModelTopoInfo(component(r)); break;
    case 13: SpeedProbe::ReportModelTopoInfo(component(r), graph_json(r)); break;
    case 14: Probe::IsOverflowCheck(); break;
    case 15: Probe::ReportOverflowKernel(std::to_string(r.below(9)) + "_" + std::to_string(r.below(9)) +
                                         ":" + component(r)); break;
    case 16: Probe::IsSaveTiling(); Probe::IsOverflowStop(); break;
    case 17: Probe::ReportOperationIOTensorEnable(); Probe::ReportKernelIOTensorEnable();
             Probe::ReportOperationStatisticEnable(); break;
    case 18: Probe::IsSaveChild(); Probe::IsSaveIntensor(); Probe::IsSaveOuttensor(); break;
    default: save_tensor(r); break;
    }
}

void *thread_main(void *arg)
{
    Rng r{(uint64_t)(uintptr_t)arg};
    bool writer = ((uintptr_t)arg & 0xff) == 0;
    uint64_t every = g_calls_per_thread / 12 + 1;
    for (uint64_t i = 0; i < g_calls_per_thread; i++) {
        if (writer && i % every == every - 1)
            rewrite_config(r);
        one_call(r);
        g_calls++;
    }
    return nullptr;
}

} // namespace

int main(int argc, char **argv)
{
    if (argc != 6) {
        fprintf(stderr, "usage: %s <calls> <seed> <threads> <config> <escape dir>\n", argv[0]);
        return 2;
    }
    uint64_t calls = strtoull(argv[1], nullptr, 10), seed = strtoull(argv[2], nullptr, 10);
    int threads = atoi(argv[3]);
    g_config = argv[4];
    g_escape = argv[5];
    if (threads < 1 || threads > 64)
        return 2;
    g_calls_per_thread = calls / (uint64_t)threads + 1;
    // Attach (waits for the daemon's first publish), then until the first wake:
    // only SaveTensor calls after it are the shim's to account for.
    Probe::IsTensorNeedSave({0}, "Layer");
    for (int i = 0; i < 3000 && !Probe::IsSaveTensorData(); i++)
        usleep(10000);
    if (!Probe::IsSaveTensorData()) {
        fprintf(stderr, "hook_fuzz: the probe never woke up\n");
        return 3;
    }
    std::vector<pthread_t> ts((size_t)threads);
    for (int i = 0; i < threads; i++)
        pthread_create(&ts[(size_t)i], nullptr, thread_main,
                       (void *)(uintptr_t)((seed << 8) | (uint64_t)i));
    for (auto &t : ts)
        pthread_join(t, nullptr);
    printf("calls=%llu saves=%llu\n", (unsigned long long)g_calls.load(),
           (unsigned long long)g_saves.load());
    fflush(stdout);
    return 0;
}
