/* The process's record log: one JSON line per record, appended with one
 * write(2), with a preallocated reserve so the records of a full disk still fit
 * (record.h). */
#define _GNU_SOURCE
#include "record.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "fsutil.h"
#include "slot.h"
#include "util.h"

int msp_rec_fd = -1;
static uint64_t g_size, g_reserved_end;
/* the reserve's floor: the exit record's room (see the reserve below) */
#define FLOOR (16u << 10)

/* Opened from the verified .probe fd without following symlinks, like the
 * data tree: a link planted at .probe/records must not lead the log
 * outside. The name is new for every attach (pid, start_ns), so O_EXCL:
 * a file planted under it is never appended to. */
int msp_rec_open(const char *dump_root, uint64_t pid, uint64_t start_ns)
{
    int probe = msp_probe_dir_open(dump_root, 1, NULL, 0);
    if (probe < 0)
        return -1;
    int dir = msp_open_dir_at(probe, "records", 1);
    int saved = errno;
    close(probe);
    if (dir < 0) {
        errno = saved;
        return -1;
    }
    char name[64];
    snprintf(name, sizeof name, "%llu-%llu.jsonl", (unsigned long long)pid,
             (unsigned long long)start_ns);
    int fd = openat(dir, name, O_WRONLY | O_APPEND | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW,
                    0640);
    saved = errno;
    /* a new (empty) log: its floor is taken now, before the first tensor
     * can fill the disk, so the exit record always fits; the rest of the
     * reserve is made at the first record */
    __atomic_store_n(&g_size, 0, __ATOMIC_RELEASE);
    __atomic_store_n(&g_reserved_end, 0, __ATOMIC_RELEASE);
    if (fd >= 0 && fallocate(fd, FALLOC_FL_KEEP_SIZE, 0, FLOOR) == 0)
        __atomic_store_n(&g_reserved_end, FLOOR, __ATOMIC_RELEASE);
    close(dir);
    errno = saved;
    return fd;
}

static __thread uint64_t t_stamp_ns;

void msp_rec_stamp(uint64_t now_ns)
{
    t_stamp_ns = now_ns;
}

void msp_rec_begin(struct jbuf *b, const char *kind)
{
    jb_init(b, 256);
    jb_open(b, '{');
    jb_kname(b, "k", kind);
    jb_ku64(b, "t", t_stamp_ns ? t_stamp_ns : msp_now_ns());
}

/* The reserve: the record log keeps space allocated ahead of its end
 * (FALLOC_FL_KEEP_SIZE), so on a full disk the records of the tensors that
 * could not be written still fit, and the last FLOOR bytes are kept for the
 * exit record, which carries per round whatever could not be recorded one by
 * one (pending.h). Sized from the queue budget: 1/1024 of it, at most 1/32
 * of the free space, 64 KiB..4 MiB. */
/* g_size: bytes appended to the current log; g_reserved_end: allocated
 * up to here (both atomic, declared above msp_rec_open). g_claimed: bytes
 * of records that have their room (below) and are not appended yet: a
 * writer's batch claims a record's room as the record joins it, so the
 * batch's one write cannot fail for want of space (recbatch.h). */
static uint64_t g_claimed;     /* atomic */
static int g_extending;        /* atomic: one thread extends at a time */
static int g_no_fallocate;     /* the file system cannot preallocate: no reserve */

#define DEFAULT_BUDGET ((uint64_t)1 << 30)
static uint64_t g_budget = DEFAULT_BUDGET; /* atomic */

void msp_rec_budget(uint64_t bytes)
{
    __atomic_store_n(&g_budget, bytes, __ATOMIC_RELAXED);
}

void msp_rec_forget(void)
{
    if (msp_rec_fd >= 0)
        close(msp_rec_fd);
    msp_rec_fd = -1;
    g_budget = DEFAULT_BUDGET;
    g_claimed = 0; /* the parent's batches are the parent's */
}

static uint64_t reserve_bytes(int fd)
{
    uint64_t r = __atomic_load_n(&g_budget, __ATOMIC_RELAXED) / 1024;
    /* never more than 1/32 of the free space: on a small disk the tensors
     * come first */
    struct statvfs vfs;
    if (fstatvfs(fd, &vfs) == 0 && (uint64_t)vfs.f_bavail * vfs.f_frsize / 32 < r)
        r = (uint64_t)vfs.f_bavail * vfs.f_frsize / 32;
    return r < (64u << 10) ? 64u << 10 : r > (4u << 20) ? 4u << 20 : r;
}

/* The log's bytes appended or claimed. Read claimed first: an append moves
 * its bytes to g_size before it takes them out of g_claimed, so a reader
 * never misses them (it may count them twice: room is never overcommitted). */
static uint64_t used(void)
{
    uint64_t claimed = __atomic_load_n(&g_claimed, __ATOMIC_ACQUIRE);
    return __atomic_load_n(&g_size, __ATOMIC_ACQUIRE) + claimed;
}

/* 1 if the reserve now covers `need` more bytes plus the floor. */
static int extend(int fd, uint64_t need)
{
    while (__atomic_exchange_n(&g_extending, 1, __ATOMIC_ACQUIRE))
        sched_yield(); /* another thread is extending: a few fallocate calls */
    uint64_t off = used();
    int ok = off + need + FLOOR <= __atomic_load_n(&g_reserved_end, __ATOMIC_ACQUIRE);
    if (ok) { /* that thread made room */
        __atomic_store_n(&g_extending, 0, __ATOMIC_RELEASE);
        return 1;
    }
    /* smaller and smaller, down to this record and the floor: on a nearly
     * full disk every record that still fits is written */
    uint64_t least = need + FLOOR;
    for (uint64_t r = reserve_bytes(fd) + least;; r = r / 4 > least ? r / 4 : least) {
        if (fallocate(fd, FALLOC_FL_KEEP_SIZE, (off_t)off, (off_t)r) == 0) {
            __atomic_store_n(&g_reserved_end, off + r, __ATOMIC_RELEASE);
            ok = 1;
            break;
        }
        if (errno == EOPNOTSUPP || errno == ENOSYS) {
            __atomic_store_n(&g_no_fallocate, 1, __ATOMIC_RELAXED);
            ok = 1;
            break;
        }
        if (r == least)
            break;
    }
    __atomic_store_n(&g_extending, 0, __ATOMIC_RELEASE);
    return ok;
}

void msp_rec_release_reserve(void)
{
    int fd = __atomic_load_n(&msp_rec_fd, __ATOMIC_ACQUIRE);
    uint64_t size = __atomic_load_n(&g_size, __ATOMIC_ACQUIRE);
    uint64_t end = __atomic_load_n(&g_reserved_end, __ATOMIC_ACQUIRE);
    if (fd >= 0 && end > size)
        fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)size,
                  (off_t)(end - size));
}

/* The kind of the record being built in b ({"k":"<kind>",...}), for messages. */
static const char *record_kind(const struct jbuf *b, size_t *n)
{
    static const char head[] = "{\"k\":\"";
    size_t h = sizeof head - 1;
    *n = 0;
    if (b->len <= h || memcmp(b->p, head, h) != 0)
        return "";
    const char *end = memchr(b->p + h, '"', b->len - h);
    *n = end ? (size_t)(end - (b->p + h)) : 0;
    return b->p + h;
}

/* Claims room for n bytes: within the reserve, extended as needed; anyhow
 * for the exit record (final), which may use the floor, or where the file
 * system cannot preallocate. 0 if there is no room but the floor. */
static int claim(int fd, uint64_t n, int final)
{
    for (;;) {
        uint64_t claimed = __atomic_add_fetch(&g_claimed, n, __ATOMIC_ACQ_REL);
        if (final || __atomic_load_n(&g_no_fallocate, __ATOMIC_RELAXED) ||
            __atomic_load_n(&g_size, __ATOMIC_ACQUIRE) + claimed + FLOOR <=
                __atomic_load_n(&g_reserved_end, __ATOMIC_ACQUIRE))
            return 1;
        __atomic_sub_fetch(&g_claimed, n, __ATOMIC_ACQ_REL);
        if (!extend(fd, n))
            return 0;
    }
}

static int close_claim(struct jbuf *b, int final)
{
    jb_raw(b, "}\n", 2);
    int fd = __atomic_load_n(&msp_rec_fd, __ATOMIC_ACQUIRE);
    if (b->oom) {
        msp_log_error("out of memory building a record; it is lost");
        return -1;
    }
    if (fd < 0)
        return -1;
    if (claim(fd, b->len, final))
        return 0;
    /* no room left but the floor: the exit record counts a tensor's */
    size_t kn = 0;
    const char *kind = record_kind(b, &kn);
    int tensor = kn == 6 && memcmp(kind, "tensor", 6) == 0;
    msp_log_error("no room for the record log: a %.*s record is held back%s", (int)kn, kind,
                  tensor ? " (the exit record counts its tensor, per round)" : "");
    return -1;
}

int msp_rec_close(struct jbuf *b)
{
    return close_claim(b, 0);
}

size_t msp_rec_append(const char *p, size_t n)
{
    /* O_APPEND: the kernel appends each write whole; a short write (disk
     * full) is finished by the loop so the lines stay intact. */
    int fd = __atomic_load_n(&msp_rec_fd, __ATOMIC_ACQUIRE);
    size_t done = 0;
    while (done < n) {
        ssize_t w = fd >= 0 ? write(fd, p + done, n - done) : -1;
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            msp_log_error("cannot append to the record log: %s",
                          fd >= 0 ? strerror(errno) : "it is closed");
            break;
        }
        __atomic_fetch_add(&g_size, (uint64_t)w, __ATOMIC_RELEASE);
        __atomic_sub_fetch(&g_claimed, (uint64_t)w, __ATOMIC_ACQ_REL);
        done += (size_t)w;
    }
    __atomic_sub_fetch(&g_claimed, n - done, __ATOMIC_ACQ_REL); /* not appended: its room goes */
    return done;
}

void msp_rec_landed(uint64_t records)
{
    MSP_COUNT(records, records);
    __atomic_store_n(&msp_proc_now()->last_activity_ns, msp_now_ns(), __ATOMIC_RELAXED);
}

static int commit(struct jbuf *b, int final)
{
    int rc = -1;
    if (close_claim(b, final) == 0 && msp_rec_append(b->p, b->len) == b->len) {
        rc = 0;
        msp_rec_landed(1);
    }
    jb_free(b);
    return rc;
}

int msp_rec_commit(struct jbuf *b)
{
    return commit(b, 0);
}

uint64_t msp_rec_size(void)
{
    return __atomic_load_n(&g_size, __ATOMIC_ACQUIRE);
}

void msp_rec_round(const char *key)
{
    struct jbuf b;
    msp_rec_begin(&b, "round");
    jb_kcstr(&b, "round", key);
    msp_rec_commit(&b);
}

int msp_rec_commit_final(struct jbuf *b)
{
    return commit(b, 1);
}
