/* A growable buffer that builds one JSON object (a record line). Out of
 * memory is sticky (`oom`) and checked once by the caller, so building
 * code stays linear. Commas are inserted automatically before a key or an
 * array element unless the previous byte opened the container or ended a
 * line (a buffer may hold several records, one a line).
 *
 * Numbers are formatted by hand, not by printf (the record path writes
 * ~80k records a second per process, issue 28): integers in decimal, finite
 * doubles exactly, as the hex-float strings Python's float.hex writes and
 * float.fromhex reads. */
#ifndef MSP_JSONW_H
#define MSP_JSONW_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* A record fits the buffer's own room (a tensor's is ~350 bytes), so
 * building one on the stack allocates nothing; a longer one (a graph's
 * JSON) moves to the heap. */
#define JB_LOCAL 1024

struct jbuf {
    char *p;          /* local, or a malloc'd buffer once it grew past it */
    size_t len, cap;  /* cap: room at p; set to len once out of memory */
    int oom;
    char local[JB_LOCAL];
};

/* Starts empty, in the local room if cap_hint fits it. A jbuf is used where
 * it was initialised (p may point into it). */
void jb_init(struct jbuf *b, size_t cap_hint);
void jb_free(struct jbuf *b);
/* Grows the buffer for n more bytes; 0 (and oom set) if it cannot. */
int jb_grow(struct jbuf *b, size_t n);
static inline void jb_raw(struct jbuf *b, const char *s, size_t n)
{
    if (n > b->cap - b->len && !jb_grow(b, n))
        return;
    memcpy(b->p + b->len, s, n);
    b->len += n;
}
/* The comma before a value, unless the previous byte opened a container,
 * ended a key or a line. */
static inline void jb_sep(struct jbuf *b)
{
    if (!b->len)
        return;
    char last = b->p[b->len - 1];
    if (last != '{' && last != '[' && last != ':' && last != '\n')
        jb_raw(b, ",", 1);
}
void jb_open(struct jbuf *b, char c);  /* '{' or '[' (with a comma if needed) */
void jb_close(struct jbuf *b, char c); /* '}' or ']' */
/* n plain bytes (ASCII, nothing to escape) quoted, then ':' if colon. */
static inline void jb_plain(struct jbuf *b, const char *s, size_t n, int colon)
{
    size_t k = n + 2 + (colon != 0);
    jb_sep(b);
    if (k > b->cap - b->len && !jb_grow(b, k))
        return;
    char *o = b->p + b->len;
    o[0] = '"';
    memcpy(o + 1, s, n);
    o[n + 1] = '"';
    if (colon)
        o[n + 2] = ':';
    b->len += k;
}
/* key: a plain ASCII name (a literal, whose length the compiler knows):
 * written as it is, quoted. */
static inline void jb_key(struct jbuf *b, const char *key)
{
    jb_plain(b, key, strlen(key), 1);
}
/* A plain ASCII name (one of the shim's own words: a record's kind, a
 * tensor's task or file): written as it is, quoted, with no escaping. */
static inline void jb_name(struct jbuf *b, const char *name)
{
    jb_plain(b, name, strlen(name), 0);
}
/* Any bytes: control characters become \u00XX, a byte XY of invalid UTF-8
 * becomes \udcXY (Python's surrogateescape, reversed by os.fsencode), so a
 * record line is always valid JSON and a path in it names the real file. */
void jb_str(struct jbuf *b, const char *s, size_t n);
static inline void jb_cstr(struct jbuf *b, const char *s)
{
    jb_str(b, s, strlen(s));
}
void jb_i64(struct jbuf *b, int64_t v);
void jb_u64(struct jbuf *b, uint64_t v);
/* Finite: the exact hex-float string, float.hex's form with its trailing
 * zero digits dropped ("0x1.8p+1" for 3.0, "0x1p+0", "-0x0p+0" for -0.0,
 * subnormals "0x0.<hex>p-1022"); non-finite: "nan", "inf", "-inf". */
void jb_f64(struct jbuf *b, double v);
void jb_bool(struct jbuf *b, int v);
void jb_null(struct jbuf *b);

/* key + value shorthands */
static inline void jb_kstr(struct jbuf *b, const char *key, const char *s, size_t n)
{
    jb_key(b, key);
    jb_str(b, s, n);
}
static inline void jb_kcstr(struct jbuf *b, const char *key, const char *s)
{
    jb_key(b, key);
    jb_cstr(b, s);
}
static inline void jb_kname(struct jbuf *b, const char *key, const char *name)
{
    jb_key(b, key);
    jb_name(b, name);
}
static inline void jb_ki64(struct jbuf *b, const char *key, int64_t v)
{
    jb_key(b, key);
    jb_i64(b, v);
}
static inline void jb_ku64(struct jbuf *b, const char *key, uint64_t v)
{
    jb_key(b, key);
    jb_u64(b, v);
}

#endif
