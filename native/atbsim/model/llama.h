// The stand-in Llama-style decoder: weights, layer graphs, the prefill and decode
// atb_speed models, and greedy generation on top of them.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "atbsim/runtime.h"
#include "options.h"

namespace atbsim_lm {

struct InjectSite;

class Llama {
public:
    // Sets the device (aclrtSetDevice) and builds everything; check ok()/error().
    explicit Llama(const Options &opt);
    ~Llama();
    Llama(const Llama &) = delete;
    Llama &operator=(const Llama &) = delete;

    bool ok() const { return error_.empty(); }
    const std::string &error() const { return error_; }
    const Options &options() const { return opt_; }

    // Greedy generation of n_new tokens (one prefill + n_new-1 decode steps).
    // `logits`, if given, receives each step's fp32 logits (n_new * vocab).
    bool generate(const std::vector<int64_t> &prompt, int n_new, std::vector<int64_t> *out,
                  std::vector<float> *logits, std::string *err);

    // The prompt the options ask for (--prompt or --prompt-len).
    std::vector<int64_t> default_request() const;

    // Descriptions of the --inject faults that have not fired (yet).
    std::vector<std::string> unfired_injections() const;

private:
    struct Phase;
    void build();
    bool build_stage(Phase &st, bool prefill);
    std::shared_ptr<atbsim::Operation> make_leaf(atbsim::LeafOpSpec spec, bool prefill, int layer, const std::string &node,
                                                 const std::string &graph, const std::atomic<uint64_t> *round);
    void ensure_cache(int64_t tokens);
    bool step(Phase &st, const std::vector<int64_t> &ids, int64_t pos0, int64_t *token, std::vector<float> *logits,
              std::string *err);

    Options opt_;
    std::string error_;
    aclrtStream stream_ = nullptr;
    std::unique_ptr<atbsim::Context> ctx_;
    std::vector<atbsim::Tensor> weights_;
    std::vector<atbsim::Tensor> kcache_, vcache_;
    int64_t cache_blocks_ = 0;
    std::vector<std::shared_ptr<InjectSite>> sites_;
    std::unique_ptr<Phase> prefill_, decode_;
};

}  // namespace atbsim_lm
