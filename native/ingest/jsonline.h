/* One record line of a record log, parsed into views of the values the
 * derived files need (docs/contracts.md §4). One owner: jsonline.c.
 *
 * The parser is strict and small: a line is taken only when it is a JSON
 * object whose every part it understands as Python's json module would
 * (numbers within 64 bits, strings of valid UTF-8 with escapes it can turn
 * into the bytes Python's surrogateescape gives, no duplicate keys it
 * reads). Anything else is left to the Python path, which stays the
 * reference for what a record means. */
#ifndef ING_JSONLINE_H
#define ING_JSONLINE_H

#include <stddef.h>
#include <stdint.h>

enum jv_type { JV_MISSING = 0, JV_NULL, JV_TRUE, JV_FALSE, JV_INT, JV_FLOAT, JV_STR, JV_ARRAY,
               JV_OBJECT };

/* A value's place in the line. Strings: between the quotes, `escaped` when
 * they hold a backslash. Numbers: the literal (JV_INT also in `i`).
 * Arrays of a stats value: up to two scalar elements in `el` (n_el). */
struct jv {
    uint8_t type;
    uint8_t escaped;
    uint8_t n_el;
    const char *p;
    uint32_t n;
    int64_t i;
    struct jv *el;
};

/* The stats object's members, in this order. */
enum { ST_COUNT, ST_MAX, ST_MIN, ST_MEAN, ST_NORM, ST_NAN, ST_PINF, ST_NINF, ST_ZERO, ST_N };

struct rec_view {
    struct jv k, t, seq, path, format, dtype, dims, size, task, file, hash, alias, note, round,
        stats;
    struct jv st[ST_N];
    struct jv pair[ST_N][2]; /* elements of array-valued stats (complex [re, im]) */
};

/* Parses line[0..n) (without its newline). 1: parsed; 0: left to Python. */
int jl_parse(const char *line, size_t n, struct rec_view *r);

/* A string view's bytes as Python's json + surrogateescape give them
 * (escapes decoded, a lone \udcXY as byte XY). Returns the length written
 * to out (at least v->n bytes of room), or -1 for a string the Python path
 * must judge (a lone surrogate that is no such byte). */
long jl_bytes(const struct jv *v, char *out);

/* Equal to the string literal `lit` (a plain string view). */
#define JL_IS(v, lit) jl_is_n((v), (lit), sizeof(lit) - 1)
int jl_is_n(const struct jv *v, const char *s, size_t n);

#endif
