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

/* "00" .. "99": two digits a division */
static const char PAIRS[201] =
    "00010203040506070809101112131415161718192021222324252627282930313233343536373839"
    "40414243444546474849505152535455565758596061626364656667686970717273747576777879"
    "8081828384858687888990919293949596979899";

char *digits_u64(uint64_t v, char *end)
{
    while (v >= 100) {
        unsigned pair = (unsigned)(v % 100) * 2;
        v /= 100;
        end -= 2;
        end[0] = PAIRS[pair];
        end[1] = PAIRS[pair + 1];
    }
    if (v >= 10) {
        end -= 2;
        end[0] = PAIRS[v * 2];
        end[1] = PAIRS[v * 2 + 1];
    } else {
        *--end = (char)('0' + v);
    }
    return end;
}

void bytes_i64(struct bytes *b, int64_t v)
{
    char tmp[24];
    /* through the unsigned magnitude: INT64_MIN has no positive counterpart */
    char *start = digits_u64(v < 0 ? 0 - (uint64_t)v : (uint64_t)v, tmp + sizeof tmp);
    if (v < 0)
        *--start = '-';
    bytes_put(b, start, (size_t)(tmp + sizeof tmp - start));
}
