/* A growable buffer that builds one JSON object (a record line). Out of
 * memory is sticky (`oom`) and checked once by the caller, so building
 * code stays linear. Commas are inserted automatically before a key or an
 * array element unless the previous byte opened the container. */
#ifndef MSP_JSONW_H
#define MSP_JSONW_H

#include <stddef.h>
#include <stdint.h>

struct jbuf {
    char *p;
    size_t len, cap;
    int oom;
};

void jb_init(struct jbuf *b, size_t cap_hint);
void jb_free(struct jbuf *b);
void jb_raw(struct jbuf *b, const char *s, size_t n);
void jb_open(struct jbuf *b, char c);  /* '{' or '[' (with a comma if needed) */
void jb_close(struct jbuf *b, char c); /* '}' or ']' */
void jb_key(struct jbuf *b, const char *key);
/* Any bytes: control characters become \u00XX, a byte XY of invalid UTF-8
 * becomes \udcXY (Python's surrogateescape, reversed by os.fsencode), so a
 * record line is always valid JSON and a path in it names the real file. */
void jb_str(struct jbuf *b, const char *s, size_t n);
void jb_cstr(struct jbuf *b, const char *s);
void jb_i64(struct jbuf *b, int64_t v);
void jb_u64(struct jbuf *b, uint64_t v);
/* Finite: %.17g (round-trips). Non-finite: the strings "nan", "inf", "-inf". */
void jb_f64(struct jbuf *b, double v);
void jb_bool(struct jbuf *b, int v);
void jb_null(struct jbuf *b);

/* key + value shorthands */
void jb_kstr(struct jbuf *b, const char *key, const char *s, size_t n);
void jb_kcstr(struct jbuf *b, const char *key, const char *s);
void jb_ki64(struct jbuf *b, const char *key, int64_t v);
void jb_ku64(struct jbuf *b, const char *key, uint64_t v);

#endif
