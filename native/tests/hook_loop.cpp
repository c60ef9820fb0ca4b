// `make bench`'s hook-overhead loop: ATB's per-op hook sequence, asleep,
// N times (callsites §4-§5: one top-level op with one OpsRunner of two
// kernels = setup 3 calls + execute 4 + 2 kernels x 4 = 15 hook calls).
// Every call is made whatever the answers, so the probe and ATB's
// constant-returns defaults run the same calls; the loop links against the
// stand-in libatb.so (the defaults), and the probe interposes with
// LD_PRELOAD, both through the PLT as in ATB.
//
//   hook_loop <ops>      prints "ops=<n> answers=<calls answered true>"
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "atb_probe_decl.h"

using atb::Probe;

int main(int argc, char **argv)
{
    long n = argc > 1 ? atol(argv[1]) : 1000;
    std::vector<int64_t> ids{1};
    std::string name = "LinearOperation";
    long yes = 0;
    for (long i = 0; i < n; i++) {
        uint64_t count = (uint64_t)i;
        // setup
        yes += Probe::IsTensorNeedSave(ids, name);
        yes += Probe::IsSaveTensorDesc();
        Probe::UpdateConfig();
        // execute: IsSaveTensor() at [A] [B] [C], then [D]
        for (int k = 0; k < 3; k++)
            yes += Probe::IsExecuteCountInRange(count);
        yes += Probe::ReportOperationIOTensorEnable();
        // two kernels
        for (int k = 0; k < 2; k++) {
            yes += Probe::IsExecuteCountInRange(count);
            yes += Probe::IsOverflowCheck();
            yes += Probe::ReportKernelIOTensorEnable();
            yes += Probe::IsExecuteCountInRange(count);
        }
    }
    printf("ops=%ld answers=%ld\n", n, yes);
    return 0;
}
