/* filter_level ("same tensor saved once"): msProbe's scheme and what we do
 * instead, docs/msprobe_format.md §5.4 and §10 item 4.
 *
 * Choice: identity by CONTENT, not by graph topology. A tensor is a
 * duplicate when an earlier tensor of the same scope had the same format,
 * dtype, dims and byte-identical payload (hash to find the candidate, then
 * a byte compare against the real file on disk, so a hash collision can
 * never alias different data and an in-place update can never leave a stub
 * pointing at stale bytes). A duplicate becomes a hard link to the first
 * copy (dedup_link.c), so every path still reads the whole tensor; a data= stub
 * only where the file system refuses links. The scope is one top-level layer in one round:
 * "{dev}_{pid}/{exec}/{id}_{Layer}", so stubs always point at a file of the
 * same round, and `_{irName}` file names neither defeat nor break it.
 * All tensors of a scope are routed to one writer thread, in SaveTensor
 * order, so "first occurrence" is deterministic and the real file is
 * renamed into place before any link or stub that names it.
 *
 * Each writer keeps the tables of its last few scopes (bounded memory). */
#ifndef MSP_DEDUP_H
#define MSP_DEDUP_H

#include <stddef.h>
#include <stdint.h>

struct msp_dedup;

struct msp_dedup *msp_dedup_new(void);
void msp_dedup_free(struct msp_dedup *d);

/* Length of the scope prefix of a tensor path (its first three segments),
 * or 0 if the path has fewer than four segments (no dedup then). */
size_t msp_dedup_scope_len(const char *path);

/* Looks for an identical earlier tensor of path's scope (the most recent
 * one if several). On a hit returns
 * its path (relative to the data root; owned by the table, valid until the
 * next call). `same_bytes(real_path, ctx)` must return 1 only if the file
 * holds exactly the same header and payload. */
const char *msp_dedup_find(struct msp_dedup *d, const char *path, uint64_t hash,
                           int (*same_bytes)(const char *real_path, void *ctx), void *ctx);
/* Remembers a written real file. */
void msp_dedup_add(struct msp_dedup *d, const char *path, uint64_t hash);

/* The relative path from the directory of `from` to `to` (both relative to
 * the same root), e.g. "a/b/x.bin" -> "a/c/y.bin" gives "../c/y.bin". */
int msp_relpath(const char *from, const char *to, char *out, size_t cap);

#endif
