/* The rows a tensor record becomes: its statistic.csv line, its
 * statistic_extra.csv line and its manifest cells, exactly as the Python path
 * makes them (msprobe_atb/tree/csvfmt.py and manifest.py: the reference, held
 * to this by the differential tests). One owner: rows.c. */
#ifndef ING_ROWS_H
#define ING_ROWS_H

#include <stdint.h>

#include "bytes.h"
#include "ingest.h"
#include "jsonline.h"

/* msProbe's names of ATB's dtype (kind 0) and format (kind 1) codes, given
 * by the Python side (tree/vocab.py) once. */
int rows_set_name(int kind, int64_t code, const char *name, int64_t n);

/* The cells of a tensor record that depend only on its path without its
 * round, its dtype, format and dims: the same for the tensor round after
 * round, so made once (rows.c). */
struct name_cache {
    struct bytes arena; /* keys and cells */
    struct name_entry *slots;
    size_t n_slots, used;
};
void rows_cache_free(struct name_cache *c);

struct row_ctx {
    const char *root; /* the Tensor Path root (the attach record's output), no trailing '/' */
    size_t root_n;
    int64_t start_ns;
    struct name_cache *names;
    struct bytes *work; /* room for the cells made per record */
};

/* A parsed path "{dev}_{pid}/{exec}/..." of a record: its round key is the
 * first key_n bytes of `path` (dev_n of them the "{dev}_{pid}"). */
struct path_key {
    const char *path;
    size_t n, key_n, dev_n;
};

/* What a tensor record gave. */
struct tensor_row {
    struct path_key at;
    int64_t seq, t; /* seq 0 and t 0 when absent (the Python path's sort key and last_t) */
    int has_seq;
    int lost;       /* file "lost" */
};

/* Appends the record's two lines to stat and extra, and its manifest cells
 * to man (an ing_man_head and its strings). Returns 1, or 0 when the Python
 * path must make them (nothing appended then). `scratch` holds the decoded
 * strings, which `row->at` points into. */
int rows_tensor(const struct rec_view *r, const struct row_ctx *ctx, struct bytes *scratch,
                struct bytes *stat, struct bytes *extra, struct bytes *man,
                struct tensor_row *row);

/* The round key of a param record's path (into scratch), its seq and t, and
 * whether its file is "lost". 1; 0 when its path names no round (the Python
 * path ignores it too); -1 when the Python path must read it. */
int rows_param(const struct rec_view *r, struct bytes *scratch, struct tensor_row *row);

/* The round a round record names ("{dev}_{pid}/{exec}": exactly one '/'),
 * into scratch. 1; 0 when it names none; -1 for the Python path. */
int rows_round(const struct rec_view *r, struct bytes *scratch, struct path_key *key);

/* Appends the text form of s (msprobe_atb/tree/names.py: a byte that is not
 * part of UTF-8, and a backslash, as \xNN), what the manifest holds. */
void rows_text_form(struct bytes *b, const char *s, size_t n);

/* The manifest's `round` column of a round key: its {exec} as a number, or
 * -1 when that is not all digits. */
int64_t rows_round_number(const char *key, size_t key_n);

#endif
