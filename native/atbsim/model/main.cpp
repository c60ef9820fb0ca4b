// `atbsim`: the stand-in ATB inference command (run one prompt, or serve HTTP).
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <exception>
#include <string>
#include <vector>

#include "llama.h"
#include "serve.h"

using namespace atbsim_lm;

namespace {

const char *kUsage =
    "usage: atbsim run [model options] [--logits-out FILE]\n"
    "       atbsim serve --port P --devices N [model options]\n"
    "       atbsim help | --help | run --help | serve --help\n"
    "\n"
    "A stand-in ATB inference process: a small Llama-style decoder on the CPU, built\n"
    "from the stand-in runtime's operations (libatb.so / libatb_speed.so), so that\n"
    "ATB probes see real ATB hook traffic without an NPU.\n"
    "\n"
    "run    one prompt (per request) through DecoderModel_Prefill and --decode-steps\n"
    "       steps of DecoderModel_Decoder; prints 'request <i> tokens: <ids>' per\n"
    "       request on stdout. Exit 0 ok, 1 model/runtime failure, 2 bad usage.\n"
    "         --logits-out FILE  also write every step's logits (float32, vocab per\n"
    "                            step, little-endian) to FILE: the prefill's last\n"
    "                            token, then one row per decode step\n"
    "serve  an HTTP service like mindieservice_daemon: one worker process per device\n"
    "       (aclrtSetDevice(i), i = 0..N-1), the front listens on 127.0.0.1:P.\n"
    "         --port P      0 picks a free port (printed as 'Listening on 127.0.0.1:<port>')\n"
    "         --devices N   worker processes (default 1)\n"
    "       POST /v1/chat/completions {\"model\",\"messages\",\"max_tokens\"} runs the request\n"
    "       on every worker and answers in OpenAI style (plus \"tokens\" and\n"
    "       \"worker_pids\"); max_tokens defaults to --decode-steps + 1, the prompt is the\n"
    "       messages' contents joined by newlines. GET /health answers 200. Prints\n"
    "       'Daemon start success!' once all workers are ready; SIGTERM/SIGINT stop the\n"
    "       workers and exit 0 (a worker that dies stops the service with exit 1).\n"
    "\n";

void usage(FILE *to) {
    std::fputs(kUsage, to);
    std::fputs(model_options_help(), to);
    std::fputs(precision_fault_help(), to);
}

int usage_error(const std::string &msg) {
    std::fprintf(stderr, "atbsim: %s\n(see `atbsim --help`)\n", msg.c_str());
    return 2;
}

bool wants_help(const std::vector<std::string> &args) {
    for (const std::string &a : args)
        if (a == "--help" || a == "-h") return true;
    return false;
}

std::string join_ids(const std::vector<int64_t> &ids) {
    std::string s;
    for (size_t i = 0; i < ids.size(); i++) s += (i ? " " : "") + std::to_string(ids[i]);
    return s;
}

int run_main(const std::vector<std::string> &args) {
    Options opt;
    std::string logits_path, err;
    for (size_t i = 0; i < args.size();) {
        if (args[i] == "--logits-out") {
            if (i + 1 >= args.size()) return usage_error("--logits-out needs a file name");
            logits_path = args[i + 1];
            i += 2;
            continue;
        }
        int r = parse_model_option(args, &i, &opt, &err);
        if (r == 0) return usage_error("run: unknown option '" + args[i] + "'");
        if (r < 0) return usage_error(err);
    }
    if (!finish_options(&opt, &err)) return usage_error(err);
    FILE *logits_file = nullptr;
    if (!logits_path.empty() && !(logits_file = std::fopen(logits_path.c_str(), "wb"))) {
        std::fprintf(stderr, "atbsim: cannot write --logits-out %s: %s\n", logits_path.c_str(), std::strerror(errno));
        return 1;
    }
    std::fprintf(stderr,
                 "[atbsim] pid %d device %d: layers=%d hidden=%d heads=%d ffn=%d vocab=%d dtype=%s %s%s%s%s\n",
                 static_cast<int>(getpid()), opt.device, opt.layers, opt.hidden, opt.heads, opt.ffn_dim(), opt.vocab,
                 store_name(opt.dtype), opt.weights.empty() ? "seed=" : "weights=",
                 opt.weights.empty() ? std::to_string(opt.seed).c_str() : opt.weights.c_str(), opt.async ? " async" : "",
                 opt.no_compute ? " no-compute" : "");
    for (const PrecisionFault &f : opt.precision_faults)
        std::fprintf(stderr, "[atbsim] precision fault: %s\n", f.describe().c_str());
    int rc = 0;
    {
        Llama model(opt);
        if (!model.ok()) {
            std::fprintf(stderr, "atbsim: %s\n", model.error().c_str());
            rc = 1;
        }
        std::vector<int64_t> prompt = model.default_request();
        for (int r = 0; rc == 0 && r < opt.requests; r++) {
            std::vector<int64_t> toks;
            std::vector<float> logits;
            if (!model.generate(prompt, opt.decode_steps + 1, &toks, logits_file ? &logits : nullptr, &err)) {
                std::fprintf(stderr, "atbsim: request %d: %s\n", r, err.c_str());
                rc = 1;
                break;
            }
            std::printf("request %d tokens: %s\n", r, join_ids(toks).c_str());
            std::fflush(stdout);
            if (logits_file) std::fwrite(logits.data(), sizeof(float), logits.size(), logits_file);
        }
        for (const std::string &inj : model.unfired_injections())
            std::fprintf(stderr, "[atbsim] warning: --inject %s never fired (that round was not reached)\n", inj.c_str());
    }
    if (logits_file && std::fclose(logits_file) != 0) {
        std::fprintf(stderr, "atbsim: writing --logits-out %s failed\n", logits_path.c_str());
        rc = 1;
    }
    return rc;
}

}  // namespace

int main(int argc, char **argv) {
    std::vector<std::string> args(argv + 1, argv + argc);
    if (args.empty()) {
        usage(stderr);
        return 2;
    }
    std::string cmd = args[0];
    args.erase(args.begin());
    if (cmd == "help" || cmd == "--help" || cmd == "-h" || wants_help(args)) {
        usage(stdout);
        return 0;
    }
    try {
        if (cmd == "run") return run_main(args);
        if (cmd == "serve") return serve_main(args);
        if (cmd == kWorkerCommand) return worker_main(args);
    } catch (const std::exception &e) {  // e.g. bad_alloc for a model too big for memory
        std::fprintf(stderr, "atbsim %s: %s\n", cmd.c_str(), e.what());
        return 1;
    }
    return usage_error("unknown command '" + cmd + "'");
}
