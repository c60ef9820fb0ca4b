// Llama-3-70B shapes (hidden 8192, 64 heads / 8 KV heads of 128, FFN 28672,
// vocab 128256) in ATB-Models' layout: fused QKV and gate-up linears, paged
// KV caches of 128-token blocks. A decode step is `batch` sequences of one
// token, a prefill one sequence of `prefillTokens`. Op and IR names and params
// are ATB's style (atbsim_model.md lists the stand-in model's; the shapes here
// are the 70B's). With the default stages (before/intensor*, after/outtensor*)
// and save_child, a decode layer saves 49 tensors, a prefill layer 52 (65 and
// 66 with weights and caches), and 13 op_param.json files.
#include "tree.h"

#include <sstream>

namespace loadgen {
namespace {

constexpr int64_t HIDDEN = 8192, HEADS = 64, KV_HEADS = 8, HEAD_DIM = 128, FFN = 28672;
constexpr int64_t VOCAB = 128256;
constexpr int64_t BLOCK = 128, MAX_BLOCKS = 32; // a sequence's context: up to 4096 tokens
const char *const I32 = "3", *const I64 = "9";

struct LeafKind {
    const char *type;
    std::vector<std::string> inIr, outIr;
    const char *param;
};

const LeafKind RMS_NORM{"RmsNormOperation", {"x", "gamma"}, {"y"},
                        R"({"layerType":1,"normParam":{"epsilon":1e-05,"quantType":0}})"};
const LeafKind LINEAR{"LinearOperation", {"x", "weight"}, {"output"},
                      R"({"hasBias":false,"outDataType":-1,"transposeA":false,"transposeB":true})"};
const LeafKind SPLIT{"SplitOperation", {"x"}, {"output", "output", "output"},
                     R"({"splitDim":-1,"splitNum":3,"splitSizes":[8192,1024,1024]})"};
const LeafKind ROPE{"RopeOperation", {"query", "key", "cos", "sin", "seqlen"},
                    {"ropeQuery", "ropeKey"}, R"({"cosFormat":0,"rotaryCoeff":2})"};
const LeafKind RESHAPE_AND_CACHE{"ReshapeAndCacheOperation",
                                 {"key", "value", "keyCache", "valueCache", "slotMapping"},
                                 {"keyCache", "valueCache"},
                                 R"({"compressType":0,"kvCacheCfg":0})"};
const LeafKind PAGED_ATTENTION{
    "PagedAttentionOperation", {"query", "keyCache", "valueCache", "blockTables", "contextLens"},
    {"attnOut"}, R"({"headNum":64,"kvHeadNum":8,"maskType":0,"qkScale":0.08838834764831845})"};
const LeafKind SELF_ATTENTION{
    "SelfAttentionOperation", {"query", "key", "value", "attentionMask", "seqLen"}, {"attnOut"},
    R"({"calcType":3,"headNum":64,"kernelType":1,"kvHeadNum":8,"maskType":1,)"
    R"("qkScale":0.08838834764831845})"};
const LeafKind ADD{"ElewiseOperation", {"x", "y"}, {"output"}, R"({"elewiseType":8})"};
const LeafKind SWIGLU{"ActivationOperation", {"x"}, {"output"}, R"({"activationType":7,"dim":-1})"};
const LeafKind GATHER{"GatherOperation", {"x", "indices"}, {"output"},
                     R"({"axis":0,"batchDims":0})"};

OpNode Leaf(const LeafKind &kind, std::vector<int> in, std::vector<int> out)
{
    OpNode n;
    n.name = kind.type;
    n.in = std::move(in);
    n.out = std::move(out);
    n.inIr = kind.inIr;
    n.outIr = kind.outIr;
    n.param = kind.param;
    return n;
}

// A top-level op's tensors, added in ATB's numbering order.
class Tensors {
public:
    explicit Tensors(const TreeOptions &opt) : opt_(opt) {}
    int Act(std::vector<int64_t> dims) { return Add(dims, opt_.dtype, false); }
    int State(std::vector<int64_t> dims) { return Add(dims, opt_.dtype, true); }
    int Int(std::vector<int64_t> dims, const char *dtype) { return Add(dims, dtype, false); }
    int Count() const { return (int)list.size(); }
    std::vector<int> Range(int from, int to) const
    {
        std::vector<int> ids;
        for (int i = from; i < to; ++i)
            ids.push_back(i);
        return ids;
    }
    std::vector<TensorSpec> list;

private:
    int Add(std::vector<int64_t> dims, const std::string &dtype, bool state)
    {
        if (opt_.tiny)
            dims = {1};
        TensorSpec t;
        uint64_t elements = 1;
        for (size_t i = 0; i < dims.size(); ++i) {
            t.dims += (i ? "," : "") + std::to_string(dims[i]);
            elements *= (uint64_t)dims[i];
        }
        t.dtype = dtype;
        t.bytes = elements * (dtype == I64 ? 8 : dtype == I32 ? 4 : 2);
        t.state = state;
        list.push_back(t);
        return (int)list.size() - 1;
    }
    const TreeOptions &opt_;
};

// The model's tensor names in its topo document.
struct TopoNames {
    std::string m;
    std::string Input(int i) const { return m + "_input_" + std::to_string(i); }
    std::string Weight(int i) const { return m + "_weight_" + std::to_string(i); }
    std::string Internal(int i) const { return m + "_internal_" + std::to_string(i); }
    std::string KCache(int l) const { return m + "_kcache_" + std::to_string(l); }
    std::string VCache(int l) const { return m + "_vcache_" + std::to_string(l); }
};
// Model inputs: 0 ids, 1 cos, 2 sin, 3 seq_len, 4 block tables, 5 slots,
// 6 lm head indices, 7 the prefill's attention mask. Weights: 0 the
// embedding, 6 per layer from 1, then the final norm and the lm head.
constexpr int WEIGHTS_PER_LAYER = 6;

TopOp Finish(OpNode root, Tensors &t, int inputs, int outputs, std::vector<std::string> topoIn,
             std::vector<std::string> topoOut)
{
    TopOp op;
    root.in = t.Range(0, inputs);
    root.out = t.Range(inputs, inputs + outputs);
    op.root = std::move(root);
    op.internals = t.Count() - inputs - outputs;
    op.tensors = std::move(t.list);
    op.topoIn = std::move(topoIn);
    op.topoOut = std::move(topoOut);
    return op;
}

OpNode Graph(const char *name, std::vector<OpNode> nodes)
{
    OpNode g;
    g.name = name;
    g.nodes = std::move(nodes);
    return g;
}

TopOp Embedding(const TreeOptions &opt, int64_t tokens, const TopoNames &n)
{
    Tensors t(opt);
    const int table = t.State({VOCAB, HIDDEN}), ids = t.Int({tokens}, I64);
    const int out = t.Act({tokens, HIDDEN});
    return Finish(Graph("WordEmbedding", {Leaf(GATHER, {table, ids}, {out})}), t, 2, 1,
                  {n.Weight(0), n.Input(0)}, {n.Internal(0)});
}

TopOp Layer(const TreeOptions &opt, bool prefill, int64_t tokens, int64_t seqs, int l,
            const TopoNames &n)
{
    constexpr int64_t Q = HEADS * HEAD_DIM, KV = KV_HEADS * HEAD_DIM;
    const int64_t T = tokens, blocks = seqs * MAX_BLOCKS;
    Tensors t(opt);
    const int x = t.Act({T, HIDDEN}), cos = t.Act({T, HEAD_DIM}), sin = t.Act({T, HEAD_DIM});
    const int seqLen = t.Int({seqs}, I32), blockTables = t.Int({seqs, MAX_BLOCKS}, I32);
    const int slots = t.Int({T}, I32);
    const int inNorm = t.Act({HIDDEN}), postNorm = t.Act({HIDDEN});
    const int qkvW = t.State({Q + 2 * KV, HIDDEN}), oW = t.State({HIDDEN, Q});
    const int guW = t.State({2 * FFN, HIDDEN}), downW = t.State({HIDDEN, FFN});
    const int kCache = t.State({blocks, BLOCK, KV_HEADS, HEAD_DIM});
    const int vCache = t.State({blocks, BLOCK, KV_HEADS, HEAD_DIM});
    const int mask = prefill ? t.Act({T, T}) : -1;
    const int inputs = t.Count();
    const int y = t.Act({T, HIDDEN});
    const int norm1 = t.Act({T, HIDDEN}), qkv = t.Act({T, Q + 2 * KV});
    const int q = t.Act({T, Q}), k = t.Act({T, KV}), v = t.Act({T, KV});
    const int rq = t.Act({T, Q}), rk = t.Act({T, KV}), attn = t.Act({T, Q});
    const int o = t.Act({T, HIDDEN}), res = t.Act({T, HIDDEN}), norm2 = t.Act({T, HIDDEN});
    const int gu = t.Act({T, 2 * FFN}), act = t.Act({T, FFN}), down = t.Act({T, HIDDEN});
    OpNode attention = prefill
        ? Leaf(SELF_ATTENTION, {rq, rk, v, mask, seqLen}, {attn})
        : Leaf(PAGED_ATTENTION, {rq, kCache, vCache, blockTables, seqLen}, {attn});
    OpNode g = Graph(prefill ? "Prefill_layer" : "Decoder_layer", {
        Leaf(RMS_NORM, {x, inNorm}, {norm1}),
        Leaf(LINEAR, {norm1, qkvW}, {qkv}),
        Leaf(SPLIT, {qkv}, {q, k, v}),
        Leaf(ROPE, {q, k, cos, sin, seqLen}, {rq, rk}),
        Leaf(RESHAPE_AND_CACHE, {rk, v, kCache, vCache, slots}, {kCache, vCache}),
        attention,
        Leaf(LINEAR, {attn, oW}, {o}),
        Leaf(ADD, {x, o}, {res}),
        Leaf(RMS_NORM, {res, postNorm}, {norm2}),
        Leaf(LINEAR, {norm2, guW}, {gu}),
        Leaf(SWIGLU, {gu}, {act}),
        Leaf(LINEAR, {act, downW}, {down}),
        Leaf(ADD, {res, down}, {y}),
    });
    std::vector<std::string> in{n.Internal(l), n.Input(1), n.Input(2), n.Input(3), n.Input(4),
                                n.Input(5)};
    for (int w = 0; w < WEIGHTS_PER_LAYER; ++w)
        in.push_back(n.Weight(1 + WEIGHTS_PER_LAYER * l + w));
    in.push_back(n.KCache(l));
    in.push_back(n.VCache(l));
    if (prefill)
        in.push_back(n.Input(7));
    return Finish(std::move(g), t, inputs, 1, in, {n.Internal(l + 1)});
}

TopOp FinalNorm(const TreeOptions &opt, int64_t tokens, const TopoNames &n)
{
    Tensors t(opt);
    t.Act({tokens, HIDDEN});
    t.Act({HIDDEN});
    t.Act({tokens, HIDDEN});
    // a leaf top-level op: Finish numbers its tensors x, gamma -> y
    return Finish(Leaf(RMS_NORM, {}, {}), t, 2, 1,
                  {n.Internal(opt.layers), n.Weight(1 + WEIGHTS_PER_LAYER * opt.layers)},
                  {n.Internal(opt.layers + 1)});
}

TopOp LmHead(const TreeOptions &opt, int64_t tokens, int64_t seqs, const TopoNames &n)
{
    Tensors t(opt);
    const int hidden = t.Act({tokens, HIDDEN}), index = t.Int({seqs}, I64);
    const int w = t.State({VOCAB, HIDDEN});
    const int logits = t.Act({seqs, VOCAB});
    const int last = t.Act({seqs, HIDDEN});
    OpNode g = Graph("LmHead", {Leaf(GATHER, {hidden, index}, {last}),
                                Leaf(LINEAR, {last, w}, {logits})});
    return Finish(std::move(g), t, 3, 1,
                  {n.Internal(opt.layers + 1), n.Input(6),
                   n.Weight(2 + WEIGHTS_PER_LAYER * opt.layers)},
                  {n.m + "_output_0"});
}

void Ids(std::ostringstream &s, const std::vector<int> &ids)
{
    s << '[';
    for (size_t i = 0; i < ids.size(); ++i)
        s << (i ? "," : "") << ids[i];
    s << ']';
}

void Names(std::ostringstream &s, const char *key, const std::vector<std::string> &names)
{
    s << '"' << key << "\":[";
    for (size_t i = 0; i < names.size(); ++i)
        s << (i ? "," : "") << '"' << names[i] << '"';
    s << ']';
}

std::string Topo(const Model &m, const TopoNames &n, bool prefill, int layers)
{
    std::vector<std::string> in, internal, k, v, w;
    for (int i = 0; i < (prefill ? 8 : 7); ++i)
        in.push_back(n.Input(i));
    for (int i = 0; i <= layers + 1; ++i)
        internal.push_back(n.Internal(i));
    for (int l = 0; l < layers; ++l) {
        k.push_back(n.KCache(l));
        v.push_back(n.VCache(l));
    }
    for (int i = 0; i < 3 + WEIGHTS_PER_LAYER * layers; ++i)
        w.push_back(n.Weight(i));
    std::ostringstream s;
    s << '{';
    Names(s, "inTensors", in);
    s << ',';
    Names(s, "internalTensors", internal);
    s << ',';
    Names(s, "kCacheTensors", k);
    s << ",\"modelName\":\"" << m.name << "\",\"nodes\":[";
    for (size_t i = 0; i < m.ops.size(); ++i) {
        s << (i ? "," : "") << '{';
        Names(s, "inTensors", m.ops[i].topoIn);
        s << ",\"opName\":\"" << m.ops[i].root.name << "\",";
        Names(s, "outTensors", m.ops[i].topoOut);
        s << '}';
    }
    s << "],";
    Names(s, "outTensors", {n.m + "_output_0"});
    s << ',';
    Names(s, "vCacheTensors", v);
    s << ',';
    Names(s, "weightTensors", w);
    s << '}';
    return s.str();
}

} // namespace

Model BuildModel(const TreeOptions &opt, bool prefill)
{
    Model m;
    m.name = prefill ? "DecoderModel_Prefill" : "DecoderModel_Decoder";
    const TopoNames n{m.name};
    const int64_t tokens = prefill ? opt.prefillTokens : opt.batch, seqs = prefill ? 1 : opt.batch;
    m.ops.push_back(Embedding(opt, tokens, n));
    for (int l = 0; l < opt.layers; ++l)
        m.ops.push_back(Layer(opt, prefill, tokens, seqs, l, n));
    m.ops.push_back(FinalNorm(opt, tokens, n));
    m.ops.push_back(LmHead(opt, tokens, seqs, n));
    m.topo = Topo(m, n, prefill, opt.layers);
    return m;
}

std::string GraphJson(const TopOp &op, int64_t gid)
{
    const OpNode &r = op.root;
    std::ostringstream s;
    s << "{\"inTensorNum\":" << r.in.size();
    if (r.graph()) {
        s << ",\"internalTensorNum\":" << op.internals << ",\"nodes\":[";
        for (size_t i = 0; i < r.nodes.size(); ++i) {
            const OpNode &c = r.nodes[i];
            s << (i ? "," : "") << "{\"inTensorIds\":";
            Ids(s, c.in);
            s << ",\"inTensorNum\":" << c.in.size() << ",\"opName\":\"" << c.name << '_' << gid
              << '_' << i << "\",\"opType\":\"" << c.name << "\",\"outTensorIds\":";
            Ids(s, c.out);
            s << ",\"outTensorNum\":" << c.out.size() << ",\"param\":" << c.param << '}';
        }
        s << ']';
    }
    s << ",\"opName\":\"" << r.name << '_' << gid << "\",\"opType\":\"" << r.name
      << "\",\"outTensorNum\":" << r.out.size()
      << ",\"param\":" << (r.graph() ? std::string("\"\"") : r.param) << '}';
    return s.str();
}

} // namespace loadgen
