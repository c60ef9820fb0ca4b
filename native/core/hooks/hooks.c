/* Hook semantics (see docs/contracts.md): the hooks' answerers of the
 * predicates (hot.h), the reports and the saves. */
#define _GNU_SOURCE
#include "hooks.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "acl.h"
#include "attach.h"
#include "binfile.h"
#include "dirmemo.h"
#include "dtype.h"
#include "filter.h"
#include "fsutil.h"
#include "models.h"
#include "overflow_finding.h"
#include "pending.h"
#include "record.h"
#include "recorder.h"
#include "ring_overwrite.h"
#include "selcache.h"
#include "snapshot.h"
#include "stats.h"
#include "tensorrec.h"
#include "topo.h"
#include "util.h"
#include "writer.h"

#define MAX_DIMS_STR 1024

/* The snapshot for an awake answerer or hook: NULL if asleep again since
 * the hook's check. Before the process attached (at its start, in a forked
 * child, or with no memory for a snapshot yet) `awake` holds
 * MSP_HOT_UNATTACHED, so IsSaveTensorInSpecificDir, ReportOverflowKernel or
 * an answerer loaded just before a fork attaches here. */
static const struct msp_snap *awake_snapshot(void)
{
    const struct msp_snap *s = msp_hot_awake();
    if (__builtin_expect(s == MSP_HOT_UNATTACHED, 0)) {
        msp_slow_refresh();
        s = msp_hot_awake();
    }
    return s == MSP_HOT_UNATTACHED ? NULL : s; /* still: no memory for a snapshot */
}

static inline int overflow_task(const struct msp_snap *s)
{
    return (s->cfg.task & MSP_TASK_OVERFLOW) != 0;
}

/* Overflow task: the kernel ATB reported on this thread, waiting for its
 * `after` save, and its event's seq. */
static __thread char t_pending[512];
static __thread size_t t_pending_n;
static __thread uint64_t t_pending_seq;
/* The kernel dir whose `after` outputs belong to event t_event_seq: the one
 * ATB reported, once ATB asked for its dir, or the one the probe found. */
static __thread char t_event_dir[512];
static __thread size_t t_event_dirn;
static __thread uint64_t t_event_seq;

/* Fewer than overflow_nums events so far. */
static int events_left(const struct msp_snap *s)
{
    int64_t limit = s->cfg.overflow_nums;
    return limit < 0 || __atomic_load_n(&g_msp.overflow_events, __ATOMIC_RELAXED) < (uint64_t)limit;
}

/* The probe scans every kernel's outputs (overflow_check.probe_scan). */
static int probe_scans(const struct msp_snap *s)
{
    return s->cfg.overflow_scan && events_left(s);
}

static void event_dir(const char *dir, size_t n, uint64_t seq)
{
    t_event_dirn = 0;
    if (n < sizeof t_event_dir) {
        memcpy(t_event_dir, dir, n);
        t_event_dirn = n;
        t_event_seq = seq;
    }
}

/* The answerers whose answer depends on the call (hot.h). */

static __attribute__((noinline)) msp_bool count_selected(uint64_t count)
{
    const struct msp_snap *s = awake_snapshot();
    if (!s)
        return 0;
    return overflow_task(s) || msp_exec_selected(&s->cfg, count) ||
           (s->cfg.next_request && msp_models_next_count(&s->cfg, count));
}

/* A runner past the exec ranges (most of a long service's) is told no after
 * a compare (count_selected apart, so this saves no registers). */
static msp_bool count_in_range(uint64_t count)
{
    return count < MSP_HOT_LOAD(msp_hot.count_end) && count_selected(count);
}

/* The overflow task: after saves for the kernel ATB just reported, and for
 * every kernel while the probe scans. */
static msp_bool save_after(void)
{
    const struct msp_snap *s = awake_snapshot();
    return s && (!overflow_task(s) || t_pending_n > 0 || probe_scans(s));
}

static msp_bool overflow_check(void)
{
    const struct msp_snap *s = awake_snapshot();
    if (!s)
        return 0;
    if (!overflow_task(s))
        return msp_recorder_overflow_wanted(&s->cfg);
    return events_left(s);
}

/* Before the process attached, whichever predicate comes first (ATB's
 * context init asks IsOverflowCheck before any op) attaches, then answers
 * as the snapshot now says; still unattached (no memory), it says no. */
#define ATTACH_THEN_ANSWER(pred)                                                            \
    static msp_bool attach_then_##pred(void)                                                \
    {                                                                                       \
        msp_slow_refresh();                                                                  \
        msp_answerer now = MSP_HOT_LOAD(msp_hot.answer.pred);                               \
        return now != attach_then_##pred && now();                                          \
    }
ATTACH_THEN_ANSWER(data)
ATTACH_THEN_ANSWER(desc)
ATTACH_THEN_ANSWER(before)
ATTACH_THEN_ANSWER(after)
ATTACH_THEN_ANSWER(param)
ATTACH_THEN_ANSWER(overflow)

static msp_bool attach_then_count(uint64_t count)
{
    msp_slow_refresh();
    msp_count_answerer now = MSP_HOT_LOAD(msp_hot.answer.count);
    return now != attach_then_count && now(count);
}

/* Loading the library stores these pointers and does nothing else. */
__attribute__((constructor)) static void register_answerers(void)
{
    static const struct msp_hook_answerers answerers = {
        .unattached = {.data = attach_then_data, .desc = attach_then_desc,
                       .before = attach_then_before, .after = attach_then_after,
                       .param = attach_then_param, .overflow = attach_then_overflow,
                       .count = attach_then_count},
        .count = count_in_range,
        .after = save_after,
        .overflow = overflow_check};
    msp_hot_register(&answerers);
}

/* The device filter and exec_range "next" (a model's own rounds) on dir;
 * the overflow task: the kernel ATB just reported, and every kernel while
 * the probe scans. */
static __attribute__((noinline)) int in_dir_checked(const struct msp_snap *s, msp_sv dir)
{
    if (!msp_device_selected(&s->cfg, dir.p, dir.n))
        return 0;
    if (!overflow_task(s) && s->cfg.next_request) {
        /* a model's own rounds; an op of no known model, the config's ranges */
        uint64_t round;
        int64_t top;
        if (!msp_dir_round(dir.p, dir.n, &round, &top))
            return 0;
        int picked = msp_models_next_selected(&s->cfg, top, round);
        if (picked == 0 || (picked < 0 && !msp_exec_selected(&s->cfg, round)))
            return 0;
    }
    if (!overflow_task(s))
        return msp_selcache_op_selected(s->sel, s->sel_epoch, &s->cfg, dir.p, dir.n);
    if (t_pending_n && msp_kernel_dir_matches(t_pending, t_pending_n, dir.p, dir.n)) {
        t_pending_n = 0; /* this kernel's after save is now allowed, once */
        event_dir(dir.p, dir.n, t_pending_seq);
        return 1;
    }
    return probe_scans(s) && msp_kernel_dir(dir.p, dir.n);
}

/* Not in this thread's memo: the cache's verdict, kept in the memo. */
static __attribute__((noinline)) msp_bool in_dir_decided(const struct msp_snap *s, msp_sv dir)
{
    int verdict = msp_selcache_op_selected(s->sel, s->sel_epoch, &s->cfg, dir.p, dir.n);
    msp_dirmemo_put(s->sel_epoch, dir.p, dir.n, verdict);
    return verdict;
}

msp_bool msp_hook_in_dir_awake(msp_sv dir)
{
    const struct msp_snap *s = awake_snapshot();
    if (!s)
        return 0;
    /* most configs: the op's verdict alone, this thread's memo of it
     * (dirmemo.h) in front of the process's cache (selcache.h) */
    if (!s->sel_plain)
        return in_dir_checked(s, dir);
    int verdict = msp_dirmemo_get(s->sel_epoch, dir.p, dir.n);
    return verdict >= 0 ? verdict : in_dir_decided(s, dir);
}

/* The overflow task: an `overflow` record, ATB's report of `kernel` or the
 * probe's `finding` in the output `path`, if it is within overflow_nums
 * (then 1, and its seq in *seq). */
static int overflow_event(const struct msp_snap *s, msp_sv kernel, msp_sv path,
                          enum msp_ovf_finding finding, uint64_t *seq)
{
    uint64_t n = __atomic_fetch_add(&g_msp.overflow_events, 1, __ATOMIC_RELAXED);
    if (s->cfg.overflow_nums >= 0 && n >= (uint64_t)s->cfg.overflow_nums)
        return 0;
    MSP_COUNT(overflow_events, 1);
    *seq = msp_seq_take();
    struct jbuf b;
    msp_rec_begin(&b, "overflow");
    jb_ku64(&b, "seq", *seq);
    jb_kstr(&b, "kernel", kernel.p, kernel.n);
    jb_ki64(&b, "dev", msp_acl_device());
    if (finding != MSP_OVF_NONE) {
        jb_kcstr(&b, "finding", msp_ovf_finding_name(finding));
        jb_kstr(&b, "path", path.p, path.n);
    }
    msp_rec_commit(&b);
    return 1;
}

void msp_hook_report_overflow_kernel(msp_sv kernel)
{
    const struct msp_snap *s = awake_snapshot();
    if (s && !overflow_task(s) && msp_recorder_overflow_wanted(&s->cfg))
        msp_recorder_overflow(&s->cfg, kernel.p, kernel.n);
    if (!s || !overflow_task(s))
        return;
    uint64_t seq;
    if (overflow_event(s, kernel, (msp_sv){"", 0}, MSP_OVF_NONE, &seq) &&
        kernel.n < sizeof t_pending) {
        memcpy(t_pending, kernel.p, kernel.n);
        t_pending_n = kernel.n;
        t_pending_seq = seq;
    }
}

int msp_hook_report_graph_enable(void)
{
    msp_ensure_attached();
    return g_msp.active;
}

static void report_json(const char *kind, const char *name_key, msp_sv name, msp_sv json)
{
    msp_ensure_attached();
    if (!g_msp.active)
        return;
    struct jbuf b;
    msp_rec_begin(&b, kind);
    jb_kstr(&b, name_key, name.p, name.n);
    jb_ki64(&b, "dev", msp_acl_device());
    /* raw and unparsed: the control plane builds info/ from it and copes
     * with whatever it holds */
    jb_kstr(&b, "json", json.p, json.n);
    msp_rec_commit(&b);
}

void msp_hook_report_graph(msp_sv name, msp_sv json)
{
    report_json("graph", "name", name, json);
}

/* ATB-Models asks once per Model::Execute, after issuing every node. */
int msp_hook_is_report_topo(msp_sv model)
{
    msp_ensure_attached();
    if (!g_msp.active)
        return 0;
    const struct msp_snap *s = msp_hot_awake();
    msp_models_executed(s ? &s->cfg : NULL, model.p, model.n);
    return msp_topo_first(model.p, model.n);
}

void msp_hook_report_topo(msp_sv model, msp_sv json)
{
    report_json("topo", "model", model, json);
}

/* ---- SaveTensor / SaveParam ---- */

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
                      uint64_t seq, msp_sv format, msp_sv dtype, msp_sv dims, msp_sv path)
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
    it->dtype = 0; /* a param has none; a tensor's passed check_tensor */
    msp_enum_value(dtype.p, dtype.n, &it->dtype);
}

/* A tensor this large is written with O_DIRECT (writer.c): its copy goes
 * into the ring behind its .bin header, the two starting on a block. */
#define DIO_MIN (UINT64_C(1) << 20)

/* Copies everything into a queue item (the caller frees its buffer as soon
 * as we return) and queues it, or hands it to the flight recorder (route).
 * With `stats` (the statistics task) only they are queued, not the payload:
 * the item says `size` bytes but holds a struct msp_stats. */
static void enqueue(const struct msp_snap *s, int route, enum msp_item_kind kind, uint64_t seq,
                    msp_sv format, msp_sv dtype, msp_sv dims, const void *data, uint64_t size,
                    int add_newline, msp_sv path, const struct msp_tensor_desc *desc /* tensors only */,
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
                 ? msp_ring_item_alloc(sizeof *it + strings, payload, &it)
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
    fill_item(it, s, kind, seq, format, dtype, dims, path);
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
    enqueue(s, route, MSP_ITEM_TENSOR, seq, format, dtype, dims, host, size, 0, path, &d, stats);
}

/* The overflow task, on a tensor ATB saves: the tensors of an event's kernel
 * are saved, and each output of ATB's report says what it holds in its real
 * dtype (an `overflow_output` record: a bf16 output ATB read as an fp16 Inf
 * may be finite). While the probe scans, ATB saves every kernel: any other
 * output is read, and one holding NaN/Inf that ATB's scan misses is the
 * probe's event; otherwise ATB saves only what the predicates selected. */
static void overflow_save(struct msp_snap *s, msp_sv format, msp_sv dtype, msp_sv dims,
                          const void *host, uint64_t size, msp_sv path)
{
    size_t dirn = msp_after_output_dir(path.p, path.n);
    int code = -1;
    msp_enum_value(dtype.p, dtype.n, &code);
    int ours = t_event_dirn && path.n > t_event_dirn && path.p[t_event_dirn] == '/' &&
               memcmp(path.p, t_event_dir, t_event_dirn) == 0;
    if (!ours && s->cfg.overflow_scan) {
        if (!dirn || !msp_ovf_nonfinite(code, host, size))
            return;
        enum msp_ovf_finding f = msp_ovf_classify(code, host, size);
        uint64_t seq;
        if (f == MSP_OVF_NONE || !overflow_event(s, (msp_sv){"", 0}, path, f, &seq))
            return; /* ATB's scan reports it, or past overflow_nums */
        event_dir(path.p, dirn, seq);
    } else if (ours && dirn) {
        struct jbuf b;
        msp_rec_begin(&b, "overflow_output");
        jb_ku64(&b, "event", t_event_seq);
        jb_kstr(&b, "path", path.p, path.n);
        const char *name = msp_dtype_name(code);
        jb_kcstr(&b, "dtype", name ? name : "");
        jb_key(&b, "nonfinite");
        jb_bool(&b, msp_ovf_nonfinite(code, host, size));
        msp_rec_commit(&b);
    }
    save_selected(s, format, dtype, dims, host, size, path);
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
    if (overflow_task(s))
        overflow_save(s, format, dtype, dims, host, size, path);
    else
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
    enqueue(s, route, MSP_ITEM_PARAM, seq, none, none, none, param.p, param.n, 1, path, NULL,
            NULL);
}
