#include "options.h"

#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <sstream>

#include <unistd.h>

namespace atbsim_lm {

const std::vector<std::string> &layer_node_names() {
    static const std::vector<std::string> names = {
        "InputNorm", "QKV", "SplitQKV", "Rope", "ReshapeAndCache", "Attention", "OProj",
        "AttnAdd", "Event", "PostNorm", "GateUp", "SwiGLU", "Down", "MlpAdd"};
    return names;
}

static std::string lower(std::string s) {
    for (char &c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return s;
}

static bool parse_u64(const std::string &text, uint64_t *out) {
    if (text.empty() || !std::isdigit(static_cast<unsigned char>(text[0]))) return false;
    errno = 0;
    char *end = nullptr;
    unsigned long long v = std::strtoull(text.c_str(), &end, 10);
    if (errno || *end) return false;
    *out = v;
    return true;
}

static bool parse_int(const std::string &text, int lo, int hi, int *out) {
    uint64_t v;
    if (!parse_u64(text, &v) || v < static_cast<uint64_t>(lo) || v > static_cast<uint64_t>(hi)) return false;
    *out = static_cast<int>(v);
    return true;
}

std::string Inject::describe() const {
    std::ostringstream os;
    if (scale != 0.0) os << kind << " of output " << out << " of ";
    else os << kind << " into output " << out << " element " << elem << " of ";
    if (layer >= 0) os << (stage == Stage::Prefill ? "Prefill_layer" : "Decoder_layer") << " layer " << layer << " op " << op;
    else os << op << " (" << (stage == Stage::Prefill ? "prefill" : "decode") << ")";
    os << " at round " << round;
    if (device >= 0) os << " on device " << device;
    return os.str();
}

bool parse_inject(const std::string &spec, Inject *out, std::string *err) {
    Inject inj;
    size_t colon = spec.find(':');
    std::string kind = spec.substr(0, colon);
    if (kind == "nan") inj.value = NAN;
    else if (kind == "inf" || kind == "+inf") inj.value = INFINITY, kind = "inf";
    else if (kind == "-inf") inj.value = -INFINITY;
    else if (kind.rfind("scale=", 0) == 0) {
        char *end = nullptr;
        std::string k = kind.substr(6);
        inj.scale = std::strtod(k.c_str(), &end);
        if (k.empty() || *end || !std::isfinite(inj.scale) || inj.scale == 0.0) {
            *err = "--inject '" + spec + "': scale=K needs a finite, non-zero number K";
            return false;
        }
    } else {
        *err = "--inject '" + spec + "': kind must be nan, inf, -inf or scale=K before the ':'";
        return false;
    }
    inj.kind = kind;
    bool have_op = false;
    std::string rest = colon == std::string::npos ? "" : spec.substr(colon + 1);
    std::istringstream fields(rest);
    std::string field;
    while (std::getline(fields, field, ',')) {
        if (field.empty()) continue;
        size_t eq = field.find('=');
        std::string key = field.substr(0, eq), val = eq == std::string::npos ? "" : field.substr(eq + 1);
        uint64_t n = 0;
        bool numeric = parse_u64(val, &n);
        if (key == "layer" && numeric && n < 100000) inj.layer = static_cast<int>(n);
        else if (key == "round" && numeric) inj.round = n;
        else if (key == "elem" && numeric) inj.elem = n;
        else if (key == "out" && numeric && n < 16) inj.out = n;
        else if (key == "device" && numeric && n < 1u << 31) inj.device = static_cast<int>(n);
        else if (key == "stage" && (val == "prefill" || val == "decode"))
            inj.stage = val == "prefill" ? Stage::Prefill : Stage::Decode;
        else if (key == "op" && !val.empty()) {
            std::string want = lower(val);
            for (const std::string &name : layer_node_names())
                if (lower(name) == want) inj.op = name;
            if (want == "wordembedding") inj.op = "WordEmbedding";
            if (want == "lmhead") inj.op = "LmHead";
            if (inj.op.empty()) {
                std::string all;
                for (const std::string &name : layer_node_names()) all += name + " ";
                *err = "--inject '" + spec + "': unknown op '" + val + "'; use one of: " + all +
                       "(with layer=N) or WordEmbedding, LmHead (without layer=)";
                return false;
            }
            have_op = true;
        } else {
            *err = "--inject '" + spec + "': bad field '" + field +
                   "' (expected layer=N, op=NAME, round=N, stage=prefill|decode, elem=N, out=N, device=N)";
            return false;
        }
    }
    if (!have_op) {
        *err = "--inject '" + spec + "': op=NAME is required";
        return false;
    }
    if (inj.op == "Event") {
        *err = "--inject '" + spec + "': the Event op has no output to inject into; pick another op";
        return false;
    }
    bool top = inj.op == "WordEmbedding" || inj.op == "LmHead";
    if (top && inj.layer >= 0) {
        *err = "--inject '" + spec + "': " + inj.op + " is a top-level op, drop layer=";
        return false;
    }
    if (!top && inj.layer < 0) {
        *err = "--inject '" + spec + "': op " + inj.op + " lives in a layer, add layer=N";
        return false;
    }
    *out = inj;
    return true;
}

int parse_model_option(const std::vector<std::string> &args, size_t *i, Options *opt, std::string *err) {
    const std::string &name = args[*i];
    bool is_flag = name == "--async" || name == "--no-compute";
    if (is_flag) {
        (name == "--async" ? opt->async : opt->no_compute) = true;
        *i += 1;
        return 1;
    }
    struct IntOpt { const char *name; int *dst; int lo, hi; };
    const IntOpt ints[] = {
        {"--layers", &opt->layers, 1, 1024},       {"--hidden", &opt->hidden, 2, 65536},
        {"--heads", &opt->heads, 1, 1024},         {"--ffn", &opt->ffn, 1, 262144},
        {"--vocab", &opt->vocab, 2, 1 << 20},      {"--prompt-len", &opt->prompt_len, 1, 1 << 20},
        {"--decode-steps", &opt->decode_steps, 0, 1 << 20}, {"--requests", &opt->requests, 1, 1 << 20},
        {"--device", &opt->device, 0, 1023},
    };
    const IntOpt *found = nullptr;
    for (const IntOpt &o : ints)
        if (name == o.name) found = &o;
    bool known = found || name == "--dtype" || name == "--seed" || name == "--inject" || name == "--prompt";
    if (!known) return 0;
    if (*i + 1 >= args.size()) {
        *err = name + " needs a value";
        return -1;
    }
    const std::string &val = args[*i + 1];
    *i += 2;
    if (found) {
        if (parse_int(val, found->lo, found->hi, found->dst)) return 1;
        *err = name + " '" + val + "': expected an integer in [" + std::to_string(found->lo) + ", " +
               std::to_string(found->hi) + "]";
        return -1;
    }
    if (name == "--dtype") {
        if (parse_store(val, &opt->dtype)) return 1;
        *err = "--dtype '" + val + "': expected fp32, fp16 or bf16";
        return -1;
    }
    if (name == "--seed") {
        if (parse_u64(val, &opt->seed)) return 1;
        *err = "--seed '" + val + "': expected a non-negative integer";
        return -1;
    }
    if (name == "--prompt") {
        if (val.empty()) {
            *err = "--prompt: the text is empty";
            return -1;
        }
        opt->prompt = val;
        return 1;
    }
    Inject inj;
    if (!parse_inject(val, &inj, err)) return -1;
    opt->injects.push_back(inj);
    return 1;
}

uint64_t weight_bytes(const Options &opt) {
    const uint64_t H = static_cast<uint64_t>(opt.hidden), F = static_cast<uint64_t>(opt.ffn_dim());
    const uint64_t V = static_cast<uint64_t>(opt.vocab);
    // --no-compute shares one layer's weights between all layers.
    const uint64_t layers = opt.no_compute ? 1 : static_cast<uint64_t>(opt.layers);
    const uint64_t per_layer = 2 * H + 4 * H * H + 3 * F * H;
    return (2 * V * H + H + layers * per_layer) * store_size(opt.dtype);
}

bool validate(const Options &opt, std::string *err) {
    const uint64_t ram = static_cast<uint64_t>(sysconf(_SC_PHYS_PAGES)) * static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
    if (weight_bytes(opt) > ram) {
        *err = "the weights alone need " + std::to_string(weight_bytes(opt) >> 20) + " MiB, more than this machine's " +
               std::to_string(ram >> 20) + " MiB; lower --layers/--hidden/--ffn/--vocab (or use --no-compute)";
        return false;
    }
    if (opt.hidden % opt.heads != 0 || (opt.hidden / opt.heads) % 2 != 0) {
        *err = "--hidden " + std::to_string(opt.hidden) + " / --heads " + std::to_string(opt.heads) +
               ": the head size hidden/heads must be a whole even number";
        return false;
    }
    for (const Inject &inj : opt.injects) {
        if (inj.layer >= opt.layers) {
            *err = "--inject " + inj.describe() + ": layer " + std::to_string(inj.layer) + " does not exist (--layers " +
                   std::to_string(opt.layers) + ", layers count from 0)";
            return false;
        }
        if (inj.stage == Stage::Decode && opt.decode_steps == 0) {
            *err = "--inject " + inj.describe() + ": stage=decode but --decode-steps is 0";
            return false;
        }
    }
    return true;
}

const char *model_options_help() {
    return "Model options:\n"
           "  --layers N         decoder layers (default 2)\n"
           "  --hidden N         hidden size (default 64)\n"
           "  --heads N          attention heads; hidden/heads must be even (default 4)\n"
           "  --ffn N            MLP size (default 2*hidden)\n"
           "  --vocab N          vocabulary size (default 256)\n"
           "  --prompt-len N     prompt length in tokens (default 8)\n"
           "  --prompt TEXT      prompt text instead (byte tokens, id = byte % vocab)\n"
           "  --decode-steps N   decode steps after the prefill (default 4)\n"
           "  --requests K       run K requests in this process; rounds advance (default 1)\n"
           "  --dtype T          fp32 | fp16 | bf16 storage, fp32 math (default fp16)\n"
           "  --seed N           weight seed; same seed = same weights in every dtype (default 1)\n"
           "  --device N         aclrtSetDevice id (default 0; `serve` sets it per worker)\n"
           "  --async            execute layer nodes on a worker thread (ATB_OPERATION_EXECUTE_ASYNC)\n"
           "  --no-compute       no arithmetic (benchmarks): real shapes, weights and KV cache hold\n"
           "                     constants (layers share them), kernels leave outputs as allocated\n"
           "  --inject SPEC      put NaN/Inf into one op's output, or scale it; repeatable. SPEC is\n"
           "                     KIND:op=NAME[,layer=N][,stage=prefill|decode][,round=N][,elem=N][,out=N]\n"
           "                       [,device=N]\n"
           "                     KIND: nan | inf | -inf (into one element), or scale=K (multiply\n"
           "                       the whole output by a finite K, so an overflow happens downstream)\n"
           "                     NAME in a layer (needs layer=N, from 0): InputNorm QKV SplitQKV Rope\n"
           "                       ReshapeAndCache Attention OProj AttnAdd Event PostNorm GateUp SwiGLU\n"
           "                       Down MlpAdd (Event has no output and cannot be injected)\n"
           "                     layer=N: the N-th decoder layer, from 0. The dump and the tools name it\n"
           "                       by its top-level op id: N+1 in prefill (op 0 is WordEmbedding), so\n"
           "                       layer 1 is op 2_Prefill_layer; N+L+3 in decode with --layers L\n"
           "                     NAME at top level (no layer=): WordEmbedding LmHead\n"
           "                     stage: which model, DecoderModel_Prefill or DecoderModel_Decoder\n"
           "                       (default prefill)\n"
           "                     round: the N-th execution of that stage's top-level op, i.e. the\n"
           "                       {exec} directory of the dump (prefill: request N; decode: decode\n"
           "                       step N counted across requests) (default 0)\n"
           "                     elem/out: element and output index of the op (default 0/0)\n"
           "                     device: only the worker of that device (`serve --devices`)\n"
           "                       injects; the others run clean (default: every worker)\n"
           "                     e.g. --inject nan:layer=1,op=SwiGLU,round=0\n";
}

std::vector<int64_t> tokenize(const std::string &text, int vocab) {
    std::vector<int64_t> ids;
    for (unsigned char c : text) ids.push_back(static_cast<int64_t>(c) % vocab);
    return ids;
}

std::vector<int64_t> default_prompt(int n, int vocab) {
    std::vector<int64_t> ids;
    for (int i = 0; i < n; i++) ids.push_back((static_cast<int64_t>(i) * 7 + 3) % vocab);
    return ids;
}

std::string detokenize(const std::vector<int64_t> &ids) {
    std::string text;
    for (int64_t id : ids) text += static_cast<char>(' ' + id % 95);  // printable ASCII
    return text;
}

std::vector<std::string> split_args(const std::string &text) {
    std::vector<std::string> out;
    std::istringstream is(text);
    std::string word;
    while (is >> word) out.push_back(word);
    return out;
}

}  // namespace atbsim_lm
