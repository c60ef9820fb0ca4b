/* The writer threads: each takes items off its queue FIFO and writes the
 * tensor's file (or its link or stub), then its record (writer.h). */
#define _GNU_SOURCE
#include "writer.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "msprobe_atb/content_hash.h"

#include "binfile.h"
#include "dedup.h"
#include "dtype.h"
#include "filter.h"
#include "fsutil.h"
#include "recbatch.h"
#include "record.h"
#include "slot.h"
#include "util.h"

#define HEADER_CAP 4096

int msp_data_fd = -1;
unsigned msp_tree_epoch;

struct writer {
    int idx;
    struct msp_dedup *dedup;
    char dir[MSP_PATH_LEN]; /* cached open directory (consecutive tensors share it) */
    int dirfd;
    unsigned epoch;         /* msp_tree_epoch when dirfd was opened */
    struct msp_recbatch *batch; /* its records (recbatch.h) */
};

static struct writer g_writers[MSP_MAX_WRITERS];
static struct msp_queue *g_q; /* the queue they take items from */
static int g_nwriters;        /* how many started */

static const char *task_name(uint32_t task)
{
    if (task & MSP_TASK_OVERFLOW)
        return "all"; /* an overflowing kernel's tensors get data and stats */
    switch (task & (MSP_TASK_TENSOR | MSP_TASK_STATISTICS)) {
    case MSP_TASK_TENSOR: return "tensor";
    case MSP_TASK_STATISTICS: return "statistics";
    default: return "all";
    }
}

/* A record's format or dtype: -1 where ATB's string is no enum value (a
 * tensor lost for it). */
static int64_t enum_or_none(const char *s, size_t n)
{
    int v;
    return msp_enum_value(s, n, &v) ? v : -1;
}

/* What a record says became of its item: its `file`, and what the slot
 * counts for it once the record is in the log (appended). */
enum outcome { OUT_BIN, OUT_LINKED, OUT_STUB, OUT_STUB_REFUSED, OUT_NONE, OUT_LOST, OUT_PARAM,
               OUT_PARAM_LOST };
static const char *const outcome_file[] = {"bin", "linked", "stub", "stub", "none", "lost",
                                           "json", "lost"};

static int real_dir(const char *real, const char **base);

/* n records are in the log (landed) or not (no room on a full disk, or
 * their batch's write failed). In the log, their outcomes count. Not, their
 * tensors stay pending (the exit record counts them in their rounds), and no
 * row would ever name their files: each file is taken back and its tensor
 * counts in errors (a lost one is counted already); a lost param counts for
 * the exit record. */
static void appended(const struct msp_recbatch_entry *e, size_t n, int landed)
{
    uint64_t written = 0, bytes = 0, linked = 0, refused = 0, errors = 0, params = 0;
    for (size_t i = 0; i < n; i++) {
        int o = e[i].what;
        if (landed) {
            written += o <= OUT_NONE;
            bytes += o == OUT_BIN ? e[i].bytes : 0;
            linked += o == OUT_LINKED;
            refused += o == OUT_STUB_REFUSED;
            continue;
        }
        params += o == OUT_PARAM_LOST;
        if (o >= OUT_LOST)
            continue;
        const char *base;
        int dfd = o == OUT_NONE ? -1 : real_dir(e[i].path, &base);
        if (dfd >= 0) {
            unlinkat(dfd, base, 0);
            close(dfd);
        }
        errors++;
    }
    /* counted once for all of them: the slot's words are the host's too */
    struct msp_proc *p = msp_proc_now();
    const struct {
        uint64_t *word, n;
    } add[] = {{&p->tensors_written, written}, {&p->bytes_written, bytes},
               {&p->linked, linked},           {&p->link_refused, refused},
               {&p->errors, errors},           {&p->params_unrecorded, params}};
    for (size_t i = 0; i < sizeof add / sizeof *add; i++)
        if (add[i].n)
            __atomic_fetch_add(add[i].word, add[i].n, __ATOMIC_RELAXED);
}

/* The writer thread's batch its records join (NULL on other threads, and a
 * writer with no memory for one: each record is then appended at once). */
static __thread struct msp_recbatch *t_batch;

/* Appends a record: into the thread's batch, whose flush does `appended`,
 * or at once. 1 if it is in the log, or will be with its batch. */
static int commit(struct jbuf *b, const struct msp_recbatch_entry *e)
{
    int rc = msp_recbatch_commit(t_batch, b, e);
    if (rc <= 0)
        appended(e, 1, rc == 0);
    return rc >= 0;
}

/* The `tensor` record of outcome o. */
static int tensor_record(const struct msp_tensor_desc *d, enum outcome o, const char *alias,
                         const struct msp_stats *stats, const char *note)
{
    struct jbuf b;
    msp_rec_begin(&b, "tensor");
    jb_ku64(&b, "seq", d->seq);
    jb_kstr(&b, "path", d->path, d->pathn);
    jb_ki64(&b, "format", enum_or_none(d->format_s, d->formatn));
    jb_ki64(&b, "dtype", enum_or_none(d->dtype_s, d->dtypen));
    jb_kstr(&b, "dims", d->dims, d->dimsn);
    jb_ku64(&b, "size", d->size);
    jb_kname(&b, "task", task_name(d->task));
    jb_kname(&b, "file", outcome_file[o]);
    if (d->hashed) {
        char hex[17];
        snprintf(hex, sizeof hex, "%016llx", (unsigned long long)d->hash);
        jb_kcstr(&b, "hash", hex);
    }
    if (alias)
        jb_kcstr(&b, "alias", alias);
    jb_key(&b, "stats");
    if (stats)
        msp_stats_json(&b, stats);
    else
        jb_null(&b);
    if (note && note[0])
        jb_kcstr(&b, "note", note);
    struct msp_recbatch_entry e = {.path = d->path, .pathn = d->pathn, .what = o, .bytes = d->size};
    return commit(&b, &e);
}

void msp_tensor_lost(const struct msp_tensor_desc *d, const char *note)
{
    msp_log_error("tensor %.*s not written: %s", (int)(d->pathn > 300 ? 300 : d->pathn), d->path,
                  note);
    tensor_record(d, OUT_LOST, NULL, NULL, note);
}

static void desc_of(const struct msp_item *it, struct msp_tensor_desc *d)
{
    d->seq = it->seq;
    d->path = it->path;
    d->pathn = strlen(it->path);
    d->dims = it->dims;
    d->dimsn = strlen(it->dims);
    d->format_s = it->format_s;
    d->formatn = strlen(it->format_s);
    d->dtype_s = it->dtype_s;
    d->dtypen = strlen(it->dtype_s);
    d->size = it->size;
    d->task = it->task;
    d->hashed = 0;
    d->hash = 0;
}

static void param_record(uint64_t seq, const char *path, size_t pathn, enum outcome o,
                         const char *note)
{
    struct jbuf b;
    msp_rec_begin(&b, "param");
    jb_ku64(&b, "seq", seq);
    jb_kstr(&b, "path", path, pathn);
    jb_kname(&b, "file", outcome_file[o]);
    if (note)
        jb_kcstr(&b, "note", note);
    struct msp_recbatch_entry e = {.what = o}; /* no tensor: nothing pending */
    commit(&b, &e);
}

void msp_param_lost(uint64_t seq, const char *path, size_t pathn, const char *note)
{
    msp_log_error("%.*s not written: %s", (int)(pathn > 300 ? 300 : pathn), path, note);
    MSP_COUNT(params_lost, 1);
    param_record(seq, path, pathn, OUT_PARAM_LOST, note);
}

void msp_item_lost(const struct msp_item *it, const char *note)
{
    if (it->kind == MSP_ITEM_PARAM) {
        msp_param_lost(it->seq, it->path, strlen(it->path), note);
        return;
    }
    struct msp_tensor_desc d;
    desc_of(it, &d);
    msp_tensor_lost(&d, note);
}

/* Dedup (filter_level) applies: child ops are saved (save_child) and the task
 * writes data (write_tensor). */
static int dedups(const struct msp_item *it)
{
    return it->kind == MSP_ITEM_TENSOR && it->save_child && it->filter_level >= 1;
}

int msp_writer_for(const char *path, size_t n, int nwriters, int by_scope)
{
    size_t scope = 0;
    int slashes = 0;
    for (size_t i = 0; by_scope && i < n; i++)
        if (path[i] == '/' && ++slashes == 3) {
            scope = i;
            break;
        }
    if (!scope)
        scope = n;
    /* the hash's low bits barely depend on a path's last characters (outtensor1
     * and outtensor2 are alike mod 2): mixed first (MurmurHash3's finalizer) */
    uint64_t h = msp_fnv1a(MSP_FNV_SEED, path, scope);
    h = (h ^ (h >> 33)) * UINT64_C(0xff51afd7ed558ccd);
    h = (h ^ (h >> 33)) * UINT64_C(0xc4ceb9fe1a85ec53);
    h ^= h >> 33;
    return (int)(h % (uint64_t)(nwriters < 1 ? 1 : nwriters));
}

void msp_item_queue(struct msp_item *it, int adopt)
{
    if (adopt)
        msp_queue_adopt(g_q, it);
    int bound = dedups(it); /* its layer scope's writer dedups it */
    int w = msp_writer_for(it->path, strlen(it->path), g_nwriters, bound);
    /* counted in the slot before it is queued and until its record is
     * written, so the control plane never sees an empty queue too early */
    uint64_t cost = it->cost;
    MSP_COUNT(queue_depth, 1);
    MSP_COUNT(queue_bytes, cost);
    if ((bound ? msp_queue_push(g_q, w, it) : msp_queue_push_near(g_q, w, it)) == MSP_PUSH_OK)
        return;
    if (it->kind == MSP_ITEM_TENSOR)
        MSP_COUNT(errors, 1);
    msp_item_lost(it, "process is exiting");
    msp_queue_release(g_q, it);
    MSP_UNCOUNT(queue_depth, 1);
    MSP_UNCOUNT(queue_bytes, cost);
}

/* The open fd of the item's directory (cached per writer). */
static int dir_fd(struct writer *w, const char *dir)
{
    /* a new epoch: the data/ tree was removed and re-created (reattach.c),
     * the cached fd names a directory of the old one */
    unsigned epoch = __atomic_load_n(&msp_tree_epoch, __ATOMIC_ACQUIRE);
    if (w->dirfd >= 0 && w->epoch == epoch && strcmp(w->dir, dir) == 0)
        return w->dirfd;
    if (w->dirfd >= 0)
        close(w->dirfd);
    w->dirfd = -1;
    w->epoch = epoch;
    int root = __atomic_load_n(&msp_data_fd, __ATOMIC_ACQUIRE);
    if (root < 0) {
        errno = ENOENT;
        return -1;
    }
    int fd = msp_open_dir_at(root, dir, 1);
    if (fd >= 0) {
        snprintf(w->dir, sizeof w->dir, "%s", dir);
        w->dirfd = fd;
    }
    return fd;
}

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

/* The open directory of `real` (a path below data/) and, in *base, its
 * file name; -1 with errno if the directory cannot be opened. */
static int real_dir(const char *real, const char **base)
{
    int root = __atomic_load_n(&msp_data_fd, __ATOMIC_ACQUIRE);
    const char *slash = strrchr(real, '/');
    char dir[MSP_PATH_LEN];
    snprintf(dir, sizeof dir, "%.*s", slash ? (int)(slash - real) : 0, real);
    *base = slash ? slash + 1 : real;
    return msp_open_dir_at(root, dir, 0);
}

static int same_bytes(const char *real, void *arg)
{
    const struct cmp_ctx *c = arg;
    const char *base;
    int dfd = real_dir(real, &base);
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
    char header[HEADER_CAP];
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
    tensor_record(d, why_stub ? OUT_STUB_REFUSED : OUT_STUB, data, stats, note);
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
    int rdfd = real_dir(real, &base);
    if (rdfd < 0)
        return 0;
    int rc = msp_link_file_at(rdfd, base, dfd, name);
    close(rdfd);
    if (rc == 0) {
        tensor_record(d, OUT_LINKED, alias, stats, note);
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

/* Writes header + payload and, with hash, gives the payload's content hash.
 * An item whose header lies right before its payload (lead: a large tensor,
 * hooks.c) goes out from there with O_DIRECT, hashed first, and each piece
 * written goes back to the ring at once (a hook waiting for room waits for
 * bytes, never for the whole file); otherwise the
 * payload is hashed piece by piece just before each piece is written. */
/* What an O_DIRECT write has written goes back to the ring at once. */
static void give_back_written(void *arg, size_t done)
{
    struct msp_item *it = arg;
    uint64_t freed = msp_queue_release_front(g_q, it, it->data - it->lead + done);
    if (freed)
        MSP_UNCOUNT(queue_bytes, freed);
}

static int write_bin(struct msp_item *it, int dfd, const char *name, const char *header,
                     int hlen, uint64_t *hash)
{
    if (it->lead == (uint32_t)hlen) {
        if (hash)
            *hash = msp_content_hash(it->data, it->size);
        return msp_write_aligned_file_at(dfd, name, it->data - hlen, (size_t)hlen + it->size,
                                         give_back_written, it);
    }
    struct iovec iov[2] = {{(void *)header, (size_t)hlen}, {it->data, it->size}};
    return hash ? msp_write_hashed_file_at(dfd, name, iov, it->data, it->size, hash)
                : msp_write_file_at(dfd, name, iov, 2);
}

static void write_tensor(struct writer *w, struct msp_item *it, const char *dir, const char *name)
{
    struct msp_tensor_desc d;
    desc_of(it, &d);
    int want_bin = (it->task & (MSP_TASK_TENSOR | MSP_TASK_OVERFLOW)) != 0;
    /* statistics whatever the task, from the bytes in hand: the manifest and
     * statistic_extra.csv get them for a task tensor dump too (statistic.csv
     * shows them only where msProbe does, ingest decides by the task) */
    struct msp_stats st;
    char note[192] = "";
    const struct msp_stats *stats = NULL;
    if (it->stats_in_data)
        stats = (const struct msp_stats *)(const void *)it->data;
    else if (msp_stats_compute(it->dtype, it->data, it->size, &st, note, sizeof note) == 0)
        stats = &st;
    if (!want_bin) {
        /* the record is all there is of it: written only once the record is */
        tensor_record(&d, OUT_NONE, NULL, stats, note);
        return;
    }
    int dfd = dir_fd(w, dir);
    if (dfd < 0) {
        char why[MSP_PATH_LEN + 64];
        snprintf(why, sizeof why, "cannot create directory data/%s: %s", dir, strerror(errno));
        MSP_COUNT(errors, 1);
        msp_tensor_lost(&d, why);
        return;
    }
    char header[HEADER_CAP];
    int hlen = msp_bin_header(header, sizeof header, it->format_s, it->dtype_s, it->dims, it->size,
                              NULL);
    if (hlen <= 0) {
        MSP_COUNT(errors, 1);
        msp_tensor_lost(&d, "cannot write the .bin: header too long");
        return;
    }
    /* dedup only where msProbe applies filter_level */
    int dedup = dedups(it);
    /* the manifest's content hash: before the write where dedup's key starts
     * from it (or nothing is written), else while the payload is written */
    d.hashed = !it->stats_in_data;
    if (d.hashed && dedup)
        d.hash = msp_content_hash(it->data, it->size);
    if (dedup && it->filter_level >= 2 && is_kernel_tensor(dir)) {
        write_stub(&d, it, dfd, name, name, stats, note, NULL);
        return;
    }
    uint64_t hash = 0;
    if (dedup) {
        hash = msp_fnv1a(d.hash, header, (size_t)hlen);
        struct cmp_ctx c = {header, (size_t)hlen, it->data, it->size};
        const char *real = msp_dedup_find(w->dedup, it->path, hash, same_bytes, &c);
        if (real && write_link(&d, it, real, dfd, name, stats, note))
            return;
    }
    int rc = write_bin(it, dfd, name, header, hlen, d.hashed && !dedup ? &d.hash : NULL);
    if (rc != 0) {
        d.hashed = dedup; /* a write cut short hashed only part of the payload */
        char why[256];
        snprintf(why, sizeof why, "cannot write the .bin: %s", strerror(-rc));
        MSP_COUNT(errors, 1);
        msp_tensor_lost(&d, why);
        return;
    }
    if (tensor_record(&d, OUT_BIN, NULL, stats, note) && dedup)
        msp_dedup_add(w->dedup, it->path, hash);
}

static void write_param(struct writer *w, struct msp_item *it, const char *dir, const char *name)
{
    int dfd = dir_fd(w, dir);
    int rc = -errno;
    if (dfd >= 0) {
        struct iovec iov = {it->data, it->size};
        rc = msp_write_file_at(dfd, name, &iov, 1);
    }
    if (rc != 0) {
        char why[256];
        snprintf(why, sizeof why, "cannot write op_param.json: %s", strerror(-rc));
        msp_item_lost(it, why);
        return;
    }
    param_record(it->seq, it->path, strlen(it->path), OUT_PARAM, NULL);
}

static void set_device(const char *path)
{
    if (__atomic_load_n(&msp_proc_now()->device, __ATOMIC_RELAXED) != -1)
        return;
    char *end;
    long dev = strtol(path, &end, 10);
    if (end != path && *end == '_')
        __atomic_store_n(&msp_proc_now()->device, (int64_t)dev, __ATOMIC_RELAXED);
}

static void process(struct writer *w, struct msp_item *it)
{
    char dir[MSP_PATH_LEN];
    const char *slash = strrchr(it->path, '/');
    const char *name = slash ? slash + 1 : it->path;
    size_t dirn = slash ? (size_t)(slash - it->path) : 0;
    dirn = dirn < sizeof dir ? dirn : sizeof dir - 1;
    memcpy(dir, it->path, dirn);
    dir[dirn] = 0;
    set_device(it->path);
    if (it->kind == MSP_ITEM_PARAM)
        write_param(w, it, dir, name);
    else
        write_tensor(w, it, dir, name);
}

/* The items whose records wait in a writer's batch: they hold their
 * payloads until the flush, so they are bounded (a run of large ones must
 * not hold the budget). */
struct held {
    struct msp_item *head, **tail;
    uint64_t bytes;
};
#define HELD_MAX MSP_QUEUE_POP_BYTES

/* A flush of writer w's batch, then its held items: out of the slot's queue
 * gauges only now (the control plane reads an empty queue as every record in
 * the log), and done for the queue (the exit drain waits for that before the
 * exit record; the writer's head moves past them, to the lowest seq of `rest`,
 * the items of its run still to come, or of its list). */
static void finish(struct writer *w, struct held *h, const struct msp_item *rest)
{
    if (w->batch)
        msp_recbatch_flush(w->batch);
    uint64_t n = 0, bytes = 0;
    for (struct msp_item *it = h->head; it; it = it->next) {
        n++;
        bytes += it->cost;
    }
    MSP_UNCOUNT(queue_depth, n);
    MSP_UNCOUNT(queue_bytes, bytes);
    msp_queue_done(g_q, w->idx, h->head, rest);
    *h = (struct held){NULL, &h->head, 0};
}

static void *writer_main(void *arg)
{
    struct writer *w = arg;
    t_batch = w->batch;
    struct held h = {NULL, &h.head, 0};
    for (;;) {
        /* with records in its batch it does not wait: an empty list flushes them */
        struct msp_item *it = msp_queue_pop(g_q, w->idx, h.head == NULL);
        if (!it && !h.head)
            return NULL; /* the queue is closed */
        if (!it)
            finish(w, &h, NULL);
        for (struct msp_item *next; it; it = next) {
            next = it->next;
            it->next = NULL;
            process(w, it);
            *h.tail = it;
            h.tail = &it->next;
            h.bytes += it->cost;
            if (!w->batch || msp_recbatch_full(w->batch) || h.bytes >= HELD_MAX)
                finish(w, &h, next);
        }
    }
}

int msp_writers_start(struct msp_queue *q, int n)
{
    g_q = q;
    sigset_t all, old;
    sigfillset(&all);
    /* writer threads never take the host's signals */
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int started = 0;
    for (int i = 0; i < n && i < MSP_MAX_WRITERS; i++) {
        struct writer *w = &g_writers[i];
        w->idx = i;
        w->dirfd = -1;
        w->dir[0] = 0;
        if (!w->dedup)
            w->dedup = msp_dedup_new();
        if (w->batch)
            msp_recbatch_reset(w->batch); /* a forked child: the parent's records */
        else
            w->batch = msp_recbatch_new(appended);
        pthread_t t;
        int rc = pthread_create(&t, NULL, writer_main, w);
        if (rc != 0) {
            errno = rc;
            break;
        }
        /* named, so `top -H` (and a test that holds them) tells them from the host's */
        char name[16];
        snprintf(name, sizeof name, "msp-writer%d", i % 100);
        pthread_setname_np(t, name);
        pthread_detach(t);
        started++;
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    g_nwriters = started;
    return started;
}
