/* A writer's open directory chain (dirchain.h). */
#define _GNU_SOURCE
#include "dirchain.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "fsutil.h"

void msp_dirchain_forget(struct msp_dirchain *c)
{
    c->levels = 0;
    c->path[0] = 0;
}

/* Closes the levels from `keep` down. */
static void close_from(struct msp_dirchain *c, int keep)
{
    while (c->levels > keep)
        close(c->fds[--c->levels]);
    c->path[keep ? c->ends[keep - 1] : 0] = 0;
}

/* How many of the chain's levels `dir` lies in (whole components). */
static int shared_levels(const struct msp_dirchain *c, const char *dir)
{
    int n = 0;
    while (n < c->levels) {
        size_t end = c->ends[n];
        if (strncmp(dir, c->path, end) != 0 || (dir[end] != '/' && dir[end] != 0))
            break;
        n++;
    }
    return n;
}

/* Opens `rel` (one component, or the rest of the path at the last level)
 * below the deepest level (or root) and pushes it as a level ending at `end`. */
static int push(struct msp_dirchain *c, int root, const char *rel, const char *dir, size_t end)
{
    int fd = msp_open_dir_at(c->levels ? c->fds[c->levels - 1] : root, rel, 1);
    if (fd < 0)
        return -1;
    memcpy(c->path, dir, end);
    c->path[end] = 0;
    c->ends[c->levels] = end;
    c->fds[c->levels++] = fd;
    return fd;
}

/* Opens dir from the chain's first `keep` levels on. */
static int walk(struct msp_dirchain *c, int root, const char *dir, size_t len, int keep)
{
    if (keep == MSP_DIRCHAIN_LEVELS && c->ends[keep - 1] < len)
        keep--; /* a full chain: its last level takes the rest of this path */
    close_from(c, keep);
    size_t at = keep ? c->ends[keep - 1] : 0;
    if (len == 0 && !keep)
        return push(c, root, "", dir, 0);
    while (at < len) {
        size_t from = at ? at + 1 : 0; /* past the '/' */
        const char *slash = strchr(dir + from, '/');
        size_t end = slash && c->levels < MSP_DIRCHAIN_LEVELS - 1 ? (size_t)(slash - dir) : len;
        char rel[MSP_PATH_LEN];
        memcpy(rel, dir + from, end - from);
        rel[end - from] = 0;
        if (push(c, root, rel, dir, end) < 0)
            return -1;
        at = end;
    }
    return c->fds[c->levels - 1];
}

int msp_dirchain_open(struct msp_dirchain *c, int root, unsigned epoch, const char *dir)
{
    if (c->epoch != epoch) {
        close_from(c, 0);
        c->epoch = epoch;
    }
    size_t len = strlen(dir);
    if (len >= sizeof c->path) {
        errno = ENAMETOOLONG;
        return -1;
    }
    int keep = shared_levels(c, dir);
    int fd = walk(c, root, dir, len, keep);
    /* a level's directory removed meanwhile (a round given up): from the root,
     * as without the chain */
    if (fd < 0 && keep > 0 && errno == ENOENT)
        fd = walk(c, root, dir, len, 0);
    return fd;
}
