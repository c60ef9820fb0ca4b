// A minimal ATB stand-in for the probe's own tests: calls the atb::Probe /
// atb_speed::SpeedProbe hooks as ATB does, driven by a command script on
// stdin (one command per line, fields separated by TAB), and can publish a
// config into a control block. Predicate results are printed as
// "<command>=<0|1>" lines.
//
//   probe_host publish <dump_root> key=value...     publish a config and exit
//   probe_host [script] < commands                  run commands
//
// Commands: need <opType> [<ids, e.g. 3 or 3_0>] | update | publish key=value... | range <n> | dir <path> | before | after |
// data | desc | isparam | ovcheck | graphen | topo? <model> |
// save <format> <dtype> <dims> <src> <path>   (src: @file, hex:<hex>, null:<size>,
//                                              fill:<byte>:<size>;
//                                              path: hex:<hex> for any bytes)
// param <path> <text> | graph <name> <json> | topo <model> <json> |
// overflow <kernel> | sleep <ms> | stress <threads> <per-thread> <bytes> |
// bench <runners> (prints ns per runner of UpdateConfig + 3 predicate pairs) |
// dirrace <threads> <iters> <dirs file> <A answers> <B answers> <key=value of B...>
//   (threads ask IsSaveTensorInSpecificDir of each dir, one per line, while B is
//   published mid-run, until each asked <iters> times under B: every answer must
//   be A's or B's, B's once B was published before the thread's UpdateConfig;
//   prints "dirrace ok ..." or what went wrong) |
// fork <command...> (run one command in a forked child and wait) |
// thread <command...> (run one command on a new thread and join it) |
// threads (prints threads=<this process's thread count>) | exit <code>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dirent.h>
#include <pthread.h>
#include <string>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <vector>

extern "C" {
#include "msprobe_atb/control.h"
}

#include "atb_probe_decl.h"

using atb::Probe;

static void copy_str(char *dst, size_t cap, const std::string &s)
{
    snprintf(dst, cap, "%s", s.c_str());
}

static std::vector<std::string> split(const std::string &s, char sep)
{
    std::vector<std::string> out;
    size_t start = 0;
    for (;;) {
        size_t p = s.find(sep, start);
        out.push_back(s.substr(start, p == std::string::npos ? std::string::npos : p - start));
        if (p == std::string::npos)
            return out;
        start = p + 1;
    }
}

static int publish_into(msp_control *ctl, int argc, char **argv);

static int publish(const char *root, int argc, char **argv)
{
    msp_control *ctl;
    char err[512];
    if (msp_ctl_open(root, 1, &ctl, err, sizeof err) != 0) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    int rc = publish_into(ctl, argc, argv);
    msp_ctl_close(ctl);
    return rc;
}

// Publishes the config in force in ctl with the fields of argv changed.
static int publish_into(msp_control *ctl, int argc, char **argv)
{
    msp_config c;
    msp_ctl_read_config(ctl, &c);
    for (int i = 0; i < argc; i++) {
        std::string kv = argv[i];
        size_t eq = kv.find('=');
        std::string k = kv.substr(0, eq), v = kv.substr(eq + 1);
        if (k == "state") c.state = (uint32_t)atoi(v.c_str());
        else if (k == "task") c.task = (uint32_t)atoi(v.c_str());
        else if (k == "exec") {
            if (v == "all") c.exec_mode = MSP_EXEC_ALL;
            else if (v == "none") c.exec_mode = MSP_EXEC_NONE;
            else {
                auto xs = split(v, ',');
                c.exec_mode = MSP_EXEC_RANGES;
                c.n_ranges = 0;
                for (size_t j = 0; j + 1 < xs.size(); j += 2) {
                    c.ranges[c.n_ranges].lo = strtoull(xs[j].c_str(), nullptr, 10);
                    c.ranges[c.n_ranges].hi = strtoull(xs[j + 1].c_str(), nullptr, 10);
                    c.n_ranges++;
                }
            }
        } else if (k == "ids") {
            c.n_ids = 0;
            for (auto &x : split(v, ','))
                if (!x.empty()) copy_str(c.ids[c.n_ids++], MSP_ID_LEN, x);
        } else if (k == "names") {
            c.n_op_names = 0;
            for (auto &x : split(v, ','))
                if (!x.empty()) copy_str(c.op_names[c.n_op_names++], MSP_OP_NAME_LEN, x);
        } else if (k == "devices") {
            c.n_devices = 0;
            for (auto &x : split(v, ','))
                if (!x.empty()) c.devices[c.n_devices++] = atoi(x.c_str());
        } else if (k == "save_child") c.save_child = (uint32_t)atoi(v.c_str());
        else if (k == "filter_level") c.filter_level = (uint32_t)atoi(v.c_str());
        else if (k == "all_stages") c.save_all_stages = (uint32_t)atoi(v.c_str());
        else if (k == "budget") c.queue_budget_bytes = strtoull(v.c_str(), nullptr, 10);
        else if (k == "policy") c.queue_policy = v == "drop" ? MSP_POLICY_DROP : MSP_POLICY_BLOCK;
        else if (k == "overflow_nums") c.overflow_nums = atoll(v.c_str());
        else if (k == "next") { // exec_range "next:N" as the control plane publishes it: REQ:N
            auto xs = split(v, ':');
            c.exec_mode = MSP_EXEC_RANGES;
            c.next_request = strtoull(xs[0].c_str(), nullptr, 10);
            c.next_count = strtoull(xs.at(1).c_str(), nullptr, 10);
            c.n_ranges = 1;
            c.ranges[0].lo = 0;
            c.ranges[0].hi = c.next_count - 1;
        } else if (k == "error") msp_ctl_set_error(ctl, v.c_str());
        else {
            fprintf(stderr, "unknown key %s\n", k.c_str());
            return 2;
        }
    }
    msp_ctl_publish(ctl, &c);
    return 0;
}

static std::string unhex(const std::string &h)
{
    std::string out;
    for (size_t i = 0; i + 1 < h.size(); i += 2)
        out.push_back((char)strtol(h.substr(i, 2).c_str(), nullptr, 16));
    return out;
}

static void save(const std::vector<std::string> &f)
{
    const std::string &src = f[4];
    std::string data;
    const void *ptr;
    uint64_t size;
    if (src.rfind("null:", 0) == 0) {
        ptr = nullptr;
        size = strtoull(src.c_str() + 5, nullptr, 10);
    } else {
        if (src.rfind("hex:", 0) == 0) {
            data = unhex(src.substr(4));
        } else if (src.rfind("fill:", 0) == 0) {
            auto parts = split(src, ':');
            data.assign(strtoull(parts[2].c_str(), nullptr, 10), (char)atoi(parts[1].c_str()));
        } else if (src[0] == '@') {
            FILE *fp = fopen(src.c_str() + 1, "rb");
            if (!fp) {
                perror(src.c_str() + 1);
                exit(3);
            }
            char buf[65536];
            size_t n;
            while ((n = fread(buf, 1, sizeof buf, fp)) > 0)
                data.append(buf, n);
            fclose(fp);
        }
        ptr = data.data();
        size = data.size();
    }
    std::string dims = f[3] == "-" ? "" : f[3];
    std::string path = f[5].rfind("hex:", 0) == 0 ? unhex(f[5].substr(4)) : f[5];
    Probe::SaveTensor(f[1], f[2], dims, ptr, size, path);
    // ATB frees its host buffer right after: poison it so a probe that kept
    // the pointer would write garbage (and the payload check would fail).
    if (!data.empty())
        memset(&data[0], 0xA5, data.size());
}

struct stress_arg {
    int thread, count;
    size_t bytes;
};

static void *stress_main(void *p)
{
    auto *a = (stress_arg *)p;
    std::string buf(a->bytes, '\0');
    for (int i = 0; i < a->count; i++) {
        for (size_t j = 0; j < buf.size(); j++)
            buf[j] = (char)(j * 31 + (size_t)i * 7 + (size_t)a->thread);
        char path[256];
        snprintf(path, sizeof path, "0_%d/%d/%d_Layer/before/intensor%d.bin", (int)getpid(),
                 i % 3, a->thread, i);
        std::string dir(path, strstr(path, "/before") - path); // the runner dir
        Probe::UpdateConfig();
        if (Probe::IsExecuteCountInRange((uint64_t)i) && Probe::IsSaveTensorInSpecificDir(dir)) {
            Probe::SaveTensor("2", "4", std::to_string(a->bytes), buf.data(), buf.size(), path);
            memset(&buf[0], 0xA5, buf.size());
        }
    }
    return nullptr;
}

struct dirrace {
    std::vector<std::string> dirs;
    std::string a, b;           // the answers under A and B, '0'/'1' per dir
    const volatile uint64_t *gen; // the block's generation
    uint64_t gen_b = 0;         // B's, once published
    long iters = 0;
    long asked = 0, after_b = 0, bad = 0;
    std::string first_bad;
    pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
    long started = 0;
};

static void *dirrace_main(void *p)
{
    auto *r = (dirrace *)p;
    long asked = 0, after_b = 0, bad = 0;
    std::string first_bad;
    for (long i = 0, under_b = 0; under_b < r->iters; i++) {
        uint64_t g = __atomic_load_n(r->gen, __ATOMIC_ACQUIRE);
        uint64_t gb = __atomic_load_n(&r->gen_b, __ATOMIC_ACQUIRE);
        bool b_in_force = gb != 0 && g >= gb;
        under_b += b_in_force;
        Probe::UpdateConfig(); // follows the block, as ATB's runners do at each setup
        for (size_t d = 0; d < r->dirs.size(); d++) {
            char got = Probe::IsSaveTensorInSpecificDir(r->dirs[d]) ? '1' : '0';
            asked++;
            after_b += b_in_force;
            if (got != r->b[d] && (b_in_force || got != r->a[d])) {
                if (!bad++)
                    first_bad = r->dirs[d] + " answered " + got + (b_in_force ? " after B" : "");
            }
        }
        if (i == 0) {
            pthread_mutex_lock(&r->mu);
            r->started++;
            pthread_mutex_unlock(&r->mu);
        }
    }
    pthread_mutex_lock(&r->mu);
    r->asked += asked;
    r->after_b += after_b;
    r->bad += bad;
    if (r->first_bad.empty())
        r->first_bad = first_bad;
    pthread_mutex_unlock(&r->mu);
    return nullptr;
}

static int publish_into(msp_control *ctl, int argc, char **argv);

// dirrace <threads> <iters> <dirs file> <A answers> <B answers> <B's key=value...>
static int dir_race(const std::vector<std::string> &f)
{
    if (f.size() < 6) {
        fprintf(stderr, "dirrace: too few arguments\n");
        return 2;
    }
    dirrace r;
    FILE *fp = fopen(f[3].c_str(), "r");
    if (!fp) {
        perror(f[3].c_str());
        return 2;
    }
    char line[4096];
    while (fgets(line, sizeof line, fp)) {
        std::string d(line);
        while (!d.empty() && d.back() == '\n')
            d.pop_back();
        r.dirs.push_back(d);
    }
    fclose(fp);
    r.a = f[4];
    r.b = f[5];
    r.iters = atol(f[2].c_str());
    if (r.a.size() != r.dirs.size() || r.b.size() != r.dirs.size()) {
        fprintf(stderr, "dirrace: %zu dirs, %zu A answers, %zu B answers\n", r.dirs.size(),
                r.a.size(), r.b.size());
        return 2;
    }
    std::string root = std::string(getenv("ATB_OUTPUT_DIR")) + "/atb_dump_data";
    msp_control *ctl;
    char err[512];
    if (msp_ctl_open(root.c_str(), 1, &ctl, err, sizeof err) != 0) {
        fprintf(stderr, "%s\n", err);
        return 2;
    }
    r.gen = &ctl->generation;
    int threads = atoi(f[1].c_str());
    std::vector<pthread_t> ts((size_t)threads);
    for (auto &t : ts)
        pthread_create(&t, nullptr, dirrace_main, &r);
    for (;;) { // B mid-run: once every thread asked under A
        pthread_mutex_lock(&r.mu);
        bool all = r.started == threads;
        pthread_mutex_unlock(&r.mu);
        if (all)
            break;
        usleep(100);
    }
    std::vector<std::string> kv(f.begin() + 6, f.end());
    std::vector<char *> av;
    for (auto &x : kv)
        av.push_back(&x[0]);
    if (publish_into(ctl, (int)av.size(), av.data()) != 0)
        return 2;
    __atomic_store_n(&r.gen_b, msp_ctl_generation(ctl), __ATOMIC_RELEASE);
    for (auto &t : ts)
        pthread_join(t, nullptr);
    msp_ctl_close(ctl);
    printf("dirrace %s asked=%ld after_b=%ld bad=%ld %s\n", r.bad || !r.after_b ? "FAILED" : "ok",
           r.asked, r.after_b, r.bad, r.first_bad.c_str());
    fflush(stdout);
    return -1;
}

static int run(const std::vector<std::string> &f);

static int run_line(const std::string &line)
{
    if (line.empty() || line[0] == '#')
        return -1;
    return run(split(line, '\t'));
}

static void say(const std::string &name, bool v)
{
    printf("%s=%d\n", name.c_str(), v ? 1 : 0);
    fflush(stdout);
}

static int run(const std::vector<std::string> &f)
{
    const std::string &c = f[0];
    auto arg = [&](size_t i) -> std::string { return i < f.size() ? f[i] : std::string(); };
    if (c == "need") { // ids "3" (a top-level op) or "3_0_1" (a child's)
        std::vector<int64_t> ids;
        for (const std::string &x : split(f.size() > 2 ? arg(2) : "0", '_'))
            ids.push_back(atoll(x.c_str()));
        say(c, Probe::IsTensorNeedSave(ids, arg(1)));
    }
    else if (c == "publish") { // into this process's own block, mid-script
        std::string root = std::string(getenv("ATB_OUTPUT_DIR")) + "/atb_dump_data";
        std::vector<std::string> kv(f.begin() + 1, f.end());
        std::vector<char *> av;
        for (auto &x : kv)
            av.push_back(&x[0]);
        if (publish(root.c_str(), (int)av.size(), av.data()) != 0)
            return 2;
    }
    else if (c == "update") Probe::UpdateConfig();
    else if (c == "range") say(c, Probe::IsExecuteCountInRange(strtoull(arg(1).c_str(), nullptr, 10)));
    else if (c == "dir") say(c, Probe::IsSaveTensorInSpecificDir(arg(1)));
    else if (c == "before") say(c, Probe::IsSaveTensorBefore());
    else if (c == "after") say(c, Probe::IsSaveTensorAfter());
    else if (c == "data") say(c, Probe::IsSaveTensorData());
    else if (c == "desc") say(c, Probe::IsSaveTensorDesc());
    else if (c == "isparam") say(c, Probe::IsSaveParam());
    else if (c == "ovcheck") say(c, Probe::IsOverflowCheck());
    else if (c == "graphen") say(c, Probe::ReportOperationGraphEnable());
    else if (c == "topo?") say(c, atb_speed::SpeedProbe::IsReportModelTopoInfo(arg(1)));
    else if (c == "save") save(f);
    else if (c == "param") Probe::SaveParam(arg(2), arg(1));
    else if (c == "graph") Probe::ReportOperationGraph(arg(1), arg(2));
    else if (c == "topo") atb_speed::SpeedProbe::ReportModelTopoInfo(arg(1), arg(2));
    else if (c == "overflow") Probe::ReportOverflowKernel(arg(1));
    else if (c == "sleep") usleep((useconds_t)atoi(arg(1).c_str()) * 1000);
    else if (c == "stress") {
        int threads = atoi(arg(1).c_str()), count = atoi(arg(2).c_str());
        std::vector<pthread_t> ts((size_t)threads);
        std::vector<stress_arg> args((size_t)threads);
        for (int i = 0; i < threads; i++) {
            args[(size_t)i] = {i, count, (size_t)strtoull(arg(3).c_str(), nullptr, 10)};
            pthread_create(&ts[(size_t)i], nullptr, stress_main, &args[(size_t)i]);
        }
        for (auto &t : ts)
            pthread_join(t, nullptr);
    } else if (c == "bench") {
        // one runner's asleep/awake predicate traffic: setup + 3 execute checks
        long n = atol(arg(1).c_str());
        std::string dir = "0_1/0/5_Layer/1_LinearOperation";
        timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        long yes = 0;
        for (long i = 0; i < n; i++) {
            Probe::UpdateConfig();
            for (int k = 0; k < 3; k++)
                yes += Probe::IsExecuteCountInRange((uint64_t)i) &&
                       Probe::IsSaveTensorInSpecificDir(dir);
        }
        clock_gettime(CLOCK_MONOTONIC, &t1);
        double ns = (double)(t1.tv_sec - t0.tv_sec) * 1e9 + (double)(t1.tv_nsec - t0.tv_nsec);
        printf("bench_ns_per_runner=%.1f selected=%ld\n", ns / (double)n, yes);
    } else if (c == "dirrace") {
        return dir_race(f);
    } else if (c == "fork") {
        pid_t pid = fork();
        if (pid == 0) {
            std::vector<std::string> rest(f.begin() + 1, f.end());
            run(rest);
            exit(0);
        }
        int st;
        waitpid(pid, &st, 0);
    } else if (c == "thread") { // one command on a new thread, joined
        struct Cmd {
            std::vector<std::string> f;
        } cmd{std::vector<std::string>(f.begin() + 1, f.end())};
        pthread_t t;
        pthread_create(&t, nullptr, [](void *a) -> void * {
            run(static_cast<Cmd *>(a)->f);
            return nullptr;
        }, &cmd);
        pthread_join(t, nullptr);
    } else if (c == "threads") {
        int n = 0;
        if (DIR *d = opendir("/proc/self/task")) {
            while (dirent *e = readdir(d))
                n += e->d_name[0] != '.';
            closedir(d);
        }
        printf("threads=%d\n", n);
        fflush(stdout);
    } else if (c == "exit") {
        return atoi(arg(1).c_str());
    } else {
        fprintf(stderr, "unknown command %s\n", c.c_str());
        return 2;
    }
    return -1;
}

int main(int argc, char **argv)
{
    if (argc >= 3 && strcmp(argv[1], "publish") == 0)
        return publish(argv[2], argc - 3, argv + 3);
    FILE *in = argc >= 2 ? fopen(argv[1], "r") : stdin;
    if (!in) {
        perror(argv[1]);
        return 2;
    }
    char *line = nullptr;
    size_t cap = 0;
    ssize_t n;
    while ((n = getline(&line, &cap, in)) > 0) {
        std::string s(line, (size_t)n);
        while (!s.empty() && (s.back() == '\n' || s.back() == '\r'))
            s.pop_back();
        int rc = run_line(s);
        if (rc >= 0) {
            free(line);
            return rc;
        }
    }
    free(line);
    return 0;
}
