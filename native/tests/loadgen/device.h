// One device's process: requests (a prefill, then decode steps) through the
// models' hook calls, paced to an offered rate, until time is up or a stop
// signal came.
#ifndef LOADGEN_DEVICE_H
#define LOADGEN_DEVICE_H

#include <csignal>
#include <cstdint>
#include <vector>

#include "protocol.h"
#include "tree.h"

namespace loadgen {

struct DeviceOptions {
    double seconds = 10;   // 0: until a stop signal
    int decodeSteps = 16;  // decode steps after each prefill
    double rate = 0;       // records per second (Counts: saved + params); 0: as fast as it can
    double idleBefore = 0; // seconds idle before the first op
    double idleAfter = 0;  // and after the last round
    double trickle = 0;    // after the run time, records per second until a stop signal
                           // (in place of idleAfter): a service dumping a little on
    double trickleBefore = 0; // seconds at the trickle's rate before the run time (after
                              // idleBefore): the process attached, as after its burst
    bool withState = false;
};

struct DeviceResult {
    Counts counts;
    uint64_t prefills = 0, decodes = 0;  // model executions (rounds)
    double seconds = 0;                  // from the first op to the end of the last round
                                         // of the run time (a trickle after it apart)
};

// models[0] is the prefill model, models[1] the decode model.
DeviceResult RunDevice(const std::vector<Model> &models, const DeviceOptions &opt, int device,
                       const volatile sig_atomic_t &stop);

} // namespace loadgen

#endif
