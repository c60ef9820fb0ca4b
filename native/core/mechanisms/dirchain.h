/* A writer's open directories from the data root down to the last one it
 * wrote in: the next directory opens from the deepest one it shares with it,
 * so an op's directory next to the last one (its layer's) costs a mkdirat and
 * an openat, not a walk from the root (op_param.json under `task: statistics`
 * is one file in a fresh directory per op and round, written by the writer
 * threads whose CPU the host's hooks share). Not thread-safe: one a writer. */
#ifndef MSP_DIRCHAIN_H
#define MSP_DIRCHAIN_H

#include <stddef.h>

#include "msprobe_atb/control.h" /* MSP_PATH_LEN */

#define MSP_DIRCHAIN_LEVELS 16 /* deeper directories share the last level's fd */

struct msp_dirchain {
    char path[MSP_PATH_LEN];          /* the directories open, as one path */
    size_t ends[MSP_DIRCHAIN_LEVELS]; /* where each level's path ends in it */
    int fds[MSP_DIRCHAIN_LEVELS];
    int levels;
    unsigned epoch; /* of the data root its fds are under */
};

/* Empty, without closing: a new writer's, or a forked child's copy. */
void msp_dirchain_forget(struct msp_dirchain *c);
/* The fd of directory `dir` (checked, relative, NUL-terminated) below
 * `root`, made (0750) where missing as msp_open_dir_at does; the chain keeps
 * it open. A chain of another `epoch` (the data root re-created) is closed
 * first. -1 with errno if it cannot. */
int msp_dirchain_open(struct msp_dirchain *c, int root, unsigned epoch, const char *dir);

#endif
