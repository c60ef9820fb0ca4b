/* Unit tests of the probe core's pure modules (built with ASan+UBSan).
 * Last line of output: "N passed, N failed". */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "msprobe_atb/content_hash.h"

#include "binfile.h"
#include "dedup.h"
#include "dedup_link.h"
#include "dirchain.h"
#include "dirmemo.h"
#include "dtype.h"
#include "filter.h"
#include "fsutil.h"
#include "jsonw.h"
#include "overflow_finding.h"
#include "pending.h"
#include "recbatch.h"
#include "rounds.h"
#include "queue.h"
#include "ring.h"
#include "ring_overwrite.h"
#include "selcache.h"
#include "stats.h"
#include "stats_simd.h"
#include "tensorscan.h"
#include "util.h"
#include "window.h"

static int g_pass, g_fail;

#define CHECK(cond)                                                                               \
    do {                                                                                          \
        if (cond) {                                                                               \
            g_pass++;                                                                             \
        } else {                                                                                  \
            g_fail++;                                                                             \
            printf("FAIL %s:%d: %s\n", __FILE__, __LINE__, #cond);                                \
        }                                                                                         \
    } while (0)

static struct msp_config cfg_with(const char *ids, const char *names, int save_child)
{
    struct msp_config c;
    memset(&c, 0, sizeof c);
    c.save_child = (uint32_t)save_child;
    char buf[512];
    snprintf(buf, sizeof buf, "%s", ids);
    for (char *t = strtok(buf, ","); t; t = strtok(NULL, ","))
        snprintf(c.ids[c.n_ids++], MSP_ID_LEN, "%s", t);
    snprintf(buf, sizeof buf, "%s", names);
    for (char *t = strtok(buf, ","); t; t = strtok(NULL, ","))
        snprintf(c.op_names[c.n_op_names++], MSP_OP_NAME_LEN, "%s", t);
    return c;
}

static int sel(const struct msp_config *c, const char *dir)
{
    return msp_op_selected(c, dir, strlen(dir));
}

static void test_filters(void)
{
    struct msp_config c = cfg_with("", "", 0);
    CHECK(sel(&c, "0_1/0/2_Layer") == 1);
    CHECK(sel(&c, "0_1/0/2_Layer/0_Linear") == 0);
    CHECK(sel(&c, "0_1/0") == 0);
    c.save_child = 1;
    CHECK(sel(&c, "0_1/0/2_Layer/0_Linear/1_MatMulKernel") == 1);

    c = cfg_with("5", "", 0);
    CHECK(sel(&c, "0_1/0/5_Layer") == 1);
    CHECK(sel(&c, "0_1/0/50_Layer") == 0);
    CHECK(sel(&c, "0_1/0/5_Layer/0_Linear") == 0);
    c.save_child = 1;
    CHECK(sel(&c, "0_1/0/5_Layer/0_Linear") == 1);
    CHECK(sel(&c, "0_1/0/50_Layer/0_Linear") == 0);
    /* a name containing "_5" is never taken for an id */
    CHECK(sel(&c, "0_1/0/7_Prefill_5/0_Linear") == 0);

    c = cfg_with("2_1", "", 0);
    CHECK(sel(&c, "0_1/0/2_Layer/1_Linear") == 1);
    CHECK(sel(&c, "0_1/0/2_Layer/1_Linear/0_K") == 0);
    CHECK(sel(&c, "0_1/0/2_Layer/10_Linear") == 0);
    CHECK(sel(&c, "0_1/0/2_Layer") == 0);

    c = cfg_with("", "linear", 0);
    CHECK(sel(&c, "0_1/0/2_Layer/1_LinearOperation") == 1);
    CHECK(sel(&c, "0_1/0/2_Layer/1_LinearOperation/0_MatMulKernel") == 0);
    CHECK(sel(&c, "0_1/0/2_Layer/0_LinearKernel") == 1);
    c.save_child = 1;
    CHECK(sel(&c, "0_1/0/2_Layer/1_LinearOperation/0_MatMulKernel") == 1);
    CHECK(sel(&c, "0_1/0/2_Layer/1_Other") == 0);

    /* union of ids and op_name; a failing id does not hide the name */
    c = cfg_with("9", "layer", 0);
    CHECK(sel(&c, "0_1/0/2_Layer") == 1);
    CHECK(sel(&c, "0_1/0/9_Embedding") == 1);
    CHECK(sel(&c, "0_1/0/3_Embedding") == 0);
    /* a segment without '_' and filters set */
    CHECK(sel(&c, "0_1/0/Layer") == 0);
    /* a runner's name (ATB's dirs while IsSaveTensorDesc says no) is no dump
     * dir, whatever follows it */
    c = cfg_with("1", "", 1);
    CHECK(sel(&c, "-1_4/0/1_Layer") == 1);
    CHECK(sel(&c, "LinearOpsRunner/5/1_Foo") == 0);
    CHECK(sel(&c, "/5/1_Foo") == 0);

    c = cfg_with("", "", 0);
    CHECK(msp_device_selected(&c, "3_77/0/1_A", 10) == 1);
    c.n_devices = 2;
    c.devices[0] = 0;
    c.devices[1] = -1;
    CHECK(msp_device_selected(&c, "0_77/0/1_A", 10) == 1);
    CHECK(msp_device_selected(&c, "-1_77/0/1_A", 11) == 1);
    CHECK(msp_device_selected(&c, "3_77/0/1_A", 10) == 0);
    CHECK(msp_device_selected(&c, "x_77/0", 6) == 0);

    c.exec_mode = MSP_EXEC_RANGES;
    c.n_ranges = 2;
    c.ranges[0].lo = 0; c.ranges[0].hi = 2;
    c.ranges[1].lo = 5; c.ranges[1].hi = 5;
    CHECK(msp_exec_selected(&c, 0) && msp_exec_selected(&c, 2) && msp_exec_selected(&c, 5));
    CHECK(!msp_exec_selected(&c, 3) && !msp_exec_selected(&c, 6));
    /* the hooks tell a count from msp_exec_end on no without asking */
    CHECK(msp_exec_end(&c) == 6);
    c.ranges[0].hi = UINT64_MAX;
    CHECK(msp_exec_end(&c) == UINT64_MAX);
    c.ranges[0].hi = 2;
    c.exec_mode = MSP_EXEC_NONE;
    CHECK(!msp_exec_selected(&c, 0));
    c.exec_mode = MSP_EXEC_ALL;
    CHECK(msp_exec_selected(&c, 123456));

    uint64_t round = 0;
    int64_t top = -1;
    const char *rd = "0_77/59/12_Decoder_layer/3_Linear/before";
    CHECK(msp_dir_round(rd, strlen(rd), &round, &top) == 1 && round == 59 && top == 12);
    const char *rd2 = "0_77/7/3_LmHead";
    CHECK(msp_dir_round(rd2, strlen(rd2), &round, &top) == MSP_DIR_TOP && round == 7 && top == 3);
    CHECK(!msp_dir_round("0_77/x/3_A", 10, &round, &top));
    CHECK(!msp_dir_round("0_77/5", 6, &round, &top));
    CHECK(!msp_dir_round("0_77/5/Layer", 12, &round, &top));

    const char *k = "LinearOperation_5_3:MatMulKernel";
    const char *d1 = "0_1/0/5_Layer/3_LinearOperation/0_MatMulKernel";
    CHECK(msp_kernel_dir_matches(k, strlen(k), d1, strlen(d1)));
    const char *d2 = "0_1/0/5_Layer/4_LinearOperation/0_MatMulKernel";
    CHECK(!msp_kernel_dir_matches(k, strlen(k), d2, strlen(d2)));
    const char *d3 = "0_1/0/5_Layer/3_LinearOperation/0_AddKernel";
    CHECK(!msp_kernel_dir_matches(k, strlen(k), d3, strlen(d3)));
    const char *k2 = "Prefill_layer_5:GatherKernel";
    const char *d4 = "0_1/0/5_Prefill_layer/1_GatherKernel";
    CHECK(msp_kernel_dir_matches(k2, strlen(k2), d4, strlen(d4)));
    /* the overflowing kernel's outputs after it ran, nothing else of its dir */
    static const struct {
        const char *path;
        int want;
    } outs[] = {
        {"0_1/0/5_Layer/3_LinearOperation/0_MatMulKernel/after/outtensor0.bin", 1},
        {"0_1/0/5_Layer/3_LinearOperation/0_MatMulKernel/after/intensor0.bin", 0},
        {"0_1/0/5_Layer/3_LinearOperation/0_MatMulKernel/before/outtensor0.bin", 0},
        {"0_1/0/5_Layer/3_LinearOperation/after/outtensor0.bin", 0},
        {"/after/outtensor0", 0},
    };
    for (size_t i = 0; i < sizeof outs / sizeof outs[0]; i++)
        CHECK(msp_kernel_output_matches(k, strlen(k), outs[i].path, strlen(outs[i].path)) ==
              outs[i].want);
}

/* What ATB's overflow scan misses, in a buffer of 5 elements with one planted
 * at each position (the word loop and its tail). */
static void test_overflow_finding(void)
{
    static const struct {
        int dtype;
        uint16_t bits;
        int nonfinite;
        enum msp_ovf_finding want;
    } half[] = {
        {MSP_DT_FLOAT16, 0x7C00, 1, MSP_OVF_NONE},      /* fp16 +Inf: ATB reports it */
        {MSP_DT_FLOAT16, 0xFC00, 1, MSP_OVF_NONE},
        {MSP_DT_FLOAT16, 0x7E00, 1, MSP_OVF_NAN},       /* NaN: never reported */
        {MSP_DT_FLOAT16, 0x7BFF, 0, MSP_OVF_NONE},      /* 65504 */
        {MSP_DT_BF16, 0x7F80, 1, MSP_OVF_BF16_PINF},    /* an fp16 NaN to ATB */
        {MSP_DT_BF16, 0xFF80, 1, MSP_OVF_BF16_NINF},
        {MSP_DT_BF16, 0x7FC0, 1, MSP_OVF_NAN},
        {MSP_DT_BF16, 0x7C00, 0, MSP_OVF_NONE},         /* finite 2^121, an fp16 Inf to ATB */
    };
    for (size_t i = 0; i < sizeof half / sizeof half[0]; i++)
        for (int at = 0; at < 5; at++) {
            uint16_t buf[5] = {0x3C00, 0x3C00, 0x3C00, 0x3C00, 0x3C00};
            buf[at] = half[i].bits;
            CHECK(msp_ovf_nonfinite(half[i].dtype, buf, sizeof buf) == half[i].nonfinite);
            CHECK(msp_ovf_classify(half[i].dtype, buf, sizeof buf) == half[i].want);
        }
    /* a bf16 Inf beside a 0x7C00: ATB reports the tensor */
    uint16_t both[2] = {0x7F80, 0x7C00};
    CHECK(msp_ovf_classify(MSP_DT_BF16, both, sizeof both) == MSP_OVF_NONE);
    float f[3] = {1.0f, NAN, 2.0f};
    CHECK(msp_ovf_nonfinite(MSP_DT_FLOAT, f, sizeof f));
    CHECK(msp_ovf_classify(MSP_DT_FLOAT, f, sizeof f) == MSP_OVF_NAN);
    f[2] = -INFINITY;
    CHECK(msp_ovf_classify(MSP_DT_FLOAT, f, sizeof f) == MSP_OVF_NONE);
    double d[2] = {1.0, INFINITY};
    CHECK(msp_ovf_classify(MSP_DT_DOUBLE, d, sizeof d) == MSP_OVF_UNSCANNED_INF);
    int32_t ints[2] = {-1, 0x7F800000};
    CHECK(!msp_ovf_nonfinite(MSP_DT_INT32, ints, sizeof ints));
    CHECK(!strcmp(msp_ovf_finding_name(MSP_OVF_BF16_PINF), "bf16_pinf"));

    const char *kd = "0_1/0/5_Layer/3_LinearOperation/0_MatMulKernel";
    CHECK(msp_kernel_dir(kd, strlen(kd)) && !msp_kernel_dir(kd, strlen(kd) - 16));
    const char *out = "0_1/0/5_Layer/3_LinearOperation/after/outtensor0.bin";
    CHECK(msp_after_output_dir(out, strlen(out)) == strlen("0_1/0/5_Layer/3_LinearOperation"));
    CHECK(msp_after_output_dir(out, strlen(out) - 16) == 0);
}

static void test_paths(void)
{
    CHECK(msp_path_check("0_1/0/2_L/before/intensor0.bin", 29) == NULL);
    CHECK(msp_path_check("/abs/x.bin", 10) != NULL);
    CHECK(msp_path_check("a//b", 4) != NULL);
    CHECK(msp_path_check("a/../b", 6) != NULL);
    CHECK(msp_path_check("a/./b", 5) != NULL);
    CHECK(msp_path_check("a/b/", 4) != NULL);
    CHECK(msp_path_check("a/\nb", 4) != NULL);
    CHECK(msp_path_check("a\0b", 3) != NULL);
    CHECK(msp_path_check("", 0) != NULL);
    char longc[300];
    memset(longc, 'x', sizeof longc);
    CHECK(msp_path_check(longc, 256) != NULL);
    CHECK(msp_path_check(longc, 255) == NULL);
    /* a control character at any place of an 8-byte word is found; the bytes
     * around the control range are not control characters */
    char p[] = "0_1/0/2_Layer/before/intensor0.bin";
    int found = 1, clean = 1;
    for (size_t at = 0; at < sizeof p - 1; at++) {
        static const unsigned char control[] = {0x00, 0x01, 0x1f, 0x7f};
        static const unsigned char not[] = {0x20, 0x7e, 0x80, 0xff};
        char was = p[at];
        for (size_t k = 0; k < sizeof control; k++) {
            p[at] = (char)control[k];
            found &= msp_path_check(p, sizeof p - 1) != NULL &&
                     !strcmp(msp_path_check(p, sizeof p - 1), "control character in path");
            p[at] = (char)not[k];
            clean &= msp_path_check(p, sizeof p - 1) == NULL ||
                     strcmp(msp_path_check(p, sizeof p - 1), "control character in path") != 0;
        }
        p[at] = was;
    }
    CHECK(found && clean);
    char rel[256];
    CHECK(msp_relpath("a/b/c/x.bin", "a/b/y.bin", rel, sizeof rel) == 0 && !strcmp(rel, "../y.bin"));
    CHECK(msp_relpath("a/b/x.bin", "a/b/y.bin", rel, sizeof rel) == 0 && !strcmp(rel, "y.bin"));
    CHECK(msp_relpath("a/b/c/d/x.bin", "a/b/e/y.bin", rel, sizeof rel) == 0 &&
          !strcmp(rel, "../../e/y.bin"));
    CHECK(msp_relpath("a/bc/x.bin", "a/b/y.bin", rel, sizeof rel) == 0 && !strcmp(rel, "../b/y.bin"));
    CHECK(msp_dedup_scope_len("0_1/0/2_L/before/x.bin") == strlen("0_1/0/2_L"));
    CHECK(msp_dedup_scope_len("0_1/0/x.bin") == 0);
}

/* msp_written_fn of the aligned writes: the bytes written so far, rising. */
/* What an aligned write told: every byte announced ahead, in order, before
 * it is written; the whole blocks written. */
struct heard {
    size_t ahead, written;
};

static void note_ahead(void *arg, size_t off, size_t end)
{
    struct heard *h = arg;
    CHECK(off == h->ahead && end > off && off == h->written);
    h->ahead = end;
}

static void note_written(void *arg, size_t done)
{
    struct heard *h = arg;
    CHECK(done > h->written && done <= h->ahead && done % MSP_DIO_ALIGN == 0);
    h->written = done;
}

static void test_fs(void)
{
    char tmpl[] = "/tmp/msp_test_XXXXXX";
    char *root = mkdtemp(tmpl);
    CHECK(root != NULL);
    int rfd = open(root, O_RDONLY | O_DIRECTORY);
    int d = msp_open_dir_at(rfd, "a/b/c", 1);
    CHECK(d >= 0);
    struct iovec iov[2] = {{"hello ", 6}, {"world", 5}};
    CHECK(msp_write_file_at(d, "f.txt", iov, 2) == 0);
    CHECK(msp_write_file_at(d, "f.txt", iov, 1) == 0); /* replaced, not appended */
    struct stat st;
    CHECK(fstatat(d, "f.txt", &st, 0) == 0 && st.st_size == 6 && (st.st_mode & 0137) == 0);
    /* one writev of several parts, empty ones included */
    struct iovec parts[4] = {{"ab", 2}, {"", 0}, {"cde", 3}, {"", 0}};
    CHECK(msp_write_file_at(d, "g.txt", parts, 4) == 0);
    char got[8] = {0};
    int g = openat(d, "g.txt", O_RDONLY);
    CHECK(g >= 0 && read(g, got, sizeof got) == 5 && memcmp(got, "abcde", 5) == 0);
    close(g);
    CHECK(msp_write_file_at(d, "h.txt", parts, MSP_WRITE_IOV_MAX + 1) == -EINVAL);
    /* O_DIRECT for the whole blocks, the rest through the page cache: the same
     * bytes for sizes below, at and past block and piece boundaries */
    const size_t sizes[] = {0, 1, 4095, 4096, 4097, 3 * 4096 + 5, (64 << 20) + 4096 + 9};
    unsigned char *buf = NULL;
    CHECK(posix_memalign((void **)&buf, MSP_DIO_ALIGN, sizes[6]) == 0);
    for (size_t i = 0; buf && i < sizes[6]; i++)
        buf[i] = (unsigned char)(i * 131 + i / 4096);
    for (size_t k = 0; buf && k < sizeof sizes / sizeof *sizes; k++) {
        struct heard heard = {0, 0};
        struct msp_write_hooks hooks = {note_ahead, note_written, &heard};
        CHECK(msp_write_aligned_file_at(d, "dio.bin", buf, sizes[k], &hooks) == 0);
        CHECK(heard.written == (sizes[k] & ~(size_t)(MSP_DIO_ALIGN - 1))); /* every whole block */
        CHECK(heard.ahead == sizes[k] || (sizes[k] == 0 && heard.ahead == 0));
        int f = openat(d, "dio.bin", O_RDONLY);
        unsigned char *back = malloc(sizes[k] + 1);
        CHECK(f >= 0 && back && read(f, back, sizes[k] + 1) == (ssize_t)sizes[k] &&
              memcmp(back, buf, sizes[k]) == 0);
        free(back);
        close(f);
    }
    free(buf);
    close(d);
    /* a symlink in the tree is never followed */
    char link[512];
    snprintf(link, sizeof link, "%s/a/evil", root);
    CHECK(symlink("/tmp", link) == 0);
    errno = 0;
    CHECK(msp_open_dir_at(rfd, "a/evil/x", 1) < 0);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf %s", root);
    close(rfd);
    CHECK(system(cmd) == 0);
}

/* Open fds of the process, counted in /proc/self/fd. */
static int open_fds(void)
{
    int n = 0;
    DIR *d = opendir("/proc/self/fd");
    for (struct dirent *e; d && (e = readdir(d));)
        n += e->d_name[0] != '.';
    if (d)
        closedir(d);
    return n;
}

/* A writer's directory chain: an op's directory next to the last one opens
 * from their layer's (one level more open, not the whole path), a directory
 * removed under it is made again from the root, a new epoch starts over. */
static void test_dirchain(void)
{
    char tmpl[] = "/tmp/msp_test_XXXXXX";
    char *root = mkdtemp(tmpl);
    CHECK(root != NULL);
    int rfd = open(root, O_RDONLY | O_DIRECTORY);
    struct msp_dirchain c = {.epoch = 1};
    msp_dirchain_forget(&c);
    int base = open_fds();
    int a = msp_dirchain_open(&c, rfd, 1, "0_1/0/1_layer/0_op");
    CHECK(a >= 0 && c.levels == 4 && open_fds() == base + 4);
    CHECK(msp_dirchain_open(&c, rfd, 1, "0_1/0/1_layer/0_op") == a); /* the same: no syscall */
    int b = msp_dirchain_open(&c, rfd, 1, "0_1/0/1_layer/1_op");
    CHECK(b >= 0 && c.levels == 4 && open_fds() == base + 4);
    CHECK(msp_dirchain_open(&c, rfd, 1, "0_1/0/1_layer/1_op/x") >= 0 && c.levels == 5);
    CHECK(msp_dirchain_open(&c, rfd, 1, "0_1/0/1_layerx") >= 0 && c.levels == 3);
    struct stat st;
    CHECK(fstatat(rfd, "0_1/0/1_layer/0_op", &st, 0) == 0 && S_ISDIR(st.st_mode));
    CHECK(fstatat(rfd, "0_1/0/1_layerx", &st, 0) == 0 && (st.st_mode & 0777) == 0750);
    /* its round removed under it: made again, from the root */
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf %s/0_1/0", root);
    CHECK(system(cmd) == 0);
    CHECK(msp_dirchain_open(&c, rfd, 1, "0_1/0/2_layer") >= 0);
    CHECK(fstatat(rfd, "0_1/0/2_layer", &st, 0) == 0 && S_ISDIR(st.st_mode));
    /* a symlink in the tree is never followed, from a kept level either */
    snprintf(cmd, sizeof cmd, "%s/0_1/0/evil", root);
    CHECK(symlink("/tmp", cmd) == 0);
    CHECK(msp_dirchain_open(&c, rfd, 1, "0_1/0/evil/x") < 0);
    /* deeper than its levels: the last level takes the rest */
    char deep[2 * (MSP_DIRCHAIN_LEVELS + 3)] = "";
    for (int i = 0; i < MSP_DIRCHAIN_LEVELS + 3; i++)
        strcat(deep, i ? "/d" : "d");
    CHECK(msp_dirchain_open(&c, rfd, 1, deep) >= 0 && c.levels == MSP_DIRCHAIN_LEVELS);
    deep[strlen(deep) - 2] = 0; /* its parent: within the last level, which is reopened */
    CHECK(msp_dirchain_open(&c, rfd, 1, deep) >= 0 && c.levels == MSP_DIRCHAIN_LEVELS);
    /* another epoch: every level closed first */
    CHECK(msp_dirchain_open(&c, rfd, 2, "0_1") >= 0 && c.levels == 1 &&
          open_fds() == base + 1);
    snprintf(cmd, sizeof cmd, "rm -rf %s", root);
    close(rfd);
    CHECK(system(cmd) == 0);
}

/* XXH64's published values, and the same hash fed in pieces of every shape. */
static void test_content_hash(void)
{
    CHECK(msp_content_hash("", 0) == 0xef46db3751d8e999ULL);
    CHECK(msp_content_hash("a", 1) == 0xd24ec4f1a98c6e5bULL);
    CHECK(msp_content_hash("abc", 3) == 0x44bc2cf5ad770999ULL);
    unsigned char buf[773];
    for (int i = 0; i < 768; i++)
        buf[i] = (unsigned char)i;
    memcpy(buf + 768, "xyz12", 5);
    uint64_t whole = msp_content_hash(buf, sizeof buf);
    CHECK(whole == 0x9b7d50c047818b1bULL); /* python: xxhash.xxh64_intdigest */
    static const size_t steps[] = {1, 3, 31, 32, 33, 64, 100, 500};
    for (size_t k = 0; k < sizeof steps / sizeof steps[0]; k++) {
        struct msp_hash_state h;
        msp_content_hash_init(&h);
        for (size_t off = 0; off < sizeof buf; off += steps[k])
            msp_content_hash_update(&h, buf + off,
                                    sizeof buf - off < steps[k] ? sizeof buf - off : steps[k]);
        CHECK(msp_content_hash_final(&h) == whole);
    }
}

static void test_binfile(void)
{
    char buf[512];
    int n = msp_bin_header(buf, sizeof buf, "2", "1", "2,2", 8, NULL);
    const char *want = "$Version=1.0\n$Object.Count=1\n$Object.Length=8\nformat=2\ndtype=1\n"
                       "dims=2,2\n$Object.data=0,8\n$End=1\n";
    CHECK(n == (int)strlen(want) && !memcmp(buf, want, (size_t)n));
    n = msp_bin_header(buf, sizeof buf, "2", "1", "2,2", 8, "../x.bin");
    const char *stub = "$Version=1.0\n$Object.Count=0\n$Object.Length=0\nformat=2\ndtype=1\n"
                       "dims=2,2\ndata=../x.bin\n$End=1\n";
    CHECK(n == (int)strlen(stub) && !memcmp(buf, stub, (size_t)n));
    CHECK(msp_bin_header(buf, 10, "2", "1", "2,2", 8, NULL) == -1);
}

/* The vectorised pass (fp32/fp16/bf16) against a plain double loop over
 * the decoded values: lengths around the 8-lane step, NaN/Inf/zero
 * anywhere, all-NaN heads. */
static void test_stats_simd(void)
{
    enum { N = 1037 };
    static float f[N];
    static uint16_t h[N], bf[N];
    uint32_t x = 12345;
    for (int i = 0; i < N; i++) {
        x = x * 1103515245u + 12345u;
        float v = (float)((int)(x >> 8) % 20001 - 10000) / 997.0f;
        if (i % 97 == 5) v = NAN;
        if (i % 89 == 7) v = INFINITY;
        if (i % 83 == 11) v = -INFINITY;
        if (i % 13 == 3) v = 0.0f;
        f[i] = v;
        h[i] = (uint16_t)(i % 97 == 5 ? 0x7e00 : i % 89 == 7 ? 0x7c00 : i % 83 == 11 ? 0xfc00
                          : i % 13 == 3 ? 0 : (x >> 9) % 0x7c00 | (i & 1 ? 0x8000 : 0));
        uint32_t bits;
        memcpy(&bits, &f[i], 4);
        bf[i] = (uint16_t)(bits >> 16);
    }
    const void *bufs[3] = {f, h, bf};
    int dtypes[3] = {0, 1, 27};
    size_t esz[3] = {4, 2, 2};
    size_t lens[] = {1, 7, 8, 9, 15, 16, 17, 64, N};
    for (int k = 0; k < 3; k++)
        for (size_t li = 0; li < sizeof lens / sizeof lens[0]; li++) {
            size_t n = lens[li];
            double sum = 0, sq = 0, mx = -INFINITY, mn = INFINITY;
            uint64_t nan = 0, pinf = 0, ninf = 0, zero = 0;
            for (size_t i = 0; i < n; i++) {
                double v = k == 0 ? f[i] : k == 1 ? msp_fp16_to_float(h[i])
                                              : msp_bf16_to_float(bf[i]);
                sum += v;
                sq += v * v;
                if (v != v) { nan++; continue; }
                pinf += v == INFINITY;
                ninf += v == -INFINITY;
                zero += v == 0;
                mx = v > mx ? v : mx;
                mn = v < mn ? v : mn;
            }
            struct msp_stats s;
            char note[64];
            CHECK(msp_stats_compute(dtypes[k], bufs[k], n * esz[k], &s, note, sizeof note) == 0);
            CHECK(s.nan == nan && s.pinf == pinf && s.ninf == ninf && s.zero == zero);
            CHECK(s.has_minmax == (nan < n));
            CHECK(nan == n || (s.max == mx && s.min == mn));
            CHECK((isnan(sum) && isnan(s.mean)) || s.mean == sum / (double)n ||
                  fabs(s.mean - sum / (double)n) <= 1e-12 * fabs(sum / (double)n));
            CHECK((isnan(sq) && isnan(s.norm)) || (isinf(sq) && isinf(s.norm)) ||
                  fabs(s.norm - sqrt(sq)) <= 1e-12 * sqrt(sq));
        }
    float nans[9] = {NAN, NAN, NAN, NAN, NAN, NAN, NAN, NAN, 2.0f};
    struct msp_stats s;
    char note[64];
    CHECK(msp_stats_compute(0, nans, sizeof nans, &s, note, sizeof note) == 0 &&
          s.has_minmax && s.max == 2.0 && s.min == 2.0 && s.nan == 8);
}

/* ---- every path of the float statistics against a reference ---- */

/* fp32, fp16, bf16: their dtype codes and element sizes */
static const int g_fdt[3] = {0, 1, 27};
static const size_t g_fsize[3] = {4, 2, 2};
static const char *const g_fname[3] = {"fp32", "fp16", "bf16"};

static uint64_t g_rng = 88172645463325252ull;

static uint32_t rnd32(void)
{
    g_rng ^= g_rng << 13;
    g_rng ^= g_rng >> 7;
    g_rng ^= g_rng << 17;
    return (uint32_t)(g_rng >> 16);
}

static double decoded(int k, const unsigned char *p, size_t i)
{
    if (k == 0) {
        float f;
        memcpy(&f, p + 4 * i, 4);
        return f;
    }
    uint16_t h;
    memcpy(&h, p + 2 * i, 2);
    return k == 1 ? msp_fp16_to_float(h) : msp_bf16_to_float(h);
}

static void put_bits(int k, unsigned char *p, size_t i, uint32_t bits)
{
    if (k == 0) {
        memcpy(p + 4 * i, &bits, 4);
    } else {
        uint16_t h = (uint16_t)bits;
        memcpy(p + 2 * i, &h, 2);
    }
}

/* v: 0, or a normal value of at most 8 significant bits, as all three dtypes hold it */
static void put_value(int k, unsigned char *p, size_t i, float v)
{
    uint32_t bits;
    memcpy(&bits, &v, 4);
    if (k == 1) {
        int e;
        float f = frexpf(fabsf(v), &e); /* |v| = f * 2^e, f in [0.5, 1) */
        bits = (bits >> 16 & 0x8000) |
               (v == 0 ? 0 : (uint32_t)(e + 14) << 10 | (uint32_t)((f * 2 - 1) * 1024));
    } else if (k == 2) {
        bits >>= 16;
    }
    put_bits(k, p, i, bits);
}

/* Raw patterns of the special values, both NaN signs and several payloads. */
static uint32_t special_bits(int k, uint32_t which)
{
    static const uint32_t f32[] = {0x7fc00000, 0x7f800001, 0xffc00000, 0xffffffff, 0x7f800000,
                                   0xff800000, 0x00000000, 0x80000000, 0x00000001, 0x80000001};
    static const uint32_t f16[] = {0x7e00, 0x7c01, 0xfe00, 0xffff, 0x7c00,
                                   0xfc00, 0x0000, 0x8000, 0x0001, 0x8001};
    static const uint32_t b16[] = {0x7fc0, 0x7f81, 0xffc0, 0xffff, 0x7f80,
                                   0xff80, 0x0000, 0x8000, 0x0001, 0x8001};
    const uint32_t *t = k == 0 ? f32 : k == 1 ? f16 : b16;
    return t[which % 10]; /* NaN x4, +Inf, -Inf, +0, -0, ± the smallest subnormal */
}

/* What a plain double loop over the decoded values gives; max prefers +0 to -0
 * and min -0 to +0. abssum bounds the rounding of the sums. */
struct float_ref {
    uint64_t nan, pinf, ninf, zero;
    int seen;
    double max, min, sum, sumsq, abssum;
};

static struct float_ref float_reference(int k, const unsigned char *p, size_t n)
{
    struct float_ref r = {0};
    for (size_t i = 0; i < n; i++) {
        double v = decoded(k, p, i);
        r.sum += v;
        r.sumsq += v * v;
        r.abssum += fabs(v);
        if (v != v) {
            r.nan++;
            continue;
        }
        r.pinf += v == INFINITY;
        r.ninf += v == -INFINITY;
        r.zero += v == 0;
        if (!r.seen || v > r.max || (v == r.max && !signbit(v)))
            r.max = v;
        if (!r.seen || v < r.min || (v == r.min && signbit(v)))
            r.min = v;
        r.seen = 1;
    }
    return r;
}

/* got within n roundings of want (scale: the sum of magnitudes behind it), or both
 * the same non-finite value; exact when exact is set. */
static int near(double got, double want, double scale, size_t n, int exact)
{
    if (want != want)
        return got != got;
    if (isinf(want) || exact)
        return got == want;
    return fabs(got - want) <= 2.0 * (double)n * 0x1p-53 * scale;
}

static int same_double(double a, double b)
{
    return !memcmp(&a, &b, sizeof a);
}

/* The statistics of n elements at p, by the vector pass and by the scalar loop
 * alone, each against the reference; exact: the sums are exact in any order. */
static void check_float_paths(int k, const unsigned char *p, size_t n, int exact, const char *what)
{
    struct float_ref r = float_reference(k, p, n);
    for (int scalar = 0; scalar < 2; scalar++) {
        msp_stats_simd_off(scalar);
        struct msp_stats s;
        char note[64];
        int ok = msp_stats_compute(g_fdt[k], p, n * g_fsize[k], &s, note, sizeof note) == 0 &&
                 s.count == n && s.nan == r.nan && s.pinf == r.pinf && s.ninf == r.ninf &&
                 s.zero == r.zero && s.has_minmax == r.seen &&
                 (!r.seen || (same_double(s.max, r.max) && same_double(s.min, r.min))) &&
                 near(s.mean, r.sum / (double)n, r.abssum / (double)n, n, exact) &&
                 near(s.norm, sqrt(r.sumsq), sqrt(r.sumsq), n, exact);
        CHECK(ok);
        if (!ok)
            printf("  %s %s n=%zu %s: nan %llu/%llu pinf %llu/%llu ninf %llu/%llu zero %llu/%llu"
                   " max %a/%a min %a/%a mean %a/%a norm %a/%a\n",
                   g_fname[k], scalar ? "scalar" : "vector", n, what,
                   (unsigned long long)s.nan, (unsigned long long)r.nan,
                   (unsigned long long)s.pinf, (unsigned long long)r.pinf,
                   (unsigned long long)s.ninf, (unsigned long long)r.ninf,
                   (unsigned long long)s.zero, (unsigned long long)r.zero, s.max, r.max, s.min,
                   r.min, s.mean, r.sum / (double)n, s.norm, sqrt(r.sumsq));
    }
    msp_stats_simd_off(0);
}

/* Fills n elements: k/16 values (|k| < 256, exact in all three dtypes, so every
 * sum is exact in any order), and 1 in `every` a special value (0: none). */
static void fill_exact(int k, unsigned char *p, size_t n, uint32_t every)
{
    for (size_t i = 0; i < n; i++) {
        uint32_t x = rnd32();
        if (every && x % every == 0)
            put_bits(k, p, i, special_bits(k, x / every));
        else
            put_value(k, p, i, (float)((int)(x % 511) - 255) / 16.0f);
    }
}

static void test_stats_paths(void)
{
    enum { BIG = (2 << 14) * 16 + 37 }; /* two blocks of lane counters and a tail */
    unsigned char *buf = malloc(BIG * 4 + 4);
    CHECK(buf);
    if (!buf)
        return;
    struct msp_float_acc probe = {0};
    uint16_t ones[16] = {0};
    if (!msp_stats_simd(1, ones, 16, &probe, NULL))
        printf("  (this CPU has no AVX2/F16C/FMA: the vector pass is not tested)\n");
    for (int k = 0; k < 3; k++) {
        for (size_t n = 1; n <= 70; n++) {
            /* unaligned too: the start one element in */
            for (size_t off = 0; off < 2; off++) {
                unsigned char *p = buf + off * g_fsize[k];
                fill_exact(k, p, n, 0);
                check_float_paths(k, p, n, 1, "k/16");
                fill_exact(k, p, n, 3);
                check_float_paths(k, p, n, 0, "k/16, dense specials");
                fill_exact(k, p, n, 23);
                check_float_paths(k, p, n, 0, "k/16, sparse specials");
                for (size_t i = 0; i < n; i++) /* any pattern: all exponents, subnormals */
                    put_bits(k, p, i, rnd32());
                check_float_paths(k, p, n, 0, "random patterns");
                for (size_t i = 0; i < n; i++)
                    put_bits(k, p, i, special_bits(k, rnd32() % 4));
                check_float_paths(k, p, n, 0, "all NaN");
                put_value(k, p, n - 1, -2.5f);
                check_float_paths(k, p, n, 0, "NaN and a last -2.5");
                for (size_t i = 0; i < n; i++) /* only negative values, -Inf and -0 */
                    put_bits(k, p, i, rnd32() % 3 ? special_bits(k, rnd32() % 2 ? 5 : 7)
                                                  : special_bits(k, 9));
                put_value(k, p, n / 2, -1.0f);
                check_float_paths(k, p, n, 0, "negative");
                for (size_t i = 0; i < n; i++) /* zeros of both signs */
                    put_bits(k, p, i, special_bits(k, 6 + rnd32() % 2));
                check_float_paths(k, p, n, 1, "zeros");
                for (size_t i = 0; i < n; i++)
                    put_bits(k, p, i, special_bits(k, 7));
                check_float_paths(k, p, n, 1, "-0 only");
            }
        }
        fill_exact(k, buf, BIG, 0);
        check_float_paths(k, buf, BIG, 1, "large k/16");
        fill_exact(k, buf, BIG, 4099);
        check_float_paths(k, buf, BIG, 0, "large k/16, sparse specials");
        memset(buf, 0, BIG * g_fsize[k]); /* every lane counts zeros across blocks */
        check_float_paths(k, buf, BIG, 1, "large zeros");
        for (size_t i = 0; i < BIG; i++)
            put_bits(k, buf, i, special_bits(k, 4 + i % 2));
        check_float_paths(k, buf, BIG, 0, "large ±Inf");
    }
    free(buf);
}

/* The writer's one pass (tensorscan.h) against the two passes it replaces,
 * msp_stats_compute and msp_content_hash of the whole payload, bit for bit:
 * every dtype with statistics and two without, random bytes (NaN and Inf
 * patterns included) and random finite values (every byte's bit 6 clear: no
 * float's exponent is all ones, so the sums are not NaN and show their
 * rounding), odd lengths around the pieces, unaligned starts,
 * scanned whole or through the odd ends an O_DIRECT writer asks for, with the
 * vector pass and without it. */
static void test_tensorscan(void)
{
    static const int dtypes[] = {0, 1, 27, 11, 2, 6, 3, 9, 4, 7, 8, 10, 12, 16, 35, 36, 29, 13};
    const size_t piece = MSP_STATS_PIECE;
    /* the sizes: whole pieces, and elements more (or fewer) */
    static const struct {
        long pieces, elems;
    } sizes[] = {{0, 1}, {0, 3}, {0, 17}, {0, 33}, {0, 1001}, {1, -1}, {1, 0}, {1, 3}, {2, -1},
                 {2, 17}};
    const size_t cap = 2 * piece + 17 * 8 + 8;
    unsigned char *buf = malloc(cap);
    CHECK(buf);
    if (!buf)
        return;
    const size_t ndt = sizeof dtypes / sizeof dtypes[0];
    for (size_t run = 0; run < 2 * ndt; run++) {
        size_t k = run % ndt;
        for (size_t i = 0; i < cap; i++) /* the second round finite */
            buf[i] = (unsigned char)(rnd32() & (run < ndt ? 0xff : 0xbf));
        size_t esize = msp_dtype_bits(dtypes[k]) / 8 ? msp_dtype_bits(dtypes[k]) / 8 : 1;
        for (size_t e = 0; e < sizeof sizes / sizeof sizes[0]; e++) {
            size_t size = (size_t)(sizes[e].pieces * (long)piece + sizes[e].elems * (long)esize);
            for (size_t off = 0; off < 8; off += 3) { /* 0, 3, 6 bytes in */
                const unsigned char *p = buf + off;
                for (int scalar = 0; scalar < (k < 3 ? 2 : 1); scalar++) { /* vector dtypes */
                    msp_stats_simd_off(scalar);
                    struct msp_stats want, got;
                    char wnote[128] = "", gnote[128] = "";
                    int wrc = msp_stats_compute(dtypes[k], p, size, &want, wnote, sizeof wnote);
                    uint64_t whash = msp_content_hash(p, size);
                    for (int odd = 0; odd < 2; odd++) {
                        struct msp_scan scan;
                        msp_scan_begin(&scan, dtypes[k], size, gnote, sizeof gnote);
                        /* whole, or through ends a writer's pieces less a header give */
                        for (size_t end = odd ? 4096 - 37 : size; end < size; end += 777777)
                            msp_scan_through(&scan, p, end);
                        msp_scan_through(&scan, p, size);
                        uint64_t ghash = 0;
                        memset(&got, 0, sizeof got);
                        int grc = msp_scan_end(&scan, &got, &ghash);
                        int ok = grc == wrc && ghash == whash && !strcmp(gnote, wnote) &&
                                 (wrc != 0 || !memcmp(&got, &want, sizeof got));
                        CHECK(ok);
                        if (!ok)
                            printf("  scan dtype %d size %zu off %zu scalar %d odd %d: rc %d/%d"
                                   " hash %016llx/%016llx mean %a/%a norm %a/%a\n",
                                   dtypes[k], size, off, scalar, odd, grc, wrc,
                                   (unsigned long long)ghash, (unsigned long long)whash,
                                   got.mean, want.mean, got.norm, want.norm);
                    }
                }
            }
        }
    }
    msp_stats_simd_off(0);
    free(buf);
}

static void test_stats(void)
{
    char note[128];
    struct msp_stats s;
    /* fp16 edge cases: exact decode */
    CHECK(msp_fp16_to_float(0x3c00) == 1.0f);
    CHECK(msp_fp16_to_float(0xc000) == -2.0f);
    CHECK(msp_fp16_to_float(0x0001) == ldexpf(1, -24)); /* smallest subnormal */
    CHECK(msp_fp16_to_float(0x03ff) == ldexpf(1023, -24));
    CHECK(msp_fp16_to_float(0x7bff) == 65504.0f);
    CHECK(isinf(msp_fp16_to_float(0x7c00)) && msp_fp16_to_float(0xfc00) < 0);
    CHECK(isnan(msp_fp16_to_float(0x7e00)));
    CHECK(signbit(msp_fp16_to_float(0x8000)) && msp_fp16_to_float(0x8000) == 0);
    CHECK(msp_bf16_to_float(0x3f80) == 1.0f && msp_bf16_to_float(0xc040) == -3.0f);
    CHECK(isnan(msp_bf16_to_float(0x7fc0)));
    CHECK(msp_fp8_e4m3fn_to_float(0x38) == 1.0f && msp_fp8_e4m3fn_to_float(0x7e) == 448.0f);
    CHECK(isnan(msp_fp8_e4m3fn_to_float(0x7f)) && msp_fp8_e4m3fn_to_float(0x01) == ldexpf(1, -9));
    CHECK(msp_fp8_e5m2_to_float(0x3c) == 1.0f && isinf(msp_fp8_e5m2_to_float(0x7c)));

    float f[] = {1.0f, -3.0f, 0.0f, 2.5f};
    CHECK(msp_stats_compute(0, f, sizeof f, &s, note, sizeof note) == 0);
    CHECK(s.count == 4 && s.max == 2.5 && s.min == -3.0 && s.mean == 0.125 && s.zero == 1);
    CHECK(fabs(s.norm - sqrt(1 + 9 + 6.25)) < 1e-12);
    /* tiny values keep full precision (msProbe printed 0.000000) */
    float tiny[] = {1e-7f, 1e-7f};
    CHECK(msp_stats_compute(0, tiny, sizeof tiny, &s, note, sizeof note) == 0 &&
          s.max == (double)1e-7f);
    /* all-NaN: no ±FLT_MAX */
    float nans[] = {NAN, NAN};
    CHECK(msp_stats_compute(0, nans, sizeof nans, &s, note, sizeof note) == 0);
    CHECK(!s.has_minmax && s.nan == 2 && isnan(s.mean));
    struct jbuf b;
    jb_init(&b, 64);
    msp_stats_json(&b, &s);
    jb_raw(&b, "", 1);
    CHECK(strstr(b.p, "\"max\":\"nan\"") && strstr(b.p, "\"min\":\"nan\""));
    jb_free(&b);
    /* infinities */
    float infs[] = {INFINITY, -INFINITY, 1.0f};
    CHECK(msp_stats_compute(0, infs, sizeof infs, &s, note, sizeof note) == 0 && s.pinf == 1 &&
          s.ninf == 1 && isinf(s.max) && isinf(s.min) && isnan(s.mean));
    uint16_t h[] = {0x3c00, 0x7c00, 0x0001, 0x8000};
    CHECK(msp_stats_compute(1, h, sizeof h, &s, note, sizeof note) == 0 && s.pinf == 1 &&
          s.zero == 1 && s.min == 0 && isinf(s.max));
    uint16_t bf[] = {0x3f80, 0xc040};
    CHECK(msp_stats_compute(27, bf, sizeof bf, &s, note, sizeof note) == 0 && s.max == 1 &&
          s.min == -3 && s.mean == -1);
    int64_t big[] = {INT64_MAX, INT64_MIN, 0};
    CHECK(msp_stats_compute(9, big, sizeof big, &s, note, sizeof note) == 0 &&
          s.kind == MSP_STATS_INT && s.imax == INT64_MAX && s.imin == INT64_MIN && s.zero == 1);
    uint64_t ubig[] = {UINT64_MAX, 3};
    CHECK(msp_stats_compute(10, ubig, sizeof ubig, &s, note, sizeof note) == 0 &&
          s.umax == UINT64_MAX && s.umin == 3);
    uint8_t bools[] = {0, 1, 7};
    CHECK(msp_stats_compute(12, bools, sizeof bools, &s, note, sizeof note) == 0 &&
          s.imax == 1 && s.imin == 0 && fabs(s.mean - 2.0 / 3) < 1e-15);
    int8_t i8[] = {-128, 127};
    CHECK(msp_stats_compute(2, i8, sizeof i8, &s, note, sizeof note) == 0 && s.imin == -128 &&
          s.imax == 127 && s.mean == -0.5);
    float cx[] = {3, 4, 0, 1, 1, 0};
    CHECK(msp_stats_compute(16, cx, sizeof cx, &s, note, sizeof note) == 0 &&
          s.kind == MSP_STATS_COMPLEX && s.cmax[0] == 3 && s.cmax[1] == 4 && s.norm == sqrt(27));
    double d[] = {0.1, 0.2};
    CHECK(msp_stats_compute(11, d, sizeof d, &s, note, sizeof note) == 0 && s.max == 0.2);
    CHECK(msp_stats_compute(29, d, 4, &s, note, sizeof note) == -1 &&
          !strcmp(note, "unsupported dtype int4"));
    CHECK(msp_stats_compute(0, f, 0, &s, note, sizeof note) == -1 && !strcmp(note, "empty tensor"));
    CHECK(msp_stats_compute(0, f, 7, &s, note, sizeof note) == -1);
    CHECK(msp_stats_compute(999, f, 4, &s, note, sizeof note) == -1);
}

/* The text jb_f64 gives v, unquoted, in out. */
static const char *f64_text(double v, char out[64])
{
    struct jbuf b;
    jb_init(&b, 0);
    jb_f64(&b, v);
    snprintf(out, 64, "%.*s", (int)(b.len - 2), b.p + 1);
    jb_free(&b);
    return out;
}

static uint64_t xorshift(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

/* Every finite double is written exactly: strtod reads back the same bits,
 * and the text is glibc's %a (float.hex's form less its trailing zeros). */
static void test_json_f64(void)
{
    char t[64], a[64];
    int exact = 1, as_a = 1;
    uint64_t seed = 0x9e3779b97f4a7c15u;
    static const uint64_t special[] = {
        0, UINT64_C(1) << 63,                  /* +-0.0 */
        1, UINT64_C(0x000fffffffffffff),        /* the smallest and largest subnormals */
        UINT64_C(0x8000000000000001), UINT64_C(0x0010000000000000), /* smallest normal */
        UINT64_C(0x7fefffffffffffff), UINT64_C(0xffefffffffffffff), /* +-DBL_MAX */
        UINT64_C(0x3ff0000000000000), UINT64_C(0x4008000000000000)};
    for (int i = 0; i < 200000; i++) {
        uint64_t bits = i < (int)(sizeof special / sizeof *special) ? special[i] : xorshift(&seed);
        if (i % 3 == 0) /* a third subnormal or zero-exponent patterns */
            bits &= UINT64_C(0x800fffffffffffff);
        double v;
        memcpy(&v, &bits, sizeof v);
        if (!isfinite(v))
            continue;
        f64_text(v, t);
        double back = strtod(t, NULL);
        uint64_t got;
        memcpy(&got, &back, sizeof got);
        if (got != bits && exact) {
            exact = 0;
            printf("FAIL hex float %016llx -> %s -> %016llx\n", (unsigned long long)bits, t,
                   (unsigned long long)got);
        }
        snprintf(a, sizeof a, "%a", v);
        if (strcmp(a, t) != 0 && as_a) {
            as_a = 0;
            printf("FAIL hex float %016llx: %s, %%a %s\n", (unsigned long long)bits, t, a);
        }
    }
    CHECK(exact && as_a);
    CHECK(!strcmp(f64_text(3.0, t), "0x1.8p+1") && !strcmp(f64_text(-0.0, t), "-0x0p+0"));
    CHECK(!strcmp(f64_text(0.0, t), "0x0p+0") && !strcmp(f64_text(1.0, t), "0x1p+0"));
    CHECK(!strcmp(f64_text(5e-324, t), "0x0.0000000000001p-1022"));
    CHECK(!strcmp(f64_text(0.1, t), "0x1.999999999999ap-4"));
}

/* Strings of random pieces, each with its own escaped form, so every
 * alignment of a byte to escape within the 8-byte words jb_str scans is met. */
static void test_json_strings(void)
{
    static const char *const piece[][2] = {
        {"a", "a"}, {"Z", "Z"}, {"/", "/"}, {" ", " "}, {"\x7f", "\x7f"}, {"\"", "\\\""},
        {"\\", "\\\\"}, {"\x01", "\\u0001"}, {"\x1f", "\\u001f"}, {"\xff", "\\udcff"},
        {"\xc3\xa9", "\xc3\xa9"}};
    uint64_t seed = 12345;
    int ok = 1;
    for (int t = 0; t < 3000 && ok; t++) {
        char in[256], want[512];
        size_t n = 0, wn = 0;
        want[wn++] = '"';
        for (int k = (int)(xorshift(&seed) % 40); k > 0; k--) {
            const char *const *p = piece[xorshift(&seed) % (sizeof piece / sizeof *piece)];
            memcpy(in + n, p[0], strlen(p[0]));
            n += strlen(p[0]);
            memcpy(want + wn, p[1], strlen(p[1]));
            wn += strlen(p[1]);
        }
        want[wn++] = '"';
        struct jbuf b;
        jb_init(&b, 0);
        jb_str(&b, in, n);
        ok = b.len == wn && !memcmp(b.p, want, wn);
        if (!ok)
            printf("FAIL jb_str: %.*s, want %.*s\n", (int)b.len, b.p, (int)wn, want);
        jb_free(&b);
    }
    CHECK(ok);
}

static void test_json(void)
{
    struct jbuf b;
    jb_init(&b, 8);
    jb_open(&b, '{');
    jb_kstr(&b, "a", "q\"\\\n\x01\xff\xc3\xa9", 8);
    jb_key(&b, "n");
    jb_f64(&b, 0.1);
    jb_key(&b, "i");
    jb_f64(&b, -INFINITY);
    jb_key(&b, "f");
    jb_f64(&b, -3.0);
    jb_key(&b, "g");
    jb_f64(&b, 1e300);
    jb_ki64(&b, "lo", INT64_MIN);
    jb_ku64(&b, "hi", UINT64_MAX);
    jb_ki64(&b, "z", 0);
    jb_ki64(&b, "m", -7);
    jb_close(&b, '}');
    jb_raw(&b, "", 1);
    CHECK(!strcmp(b.p, "{\"a\":\"q\\\"\\\\\\u000a\\u0001\\udcff\xc3\xa9\","
                       "\"n\":\"0x1.999999999999ap-4\",\"i\":\"-inf\",\"f\":\"-0x1.8p+1\","
                       "\"g\":\"0x1.7e43c8800759cp+996\",\"lo\":-9223372036854775808,"
                       "\"hi\":18446744073709551615,\"z\":0,\"m\":-7}"));
    jb_free(&b);
    /* a record longer than the local room moves to the heap, and a second
     * record after a line's end takes no comma */
    jb_init(&b, 0);
    char big[3000];
    memset(big, 'x', sizeof big);
    jb_open(&b, '{');
    jb_kstr(&b, "s", big, sizeof big);
    jb_raw(&b, "}\n", 2);
    jb_open(&b, '{');
    jb_close(&b, '}');
    CHECK(b.p != b.local && b.len == sizeof big + 11 && !memcmp(b.p + b.len - 4, "}\n{}", 4));
    jb_free(&b);
}

#define META (sizeof(struct msp_item) + 32)

static struct msp_item *reserved(struct msp_queue *q, uint64_t payload, uint64_t budget)
{
    struct msp_item *it = NULL;
    int rc = msp_queue_reserve(q, META, payload, 0, budget, 0, &it);
    CHECK(rc == MSP_PUSH_OK && it && it->cost >= META + payload);
    if (it) { /* ASan: both parts are ours, whole */
        it->seq = 0;
        it->kind = MSP_ITEM_TENSOR;
        it->task = MSP_TASK_STATISTICS; /* its record alone: weight 1 */
        memset(it + 1, 0x11, 32);
        memset(it->data, 0x5a, payload);
    }
    return it;
}

/* The item, then its payload (aligned) in one region of the ring. */
static int in_ring(const struct msp_queue *q, const struct msp_item *it, uint64_t payload)
{
    return it->in_ring && (const unsigned char *)it >= q->ring.base + 64 &&
           it->data >= (const unsigned char *)(it + 1) &&
           it->data + payload <= q->ring.base + q->ring.size && ((uintptr_t)it->data & 63) == 0;
}

/* The next popped item of list w, one at a time: the rest of the run a pop
 * took (msp_queue_pop) waits in *rest, already in flight. */
static struct msp_item *one_of_run(struct msp_queue *q, int w, struct msp_item **rest)
{
    struct msp_item *it = *rest ? *rest : msp_queue_pop(q, w, MSP_POP_WAIT);
    *rest = it->next;
    it->next = NULL;
    return it;
}

/* The one ring's load and regions (ring.h), apart from any client. */
static void test_ring(void)
{
    struct msp_ring_load l = {0, 0};
    CHECK(msp_ring_fits(&l, 100, 100) && !msp_ring_fits(&l, 101, 100));
    msp_ring_charge(&l, 60);
    msp_ring_charge(&l, 30);
    msp_ring_refund(&l, 60);
    CHECK(l.bytes == 30 && l.peak == 90);
    CHECK(msp_ring_fits(&l, 70, 100) && !msp_ring_fits(&l, 71, 100));
    /* a sum past 2^64 is no room, whatever it wraps to */
    l.bytes = UINT64_MAX - 1;
    CHECK(!msp_ring_fits(&l, 4, UINT64_MAX) && !msp_ring_fits(&l, UINT64_MAX, UINT64_MAX));

    const uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);
    CHECK(msp_ring_size_for(3 * page + 5) == 3 * page && msp_ring_size_for(page - 1) == 0);
    struct msp_ring r = {0};
    struct msp_ring_mapping none = msp_ring_remap(&r, 2 * page, 2 * page);
    CHECK(none.p == NULL && r.base && r.size == 2 * page && r.soft == 2 * page);
    /* a lap: two halves fill it, a third waits for the first one's release */
    struct msp_ring_region *a = msp_ring_alloc(&r, page, 1);
    struct msp_ring_region *b = msp_ring_alloc(&r, page, 1);
    CHECK(a && b && (unsigned char *)a == r.base && a->busy == MSP_REGION_BUSY);
    CHECK(msp_ring_alloc(&r, MSP_RING_ALIGN, 1) == NULL && msp_ring_span(&r) == 2 * page);
    msp_ring_free(&r, a);
    CHECK(r.tail == page);
    struct msp_ring_region *c = msp_ring_alloc(&r, MSP_RING_ALIGN, 1);
    CHECK((unsigned char *)c == r.base && r.reached == 2 * page && r.span_peak == 2 * page);
    /* out of order: the tail waits for the region in front of it */
    msp_ring_free(&r, c);
    CHECK(r.tail == page);
    msp_ring_free(&r, b);
    CHECK(r.head == 0 && r.tail == 0 && r.pads == 0); /* empty: at 0 again */
    /* past the soft end with room at the front: a pad to the end, then at 0 */
    r.soft = page;
    a = msp_ring_alloc(&r, page / 2, 1);
    msp_ring_free(&r, msp_ring_alloc(&r, page / 4, 1)); /* the tail waits for a */
    /* past soft, and a still lives at the front: no room there */
    CHECK(msp_ring_alloc(&r, page / 2, 0) == NULL && r.soft == page);
    b = msp_ring_alloc(&r, page / 2, 1); /* a burst runs on past soft */
    CHECK(b && (unsigned char *)b == r.base + page * 3 / 4 && r.soft == 2 * page);
    msp_ring_free(&r, a);
    r.soft = page;
    c = msp_ring_alloc(&r, page / 2, 1); /* at 5/4, past soft, the front is free: a pad */
    CHECK(c && (unsigned char *)c == r.base && r.pads == page * 3 / 4 && r.soft == page);
    msp_ring_free(&r, b);
    CHECK(r.pads == 0 && r.tail == 2 * page);
    /* a region given back from its front as it is written */
    struct msp_ring_region *rest = msp_ring_split(&r, c, 4 * MSP_RING_ALIGN);
    CHECK((unsigned char *)rest == r.base + 4 * MSP_RING_ALIGN &&
          rest->len == page / 2 - 4 * MSP_RING_ALIGN && r.tail == 2 * page + 4 * MSP_RING_ALIGN);
    CHECK(msp_ring_below(&r, page / 2 + MSP_RING_ALIGN) && !msp_ring_below(&r, page / 4));
    msp_ring_free(&r, rest);
    CHECK(msp_ring_below(&r, 1));
    struct msp_ring_mapping old = msp_ring_remap(&r, 0, 0);
    CHECK(old.n == 2 * page && r.base == NULL && r.size == 0);
    msp_ring_unmap(old);
}

/* A pad's header is written where the head stands, which may be the soft end
 * itself when a region ended there: `reached` covers it, so a trim gives back
 * the page it faulted in (it once stayed: `reached` counted regions only). */
static void test_ring_pad_at_the_soft_end(void)
{
    const uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);
    struct msp_ring r = {0};
    msp_ring_remap(&r, 4 * page, 2 * page);
    struct msp_ring_region *a = msp_ring_alloc(&r, page, 0);
    struct msp_ring_region *b = msp_ring_alloc(&r, page, 0); /* ends at the soft end */
    msp_ring_free(&r, a);
    CHECK(r.reached == 2 * page);
    struct msp_ring_region *c = msp_ring_alloc(&r, page / 2, 0); /* a pad at 2 pages, c at 0 */
    CHECK(c && (unsigned char *)c == r.base && r.pads == 2 * page);
    CHECK(r.reached == 2 * page + MSP_RING_HDR);
    msp_ring_free(&r, b);
    msp_ring_free(&r, c);
    msp_ring_unmap(msp_ring_remap(&r, 0, 0));
}

/* Past the soft end with room at the front, but live regions over half of
 * soft: the head would soon meet the tail at the front, so the ring grows on
 * (its soft end past the region, in huge pages, at most the ring). */
static void test_ring_busy_grows(void)
{
    const uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);
    struct msp_ring r = {0};
    msp_ring_remap(&r, 8 * page, 2 * page);
    struct msp_ring_region *a = msp_ring_alloc(&r, page / 2, 1);
    struct msp_ring_region *b = msp_ring_alloc(&r, page * 5 / 4, 1);
    msp_ring_free(&r, a); /* the front's half page free; b spans 5/4 of a page */
    struct msp_ring_region *c = msp_ring_alloc(&r, page / 2, 1);
    CHECK(c && (unsigned char *)c == r.base + page * 7 / 4 && r.pads == 0 && r.soft == 8 * page);
    msp_ring_free(&r, b);
    msp_ring_free(&r, c);
    msp_ring_unmap(msp_ring_remap(&r, 0, 0));
}

static void free_scope(struct msp_ow_scope *s, void *arg)
{
    (void)arg;
    free(s);
}

/* A held heap item of `payload` bytes at `path` in round `rd`. */
static struct msp_item *held(struct msp_ow *r, const char *path, uint64_t payload)
{
    struct msp_item *it;
    CHECK(msp_item_heap_alloc(sizeof *it + 64, payload, 0, &it) == MSP_PUSH_OK);
    it->path = (char *)(it + 1);
    snprintf(it->path, 64, "%s", path);
    it->pathn = (uint32_t)strlen(it->path);
    uint64_t exec;
    struct msp_ow_scope *s = msp_ow_scope_of(r, path, strlen(path), &exec);
    struct msp_ow_round *rd = s->newest && s->newest->exec == exec ? s->newest
                                                                     : msp_ow_open(r, s, exec, 0);
    msp_ow_add(r, rd, it);
    return it;
}

/* The overwrite policy: whole rounds, oldest first, make room; never a round
 * in progress; its load is the ring's. */
static void test_ring_overwrite(void)
{
    struct msp_ow r;
    memset(&r, 0, sizeof r);
    uint64_t one = held(&r, "0_7/0/1_Linear/output_0", 1000)->cost;
    held(&r, "0_7/0/2_Add/output_0", 1000);
    held(&r, "0_7/1/1_Linear/output_0", 1000);
    CHECK(r.rounds == 3 && r.load.bytes == 3 * one && r.load.peak == 3 * one);
    int fits = 0;
    /* room for one more: the oldest round not in progress goes (1_Linear's exec 0) */
    CHECK(msp_ow_fit(&r, one, 3 * one, &fits) == 1 && fits && r.load.bytes == 2 * one);
    CHECK(r.rounds == 2 && r.oldest->exec == 0 && r.oldest->scope->op[0] == '2');
    /* more than the budget: only rounds in progress are left, they stay */
    CHECK(msp_ow_fit(&r, 3 * one, 2 * one, &fits) == 0 && !fits && r.load.bytes == 2 * one);
    CHECK(msp_ow_fit(&r, UINT64_MAX, UINT64_MAX - 1, &fits) == 0 && !fits);
    CHECK(msp_ow_clear(&r) == 2 && r.load.bytes == 0 && r.load.peak == 3 * one && !r.oldest);
    msp_ow_each(&r, free_scope, NULL);
    free(r.scopes);
}

static void test_queue(void)
{
    struct msp_queue q;
    msp_queue_init(&q, 2);
    const uint64_t budget = (uint64_t)sysconf(_SC_PAGESIZE); /* the ring maps whole pages */
    struct msp_item *a = reserved(&q, budget * 3 / 8, budget);
    CHECK(q.maps == 1 && q.ring.size == budget && in_ring(&q, a, budget * 3 / 8));
    CHECK(msp_queue_push(&q, 0, a) == MSP_PUSH_OK);
    struct msp_item *b = NULL;
    CHECK(msp_queue_reserve(&q, META, budget * 3 / 4, 0, budget, 0, &b) == MSP_PUSH_DROPPED && !b);
    CHECK(msp_queue_pop(&q, 0, MSP_POP_WAIT) == a);
    void *abuf = a->data;
    msp_queue_done(&q, 0, a, NULL);
    CHECK(q.load.bytes == 0 && q.ring.head == 0 && q.ring.tail == 0);
    /* the ring's memory comes back (already faulted in) */
    struct msp_item *a2 = reserved(&q, budget / 3, budget);
    CHECK(a2->data == abuf && q.load.bytes == a2->cost);
    msp_queue_release(&q, a2);
    /* laps around the ring, FIFO as one writer releases: always in the
     * ring and never past its end, never over the budget, one mapping; a
     * region that would run past the end starts again at offset 0 */
    struct msp_item *live[2] = {0}, *rest = NULL;
    int wrapped = 0;
    uint64_t last_off = 0;
    for (int i = 0; i < 40; i++) {
        if (live[i % 2]) {
            CHECK(one_of_run(&q, 1, &rest) == live[i % 2]);
            msp_queue_done(&q, 1, live[i % 2], rest);
        }
        uint64_t n = budget / 6 + (uint64_t)(i % 5) * 97;
        struct msp_item *it = live[i % 2] = reserved(&q, n, budget);
        CHECK(in_ring(&q, it, n) && q.load.bytes <= budget);
        for (uint64_t j = 0; j < n; j++)
            it->data[j] = (unsigned char)(j * 7 + (uint64_t)i);
        uint64_t off = (uint64_t)(it->data - q.ring.base);
        wrapped += i > 0 && off < last_off;
        last_off = off;
        CHECK(msp_queue_push(&q, 1, it) == MSP_PUSH_OK);
    }
    CHECK(wrapped > 0 && q.maps == 1 && q.heap_items == 0 && q.ring.head > q.ring.size);
    for (int i = 40; i < 42; i++) {
        CHECK(one_of_run(&q, 1, &rest) == live[i % 2]);
        msp_queue_done(&q, 1, live[i % 2], rest);
    }
    CHECK(rest == NULL);
    /* out of order: the tail waits for the oldest region */
    struct msp_item *x = reserved(&q, 500, budget), *y = reserved(&q, 500, budget);
    struct msp_item *z = reserved(&q, 500, budget);
    msp_queue_release(&q, y);
    CHECK(q.ring.tail == 0);
    msp_queue_release(&q, x);
    CHECK(q.ring.tail == (uint64_t)((unsigned char *)z - q.ring.base) - 64); /* z's region header */
    /* larger than the whole budget: refused while anything is live... */
    CHECK(msp_queue_reserve(&q, META, 3 * budget, 0, budget, 0, &b) == MSP_PUSH_DROPPED);
    msp_queue_release(&q, z);
    /* ...admitted alone, in its own buffer, with the ring unmapped */
    struct msp_item *big = reserved(&q, 3 * budget, budget);
    CHECK(!big->in_ring && q.ring.base == NULL && q.heap_items == 1 && q.load.bytes == big->cost);
    CHECK(msp_queue_push(&q, 1, big) == MSP_PUSH_OK);
    uint64_t depth, bytes;
    msp_queue_stats(&q, &depth, &bytes);
    CHECK(depth == 1 && bytes == big->cost);
    CHECK(msp_queue_reserve(&q, META, 100, 0, budget, 0, &b) == MSP_PUSH_DROPPED);
    CHECK(msp_queue_pop(&q, 1, MSP_POP_WAIT) == big);
    msp_queue_done(&q, 1, big, NULL);
    CHECK(q.load.bytes == 0);
    /* the next item maps the ring again; a new budget remaps it */
    struct msp_item *e = reserved(&q, 100, budget);
    CHECK(q.maps == 2 && in_ring(&q, e, 100));
    msp_queue_release(&q, e);
    e = reserved(&q, 100, 2 * budget + 100);
    CHECK(q.maps == 3 && q.ring.size == 2 * budget && in_ring(&q, e, 100));
    msp_queue_release(&q, e);
    /* trim: only after a period without reservations */
    msp_queue_trim_idle(&q);
    CHECK(q.ring.base != NULL);
    msp_queue_trim_idle(&q);
    CHECK(q.ring.base == NULL);
    /* close: queued items come back, nothing new is taken */
    struct msp_item *f = reserved(&q, 300, budget);
    CHECK(msp_queue_push(&q, 0, f) == MSP_PUSH_OK);
    CHECK(msp_queue_wait_idle(&q, 0) == 0);
    uint64_t inflight, kept;
    struct msp_item *left = msp_queue_close(&q, NULL, &inflight, &kept);
    CHECK(left == f && left->next == NULL && inflight == 0 && kept == 0);
    msp_queue_forget(&q, left);
    CHECK(q.load.bytes == 0);
    CHECK(msp_queue_reserve(&q, META, 100, 0, budget, 1, &b) == MSP_PUSH_CLOSED);
    CHECK(msp_queue_pop(&q, 0, MSP_POP_WAIT) == NULL);
    msp_queue_trim_idle(&q);
    msp_queue_trim_idle(&q);
}

/* block policy: a reservation waits for a writer to finish, then gets the
 * same ring memory */
struct blocked_arg {
    struct msp_queue *q;
    struct msp_item *got;
    int rc;
    int returned; /* under q->mu: msp_queue_reserve came back */
};

static void *reserve_blocking(void *p)
{
    struct blocked_arg *a = p;
    uint64_t budget = (uint64_t)sysconf(_SC_PAGESIZE);
    a->rc = msp_queue_reserve(a->q, META, budget * 3 / 4, 0, budget, 1, &a->got);
    pthread_mutex_lock(&a->q->mu);
    a->returned = 1;
    pthread_mutex_unlock(&a->q->mu);
    return NULL;
}

/* Until the reservation waits in the queue or came back: 1 if it waits. */
static int reservation_waits(struct blocked_arg *a)
{
    for (;;) {
        pthread_mutex_lock(&a->q->mu);
        int blocked = a->q->blocked, returned = a->returned;
        pthread_mutex_unlock(&a->q->mu);
        if (blocked || returned)
            return blocked == 1 && !returned;
        usleep(1000);
    }
}

static int run_length(struct msp_item *run)
{
    int n = 0;
    for (; run; run = run->next)
        n++;
    return n;
}

/* A pop takes a run of the list, in order: up to MSP_QUEUE_POP_ITEMS items
 * and MSP_QUEUE_POP_BYTES of cost (a larger first item alone). */
static void test_queue_runs(void)
{
    struct msp_queue q;
    msp_queue_init(&q, 1);
    const uint64_t budget = UINT64_C(8) << 20;
    struct msp_item *first = NULL;
    for (int i = 0; i < MSP_QUEUE_POP_ITEMS + 6; i++) {
        struct msp_item *it = reserved(&q, 16, budget);
        first = first ? first : it;
        CHECK(msp_queue_push(&q, 0, it) == MSP_PUSH_OK);
    }
    struct msp_item *run = msp_queue_pop(&q, 0, MSP_POP_WAIT);
    CHECK(run == first && run_length(run) == MSP_QUEUE_POP_ITEMS);
    CHECK(q.depth == 6 && q.inflight == MSP_QUEUE_POP_ITEMS);
    msp_queue_done(&q, 0, run, NULL);
    run = msp_queue_pop(&q, 0, MSP_POP_WAIT);
    CHECK(run_length(run) == 6 && q.depth == 0);
    msp_queue_done(&q, 0, run, NULL);
    CHECK(msp_queue_pop(&q, 0, MSP_POP_NOW) == NULL && q.inflight == 0 && q.load.bytes == 0);
    const uint64_t big = MSP_QUEUE_POP_BYTES * 3 / 5;
    for (int i = 0; i < 3; i++)
        CHECK(msp_queue_push(&q, 0, reserved(&q, i ? big : 2 * big, budget)) == MSP_PUSH_OK);
    for (int i = 0; i < 3; i++) {
        run = msp_queue_pop(&q, 0, MSP_POP_WAIT);
        CHECK(run_length(run) == 1);
        msp_queue_done(&q, 0, run, NULL);
    }
    msp_queue_trim_idle(&q);
    msp_queue_trim_idle(&q);
}

static void test_queue_block(void)
{
    struct msp_queue q;
    msp_queue_init(&q, 1);
    uint64_t budget = (uint64_t)sysconf(_SC_PAGESIZE);
    struct msp_item *a = reserved(&q, budget * 3 / 4, budget);
    CHECK(msp_queue_push(&q, 0, a) == MSP_PUSH_OK);
    struct blocked_arg arg = {&q, NULL, -1, 0};
    pthread_t t;
    CHECK(pthread_create(&t, NULL, reserve_blocking, &arg) == 0);
    /* no room while a is queued: the reservation waits, and only then is a
     * written (else it would find the room without ever waiting) */
    CHECK(reservation_waits(&arg));
    CHECK(msp_queue_pop(&q, 0, MSP_POP_WAIT) == a);
    void *abuf = a->data;
    msp_queue_done(&q, 0, a, NULL);
    pthread_join(t, NULL);
    CHECK(arg.rc == MSP_PUSH_OK && arg.got && arg.got->data == abuf && q.blocked == 0);
    if (arg.got)
        msp_queue_release(&q, arg.got);
    uint64_t inflight, kept;
    CHECK(msp_queue_close(&q, NULL, &inflight, &kept) == NULL);
    msp_queue_trim_idle(&q);
    msp_queue_trim_idle(&q);
}

static void *pop_writer0(void *p)
{
    return msp_queue_pop(p, 0, MSP_POP_WAIT);
}

/* Large tensors (lead: the room for their .bin header): header and payload
 * lie together from a block boundary, in the ring and in the heap alike,
 * within the item's region and charged to the budget; the others keep their
 * 64-byte alignment. */
static void test_queue_lead(void)
{
    struct msp_queue q;
    msp_queue_init(&q, 1);
    const uint64_t budget = 8 << 20;
    uint64_t total = 0;
    struct msp_item *its[6];
    for (int i = 0; i < 6; i++) {
        uint32_t lead = i == 5 ? 0 : 100u + 977u * (uint32_t)i; /* up to 4008 */
        uint64_t payload = (1 << 20) + 4096 * (uint64_t)i + 7 * (uint64_t)i;
        struct msp_item *it = NULL;
        CHECK(msp_queue_reserve(&q, META, payload, lead, budget, 0, &it) == MSP_PUSH_OK);
        its[i] = it;
        if (!it)
            continue;
        CHECK(it->lead == lead && in_ring(&q, it, payload) == (lead == 0));
        /* with a lead the item and its strings come after the payload */
        CHECK(it->in_ring && (lead ? it->data + payload <= (const unsigned char *)it &&
                                         (const unsigned char *)(it + 1) + 32 <=
                                             q.ring.base + q.ring.size
                                   : it->data + payload <= q.ring.base + q.ring.size));
        if (lead)
            CHECK(((uintptr_t)(it->data - lead) & (MSP_DIO_ALIGN - 1)) == 0);
        memset(it->data - lead, 0x33, lead + payload); /* ASan: all of it ours */
        total += it->cost;
        CHECK(it->cost >= META + lead + payload && q.load.bytes == total);
    }
    for (int i = 0; i < 6; i++)
        if (its[i])
            msp_queue_release(&q, its[i]);
    CHECK(q.load.bytes == 0);
    /* larger than the budget: alone, in the heap, aligned the same way */
    struct msp_item *big = NULL;
    CHECK(msp_queue_reserve(&q, META, 2 * budget, 321, budget, 0, &big) == MSP_PUSH_OK);
    if (big) {
        CHECK(!big->in_ring && big->lead == 321 &&
              ((uintptr_t)(big->data - 321) & (MSP_DIO_ALIGN - 1)) == 0);
        memset(big->data - 321, 0x44, 321 + 2 * budget);
        msp_queue_release(&q, big); /* ASan: the payload's allocation freed whole */
    }
    CHECK(msp_queue_reserve(&q, META, 100, MSP_DIO_ALIGN, budget, 0, &big) == MSP_PUSH_NOMEM);
    /* a writer gives back what it wrote as it goes: with the budget taken by
     * one 6 MiB item, 3 MiB more fit once its first 4 MiB are written, before
     * the whole is; the rest goes back with the item */
    struct msp_item *a = NULL, *b = NULL;
    CHECK(msp_queue_reserve(&q, META, 6 << 20, 200, budget, 0, &a) == MSP_PUSH_OK && a);
    if (a) {
        memset(a + 1, 0x11, 32); /* its strings, after the payload: untouched below */
        CHECK(msp_queue_reserve(&q, META, 3 << 20, 0, budget, 0, &b) == MSP_PUSH_DROPPED);
        uint64_t cost = a->cost, freed = msp_queue_release_front(&q, a, a->data - 200 + (4 << 20));
        CHECK(freed > (4 << 20) - 4096 && freed <= (4 << 20) + 4096 && a->cost == cost - freed &&
              q.load.bytes == a->cost);
        CHECK(msp_queue_release_front(&q, a, a->data) == 0); /* nothing more written */
        CHECK(msp_queue_reserve(&q, META, 3 << 20, 0, budget, 0, &b) == MSP_PUSH_OK && b);
        const unsigned char *s = (const unsigned char *)(a + 1);
        CHECK(s[0] == 0x11 && s[31] == 0x11);
        freed = msp_queue_release_front(&q, a, a->data + (6 << 20));
        CHECK(freed > (2 << 20) - 4096 && q.load.bytes == a->cost + (b ? b->cost : 0));
        msp_queue_release(&q, a);
        if (b)
            msp_queue_release(&q, b);
        CHECK(q.load.bytes == 0 && q.ring.tail == 0 && q.ring.head == 0);
    }
    struct msp_item *small = NULL; /* no lead: nothing to give back early */
    CHECK(msp_queue_reserve(&q, META, 1 << 20, 0, budget, 0, &small) == MSP_PUSH_OK && small);
    if (small) {
        CHECK(msp_queue_release_front(&q, small, small->data + (1 << 20)) == 0);
        msp_queue_release(&q, small);
    }
    msp_queue_trim_idle(&q);
    msp_queue_trim_idle(&q);
}

/* Pages of [p, p+n) in memory. */
static uint64_t resident_bytes(const unsigned char *p, uint64_t n)
{
    uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE), in = 0;
    unsigned char *vec = malloc(n / page + 1);
    CHECK(vec && mincore((void *)p, n, vec) == 0);
    for (uint64_t i = 0; vec && i < n / page; i++)
        in += vec[i] & 1;
    free(vec);
    return in * page;
}

/* Fully resident: every page of [p, p+n) is in memory. */
static int resident(const unsigned char *p, uint64_t n)
{
    uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);
    return resident_bytes(p, n) == n / page * page;
}

/* An expected dump: an idle writer 0 maps the ring and faults it in before
 * the first tensor, a big layer's burst's worth of it (more than 16 MiB), and
 * no trim gives that back before the burst; the first reservation copies into
 * that mapping, and the ring stays while the dump is on. */
static void test_queue_warm(void)
{
    struct msp_queue q;
    msp_queue_init(&q, 1);
    q.keep_trims = 2;
    const uint64_t budget = UINT64_C(41) << 19; /* ten huge pages and a quarter */
    pthread_t t;
    CHECK(pthread_create(&t, NULL, pop_writer0, &q) == 0);
    msp_queue_expect(&q, budget, 1);
    uint64_t warm = 0;
    for (int i = 0; i < 5000 && warm < budget; i++) { /* up to 5 s */
        pthread_mutex_lock(&q.mu);
        warm = q.warm_off ? budget : q.warm;
        pthread_mutex_unlock(&q.mu);
        if (warm < budget)
            usleep(1000);
    }
    CHECK(q.maps == 1 && q.ring.size == budget && warm == budget);
    msp_queue_trim_idle(&q); /* a quiet period before the burst */
    if (!q.warm_off) /* a kernel without MADV_POPULATE_WRITE leaves it to the hooks */
        CHECK(resident(q.ring.base, budget));
    /* the first tensor lands in the warm mapping */
    struct msp_item *a = reserved(&q, 1000, budget);
    CHECK(q.maps == 1 && in_ring(&q, a, 1000));
    CHECK(msp_queue_push(&q, 0, a) == MSP_PUSH_OK);
    void *got;
    pthread_join(t, &got);
    CHECK(got == a);
    msp_queue_done(&q, 0, a, NULL);
    /* no trim while the dump is on; after it, two idle periods give it back */
    msp_queue_trim_idle(&q);
    msp_queue_trim_idle(&q);
    CHECK(q.ring.base != NULL);
    msp_queue_expect(&q, 0, 0);
    msp_queue_trim_idle(&q);
    CHECK(q.ring.base == NULL);
    uint64_t inflight, kept;
    CHECK(msp_queue_close(&q, NULL, &inflight, &kept) == NULL);
}

/* While the config is awake the ring stays mapped between dumps, so a
 * service's next burst copies into memory already faulted in; it goes back
 * after keep_trims quiet periods, or at the first once the config sleeps. */
static void test_queue_keep(void)
{
    struct msp_queue q;
    msp_queue_init(&q, 1);
    const uint64_t budget = (uint64_t)sysconf(_SC_PAGESIZE);
    q.keep_trims = 2;
    msp_queue_expect(&q, 0, 1); /* awake, exec_range "none": nothing to warm */
    struct msp_item *a = reserved(&q, 100, budget);
    msp_queue_release(&q, a);
    for (int i = 0; i < 3; i++) /* the burst's period, then two quiet ones */
        msp_queue_trim_idle(&q);
    CHECK(q.ring.base != NULL && q.maps == 1);
    a = reserved(&q, 100, budget); /* the next burst: the same mapping */
    CHECK(q.maps == 1 && in_ring(&q, a, 100));
    msp_queue_release(&q, a);
    for (int i = 0; i < 3; i++)
        msp_queue_trim_idle(&q);
    CHECK(q.ring.base != NULL);
    msp_queue_trim_idle(&q); /* a third quiet period: given back */
    CHECK(q.ring.base == NULL);
    /* asleep: the first quiet period gives it back */
    msp_queue_expect(&q, 0, 1);
    a = reserved(&q, 100, budget);
    msp_queue_release(&q, a);
    msp_queue_expect(&q, 0, 0);
    msp_queue_trim_idle(&q);
    CHECK(q.ring.base != NULL && q.maps == 2);
    msp_queue_trim_idle(&q);
    CHECK(q.ring.base == NULL);
    uint64_t inflight, kept;
    CHECK(msp_queue_close(&q, NULL, &inflight, &kept) == NULL);
}

/* An item costs what it takes in memory, so the byte budget bounds the memory
 * of small items too: a one-element tensor's statistics item (the item, its
 * strings, a struct msp_stats) is charged its whole ring region, and the ring
 * bytes the items span are the bytes charged; a malloc'd one, glibc's chunks. */
static void test_queue_small_items(void)
{
    CHECK(msp_malloc_cost(0) == 32 && msp_malloc_cost(24) == 32 && msp_malloc_cost(25) == 48);
    CHECK(msp_malloc_cost(168) == 176 && msp_malloc_cost(UINT64_C(1) << 20) == (1u << 20) + 4096);
    struct msp_queue q;
    msp_queue_init(&q, 1);
    const uint64_t budget = UINT64_C(1) << 20, meta = sizeof(struct msp_item) + 41;
    const uint64_t payload = sizeof(struct msp_stats);
    uint64_t n = 0;
    struct msp_item *it, *first = NULL;
    while (msp_queue_reserve(&q, meta, payload, 0, budget, 0, &it) == MSP_PUSH_OK) {
        CHECK(it->in_ring && it->cost == 64 + ((meta + 63) & ~UINT64_C(63)) + payload + 24);
        it->seq = n++;
        first = first ? first : it;
        CHECK(msp_queue_push(&q, 0, it) == MSP_PUSH_OK);
    }
    CHECK(q.load.bytes <= budget && q.load.bytes > budget - first->cost && q.load.bytes == n * first->cost);
    CHECK(q.ring.head - q.ring.tail == q.load.bytes); /* no memory of theirs uncharged */
    struct msp_item *run;
    while ((run = msp_queue_pop(&q, 0, MSP_POP_NOW)) != NULL)
        msp_queue_done(&q, 0, run, NULL);
    CHECK(q.load.bytes == 0);
    uint64_t inflight, kept;
    CHECK(msp_queue_close(&q, NULL, &inflight, &kept) == NULL);
    msp_queue_trim_idle(&q);
    msp_queue_trim_idle(&q);
}

/* The sliding extremum, against the true one over a window of positions: a
 * min never above it, a max never below, both exact until the queue is full. */
static void test_window(void)
{
    for (int min = 0; min < 2; min++) {
        struct msp_window w = {0};
        uint64_t vals[400];
        unsigned rnd = 7u + (unsigned)min;
        int lagged = 0;
        CHECK(msp_window_get(&w, 99) == 99);
        for (uint64_t at = 0; at < 400; at++) {
            rnd = rnd * 1103515245u + 12345u;
            /* random, then each value worse than the last: all 20 kept, past the 8 */
            vals[at] = at < 200 ? (rnd >> 8) % 1000 : min ? at : 1000 - at;
            msp_window_add(&w, at, vals[at], min);
            uint64_t from = at >= 20 ? at - 19 : 0, best = vals[from];
            msp_window_drop(&w, from);
            for (uint64_t i = from; i <= at; i++)
                best = min ? (vals[i] < best ? vals[i] : best) : (vals[i] > best ? vals[i] : best);
            uint64_t got = msp_window_get(&w, 0);
            CHECK(min ? got <= best : got >= best);
            lagged |= got != best;
        }
        CHECK(lagged);
        msp_window_drop(&w, 1000);
        CHECK(msp_window_get(&w, 5) == 5);
    }
}

/* Writer w's head as the slot shows it (the tests' slot: the dummy). */
static uint64_t head_of(int w)
{
    return __atomic_load_n(&msp_proc_now()->writer_head[w], __ATOMIC_ACQUIRE);
}

static struct msp_item *pushed(struct msp_queue *q, int w, uint64_t seq, uint64_t payload)
{
    struct msp_item *it = reserved(q, payload, UINT64_C(64) << 20);
    it->seq = seq;
    CHECK(msp_queue_push(q, w, it) == MSP_PUSH_OK);
    return it;
}

/* Writer heads (control.h writer_head[]): idle, covering an item from its push
 * until its writer is done with it, held by a stalled writer, the lowest of an
 * out-of-order list, and the items the exit drain gives up. */
static void test_queue_heads(void)
{
    struct msp_queue q;
    msp_queue_init(&q, 1);
    msp_queue_set_lists(&q, 2);
    CHECK(msp_proc_now()->n_writers == 2);
    CHECK(head_of(0) == MSP_HEAD_IDLE && head_of(1) == MSP_HEAD_IDLE);
    struct msp_item *a = pushed(&q, 0, 10, 16);
    CHECK(head_of(0) == 10 && head_of(1) == MSP_HEAD_IDLE);
    pushed(&q, 0, 11, 16);
    struct msp_item *run = msp_queue_pop(&q, 0, MSP_POP_NOW);
    CHECK(run == a && run_length(run) == 2 && head_of(0) == 10);
    /* stalled with 10 and 11 in hand: more pushed, its head stays */
    struct msp_item *c = pushed(&q, 0, 12, 16);
    CHECK(head_of(0) == 10);
    struct msp_item *d = pushed(&q, 1, 13, 16);
    CHECK(head_of(1) == 13);
    CHECK(msp_queue_pop(&q, 1, MSP_POP_NOW) == d);
    msp_queue_done(&q, 1, d, NULL);
    CHECK(head_of(1) == MSP_HEAD_IDLE);
    struct msp_item *b = a->next;
    a->next = NULL;
    msp_queue_done(&q, 0, a, b); /* 10's record in the log, 11 still in hand */
    CHECK(head_of(0) == 11);
    msp_queue_done(&q, 0, b, NULL);
    CHECK(head_of(0) == 12);
    CHECK(msp_queue_pop(&q, 0, MSP_POP_NOW) == c);
    msp_queue_done(&q, 0, c, NULL);
    CHECK(head_of(0) == MSP_HEAD_IDLE);
    /* several threads pushing: 21 behind 25; one item a pop (large ones) */
    const uint64_t big = MSP_QUEUE_POP_BYTES * 3 / 5;
    const uint64_t seqs[] = {20, 25, 21, 30}, heads[] = {20, 21, 21, 30};
    for (int i = 0; i < 4; i++)
        pushed(&q, 1, seqs[i], big);
    CHECK(head_of(1) == 20);
    for (int i = 0; i < 4; i++) {
        run = msp_queue_pop(&q, 1, MSP_POP_NOW);
        CHECK(run_length(run) == 1 && run->seq == seqs[i] && head_of(1) == heads[i]);
        msp_queue_done(&q, 1, run, NULL);
        CHECK(head_of(1) == (i < 3 ? heads[i + 1] : MSP_HEAD_IDLE));
    }
    /* exit: the items given up hold every head until their lost records are written */
    pushed(&q, 0, 50, 16);
    pushed(&q, 1, 41, 16);
    uint64_t inflight, kept;
    struct msp_item *left = msp_queue_close(&q, NULL, &inflight, &kept);
    CHECK(run_length(left) == 2 && kept == 0 && head_of(0) == 41 && head_of(1) == 41);
    msp_queue_forget(&q, left);
    CHECK(head_of(0) == MSP_HEAD_IDLE && head_of(1) == MSP_HEAD_IDLE && q.load.bytes == 0);
}

/* Items any writer may write (msp_queue_push_near), each hashed to list 0 of 4:
 * list 0 takes them while its load (queued and in hand) is within
 * MSP_QUEUE_SLACK of the least loaded list's, the others take the rest, so no
 * list runs ahead of another by more than the slack (the lists drifted apart
 * by thousands of items under a full queue, holding every writer's records
 * back behind the longest list's front). Items bound to a list
 * (msp_queue_push) stay on it. */
static void test_queue_push_near(void)
{
    struct msp_queue q;
    msp_queue_init(&q, 4);
    uint64_t seq = 0;
    for (int i = 0; i < 200; i++) {
        struct msp_item *it = reserved(&q, 16, UINT64_C(64) << 20);
        it->seq = seq++;
        CHECK(msp_queue_push_near(&q, 0, 4, it) == MSP_PUSH_OK);
    }
    uint64_t most = 0, least = UINT64_MAX;
    for (int w = 0; w < 4; w++) {
        uint64_t n = q.heads[w].pushed - q.heads[w].popped;
        most = n > most ? n : most;
        least = n < least ? n : least;
    }
    CHECK(most - least <= MSP_QUEUE_SLACK + 1 && least > 0);
    CHECK(q.heads[0].pushed - q.heads[0].popped == most);
    /* writer 1 takes its whole list in hand, writers 2 and 3 finish theirs: 1 is
     * still loaded, so items hashed to it go to 2 and 3 until it is done */
    struct msp_item *hand = NULL, **end = &hand;
    for (struct msp_item *r; (r = msp_queue_pop(&q, 1, MSP_POP_NOW)) != NULL;) {
        *end = r;
        while (*end)
            end = &(*end)->next;
    }
    for (int w = 2; w < 4; w++)
        for (struct msp_item *r; (r = msp_queue_pop(&q, w, MSP_POP_NOW)) != NULL;)
            msp_queue_done(&q, w, r, NULL);
    uint64_t before = q.heads[1].pushed;
    for (int i = 0; i < 8; i++) {
        struct msp_item *it = reserved(&q, 16, UINT64_C(64) << 20);
        it->seq = seq++;
        CHECK(msp_queue_push_near(&q, 1, 4, it) == MSP_PUSH_OK);
    }
    CHECK(q.heads[1].pushed == before && q.heads[1].in_hand > MSP_QUEUE_SLACK);
    msp_queue_done(&q, 1, hand, NULL);
    CHECK(q.heads[1].in_hand == 0);
    struct msp_item *it = reserved(&q, 16, UINT64_C(64) << 20);
    it->seq = seq++;
    CHECK(msp_queue_push_near(&q, 1, 4, it) == MSP_PUSH_OK && q.heads[1].pushed == before + 1);
    /* bound items: on their list whatever the loads */
    before = q.heads[0].pushed;
    for (int i = 0; i < 3 * MSP_QUEUE_SLACK; i++)
        pushed(&q, 0, seq++, 16);
    CHECK(q.heads[0].pushed == before + 3 * MSP_QUEUE_SLACK);
    uint64_t inflight, kept;
    msp_queue_forget(&q, msp_queue_close(&q, NULL, &inflight, &kept));
    CHECK(q.load.bytes == 0);
}

/* push_near balances the writers' work, not their items: an op_param.json (a
 * file: a directory walk, a create, a write, a rename) weighs as many records
 * as MSP_QUEUE_FILE_WEIGHT, so the records hashed to a list busy with one go
 * to the others (behind it, every writer's records waited for the file,
 * their rows held back in the control plane: control.h writer_head[]). */
static void test_queue_push_near_weighs_files(void)
{
    struct msp_queue q;
    msp_queue_init(&q, 2);
    struct msp_item *param = reserved(&q, 16, UINT64_C(64) << 20);
    param->kind = MSP_ITEM_PARAM;
    param->seq = 0;
    CHECK(msp_item_makes_file(param) && msp_item_weight(param) == MSP_QUEUE_FILE_WEIGHT);
    CHECK(msp_queue_push_near(&q, 0, 4, param) == MSP_PUSH_OK && q.heads[0].pushed == 1);
    uint64_t records = MSP_QUEUE_FILE_WEIGHT - MSP_QUEUE_SLACK - 1;
    for (uint64_t i = 0; i < records; i++) {
        struct msp_item *it = reserved(&q, 16, UINT64_C(64) << 20);
        it->seq = 1 + i;
        CHECK(msp_item_weight(it) == 1);
        CHECK(msp_queue_push_near(&q, 0, 4, it) == MSP_PUSH_OK);
    }
    CHECK(q.heads[0].pushed == 1 && q.heads[1].pushed == records);
    CHECK(q.heads[0].load == MSP_QUEUE_FILE_WEIGHT && q.heads[1].load == records);
    /* a tensor whose task writes its .bin is a file too */
    struct msp_item *bin = reserved(&q, 16, UINT64_C(64) << 20);
    bin->task = MSP_TASK_TENSOR;
    CHECK(msp_item_makes_file(bin) && msp_item_weight(bin) == MSP_QUEUE_FILE_WEIGHT);
    /* filter_level binds a layer's files to one writer (dedup); a statistics
     * item writes none, so any writer takes it */
    bin->save_child = 1;
    bin->filter_level = 1;
    CHECK(msp_dedup_applies(bin));
    bin->task = MSP_TASK_STATISTICS;
    CHECK(!msp_dedup_applies(bin));
    msp_queue_release(&q, bin);
    /* done: the loads go back to 0 */
    for (int w = 0; w < 2; w++)
        for (struct msp_item *r; (r = msp_queue_pop(&q, w, MSP_POP_NOW)) != NULL;)
            msp_queue_done(&q, w, r, NULL);
    CHECK(q.heads[0].load == 0 && q.heads[1].load == 0 && q.load.bytes == 0);
    /* closing hands back what is queued, and its weight */
    struct msp_item *left = reserved(&q, 16, UINT64_C(64) << 20);
    left->kind = MSP_ITEM_PARAM;
    CHECK(msp_queue_push_near(&q, 1, 4, left) == MSP_PUSH_OK && q.heads[1].load > 0);
    uint64_t inflight, kept;
    msp_queue_forget(&q, msp_queue_close(&q, NULL, &inflight, &kept));
    CHECK(q.heads[1].load == 0 && q.load.bytes == 0);
}

/* A writer appends its batch when it is full, and when its first record has
 * waited MSP_RECBATCH_HOLD_NS: one that never finds its list empty (behind, or
 * starved of CPU) held its records for up to 0.8 s, and with them its head and
 * every row of a higher seq in the control plane. */
static void test_recbatch_due(void)
{
    uint64_t t0 = UINT64_C(5000000000);
    CHECK(!msp_recbatch_due_at(0, 0, 0, t0)); /* nothing to append */
    CHECK(!msp_recbatch_due_at(200, 1, t0, t0 + MSP_RECBATCH_HOLD_NS - 1));
    CHECK(msp_recbatch_due_at(200, 1, t0, t0 + MSP_RECBATCH_HOLD_NS));
    CHECK(!msp_recbatch_due_at(200, 1, t0, t0 - 5)); /* the clock read before it joined */
    CHECK(msp_recbatch_due_at(MSP_RECBATCH_BYTES, 300, t0, t0));
}

static int odd_seq(const struct msp_item *it)
{
    return (int)(it->seq & 1);
}

/* Close keeping some items (the exit drain's statistics items): the others come
 * back, the kept stay in order for their writers, who still pop them. */
static void test_queue_close_keeps(void)
{
    struct msp_queue q;
    msp_queue_init(&q, 1);
    msp_queue_set_lists(&q, 1);
    struct msp_item *a = pushed(&q, 0, 1, 16), *b = pushed(&q, 0, 2, 16);
    struct msp_item *c = pushed(&q, 0, 3, 16);
    uint64_t inflight, kept;
    struct msp_item *left = msp_queue_close(&q, odd_seq, &inflight, &kept);
    CHECK(left == b && b->next == NULL && kept == 2 && inflight == 0 && q.depth == 2);
    CHECK(head_of(0) == 1 && msp_queue_wait_idle(&q, 0) == 0);
    struct msp_item *run = msp_queue_pop(&q, 0, MSP_POP_WAIT); /* closed, but items are left */
    CHECK(run == a && a->next == c && c->next == NULL);
    msp_queue_done(&q, 0, run, NULL);
    CHECK(head_of(0) == 2); /* b's lost record is still to come */
    msp_queue_forget(&q, left);
    CHECK(head_of(0) == MSP_HEAD_IDLE && q.load.bytes == 0 && msp_queue_wait_idle(&q, 0) == 1);
    CHECK(msp_queue_pop(&q, 0, MSP_POP_WAIT) == NULL);
}

/* Heads against a model of what each writer has (queued and in hand), over
 * random pushes from "several threads" (seqs pushed a little out of order, more
 * dips than a head keeps), pops and dones in parts: a head is never above the
 * seq of an item its writer has, IDLE when it has none, and, with one thread
 * pushing in order, exactly the lowest. */
#define MODEL_MAX 4096
struct model {
    struct msp_item *queued[MODEL_MAX], *hand[MODEL_MAX];
    int nq, nh;
};

static uint64_t model_low(const struct model *m)
{
    uint64_t low = MSP_HEAD_IDLE;
    for (int i = 0; i < m->nq; i++)
        low = m->queued[i]->seq < low ? m->queued[i]->seq : low;
    for (int i = 0; i < m->nh; i++)
        low = m->hand[i]->seq < low ? m->hand[i]->seq : low;
    return low;
}

static void test_queue_heads_random(void)
{
    static struct model m[2];
    for (int pass = 0; pass < 2; pass++) { /* several threads, then one */
        struct msp_queue q;
        msp_queue_init(&q, 2);
        msp_queue_set_lists(&q, 2);
        memset(m, 0, sizeof m);
        unsigned rnd = 12345u + (unsigned)pass;
        uint64_t pool[6], next_seq = 0;
        int npool = 0, exact = 1;
        for (int step = 0; step < 20000; step++) {
            rnd = rnd * 1103515245u + 12345u;
            unsigned r = rnd >> 8;
            int w = (int)(r & 1), op = (int)(r >> 1) % 8;
            struct model *mw = &m[w];
            if (op < 4 && mw->nq + mw->nh < MODEL_MAX - 64) {
                /* a seq taken by one of the threads, pushed now or later */
                while (npool < (pass ? 1 : 6))
                    pool[npool++] = next_seq++;
                int k = pass ? 0 : (int)((r >> 4) % (unsigned)npool);
                struct msp_item *it = pushed(&q, w, pool[k], (r >> 8) % 7 ? 16 : MSP_QUEUE_POP_BYTES / 2);
                pool[k] = pool[--npool];
                mw->queued[mw->nq++] = it;
            } else if (op < 6) {
                struct msp_item *run = msp_queue_pop(&q, w, MSP_POP_NOW);
                for (; run; run = run->next) {
                    CHECK(mw->nq > 0 && mw->queued[0] == run);
                    mw->hand[mw->nh++] = mw->queued[0];
                    memmove(mw->queued, mw->queued + 1, (size_t)--mw->nq * sizeof *mw->queued);
                }
            } else if (mw->nh) {
                /* the first k in hand done, the rest still in hand */
                int k = 1 + (int)((r >> 4) % (unsigned)mw->nh);
                for (int i = 0; i < mw->nh; i++)
                    mw->hand[i]->next = i + 1 < mw->nh && i + 1 != k ? mw->hand[i + 1] : NULL;
                msp_queue_done(&q, w, mw->hand[0], k < mw->nh ? mw->hand[k] : NULL);
                mw->nh -= k;
                memmove(mw->hand, mw->hand + k, (size_t)mw->nh * sizeof *mw->hand);
            }
            for (int v = 0; v < 2; v++) {
                uint64_t low = model_low(&m[v]), head = head_of(v);
                CHECK(head <= low && (low != MSP_HEAD_IDLE || head == MSP_HEAD_IDLE));
                exact &= head == low;
            }
        }
        CHECK(pass == 0 || exact); /* in order: no dips, the head is the lowest */
        for (int v = 0; v < 2; v++) { /* drained: idle */
            struct msp_item *run;
            while ((run = msp_queue_pop(&q, v, MSP_POP_NOW)) != NULL)
                msp_queue_done(&q, v, run, NULL);
            if (m[v].nh) {
                for (int i = 0; i < m[v].nh; i++)
                    m[v].hand[i]->next = i + 1 < m[v].nh ? m[v].hand[i + 1] : NULL;
                msp_queue_done(&q, v, m[v].hand[0], NULL);
            }
            CHECK(head_of(v) == MSP_HEAD_IDLE);
        }
        CHECK(q.load.bytes == 0);
        uint64_t inflight, kept;
        CHECK(msp_queue_close(&q, NULL, &inflight, &kept) == NULL);
        msp_queue_trim_idle(&q);
        msp_queue_trim_idle(&q);
    }
}

/* An emptied queue closed, its config asleep: the ring goes back to the kernel
 * at the first quiet trim period. */
static void close_asleep(struct msp_queue *q)
{
    uint64_t inflight, kept;
    CHECK(msp_queue_close(q, NULL, &inflight, &kept) == NULL);
    msp_queue_expect(q, 0, 0);
    msp_queue_trim_idle(q);
    msp_queue_trim_idle(q);
    CHECK(q->ring.base == NULL);
}

/* One small item in and out: the service dumping a little. */
static void trickle(struct msp_queue *q, uint64_t budget)
{
    msp_queue_release(q, reserved(q, 100, budget));
}

#define FIT_MIB (UINT64_C(1) << 20)
#define FIT_BUDGET (16 * FIT_MIB)
#define FIT_BURST 24

/* The fit tests' start: an awake queue of FIT_BUDGET that keeps what two trim
 * periods needed, and a burst of 12 MiB live at once, faulted in. */
static void fit_burst(struct msp_queue *q, struct msp_item *burst[FIT_BURST])
{
    msp_queue_init(q, 1);
    q->keep_trims = 2;
    msp_queue_expect(q, 0, 1); /* awake, nothing to warm */
    for (int i = 0; i < FIT_BURST; i++)
        burst[i] = reserved(q, FIT_MIB / 2 - 1024, FIT_BUDGET);
}

/* A ring that is not warmed starts as one huge page and a burst takes what it
 * needs, in huge pages. A service that goes on dumping a little after a burst
 * keeps only what the ring has needed within the last keep_trims trim periods:
 * the burst's memory stays through them (the next burst finds it), then what
 * lies past that need goes back to the kernel and the ring keeps below it
 * while a trickle goes on, even one that never lets it empty; a new burst
 * takes what it needs again. */
static void test_queue_fit(void)
{
    struct msp_queue q;
    const uint64_t mib = FIT_MIB, budget = FIT_BUDGET;
    struct msp_item *burst[FIT_BURST];
    fit_burst(&q, burst);
    CHECK(q.maps == 1 && q.ring.soft == 12 * mib && q.ring.reached >= 11 * mib);
    CHECK(resident_bytes(q.ring.base + 12 * mib, budget - 12 * mib) == 0);
    for (int i = 0; i < FIT_BURST; i++)
        msp_queue_release(&q, burst[i]);
    msp_queue_trim_idle(&q); /* the burst's period */
    trickle(&q, budget);
    msp_queue_trim_idle(&q);
    /* the burst's need (12 MiB in whole huge pages): kept, faulted in */
    CHECK(q.trimmed == 0 && q.ring.soft == 12 * mib && resident_bytes(q.ring.base, 11 * mib) == 11 * mib);
    trickle(&q, budget);
    msp_queue_trim_idle(&q); /* the burst left the window: a huge page is enough */
    CHECK(q.trimmed == 1 && q.ring.soft == 2 * mib && q.ring.base && q.maps == 1);
    CHECK(resident_bytes(q.ring.base + 2 * mib, budget - 2 * mib) == 0);
    /* a trickle that never empties the ring: regions start again at 0 past soft */
    struct msp_item *live = reserved(&q, 100 << 10, budget);
    for (int i = 0; i < 200; i++) {
        struct msp_item *next = reserved(&q, 100 << 10, budget);
        CHECK(in_ring(&q, next, 100 << 10) && next->data + (100 << 10) <= q.ring.base + q.ring.soft);
        msp_queue_release(&q, live);
        live = next;
    }
    msp_queue_trim_idle(&q);
    CHECK(q.ring.soft == 2 * mib && resident_bytes(q.ring.base + 2 * mib, budget - 2 * mib) == 0);
    /* a new burst: past the soft end, as far as it needs */
    for (int i = 0; i < FIT_BURST; i++)
        burst[i] = reserved(&q, mib / 2 - 1024, budget);
    CHECK(q.ring.soft >= q.ring.reached && q.ring.soft - q.ring.reached < 2 * mib &&
          q.maps == 1 && q.heap_items == 0 && q.ring.reached >= 11 * mib);
    for (int i = 0; i < FIT_BURST; i++)
        msp_queue_release(&q, burst[i]);
    msp_queue_release(&q, live);
    close_asleep(&q);
}

/* A region that lives past the soft end when a trim lowers it holds back the
 * memory there; a later trim gives it back once nothing lives past it, though
 * the soft end need not come down again (a huge page is its least). */
static void test_queue_fit_after_a_late_region(void)
{
    struct msp_queue q;
    const uint64_t mib = FIT_MIB, budget = FIT_BUDGET;
    struct msp_item *burst[FIT_BURST];
    fit_burst(&q, burst);
    for (int i = 0; i < FIT_BURST; i++)
        msp_queue_release(&q, burst[i]);
    /* the ring empty, its head at 0 again: one region lives on at 2.5 MiB */
    for (int i = 0; i < 6; i++)
        burst[i] = reserved(&q, mib / 2 - 1024, budget);
    for (int i = 0; i < 5; i++)
        msp_queue_release(&q, burst[i]);
    for (int k = 0; k < 3; k++)
        msp_queue_trim_idle(&q);
    /* the burst left the window: the soft end is down, what lies past it is held */
    CHECK(q.ring.soft == 2 * mib && q.trimmed == 0);
    CHECK(resident_bytes(q.ring.base + 2 * mib, 10 * mib) == 10 * mib);
    msp_queue_release(&q, burst[5]);
    trickle(&q, budget);
    msp_queue_trim_idle(&q);
    CHECK(q.trimmed == 1 && q.ring.soft == 2 * mib);
    CHECK(resident_bytes(q.ring.base + 2 * mib, budget - 2 * mib) == 0);
    close_asleep(&q);
}

/* The head, started again at 0 past the soft end, catches up with a tail that
 * has not yet stepped over the pad to the ring's end: the budget has room, so
 * the item is malloc'd, not dropped (nor waited for); once the tail has gone
 * round, the ring takes items again. */
static void test_queue_wrapped_front(void)
{
    struct msp_queue q;
    msp_queue_init(&q, 1);
    const uint64_t mib = UINT64_C(1) << 20, budget = 16 * mib;
    msp_queue_expect(&q, 0, 1); /* awake, nothing to warm: the ring starts small */
    struct msp_item *a = reserved(&q, mib, budget), *b = reserved(&q, mib * 3 / 4, budget);
    CHECK(q.ring.soft == 2 * mib && in_ring(&q, a, mib) && in_ring(&q, b, mib * 3 / 4));
    msp_queue_release(&q, a); /* the tail waits at b, ~1 MiB in */
    struct msp_item *c = reserved(&q, mib / 2, budget); /* past soft, the front free: at 0 */
    CHECK(in_ring(&q, c, mib / 2) && (unsigned char *)c < q.ring.base + mib);
    struct msp_item *d = reserved(&q, mib * 3 / 4, budget); /* would run into b */
    CHECK(d && !d->in_ring && q.heap_items == 1 && q.ring.soft == 2 * mib);
    msp_queue_release(&q, b); /* the tail steps over the pad, to c */
    struct msp_item *e = reserved(&q, mib / 2, budget);
    CHECK(in_ring(&q, e, mib / 2) && q.heap_items == 1);
    msp_queue_release(&q, c);
    msp_queue_release(&q, d);
    msp_queue_release(&q, e);
    close_asleep(&q);
}

/* The pending and rounds calls for a tensor path, as pending.h makes them. */
static void add(struct msp_proc *p, const char *path)
{
    char key[MSP_ROUND_KEY_LEN];
    msp_pending_add(p, key, msp_round_key(path, strlen(path), key));
}

static void done1(struct msp_proc *p, const char *path)
{
    char key[MSP_ROUND_KEY_LEN];
    msp_pending_done(p, key, msp_round_key(path, strlen(path), key), 1);
}

static int selected(struct msp_rounds *r, const char *path, int live, char done[])
{
    char key[MSP_ROUND_KEY_LEN];
    return msp_rounds_selected(r, key, msp_round_key(path, strlen(path), key), live, done);
}

static int recorded(struct msp_rounds *r, const char *path, char done[])
{
    char key[MSP_ROUND_KEY_LEN];
    return msp_rounds_recorded(r, key, msp_round_key(path, strlen(path), key), 1, done);
}

static void test_pending(void)
{
    char key[MSP_ROUND_KEY_LEN];
    CHECK(msp_round_key("0_7/3/1_L/before/x.bin", 22, key) == 5 && !strcmp(key, "0_7/3"));
    CHECK(msp_round_key("//0_7//3/x", 10, key) == 5 && !strcmp(key, "0_7/3"));
    CHECK(msp_round_key("0_7/3", 5, key) == 0); /* no file below the round */
    static struct msp_proc p;
    const char *a = "0_7/1/1_L/before/a.bin", *b = "0_7/2/1_L/before/b.bin";
    add(&p, a);
    add(&p, a);
    add(&p, b);
    done1(&p, a);
    done1(&p, b);
    add(&p, b); /* b's entry was freed and is claimed again */
    struct jbuf j;
    jb_init(&j, 64);
    jb_open(&j, '{');
    CHECK(msp_pending_json(&j, "u", &p) == 2);
    jb_close(&j, '}');
    jb_raw(&j, "", 1);
    CHECK(!strcmp(j.p, "{\"u\":{\"0_7/1\":1,\"0_7/2\":1}}") ||
          !strcmp(j.p, "{\"u\":{\"0_7/2\":1,\"0_7/1\":1}}"));
    jb_free(&j);
    /* more rounds than entries: the rest is counted, and uncounted, as other */
    char path[64];
    for (int i = 0; i < MSP_PENDING_ROUNDS + 3; i++) {
        snprintf(path, sizeof path, "0_7/%d/1_L/x.bin", 100 + i);
        add(&p, path);
    }
    CHECK(p.pending_other == 5); /* 2 entries were already taken */
    for (int i = 0; i < MSP_PENDING_ROUNDS + 3; i++) {
        snprintf(path, sizeof path, "0_7/%d/1_L/x.bin", 100 + i);
        done1(&p, path);
    }
    done1(&p, a);
    done1(&p, b);
    done1(&p, b); /* one too many: never below zero */
    jb_init(&j, 64);
    jb_open(&j, '{');
    CHECK(msp_pending_json(&j, "u", &p) == 0);
    jb_free(&j);
    /* a writer's run of n records at once: the round's entry, then other */
    add(&p, a);
    add(&p, a);
    p.pending_other = 2;
    size_t len = msp_round_key(a, strlen(a), key);
    msp_pending_done(&p, key, len, 3);
    CHECK(p.pending_other == 1);
    msp_pending_done(&p, key, len, 5);
    jb_init(&j, 64);
    jb_open(&j, '{');
    CHECK(msp_pending_json(&j, "u", &p) == 0);
    jb_free(&j);
}

static void test_rounds(void)
{
    static struct msp_rounds r;
    msp_rounds_init(&r);
    char done[MSP_ROUND_KEY_LEN];
    const char *a = "0_7/1/1_L/before/a.bin", *b = "0_7/2/1_L/before/b.bin";
    const char *c = "0_7/3/1_L/before/c.bin";
    CHECK(!selected(&r, a, 1, done));
    CHECK(!selected(&r, a, 1, done));
    CHECK(!recorded(&r, a, done)); /* one of round 1 left */
    /* the host moves on while a round-1 tensor waits for its writer */
    CHECK(!selected(&r, b, 1, done));
    CHECK(recorded(&r, a, done) && !strcmp(done, "0_7/1"));
    /* every round-2 record is in before the host leaves it: said on leaving */
    CHECK(!recorded(&r, b, done)); /* still the host's round */
    CHECK(selected(&r, c, 1, done) && !strcmp(done, "0_7/2"));
    /* the recorder hands over an old round: it does not move the host */
    const char *old = "0_7/0/1_L/before/o.bin";
    CHECK(!selected(&r, old, 0, done));
    CHECK(recorded(&r, old, done) && !strcmp(done, "0_7/0"));
    CHECK(!recorded(&r, c, done)); /* round 3 is the host's */
    /* a record of an unknown round, or one too many: nothing */
    CHECK(!recorded(&r, old, done));
    CHECK(!recorded(&r, "x", done));
    /* a full table: the rounds without an entry are never announced */
    char path[64];
    for (int i = 0; i < MSP_ROUNDS_MAX + 2; i++) {
        snprintf(path, sizeof path, "0_7/%d/1_L/x.bin", 100 + i);
        CHECK(!selected(&r, path, 1, done) || i == 0);
    }
    int said = 0;
    for (int i = 0; i < MSP_ROUNDS_MAX + 2; i++) {
        snprintf(path, sizeof path, "0_7/%d/1_L/x.bin", 100 + i);
        said += recorded(&r, path, done);
    }
    /* the rounds that found a place are announced, the two after them not */
    CHECK(said == MSP_ROUNDS_MAX);
    snprintf(path, sizeof path, "0_7/%d/1_L/x.bin", 100 + MSP_ROUNDS_MAX + 1);
    CHECK(!selected(&r, path, 1, done)); /* untracked: silent */
    CHECK(!recorded(&r, path, done));
    CHECK(!selected(&r, a, 1, done)); /* and left: still silent */
    /* a writer's run of records of one round, counted out at once */
    static struct msp_rounds r2;
    msp_rounds_init(&r2);
    for (int i = 0; i < 3; i++)
        CHECK(!selected(&r2, a, 1, done));
    CHECK(!selected(&r2, b, 1, done));
    char key[MSP_ROUND_KEY_LEN];
    size_t len = msp_round_key(a, strlen(a), key);
    CHECK(!msp_rounds_recorded(&r2, key, len, 2, done));
    CHECK(msp_rounds_recorded(&r2, key, len, 5, done) && !strcmp(done, "0_7/1"));
}

/* The filters' truth table: ids and op_name forms, and dirs of every shape. */
static const char *const sel_filters[][2] = {
    {"", ""}, {"5", ""}, {"50", ""}, {"2_1", ""}, {"0,2_1", ""}, {"5,2_1_0", ""},
    {"", "linear"}, {"", "word,linear"}, {"", "LINEAR"}, {"", "matmul"}, {"9", "layer"},
    {"2", "matmulkernel"}, {"7_Prefill", ""}, {"-1", ""}};
static const char *const sel_dirs[] = {
    "0_1/0/2_Layer", "0_1/7/2_Layer", "0_1/0/5_Layer", "3_77/123456/5_Layer",
    "0_1/0/50_Layer", "0_1/0/5_Layer/0_Linear", "0_1/9/5_Layer/0_Linear",
    "0_1/0/2_Layer/1_LinearOperation", "0_1/0/2_Layer/1_LinearOperation/0_MatMulKernel",
    "0_1/0/2_Layer/10_Linear", "0_1/0/2_Layer/1_Linear/0_K", "0_1/0/2_Layer/0_LinearKernel",
    "0_1/0/2_Layer/1_Other", "0_1/0/9_Embedding", "0_1/0/3_Embedding", "0_1/0/Layer",
    "0_1/0/7_Prefill_5/0_Linear", "0_1/0/2_Layer/1_LinearOperation/0_MatMulKernel/x",
    "LinearOpsRunner", "LinearOpsRunner/0_MatMulKernel", "0_1/0", "0_1/0/", "a/b/c",
    "/0/2_Layer", "0_1//2_Layer", "0_1/0/2_Layer/", "0_1/0/2_L", "1/2/", "x", "",
    "0_1/0/-1_Layer", "0_1/0/_Layer", "0_1/0/2_Layer//1_Linear",
    "0_1/0/2_Layer/1_LinearOperation/0_MatMulKernel/2_LinearOperation/3_LinearOperation/"
    "4_LinearOperation/5_LinearOperation/6_LinearOperation/7_LinearOperation/"
    "8_LinearOperation/9_LinearOperation/10_LinearOperation/11_LinearKernel"};

/* The cached verdicts (selcache.h) against the filters' own over their truth
 * table: ids and op_name forms, save_child, dirs of every shape, each config
 * an epoch, asked in turn (the second time from the cache), with an edit
 * between epochs and with a table so small that entries are replaced all the
 * time. The cache may never answer other than msp_op_selected. */
static void test_selcache(void)
{
    size_t nf = sizeof sel_filters / sizeof sel_filters[0], nd = sizeof sel_dirs / sizeof sel_dirs[0];
    struct msp_selcache *caches[2] = {msp_selcache_new(13), msp_selcache_new(1)};
    CHECK(caches[0] && caches[1]);
    if (!caches[0] || !caches[1])
        return;
    int bad = 0, differs = 0;
    uint32_t epoch = 0;
    for (int c = 0; c < 2; c++)
        for (int pass = 0; pass < 2; pass++) /* the second pass: every edit again */
            for (size_t f = 0; f < nf; f++)
                for (int child = 0; child < 2; child++) {
                    struct msp_config cfg = cfg_with(sel_filters[f][0], sel_filters[f][1], child);
                    epoch++;
                    for (int ask = 0; ask < 3; ask++)
                        for (size_t d = 0; d < nd; d++) {
                            /* a copy with nothing readable past it, as ASan sees it */
                            size_t n = strlen(sel_dirs[d]);
                            char *dir = malloc(n ? n : 1);
                            memcpy(dir, sel_dirs[d], n);
                            int want = msp_op_selected(&cfg, dir, n);
                            int got = msp_selcache_op_selected(caches[c], epoch, &cfg, dir, n);
                            if (got != want && bad++ < 5)
                                printf("FAIL selcache: filters \"%s\" \"%s\" save_child %d, "
                                       "dir %s: cached %d, filters %d\n", sel_filters[f][0],
                                       sel_filters[f][1], child, sel_dirs[d], got, want);
                            differs += want != msp_op_selected(&cfg, sel_dirs[0], strlen(sel_dirs[0]));
                            free(dir);
                        }
                }
    CHECK(bad == 0);
    CHECK(differs > 0); /* the table has verdicts of both kinds */
    /* epoch 0 is never cached */
    struct msp_config cfg = cfg_with("2", "", 0);
    CHECK(msp_selcache_op_selected(caches[0], 0, &cfg, "0_1/0/2_Layer", 13) == 1);
}

/* A dir in a buffer that lies where ATB's might: the memo (dirmemo.h) may
 * answer only what the filters say of the buffer's content now. */
static int memo_sound(const struct msp_config *cfg, uint32_t epoch, const char *buf, size_t n)
{
    int got = msp_dirmemo_get(epoch, buf, n);
    return got < 0 || got == msp_op_selected(cfg, buf, n);
}

/* Each thread's memo of its verdicts (dirmemo.h): kept per buffer, answered
 * again when only the round's digits changed, never once any other byte did
 * (every byte of every dir of the truth table set to each of a few bytes, in
 * one buffer reused for every dir), a '/' came into the round, or the epoch
 * moved; a dir with nothing readable past it is answered the same, read
 * within its bytes only (ASan). */
static void test_dirmemo(void)
{
    size_t nf = sizeof sel_filters / sizeof sel_filters[0], nd = sizeof sel_dirs / sizeof sel_dirs[0];
    static const char bytes[] = "/_059aLl-";
    char *buf = malloc(256);
    CHECK(buf != NULL);
    if (!buf)
        return;
    int unsound = 0, hits = 0, exact_hits = 0;
    uint32_t epoch = 0;
    for (size_t f = 0; f < nf; f++)
        for (int child = 0; child < 2; child++) {
            struct msp_config cfg = cfg_with(sel_filters[f][0], sel_filters[f][1], child);
            epoch++;
            for (size_t d = 0; d < nd; d++) {
                size_t n = strlen(sel_dirs[d]);
                memcpy(buf, sel_dirs[d], n);
                unsound += !memo_sound(&cfg, epoch, buf, n); /* another dir's entry */
                int want = msp_op_selected(&cfg, buf, n);
                /* a copy with nothing readable past it, as ASan sees it */
                char *exact = malloc(n ? n : 1);
                memcpy(exact, buf, n);
                msp_dirmemo_put(epoch, exact, n, want);
                exact_hits += msp_dirmemo_get(epoch, exact, n) == want;
                free(exact);
                msp_dirmemo_put(epoch, buf, n, want);
                hits += msp_dirmemo_get(epoch, buf, n) == want;
                unsound += msp_dirmemo_get(epoch + 1, buf, n) >= 0;
                for (size_t q = 0; q < n; q++)
                    for (const char *b = bytes; *b; b++) {
                        char was = buf[q];
                        buf[q] = *b;
                        unsound += !memo_sound(&cfg, epoch, buf, n);
                        buf[q] = was;
                    }
            }
        }
    CHECK(unsound == 0);
    CHECK(hits > 0 && exact_hits == hits);
    /* the same op a round later is answered from the memo; a '/' in the
     * round or another op in the same buffer is not */
    struct msp_config cfg = cfg_with("", "matmul", 0);
    strcpy(buf, "0_12345/17/1_LinearOperation/0_MatMulKernel");
    size_t n = strlen(buf);
    msp_dirmemo_put(++epoch, buf, n, msp_op_selected(&cfg, buf, n));
    memcpy(buf + 8, "42", 2);
    CHECK(msp_dirmemo_get(epoch, buf, n) == 1);
    memcpy(buf + 8, "4/", 2);
    CHECK(msp_dirmemo_get(epoch, buf, n) == -1);
    strcpy(buf, "0_12345/17/1_LinearOperation/0_MatAddKernel");
    CHECK(msp_dirmemo_get(epoch, buf, n) == -1);
    free(buf);
}

int main(void)
{
    test_filters();
    test_overflow_finding();
    test_selcache();
    test_dirmemo();
    test_paths();
    test_fs();
    test_dirchain();
    test_binfile();
    test_stats();
    test_stats_simd();
    test_stats_paths();
    test_tensorscan();
    test_json();
    test_json_f64();
    test_json_strings();
    test_content_hash();
    test_ring();
    test_ring_overwrite();
    test_queue();
    test_queue_warm();
    test_queue_keep();
    test_ring_busy_grows();
    test_ring_pad_at_the_soft_end();
    test_queue_fit();
    test_queue_fit_after_a_late_region();
    test_queue_wrapped_front();
    test_queue_lead();
    test_window();
    test_queue_small_items();
    test_queue_heads();
    test_queue_heads_random();
    test_queue_close_keeps();
    test_queue_push_near();
    test_queue_push_near_weighs_files();
    test_recbatch_due();
    test_queue_block();
    test_queue_runs();
    test_pending();
    test_rounds();
    printf("%d passed, %d failed\n", g_pass, g_fail);
    return g_fail ? 1 : 0;
}
