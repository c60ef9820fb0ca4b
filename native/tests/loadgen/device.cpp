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
    const Clock::time_point start = Clock::now();
    auto elapsed = [&start] { return std::chrono::duration<double>(Clock::now() - start).count(); };
    // Paced per node (a layer's ~50 tensors), on the records the probe writes
    // by default: one per tensor of the default stages and per op_param.json.
    auto pace = [&] {
        if (opt.rate > 0) {
            const double records = (double)(res.counts.saved + res.counts.params);
            const double ahead = records / opt.rate - elapsed();
            if (ahead > 0)
                Sleep(ahead, stop);
        }
    };
    auto more = [&] { return !stop && (opt.seconds <= 0 || elapsed() < opt.seconds); };
    while (more()) {
        prefill.Execute(res.counts, pace);
        res.prefills++;
        for (int k = 0; k < opt.decodeSteps && more(); ++k) {
            decode.Execute(res.counts, pace);
            res.decodes++;
        }
    }
    res.seconds = elapsed();
    Sleep(opt.idleAfter, stop);
    return res;
}

} // namespace loadgen
