// `make bench`'s hook-overhead loop: ATB's per-op hook sequence, N times
// (docs/atb_hooks.md §4-§5: one top-level op with one OpsRunner of two kernels =
// setup 3 calls + execute 4 + 2 kernels x 4 = 15 hook calls). These 15 are
// made whatever the answers, so the probe and ATB's constant-returns
// defaults run the same calls. Where their answers say ATB would go on,
// the loop then asks IsSaveTensorInSpecificDir as ATB does, in ATB's order
// (the runner's at [A], a kernel's before and after, after the kernel's
// stage predicate; the runner's at [B] and [C]): 7 more calls an op where
// the exec range holds. ATB asks those only after the count said yes, and
// every count of an op is the same one: the loop keeps the first count's
// answer and looks at it in one branch after the 15 calls, so where no
// directory is asked its own instructions are the same whatever the answers. The loop links
// against the stand-in libatb.so (the defaults), and the probe interposes
// with LD_PRELOAD, both through the PLT as in ATB.
//
// Directories are what ATB would pass: the runner's name while
// IsSaveTensorDesc says no, else "{dev}_{pid}/{round}/1_LinearOperation",
// and each kernel's below it. ATB builds them anew each round; the loop only
// rewrites the round's digits in place, so the figures are the hooks' cost,
// not string building.
//
//   hook_loop <ops>      prints "ops=<n> answers=<calls answered true>"
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <unistd.h>
#include <vector>

#include "atb_probe_decl.h"

using atb::Probe;

namespace {

const char *const kKernels[2] = {"0_MatMulKernel", "1_AddKernel"};

// A runner's directory and its kernels', with the round's digits at [digits, digits + width).
struct Dirs {
    std::string runner, kernel[2];
    size_t digits = 0, width = 0;
    uint64_t round = 0;
    bool built = false;

    void build(uint64_t r)
    {
        std::string head = "0_" + std::to_string(getpid()) + "/";
        std::string n = std::to_string(r);
        runner = head + n + "/1_LinearOperation";
        for (int k = 0; k < 2; k++)
            kernel[k] = runner + "/" + kKernels[k];
        digits = head.size();
        width = n.size();
        round = r;
        built = true;
    }

    // Round r: the next one rewrites its digits in place (carrying), any other,
    // or one that needs another digit (the carry runs off the front), rebuilds.
    void set_round(uint64_t r)
    {
        if (!built || r != round + 1)
            return build(r);
        size_t i = digits + width;
        while (i-- > digits && runner[i] == '9')
            ;
        if (i + 1 == digits) // all nines: 99 -> 100
            return build(r);
        round = r;
        runner[i] = kernel[0][i] = kernel[1][i] = (char)(runner[i] + 1);
        for (size_t j = i + 1; j < digits + width; j++)
            runner[j] = kernel[0][j] = kernel[1][j] = '0';
    }
};

} // namespace

int main(int argc, char **argv)
{
    long n = argc > 1 ? atol(argv[1]) : 1000;
    std::vector<int64_t> ids{1};
    std::string name = "LinearOperation";
    Dirs dirs;
    dirs.runner = "LinearOpsRunner";
    for (int k = 0; k < 2; k++)
        dirs.kernel[k] = dirs.runner + "/" + kKernels[k];
    // a kernel's IsTensorNeedSave is asked once, when its runner is made
    bool kernel_flag[2];
    for (int64_t k = 0; k < 2; k++)
        kernel_flag[k] = Probe::IsTensorNeedSave(std::vector<int64_t>{1, k}, name);
    long yes = 0;
    for (long i = 0; i < n; i++) {
        uint64_t count = (uint64_t)i;
        // setup
        bool flag = Probe::IsTensorNeedSave(ids, name);
        bool desc = Probe::IsSaveTensorDesc();
        yes += flag + desc;
        Probe::UpdateConfig();
        // execute: IsSaveTensor() at [A] [B] [C], then [D]
        bool in_range = Probe::IsExecuteCountInRange(count);
        yes += in_range;
        for (int k = 1; k < 3; k++)
            yes += Probe::IsExecuteCountInRange(count);
        yes += Probe::ReportOperationIOTensorEnable();
        // two kernels
        for (int k = 0; k < 2; k++) {
            yes += Probe::IsExecuteCountInRange(count);
            yes += Probe::IsOverflowCheck();
            yes += Probe::ReportKernelIOTensorEnable();
            yes += Probe::IsExecuteCountInRange(count);
        }
        if (__builtin_expect(in_range, 0)) {
            if (desc)
                dirs.set_round(count);
            yes += flag && Probe::IsSaveTensorInSpecificDir(dirs.runner);
            for (int k = 0; k < 2; k++) {
                yes += kernel_flag[k] && Probe::IsSaveTensorBefore() &&
                       Probe::IsSaveTensorInSpecificDir(dirs.kernel[k]);
                yes += kernel_flag[k] && Probe::IsSaveTensorAfter() &&
                       Probe::IsSaveTensorInSpecificDir(dirs.kernel[k]);
            }
            for (int k = 1; k < 3; k++)
                yes += flag && Probe::IsSaveTensorInSpecificDir(dirs.runner);
        }
    }
    printf("ops=%ld answers=%ld\n", n, yes);
    return 0;
}
