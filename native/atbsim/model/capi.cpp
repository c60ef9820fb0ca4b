// extern "C" wrapper over Llama; no exception crosses into the host.
#include <algorithm>
#include <cstdio>
#include <exception>

#include "atbsim_model.h"
#include "llama.h"

struct atbsim_model {
    std::unique_ptr<atbsim_lm::Llama> llama;
};

namespace {

void set_err(char *err, size_t len, const std::string &msg) {
    if (err && len) std::snprintf(err, len, "%s", msg.c_str());
}

}  // namespace

extern "C" atbsim_model *atbsim_model_create(const char *options, char *err, size_t err_len) {
    set_err(err, err_len, "");
    try {
        atbsim_lm::Options opt;
        std::vector<std::string> args = atbsim_lm::split_args(options ? options : "");
        std::string msg;
        for (size_t i = 0; i < args.size();) {
            int r = atbsim_lm::parse_model_option(args, &i, &opt, &msg);
            if (r == 0) msg = "unknown model option '" + args[i] + "' (see `atbsim run --help`)";
            if (r <= 0) {
                set_err(err, err_len, msg);
                return nullptr;
            }
        }
        auto m = std::make_unique<atbsim_model>();
        m->llama = std::make_unique<atbsim_lm::Llama>(opt);
        if (!m->llama->ok()) {
            set_err(err, err_len, m->llama->error());
            return nullptr;
        }
        return m.release();
    } catch (const std::exception &e) {
        set_err(err, err_len, std::string("atbsim_model_create: ") + e.what());
        return nullptr;
    }
}

extern "C" long atbsim_model_generate(atbsim_model *m, const int64_t *prompt, size_t prompt_len, int max_new_tokens,
                                      int64_t *out, size_t out_cap, char *err, size_t err_len) {
    set_err(err, err_len, "");
    if (!m || (!out && out_cap)) {
        set_err(err, err_len, "atbsim_model_generate: model or output buffer is NULL");
        return -1;
    }
    try {
        const atbsim_lm::Options &opt = m->llama->options();
        std::vector<int64_t> ids = prompt && prompt_len ? std::vector<int64_t>(prompt, prompt + prompt_len)
                                                        : m->llama->default_request();
        int n = max_new_tokens > 0 ? max_new_tokens : opt.decode_steps + 1;
        std::vector<int64_t> toks;
        std::string msg;
        if (!m->llama->generate(ids, n, &toks, nullptr, &msg)) {
            set_err(err, err_len, msg);
            return -1;
        }
        size_t k = std::min(out_cap, toks.size());
        std::copy(toks.begin(), toks.begin() + static_cast<long>(k), out);
        return static_cast<long>(k);
    } catch (const std::exception &e) {
        set_err(err, err_len, std::string("atbsim_model_generate: ") + e.what());
        return -1;
    }
}

extern "C" void atbsim_model_destroy(atbsim_model *m) { delete m; }
