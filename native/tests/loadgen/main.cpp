// The load generator: ATB's hook calls for a Llama-70B-shaped model (tree.cpp)
// on N devices, one forked process each, with no compute, so that a probe
// preloaded into it meets a real service's shape of records (`make bench`,
// bench/stats_pace.py). Linked against the stand-in libatb.so, so a preloaded
// shim interposes the hooks through the PLT as in ATB.
//
// Options: `loadgen_abiN --help` (USAGE below).
//
// Each process prints, when its last round ended,
//   device=D pid=P prefill_rounds=A decode_rounds=B saved=S calls=C params=M seconds=T
// (saved: SaveTensor calls of before/intensor* and after/outtensor*, the
// stages the probe keeps by default; calls: all four stages), and the parent
// at the end `total processes=N saved=... calls=... params=... prefill_rounds=...
// decode_rounds=...`. Exit status 0 when every process ended well.
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "device.h"
#include "payload.h"
#include "tree.h"

using namespace loadgen;

namespace {

volatile sig_atomic_t g_stop = 0;

void OnStop(int) { g_stop = 1; }

const char USAGE[] =
    "usage: loadgen_abiN [options]\n"
    "  --procs N           devices, one process each (1)\n"
    "  --seconds S         run time of each process; 0: until SIGTERM/SIGINT (10)\n"
    "  --decode-steps K    decode steps after each prefill (16)\n"
    "  --layers L          decoder layers (80)\n"
    "  --batch B           decode batch: sequences of one token each (8)\n"
    "  --prefill-tokens P  prefill: one sequence of P tokens (128)\n"
    "  --dtype fp16|bf16   activations (fp16)\n"
    "  --rate R            offered records/s per process, paced: the probe's records by\n"
    "                      default, one per tensor saved and per op_param.json; 0: as fast\n"
    "                      as it can (0)\n"
    "  --tiny              every tensor one element: the probe's record path alone\n"
    "  --weights           also save the weight matrices and KV caches (ATB does;\n"
    "                      gigabytes a layer at these shapes)\n"
    "  --idle-before S     idle S seconds before the first op (0)\n"
    "  --idle-after S      idle S seconds after the last round, before exit (0): with\n"
    "                      --idle-before, a process's RSS can be read before and after\n"
    "                      its burst; SIGTERM ends either at once\n"
    "  --trickle R         after the run time, go on at R records/s until SIGTERM (in\n"
    "                      place of --idle-after): a service that dumps a little after\n"
    "                      a burst\n"
    "  --trickle-before S  go on at the --trickle rate for S seconds before the run\n"
    "                      time: the probe attached (its threads, its record log) when\n"
    "                      the burst starts, as it still is after it\n";

[[noreturn]] void Usage(const char *why)
{
    fprintf(stderr, "%sloadgen: %s\n", USAGE, why); // the reason last, where a tail shows it
    exit(2);
}

struct Options {
    int procs = 1;
    TreeOptions tree;
    DeviceOptions device;
};

Options Parse(int argc, char **argv)
{
    Options o;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        auto value = [&]() -> std::string {
            if (i + 1 >= argc)
                Usage((a + " needs a value").c_str());
            return argv[++i];
        };
        auto number = [&](double lo) {
            const std::string v = value();
            char *end = nullptr;
            const double x = strtod(v.c_str(), &end);
            if (v.empty() || *end || !(x >= lo))
                Usage((a + ": not a number >= " + std::to_string(lo) + ": " + v).c_str());
            return x;
        };
        if (a == "--help") {
            fputs(USAGE, stdout);
            exit(0);
        }
        if (a == "--procs")
            o.procs = (int)number(1);
        else if (a == "--seconds")
            o.device.seconds = number(0);
        else if (a == "--decode-steps")
            o.device.decodeSteps = (int)number(0);
        else if (a == "--layers")
            o.tree.layers = (int)number(1);
        else if (a == "--batch")
            o.tree.batch = (int64_t)number(1);
        else if (a == "--prefill-tokens")
            o.tree.prefillTokens = (int64_t)number(1);
        else if (a == "--rate")
            o.device.rate = number(0);
        else if (a == "--idle-before")
            o.device.idleBefore = number(0);
        else if (a == "--idle-after")
            o.device.idleAfter = number(0);
        else if (a == "--trickle")
            o.device.trickle = number(0);
        else if (a == "--trickle-before")
            o.device.trickleBefore = number(0);
        else if (a == "--tiny")
            o.tree.tiny = true;
        else if (a == "--weights")
            o.tree.weights = o.device.withState = true;
        else if (a == "--dtype") {
            const std::string v = value();
            if (v != "fp16" && v != "bf16")
                Usage(("--dtype: fp16 or bf16, not " + v).c_str());
            o.tree.dtype = v == "fp16" ? "1" : "27";
        } else
            Usage(("unknown option " + a).c_str());
    }
    return o;
}

void Report(int device, const DeviceResult &r)
{
    char line[256];
    const int n = snprintf(line, sizeof line,
                           "device=%d pid=%d prefill_rounds=%llu decode_rounds=%llu saved=%llu "
                           "calls=%llu params=%llu seconds=%.3f\n",
                           device, (int)getpid(), (unsigned long long)r.prefills,
                           (unsigned long long)r.decodes, (unsigned long long)r.counts.saved,
                           (unsigned long long)r.counts.calls,
                           (unsigned long long)r.counts.params, r.seconds);
    // one write: the devices' lines do not mix on a shared pipe
    if (write(STDOUT_FILENO, line, (size_t)n) != n)
        exit(1);
}

} // namespace

int main(int argc, char **argv)
{
    const Options o = Parse(argc, argv);
    struct sigaction sa {};
    sa.sa_handler = OnStop; // no SA_RESTART: the parent's waitpid returns to forward it
    sigaction(SIGTERM, &sa, nullptr);
    sigaction(SIGINT, &sa, nullptr);

    std::vector<Model> models{BuildModel(o.tree, true), BuildModel(o.tree, false)};
    Payload payload;
    payload.Bind(models, o.tree.weights);
    // The devices' results, for the parent's total.
    void *shared = mmap(nullptr, sizeof(DeviceResult) * (size_t)o.procs, PROT_READ | PROT_WRITE,
                        MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (shared == MAP_FAILED) {
        perror("loadgen: mmap");
        return 1;
    }
    auto *results = static_cast<DeviceResult *>(shared);
    std::vector<pid_t> pids;
    for (int d = 0; d < o.procs; ++d) {
        const pid_t pid = fork();
        if (pid < 0) {
            perror("loadgen: fork");
            g_stop = 1;
            break;
        }
        if (pid == 0) {
            results[d] = RunDevice(models, o.device, d, g_stop);
            Report(d, results[d]);
            exit(0); // through exit(): the probe's exit drain runs
        }
        pids.push_back(pid);
    }
    bool ok = (int)pids.size() == o.procs, forwarded = false;
    for (size_t left = pids.size(); left > 0;) {
        if (g_stop && !forwarded) {
            for (pid_t p : pids)
                kill(p, SIGTERM);
            forwarded = true;
        }
        int status = 0;
        if (waitpid(-1, &status, 0) < 0) {
            if (errno == EINTR)
                continue;
            perror("loadgen: waitpid");
            return 1;
        }
        left--;
        ok = ok && WIFEXITED(status) && WEXITSTATUS(status) == 0;
    }
    DeviceResult total;
    for (size_t d = 0; d < pids.size(); ++d) {
        total.counts.saved += results[d].counts.saved;
        total.counts.calls += results[d].counts.calls;
        total.counts.params += results[d].counts.params;
        total.prefills += results[d].prefills;
        total.decodes += results[d].decodes;
    }
    printf("total processes=%zu saved=%llu calls=%llu params=%llu prefill_rounds=%llu "
           "decode_rounds=%llu\n",
           pids.size(), (unsigned long long)total.counts.saved,
           (unsigned long long)total.counts.calls, (unsigned long long)total.counts.params,
           (unsigned long long)total.prefills, (unsigned long long)total.decodes);
    return ok ? 0 : 1;
}
