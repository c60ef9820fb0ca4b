/* A tensor record's statistic.csv and statistic_extra.csv lines and its
 * manifest cells (rows.h), formatted as the Python path formats them. Where this code
 * meets a value the Python path would turn into text by rules it does not
 * carry (a float() of an arbitrary string, a name starting like a formula
 * that is no number in Python's eyes, complex statistics, ...), it declines
 * and the record goes to the Python path. */
#define _GNU_SOURCE
#include "rows.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "shortest.h"
#include "utf8.h"

#define NA "N/A"
#define NAMES 256

static char *g_names[2][NAMES]; /* dtype, format names by code */

int rows_set_name(int kind, int64_t code, const char *name, int64_t n)
{
    if (kind < 0 || kind > 1 || code < 0 || code >= NAMES || n < 0)
        return -1;
    char *copy = malloc((size_t)n + 1);
    if (!copy)
        return -1;
    memcpy(copy, name, (size_t)n);
    copy[n] = 0;
    free(g_names[kind][code]);
    g_names[kind][code] = copy;
    return 0;
}

/* ---- cells (csvfmt.safe_cell, then the csv module's minimal quoting) ---- */

static int is_space(unsigned char c)
{
    return c == ' ' || (c >= '\t' && c <= '\r') || (c >= 0x1c && c <= 0x1f);
}

static int is_digit(unsigned char c)
{
    return c >= '0' && c <= '9';
}

/* digit (["_"] digit)*, Python's rule for the digits of a float literal;
 * returns the end, or NULL when there is no such run at p. */
static const char *digit_part(const char *p, const char *end)
{
    if (p >= end || !is_digit((unsigned char)*p))
        return NULL;
    p++;
    while (p < end) {
        if (is_digit((unsigned char)*p)) {
            p++;
        } else if (*p == '_' && p + 1 < end && is_digit((unsigned char)p[1])) {
            p += 2;
        } else {
            break;
        }
    }
    return p;
}

static int word_is(const char *p, const char *end, const char *word)
{
    size_t n = strlen(word);
    if ((size_t)(end - p) != n)
        return 0;
    for (size_t i = 0; i < n; i++)
        if ((p[i] | 0x20) != word[i])
            return 0;
    return 1;
}

/* Python's float(cell) succeeds: 1, fails: 0, cannot say (non-ASCII, which
 * Python's own rules for Unicode digits and spaces would judge): -1. */
static int python_float_ok(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)s[i] >= 0x80)
            return -1;
    const char *p = s, *end = s + n;
    while (p < end && is_space((unsigned char)*p))
        p++;
    while (end > p && is_space((unsigned char)end[-1]))
        end--;
    if (p < end && (*p == '+' || *p == '-'))
        p++;
    if (word_is(p, end, "inf") || word_is(p, end, "infinity") || word_is(p, end, "nan"))
        return 1;
    const char *q = digit_part(p, end);
    int digits = q != NULL;
    if (q)
        p = q;
    if (p < end && *p == '.') {
        p++;
        q = digit_part(p, end);
        if (q) {
            digits = 1;
            p = q;
        }
    }
    if (!digits)
        return 0;
    if (p < end && (*p == 'e' || *p == 'E')) {
        p++;
        if (p < end && (*p == '+' || *p == '-'))
            p++;
        q = digit_part(p, end);
        if (!q)
            return 0;
        p = q;
    }
    return p == end;
}

/* csvfmt's formula starts: such a cell gets a leading apostrophe unless it is a number. */
static int formula_start(char c)
{
    return c == '=' || c == '+' || c == '-' || c == '@' || c == '\t' || c == '\r';
}

/* No byte that makes a cell other than its plain text (quoting, escapes):
 * ASCII without a control character, a comma, a quote or a backslash (a long
 * cell is looked at 8 bytes at a time). */
static const unsigned char SPECIAL[256] = {
    [0 ... 0x1f] = 1, [','] = 1, ['"'] = 1, ['\\'] = 1, [0x80 ... 0xff] = 1,
};

static int plain(const char *s, size_t n)
{
    if (n >= 16)
        return plain_run(s, n, ',', '"', '\\') == n;
    for (size_t i = 0; i < n; i++)
        if (SPECIAL[(unsigned char)s[i]])
            return 0;
    return 1;
}

/* Appends one CSV cell; 0 when the Python path must judge it. */
static int cell(struct bytes *b, const char *s, size_t n, int first)
{
    if (!first)
        bytes_putc(b, ',');
    if (!n || (!formula_start(s[0]) && plain(s, n))) {
        bytes_put(b, s, n); /* the common cell: nothing to quote or judge */
        return 1;
    }
    int formula = n && formula_start(s[0]);
    if (formula) {
        int num = python_float_ok(s, n);
        if (num < 0)
            return 0;
        formula = !num;
    }
    int quote = 0;
    for (size_t i = 0; i < n && !quote; i++)
        quote = s[i] == ',' || s[i] == '"' || s[i] == '\r' || s[i] == '\n';
    if (quote)
        bytes_putc(b, '"');
    if (formula)
        bytes_putc(b, '\'');
    if (!quote) {
        bytes_put(b, s, n);
    } else {
        for (size_t i = 0; i < n; i++) {
            if (s[i] == '"')
                bytes_putc(b, '"');
            bytes_putc(b, s[i]);
        }
        bytes_putc(b, '"');
    }
    return 1;
}

static int cell_str(struct bytes *b, const char *s, int first)
{
    return cell(b, s, strlen(s), first);
}

/* ---- numbers (csvfmt.number, manifest._float / _count) ---- */

/* A double from a JSON float literal, exactly as Python's float() reads it. */
static int literal_double(const struct jv *v, double *out)
{
    char tmp[64];
    if (v->n >= sizeof tmp)
        return 0;
    memcpy(tmp, v->p, v->n);
    tmp[v->n] = 0;
    *out = strtod(tmp, NULL);
    return 1;
}

static int hex_digit(char c)
{
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* The shim's hex form of a finite double ("-0x1.8p+3"), float.fromhex's
 * value; 0 for anything else. */
static int hex_double(const char *p, size_t n, double *out)
{
    const char *end = p + n;
    int neg = 0;
    if (p < end && (*p == '-' || *p == '+'))
        neg = *p++ == '-';
    if (end - p < 4 || p[0] != '0' || p[1] != 'x')
        return 0;
    p += 2;
    uint64_t mant = 0;
    int digits = 0, frac = 0, seen_dot = 0;
    for (; p < end && *p != 'p'; p++) {
        if (*p == '.' && !seen_dot) {
            seen_dot = 1;
            continue;
        }
        int d = hex_digit(*p);
        if (d < 0 || ++digits > 14)
            return 0;
        mant = mant << 4 | (uint64_t)d;
        frac += seen_dot;
    }
    if (!digits || p >= end || mant >> 53)
        return 0;
    p++; /* 'p' */
    int eneg = 0;
    if (p < end && (*p == '-' || *p == '+'))
        eneg = *p++ == '-';
    if (p >= end || end - p > 5)
        return 0;
    int e = 0;
    for (; p < end; p++) {
        if (!is_digit((unsigned char)*p))
            return 0;
        e = e * 10 + (*p - '0');
    }
    double v = ldexp((double)mant, (eneg ? -e : e) - 4 * frac);
    if (isinf(v))
        return 0; /* float.fromhex raises: the Python path prints the text */
    *out = neg ? -v : v;
    return 1;
}

/* Non-finite values the shim writes as strings. */
static int nonfinite(const struct jv *v, double *out)
{
    if (JL_IS(v, "nan") || JL_IS(v, "-nan"))
        *out = NAN;
    else if (JL_IS(v, "inf") || JL_IS(v, "+inf"))
        *out = INFINITY;
    else if (JL_IS(v, "-inf"))
        *out = -INFINITY;
    else
        return 0;
    return 1;
}

enum { NUM_NONE, NUM_INT, NUM_DOUBLE };

/* A statistics value as a number: NUM_INT (*i), NUM_DOUBLE (*d), NUM_NONE
 * (missing or null); -1 when the Python path must read it. */
static int stat_value(const struct jv *v, int64_t *i, double *d)
{
    switch (v->type) {
    case JV_MISSING: case JV_NULL: return NUM_NONE;
    case JV_INT: *i = v->i; return NUM_INT;
    case JV_FLOAT: return literal_double(v, d) ? NUM_DOUBLE : -1;
    case JV_STR:
        if (!v->escaped && (hex_double(v->p, v->n, d) || nonfinite(v, d)))
            return NUM_DOUBLE;
        return -1;
    default: return -1; /* booleans, complex pairs, objects */
    }
}

/* csvfmt.number of a value already read: ints as ints, doubles in `layout`
 * (statistic.csv's positional, statistic_extra.csv's repr). */
static void number_text(int kind, int64_t i, double d, enum ing_layout layout, char *out,
                        size_t *n)
{
    if (kind == NUM_INT) {
        struct bytes tmp = {out, 0, ING_NUMBER_MAX, 0};
        bytes_i64(&tmp, i);
        *n = tmp.len;
    } else {
        *n = ing_shortest(d, layout, out); /* "nan" for every NaN */
    }
}

/* A statistic read once for both files: its CSV text (csvfmt.number) and,
 * for the manifest's double column, its value as a double (manifest._float). */
struct stat_num {
    int kind;
    char text[ING_NUMBER_MAX];
    size_t n;
    double value;
};

static int read_stat(const struct jv *v, enum ing_layout layout, struct stat_num *out)
{
    int64_t i = 0;
    double d = 0;
    out->kind = stat_value(v, &i, &d);
    if (out->kind == NUM_NONE || out->kind < 0)
        return out->kind >= 0;
    number_text(out->kind, i, d, layout, out->text, &out->n);
    out->value = out->kind == NUM_INT ? (double)i : d;
    return 1;
}

/* A CSV cell of a statistic (csvfmt._stat): N/A when absent. A number's text
 * is a plain cell (a leading '-' makes it no formula: it is a number). */
static int stat_text_cell(struct bytes *b, const struct stat_num *num, int present, int first)
{
    if (!first)
        bytes_putc(b, ',');
    if (!present || num->kind == NUM_NONE)
        bytes_put(b, NA, 3);
    else
        bytes_put(b, num->text, num->n);
    return 1;
}

/* A cell of statistic_extra.csv (sequence and counts: ints where the shim wrote them). */
static int extra_stat_cell(struct bytes *b, const struct jv *v, int present, int first)
{
    struct stat_num num;
    if (present && !read_stat(v, ING_REPR, &num))
        return 0;
    return stat_text_cell(b, &num, present, first);
}

/* ---- the manifest's cells: ingest.h's ing_man_head and its strings ---- */

void rows_text_form(struct bytes *b, const char *s, size_t n)
{
    static const char hex[] = "0123456789abcdef";
    if (plain(s, n) || !bytes_reserve(b, 4 * n)) { /* the slow loop keeps , and " */
        bytes_put(b, s, n); /* ASCII without a backslash: itself */
        return;
    }
    const unsigned char *p = (const unsigned char *)s, *end = p + n;
    while (p < end) {
        size_t l = *p == '\\' ? 0 : utf8_len(p, end);
        if (!l) {
            char esc[4] = {'\\', 'x', hex[*p >> 4], hex[*p & 15]};
            bytes_put(b, esc, 4);
            p++;
        } else {
            bytes_put(b, p, l);
            p += l;
        }
    }
}

/* The next string cell (a string column in ING_MS order): its length and its
 * text form; absent (null) when s is NULL. */
static void man_str(struct bytes *b, ing_man_head *head, int column, const char *s, size_t n)
{
    size_t at = b->len;
    uint32_t len = 0;
    bytes_put(b, &len, sizeof len);
    if (!s)
        return;
    head->valid |= 1u << (12 + column);
    rows_text_form(b, s, n);
    if (b->oom)
        return;
    len = (uint32_t)(b->len - at - sizeof len);
    memcpy(b->p + at, &len, sizeof len);
}

/* manifest._count: an int, else null. */
static void man_count(ing_man_head *head, int column, const struct jv *v)
{
    if (v->type == JV_INT) {
        head->i[column] = v->i;
        head->valid |= 1u << column;
    }
}

/* ---- paths ---- */

struct span {
    const char *p;
    size_t n;
};

#define MAX_PARTS 256

struct tensor_path {
    struct span parts[MAX_PARTS];
    size_t n_parts;
    size_t first_op, n_ops; /* parts[first_op .. first_op + n_ops) are "{id}_{Name}" */
    struct span stage, io, index;
};

static int span_is(struct span s, const char *lit)
{
    size_t n = strlen(lit);
    return s.n == n && memcmp(s.p, lit, n) == 0;
}

/* csvfmt.parse_tensor_path for the paths both sides split alike: no empty
 * component (no leading, trailing or double '/'). 1: parsed; 0: a path that
 * names no tensor; -1: for the Python path. */
static int split_path(const char *p, size_t n, struct tensor_path *tp)
{
    if (n == 0 || p[0] == '/' || p[n - 1] == '/')
        return -1;
    tp->n_parts = 0;
    size_t start = 0;
    for (size_t i = 0; i <= n; i++) {
        if (i < n && p[i] != '/')
            continue;
        if (i == start || tp->n_parts == MAX_PARTS)
            return -1;
        struct span s = {p + start, i - start};
        if (span_is(s, ".") || span_is(s, ".."))
            return 0;
        tp->parts[tp->n_parts++] = s;
        start = i + 1;
    }
    if (tp->n_parts < 3)
        return 0;
    tp->first_op = 2;
    tp->n_ops = tp->n_parts - 3;
    tp->stage = (struct span){"", 0};
    if (tp->n_ops) {
        struct span last = tp->parts[tp->first_op + tp->n_ops - 1];
        if (span_is(last, "before") || span_is(last, "after")) {
            tp->stage = last;
            tp->n_ops--;
        }
    }
    struct span file = tp->parts[tp->n_parts - 1];
    struct span rest = file;
    if (file.n >= 8 && memcmp(file.p, "intensor", 8) == 0) {
        tp->io = (struct span){"input", 5};
        rest = (struct span){file.p + 8, file.n - 8};
    } else if (file.n >= 9 && memcmp(file.p, "outtensor", 9) == 0) {
        tp->io = (struct span){"output", 6};
        rest = (struct span){file.p + 9, file.n - 9};
    } else {
        tp->io = (struct span){NA, 3};
    }
    const char *dot = memchr(rest.p, '.', rest.n);
    tp->index = (struct span){rest.p, dot ? (size_t)(dot - rest.p) : rest.n};
    return 1;
}

/* The ids (which 0) or names (which 1) of the ops, joined with sep, into b. */
static void join_ops(struct bytes *b, const struct tensor_path *tp, int which, char sep)
{
    for (size_t k = 0; k < tp->n_ops; k++) {
        struct span seg = tp->parts[tp->first_op + k];
        const char *us = memchr(seg.p, '_', seg.n);
        if (k)
            bytes_putc(b, sep);
        if (which == 0)
            bytes_put(b, seg.p, us ? (size_t)(us - seg.p) : seg.n);
        else if (us)
            bytes_put(b, us + 1, seg.n - (size_t)(us - seg.p) - 1);
    }
}

/* posixpath.normpath of a relative path (no leading '/') into out; its length. */
static size_t normpath(const char *p, size_t n, char *out)
{
    size_t len = 0, start = 0;
    for (size_t i = 0; i <= n; i++) {
        if (i < n && p[i] != '/')
            continue;
        size_t m = i - start;
        const char *c = p + start;
        start = i + 1;
        if (m == 0 || (m == 1 && c[0] == '.'))
            continue;
        if (m == 2 && c[0] == '.' && c[1] == '.') {
            /* pops the last component, unless there is none or it is ".." */
            size_t at = len;
            while (at > 0 && out[at - 1] != '/')
                at--;
            int last_dotdot = len - at == 2 && out[at] == '.' && out[at + 1] == '.';
            if (len > 0 && !last_dotdot) {
                len = at > 0 ? at - 1 : 0;
                continue;
            }
        }
        if (len)
            out[len++] = '/';
        memcpy(out + len, c, m);
        len += m;
    }
    if (!len)
        out[len++] = '.';
    return len;
}

/* A decoded string view into scratch (as Python's json and surrogateescape
 * give it); NULL for the Python path. */
static const char *decoded(const struct jv *v, struct bytes *scratch, size_t *n)
{
    if (!bytes_reserve(scratch, v->n))
        return NULL;
    long len = jl_bytes(v, scratch->p + scratch->len);
    if (len < 0)
        return NULL;
    const char *out = scratch->p + scratch->len;
    scratch->len += (size_t)len;
    *n = (size_t)len;
    return out;
}

/* A text field: a string (decoded), `fallback` when absent; NULL when of
 * another type (the Python path's str() of it). */
static const char *text_field(const struct jv *v, const char *fallback, struct bytes *scratch,
                              size_t *n)
{
    if (v->type == JV_MISSING) {
        *n = strlen(fallback);
        return fallback;
    }
    return v->type == JV_STR ? decoded(v, scratch, n) : NULL;
}

static int same(const char *s, size_t n, const char *lit)
{
    return n == strlen(lit) && memcmp(s, lit, n) == 0;
}

static const char *code_name(int kind, int64_t code, char *tmp)
{
    if (code >= 0 && code < NAMES && g_names[kind][code])
        return g_names[kind][code];
    struct bytes b = {tmp, 0, 32, 0};
    bytes_put(&b, "undefined(", 10);
    bytes_i64(&b, code);
    bytes_putc(&b, ')');
    tmp[b.len] = 0;
    return tmp;
}

/* Every string of a tensor record, decoded. */
struct tensor_text {
    const char *path, *dims, *task, *file, *note, *alias, *hash;
    size_t path_n, dims_n, task_n, file_n, note_n, alias_n, hash_n;
};

static int read_text(const struct rec_view *r, struct bytes *scratch, struct tensor_text *x)
{
    if (r->path.type != JV_STR)
        return 0;
    /* the decoded strings must not move while they are used */
    size_t need = (size_t)r->path.n + r->dims.n + r->task.n + r->file.n + r->note.n +
                  r->alias.n + r->hash.n;
    scratch->len = 0;
    if (!bytes_reserve(scratch, need + 64))
        return 0;
    x->path = decoded(&r->path, scratch, &x->path_n);
    x->dims = text_field(&r->dims, "", scratch, &x->dims_n);
    x->task = text_field(&r->task, "", scratch, &x->task_n);
    x->file = text_field(&r->file, "", scratch, &x->file_n);
    x->note = text_field(&r->note, "", scratch, &x->note_n);
    x->alias = text_field(&r->alias, "", scratch, &x->alias_n);
    x->hash = text_field(&r->hash, "", scratch, &x->hash_n);
    return x->path && x->dims && x->task && x->file && x->note && x->alias && x->hash;
}

static int int_or_missing(const struct jv *v)
{
    return v->type == JV_MISSING || v->type == JV_INT;
}

static const char *status_of(const char *file, size_t n, size_t *out_n)
{
    static const char *const map[][2] = {{"bin", "written"}, {"link", "linked"},
                                         {"linked", "linked"}, {"stub", "stub"},
                                         {"lost", "lost"}, {"none", "none"}};
    for (size_t i = 0; i < sizeof map / sizeof map[0]; i++) {
        if (same(file, n, map[i][0])) {
            *out_n = strlen(map[i][1]);
            return map[i][1];
        }
    }
    *out_n = n;
    return file;
}

/* ---- the cells of a tensor's names, made once per tensor ---- */

/* A cached tensor's cells, in the cache's arena from `at`: the statistic.csv
 * cell of its "{dev}_{pid}", its cells from Op Name to Shape (each after a
 * comma), statistic_extra.csv's from Op Id to Index and its Stage (each after
 * a comma), and its manifest strings from op_id to shape (ingest.h layout). */
struct name_entry {
    uint64_t hash;
    uint32_t key_at, key_n, at;
    uint16_t dev_n, stat_n, extra_n, stage_n;
    uint32_t man_n, man_valid;
};

struct names {
    const char *dev, *stat, *extra, *stage, *man;
    size_t dev_n, stat_n, extra_n, stage_n, man_n;
    uint32_t man_valid;
};

/* A cache that grows past this is emptied: a dump with ever new op names. */
#define CACHE_BYTES (16u << 20)

void rows_cache_free(struct name_cache *c)
{
    bytes_free(&c->arena);
    free(c->slots);
    memset(c, 0, sizeof *c);
}

static uint64_t hash_bytes(const char *s, size_t n)
{
    uint64_t h = 0x9e3779b97f4a7c15u ^ n;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t w;
        memcpy(&w, s + i, 8);
        h = (h ^ w) * 0xff51afd7ed558ccdu;
        h ^= h >> 32;
    }
    uint64_t tail = 0;
    memcpy(&tail, s + i, n - i);
    h = (h ^ tail) * 0xc4ceb9fe1a85ec53u;
    return h ^ (h >> 29);
}

static void entry_names(const struct name_cache *c, const struct name_entry *e,
                        struct names *out)
{
    const char *p = c->arena.p + e->at;
    out->dev = p;
    out->dev_n = e->dev_n;
    out->stat = p += e->dev_n;
    out->stat_n = e->stat_n;
    out->extra = p += e->stat_n;
    out->extra_n = e->extra_n;
    out->stage = p += e->extra_n;
    out->stage_n = e->stage_n;
    out->man = p + e->stage_n;
    out->man_n = e->man_n;
    out->man_valid = e->man_valid;
}

static struct name_entry *find_entry(struct name_cache *c, const char *key, size_t n,
                                     uint64_t h)
{
    if (!c->n_slots)
        return NULL;
    for (size_t at = h & (c->n_slots - 1);; at = (at + 1) & (c->n_slots - 1)) {
        struct name_entry *e = &c->slots[at];
        if (!e->key_n)
            return e; /* free: where it would go */
        if (e->hash == h && e->key_n == n && memcmp(c->arena.p + e->key_at, key, n) == 0)
            return e;
    }
}

static int grow_slots(struct name_cache *c)
{
    size_t n_slots = c->n_slots ? 2 * c->n_slots : 1024;
    struct name_entry *old = c->slots;
    size_t old_n = c->n_slots;
    c->slots = calloc(n_slots, sizeof *c->slots);
    if (!c->slots) {
        c->slots = old;
        return -1;
    }
    c->n_slots = n_slots;
    for (size_t i = 0; i < old_n; i++)
        if (old[i].key_n)
            *find_entry(c, c->arena.p + old[i].key_at, old[i].key_n, old[i].hash) = old[i];
    free(old);
    return 0;
}

/* Adds the cells made in `made` (laid out as `lens` says) under key; a full
 * cache is emptied first. Returns the entry, NULL out of memory. */
static struct name_entry *add_entry(struct name_cache *c, const char *key, size_t key_n,
                                    uint64_t h, const struct name_entry *lens, const char *made)
{
    size_t cells = (size_t)lens->dev_n + lens->stat_n + lens->extra_n + lens->stage_n +
                   lens->man_n;
    if (c->arena.len + key_n + cells > CACHE_BYTES) {
        c->arena.len = 0;
        c->used = 0;
        memset(c->slots, 0, c->n_slots * sizeof *c->slots);
    }
    if ((c->used + 1) * 2 > c->n_slots && grow_slots(c) < 0)
        return NULL;
    size_t at = c->arena.len;
    bytes_put(&c->arena, key, key_n);
    bytes_put(&c->arena, made, cells);
    if (c->arena.oom)
        return NULL;
    struct name_entry *e = find_entry(c, key, key_n, h);
    *e = *lens;
    e->hash = h;
    e->key_at = (uint32_t)at;
    e->key_n = (uint32_t)key_n;
    e->at = (uint32_t)(at + key_n);
    c->used++;
    return e;
}

/* The cells of a tensor's names, made from its path into `b` (their lengths
 * in *lens). 0 when the Python path must judge a cell. */
static int make_names(const struct tensor_path *tp, const char *dtype, const char *format,
                      const char *dims, size_t dims_n, struct bytes *b, struct bytes *tmp,
                      struct name_entry *lens)
{
    /* the joined names, ids and the shape, in tmp (never NULL: an empty name is
     * a name, not a null) */
    tmp->len = 0;
    if (!bytes_reserve(tmp, 64))
        return 0;
    join_ops(tmp, tp, 1, '/');
    size_t names_n = tmp->len;
    join_ops(tmp, tp, 0, '_');
    size_t ids_n = tmp->len - names_n;
    for (size_t i = 0; i < dims_n; i++)
        bytes_putc(tmp, dims[i] == ',' ? 'x' : dims[i]);
    if (tmp->oom)
        return 0;
    const char *w = tmp->p, *ids = w + names_n, *shape = ids + ids_n;
    size_t shape_n = tmp->len - names_n - ids_n;
    struct span last_name = {"", 0};
    if (tp->n_ops) {
        const char *slash = names_n ? memrchr(w, '/', names_n) : NULL;
        last_name = slash ? (struct span){slash + 1, names_n - (size_t)(slash + 1 - w)}
                          : (struct span){w, names_n};
    }
    b->len = 0;
    struct span dev = tp->parts[0];
    int ok = cell(b, dev.p, dev.n, 1);
    lens->dev_n = (uint16_t)b->len;
    ok = ok && cell(b, w, names_n, 0) && cell(b, last_name.p, last_name.n, 0) &&
         cell(b, ids, ids_n, 0) && cell(b, tp->io.p, tp->io.n, 0) &&
         cell(b, tp->index.p, tp->index.n, 0) && cell_str(b, dtype, 0) &&
         cell_str(b, format, 0) && cell(b, shape, shape_n, 0);
    lens->stat_n = (uint16_t)(b->len - lens->dev_n);
    size_t at = b->len;
    ok = ok && cell(b, ids, ids_n, 0) && cell(b, w, names_n, 0) &&
         cell(b, tp->io.p, tp->io.n, 0) && cell(b, tp->index.p, tp->index.n, 0);
    lens->extra_n = (uint16_t)(b->len - at);
    at = b->len;
    ok = ok && cell(b, tp->stage.p, tp->stage.n, 0);
    lens->stage_n = (uint16_t)(b->len - at);
    at = b->len;
    /* record_row's stage: the component above the file, also right below the round */
    struct span above = tp->parts[tp->n_parts - 2];
    int staged = span_is(above, "before") || span_is(above, "after");
    ing_man_head head = {0};
    man_str(b, &head, ING_MS_OP_ID, ids, ids_n);
    man_str(b, &head, ING_MS_OP_NAME, w, names_n);
    man_str(b, &head, ING_MS_OP_TYPE, last_name.p, last_name.n);
    man_str(b, &head, ING_MS_STAGE, staged ? above.p : NULL, above.n);
    man_str(b, &head, ING_MS_IO, tp->io.p, tp->io.n);
    man_str(b, &head, ING_MS_INDEX, tp->index.p, tp->index.n);
    man_str(b, &head, ING_MS_DTYPE, dtype, strlen(dtype));
    man_str(b, &head, ING_MS_FORMAT, format, strlen(format));
    man_str(b, &head, ING_MS_SHAPE, shape, shape_n);
    lens->man_n = (uint32_t)(b->len - at);
    lens->man_valid = head.valid;
    /* the lengths fit their fields: a name past 64 KiB is the Python path's */
    return ok && !b->oom && b->len < 0xffff;
}

/* The name cells of a record: from the cache, or made and cached. The path
 * is "{dev}_{pid}/{exec}/..." (checked); its key leaves {exec} out. */
static int names_of(const struct row_ctx *ctx, const struct rec_view *r,
                    const struct tensor_text *x, size_t dev_n, size_t exec_end,
                    const char *dtype, const char *format, struct names *out)
{
    struct bytes *key = ctx->work;
    key->len = 0;
    bytes_put(key, x->path, dev_n);
    bytes_put(key, x->path + exec_end, x->path_n - exec_end);
    bytes_putc(key, 0);
    bytes_put(key, &r->dtype.i, sizeof r->dtype.i);
    bytes_put(key, &r->format.i, sizeof r->format.i);
    bytes_put(key, x->dims, x->dims_n);
    if (key->oom)
        return 0;
    uint64_t h = hash_bytes(key->p, key->len);
    struct name_entry *e = find_entry(ctx->names, key->p, key->len, h);
    if (e && e->key_n) {
        entry_names(ctx->names, e, out);
        return 1;
    }
    struct tensor_path tp;
    if (split_path(x->path, x->path_n, &tp) != 1)
        return 0;
    struct bytes made = {0}, tmp = {0};
    struct name_entry lens = {0};
    int ok = make_names(&tp, dtype, format, x->dims, x->dims_n, &made, &tmp, &lens);
    e = ok ? add_entry(ctx->names, key->p, key->len, h, &lens, made.p) : NULL;
    bytes_free(&made);
    bytes_free(&tmp);
    if (!e)
        return 0;
    entry_names(ctx->names, e, out);
    return 1;
}

/* ---- a tensor record's rows ---- */

/* The rows of a record whose name cells are known. Cells are built in order;
 * any cell the Python path must judge aborts the record (the caller rolls the
 * buffers back). */
static int format_tensor(const struct rec_view *r, const struct row_ctx *ctx,
                         const struct tensor_text *x, const struct names *nm, struct span exec,
                         struct bytes *stat, struct bytes *extra, struct bytes *man)
{
    const int stats_obj = r->stats.type == JV_OBJECT;
    const int stats_task = same(x->task, x->task_n, "statistics") || same(x->task, x->task_n, "all");
    const int no_path = same(x->task, x->task_n, "statistics") || same(x->file, x->file_n, "none");
    /* the composite cells, in `work` (room for all of them now: the pointers
     * into it below must not move): tensor path, shares with, the manifest's alias */
    struct bytes *work = ctx->work;
    work->len = 0;
    if (!bytes_reserve(work, 8 * (x->path_n + x->alias_n) + 2 * ctx->root_n + 256))
        return 0;
    size_t tpath_at = work->len;
    if (!no_path) {
        bytes_put(work, ctx->root, ctx->root_n);
        bytes_put(work, "/atb_dump_data/data/", 20);
        bytes_put(work, x->path, x->path_n);
    }
    size_t tpath_n = work->len - tpath_at;
    size_t shares_at = work->len;
    int linked = same(x->file, x->file_n, "linked") || same(x->file, x->file_n, "stub");
    if (linked && x->alias_n) {
        if (x->alias[0] == '/')
            return 0;
        const char *slash = memrchr(x->path, '/', x->path_n);
        size_t dir_n = slash ? (size_t)(slash - x->path) : 0;
        char *joined = work->p + work->len + dir_n + x->alias_n + 2;
        memcpy(joined, x->path, dir_n);
        size_t jn = dir_n;
        if (dir_n)
            joined[jn++] = '/';
        memcpy(joined + jn, x->alias, x->alias_n);
        jn += x->alias_n;
        char *target = work->p + work->len;
        size_t tn = normpath(joined, jn, target);
        int self = tn == x->path_n && memcmp(target, x->path, tn) == 0;
        int up = tn >= 3 && memcmp(target, "../", 3) == 0;
        if (!self && !up) {
            /* root + "/atb_dump_data/data/" + target, built after target */
            memmove(target + ctx->root_n + 20, target, tn);
            memcpy(target, ctx->root, ctx->root_n);
            memcpy(target + ctx->root_n, "/atb_dump_data/data/", 20);
            work->len += ctx->root_n + 20 + tn;
        }
    }
    size_t shares_n = work->len - shares_at;
    if (work->oom)
        return 0;
    const char *w = work->p;
    /* max, min, mean, norm: read once for statistic.csv and the manifest */
    struct stat_num nums[ST_NORM + 1] = {0};
    for (int k = ST_MAX; stats_obj && k <= ST_NORM; k++)
        if (!read_stat(&r->st[k], ING_POSITIONAL, &nums[k]))
            return 0;
    /* statistic.csv: msProbe's 15 columns */
    bytes_put(stat, nm->dev, nm->dev_n);
    int ok = cell(stat, exec.p, exec.n, 0);
    bytes_put(stat, nm->stat, nm->stat_n);
    for (int k = ST_MAX; ok && k <= ST_NORM; k++)
        ok = stat_text_cell(stat, &nums[k], stats_obj && stats_task, 0);
    ok = ok && (no_path ? cell(stat, NA, 3, 0) : cell(stat, w + tpath_at, tpath_n, 0));
    bytes_putc(stat, '\n');
    /* statistic_extra.csv */
    ok = ok && (r->seq.type == JV_MISSING ? cell(extra, NA, 3, 1)
                                          : extra_stat_cell(extra, &r->seq, 1, 1));
    bytes_put(extra, nm->extra, nm->extra_n);
    static const int counts[] = {ST_COUNT, ST_NAN, ST_PINF, ST_NINF, ST_ZERO};
    for (size_t k = 0; ok && k < sizeof counts / sizeof counts[0]; k++)
        ok = extra_stat_cell(extra, &r->st[counts[k]], stats_obj, 0);
    ok = ok &&
         (r->file.type == JV_MISSING ? cell(extra, NA, 3, 0)
                                     : cell(extra, x->file, x->file_n, 0)) &&
         cell(extra, x->note, x->note_n, 0);
    bytes_put(extra, nm->stage, nm->stage_n);
    ok = ok && cell(extra, w + shares_at, shares_n, 0);
    bytes_putc(extra, '\n');
    if (!ok)
        return 0;
    /* the manifest's cells (record_row): the head, then the strings in order */
    ing_man_head head;
    memset(&head, 0, sizeof head);
    size_t head_at = man->len;
    bytes_put(man, &head, sizeof head);
    man_count(&head, ING_MI_SEQ, &r->seq);
    static const struct jv none = {0};
    man_count(&head, ING_MI_COUNT, stats_obj ? &r->st[ST_COUNT] : &none);
    for (int k = ST_NAN; k <= ST_ZERO; k++)
        man_count(&head, ING_MI_NAN + (k - ST_NAN), stats_obj ? &r->st[k] : &none);
    man_count(&head, ING_MI_BYTES, &r->size);
    man_count(&head, ING_MI_TIME, &r->t);
    for (int k = ST_MAX; stats_obj && k <= ST_NORM; k++) {
        if (nums[k].kind != NUM_NONE) {
            head.d[k - ST_MAX] = nums[k].value;
            head.valid |= 1u << (ING_MI_N + (k - ST_MAX));
        }
    }
    size_t status_n;
    const char *status = status_of(x->file, x->file_n, &status_n);
    /* os.path.normpath(os.path.join("data", dirname(rel), alias)), kept under data/ */
    const char *alias = NULL;
    size_t alias_n = 0;
    if (x->alias_n && x->alias[0] != '/') { /* an absolute alias leaves data/ */
        const char *slash = memrchr(x->path, '/', x->path_n);
        size_t dir_n = slash ? (size_t)(slash - x->path) : 0;
        size_t at = work->len;
        bytes_put(work, "data/", 5);
        bytes_put(work, x->path, dir_n);
        if (dir_n)
            bytes_putc(work, '/');
        bytes_put(work, x->alias, x->alias_n);
        size_t jn = work->len - at;
        char *norm = work->p + work->len;
        size_t nn = normpath(work->p + at, jn, norm);
        if (nn >= 5 && memcmp(norm, "data/", 5) == 0) {
            alias = norm;
            alias_n = nn;
        }
    }
    bytes_put(man, nm->man, nm->man_n); /* op_id .. shape */
    head.valid |= nm->man_valid;
    man_str(man, &head, ING_MS_PATH, same(status, status_n, "none") ? NULL : x->path, x->path_n);
    man_str(man, &head, ING_MS_HASH, r->hash.type == JV_STR ? x->hash : NULL, x->hash_n);
    man_str(man, &head, ING_MS_ALIAS, alias, alias_n);
    man_str(man, &head, ING_MS_STATUS, status, status_n);
    man_str(man, &head, ING_MS_NOTE, x->note_n ? x->note : NULL, x->note_n);
    if (!man->oom)
        memcpy(man->p + head_at, &head, sizeof head);
    return !stat->oom && !extra->oom && !man->oom && !work->oom;
}

int rows_tensor(const struct rec_view *r, const struct row_ctx *ctx, struct bytes *scratch,
                struct bytes *stat, struct bytes *extra, struct bytes *man,
                struct tensor_row *row)
{
    /* the types each field may have on this path; other types are the
     * Python path's (str() of them, or float() of an arbitrary string) */
    if (r->format.type != JV_INT || r->dtype.type != JV_INT || !int_or_missing(&r->seq) ||
        !int_or_missing(&r->t) || !int_or_missing(&r->size) ||
        (r->stats.type != JV_OBJECT && r->stats.type != JV_NULL &&
         r->stats.type != JV_MISSING))
        return 0;
    struct tensor_text x;
    if (!read_text(r, scratch, &x))
        return 0;
    /* a stub of a file system that refuses links: the Python path logs it */
    if (same(x.file, x.file_n, "stub") && x.note_n >= 17 &&
        memcmp(x.note, "hard link refused", 17) == 0)
        return 0;
    /* "{dev}_{pid}/{exec}/" first, with no empty component (split_path takes
     * the rest when the names are made); an {exec} that is not ASCII
     * (str.isdigit reads Unicode digits) or a dot is the Python path's */
    const char *s1 = x.path_n ? memchr(x.path, '/', x.path_n) : NULL;
    const char *s2 = s1 ? memchr(s1 + 1, '/', x.path_n - (size_t)(s1 + 1 - x.path)) : NULL;
    if (!s1 || s1 == x.path || !s2 || s2 == s1 + 1)
        return 0;
    struct span exec = {s1 + 1, (size_t)(s2 - s1 - 1)};
    if (span_is(exec, ".") || span_is(exec, ".."))
        return 0;
    for (size_t i = 0; i < exec.n; i++)
        if ((unsigned char)exec.p[i] >= 0x80)
            return 0;
    char tmp_dt[32], tmp_fmt[32];
    const char *dtype = code_name(0, r->dtype.i, tmp_dt);
    const char *format = code_name(1, r->format.i, tmp_fmt);
    struct names nm;
    if (!names_of(ctx, r, &x, (size_t)(s1 - x.path), (size_t)(s2 - x.path), dtype, format, &nm))
        return 0;
    size_t s0 = stat->len, e0 = extra->len, m0 = man->len;
    if (!format_tensor(r, ctx, &x, &nm, exec, stat, extra, man)) {
        stat->len = s0;
        extra->len = e0;
        man->len = m0;
        stat->oom = extra->oom = man->oom = 0;
        return 0;
    }
    row->at = (struct path_key){x.path, x.path_n, (size_t)(s2 - x.path), (size_t)(s1 - x.path)};
    row->seq = r->seq.type == JV_INT ? r->seq.i : 0;
    row->has_seq = r->seq.type == JV_INT;
    row->t = r->t.type == JV_INT ? r->t.i : 0;
    row->lost = same(x.file, x.file_n, "lost");
    return 1;
}

/* The round key of a path: its first two components (no empty one). */
static int path_round(const char *p, size_t n, struct path_key *key)
{
    const char *s1 = memchr(p, '/', n);
    if (!s1 || s1 == p)
        return 0;
    const char *s2 = memchr(s1 + 1, '/', n - (size_t)(s1 + 1 - p));
    if (!s2 || s2 == s1 + 1 || s2 == p + n - 1)
        return 0;
    *key = (struct path_key){p, n, (size_t)(s2 - p), (size_t)(s1 - p)};
    return 1;
}

int rows_param(const struct rec_view *r, struct bytes *scratch, struct tensor_row *row)
{
    if (!int_or_missing(&r->seq) || !int_or_missing(&r->t) ||
        (r->file.type != JV_STR && r->file.type != JV_MISSING) || r->path.type != JV_STR)
        return -1;
    scratch->len = 0;
    size_t n;
    const char *path = decoded(&r->path, scratch, &n);
    if (!path)
        return -1;
    struct tensor_path tp;
    int split = split_path(path, n, &tp);
    if (split <= 0)
        return split; /* no round: ignored, as the Python path does */
    if (!path_round(path, n, &row->at))
        return -1;
    row->seq = r->seq.type == JV_INT ? r->seq.i : -1;
    row->has_seq = r->seq.type == JV_INT;
    row->t = r->t.type == JV_INT ? r->t.i : 0;
    row->lost = JL_IS(&r->file, "lost");
    return 1;
}

int rows_round(const struct rec_view *r, struct bytes *scratch, struct path_key *key)
{
    if (r->round.type != JV_STR)
        return r->round.type == JV_MISSING ? 0 : -1;
    scratch->len = 0;
    size_t n;
    const char *s = decoded(&r->round, scratch, &n);
    if (!s)
        return -1;
    const char *slash = memchr(s, '/', n);
    if (!slash || memchr(slash + 1, '/', n - (size_t)(slash + 1 - s)))
        return 0; /* not two parts: names no round */
    *key = (struct path_key){s, n, n, (size_t)(slash - s)};
    return 1;
}

int64_t rows_round_number(const char *key, size_t key_n)
{
    const char *slash = memchr(key, '/', key_n);
    if (!slash)
        return -1;
    const char *p = slash + 1, *end = key + key_n;
    if (p == end || end - p > 18)
        return -1;
    int64_t v = 0;
    for (; p < end; p++) {
        if (!is_digit((unsigned char)*p))
            return -1;
        v = v * 10 + (*p - '0');
    }
    return v;
}
