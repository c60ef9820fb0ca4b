/* The ingest kernel's per-process state: the rounds whose rows it holds,
 * their release and their hand-over in sequence order (ingest.h). */
#define _GNU_SOURCE
#include "ingest.h"

#include <stdlib.h>
#include <string.h>

#include "bytes.h"
#include "jsonline.h"
#include "manbatch.h"
#include "rows.h"

struct row {
    int64_t seq, t, offset, line;
    size_t at;            /* in the round's arena: its two lines, then its manifest cells */
    uint32_t stat_n, extra_n, man_n;
    uint8_t lost, released;
};

/* A row's place in the hand-over order: (seq, log offset), stably. */
struct order {
    int64_t seq, offset;
    size_t idx; /* in its round's rows */
};

struct round {
    char *key;
    size_t key_n;
    struct row *rows;
    size_t n_rows, cap_rows, released;
    struct bytes arena;
    /* since the last ing_rounds */
    int touched, tensors, said;
    int64_t params_lost, max_t;
};

struct ing_proc {
    int64_t start_ns;
    struct bytes root;
    struct round **rounds;
    size_t n_rounds, cap_rounds;
    struct round *hot; /* the round of the last record: records come in runs */
    struct bytes scratch, stat, extra, man, work;
    struct name_cache names;
    int64_t last_seq, dev;
    struct bytes last_round;
    /* ing_rounds' answer, ing_take's */
    ing_round *info;
    size_t cap_info;
    struct bytes keys, take_stat, take_extra, key_text;
    struct man_batch batch; /* the manifest rows taken */
    struct order *sorted, *merged; /* ing_take's order of the rows it hands over */
    size_t cap_sorted;
};

int ing_set_name(int kind, int64_t code, const char *name, int64_t n)
{
    return rows_set_name(kind, code, name, n);
}

ing_proc *ing_proc_new(int64_t start_ns)
{
    ing_proc *p = calloc(1, sizeof *p);
    if (p) {
        p->start_ns = start_ns;
        p->batch.start_ns = start_ns;
        p->last_seq = -1;
        p->dev = -1;
    }
    return p;
}

static void round_free(struct round *r)
{
    free(r->key);
    free(r->rows);
    bytes_free(&r->arena);
    free(r);
}

void ing_proc_free(ing_proc *p)
{
    if (!p)
        return;
    for (size_t i = 0; i < p->n_rounds; i++)
        round_free(p->rounds[i]);
    free(p->rounds);
    rows_cache_free(&p->names);
    struct bytes *all[] = {&p->root, &p->scratch, &p->stat, &p->extra, &p->man, &p->work,
                           &p->last_round, &p->keys, &p->take_stat, &p->take_extra,
                           &p->key_text};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        bytes_free(all[i]);
    free(p->info);
    free(p->sorted);
    free(p->merged);
    mb_free(&p->batch);
    free(p);
}

int ing_set_root(ing_proc *p, const char *root, int64_t n)
{
    p->root.len = 0;
    bytes_put(&p->root, root, (size_t)n);
    return p->root.oom ? -1 : 0;
}

static struct round *find_round(ing_proc *p, const char *key, size_t n)
{
    if (p->hot && p->hot->key_n == n && memcmp(p->hot->key, key, n) == 0)
        return p->hot;
    for (size_t i = 0; i < p->n_rounds; i++) {
        struct round *r = p->rounds[i];
        if (r->key_n == n && memcmp(r->key, key, n) == 0)
            return p->hot = r;
    }
    return NULL;
}

static struct round *round_of(ing_proc *p, const char *key, size_t n)
{
    struct round *r = find_round(p, key, n);
    if (r)
        return r;
    if (p->n_rounds == p->cap_rounds) {
        size_t cap = p->cap_rounds ? 2 * p->cap_rounds : 16;
        struct round **grown = realloc(p->rounds, cap * sizeof *grown);
        if (!grown)
            return NULL;
        p->rounds = grown;
        p->cap_rounds = cap;
    }
    r = calloc(1, sizeof *r);
    if (!r || !(r->key = malloc(n ? n : 1))) {
        free(r);
        return NULL;
    }
    memcpy(r->key, key, n);
    r->key_n = n;
    p->rounds[p->n_rounds++] = r;
    return p->hot = r;
}

/* What every record of a round tells about the process: its latest
 * selection (the record with the highest seq, writers finishing out of
 * order) and its device. */
static int note_record(ing_proc *p, const char *key, size_t n, int64_t seq, int has_seq)
{
    int64_t s = has_seq ? seq : -1;
    if (s >= p->last_seq) {
        p->last_seq = s;
        p->last_round.len = 0;
        bytes_put(&p->last_round, key, n);
    }
    if (p->dev < 0) {
        /* the "{dev}" of "{dev}_{pid}": digits only */
        const char *us = memchr(key, '_', n);
        size_t d = us ? (size_t)(us - key) : 0;
        const char *slash = memchr(key, '/', n);
        if (d && (!slash || us < slash) && d <= 18) {
            int64_t v = 0;
            size_t i = 0;
            for (; i < d && key[i] >= '0' && key[i] <= '9'; i++)
                v = v * 10 + (key[i] - '0');
            if (i == d)
                p->dev = v;
        }
    }
    return p->last_round.oom ? -1 : 0;
}

int ing_add_row(ing_proc *p, const char *key, int64_t key_n, int64_t seq, int32_t has_seq,
                int64_t t, int64_t offset, int64_t line, int32_t lost, const char *stat,
                int64_t stat_n, const char *extra, int64_t extra_n, const char *man,
                int64_t man_n)
{
    struct round *r = round_of(p, key, (size_t)key_n);
    if (!r)
        return -1;
    if (r->n_rows == r->cap_rows) {
        size_t cap = r->cap_rows ? 2 * r->cap_rows : 64;
        struct row *grown = realloc(r->rows, cap * sizeof *grown);
        if (!grown)
            return -1;
        r->rows = grown;
        r->cap_rows = cap;
    }
    struct row *row = &r->rows[r->n_rows];
    row->seq = has_seq ? seq : 0;
    row->t = t;
    row->offset = offset;
    row->line = line;
    row->at = r->arena.len;
    row->stat_n = (uint32_t)stat_n;
    row->extra_n = (uint32_t)extra_n;
    row->man_n = (uint32_t)man_n;
    row->lost = (uint8_t)(lost != 0);
    row->released = 0;
    bytes_put(&r->arena, stat, (size_t)stat_n);
    bytes_put(&r->arena, extra, (size_t)extra_n);
    bytes_put(&r->arena, man, (size_t)man_n);
    if (r->arena.oom)
        return -1;
    r->n_rows++;
    r->touched = r->tensors = 1;
    if (r->said)
        r->said = 2; /* a later request reuses the round number */
    if (t > r->max_t)
        r->max_t = t;
    return note_record(p, key, (size_t)key_n, seq, has_seq);
}

int ing_param(ing_proc *p, const char *key, int64_t key_n, int64_t seq, int32_t has_seq,
              int64_t t, int32_t lost)
{
    if (lost) {
        struct round *r = round_of(p, key, (size_t)key_n);
        if (!r)
            return -1;
        r->touched = 1;
        r->params_lost++;
        if (t > r->max_t)
            r->max_t = t;
    }
    return note_record(p, key, (size_t)key_n, seq, has_seq);
}

/* Releases the rows with offset below `below` or seq below `below_seq`. */
static void release_round(struct round *r, int64_t below, int64_t below_seq)
{
    for (size_t i = 0; i < r->n_rows; i++) {
        struct row *row = &r->rows[i];
        if (!row->released && (row->offset < below || row->seq < below_seq)) {
            row->released = 1;
            r->released++;
        }
    }
}

int ing_round_said(ing_proc *p, const char *key, int64_t key_n)
{
    struct round *r = round_of(p, key, (size_t)key_n);
    if (!r)
        return -1;
    /* every record of the round selected so far is above the round record */
    release_round(r, INT64_MAX, INT64_MIN);
    r->touched = 1;
    r->said = 1;
    return 0;
}

void ing_release(ing_proc *p, int64_t below)
{
    for (size_t i = 0; i < p->n_rounds; i++)
        release_round(p->rounds[i], below, INT64_MIN);
}

void ing_release_seq(ing_proc *p, int64_t below_seq)
{
    for (size_t i = 0; i < p->n_rounds; i++)
        release_round(p->rounds[i], INT64_MIN, below_seq);
}

static int blank(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (s[i] != ' ' && s[i] != '\t' && s[i] != '\r')
            return 0;
    return 1;
}

/* One parsed record: 1 taken, 0 for the Python path, -1 out of memory. */
static int take_record(ing_proc *p, const struct rec_view *v, int64_t offset, int64_t line)
{
    struct tensor_row row;
    if (JL_IS(&v->k, "tensor")) {
        struct row_ctx ctx = {p->root.p ? p->root.p : "", p->root.len, p->start_ns, &p->names,
                              &p->work};
        p->stat.len = p->extra.len = p->man.len = 0;
        if (!rows_tensor(v, &ctx, &p->scratch, &p->stat, &p->extra, &p->man, &row))
            return 0;
        return ing_add_row(p, row.at.path, (int64_t)row.at.key_n, row.seq, row.has_seq, row.t,
                           offset, line, row.lost, p->stat.p, (int64_t)p->stat.len, p->extra.p,
                           (int64_t)p->extra.len, p->man.p, (int64_t)p->man.len) == 0 ? 1 : -1;
    }
    if (JL_IS(&v->k, "param")) {
        int got = rows_param(v, &p->scratch, &row);
        if (got <= 0)
            return got == 0; /* names no round: nothing to note */
        return ing_param(p, row.at.path, (int64_t)row.at.key_n, row.seq, row.has_seq, row.t,
                         row.lost) == 0 ? 1 : -1;
    }
    if (JL_IS(&v->k, "round")) {
        struct path_key key;
        int got = rows_round(v, &p->scratch, &key);
        if (got <= 0)
            return got == 0;
        return ing_round_said(p, key.path, (int64_t)key.key_n) == 0 ? 1 : -1;
    }
    return 0;
}

int64_t ing_feed(ing_proc *p, const char *buf, int64_t len, int64_t offset, int64_t line,
                 int64_t *lines, int32_t *stopped)
{
    int64_t at = 0, first = line;
    *stopped = 0;
    struct rec_view v;
    while (at < len) {
        const char *s = buf + at;
        const char *nl = memchr(s, '\n', (size_t)(len - at));
        if (!nl)
            break;
        size_t n = (size_t)(nl - s);
        if (!blank(s, n)) {
            int took = jl_parse(s, n, &v) ? take_record(p, &v, offset + at, line) : 0;
            if (took <= 0) {
                *stopped = took < 0 ? -1 : 1;
                break;
            }
        }
        at += (int64_t)n + 1;
        line++;
    }
    *lines = line - first;
    return at;
}

int64_t ing_rounds(ing_proc *p, const ing_round **rounds, const char **keys)
{
    if (p->cap_info < p->n_rounds) {
        ing_round *grown = realloc(p->info, p->n_rounds * sizeof *grown);
        if (!grown)
            return -1;
        p->info = grown;
        p->cap_info = p->n_rounds;
    }
    p->keys.len = 0;
    size_t n = 0, kept = 0;
    for (size_t i = 0; i < p->n_rounds; i++) {
        struct round *r = p->rounds[i];
        if (r->touched || r->n_rows) {
            ing_round *o = &p->info[n++];
            o->key_at = (int64_t)p->keys.len;
            o->key_n = (int64_t)r->key_n;
            o->held = (int64_t)r->n_rows;
            o->params_lost = r->params_lost;
            o->max_t = r->max_t;
            o->tensors = r->tensors;
            o->said = r->said;
            bytes_put(&p->keys, r->key, r->key_n);
        }
        r->touched = r->tensors = r->said = 0;
        r->params_lost = r->max_t = 0;
        if (r->n_rows) {
            p->rounds[kept++] = r;
        } else {
            if (p->hot == r)
                p->hot = NULL;
            round_free(r);
        }
    }
    p->n_rounds = kept;
    *rounds = p->info;
    *keys = p->keys.p ? p->keys.p : "";
    return p->keys.oom ? -1 : (int64_t)n;
}

int64_t ing_held(ing_proc *p, const char *key, int64_t key_n)
{
    struct round *r = find_round(p, key, (size_t)key_n);
    return r ? (int64_t)r->n_rows : 0;
}

static inline int before(const struct order *x, const struct order *y)
{
    return x->seq < y->seq || (x->seq == y->seq && x->offset < y->offset);
}

/* Sorts a[0..n) by (seq, offset): natural runs merged bottom-up, so the usual
 * case (a few writers' runs, each already in order) takes a pass or two. */
static void sort_order(struct order *a, struct order *tmp, size_t n)
{
    for (;;) {
        size_t runs = 0, out = 0;
        for (size_t lo = 0; lo < n;) {
            size_t mid = lo + 1;
            while (mid < n && !before(&a[mid], &a[mid - 1]))
                mid++;
            size_t hi = mid;
            if (hi < n) {
                hi++;
                while (hi < n && !before(&a[hi], &a[hi - 1]))
                    hi++;
            }
            size_t i = lo, j = mid; /* merge a[lo..mid) and a[mid..hi) into tmp */
            while (i < mid && j < hi)
                tmp[out++] = before(&a[j], &a[i]) ? a[j++] : a[i++];
            while (i < mid)
                tmp[out++] = a[i++];
            while (j < hi)
                tmp[out++] = a[j++];
            lo = hi;
            runs++;
        }
        memcpy(a, tmp, n * sizeof *a);
        if (runs <= 1)
            return;
    }
}

int64_t ing_take(ing_proc *p, const char *key, int64_t key_n, int64_t base, int64_t after_seq,
                 ing_taken *out)
{
    memset(out, 0, sizeof *out);
    struct round *r = find_round(p, key, (size_t)key_n);
    if (!r || !r->released)
        return 0;
    if (p->cap_sorted < r->released) {
        struct order *grown = realloc(p->sorted, r->released * sizeof *grown);
        struct order *merged = grown ? realloc(p->merged, r->released * sizeof *merged) : NULL;
        if (grown)
            p->sorted = grown;
        if (!merged)
            return -1;
        p->merged = merged;
        p->cap_sorted = r->released;
    }
    size_t n = 0, kept = 0;
    for (size_t i = 0; i < r->n_rows; i++)
        if (r->rows[i].released)
            p->sorted[n++] = (struct order){r->rows[i].seq, r->rows[i].offset, i};
    sort_order(p->sorted, p->merged, n);
    p->take_stat.len = p->take_extra.len = p->key_text.len = 0;
    const int64_t number = rows_round_number(r->key, r->key_n);
    rows_text_form(&p->key_text, r->key, r->key_n); /* the manifest's strings are text */
    const char *slash = p->key_text.len ? memchr(p->key_text.p, '/', p->key_text.len) : NULL;
    const size_t part_n = slash ? (size_t)(slash - p->key_text.p) : p->key_text.len;
    for (size_t i = 0; i < n; i++) {
        const struct row *row = &r->rows[p->sorted[i].idx];
        const char *lines = r->arena.p + row->at;
        bytes_put(&p->take_stat, lines, row->stat_n);
        bytes_put(&p->take_extra, lines + row->stat_n, row->extra_n);
        if (mb_add(&p->batch, number, base + (int64_t)i, lines + row->stat_n + row->extra_n,
                   row->man_n, p->key_text.p, part_n) < 0)
            return -1;
        out->lost += row->lost;
    }
    if (p->take_stat.oom || p->take_extra.oom)
        return -1;
    /* the rows held on keep their lines, moved to the front of the arena */
    size_t to = 0;
    for (size_t i = 0; i < r->n_rows; i++) {
        struct row row = r->rows[i];
        if (row.released)
            continue;
        size_t len = row.stat_n + row.extra_n + row.man_n;
        memmove(r->arena.p + to, r->arena.p + row.at, len);
        row.at = to;
        to += len;
        r->rows[kept++] = row;
    }
    r->arena.len = to;
    r->n_rows = kept;
    r->released = 0;
    if (!kept && r->arena.cap > (64u << 10)) {
        bytes_free(&r->arena); /* a big round's memory goes back once it is taken */
        free(r->rows);
        r->rows = NULL;
        r->cap_rows = 0;
    }
    out->rows = (int64_t)n;
    out->first_seq = p->sorted[0].seq;
    out->last_seq = p->sorted[n - 1].seq;
    out->late = p->sorted[0].seq < after_seq;
    out->stat = p->take_stat.p;
    out->stat_n = (int64_t)p->take_stat.len;
    out->extra = p->take_extra.p;
    out->extra_n = (int64_t)p->take_extra.len;
    return (int64_t)n;
}

int64_t ing_manifest_rows(ing_proc *p)
{
    return (int64_t)p->batch.n;
}

int ing_manifest_export(ing_proc *p, struct ArrowSchema *schema, struct ArrowArray *array)
{
    return mb_export(&p->batch, schema, array);
}

void ing_get_state(ing_proc *p, ing_state *out)
{
    out->last_seq = p->last_seq;
    out->last_round = p->last_round.p ? p->last_round.p : "";
    out->last_round_n = (int64_t)p->last_round.len;
    out->dev = p->dev;
    out->held_rows = out->held_bytes = out->waiting_bytes = 0;
    out->min_offset = out->min_line = -1;
    for (size_t i = 0; i < p->n_rounds; i++) {
        const struct round *r = p->rounds[i];
        out->held_rows += (int64_t)r->n_rows;
        int64_t bytes = (int64_t)(r->arena.cap + r->cap_rows * sizeof *r->rows);
        out->held_bytes += bytes;
        if (r->n_rows > r->released)
            out->waiting_bytes += bytes / (int64_t)r->n_rows * (int64_t)(r->n_rows - r->released);
        /* a round's rows are in log order (fed in order, kept in order by a take) */
        if (r->n_rows && (out->min_offset < 0 || r->rows[0].offset < out->min_offset)) {
            out->min_offset = r->rows[0].offset;
            out->min_line = r->rows[0].line;
        }
    }
}
