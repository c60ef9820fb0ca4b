/* The record builder: one JSON object in a growable buffer, with sticky
 * out-of-memory and always-valid escaping (jsonw.h). */
#include "jsonw.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static const char hex[] = "0123456789abcdef";

void jb_init(struct jbuf *b, size_t cap_hint)
{
    b->len = 0;
    b->oom = 0;
    b->p = b->local;
    b->cap = sizeof b->local;
    if (cap_hint > b->cap)
        jb_grow(b, cap_hint);
}

void jb_free(struct jbuf *b)
{
    if (b->p != b->local)
        free(b->p);
    b->p = b->local;
    b->len = 0;
    b->cap = sizeof b->local;
}

int jb_grow(struct jbuf *b, size_t n)
{
    if (b->oom)
        return 0;
    if (n <= b->cap - b->len)
        return 1;
    size_t cap = b->cap * 2;
    if (cap < b->len + n)
        cap = b->len + n + 64;
    char *p = b->p == b->local ? malloc(cap) : realloc(b->p, cap);
    if (!p) {
        b->oom = 1;
        b->cap = b->len; /* jb_raw's fast path then comes here, and stops */
        return 0;
    }
    if (b->p == b->local)
        memcpy(p, b->local, b->len);
    b->p = p;
    b->cap = cap;
    return 1;
}

static void sep(struct jbuf *b)
{
    if (b->len == 0)
        return;
    char last = b->p[b->len - 1];
    if (last != '{' && last != '[' && last != ':' && last != '\n')
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
    size_t n = strlen(key);
    sep(b);
    if (!jb_grow(b, n + 3))
        return;
    char *o = b->p + b->len;
    o[0] = '"';
    memcpy(o + 1, key, n);
    o[n + 1] = '"';
    o[n + 2] = ':';
    b->len += n + 3;
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

/* prefix (4 bytes: \u00 or \udc) and c in two hex digits, into esc; its length */
static size_t hex_escape(char esc[8], const char *prefix, unsigned char c)
{
    memcpy(esc, prefix, 4);
    esc[4] = hex[c >> 4];
    esc[5] = hex[c & 0xf];
    return 6;
}

void jb_str(struct jbuf *b, const char *s, size_t n)
{
    sep(b);
    if (!jb_grow(b, n + 2))
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
            jb_raw(b, esc, hex_escape(esc, "\\u00", c));
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
                jb_raw(b, esc, hex_escape(esc, "\\udc", c));
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

/* Decimal digits of v, written to end at `end`; returns where they start. */
static char *udec(char *end, uint64_t v)
{
    static const char pairs[201] = "00010203040506070809101112131415161718192021222324"
                                   "25262728293031323334353637383940414243444546474849"
                                   "50515253545556575859606162636465666768697071727374"
                                   "75767778798081828384858687888990919293949596979899";
    char *o = end;
    while (v >= 100) {
        unsigned d = (unsigned)(v % 100) * 2;
        v /= 100;
        *--o = pairs[d + 1];
        *--o = pairs[d];
    }
    if (v >= 10) {
        *--o = pairs[v * 2 + 1];
        *--o = pairs[v * 2];
    } else {
        *--o = (char)('0' + v);
    }
    return o;
}

static void num(struct jbuf *b, const char *s, const char *end)
{
    sep(b);
    jb_raw(b, s, (size_t)(end - s));
}

void jb_i64(struct jbuf *b, int64_t v)
{
    char tmp[24], *end = tmp + sizeof tmp;
    /* the magnitude as unsigned: -INT64_MIN does not fit an int64 */
    char *s = udec(end, v < 0 ? 0 - (uint64_t)v : (uint64_t)v);
    if (v < 0)
        *--s = '-';
    num(b, s, end);
}

void jb_u64(struct jbuf *b, uint64_t v)
{
    char tmp[24], *end = tmp + sizeof tmp;
    num(b, udec(end, v), end);
}

/* The exact text of a finite double, as float.hex writes it less trailing
 * zero digits (float.fromhex reads both): [-]0x<1|0>[.<hex>]p<+|-><exp>. */
static size_t hex_float(char *o, double v)
{
    uint64_t bits;
    memcpy(&bits, &v, sizeof bits);
    char *s = o;
    if (bits >> 63)
        *s++ = '-';
    unsigned biased = (unsigned)(bits >> 52) & 0x7ff;
    uint64_t frac = bits & ((UINT64_C(1) << 52) - 1);
    /* subnormals are 0x0.<frac>p-1022, zero is 0x0p+0 */
    int exp = biased ? (int)biased - 1023 : frac ? -1022 : 0;
    memcpy(s, biased ? "0x1" : "0x0", 3);
    s += 3;
    if (frac) {
        int digits = 13;
        while (!(frac & 0xf)) {
            frac >>= 4;
            digits--;
        }
        *s++ = '.';
        for (int i = digits - 1; i >= 0; i--)
            *s++ = hex[(frac >> (4 * i)) & 0xf];
    }
    *s++ = 'p';
    *s++ = exp < 0 ? '-' : '+';
    char tmp[8], *end = tmp + sizeof tmp, *e = udec(end, (uint64_t)(exp < 0 ? -exp : exp));
    memcpy(s, e, (size_t)(end - e));
    return (size_t)(s - o) + (size_t)(end - e);
}

void jb_f64(struct jbuf *b, double v)
{
    if (isnan(v)) {
        jb_cstr(b, "nan");
    } else if (isinf(v)) {
        jb_cstr(b, v > 0 ? "inf" : "-inf");
    } else {
        char tmp[32];
        tmp[0] = '"';
        size_t n = hex_float(tmp + 1, v);
        tmp[n + 1] = '"';
        num(b, tmp, tmp + n + 2);
    }
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
