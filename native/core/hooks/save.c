/* The saves, SaveTensor and SaveParam (save.h): the checks of what ATB
 * hands over, its count as pending, its copy into the queue or the flight
 * recorder's ring; the overflow task's part is overflow_task.c. */
#define _GNU_SOURCE
#include "save.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "attach.h"
#include "binfile.h"
#include "dtype.h"
#include "filter.h"
#include "fsutil.h"
#include "overflow_task.h"
#include "pending.h"
#include "recorder.h"
#include "ring_overwrite.h"
#include "snapshot.h"
#include "stats.h"
#include "tensorrec.h"
#include "util.h"
#include "writer.h"

#define MAX_DIMS_STR 1024

/* Element count of ATB's dims string ("" is a scalar: 1). -1 if malformed
 * or overflowing. */
static int64_t dims_numel(msp_sv d)
{
    if (d.n > MAX_DIMS_STR)
        return -1;
    uint64_t numel = 1, cur = 0;
    int digits = 0;
    for (size_t i = 0; i <= d.n; i++) {
        if (i < d.n && d.p[i] >= '0' && d.p[i] <= '9') {
            cur = cur * 10 + (uint64_t)(d.p[i] - '0');
            if (++digits > 15)
                return -1;
            continue;
        }
        if (i < d.n && d.p[i] != ',')
            return -1;
        if (d.n == 0)
            break;
        if (!digits)
            return -1;
        if (cur && numel > (UINT64_C(1) << 62) / cur)
            return -1;
        numel *= cur;
        cur = 0;
        digits = 0;
    }
    return (int64_t)numel;
}

/* NULL if the arguments describe a tensor we can write (its dtype's enum
 * value in *dtype_code), else why not. */
static const char *check_tensor(msp_sv format, msp_sv dtype, msp_sv dims, const void *host,
                                uint64_t size, msp_sv path, int *dtype_code, char *why,
                                size_t cap)
{
    const char *bad = msp_path_check(path.p, path.n);
    if (!bad)
        bad = msp_path_reserved(path.p, path.n);
    if (bad) {
        snprintf(why, cap, "refused path: %s", bad);
        return why;
    }
    int fmt_code;
    if (!msp_enum_value(format.p, format.n, &fmt_code) ||
        !msp_enum_value(dtype.p, dtype.n, dtype_code))
        return "format and dtype must be decimal enum values within the int range";
    int64_t numel = dims_numel(dims);
    if (numel < 0)
        return "dims must be a comma list of non-negative integers";
    if (!host && size > 0) {
        snprintf(why, cap, "null data pointer with size %llu", (unsigned long long)size);
        return why;
    }
    unsigned bits = msp_dtype_bits(*dtype_code);
    if (bits) {
        /* numel (< 2^62) times up to 128 bits can pass 2^64: such a tensor
         * cannot exist, whatever size ATB says it has */
        uint64_t nbits;
        if (__builtin_mul_overflow((uint64_t)numel, (uint64_t)bits, &nbits) ||
            nbits > UINT64_MAX - 7) {
            snprintf(why, cap, "dims %.*s x %u-bit dtype exceed 2^64 bytes",
                     (int)(dims.n > 64 ? 64 : dims.n), dims.p, bits);
            return why;
        }
        uint64_t want = (nbits + 7) / 8;
        if (want != size) {
            snprintf(why, cap, "size %llu does not match dims %.*s x %u-bit dtype (%llu bytes)",
                     (unsigned long long)size, (int)(dims.n > 64 ? 64 : dims.n), dims.p, bits,
                     (unsigned long long)want);
            return why;
        }
    }
    return NULL;
}

static char *put(char **cursor, msp_sv s)
{
    char *dst = *cursor;
    memcpy(dst, s.p, s.n);
    dst[s.n] = 0;
    *cursor += s.n + 1;
    return dst;
}

/* A selected item that msp_queue_reserve refused (rc): counted, recorded
 * as lost, logged. */
static void not_queued(int rc, enum msp_item_kind kind, uint64_t seq, msp_sv path,
                       const struct msp_tensor_desc *desc)
{
    const char *note = rc == MSP_PUSH_DROPPED ? "dropped: copy queue full (queue_full_policy drop)"
                       : rc == MSP_PUSH_CLOSED ? "process is exiting"
                       : kind == MSP_ITEM_PARAM ? "out of memory copying the param"
                                                : "out of memory copying the tensor";
    if (kind == MSP_ITEM_PARAM) {
        msp_param_lost(seq, path.p, path.n, note);
        return;
    }
    if (rc == MSP_PUSH_DROPPED)
        MSP_COUNT(drops, 1);
    else
        MSP_COUNT(errors, 1);
    msp_tensor_lost(desc, note);
}

/* An item's fields and strings (after the struct: `strings_len` bytes). */
static size_t strings_len(msp_sv format, msp_sv dtype, msp_sv dims, msp_sv path)
{
    return format.n + dtype.n + dims.n + path.n + 4;
}

static void fill_item(struct msp_item *it, const struct msp_snap *s, enum msp_item_kind kind,
                      uint64_t seq, msp_sv format, msp_sv dtype, int dtype_code, msp_sv dims,
                      msp_sv path)
{
    char *cur = (char *)(it + 1);
    it->kind = kind;
    it->task = s->cfg.task;
    it->save_child = s->cfg.save_child;
    it->filter_level = s->cfg.filter_level;
    it->seq = seq;
    it->path = put(&cur, path);
    it->format_s = put(&cur, format);
    it->dtype_s = put(&cur, dtype);
    it->dims = put(&cur, dims);
    it->pathn = (uint32_t)path.n; /* below MSP_PATH_LEN: msp_path_check */
    it->formatn = (uint32_t)format.n; /* these: decimal ints (check_tensor), or "" */
    it->dtypen = (uint32_t)dtype.n;
    it->dimsn = (uint32_t)dims.n; /* at most MAX_DIMS_STR */
    it->dtype = dtype_code;
}

/* A tensor this large is written with O_DIRECT (writer.c): its copy goes
 * into the ring behind its .bin header, the two starting on a block. */
#define DIO_MIN (UINT64_C(1) << 20)

/* Copies everything into a queue item (the caller frees its buffer as soon
 * as we return) and queues it, or hands it to the flight recorder (route).
 * With `stats` (the statistics task) only they are queued, not the payload:
 * the item says `size` bytes but holds a struct msp_stats. */
static void enqueue(const struct msp_snap *s, int route, enum msp_item_kind kind, uint64_t seq,
                    msp_sv format, msp_sv dtype, int dtype_code, msp_sv dims, const void *data,
                    uint64_t size, int add_newline, msp_sv path,
                    const struct msp_tensor_desc *desc /* tensors only */,
                    const struct msp_stats *stats)
{
    uint64_t payload = stats ? sizeof *stats : size + (add_newline ? 1 : 0);
    size_t strings = strings_len(format, dtype, dims, path);
    char header[MSP_DIO_ALIGN];
    int hlen = 0;
    if (kind == MSP_ITEM_TENSOR && !stats && route != MSP_ROUTE_HOLD && size >= DIO_MIN &&
        (s->cfg.task & (MSP_TASK_TENSOR | MSP_TASK_OVERFLOW)))
        hlen = msp_bin_header_n(header, sizeof header, format.p, format.n, dtype.p, dtype.n,
                                dims.p, dims.n, size);
    struct msp_item *it;
    int rc = route == MSP_ROUTE_HOLD
                 ? msp_item_heap_alloc(sizeof *it + strings, payload, 0, &it)
                 : msp_queue_reserve(&g_msp.q, sizeof *it + strings, payload,
                                     hlen > 0 ? (uint32_t)hlen : 0, s->cfg.queue_budget_bytes,
                                     s->cfg.queue_policy != MSP_POLICY_DROP, &it);
    if (rc != MSP_PUSH_OK) {
        if (route == MSP_ROUTE_HOLD)
            MSP_COUNT(rec_lost, kind == MSP_ITEM_TENSOR);
        else
            not_queued(rc, kind, seq, path, desc);
        return;
    }
    fill_item(it, s, kind, seq, format, dtype, dtype_code, dims, path);
    if (it->lead)
        memcpy(it->data - it->lead, header, it->lead);
    it->stats_in_data = stats != NULL;
    if (stats)
        memcpy(it->data, stats, sizeof *stats);
    else if (size)
        memcpy(it->data, data, size);
    if (add_newline)
        it->data[size] = '\n';
    it->size = stats ? size : payload;
    if (route == MSP_ROUTE_HOLD) {
        msp_recorder_hold(&s->cfg, it);
        return;
    }
    if (route == MSP_ROUTE_DIRECT)
        msp_recorder_scan(&s->cfg, it); /* a trigger inside a flush window is queued */
    msp_item_queue(it, 0);
}

/* The snapshot to save under, or NULL: ATB gates the calls with our
 * predicates, so anything that arrives after the first wake is taken. */
static struct msp_snap *save_snapshot(void)
{
    msp_ensure_attached();
    if (!g_msp.active || !__atomic_load_n(&g_msp.awake_seen, __ATOMIC_ACQUIRE))
        return NULL;
    return msp_snap_get();
}

static void save_selected(struct msp_snap *s, msp_sv format, msp_sv dtype, msp_sv dims,
                          const void *host, uint64_t size, msp_sv path)
{
    int route = s->cfg.rec_armed ? msp_recorder_route(&s->cfg, path.p, path.n) : 0;
    if (route == MSP_ROUTE_DROP)
        return;
    /* Selected by the filters, so it is counted even if it cannot be written:
     * every selected tensor ends as written, dropped or failed (errors).
     * A tensor the recorder holds is counted when it is flushed. */
    char why[256];
    int dtype_code = 0;
    const char *bad = check_tensor(format, dtype, dims, host, size, path, &dtype_code, why,
                                   sizeof why);
    if (bad && route == MSP_ROUTE_HOLD) {
        MSP_COUNT(rec_lost, 1);
        return;
    }
    /* pending before it takes its seq (pending.h); a held one takes a seq for
     * its place among the held, and its own when it is flushed (recorder.h) */
    uint64_t seq = route == MSP_ROUTE_HOLD ? msp_seq_take()
                                           : msp_pending_select(path.p, path.n, 1);
    struct msp_tensor_desc d = {.seq = seq, .path = path.p, .pathn = path.n,
                                .dims = dims.p, .dimsn = dims.n, .format_s = format.p,
                                .formatn = format.n, .dtype_s = dtype.p, .dtypen = dtype.n,
                                .size = size, .task = s->cfg.task};
    if (bad) {
        MSP_COUNT(errors, 1);
        msp_tensor_lost(&d, bad);
        return;
    }
    /* The statistics task writes no file: the pass runs here, on ATB's buffer,
     * so no copy of the tensor is made or held (an unsupported dtype is copied
     * and gets its note from the writer). Not with the flight recorder, whose
     * triggers scan the queued payload. */
    struct msp_stats st;
    const struct msp_stats *stats = NULL;
    char note[192];
    if (!route && (s->cfg.task & (MSP_TASK_TENSOR | MSP_TASK_OVERFLOW)) == 0 &&
        msp_stats_compute(dtype_code, host, size, &st, note, sizeof note) == 0)
        stats = &st;
    enqueue(s, route, MSP_ITEM_TENSOR, seq, format, dtype, dtype_code, dims, host, size, 0, path,
            &d, stats);
}

void msp_hook_save_tensor(msp_sv format, msp_sv dtype, msp_sv dims, const void *host,
                          uint64_t size, msp_sv path)
{
    struct msp_snap *s = save_snapshot();
    /* ATB also offers an op's outputs before it ran and its inputs after;
     * by default they are not selected, so nothing is copied or counted */
    if (!s || (!s->cfg.save_all_stages && !msp_default_stage(path.p, path.n)))
        return;
    uint64_t t0 = msp_mono_ns(); /* the host's time in our hands, for `status` and the bench */
    if (!msp_ovf_task(s) ||
        msp_ovf_on_save(s, dtype.p, dtype.n, host, size, path.p, path.n))
        save_selected(s, format, dtype, dims, host, size, path);
    MSP_COUNT(host_ns, msp_mono_ns() - t0);
}

void msp_hook_save_param(msp_sv param, msp_sv path)
{
    struct msp_snap *s = save_snapshot();
    if (!s || !msp_device_selected(&s->cfg, path.p, path.n))
        return;
    int route = s->cfg.rec_armed ? msp_recorder_route(&s->cfg, path.p, path.n) : 0;
    if (route == MSP_ROUTE_DROP)
        return;
    uint64_t seq = msp_seq_take();
    /* Params are not in the slot's tensor counters; a lost one is in the
     * record log (and the daemon's log) with why. */
    const char *bad = msp_path_check(path.p, path.n);
    if (!bad)
        bad = msp_path_reserved(path.p, path.n);
    if (bad) {
        if (route != MSP_ROUTE_HOLD)
            msp_param_lost(seq, path.p, path.n, bad);
        return;
    }
    msp_sv none = {"", 0};
    enqueue(s, route, MSP_ITEM_PARAM, seq, none, none, 0, none, param.p, param.n, 1, path, NULL,
            NULL);
}
