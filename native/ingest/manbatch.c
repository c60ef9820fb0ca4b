/* The manifest batch: columns and a string dictionary (manbatch.h). */
#include "manbatch.h"

#include <stdlib.h>
#include <string.h>

/* A batch keeps at most this much memory once handed over (a burst's columns
 * and dictionary are given back). */
#define KEEP_ROWS 65536

static int grow_rows(struct man_batch *b)
{
    size_t cap = b->cap ? 2 * b->cap : 1024;
#define GROW(ptr)                                                                                \
    do {                                                                                         \
        void *g_ = realloc((ptr), cap * sizeof *(ptr));                                          \
        if (!g_)                                                                                 \
            return -1;                                                                           \
        (ptr) = g_;                                                                              \
    } while (0)
    GROW(b->round);
    GROW(b->round_seq);
    for (int k = 0; k < ING_MI_N; k++)
        GROW(b->ints[k]);
    for (int k = 0; k < ING_MD_N; k++)
        GROW(b->dbl[k]);
    GROW(b->valid);
    for (int k = 0; k <= ING_MS_N; k++)
        GROW(b->codes[k]);
    GROW(b->keyed);
#undef GROW
    b->cap = cap;
    return 0;
}

/* A string's slot hash, 8 bytes a step. */
static uint64_t hash_of(const char *s, size_t n)
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

static int rehash(struct man_batch *b, size_t n_slots)
{
    uint32_t *slots = calloc(n_slots, sizeof *slots);
    if (!slots)
        return -1;
    for (size_t k = 0; k < b->n_dict; k++) {
        const char *s = b->dict.p + b->dict_at[k];
        size_t n = (size_t)(b->dict_at[k + 1] - b->dict_at[k]) - 1;
        size_t at = hash_of(s, n) & (n_slots - 1);
        while (slots[at])
            at = (at + 1) & (n_slots - 1);
        slots[at] = (uint32_t)k + 1;
    }
    free(b->slots);
    b->slots = slots;
    b->n_slots = n_slots;
    return 0;
}

/* The dictionary index of a string, added if new; UINT32_MAX out of memory. */
static uint32_t intern(struct man_batch *b, const char *s, size_t n)
{
    if ((b->n_dict + 1) * 2 > b->n_slots && rehash(b, b->n_slots ? 2 * b->n_slots : 1024) < 0)
        return UINT32_MAX;
    size_t at = hash_of(s, n) & (b->n_slots - 1);
    for (; b->slots[at]; at = (at + 1) & (b->n_slots - 1)) {
        uint32_t k = b->slots[at] - 1;
        const char *t = b->dict.p + b->dict_at[k];
        if ((size_t)(b->dict_at[k + 1] - b->dict_at[k]) - 1 == n && memcmp(t, s, n) == 0)
            return k;
    }
    if (b->n_dict + 2 > b->cap_dict) {
        size_t cap = b->cap_dict ? 2 * b->cap_dict : 1024;
        int64_t *grown = realloc(b->dict_at, cap * sizeof *grown);
        if (!grown)
            return UINT32_MAX;
        b->dict_at = grown;
        b->cap_dict = cap;
    }
    if (!b->n_dict)
        b->dict_at[0] = 0;
    bytes_put(&b->dict, s, n);
    bytes_putc(&b->dict, 0);
    if (b->dict.oom)
        return UINT32_MAX;
    b->dict_nul |= memchr(s, 0, n) != NULL;
    uint32_t k = (uint32_t)b->n_dict++;
    b->dict_at[b->n_dict] = (int64_t)b->dict.len;
    b->slots[at] = k + 1;
    return k;
}

/* The string of column k is the one the row before had there. */
static int same_as_last(const struct man_batch *b, int k, const char *s, size_t n)
{
    if (!b->n)
        return 0;
    uint32_t code = b->last[k];
    if (code == UINT32_MAX)
        return 0;
    const char *t = b->dict.p + b->dict_at[code];
    return (size_t)(b->dict_at[code + 1] - b->dict_at[code]) - 1 == n && memcmp(t, s, n) == 0;
}

int mb_add(struct man_batch *b, int64_t round, int64_t round_seq, const char *cells,
           size_t cells_n, const char *key, size_t key_n)
{
    if (b->n == b->cap && grow_rows(b) < 0)
        return -1;
    ing_man_head head;
    if (cells_n < sizeof head)
        return -1;
    memcpy(&head, cells, sizeof head);
    size_t i = b->n, at = sizeof head;
    b->round[i] = round;
    b->round_seq[i] = round_seq;
    for (int k = 0; k < ING_MI_N; k++)
        b->ints[k][i] = head.i[k];
    for (int k = 0; k < ING_MD_N; k++)
        b->dbl[k][i] = head.d[k];
    b->valid[i] = head.valid;
    b->keyed[i] = 0;
    for (int k = 0; k < ING_MS_N; k++) {
        uint32_t n;
        if (cells_n - at < sizeof n)
            return -1;
        memcpy(&n, cells + at, sizeof n);
        at += sizeof n;
        if (cells_n - at < n)
            return -1;
        const char *s = cells + at;
        at += n;
        if (!(head.valid >> (12 + k) & 1)) {
            b->codes[k][i] = b->last[k] = UINT32_MAX;
            continue;
        }
        if (k == ING_MS_PATH && n > key_n && memcmp(s, key, key_n) == 0 && s[key_n] == '/') {
            b->keyed[i] = 1; /* the rest of the path repeats round after round */
            s += key_n + 1;
            n -= (uint32_t)key_n + 1;
        }
        if ((b->codes[k][i] = same_as_last(b, k, s, n) ? b->last[k] : intern(b, s, n)) ==
            UINT32_MAX)
            return -1;
        b->last[k] = b->codes[k][i];
    }
    uint32_t key_code = same_as_last(b, ING_MS_N, key, key_n) ? b->last[ING_MS_N]
                                                              : intern(b, key, key_n);
    if ((b->codes[ING_MS_N][i] = b->last[ING_MS_N] = key_code) == UINT32_MAX)
        return -1;
    b->n++;
    return 0;
}

void mb_view(struct man_batch *b, ing_manifest *out)
{
    memset(out, 0, sizeof *out);
    out->n = (int64_t)b->n;
    out->round = b->round;
    out->round_seq = b->round_seq;
    for (int k = 0; k < ING_MI_N; k++)
        out->i[k] = b->ints[k];
    for (int k = 0; k < ING_MD_N; k++)
        out->d[k] = b->dbl[k];
    out->valid = b->valid;
    for (int k = 0; k <= ING_MS_N; k++)
        out->codes[k] = b->codes[k];
    out->keyed = b->keyed;
    out->dict = b->dict.p ? b->dict.p : "";
    out->dict_n = (int64_t)b->dict.len;
    out->n_dict = (int64_t)b->n_dict;
    out->dict_at = b->dict_at;
    out->dict_nul = b->dict_nul;
}

void mb_free(struct man_batch *b)
{
    free(b->round);
    free(b->round_seq);
    for (int k = 0; k < ING_MI_N; k++)
        free(b->ints[k]);
    for (int k = 0; k < ING_MD_N; k++)
        free(b->dbl[k]);
    free(b->valid);
    for (int k = 0; k <= ING_MS_N; k++)
        free(b->codes[k]);
    free(b->keyed);
    bytes_free(&b->dict);
    free(b->dict_at);
    free(b->slots);
    memset(b, 0, sizeof *b);
}

void mb_clear(struct man_batch *b)
{
    if (b->cap > KEEP_ROWS) {
        mb_free(b);
        return;
    }
    b->n = b->n_dict = 0;
    b->dict.len = 0;
    b->dict_nul = 0;
    if (b->slots)
        memset(b->slots, 0, b->n_slots * sizeof *b->slots);
}
