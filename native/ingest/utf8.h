/* UTF-8 as Python's strict decoder takes it (the record log's strings become
 * Python str on the other path). One owner: utf8.c. */
#ifndef MSPROBE_ATB_INGEST_UTF8_H
#define MSPROBE_ATB_INGEST_UTF8_H

#include <stddef.h>

/* Length of the valid UTF-8 sequence at p (1 for ASCII; no surrogates, no
 * overlong forms, nothing past end), 0 if there is none. */
size_t utf8_len(const unsigned char *p, const unsigned char *end);

#endif
