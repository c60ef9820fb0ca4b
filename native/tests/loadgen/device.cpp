#include "device.h"

#include <algorithm>
#include <chrono>
#include <thread>

#include "acl/acl.h"

namespace loadgen {
namespace {

using Clock = std::chrono::steady_clock;

// In steps, so that a stop signal ends a pause within 50 ms.
void Sleep(double seconds, const volatile sig_atomic_t &stop)
{
    using std::chrono::duration_cast;
    const Clock::time_point end =
        Clock::now() + duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
    const Clock::duration step = std::chrono::milliseconds(50);
    for (Clock::time_point now = Clock::now(); now < end && !stop; now = Clock::now())
        std::this_thread::sleep_for(std::min<Clock::duration>(end - now, step));
}

} // namespace

DeviceResult RunDevice(const std::vector<Model> &models, const DeviceOptions &opt, int device,
                       const volatile sig_atomic_t &stop)
{
    // ATB paths and the shim's slot take the device from aclrtGetDevice,
    // which the stand-in ACL answers per thread from aclrtSetDevice.
    aclrtSetDevice(device);
    ModelRunner prefill(models[0], opt.withState), decode(models[1], opt.withState);
    DeviceResult res;
    Sleep(opt.idleBefore, stop);
    auto since = [](Clock::time_point t) {
        return std::chrono::duration<double>(Clock::now() - t).count();
    };
    // Requests at `rate` records a second (0: as fast as it can) for `seconds`
    // (0: until a stop signal), paced per node (a layer's ~50 tensors), on the
    // records the probe writes by default: one per tensor of the default stages
    // and per op_param.json; after `lead` seconds at the trickle's rate (switched
    // at a node: a round of a 70B model at a trickle lasts far longer).
    auto made = [&] { return res.counts.saved + res.counts.params; };
    auto run = [&](double rate, double seconds, double lead) {
        Clock::time_point start = Clock::now();
        uint64_t base = made();
        double now = lead > 0 ? opt.trickle : rate;
        auto pace = [&] {
            if (lead > 0 && since(start) >= lead) {
                lead = 0;
                start = Clock::now();
                base = made();
                now = rate;
            }
            if (now > 0) {
                const double ahead = (double)(made() - base) / now - since(start);
                if (ahead > 0)
                    Sleep(ahead, stop);
            }
        };
        auto more = [&] { return !stop && (lead > 0 || seconds <= 0 || since(start) < seconds); };
        while (more()) {
            prefill.Execute(res.counts, pace);
            res.prefills++;
            for (int k = 0; k < opt.decodeSteps && more(); ++k) {
                decode.Execute(res.counts, pace);
                res.decodes++;
            }
        }
        return since(start);
    };
    res.seconds = run(opt.rate, opt.seconds, opt.trickle > 0 ? opt.trickleBefore : 0);
    if (opt.trickle > 0)
        run(opt.trickle, 0, 0);
    else
        Sleep(opt.idleAfter, stop);
    return res;
}

} // namespace loadgen
