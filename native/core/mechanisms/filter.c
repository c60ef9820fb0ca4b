/* The selection rules of docs/msprobe_format.md §5.1-§5.2 against a config snapshot: exec rounds
 * (ranges, and each model's rounds), devices, op ids and op-name prefixes, the
 * default stages, and which kernel belongs to which op dir (filter.h). */
#include "filter.h"

#include <stdio.h>
#include <string.h>

int msp_split(const char *s, size_t n, struct msp_seg *segs, int max)
{
    int k = 0;
    size_t start = 0;
    for (size_t i = 0; i <= n; i++) {
        if (i < n && s[i] != '/')
            continue;
        if (k == max)
            return -1;
        segs[k].p = s + start;
        segs[k].n = i - start;
        k++;
        start = i + 1;
    }
    return k;
}

static int in_ranges(const struct msp_config *cfg, uint64_t count)
{
    uint32_t nr = cfg->n_ranges < MSP_MAX_RANGES ? cfg->n_ranges : MSP_MAX_RANGES;
    for (uint32_t i = 0; i < nr; i++)
        if (count >= cfg->ranges[i].lo && count <= cfg->ranges[i].hi)
            return 1;
    return 0;
}

int msp_exec_selected(const struct msp_config *cfg, uint64_t count)
{
    switch (cfg->exec_mode) {
    case MSP_EXEC_ALL:
        return 1;
    case MSP_EXEC_RANGES:
        return in_ranges(cfg, count);
    default:
        return 0;
    }
}

uint64_t msp_exec_end(const struct msp_config *cfg)
{
    uint32_t nr = cfg->n_ranges < MSP_MAX_RANGES ? cfg->n_ranges : MSP_MAX_RANGES;
    uint64_t end = 0;
    for (uint32_t i = 0; i < nr; i++) {
        if (cfg->ranges[i].hi == UINT64_MAX)
            return UINT64_MAX;
        if (cfg->ranges[i].lo <= cfg->ranges[i].hi && cfg->ranges[i].hi + 1 > end)
            end = cfg->ranges[i].hi + 1;
    }
    return end;
}

/* Parses an optionally negative decimal of exactly n bytes. */
static int parse_int(const char *p, size_t n, int64_t *out)
{
    size_t i = 0;
    int neg = 0;
    if (n && p[0] == '-') {
        neg = 1;
        i = 1;
    }
    if (i == n || n - i > 18)
        return 0;
    int64_t v = 0;
    for (; i < n; i++) {
        if (p[i] < '0' || p[i] > '9')
            return 0;
        v = v * 10 + (p[i] - '0');
    }
    *out = neg ? -v : v;
    return 1;
}

int msp_device_selected(const struct msp_config *cfg, const char *dir, size_t n)
{
    uint32_t nd = cfg->n_devices < MSP_MAX_DEVICES ? cfg->n_devices : MSP_MAX_DEVICES;
    if (nd == 0)
        return 1;
    const char *us = memchr(dir, '_', n);
    const char *slash = memchr(dir, '/', n);
    if (!us || (slash && slash < us))
        return 0;
    int64_t dev;
    if (!parse_int(dir, (size_t)(us - dir), &dev))
        return 0;
    for (uint32_t i = 0; i < nd; i++)
        if (cfg->devices[i] == dev)
            return 1;
    return 0;
}

int msp_dir_round(const char *dir, size_t n, uint64_t *round, int64_t *top)
{
    struct msp_seg segs[3];
    int64_t r;
    /* only the first three segments matter: split the prefix that holds them */
    const char *end = dir;
    int slashes = 0;
    while (end < dir + n && !(*end == '/' && ++slashes == 3))
        end++;
    if (msp_split(dir, (size_t)(end - dir), segs, 3) != 3)
        return 0;
    const char *us = memchr(segs[2].p, '_', segs[2].n);
    if (!us || !parse_int(segs[1].p, segs[1].n, &r) || r < 0 ||
        !parse_int(segs[2].p, (size_t)(us - segs[2].p), top))
        return 0;
    *round = (uint64_t)r;
    return end == dir + n ? MSP_DIR_TOP : 1;
}

/* An op segment "{id}_{Name}": id is the text before the first '_'. */
struct op_seg {
    const char *id, *name;
    size_t idn, namen;
};

static int op_segs(const struct msp_seg *segs, int nseg, struct op_seg *ops)
{
    for (int i = 2; i < nseg; i++) {
        const char *us = memchr(segs[i].p, '_', segs[i].n);
        if (!us || us == segs[i].p)
            return 0;
        ops[i - 2].id = segs[i].p;
        ops[i - 2].idn = (size_t)(us - segs[i].p);
        ops[i - 2].name = us + 1;
        ops[i - 2].namen = segs[i].n - ops[i - 2].idn - 1;
    }
    return 1;
}

/* Compares entry "a_b_c" with the op's id segments, token by token (so
 * "5" never matches "50" and a name containing "_5" can never be taken for
 * an id). 2: equal, 1: entry is a proper segment prefix, 0: neither. */
static int id_match(const char *entry, const struct op_seg *ops, int nops)
{
    const char *p = entry;
    int k = 0;
    for (;;) {
        const char *us = strchr(p, '_');
        size_t tn = us ? (size_t)(us - p) : strlen(p);
        if (k == nops || tn == 0 || tn != ops[k].idn || memcmp(p, ops[k].id, tn) != 0)
            return 0;
        k++;
        if (!us)
            return k == nops ? 2 : 1;
        p = us + 1;
    }
}

static int prefix_ci(const char *s, size_t n, const char *lower_prefix)
{
    size_t i = 0;
    for (; lower_prefix[i]; i++) {
        if (i == n)
            return 0;
        char c = s[i];
        if (c >= 'A' && c <= 'Z')
            c = (char)(c - 'A' + 'a');
        if (c != lower_prefix[i])
            return 0;
    }
    return 1;
}

int msp_op_selected(const struct msp_config *cfg, const char *dir, size_t n)
{
    struct msp_seg segs[MSP_MAX_SEGS];
    struct op_seg ops[MSP_MAX_SEGS];
    if (!msp_dump_dir_shape(dir, n))
        return 0;
    int nseg = msp_split(dir, n, segs, MSP_MAX_SEGS);
    if (nseg < 3)
        return 0;
    uint32_t nids = cfg->n_ids < MSP_MAX_IDS ? cfg->n_ids : MSP_MAX_IDS;
    uint32_t nnames = cfg->n_op_names < MSP_MAX_OP_NAMES ? cfg->n_op_names : MSP_MAX_OP_NAMES;
    if (nids == 0 && nnames == 0)
        return cfg->save_child ? 1 : nseg == 3;
    if (!op_segs(segs, nseg, ops))
        return 0;
    int nops = nseg - 2;
    for (uint32_t i = 0; i < nids; i++) {
        char entry[MSP_ID_LEN];
        memcpy(entry, cfg->ids[i], MSP_ID_LEN);
        entry[MSP_ID_LEN - 1] = 0;
        int m = id_match(entry, ops, nops);
        if (m == 2 || (m == 1 && cfg->save_child))
            return 1;
    }
    for (uint32_t i = 0; i < nnames; i++) {
        char filt[MSP_OP_NAME_LEN];
        memcpy(filt, cfg->op_names[i], MSP_OP_NAME_LEN);
        filt[MSP_OP_NAME_LEN - 1] = 0;
        if (!filt[0])
            continue;
        /* save_child: a matching op and its whole subtree; otherwise only
         * the op itself (the last segment, at any depth). */
        int first = cfg->save_child ? 0 : nops - 1;
        for (int k = first; k < nops; k++)
            if (prefix_ci(ops[k].name, ops[k].namen, filt))
                return 1;
    }
    return 0;
}

int msp_top_op_selected(const struct msp_config *cfg, int64_t id, const char *name, size_t n)
{
    /* the dir itself, so the answer is msp_op_selected's by construction */
    char dir[512];
    int head = snprintf(dir, sizeof dir, "0_0/0/%lld_", (long long)id);
    if (head < 0 || n >= sizeof dir - (size_t)head)
        return 1;
    memcpy(dir + head, name, n);
    return msp_op_selected(cfg, dir, (size_t)head + n);
}

const char *msp_dir_op_path_short(const char *dir, size_t n)
{
    int seen = 0;
    for (size_t i = 0; i < n; i++)
        if (dir[i] == '/' && seen++)
            return dir + i + 1;
    return NULL;
}

int msp_top_ids(const struct msp_config *cfg, int64_t *tops, int cap)
{
    uint32_t nnames = cfg->n_op_names < MSP_MAX_OP_NAMES ? cfg->n_op_names : MSP_MAX_OP_NAMES;
    for (uint32_t i = 0; i < nnames; i++)
        if (cfg->op_names[i][0])
            return -1;
    uint32_t nids = cfg->n_ids < MSP_MAX_IDS ? cfg->n_ids : MSP_MAX_IDS;
    if (nids == 0 || nids > (uint32_t)cap)
        return -1;
    for (uint32_t i = 0; i < nids; i++) {
        const char *entry = cfg->ids[i];
        const char *nul = memchr(entry, 0, MSP_ID_LEN - 1); /* as msp_op_selected reads it */
        size_t n = nul ? (size_t)(nul - entry) : MSP_ID_LEN - 1;
        const char *us = memchr(entry, '_', n);
        if (!parse_int(entry, us ? (size_t)(us - entry) : n, &tops[i]))
            return -1;
    }
    return (int)nids;
}

static int starts(const char *p, size_t n, const char *lit, size_t litn)
{
    return n >= litn && memcmp(p, lit, litn) == 0;
}

int msp_default_stage(const char *path, size_t n)
{
    const char *end = path + n, *file = end;
    while (file > path && file[-1] != '/')
        file--;
    if (file == path)
        return 0;
    const char *stage = file - 1;
    while (stage > path && stage[-1] != '/')
        stage--;
    size_t stagen = (size_t)(file - 1 - stage), filen = (size_t)(end - file);
    if (stagen == 6 && memcmp(stage, "before", 6) == 0)
        return starts(file, filen, "intensor", 8);
    if (stagen == 5 && memcmp(stage, "after", 5) == 0)
        return starts(file, filen, "outtensor", 9);
    return 0;
}

int msp_kernel_dir_matches(const char *kernel, size_t kn, const char *dir, size_t n)
{
    const char *colon = memchr(kernel, ':', kn);
    if (!colon)
        return 0;
    const char *kname = colon + 1;
    size_t knamen = kn - (size_t)(kname - kernel);
    struct msp_seg segs[MSP_MAX_SEGS];
    struct op_seg ops[MSP_MAX_SEGS];
    int nseg = msp_split(dir, n, segs, MSP_MAX_SEGS);
    if (nseg < 4 || !op_segs(segs, nseg, ops))
        return 0;
    int nops = nseg - 2;
    const struct op_seg *k = &ops[nops - 1], *op = &ops[nops - 2];
    if (k->namen != knamen || memcmp(k->name, kname, knamen) != 0)
        return 0;
    /* "<OpType>_<ids...>": the ids are the trailing "_<digits>" groups, one
     * per op segment above the kernel; the rest is the op's type. */
    const char *end = colon;
    for (int i = nops - 2; i >= 0; i--) {
        const char *p = end;
        while (p > kernel && p[-1] != '_')
            p--;
        if (p == kernel || (size_t)(end - p) != ops[i].idn || memcmp(p, ops[i].id, ops[i].idn))
            return 0;
        end = p - 1;
    }
    size_t typen = (size_t)(end - kernel);
    return typen == op->namen && memcmp(kernel, op->name, typen) == 0;
}

int msp_kernel_dir(const char *dir, size_t n)
{
    const char *seg = dir + n;
    while (seg > dir && seg[-1] != '/')
        seg--;
    size_t segn = (size_t)(dir + n - seg);
    return segn >= 6 && memcmp(seg + segn - 6, "Kernel", 6) == 0;
}

size_t msp_after_output_dir(const char *path, size_t n)
{
    static const char after[] = "/after/";
    const size_t aftern = sizeof after - 1;
    const char *file = path + n;
    while (file > path && file[-1] != '/')
        file--;
    size_t dirn = (size_t)(file - path);
    if (dirn <= aftern || memcmp(file - aftern, after, aftern) != 0 ||
        !starts(file, n - dirn, "outtensor", 9))
        return 0;
    return dirn - aftern;
}

int msp_kernel_output_matches(const char *kernel, size_t kn, const char *path, size_t n)
{
    size_t dirn = msp_after_output_dir(path, n);
    return dirn && msp_kernel_dir_matches(kernel, kn, path, dirn);
}
