/* The selection rules of docs/msprobe_format.md §5.1-§5.2, evaluated
 * against a config snapshot, without allocation. `dir` is ATB's relative
 * directory "{dev}_{pid}/{exec}/{id}_{Name}[/{id}_{Name}...]" (not
 * NUL-terminated). */
#ifndef MSP_FILTER_H
#define MSP_FILTER_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "msprobe_atb/control.h"

#ifdef __cplusplus
extern "C" {
#endif

#define MSP_MAX_SEGS 64

struct msp_seg {
    const char *p;
    size_t n;
};

/* Splits on '/'. Returns the number of segments, or -1 if more than max. */
int msp_split(const char *s, size_t n, struct msp_seg *segs, int max);

/* Is `count` in the exec ranges? (exec_range "next" adds each model's own rounds:
 * models.h.) */
int msp_exec_selected(const struct msp_config *cfg, uint64_t count);
/* The first count past every exec range (exec_range ranges; UINT64_MAX if one
 * never ends): msp_exec_selected says no from there on. */
uint64_t msp_exec_end(const struct msp_config *cfg);
/* The round ({exec}) and top-level op id of ATB's dir "{dev}_{pid}/{exec}/{id}_{Name}/...";
 * 0 if it has no such shape, MSP_DIR_TOP if dir is that op's own (nothing below it), else 1. */
#define MSP_DIR_TOP 2
int msp_dir_round(const char *dir, size_t n, uint64_t *round, int64_t *top);
/* Device filter: the number before the first '_' of the first segment. */
int msp_device_selected(const struct msp_config *cfg, const char *dir, size_t n);
/* Can dir be a dump directory, "{dev}_{pid}/..."? Its first byte is a digit
 * or '-' (a device id). What ATB passes while IsSaveTensorDesc says no,
 * its runners' names ("LinearOpsRunner", "LinearOpsRunner/0_MatMulKernel"),
 * is not, and is never selected: the hooks tell it from one byte
 * (msp_dump_dir_head: no dump dir's first byte is NUL). */
static inline int msp_dump_dir_head(char c)
{
    /* one range compare for a runner's name: '-' and '0'..'9' are bits 0
     * and 3..12 of the 13 bytes from '-' */
    unsigned d = (unsigned char)(c - '-');
    return d < 13 && ((0x1FF9u >> d) & 1);
}
static inline int msp_dump_dir_shape(const char *dir, size_t n)
{
    return n > 0 && msp_dump_dir_head(dir[0]);
}
/* Op selection by ids / op_name / save_child (device not included); no for
 * a dir not of msp_dump_dir_shape. Otherwise its answer depends only on the op
 * path, what follows "{dev}_{pid}/{exec}/" (selcache.h caches it by that). */
int msp_op_selected(const struct msp_config *cfg, const char *dir, size_t n);
/* Would msp_op_selected select the own directory of top-level op `id` named
 * `name` ("{dev}_{pid}/{exec}/{id}_{name}": its op path is all that counts)?
 * A name too long to be put in a dir here: yes. */
int msp_top_op_selected(const struct msp_config *cfg, int64_t id, const char *name, size_t n);
/* msp_dir_op_path of a dir under 8 bytes (out of line: the inline one then
 * needs no stack). */
const char *msp_dir_op_path_short(const char *dir, size_t n);

static inline uint64_t msp_slash_bytes(uint64_t w) /* 0x80 in each '/' byte of w */
{
    const uint64_t low7 = UINT64_C(0x7F7F7F7F7F7F7F7F);
    uint64_t x = w ^ UINT64_C(0x2F2F2F2F2F2F2F2F);
    return ~(((x & low7) + low7) | x | low7);
}

/* The op path of dir: past its second '/'; NULL if it has fewer (then
 * msp_op_selected says no). Inline, a word at a time: IsSaveTensorInSpecificDir
 * asks it at every call. */
static inline const char *msp_dir_op_path(const char *dir, size_t n)
{
    uint64_t w, slash;
    int seen = 0;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        memcpy(&w, dir + i, 8);
        if ((slash = msp_slash_bytes(w)) && (seen++ || (slash &= slash - 1)))
            return dir + i + (__builtin_ctzll(slash) >> 3) + 1;
    }
    if (i == n)
        return NULL;
    if (n < 8)
        return msp_dir_op_path_short(dir, n);
    memcpy(&w, dir + n - 8, 8); /* the last bytes, from a load that ends at n */
    w >>= 8 * (i + 8 - n);
    if ((slash = msp_slash_bytes(w)) && (seen || (slash &= slash - 1)))
        return dir + i + (__builtin_ctzll(slash) >> 3) + 1;
    return NULL;
}

/* The top-level op ids the config's filters can select at all, when only
 * `ids` filters ops (the first token of each entry; an op_name can pick an
 * op under any top-level op): their count, at most cap, or -1 if any
 * top-level op may be selected. */
int msp_top_ids(const struct msp_config *cfg, int64_t *tops, int cap);

/* Is ATB's tensor path ".../before/intensor*" or ".../after/outtensor*", an op's
 * inputs before it ran and its outputs after (msProbe's tree,
 * docs/msprobe_format.md §5.3)? The other two
 * stages ATB offers are saved only with save_all_stages. */
int msp_default_stage(const char *path, size_t n);

/* Overflow: does kernel dir `dir` belong to ATB's overflow report
 * "<OpType>_<id>_<id>...:<KernelName>" (e.g. LinearOperation_5_3:MatMulKernel)?
 * The op ids, the op's type (the parent segment's name) and the kernel
 * name must all match. */
int msp_kernel_dir_matches(const char *kernel, size_t kn, const char *dir, size_t n);

/* Is `dir` a kernel's directory: does its last segment's name end with
 * "Kernel" (as msProbe documents)? */
int msp_kernel_dir(const char *dir, size_t n);

/* The length of the op directory of an output after it ran
 * ("<dir>/after/outtensor*"), or 0 if `path` is not one. */
size_t msp_after_output_dir(const char *path, size_t n);

/* Is tensor path `path` an output, after it ran, of the kernel ATB's overflow
 * report names ("<kernel dir>/after/outtensor*")? */
int msp_kernel_output_matches(const char *kernel, size_t kn, const char *path, size_t n);

#ifdef __cplusplus
}
#endif

#endif
