// ATB's hook calls for one device's models, as ATB and ATB-Models make them
// (docs/atb_hooks.md): each node's Setup (atb_hooks.md §4) and Execute
// (atb_hooks.md §5, §6: with the SaveTensor calls), then the model's
// topo report (atb_hooks.md §9). No compute: the tensors hand the hooks the
// prepared payload. Not modelled: the asynchronous execution of
// ATB_OPERATION_EXECUTE_ASYNC, and the kernels under the leaf ops
// (atb_hooks.md §5.3: their dirs, saves, IsOverflowCheck, tiling), which
// would add their own records to the ~50 a layer of this model's shape.
#ifndef LOADGEN_PROTOCOL_H
#define LOADGEN_PROTOCOL_H

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "tree.h"

namespace loadgen {

struct Counts {
    uint64_t saved = 0;   // SaveTensor calls of the default stages (before/intensor*,
                          // after/outtensor*): the probe's rows by default
    uint64_t calls = 0;   // every SaveTensor call (ATB saves all four stages)
    uint64_t params = 0;  // SaveParam calls (op_param.json)
};

// One runner (a top-level op's, or a graph node's) as ATB keeps it.
struct Runner {
    const OpNode *op = nullptr;
    std::vector<Runner> nodes;
    bool flag = false;   // IsTensorNeedSave, as ATB caches it
    uint64_t count = 0;  // Runner::executeCount_
    std::string dir;     // where its tensors go
};

// The state ATB keeps for one model's op objects: global ids, setup and
// runner counters, the cached IsTensorNeedSave answers, the dump dirs.
class ModelRunner {
public:
    ModelRunner(const Model &model, bool withState);
    // One atb_speed::Model::Execute; afterOp runs after each node's Execute.
    void Execute(Counts &counts, const std::function<void()> &afterOp);

private:
    struct Top {
        const TopOp *op = nullptr;
        Runner root;
        int64_t gid = -1;     // the global id, given at the first Setup
        uint64_t setups = 0;  // OperationBase::executeCount_, the {exec} of the paths
    };
    void Setup(Top &top);
    void Run(const Top &top, Runner &r, Counts &counts);
    void SavePack(const Top &top, const Runner &r, bool before, Counts &counts);

    const Model &model_;
    bool withState_;
    std::string devPid_;  // "{dev}_{pid}/"
    std::vector<Top> tops_;
};

} // namespace loadgen

#endif
