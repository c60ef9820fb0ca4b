// Model options shared by `atbsim run`, `atbsim serve` and the C API, and the
// fault-injection spec. Parsing never exits: errors come back as text.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "numerics.h"
#include "precision_fault.h"

namespace atbsim_lm {

enum class Stage { Prefill, Decode };

// One fault: write `value` into element `elem` of output `out` of one op,
// at the `round`-th execution of the top-level op that contains it. That round
// is the `{exec}` directory of the dump (prefill: one per request; decode: one
// per decode step, counted across requests).
struct Inject {
    float value = 0.0f;           // NaN, +inf or -inf
    double scale = 0.0;           // scale=K: multiply the whole output by K instead (0: poke `value`)
    std::string kind;             // "nan" | "inf" | "-inf" | "scale=K", as written
    Stage stage = Stage::Prefill;
    int layer = -1;               // -1: a top-level op (WordEmbedding, LmHead)
    std::string op;               // canonical node name (see layer_node_names())
    uint64_t round = 0;
    size_t elem = 0;
    size_t out = 0;
    int device = -1;              // -1: every worker; else only the worker of that device
    std::string describe() const;
};

struct Options {
    int layers = 2;
    int hidden = 64;
    int heads = 4;
    int ffn = 0;  // 0: 2 * hidden
    int vocab = 256;
    int prompt_len = 8;
    std::string prompt;  // non-empty: tokenized bytes replace --prompt-len
    std::vector<int64_t> prompt_ids;  // non-empty: the prompt, as ids
    int decode_steps = 4;
    std::vector<int64_t> decode_ids;  // teacher forcing: decode step k feeds decode_ids[k]
    int requests = 1;
    Store dtype = Store::F16;
    uint64_t seed = 1;
    int device = 0;
    bool async = false;
    bool no_compute = false;
    std::vector<Inject> injects;
    std::vector<PrecisionFault> precision_faults;
    // --weights DIR: a Hugging Face checkpoint; finish_options() fills the sizes and these.
    std::string weights;
    bool tie_embeddings = false;
    double rms_eps = 1e-6;
    double rope_theta = 10000.0;
    std::vector<std::string> given;  // the options given explicitly, as written

    int ffn_dim() const { return ffn > 0 ? ffn : 2 * hidden; }
    bool was_given(const std::string &name) const;
};

// Names of the nodes of one layer graph, in node order; `op=` accepts these
// (case-insensitive) and the top-level ops "WordEmbedding" and "LmHead".
const std::vector<std::string> &layer_node_names();
// The canonical spelling of a layer node name given in any case; "" if none.
std::string canonical_node_name(const std::string &name);

// The fields after the ':' of a fault spec (KIND:key=value,...), empty ones skipped.
struct SpecField {
    std::string text, key, value;  // "layer=1", "layer", "1"
};
std::vector<SpecField> spec_fields(const std::string &spec);

// A decimal integer in [lo, hi], nothing else.
bool parse_int(const std::string &text, int lo, int hi, int *out);

bool parse_inject(const std::string &spec, Inject *out, std::string *err);

// Consumes the model option at args[*i] (and its value), advancing *i.
// Returns 1 if consumed, 0 if args[*i] is not a model option, -1 on error.
int parse_model_option(const std::vector<std::string> &args, size_t *i, Options *opt, std::string *err);

// Bytes of all weight tensors the model allocates.
uint64_t weight_bytes(const Options &opt);

// Cross-field checks after parsing (sizes, heads divide hidden, injection and
// precision-fault layers in range, precision faults only in half runs).
bool validate(const Options &opt, std::string *err);

// After parsing: applies --weights (config.json sets the sizes; every tensor is
// checked), defaults --decode-steps to the --decode-ids count, then validate().
// Idempotent, so the command and the model can both call it.
bool finish_options(Options *opt, std::string *err);

// The help text of the model options (shared by `run`, `serve` and the C API docs).
const char *model_options_help();

// Bytes of the text, each mapped into [0, vocab).
std::vector<int64_t> tokenize(const std::string &text, int vocab);
// Default prompt of n tokens, a fixed function of the index.
std::vector<int64_t> default_prompt(int n, int vocab);
// Printable rendering of generated ids (one ASCII character per token).
std::string detokenize(const std::vector<int64_t> &ids);

// Splits a C API option string on whitespace (no quoting; values have no spaces).
std::vector<std::string> split_args(const std::string &text);

}  // namespace atbsim_lm
