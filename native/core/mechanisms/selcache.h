/* The filters' verdict on an op directory (msp_op_selected), cached per
 * publish, so that IsSaveTensorInSpecificDir, asked several times per
 * runner and kernel at every execution, parses each op's directory once per
 * config instead of at every call.
 *
 * Key: the op path, the directory after "{dev}_{pid}/{exec}/" (the round
 * changes at every execution, the verdict does not depend on it or on the
 * first segment: filter.h), compared in full, never by hash alone. Each entry
 * holds the epoch (one per config snapshot) it was decided under; an entry of
 * another epoch is never used, so an edit takes effect at the next call.
 *
 * Lock-free: host threads look up and insert at once. An entry is a seqlock
 * (a 64-bit version, odd while written): a reader that saw it change takes
 * the slow path. Bounded: a fixed table of MSP_SEL_ENTRIES entries, an op
 * path longer than MSP_SEL_KEY_BYTES is never cached; a new op path takes a
 * free or stale slot among the MSP_SEL_WAYS it may use, else replaces the
 * first of them (its home slot). */
#ifndef MSP_SELCACHE_H
#define MSP_SELCACHE_H

#include <stddef.h>
#include <stdint.h>

#include "msprobe_atb/control.h"

#define MSP_SEL_KEY_WORDS 21
#define MSP_SEL_KEY_BYTES (MSP_SEL_KEY_WORDS * 8)
#define MSP_SEL_WAYS 4

struct msp_selcache;

/* A table of 2^bits entries (192 bytes each), mapped but not touched; NULL
 * without memory. Never freed: hooks of any thread may hold it. */
struct msp_selcache *msp_selcache_new(unsigned bits);

/* msp_op_selected(cfg, dir, n), from the cache when the op path of dir was
 * decided under `epoch` (one per cfg: the caller's config snapshot), else
 * decided now and kept. Epoch 0: not cached (c may then be NULL). */
int msp_selcache_op_selected(struct msp_selcache *c, uint32_t epoch,
                             const struct msp_config *cfg, const char *dir, size_t n);

#endif
