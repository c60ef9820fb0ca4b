/* `make bench`'s statistics throughput (bench/stats_throughput.py): the
 * shim's one-pass statistics over a file of raw elements, taken SLICE bytes a
 * call (the whole file, or the small tensors of a decode step), repeated for
 * at least SECONDS of this thread's CPU time (0: one pass); and the floor the
 * same thread reaches on the same slices (an OR of 256-bit words, a memcpy).
 *
 *   stats_bench DTYPE FILE SLICE SECONDS   prints "gbps=<G> ns=<per call> stats=<the last
 *                                          slice's stats JSON>"
 *   stats_bench floor FILE SLICE SECONDS   prints "read_gbps=<G, 0 without AVX2> copy_gbps=<G>" */
#include <immintrin.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "jsonw.h"
#include "stats.h"

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts); /* per core, whatever the load */
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static volatile uint64_t g_sink;

/* The simplest vectorised read of every byte: an OR of 256-bit words, four
 * registers of them (AVX2, as the statistics use). */
__attribute__((target("avx2"))) static void read_floor(const unsigned char *p, size_t len,
                                                       unsigned char *scratch)
{
    (void)scratch;
    __m256i a = _mm256_setzero_si256(), b = a, c = a, d = a;
    size_t i = 0;
    for (; i + 128 <= len; i += 128) {
        a = _mm256_or_si256(a, _mm256_loadu_si256((const __m256i *)(const void *)(p + i)));
        b = _mm256_or_si256(b, _mm256_loadu_si256((const __m256i *)(const void *)(p + i + 32)));
        c = _mm256_or_si256(c, _mm256_loadu_si256((const __m256i *)(const void *)(p + i + 64)));
        d = _mm256_or_si256(d, _mm256_loadu_si256((const __m256i *)(const void *)(p + i + 96)));
    }
    uint64_t words[4], tail = 0;
    for (; i < len; i++)
        tail |= p[i];
    _mm256_storeu_si256((__m256i *)(void *)words,
                        _mm256_or_si256(_mm256_or_si256(a, b), _mm256_or_si256(c, d)));
    g_sink = words[0] | words[1] | words[2] | words[3] | tail;
}

static void copy_floor(const unsigned char *p, size_t len, unsigned char *scratch)
{
    memcpy(scratch, p, len);
    g_sink = scratch[len - 1];
}

struct run {
    const unsigned char *data;
    size_t size, slice, calls;
    double seconds, cpu;
};

/* Calls fn on every slice in turn, whole passes over the file, until `seconds` of CPU time. */
static void repeat(struct run *r, void (*fn)(const unsigned char *, size_t, unsigned char *),
                   unsigned char *scratch)
{
    double start = now(), end;
    r->calls = 0;
    do {
        for (size_t off = 0; off + r->slice <= r->size; off += r->slice, r->calls++)
            fn(r->data + off, r->slice, scratch);
        end = now();
    } while (end - start < r->seconds);
    r->cpu = end - start;
}

static double gbps(const struct run *r)
{
    return (double)r->slice * (double)r->calls / r->cpu / 1e9;
}

static int g_dtype;
static struct msp_stats g_last;

static void stats_call(const unsigned char *p, size_t len, unsigned char *scratch)
{
    char note[128];
    (void)scratch;
    if (msp_stats_compute(g_dtype, p, len, &g_last, note, sizeof note) != 0) {
        fprintf(stderr, "%s\n", note);
        exit(1);
    }
}

int main(int argc, char **argv)
{
    if (argc != 5) {
        fprintf(stderr, "usage: stats_bench DTYPE|floor FILE SLICE SECONDS\n");
        return 2;
    }
    FILE *fp = fopen(argv[2], "rb");
    if (!fp) {
        perror(argv[2]);
        return 1;
    }
    fseek(fp, 0, SEEK_END);
    long size = ftell(fp);
    rewind(fp);
    struct run r = {.size = (size_t)size, .slice = strtoull(argv[3], NULL, 10),
                    .seconds = atof(argv[4])};
    unsigned char *data = malloc(r.size ? r.size : 1);
    if (!data || fread(data, 1, r.size, fp) != r.size || r.slice == 0 || r.slice > r.size) {
        fprintf(stderr, "cannot read %s, or SLICE is not in 1..its size\n", argv[2]);
        return 1;
    }
    fclose(fp);
    r.data = data;
    if (!strcmp(argv[1], "floor")) {
        unsigned char *scratch = malloc(r.slice);
        if (!scratch)
            return 1;
        memset(scratch, 0, r.slice); /* its pages mapped before the clock starts */
        double read = 0; /* 0: no AVX2 */
        if (__builtin_cpu_supports("avx2")) {
            repeat(&r, read_floor, scratch);
            read = gbps(&r);
        }
        repeat(&r, copy_floor, scratch);
        printf("read_gbps=%.3f copy_gbps=%.3f\n", read, gbps(&r));
        return 0;
    }
    g_dtype = atoi(argv[1]);
    repeat(&r, stats_call, NULL);
    struct jbuf b;
    jb_init(&b, 256);
    msp_stats_json(&b, &g_last);
    printf("gbps=%.3f ns=%.1f stats=%.*s\n", gbps(&r), r.cpu * 1e9 / (double)r.calls,
           (int)b.len, b.p);
    return 0;
}
