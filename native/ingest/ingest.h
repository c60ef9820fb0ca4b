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
    int64_t min_offset;     /* the log offset of the earliest record of a held row, -1 none */
    int64_t min_line;       /* its line number */
} ing_state;

/* A round's released rows, sorted by (seq, log offset): valid until the next
 * ing_take on the process. */
typedef struct {
    int64_t rows, lost;
    int64_t first_seq, last_seq;
    int32_t late;           /* first_seq is below the `after_seq` given: rows went out of order */
    const char *stat;
    int64_t stat_n;
    const char *extra;
    int64_t extra_n;
    const char *man;        /* manifest lines (their `round` and `round_seq` columns included) */
    int64_t man_n;
} ing_taken;

/* msProbe's names of ATB's dtype (kind 0) and format (kind 1) codes; 0 or -1. */
int ing_set_name(int kind, int64_t code, const char *name, int64_t n);

ing_proc *ing_proc_new(int64_t start_ns);
void ing_proc_free(ing_proc *p);
/* The Tensor Path root (the attach record's output, without trailing '/'). */
int ing_set_root(ing_proc *p, const char *root, int64_t n);

/* Reads whole lines buf[0..len), the log's bytes from `offset` on, line
 * number `line` first. Returns the bytes taken; *stopped = 1 when it stopped
 * before a line the Python path must read, -1 when memory ran out. */
int64_t ing_feed(ing_proc *p, const char *buf, int64_t len, int64_t offset, int64_t line,
                 int32_t *stopped);

/* What the Python path made of a line it read: a tensor record's three lines
 * (`man` from its seq column on); a param record; a round record. 0, or -1
 * when memory ran out. */
int ing_add_row(ing_proc *p, const char *key, int64_t key_n, int64_t seq, int32_t has_seq,
                int64_t t, int64_t offset, int64_t line, int32_t lost, const char *stat,
                int64_t stat_n, const char *extra, int64_t extra_n, const char *man,
                int64_t man_n);
int ing_param(ing_proc *p, const char *key, int64_t key_n, int64_t seq, int32_t has_seq,
              int64_t t, int32_t lost);
int ing_round_said(ing_proc *p, const char *key, int64_t key_n);

/* Releases the rows whose record lies below log offset `below`. */
void ing_release(ing_proc *p, int64_t below);

/* The rounds it holds rows of or that were touched since the last call
 * (touches reset); *keys: their keys, back to back. Valid until the next
 * call. Returns their number, -1 when memory ran out. */
int64_t ing_rounds(ing_proc *p, const ing_round **rounds, const char **keys);

/* Rows the round holds (0 for a round it does not know). */
int64_t ing_held(ing_proc *p, const char *key, int64_t key_n);

/* Takes the released rows of a round; their manifest lines get round_seq
 * base, base + 1, ... Returns the rows taken (0: none), -1 when memory ran out. */
int64_t ing_take(ing_proc *p, const char *key, int64_t key_n, int64_t base, int64_t after_seq,
                 ing_taken *out);

void ing_get_state(ing_proc *p, ing_state *out);

#endif
