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

void jb_open(struct jbuf *b, char c)
{
    jb_sep(b);
    jb_raw(b, &c, 1);
}

void jb_close(struct jbuf *b, char c)
{
    jb_raw(b, &c, 1);
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

/* Bytes a JSON string holds as they are: printable ASCII but '"' and '\\'. */
static int plain(unsigned char c)
{
    return c >= 0x20 && c < 0x80 && c != '"' && c != '\\';
}

#define BYTES(x) (UINT64_C(0x0101010101010101) * (x))
/* Whether 8 bytes are all plain, at once (a record's paths and names are):
 * a byte with its high bit set, below 0x20, or equal to '"' or '\\' sets the
 * high bit of its lane in one of the terms (the bit tricks of "determine if a
 * word has a byte less than n", exact for "any"). */
static int plain8(uint64_t x)
{
    uint64_t q = x ^ BYTES('"'), bs = x ^ BYTES('\\');
    uint64_t any = x | ((x - BYTES(0x20)) & ~x) | ((q - BYTES(1)) & ~q) | ((bs - BYTES(1)) & ~bs);
    return !(any & BYTES(0x80));
}

/* The end of the run of plain bytes from i. */
static size_t plain_run(const unsigned char *u, size_t i, size_t n)
{
    uint64_t x;
    while (n - i >= 8 && (memcpy(&x, u + i, 8), plain8(x)))
        i += 8;
    /* fewer than 8 left: the word that ends with them, read again */
    if (i < n && n - i < 8 && n >= 8 && (memcpy(&x, u + n - 8, 8), plain8(x)))
        return n;
    while (i < n && plain(u[i]))
        i++;
    return i;
}

void jb_str(struct jbuf *b, const char *s, size_t n)
{
    const unsigned char *u = (const unsigned char *)s;
    size_t i = plain_run(u, 0, n);
    if (i == n) { /* nothing to escape (a record's strings nearly always) */
        char *o = jb_at(b, n + 2);
        if (o)
            jb_end(b, jb_put_plain(o, s, n));
        return;
    }
    jb_sep(b);
    if (n + 2 > b->cap - b->len && !jb_grow(b, n + 2))
        return;
    jb_raw(b, "\"", 1);
    jb_raw(b, s, i);
    while (i < n) {
        /* copy the longest run that needs no escaping in one go */
        size_t j = plain_run(u, i, n);
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

/* How many decimal digits v has. */
static unsigned ndigits(uint64_t v)
{
    unsigned n = 1;
    for (;;) {
        if (v < 10)
            return n;
        if (v < 100)
            return n + 1;
        if (v < 1000)
            return n + 2;
        if (v < 10000)
            return n + 3;
        v /= 10000;
        n += 4;
    }
}

/* The decimal digits of v at o, two at a time from the last; their count. */
static size_t udec(char *o, uint64_t v)
{
    static const char pairs[201] = "00010203040506070809101112131415161718192021222324"
                                   "25262728293031323334353637383940414243444546474849"
                                   "50515253545556575859606162636465666768697071727374"
                                   "75767778798081828384858687888990919293949596979899";
    if (v < 10) { /* most of a record's numbers are */
        *o = (char)('0' + v);
        return 1;
    }
    size_t n = ndigits(v);
    char *e = o + n;
    while (v >= 100) {
        unsigned d = (unsigned)(v % 100) * 2;
        v /= 100;
        *--e = pairs[d + 1];
        *--e = pairs[d];
    }
    if (v >= 10) {
        *--e = pairs[v * 2 + 1];
        *--e = pairs[v * 2];
    } else {
        *--e = (char)('0' + v);
    }
    return n;
}

char *jb_put_u64(char *o, uint64_t v)
{
    return o + udec(o, v);
}

char *jb_put_i64(char *o, int64_t v)
{
    if (v < 0)
        *o++ = '-';
    /* the magnitude as unsigned: -INT64_MIN does not fit an int64 */
    return o + udec(o, v < 0 ? 0 - (uint64_t)v : (uint64_t)v);
}

/* The 8 hex digits of v at o, at once: each nibble spread to a byte, then
 * '0' added, and 'a' - '0' - 10 more where it is above 9. */
static inline void hex8(char *o, uint32_t v)
{
    uint64_t x = v;
    x = ((x & 0xffff0000u) << 16) | (x & 0xffffu);
    x = ((x & UINT64_C(0x0000ff000000ff00)) << 8) | (x & UINT64_C(0x000000ff000000ff));
    x = ((x & UINT64_C(0x00f000f000f000f0)) << 4) | (x & UINT64_C(0x000f000f000f000f));
    uint64_t above9 = ((x + BYTES(6)) >> 4) & BYTES(1);
    x += BYTES('0') + above9 * ('a' - '0' - 10);
    _Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "x86-64 and aarch64 hosts");
    x = __builtin_bswap64(x); /* the first digit first */
    memcpy(o, &x, 8);
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
        /* the digits 8 at a time (the last 5 after the first 8: their word's
         * first 3 again), then up to the last that is not 0; a float's,
         * a float16's or a bfloat16's are all in the first 8 */
        int zeros = __builtin_ctzll(frac) / 4;
        *s = '.';
        hex8(s + 1, (uint32_t)(frac >> 20));
        if (zeros < 5)
            hex8(s + 6, (uint32_t)frac);
        s += 14 - zeros;
    }
    *s++ = 'p';
    *s++ = exp < 0 ? '-' : '+';
    s += udec(s, (uint64_t)(exp < 0 ? -exp : exp));
    return (size_t)(s - o);
}

char *jb_put_f64(char *o, double v)
{
    if (isnan(v) || isinf(v)) {
        const char *name = isnan(v) ? "nan" : v > 0 ? "inf" : "-inf";
        return jb_put_plain(o, name, strlen(name));
    }
    o[0] = '"';
    size_t n = hex_float(o + 1, v);
    o[n + 1] = '"';
    return o + n + 2;
}

void jb_kstr_n(struct jbuf *b, const char *key, size_t keyn, const char *s, size_t n)
{
    if (plain_run((const unsigned char *)s, 0, n) < n) { /* to escape: the general way */
        char *o = jb_at(b, keyn + 3);
        if (o)
            jb_end(b, jb_put_key(o, key, keyn));
        jb_str(b, s, n);
        return;
    }
    char *o = jb_at(b, keyn + n + 5);
    if (o)
        jb_end(b, jb_put_plain(jb_put_key(o, key, keyn), s, n));
}

void jb_bool(struct jbuf *b, int v)
{
    jb_sep(b);
    if (v)
        jb_raw(b, "true", 4);
    else
        jb_raw(b, "false", 5);
}

void jb_null(struct jbuf *b)
{
    jb_sep(b);
    jb_raw(b, "null", 4);
}
