#include "serve.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <sstream>

#include "http.h"
#include "json.h"
#include "atbsim/runtime.h"
#include "llama.h"

namespace atbsim_lm {

namespace {

std::string quote(const std::string &s) { return atbsim::Json::Str(s).Dump(); }

constexpr int kMaxDevices = 64;
constexpr int kMaxNewTokens = 4096;
constexpr size_t kMaxPromptTokens = 1 << 16;
constexpr int kStopGraceMs = 40000;  // beyond a probe's default 30 s exit drain

volatile sig_atomic_t g_stop = 0;
int g_sigpipe[2] = {-1, -1};

void on_stop_signal(int) {
    g_stop = 1;
    if (g_sigpipe[1] >= 0) {
        int saved = errno;
        ssize_t ignored = write(g_sigpipe[1], "x", 1);
        (void)ignored;
        errno = saved;
    }
}

void install(int sig, void (*handler)(int)) {
    struct sigaction sa;
    std::memset(&sa, 0, sizeof sa);
    sa.sa_handler = handler;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = 0;  // no SA_RESTART: a blocked read returns EINTR and we look at g_stop
    sigaction(sig, &sa, nullptr);
}

bool write_all(int fd, const std::string &s) {
    size_t off = 0;
    while (off < s.size()) {
        ssize_t n = send(fd, s.data() + off, s.size() - off, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return false;
        off += static_cast<size_t>(n);
    }
    return true;
}

// Line reader over a stream socket. Returns 1 with a line, 0 on EOF/error,
// -1 if a stop signal arrived (only when watch_stop).
struct LineReader {
    int fd = -1;
    std::string buf;

    int next(std::string *line, bool watch_stop) {
        for (;;) {
            size_t nl = buf.find('\n');
            if (nl != std::string::npos) {
                *line = buf.substr(0, nl);
                buf.erase(0, nl + 1);
                return 1;
            }
            if (watch_stop && g_stop) return -1;
            char chunk[4096];
            ssize_t n = read(fd, chunk, sizeof chunk);
            if (n > 0) buf.append(chunk, static_cast<size_t>(n));
            else if (n < 0 && errno == EINTR) continue;
            else return 0;
        }
    }
};

std::string ids_text(const std::vector<int64_t> &ids) {
    std::string s;
    for (int64_t id : ids) s += " " + std::to_string(id);
    return s;
}

bool parse_ids(std::istringstream &is, size_t count, std::vector<int64_t> *ids) {
    ids->clear();
    int64_t v;
    while (ids->size() < count && is >> v) ids->push_back(v);
    return ids->size() == count;
}

// ---------------------------------------------------------------- front

struct Worker {
    int device = 0;
    pid_t pid = -1;
    LineReader io;
};

bool spawn_worker(int device, const std::vector<std::string> &model_args, Worker *w, std::string *err) {
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) return *err = std::strerror(errno), false;
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid < 0) {
        *err = std::string("fork: ") + std::strerror(errno);
        close(sv[0]);
        close(sv[1]);
        return false;
    }
    if (pid == 0) {
        // A fresh exec, so a probe preloaded into the front starts clean in the worker.
        prctl(PR_SET_PDEATHSIG, SIGTERM);
        if (getppid() != parent) _exit(1);
        int fd = dup(sv[1]);  // the dup has no FD_CLOEXEC
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, nullptr);
        char exe[4096];
        ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
        exe[n > 0 ? n : 0] = '\0';
        std::vector<std::string> a = {n > 0 ? exe : "atbsim", kWorkerCommand, "--device", std::to_string(device), "--fd",
                                      std::to_string(fd)};
        a.insert(a.end(), model_args.begin(), model_args.end());
        std::vector<char *> argv;
        for (std::string &s : a) argv.push_back(&s[0]);
        argv.push_back(nullptr);
        execv("/proc/self/exe", argv.data());
        std::fprintf(stderr, "atbsim: exec of the worker failed: %s\n", std::strerror(errno));
        _exit(127);
    }
    close(sv[1]);
    w->device = device;
    w->pid = pid;
    w->io.fd = sv[0];
    return true;
}

void stop_workers(std::vector<Worker> &workers) {
    for (Worker &w : workers)
        if (w.io.fd >= 0) {
            close(w.io.fd);  // EOF tells the worker to finish and exit
            w.io.fd = -1;
        }
    for (int waited = 0;; waited += 20) {
        bool alive = false;
        for (Worker &w : workers) {
            if (w.pid < 0) continue;
            int status;
            pid_t r = waitpid(w.pid, &status, WNOHANG);
            if (r == w.pid || (r < 0 && errno == ECHILD)) {
                if (r == w.pid && !(WIFEXITED(status) && WEXITSTATUS(status) == 0))
                    std::fprintf(stderr, "[atbsim] worker device %d pid %d ended with status 0x%x\n", w.device,
                                 static_cast<int>(w.pid), status);
                w.pid = -1;
            } else {
                alive = true;
                if (waited >= kStopGraceMs) {
                    std::fprintf(stderr, "[atbsim] worker pid %d did not stop in %d ms, killing it\n",
                                 static_cast<int>(w.pid), kStopGraceMs);
                    kill(w.pid, SIGKILL);
                }
            }
        }
        if (!alive) return;
        usleep(20 * 1000);
    }
}

std::string error_json(const std::string &msg) {
    return "{\"error\":{\"message\":" + quote(msg) + ",\"type\":\"invalid_request_error\"}}";
}

struct Front {
    Options opt;
    std::vector<Worker> workers;
    uint64_t served = 0;

    // Runs one request on every worker (like tensor-parallel ranks); all must agree.
    bool generate(const std::vector<int64_t> &prompt, int n_new, std::vector<int64_t> *toks, std::string *err) {
        std::string cmd = "GEN " + std::to_string(n_new) + " " + std::to_string(prompt.size()) + ids_text(prompt) + "\n";
        for (Worker &w : workers)
            if (!write_all(w.io.fd, cmd)) return *err = "worker device " + std::to_string(w.device) + " is gone", false;
        bool ok = true;
        for (size_t i = 0; i < workers.size(); i++) {
            std::string line;
            if (workers[i].io.next(&line, false) != 1) {
                *err = "worker device " + std::to_string(workers[i].device) + " exited";
                ok = false;
                continue;
            }
            std::istringstream is(line);
            std::string tag;
            size_t count = 0;
            is >> tag;
            std::vector<int64_t> got;
            if (tag != "OK" || !(is >> count) || !parse_ids(is, count, &got)) {
                *err = "worker device " + std::to_string(workers[i].device) + ": " +
                       (tag == "ERR" ? line.substr(4) : "bad reply '" + line + "'");
                ok = false;
            } else if (i == 0) {
                *toks = got;
            } else if (ok && got != *toks) {
                *err = "workers disagree: device 0 gave" + ids_text(*toks) + ", device " +
                       std::to_string(workers[i].device) + " gave" + ids_text(got);
                ok = false;
            }
        }
        return ok;
    }

    void chat(int conn, const HttpRequest &req) {
        JsonValue doc;
        std::string err;
        if (!json_parse(req.body, &doc, &err)) return http_respond(conn, 400, "application/json", error_json("body is not JSON: " + err));
        const JsonValue *messages = doc.get("messages");
        if (!messages || messages->kind != JsonValue::Array || messages->arr.empty())
            return http_respond(conn, 400, "application/json", error_json("\"messages\" must be a non-empty array"));
        std::string text;
        for (size_t i = 0; i < messages->arr.size(); i++) {
            const JsonValue *content = messages->arr[i].get("content");
            if (!content || content->kind != JsonValue::String)
                return http_respond(conn, 400, "application/json",
                                    error_json("messages[" + std::to_string(i) + "].content must be a string"));
            text += (i ? "\n" : "") + content->str;
        }
        std::vector<int64_t> prompt = tokenize(text, opt.vocab);
        if (prompt.empty() || prompt.size() > kMaxPromptTokens)
            return http_respond(conn, 400, "application/json",
                                error_json("the prompt must have 1.." + std::to_string(kMaxPromptTokens) + " bytes"));
        int n_new = opt.decode_steps + 1;
        if (const JsonValue *mt = doc.get("max_tokens")) {
            if (mt->kind != JsonValue::Number || mt->num < 1 || mt->num > kMaxNewTokens || mt->num != static_cast<int>(mt->num))
                return http_respond(conn, 400, "application/json",
                                    error_json("\"max_tokens\" must be an integer in [1, " + std::to_string(kMaxNewTokens) + "]"));
            n_new = static_cast<int>(mt->num);
        }
        std::string model = "atbsim";
        if (const JsonValue *m = doc.get("model"))
            if (m->kind == JsonValue::String) model = m->str;
        std::vector<int64_t> toks;
        if (!generate(prompt, n_new, &toks, &err)) {
            std::fprintf(stderr, "[atbsim] request failed: %s\n", err.c_str());
            return http_respond(conn, 500, "application/json",
                                "{\"error\":{\"message\":" + quote(err) + ",\"type\":\"server_error\"}}");
        }
        std::ostringstream os;
        os << "{\"id\":\"chatcmpl-" << served++ << "\",\"object\":\"chat.completion\",\"created\":"
           << static_cast<long long>(std::time(nullptr)) << ",\"model\":" << quote(model)
           << ",\"choices\":[{\"index\":0,\"message\":{\"role\":\"assistant\",\"content\":" << quote(detokenize(toks))
           << "},\"finish_reason\":\"length\"}],\"usage\":{\"prompt_tokens\":" << prompt.size()
           << ",\"completion_tokens\":" << toks.size() << ",\"total_tokens\":" << prompt.size() + toks.size()
           << "},\"tokens\":[";
        for (size_t i = 0; i < toks.size(); i++) os << (i ? "," : "") << toks[i];
        os << "],\"worker_pids\":[";
        for (size_t i = 0; i < workers.size(); i++) os << (i ? "," : "") << workers[i].pid;
        os << "]}";
        http_respond(conn, 200, "application/json", os.str());
    }

    void handle(int conn) {
        struct timeval tv = {10, 0};
        setsockopt(conn, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
        HttpRequest req;
        std::string err;
        int status = http_read_request(conn, &req, &err);
        if (status != 0) return http_respond(conn, status, "application/json", error_json(err));
        if (req.path == "/health") {
            if (req.method != "GET") return http_respond(conn, 405, "application/json", error_json("use GET /health"));
            return http_respond(conn, 200, "application/json",
                                "{\"status\":\"ok\",\"workers\":" + std::to_string(workers.size()) + "}");
        }
        if (req.path == "/v1/chat/completions") {
            if (req.method != "POST") return http_respond(conn, 405, "application/json", error_json("use POST"));
            return chat(conn, req);
        }
        http_respond(conn, 404, "application/json", error_json("no route " + req.method + " " + req.path));
    }
};

int listen_on(int port, int *bound_port, std::string *err) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return *err = std::strerror(errno), -1;
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in addr;
    std::memset(&addr, 0, sizeof addr);
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof addr;
    if (bind(fd, reinterpret_cast<sockaddr *>(&addr), sizeof addr) != 0 || listen(fd, 16) != 0 ||
        getsockname(fd, reinterpret_cast<sockaddr *>(&addr), &len) != 0) {
        *err = "cannot listen on 127.0.0.1:" + std::to_string(port) + ": " + std::strerror(errno);
        close(fd);
        return -1;
    }
    *bound_port = ntohs(addr.sin_port);
    return fd;
}

int usage_error(const std::string &msg) {
    std::fprintf(stderr, "atbsim serve: %s\n(see `atbsim serve --help`)\n", msg.c_str());
    return 2;
}

}  // namespace

int serve_main(const std::vector<std::string> &args) {
    Front front;
    int port = -1, devices = 1;
    std::vector<std::string> model_args;
    std::string err;
    for (size_t i = 0; i < args.size();) {
        if (args[i] == "--port" || args[i] == "--devices") {
            int *dst = args[i] == "--port" ? &port : &devices;
            int hi = args[i] == "--port" ? 65535 : kMaxDevices, lo = args[i] == "--port" ? 0 : 1;
            char *end = nullptr;
            long v = i + 1 < args.size() ? std::strtol(args[i + 1].c_str(), &end, 10) : -1;
            if (i + 1 >= args.size() || *end || args[i + 1].empty() || v < lo || v > hi)
                return usage_error(args[i] + " needs an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
            *dst = static_cast<int>(v);
            i += 2;
            continue;
        }
        if (args[i] == "--device") return usage_error("--device is set per worker; use --devices N");
        size_t start = i;
        int r = parse_model_option(args, &i, &front.opt, &err);
        if (r == 0) return usage_error("unknown option '" + args[i] + "'");
        if (r < 0) return usage_error(err);
        model_args.insert(model_args.end(), args.begin() + static_cast<long>(start), args.begin() + static_cast<long>(i));
    }
    if (port < 0) return usage_error("--port P is required (0 picks a free port)");
    if (!finish_options(&front.opt, &err)) return usage_error(err);

    if (pipe2(g_sigpipe, O_CLOEXEC | O_NONBLOCK) != 0) return std::perror("pipe2"), 1;
    install(SIGTERM, on_stop_signal);
    install(SIGINT, on_stop_signal);
    signal(SIGPIPE, SIG_IGN);
    int bound = 0;
    int lfd = listen_on(port, &bound, &err);
    if (lfd < 0) return std::fprintf(stderr, "atbsim serve: %s\n", err.c_str()), 1;
    std::printf("Listening on 127.0.0.1:%d\n", bound);
    std::fflush(stdout);

    int rc = 0;
    for (int d = 0; d < devices && rc == 0; d++) {
        front.workers.emplace_back();
        if (!spawn_worker(d, model_args, &front.workers.back(), &err)) {
            front.workers.pop_back();
            std::fprintf(stderr, "atbsim serve: cannot start the worker for device %d: %s\n", d, err.c_str());
            rc = 1;
        }
    }
    for (Worker &w : front.workers) {
        if (rc != 0) break;
        std::string line;
        int got = w.io.next(&line, true);
        if (got < 0) break;  // stopped during start-up: still a clean exit
        if (got == 0 || line.rfind("READY", 0) != 0) {
            std::fprintf(stderr, "atbsim serve: worker device %d (pid %d) failed to start%s%s\n", w.device,
                         static_cast<int>(w.pid), got ? ": " : "", got ? line.c_str() : "");
            rc = 1;
            break;
        }
        std::fprintf(stderr, "[atbsim] worker device %d pid %d ready\n", w.device, static_cast<int>(w.pid));
    }
    if (rc == 0 && !g_stop) {
        std::printf("Daemon start success!\n");
        std::fflush(stdout);
    }
    while (rc == 0 && !g_stop) {
        std::vector<pollfd> fds = {{lfd, POLLIN, 0}, {g_sigpipe[0], POLLIN, 0}};
        for (Worker &w : front.workers) fds.push_back({w.io.fd, POLLIN, 0});  // readable only when it died
        if (poll(fds.data(), fds.size(), -1) < 0) {
            if (errno == EINTR) continue;
            std::perror("poll");
            rc = 1;
            break;
        }
        if (g_stop) break;  // a group-wide SIGTERM also ends the workers: not a failure
        for (size_t i = 2; i < fds.size(); i++)
            if (fds[i].revents) {
                std::fprintf(stderr, "atbsim serve: worker device %d (pid %d) exited unexpectedly; stopping\n",
                             front.workers[i - 2].device, static_cast<int>(front.workers[i - 2].pid));
                rc = 1;
            }
        if (rc == 0 && (fds[0].revents & POLLIN)) {
            int conn = accept4(lfd, nullptr, nullptr, SOCK_CLOEXEC);
            if (conn >= 0) {
                front.handle(conn);
                close(conn);
            }
        }
    }
    close(lfd);
    stop_workers(front.workers);
    if (g_stop) std::fprintf(stderr, "[atbsim] stopped by signal; workers stopped\n");
    return rc;
}

// ---------------------------------------------------------------- worker

int worker_main(const std::vector<std::string> &args) {
    Options opt;
    int fd = -1;
    std::string err;
    for (size_t i = 0; i < args.size();) {
        if (args[i] == "--fd" && i + 1 < args.size()) {
            fd = std::atoi(args[i + 1].c_str());
            i += 2;
            continue;
        }
        if (parse_model_option(args, &i, &opt, &err) <= 0) {
            std::fprintf(stderr, "atbsim worker: bad arguments: %s\n", err.empty() ? args[i].c_str() : err.c_str());
            return 2;
        }
    }
    if (fd < 0) return std::fprintf(stderr, "atbsim worker: --fd missing (started by `atbsim serve` only)\n"), 2;
    install(SIGTERM, on_stop_signal);
    signal(SIGINT, SIG_IGN);  // Ctrl-C reaches the whole group; the front decides
    signal(SIGPIPE, SIG_IGN);
    LineReader io;
    io.fd = fd;
    Llama model(opt);
    if (!model.ok()) {
        write_all(fd, "ERR " + model.error() + "\n");
        return 1;
    }
    write_all(fd, "READY " + std::to_string(getpid()) + "\n");
    std::string line;
    while (io.next(&line, true) == 1) {
        std::istringstream is(line);
        std::string tag;
        int n_new = 0;
        size_t count = 0;
        std::vector<int64_t> prompt, toks;
        is >> tag >> n_new >> count;
        std::string reply;
        if (tag != "GEN" || !parse_ids(is, count, &prompt)) reply = "ERR bad command '" + line + "'";
        else if (!model.generate(prompt, n_new, &toks, nullptr, &err)) reply = "ERR " + err;
        else reply = "OK " + std::to_string(toks.size()) + ids_text(toks);
        if (!write_all(fd, reply + "\n")) break;
    }
    for (const std::string &inj : model.unfired_injections())
        std::fprintf(stderr, "[atbsim] worker device %d: --inject %s never fired\n", opt.device, inj.c_str());
    return 0;
}

}  // namespace atbsim_lm
