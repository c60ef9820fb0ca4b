#include "precision_fault.h"

#include "options.h"

namespace atbsim_lm {

namespace {

struct KindInfo {
    PrecisionKind kind;
    const char *name;
    std::vector<std::string> ops;  // the layer's nodes whose kernel it can be
    bool op_required;              // false: without op=, all of `ops`
};

const std::vector<KindInfo> &kinds() {
    static const std::vector<KindInfo> all = {
        {PrecisionKind::RmsNormHalfSum, "rmsnorm-fp16-accumulate", {"InputNorm", "PostNorm"}, false},
        {PrecisionKind::SoftmaxNoMaxSubtract, "softmax-no-max-subtract", {"Attention"}, false},
        {PrecisionKind::SwigluHalfSilu, "swiglu-fp16-intermediate", {"SwiGLU"}, false},
        {PrecisionKind::LinearHalfAccumulate, "linear-fp16-accumulate", {"QKV", "OProj", "GateUp", "Down"}, true},
    };
    return all;
}

std::string joined(const std::vector<std::string> &names, const char *sep) {
    std::string s;
    for (size_t i = 0; i < names.size(); i++) s += (i ? sep : "") + names[i];
    return s;
}

}  // namespace

std::string PrecisionFault::describe() const {
    for (const KindInfo &k : kinds())
        if (k.kind == kind) return std::string(k.name) + " in layer " + std::to_string(layer) + " (" + joined(ops, ", ") + ")";
    return spec;
}

bool parse_precision_fault(const std::string &spec, PrecisionFault *out, std::string *err) {
    const std::string head = "--precision-fault '" + spec + "': ";
    const std::string name = spec.substr(0, spec.find(':'));
    const KindInfo *info = nullptr;
    std::vector<std::string> names;
    for (const KindInfo &k : kinds()) {
        if (name == k.name) info = &k;
        names.push_back(k.name);
    }
    if (!info) {
        *err = head + "kind must be one of " + joined(names, ", ") + " before the ':'";
        return false;
    }
    PrecisionFault f;
    f.kind = info->kind;
    f.spec = spec;
    std::string op;
    for (const SpecField &sf : spec_fields(spec)) {
        const std::string &field = sf.text, &key = sf.key, &val = sf.value;
        int layer = 0;
        if (key == "layer" && parse_int(val, 0, 99999, &layer)) {
            f.layer = layer;
        } else if (key == "op" && !val.empty()) {
            op = canonical_node_name(val);
            bool fits = false;
            for (const std::string &n : info->ops) fits = fits || n == op;
            if (!fits) {
                *err = head + "op '" + val + "' is not a kernel " + info->name + " can be; use op=" +
                       joined(info->ops, " or op=");
                return false;
            }
        } else {
            *err = head + "bad field '" + field + "' (expected layer=N" +
                   (info->op_required ? ", op=NAME)" : " and optionally op=NAME)");
            return false;
        }
    }
    if (f.layer < 0) {
        *err = head + "layer=N is required (the decoder layer, from 0)";
        return false;
    }
    if (op.empty() && info->op_required) {
        *err = head + "op=NAME is required: one of " + joined(info->ops, ", ");
        return false;
    }
    f.ops = op.empty() ? info->ops : std::vector<std::string>{op};
    *out = f;
    return true;
}

bool has_precision_fault(const std::vector<PrecisionFault> &faults, int layer, const std::string &node) {
    for (const PrecisionFault &f : faults)
        if (f.layer == layer)
            for (const std::string &op : f.ops)
                if (op == node) return true;
    return false;
}

const char *precision_fault_help() {
    return "  --precision-fault SPEC\n"
           "                     make one layer's kernel lose precision the way real kernels have:\n"
           "                     an intermediate kept in the run's half type (--dtype fp16 or bf16:\n"
           "                     'fp16' in the names means either; not in fp32 runs). Repeatable;\n"
           "                     the kernel is faulty in prefill and decode, every round. SPEC is\n"
           "                     KIND:layer=N[,op=NAME], KIND one of\n"
           "                       rmsnorm-fp16-accumulate   sum of squares accumulated in half\n"
           "                                                 (op=InputNorm|PostNorm; default both)\n"
           "                       softmax-no-max-subtract   attention softmax without the row max\n"
           "                                                 subtracted, exp and its sum in half\n"
           "                                                 (op=Attention)\n"
           "                       swiglu-fp16-intermediate  silu(gate) rounded to half before the\n"
           "                                                 product (op=SwiGLU)\n"
           "                       linear-fp16-accumulate    dot products accumulated in half\n"
           "                                                 (op=QKV|OProj|GateUp|Down, required)\n"
           "                     e.g. --precision-fault linear-fp16-accumulate:layer=1,op=Down\n";
}

}  // namespace atbsim_lm
