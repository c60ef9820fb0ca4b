/* A process's manifest rows, taken in sequence order, kept in Arrow's columnar
 * layout and handed to Python through Arrow's C data interface as one struct
 * array (ingest.h ing_manifest_export): polars imports its columns without a
 * Python object per value. One owner: manbatch.c. */
#ifndef ING_MANBATCH_H
#define ING_MANBATCH_H

#include <stddef.h>
#include <stdint.h>

#include "bytes.h"
#include "ingest.h"

/* The columns as a row fills them: its round, round_seq, the process's
 * start_ns, the statistics' rounding step, ing_man_head's ints, doubles and
 * strings, its manifest partition ("{dev}_{pid}", its round key's first
 * part). The export orders them as manifest.py's COLUMNS, then `_part`. */
enum { MB_ROUND, MB_ROUND_SEQ, MB_START_NS, MB_STAT_STEP, MB_INT0, MB_DBL0 = MB_INT0 + ING_MI_N,
       MB_STR0 = MB_DBL0 + ING_MD_N, MB_PART = MB_STR0 + ING_MS_N, MB_COLUMNS };

struct man_column {
    struct bytes data;    /* a string column's bytes, or 8-byte values (by row: len unused) */
    struct bytes offsets; /* a string column's int64 offsets, n + 1 (by row: len unused) */
    struct bytes valid;   /* validity bitmap, one bit a row (columns that may be null) */
};

struct man_batch {
    size_t n, cap;
    int64_t start_ns;
    struct man_column col[MB_COLUMNS];
};

/* Adds a row: its round, round_seq, its cells (`cells`: an ing_man_head and
 * its strings, as ingest.h lays them out) and its partition. 0, or -1 (out of
 * memory, or cells that are not such a layout). */
int mb_add(struct man_batch *b, int64_t round, int64_t round_seq, const char *cells,
           size_t cells_n, const char *part, size_t part_n);
/* Moves the batch's rows into an Arrow struct array and its schema (the
 * consumer releases them); the batch starts empty. 0, or -1 out of memory
 * (the batch then keeps its rows). */
int mb_export(struct man_batch *b, struct ArrowSchema *schema, struct ArrowArray *array);
void mb_free(struct man_batch *b);

#endif
