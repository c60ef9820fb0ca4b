// The op tree of a Llama-70B-shaped model as ATB-Models builds it for one
// device: a prefill and a decode model, each a list of top-level ATB ops
// (WordEmbedding, N layer graphs, the final RmsNorm, LmHead), every layer a
// graph of 13 leaf ops. What the load generator hands the hooks: names, ATB
// dtype codes, dims strings, param JSON, the graph and topo documents.
#ifndef LOADGEN_TREE_H
#define LOADGEN_TREE_H

#include <cstdint>
#include <string>
#include <vector>

namespace loadgen {

struct TreeOptions {
    int layers = 80;
    int64_t batch = 8;            // decode: sequences = tokens of a step
    int64_t prefillTokens = 128;  // prefill: one sequence of this many tokens
    std::string dtype = "1";      // activations: ATB dtype code (fp16 "1", bf16 "27")
    bool tiny = false;            // every tensor one element (the record path alone)
    bool weights = false;         // also save weights and KV caches (ATB does; huge)
};

// One tensor of a graph (ATB numbering: inputs, outputs, then internals).
struct TensorSpec {
    std::string dims;      // ATB's comma string, e.g. "8,8192"
    std::string dtype;     // ATB dtype code as a decimal string
    uint64_t bytes = 0;
    bool state = false;    // a weight matrix or KV cache: saved only with `weights`
    const void *data = nullptr;  // prepared contents (Payload)
};

// One runner: a graph (nodes) or a leaf op (IR names, param).
struct OpNode {
    std::string name;                     // ATB's name_: the graph's name or the op type
    std::vector<int> in, out;             // tensor ids in the top-level op's graph
    std::vector<std::string> inIr, outIr; // a leaf op's IR names (file name suffixes)
    std::string param;                    // GetParamJson().dump(); "" for graphs
    std::vector<OpNode> nodes;
    bool graph() const { return !nodes.empty(); }
};

struct TopOp {
    OpNode root;
    std::vector<TensorSpec> tensors;
    int internals = 0;                           // of tensors, the graph's internal ones
    std::vector<std::string> topoIn, topoOut;    // its node in the model's topo document
};

struct Model {
    std::string name;          // ATB-Models' model name (IsReportModelTopoInfo)
    std::vector<TopOp> ops;    // in execution order
    std::string topo;          // ReportModelTopoInfo's document
};

Model BuildModel(const TreeOptions &opt, bool prefill);

// ReportOperationGraph's document of a top-level op with global id `gid`
// (docs/atb_hooks.md §7: compact, keys sorted).
std::string GraphJson(const TopOp &op, int64_t gid);

} // namespace loadgen

#endif
