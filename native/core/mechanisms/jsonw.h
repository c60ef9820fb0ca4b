/* A growable buffer that builds one JSON object (a record line). Out of
 * memory is sticky (`oom`) and checked once by the caller, so building
 * code stays linear. Commas are inserted automatically before a key or an
 * array element unless the previous byte opened the container or ended a
 * line (a buffer may hold several records, one a line).
 *
 * Numbers are formatted by hand, not by printf (the record path writes
 * ~80k records a second per process): integers in decimal, finite
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

/* Writing in place, a key and its value with one comma check and one room
 * check (a record's fields are most of its cost): jb_at gives the place of
 * the next value, with room for n bytes, or NULL if out of memory; the
 * jb_put_* write there and return the end; jb_end closes the value. */
static inline char *jb_at(struct jbuf *b, size_t n)
{
    jb_sep(b);
    if (n > b->cap - b->len && !jb_grow(b, n))
        return NULL;
    return b->p + b->len;
}
static inline void jb_end(struct jbuf *b, char *end)
{
    b->len = (size_t)(end - b->p);
}
/* n plain bytes (ASCII, nothing to escape), quoted. */
static inline char *jb_put_plain(char *o, const char *s, size_t n)
{
    o[0] = '"';
    memcpy(o + 1, s, n);
    o[n + 1] = '"';
    return o + n + 2;
}
/* A key (plain), quoted, and its colon. */
static inline char *jb_put_key(char *o, const char *key, size_t n)
{
    o = jb_put_plain(o, key, n);
    *o = ':';
    return o + 1;
}
/* The bytes a number takes at most (jb_put_f64's "-0x1.<13>p-1022"). */
#define JB_NUM_MAX 32
char *jb_put_u64(char *o, uint64_t v);
char *jb_put_i64(char *o, int64_t v);
/* Finite: the exact hex-float string, float.hex's form with its trailing
 * zero digits dropped ("0x1.8p+1" for 3.0, "0x1p+0", "-0x0p+0" for -0.0,
 * subnormals "0x0.<hex>p-1022"); non-finite: "nan", "inf", "-inf". */
char *jb_put_f64(char *o, double v);

/* key: a plain ASCII name (a literal, whose length the compiler knows):
 * written as it is, quoted. */
static inline void jb_key(struct jbuf *b, const char *key)
{
    size_t n = strlen(key);
    char *o = jb_at(b, n + 3);
    if (o)
        jb_end(b, jb_put_key(o, key, n));
}
/* A plain ASCII name (one of the shim's own words: a record's kind, a
 * tensor's task or file): written as it is, quoted, with no escaping. */
static inline void jb_name(struct jbuf *b, const char *name)
{
    size_t n = strlen(name);
    char *o = jb_at(b, n + 2);
    if (o)
        jb_end(b, jb_put_plain(o, name, n));
}
/* Any bytes: control characters become \u00XX, a byte XY of invalid UTF-8
 * becomes \udcXY (Python's surrogateescape, reversed by os.fsencode), so a
 * record line is always valid JSON and a path in it names the real file. */
void jb_str(struct jbuf *b, const char *s, size_t n);
static inline void jb_cstr(struct jbuf *b, const char *s)
{
    jb_str(b, s, strlen(s));
}
/* A number, or a key and a number, each with one comma check and one room
 * check. */
#define JB_NUMBER(name, kname, type, put)                                                        \
    static inline void name(struct jbuf *b, type v)                                              \
    {                                                                                            \
        char *o = jb_at(b, JB_NUM_MAX);                                                          \
        if (o)                                                                                   \
            jb_end(b, put(o, v));                                                                \
    }                                                                                            \
    static inline void kname(struct jbuf *b, const char *key, type v)                            \
    {                                                                                            \
        size_t kn = strlen(key);                                                                 \
        char *o = jb_at(b, kn + 3 + JB_NUM_MAX);                                                 \
        if (o)                                                                                   \
            jb_end(b, put(jb_put_key(o, key, kn), v));                                           \
    }
JB_NUMBER(jb_u64, jb_ku64, uint64_t, jb_put_u64)
JB_NUMBER(jb_i64, jb_ki64, int64_t, jb_put_i64)
JB_NUMBER(jb_f64, jb_kf64, double, jb_put_f64)
void jb_bool(struct jbuf *b, int v);
void jb_null(struct jbuf *b);

/* key + value shorthands */
void jb_kstr_n(struct jbuf *b, const char *key, size_t keyn, const char *s, size_t n);
static inline void jb_kstr(struct jbuf *b, const char *key, const char *s, size_t n)
{
    jb_kstr_n(b, key, strlen(key), s, n);
}
static inline void jb_kcstr(struct jbuf *b, const char *key, const char *s)
{
    jb_kstr(b, key, s, strlen(s));
}
static inline void jb_kname_n(struct jbuf *b, const char *key, const char *name, size_t n)
{
    size_t kn = strlen(key);
    char *o = jb_at(b, kn + n + 5);
    if (o)
        jb_end(b, jb_put_plain(jb_put_key(o, key, kn), name, n));
}
static inline void jb_kname(struct jbuf *b, const char *key, const char *name)
{
    jb_kname_n(b, key, name, strlen(name));
}
#endif
