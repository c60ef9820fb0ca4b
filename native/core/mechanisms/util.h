/* Small process-wide helpers of the probe core: logging, clocks, env. */
#ifndef MSP_UTIL_H
#define MSP_UTIL_H

#include <stddef.h>
#include <stdint.h>
#include <time.h>

#define MSP_LOG_PREFIX "[msprobe-atb] "

/* One line to stderr with the prefix, written with a single write(2) so
 * lines of concurrent threads never interleave. */
void msp_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Like msp_log but for per-tensor errors: after a burst of lines it only
 * counts (a full disk must not flood the host's stderr); the counters in
 * the control block and the record log still carry every loss. */
void msp_log_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void msp_log_reset(void);
/* A long message as lines of at most MSP_LOG_WIDTH columns, broken between words,
 * the continuation lines indented under the prefix; one write(2), so the
 * messages of processes sharing a console do not mix. */
#define MSP_LOG_WIDTH 100
void msp_log_wrapped(const char *text);

/* write(2) to the host's stdout/stderr that never raises SIGPIPE in it. */
void msp_write_tty(int fd, const char *buf, size_t len);

/* A name from a table of the shim's own words, its length beside it, so a
 * record or a check takes no strlen of it. */
struct msp_name {
    const char *s;
    size_t n;
};
#define MSP_NAME(lit) {lit, sizeof lit - 1}

uint64_t msp_now_ns(void);  /* CLOCK_REALTIME */
uint64_t msp_mono_ns(void); /* CLOCK_MONOTONIC */
/* A CLOCK_MONOTONIC deadline (ns) as a timed wait's timespec. */
struct timespec msp_mono_timespec(uint64_t deadline_ns);

/* The memory a malloc of n bytes takes (glibc, 64-bit): a chunk of the request
 * and its 8-byte size word rounded up to 16, at least 32; from its default mmap
 * threshold (128 KiB) on, pages of its own with a 16-byte header (more than
 * the heap would take if the threshold has grown: an upper bound). What a
 * malloc'd item is charged to a byte budget, so the budget bounds the memory
 * of the small items too (a one-element tensor's statistics), not only their
 * payloads. */
static inline uint64_t msp_malloc_cost(uint64_t n)
{
    if (n >= (UINT64_C(128) << 10))
        return (n + 16 + 4095) & ~(uint64_t)4095;
    uint64_t chunk = (n + 8 + 15) & ~(uint64_t)15;
    return chunk < 32 ? 32 : chunk;
}

/* Integer from the environment, clamped to [lo, hi]; def if unset or bad. */
long msp_env_long(const char *name, long def, long lo, long hi);

/* 64-bit FNV-1a style hash over words, chainable: pass the previous result
 * as seed (start with MSP_FNV_SEED). Not cryptographic: dedup verifies the
 * bytes before aliasing, the hash only finds candidates. */
#define MSP_FNV_SEED 0xcbf29ce484222325ULL
uint64_t msp_fnv1a(uint64_t seed, const void *data, size_t len);

#endif
