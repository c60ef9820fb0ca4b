/* The data/ directory the writers write below: its open fd and epoch, which
 * the lifecycle sets, and the directory of a file below it. */
#ifndef MSP_DATADIR_H
#define MSP_DATADIR_H

/* The open data/ directory the writers write below (-1: none), and its epoch,
 * bumped when it names a new data/ tree: the writers then drop the
 * directories they hold open. Atomic. Set by the lifecycle: opened at the
 * first wake, swapped after the tree was removed, closed in a forked child. */
extern int msp_data_fd;
extern unsigned msp_tree_epoch;

/* The open directory of `real` (a path below data/) and, in *base, its
 * file name; -1 with errno if the directory cannot be opened. */
int msp_datadir_open_parent(const char *real, const char **base);

#endif
