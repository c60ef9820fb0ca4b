/* A growable byte buffer with sticky out-of-memory, for the rows the ingest
 * kernel formats (one owner: bytes.c). */
#ifndef ING_BYTES_H
#define ING_BYTES_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#if __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "plain_run reads words little-endian"
#endif

struct bytes {
    char *p;
    size_t len, cap;
    int oom;
};

/* Grows the buffer for `extra` more bytes; 0 (and oom set) when memory ran out. */
int bytes_grow(struct bytes *b, size_t extra);

/* Room for `extra` more bytes; 0 (and oom set) when memory ran out. */
static inline int bytes_reserve(struct bytes *b, size_t extra)
{
    return b->len + extra <= b->cap ? !b->oom : bytes_grow(b, extra);
}
void bytes_free(struct bytes *b);

static inline void bytes_put(struct bytes *b, const void *s, size_t n)
{
    if (n && bytes_reserve(b, n)) {
        memcpy(b->p + b->len, s, n);
        b->len += n;
    }
}

static inline void bytes_putc(struct bytes *b, char c)
{
    if (bytes_reserve(b, 1))
        b->p[b->len++] = c;
}

/* The length of the leading run of s[0..n) that holds no byte below 0x20, no
 * byte of 0x80 or above, and none of the (up to three) ASCII bytes a, b, c,
 * found 8 bytes at a time (words read little-endian, as x86-64 and arm64
 * Linux store them). */
static inline size_t plain_run(const char *s, size_t n, unsigned char a, unsigned char b,
                               unsigned char c)
{
    const uint64_t ones = 0x0101010101010101u, highs = 0x8080808080808080u;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t w;
        memcpy(&w, s + i, 8);
        /* any lane below 0x20, equal to a, b or c (a zero lane of w ^ x), or of
         * 0x80 and above: the byte loop below finds which */
        uint64_t xa = w ^ (ones * a), xb = w ^ (ones * b), xc = w ^ (ones * c);
        uint64_t hit = (((w - ones * 0x20) & ~w) | ((xa - ones) & ~xa) | ((xb - ones) & ~xb) |
                        ((xc - ones) & ~xc) | w) & highs;
        /* a borrow may mark lanes above a hit, never below one: the lowest
         * marked lane (little-endian: the first byte) is the first hit */
        if (hit)
            return i + (size_t)(__builtin_ctzll(hit) >> 3);
    }
    for (; i < n; i++) {
        unsigned char ch = (unsigned char)s[i];
        if (ch < 0x20 || ch >= 0x80 || ch == a || ch == b || ch == c)
            break;
    }
    return i;
}

/* The decimal digits of v, right-aligned to end at `end`; returns where they start. */
char *digits_u64(uint64_t v, char *end);

/* Decimal of a signed 64-bit integer. */
void bytes_i64(struct bytes *b, int64_t v);

#endif
