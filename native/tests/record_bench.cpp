// `make bench`'s record path host (bench/record_cost.py): ATB's hook sequence
// for <rounds> executions of <ops> top-level ops, each saving two tiny inputs
// before it runs and two tiny outputs after (one element each, fp32 and
// fp16), as runner.cpp calls the hooks: setup (IsTensorNeedSave,
// IsSaveTensorDesc, UpdateConfig), then per stage IsExecuteCountInRange,
// IsSaveTensorInSpecificDir and IsSaveTensorBefore/After, then SaveTensor.
// Every call is made whatever the answers, so the probe and ATB's
// constant-returns defaults run the same calls; it links against the
// stand-in libatb.so (the defaults) and the probe interposes with LD_PRELOAD.
//
//   record_bench <rounds> <ops> [<pause_us>]
//       prints "tensors=<n> thread_cpu_ns=<CPU time of the thread that saved them>"
//
// pause_us: a pause after each round, so the writers catch up and a test
// (tests/probe/test_probe_records.py) sees the slot quiet between rounds.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <sys/resource.h>
#include <unistd.h>
#include <vector>

#include "atb_probe_decl.h"

using atb::Probe;

namespace {

const std::string kFormat = "2"; // ND
const std::string kFp32 = "0", kFp16 = "1";
const std::string kDims = "1";

// One stage of one op: its two tensors (fp32, fp16), values that change with
// every save so the statistics are never the same double twice.
void save_stage(const std::string &dir, const char *kind, uint64_t k)
{
    float f = (float)k * 0.37f + 0.1f;
    uint16_t h = (uint16_t)(0x3c00u + (k & 0x3ffu)); // 1.0 .. 2.0 in fp16
    Probe::SaveTensor(kFormat, kFp32, kDims, &f, sizeof f, dir + kind + "0.bin");
    Probe::SaveTensor(kFormat, kFp16, kDims, &h, sizeof h, dir + kind + "1.bin");
}

} // namespace

int main(int argc, char **argv)
{
    long rounds = argc > 1 ? atol(argv[1]) : 100;
    long ops = argc > 2 ? atol(argv[2]) : 100;
    long pause_us = argc > 3 ? atol(argv[3]) : 0;
    std::string name = "LinearOperation";
    std::string dev = "0_" + std::to_string(getpid()) + "/";
    uint64_t saved = 0;
    for (long r = 0; r < rounds; r++) {
        for (long op = 0; op < ops; op++) {
            std::vector<int64_t> ids{op};
            std::string dir = dev + std::to_string(r) + "/" + std::to_string(op) + "_Linear";
            // setup
            Probe::IsTensorNeedSave(ids, name);
            Probe::IsSaveTensorDesc();
            Probe::UpdateConfig();
            // execute: runner.cpp's IsSaveTensor() before and after the kernels
            Probe::IsExecuteCountInRange((uint64_t)r);
            Probe::IsSaveTensorInSpecificDir(dir);
            Probe::IsSaveTensorBefore();
            save_stage(dir + "/before/", "intensor", saved++);
            Probe::IsExecuteCountInRange((uint64_t)r);
            Probe::IsSaveTensorInSpecificDir(dir);
            Probe::IsSaveTensorAfter();
            save_stage(dir + "/after/", "outtensor", saved++);
        }
        if (pause_us)
            usleep((useconds_t)pause_us);
    }
    // the hooks' share of the probe's cost (the rest is its writer threads')
    struct rusage self;
    getrusage(RUSAGE_THREAD, &self);
    uint64_t cpu_ns = ((uint64_t)self.ru_utime.tv_sec + (uint64_t)self.ru_stime.tv_sec) * 1000000000u +
                      ((uint64_t)self.ru_utime.tv_usec + (uint64_t)self.ru_stime.tv_usec) * 1000u;
    printf("tensors=%llu thread_cpu_ns=%llu\n", (unsigned long long)(saved * 2),
           (unsigned long long)cpu_ns);
    return 0;
}
