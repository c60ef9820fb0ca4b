/* The monitor: the probe's periodic duties (every 250 ms): dump-root
 * removal, counters, config follow-up and errors on the console, daemon
 * restarts, giving back an idle copy ring.
 *
 * The monitor thread starts at the first wake, with the writers. Before
 * that the duties run from the hooks (msp_monitor_hook_tick, every
 * MSP_OPS_BATCH runner setups of a thread, at most every 250 ms), so an
 * asleep process has no thread of ours: a second thread would make glibc's
 * malloc leave its single-thread fast path in the host. An asleep process
 * that runs no op does nothing until it runs one. */
#ifndef MSP_MONITOR_H
#define MSP_MONITOR_H

/* Starts the monitor thread; 0 on success. */
int msp_monitor_start(void);
/* The duties from a hook thread, if no monitor thread runs and they are
 * due (the caller holds none of our locks). */
void msp_monitor_hook_tick(void);
/* Wakes it up to notice g_msp.closing (exit drain). */
void msp_monitor_kick(void);
/* Publishes the per-thread op counters to our slot. */
void msp_monitor_flush_counters(void);
/* Forked child: no monitor thread, nothing seen yet. */
void msp_monitor_reset(void);

#endif
