/* The flight recorder's statistics channel to the control plane: while the
 * recorder is armed with a trigger the control plane evaluates (growth_over,
 * golden), each held tensor's statistics go into a ring of fixed-size
 * entries in shared memory (/dev/shm, so nothing touches the disk while
 * armed), one file per process, that the daemon reads by name:
 *
 *   /dev/shm/msprobe-atb-<pid>-<start_ns>.stats
 *   header (64 bytes): magic u64, version u32, entry size u32, capacity u64,
 *                      head u64 (entries written so far), 32 bytes reserved
 *   entry i at 64 + (i % capacity) * entry size:
 *     seq u64 (i + 1, stored last), t_ns u64, exec u64, stats kind u32,
 *     has_minmax u32, max f64, min f64, mean f64, norm f64, nan u64, inf u64,
 *     path (NUL-terminated, from offset 80 to the end of the entry)
 *
 * A reader that falls more than `capacity` entries behind loses the oldest
 * (it sees the gap in seq). */
#ifndef MSP_RECSTATS_H
#define MSP_RECSTATS_H

#include <stdint.h>

#include "stats.h"

#define MSP_RECSTATS_MAGIC 0x5354415453524d31ULL /* "1MRSTATS" */
#define MSP_RECSTATS_VERSION 1
#define MSP_RECSTATS_ENTRY 512
#define MSP_RECSTATS_CAP 8192

/* Opens (creating) this process's channel; idempotent. 0 or -1. */
int msp_recstats_open(void);
/* Appends one entry (caller serialises). */
void msp_recstats_put(uint64_t t_ns, uint64_t exec, const struct msp_stats *st, const char *path);
/* Unmaps and unlinks the channel (exit, disarm). */
void msp_recstats_close(void);
/* A forked child must not write into its parent's channel. */
void msp_recstats_forget(void);

#endif
