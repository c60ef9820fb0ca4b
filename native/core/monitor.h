/* The monitor: the probe's periodic duties (every 250 ms): dump-root
 * removal, counters, config follow-up and errors on the console, daemon
 * restarts, giving back an idle copy ring. */
#ifndef MSP_MONITOR_H
#define MSP_MONITOR_H

/* Starts the monitor thread; 0 on success. */
int msp_monitor_start(void);
/* Wakes it up to notice g_msp.closing (exit drain). */
void msp_monitor_kick(void);
/* Publishes the per-thread op counters to our slot. */
void msp_monitor_flush_counters(void);
/* A new control block: its config errors start over. */
void msp_monitor_new_block(void);
/* Forked child: no monitor thread, nothing seen yet. */
void msp_monitor_reset(void);

#endif
