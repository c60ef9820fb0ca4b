/* The flight recorder (README "The flight recorder"): while the config's recorder block is in
 * force, selected items are held in memory per round (ring_overwrite.h)
 * instead of being written; a trigger flushes the rounds before it in every
 * process of the output dir (through the control block's incident table),
 * then `after_rounds` more are dumped directly. */
#ifndef MSP_RECORDER_H
#define MSP_RECORDER_H

#include <stddef.h>
#include <stdint.h>

#include "msprobe_atb/control.h"
#include "queue.h"

/* What the save hooks do with an item while cfg.rec_armed is set. */
enum { MSP_ROUTE_HOLD = 1, MSP_ROUTE_DIRECT, MSP_ROUTE_DROP };

/* Decides for an item of `path` (round bookkeeping and pending incidents
 * included). */
int msp_recorder_route(const struct msp_config *c, const char *path, size_t n);
/* Takes a filled item allocated with msp_item_heap_alloc: held, or (if an
 * incident moved its round meanwhile) queued or freed. Scans it for the
 * shim-side triggers. The seq it took keeps its place among the held; when it
 * is queued it is counted pending and takes its own (pending.h), so flushed
 * items keep the order they were saved in and take seqs above any record in
 * the log. */
void msp_recorder_hold(const struct msp_config *c, struct msp_item *it);
/* Scans an item dumped directly in a flush window: a trigger there is
 * queued as the next incident. */
void msp_recorder_scan(const struct msp_config *c, const struct msp_item *it);
/* ATB's ReportOverflowKernel while armed with the overflow trigger. */
void msp_recorder_overflow(const struct msp_config *c, const char *kernel, size_t n);
/* Monitor tick under config c (NULL: none yet), awake or not: applies
 * incidents of other processes, drops the ring after a disarming edit,
 * publishes the ring's gauges. */
void msp_recorder_tick(const struct msp_config *c, int awake);
/* Process exit under config c (NULL: none): flush_on_exit flushes the ring,
 * else it is dropped and the slot says so. Before the exit drain. */
void msp_recorder_exit(const struct msp_config *c);
/* A forked child starts with an empty recorder. */
void msp_recorder_reset(void);

static inline int msp_recorder_overflow_wanted(const struct msp_config *c)
{
    return c->rec_armed && (c->rec_triggers & MSP_TRIG_OVERFLOW);
}

#endif
