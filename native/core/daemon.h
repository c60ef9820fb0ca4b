/* The control plane: one daemon per output dir, started by whichever shim
 * finds its lock (.probe/daemon.lock) free. */
#ifndef MSP_DAEMON_H
#define MSP_DAEMON_H

/* Starts `$MSPROBE_ATB_PYTHON -m msprobe_atb daemon` (detached, own
 * session, no LD_PRELOAD, output appended to .probe/daemon.log) unless a
 * daemon holds the lock. Called at attach and by the monitor, so a killed
 * daemon is restarted. Returns 1 if no daemon held the lock (whatever is
 * in the block was published by a daemon that is gone), else 0. */
int msp_ensure_daemon(void);
/* Forgets the retry state (a forked child starts afresh). */
void msp_daemon_reset(void);

#endif
