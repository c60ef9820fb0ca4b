// Leaf operations of the stand-in Llama model, as runtime specs with CPU
// compute callbacks. The runtime owns the ATB protocol (ids, hooks, dumps);
// these specs only say what each op looks like and how its kernels compute.
#pragma once

#include <atomic>
#include <memory>
#include <string>

#include "atbsim/runtime.h"
#include "options.h"

namespace atbsim_lm {

struct OpEnv {
    bool no_compute = false;
    int heads = 1;
    int head_dim = 2;
    int block_size = 128;  // KV cache block size (tokens)
    // The run's half type if this op's kernel has a --precision-fault (RmsNorm,
    // Linear, attention and SwiGLU kernels honour it); Store::F32: a clean kernel.
    Store precision_fault = Store::F32;
};

atbsim::LeafOpSpec rmsnorm_op(const OpEnv &env, float eps);
atbsim::LeafOpSpec linear_op(const OpEnv &env);
atbsim::LeafOpSpec split3_op(const OpEnv &env);
atbsim::LeafOpSpec rope_op(const OpEnv &env);
atbsim::LeafOpSpec reshape_and_cache_op(const OpEnv &env);
atbsim::LeafOpSpec self_attention_op(const OpEnv &env);
atbsim::LeafOpSpec paged_attention_op(const OpEnv &env);
atbsim::LeafOpSpec add_op(const OpEnv &env, Store dtype);
atbsim::LeafOpSpec swiglu_op(const OpEnv &env);
atbsim::LeafOpSpec gather_op(const OpEnv &env, Store dtype);
atbsim::LeafOpSpec event_op();

// Where one --inject lands. The model fills `op`, `graph` and `round` once the
// op exists; the kernel callback reads them when it fires.
struct InjectSite {
    Inject spec;
    std::string graph;                       // top-level op name, e.g. "Decoder_layer"
    int device = 0;                          // for the dump path in the message
    const atbsim::Operation *op = nullptr;   // the leaf op whose output is poisoned
    const std::atomic<uint64_t> *round = nullptr;  // current round of the stage
    std::string ir_name;                     // IR name of the output ("" if none)
    std::atomic<int> fired{0};               // how often it was written
};

// Wraps the last kernel of `spec` that writes Out(site->spec.out) so that, at the
// chosen round, it writes the special value after computing. False (with *err)
// if the op has no such output.
bool attach_injection(atbsim::LeafOpSpec &spec, std::shared_ptr<InjectSite> site, std::string *err);

}  // namespace atbsim_lm
