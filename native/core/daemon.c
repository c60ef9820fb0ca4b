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

static void spawn_daemon(void)
{
    char log[MSP_PATH_LEN + 32];
    snprintf(log, sizeof log, "%s/.probe/daemon.log", g_msp.dump_root);
    /* sh backgrounds the daemon and exits at once: we reap sh, init adopts
     * the daemon, and it lives on in its own session (setsid). */
    static const char script[] =
        "\"$0\" -m msprobe_atb daemon --output \"$1\" --config \"$2\" </dev/null >>\"$3\" 2>&1 &";
    char *argv[] = {"sh", "-c", (char *)script, g_msp.python, g_msp.out, g_msp.config, log, NULL};
    size_t n = 0;
    while (environ && environ[n])
        n++;
    char **envp = calloc(n + 1, sizeof *envp);
    if (!envp)
        return;
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (strncmp(environ[i], "LD_PRELOAD=", 11) != 0)
            envp[k++] = environ[i];
    posix_spawnattr_t attr;
    posix_spawnattr_init(&attr);
    sigset_t none, dfl;
    sigemptyset(&none);
    sigfillset(&dfl);
    sigdelset(&dfl, SIGKILL);
    sigdelset(&dfl, SIGSTOP);
    posix_spawnattr_setsigmask(&attr, &none);
    posix_spawnattr_setsigdefault(&attr, &dfl);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSID | POSIX_SPAWN_SETSIGMASK |
                                        POSIX_SPAWN_SETSIGDEF);
    pid_t pid;
    int rc = posix_spawn(&pid, "/bin/sh", NULL, &attr, argv, envp);
    posix_spawnattr_destroy(&attr);
    free(envp);
    if (rc != 0) {
        msp_log("cannot start the control plane (/bin/sh): %s", strerror(rc));
        return;
    }
    while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
        ;
}

/* Starts the daemon if nobody holds its lock. Retries back off (1 s up
 * to 30 s) while it keeps failing to come up, so a broken Python does not
 * make us spawn it every tick. */
int msp_ensure_daemon(void)
{
    /* stop_requested is deliberately not consulted: a daemon asked to stop
     * finishes only once no attached process is alive, so a free lock while
     * we are alive means it died (or the request is stale) and we need one. */
    uint64_t now = msp_mono_ns();
    if (now < g_daemon_next_mono)
        return 0; /* backing off after a start that did not come up */
    char path[MSP_PATH_LEN + 32];
    snprintf(path, sizeof path, "%s/.probe/daemon.lock", g_msp.dump_root);
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0640);
    if (fd < 0)
        return 0;
    int held = flock(fd, LOCK_EX | LOCK_NB) != 0;
    close(fd); /* releases our test lock */
    if (held) {
        g_daemon_backoff_ns = 0;
        return 0;
    }
    if (g_daemon_spawned_mono) {
        /* the previous start did not take the lock: back off */
        g_daemon_backoff_ns = g_daemon_backoff_ns ? g_daemon_backoff_ns * 2 : 1000000000ULL;
        if (g_daemon_backoff_ns > 30000000000ULL)
            g_daemon_backoff_ns = 30000000000ULL;
        if (g_daemon_backoff_ns >= 8000000000ULL)
            msp_log("the control plane does not stay up; see %s/.probe/daemon.log",
                    g_msp.dump_root);
    }
    g_daemon_next_mono = now + (g_daemon_backoff_ns ? g_daemon_backoff_ns : 1000000000ULL);
    g_daemon_spawned_mono = now;
    spawn_daemon();
    return 1;
}

void msp_daemon_reset(void)
{
    g_daemon_next_mono = g_daemon_backoff_ns = g_daemon_spawned_mono = 0;
}
