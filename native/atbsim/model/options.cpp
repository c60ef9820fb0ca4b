#include "options.h"

#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <sstream>

#include <unistd.h>

#include "hf_llama.h"

namespace atbsim_lm {

bool Options::was_given(const std::string &name) const {
    for (const std::string &g : given)
        if (g == name) return true;
    return false;
}

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

std::string canonical_node_name(const std::string &name) {
    for (const std::string &node : layer_node_names())
        if (lower(node) == lower(name)) return node;
    return "";
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

bool parse_int(const std::string &text, int lo, int hi, int *out) {
    uint64_t v;
    if (!parse_u64(text, &v) || v < static_cast<uint64_t>(lo) || v > static_cast<uint64_t>(hi)) return false;
    *out = static_cast<int>(v);
    return true;
}

// "1,2,3": token ids, each below 2^31 (the vocabulary check comes with validate()).
static bool parse_ids(const std::string &text, std::vector<int64_t> *out) {
    std::vector<int64_t> ids;
    std::istringstream fields(text);
    std::string field;
    while (std::getline(fields, field, ',')) {
        uint64_t v;
        if (!parse_u64(field, &v) || v >= (1ull << 31)) return false;
        ids.push_back(static_cast<int64_t>(v));
    }
    if (ids.empty() || text.back() == ',') return false;
    *out = ids;
    return true;
}

std::vector<SpecField> spec_fields(const std::string &spec) {
    std::vector<SpecField> out;
    size_t colon = spec.find(':');
    std::istringstream fields(colon == std::string::npos ? "" : spec.substr(colon + 1));
    std::string field;
    while (std::getline(fields, field, ',')) {
        if (field.empty()) continue;
        size_t eq = field.find('=');
        out.push_back({field, field.substr(0, eq), eq == std::string::npos ? "" : field.substr(eq + 1)});
    }
    return out;
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
    std::string kind = spec.substr(0, spec.find(':'));
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
    for (const SpecField &f : spec_fields(spec)) {
        const std::string &field = f.text, &key = f.key, &val = f.value;
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
            inj.op = canonical_node_name(val);
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
        opt->given.push_back(name);
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
    bool known = found || name == "--dtype" || name == "--seed" || name == "--inject" || name == "--prompt" ||
                 name == "--weights" || name == "--prompt-ids" || name == "--decode-ids" ||
                 name == "--precision-fault";
    if (!known) return 0;
    opt->given.push_back(name);
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
    if (name == "--weights") {
        if (val.empty()) {
            *err = "--weights: the directory name is empty";
            return -1;
        }
        opt->weights = val;
        return 1;
    }
    if (name == "--prompt-ids" || name == "--decode-ids") {
        if (parse_ids(val, name == "--prompt-ids" ? &opt->prompt_ids : &opt->decode_ids)) return 1;
        *err = name + " '" + val + "': expected token ids separated by commas, e.g. 1,2,3";
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
    if (name == "--precision-fault") {
        PrecisionFault fault;
        if (!parse_precision_fault(val, &fault, err)) return -1;
        opt->precision_faults.push_back(fault);
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
    if (!opt.prompt_ids.empty() && (opt.was_given("--prompt") || opt.was_given("--prompt-len"))) {
        *err = "--prompt-ids is the prompt: drop --prompt / --prompt-len";
        return false;
    }
    if (static_cast<int64_t>(opt.decode_ids.size()) > opt.decode_steps) {
        *err = "--decode-ids has " + std::to_string(opt.decode_ids.size()) + " ids for --decode-steps " +
               std::to_string(opt.decode_steps) + " (one id feeds one decode step)";
        return false;
    }
    for (const auto *ids : {&opt.prompt_ids, &opt.decode_ids})
        for (int64_t id : *ids)
            if (id >= opt.vocab) {
                *err = std::string(ids == &opt.prompt_ids ? "--prompt-ids" : "--decode-ids") + ": token " +
                       std::to_string(id) + " is outside the vocabulary [0, " + std::to_string(opt.vocab) + ")";
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
    for (const PrecisionFault &f : opt.precision_faults) {
        const std::string head = "--precision-fault '" + f.spec + "': ";
        if (f.layer >= opt.layers) {
            *err = head + "layer " + std::to_string(f.layer) + " does not exist (--layers " + std::to_string(opt.layers) +
                   ", layers count from 0)";
            return false;
        }
        if (opt.dtype == Store::F32) {
            *err = head + "a precision fault keeps an intermediate in the run's half type, so it needs --dtype fp16 or "
                          "bf16 (this run is fp32)";
            return false;
        }
        if (opt.no_compute) {
            *err = head + "--no-compute does no arithmetic to lose precision in; drop one of them";
            return false;
        }
    }
    return true;
}

bool finish_options(Options *opt, std::string *err) {
    if (!opt->weights.empty() && !apply_hf_checkpoint(opt, err)) return false;
    if (!opt->decode_ids.empty() && !opt->was_given("--decode-steps"))
        opt->decode_steps = static_cast<int>(opt->decode_ids.size());
    return validate(*opt, err);
}

const char *model_options_help() {
    return "Model options:\n"
           "  --layers N         decoder layers (default 2)\n"
           "  --hidden N         hidden size (default 64)\n"
           "  --heads N          attention heads; hidden/heads must be even (default 4)\n"
           "  --ffn N            MLP size (default 2*hidden)\n"
           "  --vocab N          vocabulary size (default 256)\n"
           "  --prompt-len N     prompt length in tokens (default 8)\n"
           "  --prompt TEXT      prompt text instead: no tokenizer, each byte is one token,\n"
           "                     id = byte % vocab\n"
           "  --prompt-ids IDS   the prompt as token ids, comma-separated (e.g. 1,2,3), as a\n"
           "                     tokenizer made them; not with --prompt / --prompt-len\n"
           "  --decode-steps N   decode steps after the prefill (default 4; with --decode-ids,\n"
           "                     their count)\n"
           "  --decode-ids IDS   teacher forcing: decode step k (from 0) is fed the k-th id\n"
           "                     instead of the previous step's argmax, e.g. the tokens a torch\n"
           "                     golden generated, so both sides run the same sequence; past the\n"
           "                     last id, the argmax again. The printed tokens stay each step's\n"
           "                     argmax. Every request (and `serve` request) is fed the same ids\n"
           "  --requests K       run K requests in this process; rounds advance (default 1)\n"
           "  --dtype T          fp32 | fp16 | bf16 storage, fp32 math (default fp16; with\n"
           "                     --weights, the checkpoint's dtype)\n"
           "  --seed N           weight seed; same seed = same weights in every dtype (default 1)\n"
           "  --weights DIR      a Hugging Face LlamaForCausalLM checkpoint instead of random\n"
           "                     weights: DIR/config.json and DIR/model.safetensors (or\n"
           "                     model.safetensors.index.json and its shards), F32/F16/BF16,\n"
           "                     converted to --dtype. config.json sets --layers --hidden --heads\n"
           "                     --ffn --vocab (given too, they must agree), rms_norm_eps,\n"
           "                     rope_theta and the default --dtype (its dtype / torch_dtype).\n"
           "                     Llama only: SiLU, no biases, default RoPE, num_key_value_heads =\n"
           "                     num_attention_heads. Not with --seed or --no-compute. A bad\n"
           "                     checkpoint is a usage error (exit 2) naming the problem\n"
           "  --device N         aclrtSetDevice id (default 0; `serve` sets it per worker)\n"
           "  --async            execute layer nodes on a worker thread (ATB_OPERATION_EXECUTE_ASYNC)\n"
           "  --no-compute       no arithmetic (benchmarks): real shapes; weights, KV cache (layers\n"
           "                     share them) and each kernel's outputs hold cheap varying data\n"
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
