/* The data/ directory the writers write below, and the directory of a file
 * below it (datadir.h). */
#define _GNU_SOURCE
#include "datadir.h"

#include <stdio.h>
#include <string.h>

#include "msprobe_atb/control.h"

#include "fsutil.h"

int msp_data_fd = -1;
unsigned msp_tree_epoch;

int msp_datadir_open_parent(const char *real, const char **base)
{
    int root = __atomic_load_n(&msp_data_fd, __ATOMIC_ACQUIRE);
    const char *slash = strrchr(real, '/');
    char dir[MSP_PATH_LEN];
    snprintf(dir, sizeof dir, "%.*s", slash ? (int)(slash - real) : 0, real);
    *base = slash ? slash + 1 : real;
    return msp_open_dir_at(root, dir, 0);
}
