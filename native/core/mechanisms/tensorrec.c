/* The records of the writers' items: `tensor` and `param` records, what the
 * slot counts once they are in the log (tensorrec.h). */
#define _GNU_SOURCE
#include "tensorrec.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "datadir.h"
#include "dtype.h"
#include "filter.h"
#include "record.h"
#include "slot.h"
#include "util.h"

static struct msp_name task_name(uint32_t task)
{
    static const struct msp_name tensor = MSP_NAME("tensor"), statistics = MSP_NAME("statistics"),
                                all = MSP_NAME("all");
    if (task & MSP_TASK_OVERFLOW)
        return all; /* an overflowing kernel's tensors get data and stats */
    switch (task & (MSP_TASK_TENSOR | MSP_TASK_STATISTICS)) {
    case MSP_TASK_TENSOR: return tensor;
    case MSP_TASK_STATISTICS: return statistics;
    default: return all;
    }
}

/* A record's format or dtype: -1 where ATB's string is no enum value (a
 * tensor lost for it). */
static int64_t enum_or_none(const char *s, size_t n)
{
    int v;
    return msp_enum_value(s, n, &v) ? v : -1;
}

/* Each outcome's `file` (tensorrec.h). */
static const struct msp_name outcome_file[] = {
    MSP_NAME("bin"),  MSP_NAME("linked"), MSP_NAME("stub"), MSP_NAME("stub"),
    MSP_NAME("none"), MSP_NAME("lost"),   MSP_NAME("json"), MSP_NAME("lost")};

/* n records are in the log (landed) or not (no room on a full disk, or
 * their batch's write failed). In the log, their outcomes count. Not, their
 * tensors stay pending (the exit record counts them in their rounds), and no
 * row would ever name their files: each file is taken back and its tensor
 * counts in errors (a lost one is counted already); a lost param counts for
 * the exit record. */
void msp_tensorrec_appended(const struct msp_recbatch_entry *e, size_t n, int landed)
{
    uint64_t written = 0, bytes = 0, linked = 0, refused = 0, errors = 0, params = 0;
    for (size_t i = 0; i < n; i++) {
        int o = e[i].what;
        if (landed) {
            written += o <= MSP_OUT_NONE;
            bytes += o == MSP_OUT_BIN ? e[i].bytes : 0;
            linked += o == MSP_OUT_LINKED;
            refused += o == MSP_OUT_STUB_REFUSED;
            continue;
        }
        params += o == MSP_OUT_PARAM_LOST;
        if (o >= MSP_OUT_LOST)
            continue;
        const char *base;
        int dfd = o == MSP_OUT_NONE ? -1 : msp_datadir_open_parent(e[i].path, &base);
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

void msp_tensorrec_use_batch(struct msp_recbatch *batch)
{
    t_batch = batch;
}

/* Appends a record: into the thread's batch, whose flush does msp_tensorrec_appended,
 * or at once. 1 if it is in the log, or will be with its batch. */
static int commit(struct jbuf *b, const struct msp_recbatch_entry *e)
{
    int rc = msp_recbatch_commit(t_batch, b, e);
    if (rc <= 0)
        msp_tensorrec_appended(e, 1, rc == 0);
    return rc >= 0;
}

/* The `tensor` record of outcome o. */
int msp_tensor_record(const struct msp_tensor_desc *d, enum msp_outcome o, const char *alias,
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
    struct msp_name task = task_name(d->task);
    jb_kname_n(&b, "task", task.s, task.n);
    jb_kname_n(&b, "file", outcome_file[o].s, outcome_file[o].n);
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
    msp_tensor_record(d, MSP_OUT_LOST, NULL, NULL, note);
}

void msp_tensor_desc_of(const struct msp_item *it, struct msp_tensor_desc *d)
{
    d->seq = it->seq;
    d->path = it->path;
    d->pathn = it->pathn;
    d->dims = it->dims;
    d->dimsn = it->dimsn;
    d->format_s = it->format_s;
    d->formatn = it->formatn;
    d->dtype_s = it->dtype_s;
    d->dtypen = it->dtypen;
    d->size = it->size;
    d->task = it->task;
    d->hashed = 0;
    d->hash = 0;
}

void msp_param_record(uint64_t seq, const char *path, size_t pathn, enum msp_outcome o,
                         const char *note)
{
    struct jbuf b;
    msp_rec_begin(&b, "param");
    jb_ku64(&b, "seq", seq);
    jb_kstr(&b, "path", path, pathn);
    jb_kname_n(&b, "file", outcome_file[o].s, outcome_file[o].n);
    if (note)
        jb_kcstr(&b, "note", note);
    struct msp_recbatch_entry e = {.what = o}; /* no tensor: nothing pending */
    commit(&b, &e);
}

void msp_param_lost(uint64_t seq, const char *path, size_t pathn, const char *note)
{
    msp_log_error("%.*s not written: %s", (int)(pathn > 300 ? 300 : pathn), path, note);
    MSP_COUNT(params_lost, 1);
    msp_param_record(seq, path, pathn, MSP_OUT_PARAM_LOST, note);
}

void msp_item_lost(const struct msp_item *it, const char *note)
{
    if (it->kind == MSP_ITEM_PARAM) {
        msp_param_lost(it->seq, it->path, it->pathn, note);
        return;
    }
    struct msp_tensor_desc d;
    msp_tensor_desc_of(it, &d);
    msp_tensor_lost(&d, note);
}
