/* The control plane's ingest kernel: record-log lines in, the rows of
 * statistic.csv, statistic_extra.csv and the manifest out, in sequence order
 * per round (docs/contracts.md §5). A cffi extension of msprobe_atb/tree
 * (tree/ingest.py drives it); this header is its cdef, so it holds only what
 * cffi parses. One owner: ingest.c.
 *
 * Per process: `ing_feed` parses whole lines and keeps each tensor record's
 * three formatted lines in its round until they are released (the process
 * said the round has all its records, or had no tensor in flight when its
 * log ended where the row is, or ended); `ing_take` hands a round's
 * released rows over sorted by seq. A line the kernel does not take (any
 * kind but tensor, param and round, or anything unusual) stops the feed, and
 * the Python path reads it and hands back what it made of it. */
#ifndef MSPROBE_ATB_INGEST_H
#define MSPROBE_ATB_INGEST_H

#include <stdint.h>

typedef struct ing_proc ing_proc;

/* A round the kernel holds rows of, or that records touched since the last
 * ing_rounds call. */
typedef struct {
    int64_t key_at, key_n;  /* its key "{dev}_{pid}/{exec}" in the keys buffer */
    int64_t held;           /* rows it holds (not taken yet) */
    int64_t params_lost;    /* param records with file "lost" read since the last call */
    int64_t max_t;          /* the latest `t` of its tensor and lost-param records since then */
    int32_t tensors;        /* tensor records of it were read since then */
    int32_t said;           /* 1: its last record since then was a round record (the process
                               said the round has all its records) */
} ing_round;

/* What the kernel knows of the process. */
typedef struct {
    int64_t last_seq;       /* the highest seq of its tensor and param records (-1 none) */
    int64_t last_round_n;   /* the round of that record: its key's length (0 none) */
    const char *last_round;
    int64_t dev;            /* the device of the first path read that names one, -1 none */
    int64_t held_rows;      /* rows held, released or not */
    int64_t held_bytes;     /* memory they take */
    int64_t waiting_bytes;  /* of which the rows not released yet take (in proportion) */
    int64_t min_offset;     /* the log offset of the earliest record of a held row, -1 none */
    int64_t min_line;       /* its line number */
} ing_state;

/* A round's released rows, sorted by (seq, log offset): valid until the next
 * ing_take on the process. Their manifest cells go to the process's batch. */
typedef struct {
    int64_t rows, lost;
    int64_t first_seq, last_seq;
    int32_t late;           /* first_seq is below the `after_seq` given: rows went out of order */
    const char *stat;
    int64_t stat_n;
    const char *extra;
    int64_t extra_n;
} ing_taken;

/* A row's manifest cells (msprobe_atb/tree/manifest.py COLUMNS) as the kernel
 * keeps them: this head, then each string column in ING_MS order as its
 * length (uint32) and its bytes in names.py's text form (the path column:
 * the tensor path as the record has it, without "data/"). `round`,
 * `round_seq`, `start_ns` and `stat_step` are not in it. */
enum { ING_MI_SEQ, ING_MI_COUNT, ING_MI_NAN, ING_MI_PINF, ING_MI_NINF, ING_MI_ZERO, ING_MI_BYTES,
       ING_MI_TIME, ING_MI_N };
enum { ING_MD_MAX, ING_MD_MIN, ING_MD_MEAN, ING_MD_NORM, ING_MD_N };
enum { ING_MS_OP_ID, ING_MS_OP_NAME, ING_MS_OP_TYPE, ING_MS_STAGE, ING_MS_IO, ING_MS_INDEX,
       ING_MS_DTYPE, ING_MS_FORMAT, ING_MS_SHAPE, ING_MS_PATH, ING_MS_HASH, ING_MS_ALIAS,
       ING_MS_STATUS, ING_MS_NOTE, ING_MS_N };
typedef struct {
    int64_t i[8];           /* ING_MI_* */
    double d[4];            /* ING_MD_* */
    uint32_t valid;         /* not null: bit k i[k], bit 8 + k d[k], bit 12 + k string k */
    uint32_t reserved;
} ing_man_head;

/* Arrow's C data interface (arrow.apache.org/docs/format/CDataInterface.html),
 * through which the manifest rows taken so far are handed over. */
struct ArrowSchema {
    const char *format;
    const char *name;
    const char *metadata;
    int64_t flags;
    int64_t n_children;
    struct ArrowSchema **children;
    struct ArrowSchema *dictionary;
    void (*release)(struct ArrowSchema *);
    void *private_data;
};

struct ArrowArray {
    int64_t length;
    int64_t null_count;
    int64_t offset;
    int64_t n_buffers;
    int64_t n_children;
    const void **buffers;
    struct ArrowArray **children;
    struct ArrowArray *dictionary;
    void (*release)(struct ArrowArray *);
    void *private_data;
};

/* msProbe's names of ATB's dtype (kind 0) and format (kind 1) codes; 0 or -1. */
int ing_set_name(int kind, int64_t code, const char *name, int64_t n);

ing_proc *ing_proc_new(int64_t start_ns);
void ing_proc_free(ing_proc *p);
/* The Tensor Path root (the attach record's output, without trailing '/'). */
int ing_set_root(ing_proc *p, const char *root, int64_t n);

/* Reads whole lines buf[0..len), the log's bytes from `offset` on, line
 * number `line` first. Returns the bytes taken (*lines: the lines in them);
 * *stopped = 1 when it stopped before a line the Python path must read, -1
 * when memory ran out. */
int64_t ing_feed(ing_proc *p, const char *buf, int64_t len, int64_t offset, int64_t line,
                 int64_t *lines, int32_t *stopped);

/* What the Python path made of a line it read: a tensor record's two lines
 * and its manifest cells (an ing_man_head and its strings); a param record;
 * a round record. 0, or -1 when memory ran out. */
int ing_add_row(ing_proc *p, const char *key, int64_t key_n, int64_t seq, int32_t has_seq,
                int64_t t, int64_t offset, int64_t line, int32_t lost, const char *stat,
                int64_t stat_n, const char *extra, int64_t extra_n, const char *man,
                int64_t man_n);
int ing_param(ing_proc *p, const char *key, int64_t key_n, int64_t seq, int32_t has_seq,
              int64_t t, int32_t lost);
int ing_round_said(ing_proc *p, const char *key, int64_t key_n);

/* Releases the rows whose record lies below log offset `below`. */
void ing_release(ing_proc *p, int64_t below);
/* Releases the rows whose seq is below `below_seq`. */
void ing_release_seq(ing_proc *p, int64_t below_seq);

/* The rounds it holds rows of or that were touched since the last call
 * (touches reset); *keys: their keys, back to back. Valid until the next
 * call. Returns their number, -1 when memory ran out. */
int64_t ing_rounds(ing_proc *p, const ing_round **rounds, const char **keys);

/* Rows the round holds (0 for a round it does not know). */
int64_t ing_held(ing_proc *p, const char *key, int64_t key_n);

/* Takes the released rows of a round; their manifest rows (round_seq base,
 * base + 1, ...) join the process's batch. Returns the rows taken (0: none),
 * -1 when memory ran out. */
int64_t ing_take(ing_proc *p, const char *key, int64_t key_n, int64_t base, int64_t after_seq,
                 ing_taken *out);

/* Rows in the process's manifest batch. */
int64_t ing_manifest_rows(ing_proc *p);
/* Hands the batch over as an Arrow struct array of manifest.py's COLUMNS and
 * `_part` (the row's partition, "{dev}_{pid}"), whose memory is the consumer's to release,
 * and starts a new one. 0, or -1 when memory ran out (the rows stay). */
int ing_manifest_export(ing_proc *p, struct ArrowSchema *schema, struct ArrowArray *array);

void ing_get_state(ing_proc *p, ing_state *out);

#endif
