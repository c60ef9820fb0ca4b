/* The control plane: one daemon per output dir, started by whichever shim
 * finds its lock (.probe/daemon.lock) free. */
#ifndef MSP_DAEMON_H
#define MSP_DAEMON_H

/* Starts `$MSPROBE_ATB_PYTHON -m msprobe_atb daemon` (own session, no
 * LD_PRELOAD, output appended to .probe/daemon.log) unless a daemon holds
 * the lock. Called at attach and by the monitor, so a killed daemon is
 * restarted. Returns 1 if it started one (whatever is in the block was
 * published by a daemon that is gone), -1 if the start failed at once
 * (said why on stderr), else 0. */
int msp_ensure_daemon(void);
/* 1 if the last start failed (the Python could not be run, or exited
 * non-zero before the daemon took its lock); says why once. Reaps the
 * spawned process, so attach polls it while it waits for the first publish. */
int msp_daemon_check(void);
/* Forgets the retry state (a forked child starts afresh). */
void msp_daemon_reset(void);

#endif
