/* A process's manifest rows, taken in sequence order, in columns, with one
 * dictionary of their strings per batch (ingest.h's ing_manifest): polars
 * builds a frame from them without parsing text. One owner: manbatch.c. */
#ifndef ING_MANBATCH_H
#define ING_MANBATCH_H

#include <stddef.h>
#include <stdint.h>

#include "bytes.h"
#include "ingest.h"

struct man_batch {
    size_t n, cap;
    int64_t *round, *round_seq, *ints[ING_MI_N];
    double *dbl[ING_MD_N];
    uint32_t *valid;
    uint32_t *codes[ING_MS_N + 1];
    uint8_t *keyed;
    struct bytes dict;  /* the distinct strings, each followed by a NUL */
    int64_t *dict_at;
    size_t n_dict, cap_dict;
    uint32_t *slots;    /* open addressing over the strings: index + 1, 0 free */
    size_t n_slots;
    uint32_t last[ING_MS_N + 1]; /* each column's code of the row before: rows of an op
                                    repeat most names (UINT32_MAX: none) */
    int dict_nul, oom;
};

/* Adds a row: its round, round_seq, its cells (`cells`: an ing_man_head and
 * its strings, as ingest.h lays them out) and its round key. 0, or -1 (out of
 * memory, or cells that are not such a layout). */
int mb_add(struct man_batch *b, int64_t round, int64_t round_seq, const char *cells,
           size_t cells_n, const char *key, size_t key_n);
/* The batch's columns, for Python; valid until mb_clear. */
void mb_view(struct man_batch *b, ing_manifest *out);
/* Empties the batch (its memory kept for the next one, up to a bound). */
void mb_clear(struct man_batch *b);
void mb_free(struct man_batch *b);

#endif
