// The --precision-fault spec: kernel precision faults real kernels have had
// (an intermediate kept in the run's half storage type where a good kernel
// keeps fp32), the layer ops each kind applies to, and its parser. What each
// computes is in docs/atbsim_model.md; the arithmetic is in numerics.cpp.
#pragma once

#include <string>
#include <vector>

namespace atbsim_lm {

enum class PrecisionKind { RmsNormHalfSum, SoftmaxNoMaxSubtract, SwigluHalfSilu, LinearHalfAccumulate };

// One fault: the kernels of `ops` in decoder layer `layer` compute with it, in
// both stages and every round (a faulty kernel is faulty wherever it runs).
struct PrecisionFault {
    PrecisionKind kind = PrecisionKind::RmsNormHalfSum;
    std::string spec;              // as written, for messages
    int layer = -1;
    std::vector<std::string> ops;  // canonical node names (layer_node_names())
    std::string describe() const;  // e.g. "rmsnorm-fp16-accumulate in layer 1 (InputNorm, PostNorm)"
};

bool parse_precision_fault(const std::string &spec, PrecisionFault *out, std::string *err);

// True if a fault of `faults` makes node `node` of layer `layer` compute in half.
bool has_precision_fault(const std::vector<PrecisionFault> &faults, int layer, const std::string &node);

// The help text of --precision-fault (part of model_options_help()).
const char *precision_fault_help();

}  // namespace atbsim_lm
