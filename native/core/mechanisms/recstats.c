/* The flight recorder's statistics channel: a ring of fixed-size entries in
 * /dev/shm that the control plane reads for its own triggers (recstats.h). */
#define _GNU_SOURCE
#include "recstats.h"

#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "slot.h"
#include "util.h"

struct header {
    uint64_t magic;
    uint32_t version, entry;
    uint64_t cap, head;
    uint64_t reserved[4];
};

struct entry {
    uint64_t seq, t_ns, exec;
    uint32_t kind, has_minmax;
    double max, min, mean, norm;
    uint64_t nan, inf;
    char path[MSP_RECSTATS_ENTRY - 80];
};

_Static_assert(sizeof(struct header) == 64, "header layout");
_Static_assert(sizeof(struct entry) == MSP_RECSTATS_ENTRY, "entry layout");

#define SIZE (sizeof(struct header) + (size_t)MSP_RECSTATS_CAP * MSP_RECSTATS_ENTRY)

static struct header *g_map;
static char g_name[96];

int msp_recstats_open(void)
{
    if (g_map)
        return 0;
    snprintf(g_name, sizeof g_name, "/dev/shm/msprobe-atb-%llu-%llu.stats",
             (unsigned long long)msp_slot.pid, (unsigned long long)msp_slot.start_ns);
    int fd = open(g_name, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0 || ftruncate(fd, (off_t)SIZE) != 0) {
        msp_log("recorder: cannot create %s (%m); the golden and growth_over triggers get no "
                "statistics from this process", g_name);
        if (fd >= 0)
            close(fd);
        return -1;
    }
    void *p = mmap(NULL, SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (p == MAP_FAILED) {
        unlink(g_name);
        return -1;
    }
    madvise(p, SIZE, MADV_DONTFORK);
    struct header *h = p;
    h->version = MSP_RECSTATS_VERSION;
    h->entry = MSP_RECSTATS_ENTRY;
    h->cap = MSP_RECSTATS_CAP;
    __atomic_store_n(&h->head, 0, __ATOMIC_RELEASE);
    __atomic_store_n(&h->magic, MSP_RECSTATS_MAGIC, __ATOMIC_RELEASE);
    g_map = h;
    return 0;
}

static double f64_of(const struct msp_stats *st, int which)
{
    switch (st->kind) {
    case MSP_STATS_INT: return (double)(which ? st->imin : st->imax);
    case MSP_STATS_UINT: return (double)(which ? st->umin : st->umax);
    case MSP_STATS_COMPLEX: return which ? st->cmin[0] : st->cmax[0];
    default: return which ? st->min : st->max;
    }
}

void msp_recstats_put(uint64_t t_ns, uint64_t exec, const struct msp_stats *st, const char *path)
{
    struct header *h = g_map;
    if (!h)
        return;
    uint64_t i = __atomic_load_n(&h->head, __ATOMIC_RELAXED);
    struct entry *e = (struct entry *)(void *)((char *)(h + 1) + (i % MSP_RECSTATS_CAP) *
                                                                   MSP_RECSTATS_ENTRY);
    __atomic_store_n(&e->seq, 0, __ATOMIC_RELEASE);
    e->t_ns = t_ns;
    e->exec = exec;
    e->kind = (uint32_t)st->kind;
    e->has_minmax = (uint32_t)st->has_minmax;
    e->max = f64_of(st, 0);
    e->min = f64_of(st, 1);
    e->mean = st->kind == MSP_STATS_COMPLEX ? st->cmean[0] : st->mean;
    e->norm = st->norm;
    e->nan = st->nan;
    e->inf = st->pinf + st->ninf;
    snprintf(e->path, sizeof e->path, "%s", path);
    __atomic_store_n(&e->seq, i + 1, __ATOMIC_RELEASE);
    __atomic_store_n(&h->head, i + 1, __ATOMIC_RELEASE);
}

void msp_recstats_close(void)
{
    if (!g_map)
        return;
    munmap(g_map, SIZE);
    g_map = NULL;
    unlink(g_name);
}

void msp_recstats_forget(void)
{
    g_map = NULL; /* MADV_DONTFORK: the child has no such mapping */
}
