/* The writer threads: each takes items off its queue FIFO and writes the
 * tensor's file (its link or stub: dedup_link.c), then its record
 * (tensorrec.c), a batch at a time (writer.h). */
#define _GNU_SOURCE
#include "writer.h"

#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "binfile.h"
#include "datadir.h"
#include "dedup.h"
#include "dedup_link.h"
#include "dirchain.h"
#include "filter.h"
#include "fsutil.h"
#include "recbatch.h"
#include "record.h"
#include "slot.h"
#include "tensorrec.h"
#include "tensorscan.h"
#include "util.h"

struct writer {
    int idx;
    struct msp_dedup *dedup;
    struct msp_dirchain dirs; /* its open directories (consecutive items share them) */
    struct msp_recbatch *batch; /* its records (recbatch.h) */
};

static struct writer g_writers[MSP_MAX_WRITERS];
static struct msp_queue *g_q; /* the queue they take items from */
static int g_nwriters;        /* how many started */
static int g_record_writers;  /* of them, those records alone go to (msp_item_queue) */

int msp_writer_for(const char *path, size_t n, int nwriters, int by_scope)
{
    if (nwriters <= 1)
        return 0; /* no hash to take (records alone on a small machine) */
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
    int bound = msp_dedup_applies(it); /* its layer scope's writer dedups it */
    /* A record alone (a statistics item) is CPU work: it goes to the writers
     * that have a core beside the host's thread. Spread over 4 writers on 2
     * cores, tiny tensors' records cost 1.56 us each all told, each writer
     * time-sliced with its own wake-ups and batches; on 1 writer, 1.25 us
     * (record_cost bench). A file is mostly waiting for the disk: any writer. */
    int span = bound || msp_item_makes_file(it) ? g_nwriters : g_record_writers;
    int w = msp_writer_for(it->path, it->pathn, span, bound);
    /* counted in the slot before it is queued and until its record is
     * written, so the control plane never sees an empty queue too early */
    uint64_t cost = it->cost;
    MSP_COUNT(queue_depth, 1);
    MSP_COUNT(queue_bytes, cost);
    if ((bound ? msp_queue_push(g_q, w, it) : msp_queue_push_near(g_q, w, span, it)) ==
        MSP_PUSH_OK)
        return;
    if (it->kind == MSP_ITEM_TENSOR)
        MSP_COUNT(errors, 1);
    msp_item_lost(it, "process is exiting");
    msp_queue_release(g_q, it);
    MSP_UNCOUNT(queue_depth, 1);
    MSP_UNCOUNT(queue_bytes, cost);
}

/* The open fd of the item's directory (the writer's chain keeps it). */
static int dir_fd(struct writer *w, const char *dir)
{
    /* a new epoch: the data/ tree was removed and re-created (reattach.c),
     * the chain's fds name directories of the old one */
    unsigned epoch = __atomic_load_n(&msp_tree_epoch, __ATOMIC_ACQUIRE);
    int root = __atomic_load_n(&msp_data_fd, __ATOMIC_ACQUIRE);
    if (root < 0) {
        errno = ENOENT;
        return -1;
    }
    return msp_dirchain_open(&w->dirs, root, epoch, dir);
}

/* An item written from the ring with O_DIRECT (its header lies right before
 * its payload: a large tensor, save.c), a piece at a time: each piece is
 * scanned (statistics and hash, with scan) just before it goes, and goes back
 * to the ring as soon as it is written (a hook waiting for room waits for
 * bytes, never for the whole file). */
struct direct_write {
    struct msp_item *it;
    struct msp_scan *scan;
};

static void scan_ahead(void *arg, size_t off, size_t end)
{
    (void)off;
    struct direct_write *dw = arg;
    size_t lead = dw->it->lead;
    if (end > lead)
        msp_scan_through(dw->scan, (const unsigned char *)dw->it->data, end - lead);
}

static void give_back_written(void *arg, size_t done)
{
    struct direct_write *dw = arg;
    struct msp_item *it = dw->it;
    uint64_t freed = msp_queue_release_front(g_q, it, it->data - it->lead + done);
    if (freed)
        MSP_UNCOUNT(queue_bytes, freed);
}

/* Writes header + payload, scanning the payload first where scan is given
 * and it is not written from the ring piece by piece. */
static int write_bin(struct msp_item *it, int dfd, const char *name, const char *header,
                     int hlen, struct msp_scan *scan)
{
    if (it->lead == (uint32_t)hlen) {
        struct direct_write dw = {it, scan};
        struct msp_write_hooks hooks = {scan ? scan_ahead : NULL, give_back_written, &dw};
        return msp_write_aligned_file_at(dfd, name, it->data - hlen, (size_t)hlen + it->size,
                                         &hooks);
    }
    if (scan)
        msp_scan_through(scan, (const unsigned char *)it->data, it->size);
    struct iovec iov[2] = {{(void *)header, (size_t)hlen}, {it->data, it->size}};
    return msp_write_file_at(dfd, name, iov, 2);
}

static void write_tensor(struct writer *w, struct msp_item *it, const char *dir, const char *name)
{
    struct msp_tensor_desc d;
    msp_tensor_desc_of(it, &d);
    int want_bin = msp_item_makes_file(it);
    /* statistics whatever the task, from the bytes in hand: the manifest and
     * statistic_extra.csv get them for a task tensor dump too (statistic.csv
     * shows them only where msProbe does, ingest decides by the task) */
    struct msp_stats st;
    char note[192] = "";
    const struct msp_stats *stats = NULL;
    if (it->stats_in_data)
        stats = (const struct msp_stats *)(const void *)it->data;
    if (!want_bin) {
        if (!stats && msp_stats_compute(it->dtype, it->data, it->size, &st, note, sizeof note) == 0)
            stats = &st;
        /* the record is all there is of it: written only once the record is */
        msp_tensor_record(&d, MSP_OUT_NONE, NULL, stats, note);
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
    char header[MSP_BIN_HEADER_CAP];
    int hlen = msp_bin_header(header, sizeof header, it->format_s, it->dtype_s, it->dims, it->size,
                              NULL);
    if (hlen <= 0) {
        MSP_COUNT(errors, 1);
        msp_tensor_lost(&d, "cannot write the .bin: header too long");
        return;
    }
    /* dedup only where msProbe applies filter_level */
    int dedup = msp_dedup_applies(it);
    /* the statistics and the manifest's content hash in one pass: before the
     * write where dedup's key starts from the hash (or nothing is written),
     * else a piece at a time as the payload is written */
    d.hashed = !it->stats_in_data;
    struct msp_scan scan;
    if (d.hashed)
        msp_scan_begin(&scan, it->dtype, it->size, note, sizeof note);
    uint64_t key = 0;
    if (dedup) {
        if (d.hashed) {
            msp_scan_through(&scan, (const unsigned char *)it->data, it->size);
            stats = msp_scan_end(&scan, &st, &d.hash) == 0 ? &st : NULL;
        }
        if (msp_dedup_repeat(w->dedup, &d, it, dfd, dir, name, header, hlen, stats, note, &key))
            return;
    }
    int rc = write_bin(it, dfd, name, header, hlen, d.hashed ? &scan : NULL);
    if (rc != 0) {
        d.hashed = dedup; /* a write cut short scanned only part of the payload */
        char why[256];
        snprintf(why, sizeof why, "cannot write the .bin: %s", strerror(-rc));
        MSP_COUNT(errors, 1);
        msp_tensor_lost(&d, why);
        return;
    }
    if (d.hashed && !dedup)
        stats = msp_scan_end(&scan, &st, &d.hash) == 0 ? &st : NULL;
    if (msp_tensor_record(&d, MSP_OUT_BIN, NULL, stats, note) && dedup)
        msp_dedup_add(w->dedup, it->path, key);
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
    msp_param_record(it->seq, it->path, it->pathn, MSP_OUT_PARAM, NULL);
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
    const char *slash = memrchr(it->path, '/', it->pathn);
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
    msp_tensorrec_use_batch(w->batch);
    struct held h = {NULL, &h.head, 0};
    for (;;) {
        /* With records in its batch it naps once for more before they go, then
         * an empty list flushes them: a writer that keeps pace with the hooks
         * finds its list empty every few records, and a write(2) each time
         * (~1 us here) was a third of the record path. A record waits at most a
         * nap (1 ms) more for its batch. */
        struct msp_item *it = msp_queue_pop(g_q, w->idx, h.head ? MSP_POP_NAP : MSP_POP_WAIT);
        if (!it && !h.head)
            return NULL; /* the queue is closed */
        if (!it)
            finish(w, &h, NULL);
        /* the clocks are read once a run of records (a run of up to 64 takes
         * tens of us), and again after each file, which may take as long */
        uint64_t mono = 0;
        for (struct msp_item *next; it; it = next) {
            next = it->next;
            it->next = NULL;
            if (!mono) {
                mono = msp_mono_ns();
                msp_rec_stamp(msp_now_ns());
            }
            process(w, it);
            if (msp_item_makes_file(it))
                mono = 0;
            *h.tail = it;
            h.tail = &it->next;
            h.bytes += it->cost;
            if (!w->batch || msp_recbatch_due(w->batch, mono ? mono : msp_mono_ns()) ||
                h.bytes >= HELD_MAX)
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
        msp_dirchain_forget(&w->dirs);
        if (!w->dedup)
            w->dedup = msp_dedup_new();
        if (w->batch)
            msp_recbatch_reset(w->batch); /* a forked child: the parent's records */
        else
            w->batch = msp_recbatch_new(msp_tensorrec_appended);
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
    /* one per core beside the host's thread: at least one, at most all */
    cpu_set_t cpus;
    int beside = sched_getaffinity(0, sizeof cpus, &cpus) == 0 ? CPU_COUNT(&cpus) - 1 : 0;
    g_record_writers = beside < 1 ? 1 : beside < started ? beside : started;
    return started;
}
