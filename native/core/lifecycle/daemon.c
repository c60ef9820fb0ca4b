/* Starting the control-plane daemon: the shim that finds .probe/daemon.lock free
 * spawns it, and the monitor restarts it if it died (daemon.h). */
#define _GNU_SOURCE
#include "daemon.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>

#include "state.h"
#include "util.h"

extern char **environ;

static uint64_t g_daemon_next_mono;
static uint64_t g_daemon_backoff_ns;
static uint64_t g_daemon_spawned_mono;

/* The Python we spawned, until it is reaped: it takes the lock, forks the
 * daemon into the background and exits 0, or exits non-zero at once when
 * it cannot run (no msprobe_atb, a broken install). */
static pid_t g_child = -1;
static int g_child_log = -1;  /* daemon.log, read from g_child_log_off to say why */
static off_t g_child_log_off;
static char g_failure[512];  /* why the last start failed, "" if it did not */
#define CHILD_PATIENCE_NS 30000000000ULL

static void forget_child(void)
{
    if (g_child_log >= 0)
        close(g_child_log);
    g_child_log = -1;
    g_child = -1;
}

/* The last line the failed start wrote to daemon.log (its own words). */
static void last_log_line(char *out, size_t cap)
{
    char buf[1024];
    out[0] = 0;
    if (g_child_log < 0)
        return;
    off_t end = lseek(g_child_log, 0, SEEK_END);
    off_t from = end - (off_t)sizeof buf + 1 > g_child_log_off ? end - (off_t)sizeof buf + 1
                                                               : g_child_log_off;
    ssize_t n = from < end ? pread(g_child_log, buf, (size_t)(end - from), from) : 0;
    if (n <= 0)
        return;
    while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\r'))
        n--;
    buf[n] = 0;
    const char *line = strrchr(buf, '\n');
    line = line ? line + 1 : buf;
    size_t len = strlen(line) < cap - 1 ? strlen(line) : cap - 1;
    memcpy(out, line, len);
    out[len] = 0;
}

static void poll_child(void)
{
    if (g_child < 0)
        return;
    int st;
    pid_t r = waitpid(g_child, &st, WNOHANG);
    if (r == 0)
        return; /* still starting */
    if (r < 0 || (WIFEXITED(st) && WEXITSTATUS(st) == 0)) {
        forget_child(); /* came up (or the host reaps its children: we cannot tell) */
        return;
    }
    char line[400];
    last_log_line(line, sizeof line);
    if (WIFEXITED(st))
        snprintf(g_failure, sizeof g_failure, "%.200s exited with status %d%s%.250s", g_msp.python,
                 WEXITSTATUS(st), line[0] ? ": " : "", line);
    else
        snprintf(g_failure, sizeof g_failure, "%.200s was killed by signal %d", g_msp.python,
                 WTERMSIG(st));
    forget_child();
}

int msp_daemon_check(void)
{
    static char reported[sizeof g_failure];
    poll_child();
    if (g_failure[0] && strcmp(g_failure, reported) != 0) {
        /* once per distinct reason, not at every retry */
        memcpy(reported, g_failure, sizeof reported);
        msp_log("the control plane cannot start: %s. This process stays asleep and retries; "
                "set MSPROBE_ATB_PYTHON to a Python that has msprobe_atb installed (see "
                "%s/.probe/daemon.log)",
                g_failure, g_msp.dump_root);
    }
    return g_failure[0] != 0;
}

/* The spawned process gets stdin from /dev/null and stdout/stderr on
 * daemon.log, opened here from the verified .probe fd (a link planted at
 * daemon.log is replaced, never followed). Returns 0, or -1 with
 * g_failure set. */
static int spawn_daemon(int probe)
{
    int replaced;
    int log = msp_probe_file_open(probe, "daemon.log", O_WRONLY | O_APPEND | O_CREAT, &replaced);
    if (log < 0) {
        snprintf(g_failure, sizeof g_failure, "cannot open %.300s/.probe/daemon.log: %s",
                 g_msp.dump_root, strerror(errno));
        return -1;
    }
    if (replaced)
        msp_log("%s/.probe/daemon.log was a link or not a regular file; replaced it with a "
                "fresh file (the probe never writes through a link)", g_msp.dump_root);
    char *argv[] = {g_msp.python, "-m", "msprobe_atb", "daemon", "--output", g_msp.out,
                    "--config", g_msp.config, NULL};
    size_t n = 0;
    while (environ && environ[n])
        n++;
    char **envp = calloc(n + 1, sizeof *envp);
    if (!envp) {
        close(log);
        snprintf(g_failure, sizeof g_failure, "out of memory");
        return -1;
    }
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (strncmp(environ[i], "LD_PRELOAD=", 11) != 0)
            envp[k++] = environ[i];
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_adddup2(&fa, log, 1);
    posix_spawn_file_actions_adddup2(&fa, log, 2);
    posix_spawnattr_t attr;
    posix_spawnattr_init(&attr);
    sigset_t none, dfl;
    sigemptyset(&none);
    sigfillset(&dfl);
    sigdelset(&dfl, SIGKILL);
    sigdelset(&dfl, SIGSTOP);
    posix_spawnattr_setsigmask(&attr, &none);
    posix_spawnattr_setsigdefault(&attr, &dfl);
    /* its own session: the host's terminal signals never reach the daemon */
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSID | POSIX_SPAWN_SETSIGMASK |
                                        POSIX_SPAWN_SETSIGDEF);
    off_t log_off = lseek(log, 0, SEEK_END);
    pid_t pid;
    int rc = posix_spawnp(&pid, g_msp.python, &fa, &attr, argv, envp);
    posix_spawnattr_destroy(&attr);
    posix_spawn_file_actions_destroy(&fa);
    free(envp);
    close(log);
    if (rc != 0) {
        snprintf(g_failure, sizeof g_failure, "cannot run %.300s: %s", g_msp.python, strerror(rc));
        return -1;
    }
    g_child = pid;
    g_child_log = openat(probe, "daemon.log", O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    g_child_log_off = log_off < 0 ? 0 : log_off;
    return 0;
}

/* 1 if someone holds daemon.lock. A lock file that is missing, or is not
 * our own file (a planted link), is free: the daemon replaces it. */
static int lock_held(int probe)
{
    int fd = openat(probe, "daemon.lock", O_RDWR | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0)
        return 0;
    int held = flock(fd, LOCK_EX | LOCK_NB) != 0;
    close(fd); /* releases our test lock */
    return held;
}

/* Starts the daemon if nobody holds its lock. Retries back off (1 s up
 * to 30 s) while it keeps failing to come up, so a broken Python does not
 * make us spawn it every tick. */
int msp_ensure_daemon(void)
{
    /* stop_requested is deliberately not consulted: a daemon asked to stop
     * finishes only once no attached process is alive, so a free lock while
     * we are alive means it died (or the request is stale) and we need one. */
    msp_daemon_check(); /* a start that failed after attach stopped waiting */
    uint64_t now = msp_mono_ns();
    if (now < g_daemon_next_mono)
        return 0; /* backing off after a start that did not come up */
    if (g_child >= 0 && now - g_daemon_spawned_mono < CHILD_PATIENCE_NS)
        return 0; /* the last start is still on its way up (slow imports) */
    int probe = msp_probe_dir_open(g_msp.dump_root, 0, NULL, 0);
    if (probe < 0)
        return 0;
    if (lock_held(probe)) {
        close(probe);
        g_daemon_backoff_ns = 0;
        g_failure[0] = 0;
        return 0;
    }
    if (g_daemon_spawned_mono) {
        /* the previous start did not take the lock: back off */
        g_daemon_backoff_ns = g_daemon_backoff_ns ? g_daemon_backoff_ns * 2 : 1000000000ULL;
        if (g_daemon_backoff_ns > 30000000000ULL)
            g_daemon_backoff_ns = 30000000000ULL;
        if (g_daemon_backoff_ns >= 8000000000ULL && !g_failure[0])
            msp_log("the control plane does not stay up; see %s/.probe/daemon.log",
                    g_msp.dump_root);
    }
    g_daemon_next_mono = now + (g_daemon_backoff_ns ? g_daemon_backoff_ns : 1000000000ULL);
    g_daemon_spawned_mono = now;
    /* a start that hung for CHILD_PATIENCE_NS is given up (left unreaped) */
    forget_child();
    g_failure[0] = 0;
    int rc = spawn_daemon(probe);
    close(probe);
    if (rc != 0) {
        msp_daemon_check();
        return -1;
    }
    return 1;
}

void msp_daemon_reset(void)
{
    g_daemon_next_mono = g_daemon_backoff_ns = g_daemon_spawned_mono = 0;
    forget_child(); /* a forked child has no children of its own yet */
    g_failure[0] = 0;
}
