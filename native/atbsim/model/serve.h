// `atbsim serve`: the HTTP front process and its per-device worker processes.
#pragma once

#include <string>
#include <vector>

namespace atbsim_lm {

// Hidden subcommand the front execs for each worker.
constexpr const char *kWorkerCommand = "__worker";

int serve_main(const std::vector<std::string> &args);
int worker_main(const std::vector<std::string> &args);

}  // namespace atbsim_lm
