/* filter_level's writing of a repeated tensor: a hard link to the scope's
 * identical earlier file (found by dedup.c, compared byte for byte), a
 * data= stub where links are refused or for a kernel's tensor at level 2
 * (dedup_link.h). */
#define _GNU_SOURCE
#include "dedup_link.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>


#include "binfile.h"
#include "datadir.h"
#include "filter.h"
#include "fsutil.h"
#include "slot.h"
#include "util.h"

/* dedup support: does the real file hold exactly header + payload? */
struct cmp_ctx {
    const char *header;
    size_t hlen;
    const unsigned char *data;
    uint64_t size;
};

static int file_equals(int fd, const char *buf, size_t len, off_t off)
{
    char chunk[1 << 16];
    while (len) {
        size_t n = len < sizeof chunk ? len : sizeof chunk;
        ssize_t r = pread(fd, chunk, n, off);
        if (r <= 0 || memcmp(chunk, buf, (size_t)r) != 0)
            return 0;
        buf += r;
        len -= (size_t)r;
        off += r;
    }
    return 1;
}

static int same_bytes(const char *real, void *arg)
{
    const struct cmp_ctx *c = arg;
    const char *base;
    int dfd = msp_datadir_open_parent(real, &base);
    if (dfd < 0)
        return 0;
    int fd = openat(dfd, base, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    close(dfd);
    if (fd < 0)
        return 0;
    struct stat st;
    int eq = fstat(fd, &st) == 0 && (uint64_t)st.st_size == c->hlen + c->size &&
             file_equals(fd, c->header, c->hlen, 0) &&
             file_equals(fd, (const char *)c->data, c->size, (off_t)c->hlen);
    close(fd);
    return eq;
}

/* filter_level 2: tensors of kernels (the op segment above before/after
 * names a kernel) are not saved. */
static int is_kernel_tensor(const char *dir)
{
    size_t n = strlen(dir);
    const char *last = strrchr(dir, '/');
    if (last && (!strcmp(last, "/before") || !strcmp(last, "/after")))
        n = (size_t)(last - dir);
    return msp_kernel_dir(dir, n);
}

/* A header-only .bin naming `data`: msProbe's stub (filter_level 2 kernel
 * tensors name themselves; elsewhere the copy it would have linked to). */
static void write_stub(const struct msp_tensor_desc *d, const struct msp_item *it, int dfd,
                       const char *name, const char *data, const struct msp_stats *stats,
                       const char *note, const char *why_stub)
{
    char header[MSP_BIN_HEADER_CAP];
    int slen = msp_bin_header(header, sizeof header, it->format_s, it->dtype_s, it->dims, 0, data);
    struct iovec iov = {header, slen > 0 ? (size_t)slen : 0};
    int rc = slen > 0 ? msp_write_file_at(dfd, name, &iov, 1) : -ENAMETOOLONG;
    if (rc != 0) {
        char why[256];
        snprintf(why, sizeof why, "cannot write the .bin: %s", strerror(-rc));
        MSP_COUNT(errors, 1);
        msp_tensor_lost(d, why);
        return;
    }
    char both[448];
    if (why_stub) {
        snprintf(both, sizeof both, "%s%s%s", why_stub, note[0] ? "; " : "", note);
        note = both;
    }
    msp_tensor_record(d, why_stub ? MSP_OUT_STUB_REFUSED : MSP_OUT_STUB, data, stats, note);
}

/* The file system refuses hard links (not a transient failure of this one). */
static int link_refused(int err)
{
    return err == EPERM || err == EXDEV || err == EOPNOTSUPP || err == ENOSYS;
}

/* An identical earlier tensor of the scope is `real`: make this path one
 * more name of its file, so every path reads the whole tensor with any
 * reader; where the file system refuses links, a data= stub. Returns 0 if
 * the caller must write the tensor in full (the real file is gone, it has
 * too many links, or the link failed for another reason). */
static int write_link(const struct msp_tensor_desc *d, const struct msp_item *it, const char *real,
                      int dfd, const char *name, const struct msp_stats *stats, const char *note)
{
    char alias[MSP_PATH_LEN];
    if (msp_relpath(it->path, real, alias, sizeof alias) != 0)
        return 0;
    const char *base;
    int rdfd = msp_datadir_open_parent(real, &base);
    if (rdfd < 0)
        return 0;
    int rc = msp_link_file_at(rdfd, base, dfd, name);
    close(rdfd);
    if (rc == 0) {
        msp_tensor_record(d, MSP_OUT_LINKED, alias, stats, note);
        return 1;
    }
    if (!link_refused(-rc))
        return 0;
    static int warned;
    if (!__atomic_exchange_n(&warned, 1, __ATOMIC_RELAXED))
        msp_log("the file system of the dump refuses hard links (%s): identical tensors are "
                "written as data= stubs, which msProbe's tools cannot read; use filter_level 0 "
                "to save every tensor in full", strerror(-rc));
    char why[128];
    snprintf(why, sizeof why, "hard link refused (%s): data= stub", strerror(-rc));
    write_stub(d, it, dfd, name, alias, stats, note, why);
    return 1;
}

int msp_dedup_repeat(struct msp_dedup *dd, struct msp_tensor_desc *d, const struct msp_item *it,
                     int dfd, const char *dir, const char *name, const char *header, int hlen,
                     const struct msp_stats *stats, const char *note, uint64_t *key)
{
    if (it->filter_level >= 2 && is_kernel_tensor(dir)) {
        write_stub(d, it, dfd, name, name, stats, note, NULL);
        return 1;
    }
    *key = msp_fnv1a(d->hash, header, (size_t)hlen);
    struct cmp_ctx c = {header, (size_t)hlen, it->data, it->size};
    const char *real = msp_dedup_find(dd, it->path, *key, same_bytes, &c);
    return real && write_link(d, it, real, dfd, name, stats, note);
}
