/* The record builder: one JSON object in a growable buffer, with sticky
 * out-of-memory and always-valid escaping (jsonw.h). */
#include "jsonw.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void jb_init(struct jbuf *b, size_t cap_hint)
{
    b->len = 0;
    b->oom = 0;
    b->cap = cap_hint < 64 ? 64 : cap_hint;
    b->p = malloc(b->cap);
    if (!b->p) {
        b->cap = 0;
        b->oom = 1;
    }
}

void jb_free(struct jbuf *b)
{
    free(b->p);
    b->p = NULL;
    b->len = b->cap = 0;
}

static int reserve(struct jbuf *b, size_t extra)
{
    if (b->oom)
        return 0;
    if (b->len + extra <= b->cap)
        return 1;
    size_t cap = b->cap * 2;
    if (cap < b->len + extra)
        cap = b->len + extra + 64;
    char *p = realloc(b->p, cap);
    if (!p) {
        b->oom = 1;
        return 0;
    }
    b->p = p;
    b->cap = cap;
    return 1;
}

void jb_raw(struct jbuf *b, const char *s, size_t n)
{
    if (!reserve(b, n))
        return;
    memcpy(b->p + b->len, s, n);
    b->len += n;
}

static void sep(struct jbuf *b)
{
    if (b->len == 0)
        return;
    char last = b->p[b->len - 1];
    if (last != '{' && last != '[' && last != ':')
        jb_raw(b, ",", 1);
}

void jb_open(struct jbuf *b, char c)
{
    sep(b);
    jb_raw(b, &c, 1);
}

void jb_close(struct jbuf *b, char c)
{
    jb_raw(b, &c, 1);
}

void jb_key(struct jbuf *b, const char *key)
{
    jb_cstr(b, key);
    jb_raw(b, ":", 1);
}

/* Length of the valid UTF-8 sequence at s (1..4), or 0 if invalid. */
static size_t utf8_len(const unsigned char *s, size_t n)
{
    unsigned c = s[0];
    size_t len;
    unsigned min;
    if (c < 0x80)
        return 1;
    if (c >= 0xc2 && c <= 0xdf) {
        len = 2;
        min = 0x80;
    } else if (c >= 0xe0 && c <= 0xef) {
        len = 3;
        min = 0x800;
    } else if (c >= 0xf0 && c <= 0xf4) {
        len = 4;
        min = 0x10000;
    } else {
        return 0;
    }
    if (n < len)
        return 0;
    unsigned cp = c & (0x7f >> len);
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xc0) != 0x80)
            return 0;
        cp = (cp << 6) | (s[i] & 0x3f);
    }
    if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
        return 0;
    return len;
}

void jb_str(struct jbuf *b, const char *s, size_t n)
{
    sep(b);
    if (!reserve(b, n + 2))
        return;
    jb_raw(b, "\"", 1);
    const unsigned char *u = (const unsigned char *)s;
    size_t i = 0;
    while (i < n) {
        /* copy the longest run that needs no escaping in one go */
        size_t j = i;
        while (j < n && u[j] >= 0x20 && u[j] < 0x80 && u[j] != '"' && u[j] != '\\')
            j++;
        if (j > i)
            jb_raw(b, s + i, j - i);
        i = j;
        if (i >= n)
            break;
        unsigned char c = u[i];
        char esc[8];
        if (c == '"' || c == '\\') {
            esc[0] = '\\';
            esc[1] = (char)c;
            jb_raw(b, esc, 2);
            i++;
        } else if (c < 0x20) {
            snprintf(esc, sizeof esc, "\\u%04x", c);
            jb_raw(b, esc, 6);
            i++;
        } else {
            size_t l = utf8_len(u + i, n - i);
            if (l) {
                jb_raw(b, s + i, l);
                i += l;
            } else {
                /* Python's surrogateescape: byte XY becomes U+DCXY, which
                 * os.fsencode() turns back into the byte, so a path read
                 * from the record log opens the file ATB named */
                snprintf(esc, sizeof esc, "\\udc%02x", c);
                jb_raw(b, esc, 6);
                i++;
            }
        }
    }
    jb_raw(b, "\"", 1);
}

void jb_cstr(struct jbuf *b, const char *s)
{
    jb_str(b, s, strlen(s));
}

static void num(struct jbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void num(struct jbuf *b, const char *fmt, ...)
{
    char tmp[40];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    sep(b);
    jb_raw(b, tmp, (size_t)n);
}

void jb_i64(struct jbuf *b, int64_t v)
{
    num(b, "%lld", (long long)v);
}

void jb_u64(struct jbuf *b, uint64_t v)
{
    num(b, "%llu", (unsigned long long)v);
}

void jb_f64(struct jbuf *b, double v)
{
    if (isnan(v))
        jb_cstr(b, "nan");
    else if (isinf(v))
        jb_cstr(b, v > 0 ? "inf" : "-inf");
    else if (v > -1e15 && v < 1e15 && v == (double)(int64_t)v)
        num(b, "%.1f", v); /* integral doubles stay JSON floats ("3.0", not "3") */
    else
        num(b, "%.17g", v);
}

void jb_bool(struct jbuf *b, int v)
{
    sep(b);
    if (v)
        jb_raw(b, "true", 4);
    else
        jb_raw(b, "false", 5);
}

void jb_null(struct jbuf *b)
{
    sep(b);
    jb_raw(b, "null", 4);
}

void jb_kstr(struct jbuf *b, const char *key, const char *s, size_t n)
{
    jb_key(b, key);
    jb_str(b, s, n);
}

void jb_kcstr(struct jbuf *b, const char *key, const char *s)
{
    jb_key(b, key);
    jb_cstr(b, s);
}

void jb_ki64(struct jbuf *b, const char *key, int64_t v)
{
    jb_key(b, key);
    jb_i64(b, v);
}

void jb_ku64(struct jbuf *b, const char *key, uint64_t v)
{
    jb_key(b, key);
    jb_u64(b, v);
}
