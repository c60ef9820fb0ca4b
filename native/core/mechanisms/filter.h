/* The selection rules of spec §5.1-5.2, evaluated against a config
 * snapshot, without allocation. `dir` is ATB's relative directory
 * "{dev}_{pid}/{exec}/{id}_{Name}[/{id}_{Name}...]" (not NUL-terminated). */
#ifndef MSP_FILTER_H
#define MSP_FILTER_H

#include <stddef.h>
#include <stdint.h>

#include "msprobe_atb/control.h"

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
 * 0 if it has no such shape. */
int msp_dir_round(const char *dir, size_t n, uint64_t *round, int64_t *top);
/* Device filter: the number before the first '_' of the first segment. */
int msp_device_selected(const struct msp_config *cfg, const char *dir, size_t n);
/* Op selection by ids / op_name / save_child (device not included). */
int msp_op_selected(const struct msp_config *cfg, const char *dir, size_t n);

/* The top-level op ids the config's filters can select at all, when only
 * `ids` filters ops (the first token of each entry; an op_name can pick an
 * op under any top-level op): their count, at most cap, or -1 if any
 * top-level op may be selected. */
int msp_top_ids(const struct msp_config *cfg, int64_t *tops, int cap);

/* Is ATB's tensor path ".../before/intensor*" or ".../after/outtensor*", an op's
 * inputs before it ran and its outputs after (seed 003's tree)? The other two
 * stages ATB offers are saved only with save_all_stages. */
int msp_default_stage(const char *path, size_t n);

/* Overflow: does kernel dir `dir` belong to ATB's overflow report
 * "<OpType>_<id>_<id>...:<KernelName>" (e.g. LinearOperation_5_3:MatMulKernel)?
 * The op ids, the op's type (the parent segment's name) and the kernel
 * name must all match. */
int msp_kernel_dir_matches(const char *kernel, size_t kn, const char *dir, size_t n);

#endif
