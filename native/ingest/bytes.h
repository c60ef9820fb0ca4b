/* A growable byte buffer with sticky out-of-memory, for the rows the ingest
 * kernel formats (one owner: bytes.c). */
#ifndef ING_BYTES_H
#define ING_BYTES_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

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

/* The decimal digits of v, right-aligned to end at `end`; returns where they start. */
char *digits_u64(uint64_t v, char *end);

/* Decimal of a signed 64-bit integer. */
void bytes_i64(struct bytes *b, int64_t v);

#endif
