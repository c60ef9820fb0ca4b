/* `make bench`'s statistics throughput (bench/stats_throughput.py): the
 * shim's one-pass statistics over a file of raw elements, repeated for about
 * half a second of this thread's CPU time.
 *
 *   stats_bench <dtype enum> <file>   prints "gbps=<G> stats=<the record's stats JSON>" */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "jsonw.h"
#include "stats.h"

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts); /* per core, whatever the load */
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: stats_bench DTYPE FILE\n");
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
    unsigned char *data = malloc((size_t)size);
    if (!data || fread(data, 1, (size_t)size, fp) != (size_t)size) {
        fprintf(stderr, "cannot read %s\n", argv[2]);
        return 1;
    }
    fclose(fp);
    struct msp_stats s;
    char note[128];
    int dtype = atoi(argv[1]);
    double start = now(), end;
    long rounds = 0;
    do {
        if (msp_stats_compute(dtype, data, (uint64_t)size, &s, note, sizeof note) != 0) {
            fprintf(stderr, "%s\n", note);
            return 1;
        }
        rounds++;
        end = now();
    } while (end - start < 0.5);
    struct jbuf b;
    jb_init(&b, 256);
    msp_stats_json(&b, &s);
    printf("gbps=%.3f stats=%.*s\n", (double)size * (double)rounds / (end - start) / 1e9,
           (int)b.len, b.p);
    return 0;
}
