/* The ingest kernel's growable byte buffer (bytes.h). */
#include "bytes.h"

#include <stdlib.h>

int bytes_grow(struct bytes *b, size_t extra)
{
    if (b->oom)
        return 0;
    size_t cap = b->cap ? b->cap * 2 : 256;
    while (cap < b->len + extra)
        cap *= 2;
    char *p = realloc(b->p, cap);
    if (!p) {
        b->oom = 1;
        return 0;
    }
    b->p = p;
    b->cap = cap;
    return 1;
}

void bytes_free(struct bytes *b)
{
    free(b->p);
    b->p = NULL;
    b->len = b->cap = 0;
    b->oom = 0;
}

void bytes_i64(struct bytes *b, int64_t v)
{
    char tmp[24];
    int n = 0;
    /* through the unsigned magnitude: INT64_MIN has no positive counterpart */
    uint64_t u = v < 0 ? 0 - (uint64_t)v : (uint64_t)v;
    do {
        tmp[n++] = (char)('0' + u % 10);
        u /= 10;
    } while (u);
    if (v < 0)
        tmp[n++] = '-';
    if (!bytes_reserve(b, (size_t)n))
        return;
    while (n)
        b->p[b->len++] = tmp[--n];
}
