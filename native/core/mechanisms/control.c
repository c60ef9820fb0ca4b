/*
 * Control block operations shared by the shim and the Python control plane
 * (compiled into both: the shim links it, cffi builds it into msprobe_atb).
 * All cross-process accesses are GCC/Clang __atomic builtins on plain
 * integer fields, so the header stays parseable by cffi.
 */
#define _GNU_SOURCE
#include "msprobe_atb/control.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define LOAD(p) __atomic_load_n((p), __ATOMIC_RELAXED)
#define STORE(p, v) __atomic_store_n((p), (v), __ATOMIC_RELAXED)

static void set_err(char *errbuf, uint64_t errlen, const char *what, const char *path)
{
    if (errbuf && errlen)
        snprintf(errbuf, (size_t)errlen, "%s %s: %s", what, path, strerror(errno));
}

/* Every byte of the block is allocated before it is mapped: a sparse file on
 * a full disk would turn the first store into a SIGBUS in the host. */
static int allocate(int fd, off_t size)
{
    int rc = posix_fallocate(fd, 0, size);
    if (rc != EOPNOTSUPP && rc != EINVAL) {
        errno = rc;
        return rc ? -1 : 0;
    }
    static const char zeros[4096];
    for (off_t off = 0; off < size; off += (off_t)sizeof zeros) {
        size_t n = (size_t)(size - off) < sizeof zeros ? (size_t)(size - off) : sizeof zeros;
        if (pwrite(fd, zeros, n, off) != (ssize_t)n)
            return -1;
    }
    return 0;
}

/* Opens name in dirfd as a directory (made 0750 with create), never
 * following a symlink. */
static int open_dir_at(int dirfd, const char *name, int create)
{
    int fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0 && errno == ENOENT && create) {
        if (mkdirat(dirfd, name, 0750) != 0 && errno != EEXIST)
            return -1;
        fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    }
    return fd;
}

int msp_probe_dir_open(const char *dump_root, int create, char *errbuf, uint64_t errlen)
{
    int root = open(dump_root, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (root < 0 && errno == ENOENT && create) {
        if (mkdir(dump_root, 0750) != 0 && errno != EEXIST) {
            set_err(errbuf, errlen, "cannot create directory", dump_root);
            return -1;
        }
        root = open(dump_root, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    }
    if (root < 0) {
        if (errno == ELOOP || errno == ENOTDIR) {
            if (errbuf && errlen)
                snprintf(errbuf, (size_t)errlen,
                         "%s is a symlink or not a directory (it was resolved when the probe or "
                         "the control plane started; it has changed since): restart them",
                         dump_root);
            errno = ELOOP;
        } else {
            set_err(errbuf, errlen, "cannot open", dump_root);
        }
        return -1;
    }
    int fd = open_dir_at(root, ".probe", create);
    int e = errno;
    close(root);
    if (fd < 0) {
        errno = e;
        if (errbuf && errlen && (e == ELOOP || e == ENOTDIR))
            snprintf(errbuf, (size_t)errlen,
                     "%s/.probe is a symlink or not a directory: remove it (the probe keeps its "
                     "state there and never follows a link out of the dump root)", dump_root);
        else
            set_err(errbuf, errlen, "cannot open directory", dump_root);
        errno = e;
    }
    return fd;
}

/* Whether fd is a regular file with no other name: anything else at one of
 * our names was planted (a link to a file elsewhere) or is junk. */
static int private_file(int fd)
{
    struct stat st;
    return fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_nlink == 1;
}

int msp_probe_file_open(int probe_fd, const char *name, int flags, int *replaced)
{
    int base = (flags & ~(O_CREAT | O_EXCL | O_TRUNC)) | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK;
    if (replaced)
        *replaced = 0;
    for (int attempt = 0; attempt < 4; attempt++) {
        int fd = openat(probe_fd, name, base);
        if (fd >= 0 && private_file(fd)) {
            fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
            return fd;
        }
        if (fd >= 0)
            close(fd);
        else if (errno != ENOENT && errno != ELOOP && errno != ENXIO && errno != EISDIR)
            return -1;
        if (fd >= 0 || errno != ENOENT) {
            /* a symlink, hard link, FIFO or directory: unlink the name (never
             * what it points to) and create our own */
            if (unlinkat(probe_fd, name, 0) != 0 && errno != ENOENT &&
                unlinkat(probe_fd, name, AT_REMOVEDIR) != 0 && errno != ENOENT)
                return -1;
            if (replaced)
                *replaced = 1;
        }
        if (!(flags & O_CREAT)) {
            errno = ENOENT;
            return -1;
        }
        fd = openat(probe_fd, name, base | O_CREAT | O_EXCL, 0640);
        if (fd >= 0) {
            fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
            return fd;
        }
        if (errno != EEXIST)
            return -1;
        /* someone else created it just now: open theirs */
    }
    errno = EAGAIN;
    return -1;
}

/* Writes a fully initialised block to a private temporary file and links it
 * into place; linkat() fails with EEXIST if someone else won the race, which
 * is fine: their block is just as complete. The temporary is created with
 * O_EXCL, so a file planted (hard-linked) under its name is never written. */
static int create_block(int dirfd, const char *dir, char *errbuf, uint64_t errlen)
{
    char tmp[64], shown[MSP_PATH_LEN + 64];
    snprintf(tmp, sizeof tmp, ".control.%ld.tmp", (long)getpid());
    snprintf(shown, sizeof shown, "%s/%s", dir, tmp);
    unlinkat(dirfd, tmp, 0); /* ours from a crash with this pid, or planted */
    int fd = openat(dirfd, tmp, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0640);
    if (fd < 0) {
        set_err(errbuf, errlen, "cannot create", shown);
        return -1;
    }
    int rc = -1;
    if (allocate(fd, (off_t)sizeof(struct msp_control)) != 0) {
        set_err(errbuf, errlen, "cannot allocate", shown);
        goto out;
    }
    struct msp_control *ctl = mmap(NULL, sizeof *ctl, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (ctl == MAP_FAILED) {
        set_err(errbuf, errlen, "cannot map", shown);
        goto out;
    }
    ctl->version = MSP_CTL_VERSION;
    ctl->size = (uint32_t)sizeof *ctl;
    ctl->config.state = MSP_STATE_ASLEEP;
    ctl->config.task = MSP_TASK_TENSOR;
    ctl->config.overflow_nums = -1;
    ctl->config.queue_budget_bytes = (uint64_t)1 << 30;
    __atomic_store_n(&ctl->magic, (uint64_t)MSP_CTL_MAGIC, __ATOMIC_RELEASE);
    munmap(ctl, sizeof *ctl);
    if (linkat(dirfd, tmp, dirfd, "control.block", 0) != 0 && errno != EEXIST) {
        snprintf(shown, sizeof shown, "%s/control.block", dir);
        set_err(errbuf, errlen, "cannot install", shown);
        goto out;
    }
    rc = 0;
out:
    close(fd);
    unlinkat(dirfd, tmp, 0);
    return rc;
}

int msp_ctl_open(const char *dump_root, int create, struct msp_control **out,
                 char *errbuf, uint64_t errlen)
{
    char dir[MSP_PATH_LEN], path[MSP_PATH_LEN + 32];
    if (snprintf(dir, sizeof dir, "%s/.probe", dump_root) >= (int)sizeof dir) {
        errno = ENAMETOOLONG;
        set_err(errbuf, errlen, "path too long:", dump_root);
        return -1;
    }
    snprintf(path, sizeof path, "%s/control.block", dir);
    int dirfd = msp_probe_dir_open(dump_root, create, errbuf, errlen);
    if (dirfd < 0)
        return -1;
    struct stat st;
    if (create && fstatat(dirfd, "control.block", &st, AT_SYMLINK_NOFOLLOW) != 0 &&
        create_block(dirfd, dir, errbuf, errlen) != 0) {
        close(dirfd);
        return -1;
    }
    int fd = openat(dirfd, "control.block", O_RDWR | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    close(dirfd);
    if (fd < 0) {
        set_err(errbuf, errlen, "cannot open", path);
        return -1;
    }
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) ||
        (uint64_t)st.st_size != sizeof(struct msp_control)) {
        close(fd);
        if (errbuf && errlen)
            snprintf(errbuf, (size_t)errlen,
                     "%s has size %lld, expected %zu: written by another msprobe-atb version; "
                     "remove the .probe directory of this output dir",
                     path, (long long)st.st_size, sizeof(struct msp_control));
        return -2;
    }
    struct msp_control *ctl = mmap(NULL, sizeof *ctl, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (ctl == MAP_FAILED) {
        set_err(errbuf, errlen, "cannot map", path);
        return -1;
    }
    if (__atomic_load_n(&ctl->magic, __ATOMIC_ACQUIRE) != MSP_CTL_MAGIC ||
        ctl->version != MSP_CTL_VERSION || ctl->size != sizeof *ctl) {
        if (errbuf && errlen)
            snprintf(errbuf, (size_t)errlen,
                     "%s has layout version %u, this build needs %u: written by another "
                     "msprobe-atb version; remove the .probe directory of this output dir",
                     path, ctl->version, MSP_CTL_VERSION);
        munmap(ctl, sizeof *ctl);
        return -2;
    }
    *out = ctl;
    return 0;
}

void msp_ctl_close(struct msp_control *ctl)
{
    if (ctl)
        munmap(ctl, sizeof *ctl);
}

void msp_ctl_publish(struct msp_control *ctl, const struct msp_config *cfg)
{
    uint64_t g = __atomic_load_n(&ctl->generation, __ATOMIC_RELAXED);
    __atomic_store_n(&ctl->generation, g + 1, __ATOMIC_RELAXED); /* odd: writing */
    __atomic_thread_fence(__ATOMIC_RELEASE);
    memcpy(&ctl->config, cfg, sizeof *cfg);
    __atomic_store_n(&ctl->generation, g + 2, __ATOMIC_RELEASE);
    __atomic_fetch_add(&ctl->published, 1, __ATOMIC_RELEASE);
}

uint64_t msp_ctl_read_config(const struct msp_control *ctl, struct msp_config *out)
{
    for (;;) {
        uint64_t g1 = __atomic_load_n(&ctl->generation, __ATOMIC_ACQUIRE);
        if (!(g1 & 1)) {
            memcpy(out, (const void *)&ctl->config, sizeof *out);
            __atomic_thread_fence(__ATOMIC_ACQUIRE);
            if (__atomic_load_n(&ctl->generation, __ATOMIC_RELAXED) == g1)
                return g1;
        }
        /* A publish is in progress: it is a memcpy of a few KiB, so back off briefly. */
        struct timespec ts = {0, 1000};
        nanosleep(&ts, NULL);
    }
}

uint64_t msp_ctl_generation(const struct msp_control *ctl)
{
    return __atomic_load_n(&ctl->generation, __ATOMIC_ACQUIRE);
}

void msp_ctl_set_error(struct msp_control *ctl, const char *msg)
{
    snprintf(ctl->config_error, sizeof ctl->config_error, "%s", msg);
    if (msg[0])
        __atomic_fetch_add(&ctl->error_seq, 1, __ATOMIC_RELEASE);
}

void msp_ctl_set_config_path(struct msp_control *ctl, const char *path)
{
    snprintf(ctl->config_path, sizeof ctl->config_path, "%s", path);
}

void msp_ctl_set_word(uint64_t *word, uint64_t value)
{
    __atomic_store_n(word, value, __ATOMIC_RELEASE);
}

uint64_t msp_ctl_get_word(const uint64_t *word)
{
    return __atomic_load_n(word, __ATOMIC_ACQUIRE);
}

static int pid_alive(uint64_t pid)
{
    return pid != 0 && (kill((pid_t)pid, 0) == 0 || errno == EPERM);
}

int msp_ctl_claim_proc(struct msp_control *ctl, uint64_t pid, uint64_t start_ns)
{
    /* First pass takes a free slot, second pass recycles slots of dead processes. */
    for (int pass = 0; pass < 2; pass++) {
        for (int i = 0; i < MSP_MAX_PROCS; i++) {
            struct msp_proc *p = &ctl->procs[i];
            uint64_t cur = LOAD(&p->pid);
            int usable = pass == 0 ? cur == 0 : (cur != pid && !pid_alive(cur));
            if (!usable)
                continue;
            if (!__atomic_compare_exchange_n(&p->pid, &cur, pid, 0, __ATOMIC_ACQ_REL,
                                             __ATOMIC_RELAXED))
                continue;
            STORE(&p->start_ns, start_ns);
            STORE(&p->device, (int64_t)-1);
            STORE(&p->flags, 0u);
            uint64_t *counters = &p->ops_seen;
            for (uint64_t *c = counters; c <= &p->built; c++)
                STORE(c, 0);
            STORE(&p->params_lost, 0);
            STORE(&p->params_unrecorded, 0);
            STORE(&p->pending_other, 0);
            for (int k = 0; k < MSP_PENDING_ROUNDS; k++)
                STORE(&p->pending[k].state, 0);
            STORE(&p->n_writers, 0);
            for (int w = 0; w < MSP_MAX_WRITERS; w++)
                STORE(&p->writer_head[w], MSP_HEAD_IDLE);
            return i;
        }
    }
    return -1;
}

void msp_ctl_release_proc(struct msp_control *ctl, int slot)
{
    if (slot >= 0 && slot < MSP_MAX_PROCS)
        __atomic_fetch_or(&ctl->procs[slot].flags, (uint32_t)MSP_PROC_EXITED, __ATOMIC_RELEASE);
}

void msp_ctl_read_proc(const struct msp_control *ctl, int slot, struct msp_proc *out)
{
    const struct msp_proc *p = &ctl->procs[slot];
    out->pid = LOAD(&p->pid);
    out->start_ns = LOAD(&p->start_ns);
    out->device = LOAD(&p->device);
    out->abi = LOAD(&p->abi);
    out->flags = LOAD(&p->flags);
    const uint64_t *src = &p->ops_seen;
    uint64_t *dst = &out->ops_seen;
    for (; src <= &p->pending_other; src++, dst++) /* every number up to pending[] */
        *dst = LOAD(src);
    /* a model's name is complete once n_models counts it (release by the shim) */
    uint64_t nm = __atomic_load_n(&p->n_models, __ATOMIC_ACQUIRE);
    out->n_models = nm < MSP_MAX_MODELS ? nm : MSP_MAX_MODELS;
    for (uint64_t i = 0; i < out->n_models; i++) {
        memcpy(out->models[i].name, p->models[i].name, MSP_MODEL_NAME_LEN);
        out->models[i].name[MSP_MODEL_NAME_LEN - 1] = 0;
        out->models[i].started = LOAD(&p->models[i].started);
        out->models[i].executed = LOAD(&p->models[i].executed);
        /* the first round is stored before its request (release) */
        out->models[i].next_request = __atomic_load_n(&p->models[i].next_request, __ATOMIC_ACQUIRE);
        out->models[i].next_first = LOAD(&p->models[i].next_first);
    }
    out->n_writers = LOAD(&p->n_writers);
    /* a head is raised after its records' write(2) (release): a reader that
     * then looks at the log's size sees them */
    for (int w = 0; w < MSP_MAX_WRITERS; w++)
        out->writer_head[w] = __atomic_load_n(&p->writer_head[w], __ATOMIC_ACQUIRE);
}

uint64_t msp_ctl_claim_incident(struct msp_control *ctl, uint64_t base, uint64_t max,
                                uint64_t after_seq, const struct msp_incident *inc)
{
    uint64_t cur = __atomic_load_n(&ctl->rec_claimed, __ATOMIC_ACQUIRE);
    for (;;) {
        if (cur < base || cur - base >= max || cur > after_seq) {
            __atomic_fetch_add(&ctl->rec_suppressed, 1, __ATOMIC_RELAXED);
            return 0;
        }
        if (__atomic_compare_exchange_n(&ctl->rec_claimed, &cur, cur + 1, 0, __ATOMIC_ACQ_REL,
                                        __ATOMIC_ACQUIRE))
            break;
    }
    uint64_t seq = cur + 1;
    struct msp_incident *e = &ctl->incidents[(seq - 1) % MSP_REC_MAX_INCIDENTS];
    __atomic_store_n(&e->ready, 0, __ATOMIC_RELEASE);
    e->t_ns = inc->t_ns;
    e->pid = inc->pid;
    e->start_ns = inc->start_ns;
    e->device = inc->device;
    e->round = inc->round;
    e->kind = inc->kind;
    e->reserved = 0;
    e->value = inc->value;
    memcpy(e->path, inc->path, sizeof e->path);
    e->path[sizeof e->path - 1] = 0;
    __atomic_store_n(&e->ready, seq, __ATOMIC_RELEASE);
    return seq;
}

int msp_ctl_read_incident(const struct msp_control *ctl, uint64_t seq, struct msp_incident *out)
{
    if (seq == 0)
        return 0;
    const struct msp_incident *e = &ctl->incidents[(seq - 1) % MSP_REC_MAX_INCIDENTS];
    if (__atomic_load_n(&e->ready, __ATOMIC_ACQUIRE) != seq)
        return 0;
    memcpy(out, (const void *)e, sizeof *out);
    /* a claimer lapping the table rewrites it: only a stable copy counts */
    return __atomic_load_n(&e->ready, __ATOMIC_ACQUIRE) == seq;
}
