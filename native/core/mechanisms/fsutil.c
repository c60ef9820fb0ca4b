/* File system access below the dump root that never trusts a name from the
 * model as a path: path checks, openat walks with O_NOFOLLOW, exclusive creates,
 * hard links (fsutil.h). */
#define _GNU_SOURCE
#include "fsutil.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "msprobe_atb/control.h"
#include "util.h"

#define BYTES(x) (UINT64_C(0x0101010101010101) * (x))
/* A byte below 0x20 or DEL in s, 8 bytes at a time (the hooks check every
 * path): such a byte sets the high bit of its lane in one of the terms ("a
 * word has a byte less than n / equal to n", exact for "any"). */
static int has_control(const char *s, size_t n)
{
    uint64_t any = 0, x;
    size_t i = 0;
    for (; n - i >= 8; i += 8) {
        memcpy(&x, s + i, 8);
        uint64_t del = x ^ BYTES(0x7f);
        any |= ((x - BYTES(0x20)) & ~x) | ((del - BYTES(1)) & ~del);
    }
    for (; i < n; i++)
        any |= ((unsigned char)s[i] < 0x20 || s[i] == 0x7f) ? 0x80 : 0;
    return (any & BYTES(0x80)) != 0;
}

const char *msp_path_check(const char *rel, size_t len)
{
    if (len == 0)
        return "empty path";
    if (len >= MSP_PATH_LEN - 64)
        return "path too long";
    if (rel[0] == '/')
        return "absolute path";
    if (has_control(rel, len))
        return "control character in path";
    for (const char *c = rel, *end = rel + len;;) {
        const char *slash = memchr(c, '/', (size_t)(end - c));
        size_t n = (size_t)((slash ? slash : end) - c);
        if (n == 0)
            return "empty path component";
        if (n > MSP_NAME_MAX)
            return "path component longer than 255 bytes";
        if ((n == 1 && c[0] == '.') || (n == 2 && c[0] == '.' && c[1] == '.'))
            return "'.' or '..' path component";
        if (!slash)
            return NULL;
        c = slash + 1;
    }
}

/* The control plane writes these into every round directory
 * ({dev}_{pid}/{exec}/), beside the op directories ATB names "{id}_{Name}". */
static const struct msp_name DERIVED[] = {MSP_NAME("statistic.csv"),
                                          MSP_NAME("statistic_extra.csv"),
                                          MSP_NAME("ROUND_COMPLETE.json")};

const char *msp_path_reserved(const char *rel, size_t len)
{
    const char *c = rel, *end = rel + len;
    for (int comp = 0; comp < 2; comp++) {
        c = memchr(c, '/', (size_t)(end - c));
        if (!c)
            return NULL;
        c++;
    }
    const char *slash = memchr(c, '/', (size_t)(end - c));
    size_t n = (size_t)((slash ? slash : end) - c);
    if (n && c[0] == '.')
        return "a round-level name starting with '.' (the control plane's temporary files)";
    for (size_t k = 0; k < sizeof DERIVED / sizeof DERIVED[0]; k++)
        if (n == DERIVED[k].n && memcmp(c, DERIVED[k].s, n) == 0)
            return "a round-level name reserved for a derived file "
                   "(statistic.csv, statistic_extra.csv, ROUND_COMPLETE.json)";
    return NULL;
}

int msp_open_dir_at(int rootfd, const char *rel_dir, int create)
{
    int cur = dup(rootfd);
    const char *p = rel_dir;
    char comp[MSP_NAME_MAX + 1];
    while (cur >= 0 && *p) {
        const char *slash = strchr(p, '/');
        size_t n = slash ? (size_t)(slash - p) : strlen(p);
        if (n == 0 || n > MSP_NAME_MAX) {
            close(cur);
            errno = EINVAL;
            return -1;
        }
        memcpy(comp, p, n);
        comp[n] = 0;
        int fd = openat(cur, comp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0 && errno == ENOENT && create) {
            if (mkdirat(cur, comp, 0750) != 0 && errno != EEXIST) {
                int e = errno;
                close(cur);
                errno = e;
                return -1;
            }
            fd = openat(cur, comp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        }
        int e = errno;
        close(cur);
        errno = e;
        cur = fd;
        p += n + (slash ? 1 : 0);
    }
    return cur;
}

/* One writev for header and payload; short writes (the kernel's 2 GiB
 * cap, a full disk) continue where they stopped. */
static int write_all(int fd, const struct iovec *iov, int iovcnt)
{
    struct iovec v[MSP_WRITE_IOV_MAX];
    if (iovcnt < 0 || iovcnt > MSP_WRITE_IOV_MAX)
        return -EINVAL;
    memcpy(v, iov, sizeof v[0] * (size_t)iovcnt);
    int i = 0;
    while (i < iovcnt) {
        ssize_t w = writev(fd, v + i, iovcnt - i);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            return -errno;
        }
        if (w == 0 && v[i].iov_len)
            return -EIO;
        size_t done = (size_t)w;
        while (i < iovcnt && done >= v[i].iov_len)
            done -= v[i++].iov_len;
        if (i < iovcnt) {
            v[i].iov_base = (char *)v[i].iov_base + done;
            v[i].iov_len -= done;
        }
    }
    return 0;
}

/* The temporary name of `name` for this thread; it must fit NAME_MAX too:
 * long names are cut in it only. */
static void tmp_name(char tmp[MSP_NAME_MAX + 1], const char *name)
{
    snprintf(tmp, MSP_NAME_MAX + 1, ".%.200s.%ld.%ld.tmp", name, (long)getpid(),
             (long)syscall(SYS_gettid));
}

/* Writes a file through a temporary name renamed over `name` once it is
 * complete; `fill` writes its contents into fd. */
typedef int (*fill_fn)(int fd, const void *arg);

static int write_via_tmp(int dirfd, const char *name, fill_fn fill, const void *arg)
{
    char tmp[MSP_NAME_MAX + 1];
    tmp_name(tmp, name);
    int fd = openat(dirfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0640);
    if (fd < 0 && errno == EEXIST) {
        /* left behind by a crashed thread with our (recycled) pid/tid */
        unlinkat(dirfd, tmp, 0);
        fd = openat(dirfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0640);
    }
    if (fd < 0)
        return -errno;
    int rc = fill(fd, arg);
    if (close(fd) != 0 && rc == 0)
        rc = -errno;
    if (rc == 0 && renameat(dirfd, tmp, dirfd, name) != 0)
        rc = -errno;
    if (rc != 0)
        unlinkat(dirfd, tmp, 0);
    return rc;
}

struct iov_args {
    const struct iovec *iov;
    int iovcnt;
};

static int fill_iov(int fd, const void *arg)
{
    const struct iov_args *a = arg;
    return write_all(fd, a->iov, a->iovcnt);
}

int msp_write_file_at(int dirfd, const char *name, const struct iovec *iov, int iovcnt)
{
    struct iov_args a = {iov, iovcnt};
    return write_via_tmp(dirfd, name, fill_iov, &a);
}

/* O_DIRECT writes this much a call at most: the kernel pins the pages of a
 * call's buffer while the device reads them, and the caller hears after each
 * (msp_written_fn). */
#define DIRECT_PIECE (UINT64_C(8) << 20)

struct aligned_args {
    const unsigned char *buf;
    size_t n;
    const struct msp_write_hooks *hooks;
};

/* The whole blocks with O_DIRECT, from where they lie: no copy into the page
 * cache, whose fresh pages cost this VM a fault to the host each and whose
 * writeback a buffered writer then waits for (make bench write_throughput);
 * the last partial block, and everything on a file system that refuses
 * O_DIRECT, through the page cache. */
static int fill_aligned(int fd, const void *arg)
{
    const struct aligned_args *a = arg;
    size_t whole = a->n & ~(size_t)(MSP_DIO_ALIGN - 1), off = 0;
    int flags = fcntl(fd, F_GETFL);
    if (whole && flags >= 0 && fcntl(fd, F_SETFL, flags | O_DIRECT) == 0) {
        while (off < whole) {
            size_t k = whole - off < DIRECT_PIECE ? whole - off : DIRECT_PIECE;
            if (a->hooks->ahead)
                a->hooks->ahead(a->hooks->arg, off, off + k);
            ssize_t w = pwrite(fd, a->buf + off, k, (off_t)off);
            if (w < 0 && errno == EINTR)
                continue;
            if (w <= 0 || (size_t)w % MSP_DIO_ALIGN)
                break; /* the rest buffered: it says why, if anything is wrong */
            off += (size_t)w;
            if (a->hooks->written)
                a->hooks->written(a->hooks->arg, off);
        }
        if (fcntl(fd, F_SETFL, flags) != 0)
            return -errno;
    }
    if (lseek(fd, (off_t)off, SEEK_SET) < 0)
        return -errno;
    if (a->hooks->ahead && off < a->n)
        a->hooks->ahead(a->hooks->arg, off, a->n);
    struct iovec rest = {(void *)(a->buf + off), a->n - off};
    return write_all(fd, &rest, 1);
}

int msp_write_aligned_file_at(int dirfd, const char *name, const void *buf, size_t n,
                              const struct msp_write_hooks *hooks)
{
    struct aligned_args a = {buf, n, hooks};
    return write_via_tmp(dirfd, name, fill_aligned, &a);
}

int msp_resolve_link(char *path, size_t cap)
{
    struct stat st;
    if (lstat(path, &st) != 0 || !S_ISLNK(st.st_mode))
        return 0;
    char real[PATH_MAX];
    if (!realpath(path, real) || strlen(real) >= cap)
        return -1;
    memcpy(path, real, strlen(real) + 1);
    return 1;
}

int msp_link_file_at(int src_dirfd, const char *src_name, int dirfd, const char *name)
{
    char tmp[MSP_NAME_MAX + 1];
    tmp_name(tmp, name);
    int rc = linkat(src_dirfd, src_name, dirfd, tmp, 0);
    if (rc != 0 && errno == EEXIST) {
        unlinkat(dirfd, tmp, 0); /* left behind by a crashed thread */
        rc = linkat(src_dirfd, src_name, dirfd, tmp, 0);
    }
    if (rc != 0)
        return -errno;
    rc = renameat(dirfd, tmp, dirfd, name) == 0 ? 0 : -errno;
    /* a rename between two names of one file does nothing and keeps both */
    unlinkat(dirfd, tmp, 0);
    return rc;
}

int msp_mkdir_p(const char *path, unsigned mode)
{
    char buf[MSP_PATH_LEN];
    if (snprintf(buf, sizeof buf, "%s", path) >= (int)sizeof buf) {
        errno = ENAMETOOLONG;
        return -1;
    }
    for (char *p = buf + 1;; p++) {
        if (*p == '/' || *p == 0) {
            char c = *p;
            *p = 0;
            if (mkdir(buf, mode) != 0 && errno != EEXIST)
                return -1;
            *p = c;
            if (!c)
                break;
        }
    }
    struct stat st;
    if (stat(buf, &st) != 0)
        return -1;
    if (!S_ISDIR(st.st_mode)) {
        errno = ENOTDIR;
        return -1;
    }
    return 0;
}
