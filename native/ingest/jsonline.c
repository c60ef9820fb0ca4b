/* The strict record-line parser (jsonline.h). */
#include "jsonline.h"

#include <stddef.h>
#include <string.h>

#include "bytes.h"
#include "utf8.h"

#define MAX_DEPTH 64

struct cursor {
    const char *p, *end;
};

static void skip_ws(struct cursor *c)
{
    while (c->p < c->end && (*c->p == ' ' || *c->p == '\t' || *c->p == '\r' || *c->p == '\n'))
        c->p++;
}

static int hex4(const char *p, unsigned *out)
{
    unsigned v = 0;
    for (int i = 0; i < 4; i++) {
        char ch = p[i];
        unsigned d = ch >= '0' && ch <= '9'   ? (unsigned)(ch - '0')
                     : ch >= 'a' && ch <= 'f' ? (unsigned)(ch - 'a' + 10)
                     : ch >= 'A' && ch <= 'F' ? (unsigned)(ch - 'A' + 10)
                                              : 16u;
        if (d > 15)
            return 0;
        v = v * 16 + d;
    }
    *out = v;
    return 1;
}

static int string(struct cursor *c, struct jv *v)
{
    const char *start = ++c->p; /* past the opening quote */
    int escaped = 0;
    while (c->p < c->end) {
        /* to the quote, a backslash, a control character or a multi-byte
         * sequence, 8 bytes at a time */
        c->p += plain_run(c->p, (size_t)(c->end - c->p), '"', '\\', '"');
        if (c->p >= c->end)
            break;
        unsigned char ch = (unsigned char)*c->p;
        if (ch == '"') {
            v->type = JV_STR;
            v->p = start;
            v->n = (uint32_t)(c->p - start);
            v->escaped = (uint8_t)escaped;
            c->p++;
            return 1;
        }
        if (ch < 0x20)
            return 0; /* Python's json refuses control characters in strings */
        if (ch == '\\') {
            escaped = 1;
            if (c->end - c->p < 2)
                return 0;
            char e = c->p[1];
            if (e == 'u') {
                unsigned u;
                if (c->end - c->p < 6 || !hex4(c->p + 2, &u))
                    return 0;
                c->p += 6;
            } else if (strchr("\"\\/bfnrt", e) && e) {
                c->p += 2;
            } else {
                return 0;
            }
            continue;
        }
        if (ch >= 0x80) {
            size_t l = utf8_len((const unsigned char *)c->p, (const unsigned char *)c->end);
            if (!l)
                return 0;
            c->p += l;
            continue;
        }
        c->p++;
    }
    return 0;
}

/* A JSON number; JV_INT when it has no fraction or exponent and fits in
 * int64 (more digits: left to Python, which keeps any integer). */
static int number(struct cursor *c, struct jv *v)
{
    const char *s = c->p;
    const char *p = s;
    if (p < c->end && *p == '-')
        p++;
    if (p >= c->end)
        return 0;
    if (*p == '0') {
        p++;
    } else if (*p >= '1' && *p <= '9') {
        while (p < c->end && *p >= '0' && *p <= '9')
            p++;
    } else {
        return 0;
    }
    int is_float = 0;
    if (p < c->end && *p == '.') {
        is_float = 1;
        p++;
        if (p >= c->end || *p < '0' || *p > '9')
            return 0;
        while (p < c->end && *p >= '0' && *p <= '9')
            p++;
    }
    if (p < c->end && (*p == 'e' || *p == 'E')) {
        is_float = 1;
        p++;
        if (p < c->end && (*p == '+' || *p == '-'))
            p++;
        if (p >= c->end || *p < '0' || *p > '9')
            return 0;
        while (p < c->end && *p >= '0' && *p <= '9')
            p++;
    }
    v->p = s;
    v->n = (uint32_t)(p - s);
    c->p = p;
    if (is_float) {
        v->type = JV_FLOAT;
        return 1;
    }
    const char *d = s + (*s == '-');
    if (p - d > 19)
        return 0;
    uint64_t x = 0;
    for (; d < p; d++)
        x = x * 10 + (uint64_t)(*d - '0'); /* 19 digits fit in 64 bits unsigned */
    const uint64_t limit = (uint64_t)INT64_MAX + (*s == '-');
    if (x > limit)
        return 0;
    v->i = *s == '-' ? (int64_t)(0 - x) : (int64_t)x;
    v->type = JV_INT;
    return 1;
}

static int literal(struct cursor *c, const char *word, uint8_t type, struct jv *v)
{
    size_t n = strlen(word);
    if ((size_t)(c->end - c->p) < n || memcmp(c->p, word, n) != 0)
        return 0;
    v->type = type;
    v->p = c->p;
    v->n = (uint32_t)n;
    c->p += n;
    return 1;
}

static int value(struct cursor *c, struct jv *v, int depth);

/* Skips an array or object (any content); v spans it. */
static int container(struct cursor *c, struct jv *v, int depth)
{
    if (depth >= MAX_DEPTH)
        return 0;
    const char *start = c->p;
    char close = *c->p == '[' ? ']' : '}';
    c->p++;
    skip_ws(c);
    if (c->p < c->end && *c->p == close) {
        c->p++;
    } else {
        for (;;) {
            struct jv item = {0};
            if (close == '}') {
                skip_ws(c);
                if (c->p >= c->end || *c->p != '"' || !string(c, &item))
                    return 0;
                skip_ws(c);
                if (c->p >= c->end || *c->p != ':')
                    return 0;
                c->p++;
            }
            if (!value(c, &item, depth + 1))
                return 0;
            skip_ws(c);
            if (c->p < c->end && *c->p == ',') {
                c->p++;
                continue;
            }
            if (c->p < c->end && *c->p == close) {
                c->p++;
                break;
            }
            return 0;
        }
    }
    v->type = close == ']' ? JV_ARRAY : JV_OBJECT;
    v->p = start;
    v->n = (uint32_t)(c->p - start);
    return 1;
}

static int value(struct cursor *c, struct jv *v, int depth)
{
    skip_ws(c);
    if (c->p >= c->end)
        return 0;
    switch (*c->p) {
    case '"': return string(c, v);
    case '{': case '[': return container(c, v, depth);
    case 't': return literal(c, "true", JV_TRUE, v);
    case 'f': return literal(c, "false", JV_FALSE, v);
    case 'n': return literal(c, "null", JV_NULL, v);
    default: return number(c, v); /* NaN, Infinity: left to Python */
    }
}

int jl_is_n(const struct jv *v, const char *s, size_t n)
{
    return v->type == JV_STR && !v->escaped && v->n == n && memcmp(v->p, s, n) == 0;
}

/* The record's keys the kernel reads, and where their views go. */
#define KEY_LIST(X)                                                                              \
    X(k) X(t) X(seq) X(path) X(format) X(dtype) X(dims) X(size) X(task) X(file) X(hash)          \
    X(alias) X(note) X(round) X(stats)
#define KEY_NAME(f) #f,
#define KEY_OFFSET(f) offsetof(struct rec_view, f),
static const char *const KEY_NAMES[] = {KEY_LIST(KEY_NAME)};
static const size_t KEY_OFFSETS[] = {KEY_LIST(KEY_OFFSET)};
#define N_KEYS (sizeof KEY_NAMES / sizeof KEY_NAMES[0])
static const char *const STAT_KEYS[ST_N] = {"count", "max", "min", "mean", "norm",
                                            "nan", "pinf", "ninf", "zero"};

/* A known key's slot: a plain (unescaped) key equal to a name. A key with
 * escapes could spell a known one: left to Python. The search starts after
 * the last key found (`*index`): the shim writes them in this order. */
static int find_key(const struct jv *key, const char *const *names, size_t n_names,
                    size_t *index)
{
    for (size_t k = 0; k < n_names; k++) {
        size_t i = (*index + 1 + k) % n_names;
        const char *name = names[i];
        if (name[0] == key->p[0] && strncmp(name, key->p, key->n) == 0 && !name[key->n]) {
            *index = i;
            return 1;
        }
    }
    return 0;
}

/* A stats value's array: [a, b] of scalars, kept in pair (complex64's
 * [re, im]); any other array is left to Python. */
static int pair(struct cursor *c, struct jv *v, struct jv *el, int depth)
{
    const char *start = c->p;
    c->p++;
    for (int i = 0; i < 2; i++) {
        if (!value(c, &el[i], depth + 1) || el[i].type == JV_ARRAY || el[i].type == JV_OBJECT)
            return 0;
        skip_ws(c);
        if (c->p >= c->end || *c->p != (i ? ']' : ','))
            return 0;
        c->p++;
    }
    v->type = JV_ARRAY;
    v->p = start;
    v->n = (uint32_t)(c->p - start);
    v->el = el;
    v->n_el = 2;
    return 1;
}

static int stats_object(struct cursor *c, struct rec_view *r)
{
    size_t i = ST_N - 1; /* find_key's hint: none found yet */
    const char *start = c->p;
    c->p++;
    skip_ws(c);
    if (c->p < c->end && *c->p == '}') {
        c->p++;
    } else {
        for (;;) {
            struct jv key = {0};
            skip_ws(c);
            if (c->p >= c->end || *c->p != '"' || !string(c, &key) || key.escaped)
                return 0;
            skip_ws(c);
            if (c->p >= c->end || *c->p != ':')
                return 0;
            c->p++;
            skip_ws(c);
            if (key.n && find_key(&key, STAT_KEYS, ST_N, &i)) {
                if (r->st[i].type != JV_MISSING)
                    return 0; /* duplicate: Python keeps the last one */
                if (c->p < c->end && *c->p == '[') {
                    if (!pair(c, &r->st[i], r->pair[i], 1))
                        return 0;
                } else if (!value(c, &r->st[i], 1)) {
                    return 0;
                }
            } else {
                struct jv skip = {0};
                if (!value(c, &skip, 1))
                    return 0;
            }
            skip_ws(c);
            if (c->p < c->end && *c->p == ',') {
                c->p++;
                continue;
            }
            if (c->p < c->end && *c->p == '}') {
                c->p++;
                break;
            }
            return 0;
        }
    }
    r->stats.type = JV_OBJECT;
    r->stats.p = start;
    r->stats.n = (uint32_t)(c->p - start);
    return 1;
}

/* ---- the shim's own layout, read without looking keys up ---- */

/* The literal `lit` next; advances past it. */
#define EXPECT(c, lit) expect((c), (lit), sizeof(lit) - 1)
static int expect(struct cursor *c, const char *lit, size_t n)
{
    if ((size_t)(c->end - c->p) < n || memcmp(c->p, lit, n) != 0)
        return 0;
    c->p += n;
    return 1;
}

/* A value the shim writes for a key: a number or a string, which the generic
 * scanners read (any other value: the generic parser's). */
static int scalar(struct cursor *c, struct jv *v)
{
    if (c->p >= c->end)
        return 0;
    return *c->p == '"' ? string(c, v) : number(c, v);
}

/* `,"key":value` for an optional key: 1 read, 0 absent, -1 malformed. */
#define OPTIONAL(c, lit, v) optional((c), (lit), sizeof(lit) - 1, (v))
static int optional(struct cursor *c, const char *lit, size_t n, struct jv *v)
{
    if (!expect(c, lit, n))
        return 0;
    return scalar(c, v) ? 1 : -1;
}

/* A tensor or param record exactly as native/core/mechanisms/writer.c and
 * stats.c write it: keys in their order, no blanks. 0 for anything else. */
static int shim_layout(const char *line, size_t n, struct rec_view *r)
{
    struct cursor c = {line, line + n};
    if (!EXPECT(&c, "{\"k\":"))
        return 0;
    if (!string(&c, &r->k) || !EXPECT(&c, ",\"t\":") || !number(&c, &r->t) ||
        !EXPECT(&c, ",\"seq\":") || !number(&c, &r->seq) || !EXPECT(&c, ",\"path\":") ||
        !scalar(&c, &r->path))
        return 0;
    if (JL_IS(&r->k, "param")) {
        if (!EXPECT(&c, ",\"file\":") || !scalar(&c, &r->file) ||
            OPTIONAL(&c, ",\"note\":", &r->note) < 0)
            return 0;
        return EXPECT(&c, "}") && c.p == c.end;
    }
    if (!JL_IS(&r->k, "tensor") || !EXPECT(&c, ",\"format\":") || !number(&c, &r->format) ||
        !EXPECT(&c, ",\"dtype\":") || !number(&c, &r->dtype) || !EXPECT(&c, ",\"dims\":") ||
        !scalar(&c, &r->dims) || !EXPECT(&c, ",\"size\":") || !number(&c, &r->size) ||
        !EXPECT(&c, ",\"task\":") || !scalar(&c, &r->task) || !EXPECT(&c, ",\"file\":") ||
        !scalar(&c, &r->file) || OPTIONAL(&c, ",\"hash\":", &r->hash) < 0 ||
        OPTIONAL(&c, ",\"alias\":", &r->alias) < 0 || !EXPECT(&c, ",\"stats\":"))
        return 0;
    if (EXPECT(&c, "null")) {
        r->stats.type = JV_NULL;
    } else {
        static const char *const keys[ST_N] = {
            "{\"count\":", ",\"max\":", ",\"min\":", ",\"mean\":", ",\"norm\":",
            ",\"nan\":", ",\"pinf\":", ",\"ninf\":", ",\"zero\":"};
        for (int k = 0; k < ST_N; k++)
            if (!expect(&c, keys[k], strlen(keys[k])) || !scalar(&c, &r->st[k]))
                return 0; /* complex pairs, other keys: the generic parser */
        if (!EXPECT(&c, "}"))
            return 0;
        r->stats.type = JV_OBJECT;
    }
    if (OPTIONAL(&c, ",\"note\":", &r->note) < 0)
        return 0;
    return EXPECT(&c, "}") && c.p == c.end;
}

int jl_parse(const char *line, size_t n, struct rec_view *r)
{
    memset(r, 0, sizeof *r);
    if (shim_layout(line, n, r))
        return 1;
    memset(r, 0, sizeof *r);
    struct cursor c = {line, line + n};
    size_t i = N_KEYS - 1; /* find_key's hint: none found yet */
    skip_ws(&c);
    if (c.p >= c.end || *c.p != '{')
        return 0;
    c.p++;
    skip_ws(&c);
    if (c.p < c.end && *c.p == '}') {
        c.p++;
    } else {
        for (;;) {
            struct jv key = {0};
            skip_ws(&c);
            if (c.p >= c.end || *c.p != '"' || !string(&c, &key) || key.escaped)
                return 0;
            skip_ws(&c);
            if (c.p >= c.end || *c.p != ':')
                return 0;
            c.p++;
            skip_ws(&c);
            if (key.n && find_key(&key, KEY_NAMES, N_KEYS, &i)) {
                struct jv *slot = (struct jv *)(void *)((char *)r + KEY_OFFSETS[i]);
                if (slot->type != JV_MISSING)
                    return 0; /* duplicate key */
                if (slot == &r->stats && c.p < c.end && *c.p == '{') {
                    if (!stats_object(&c, r))
                        return 0;
                } else if (!value(&c, slot, 0)) {
                    return 0;
                }
            } else {
                struct jv skip = {0};
                if (!value(&c, &skip, 0))
                    return 0;
            }
            skip_ws(&c);
            if (c.p < c.end && *c.p == ',') {
                c.p++;
                continue;
            }
            if (c.p < c.end && *c.p == '}') {
                c.p++;
                break;
            }
            return 0;
        }
    }
    skip_ws(&c);
    return c.p == c.end;
}

/* UTF-8 of a code point below 0x110000 (no surrogates here). */
static size_t put_utf8(unsigned cp, char *out)
{
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (char)(0xc0 | cp >> 6);
        out[1] = (char)(0x80 | (cp & 0x3f));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (char)(0xe0 | cp >> 12);
        out[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
        out[2] = (char)(0x80 | (cp & 0x3f));
        return 3;
    }
    out[0] = (char)(0xf0 | cp >> 18);
    out[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
    out[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
    out[3] = (char)(0x80 | (cp & 0x3f));
    return 4;
}

long jl_bytes(const struct jv *v, char *out)
{
    if (!v->escaped) {
        memcpy(out, v->p, v->n);
        return (long)v->n;
    }
    const char *p = v->p, *end = v->p + v->n;
    char *o = out;
    while (p < end) {
        if (*p != '\\') {
            *o++ = *p++;
            continue;
        }
        char e = p[1];
        p += 2;
        switch (e) {
        case 'b': *o++ = '\b'; continue;
        case 'f': *o++ = '\f'; continue;
        case 'n': *o++ = '\n'; continue;
        case 'r': *o++ = '\r'; continue;
        case 't': *o++ = '\t'; continue;
        case 'u': break;
        default: *o++ = e; continue; /* " \ / */
        }
        unsigned u;
        hex4(p, &u); /* checked by the parser */
        p += 4;
        if (u >= 0xd800 && u <= 0xdbff && end - p >= 6 && p[0] == '\\' && p[1] == 'u') {
            unsigned lo;
            if (hex4(p + 2, &lo) && lo >= 0xdc00 && lo <= 0xdfff) {
                p += 6;
                o += put_utf8(0x10000 + ((u - 0xd800) << 10) + (lo - 0xdc00), o);
                continue;
            }
        }
        if (u >= 0xdc80 && u <= 0xdcff) {
            *o++ = (char)(u - 0xdc00); /* surrogateescape: the raw byte */
            continue;
        }
        if (u >= 0xd800 && u <= 0xdfff)
            return -1;
        o += put_utf8(u, o);
    }
    return (long)(o - out);
}
