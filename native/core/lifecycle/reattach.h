/* Re-attach after the dump root (or its data/) was removed while the
 * process runs. */
#ifndef MSP_REATTACH_H
#define MSP_REATTACH_H

/* Users `rm -rf <output>/atb_dump_data` between experiments while the
 * process keeps running. Our fds then name unlinked files: this notices
 * (st_nlink 0 on the record log) and attaches to a fresh tree, or (on
 * data/ alone) opens data/ again. Called by the monitor; the hot path adds
 * nothing: hooks only see new pointers. 1 if it attached to a fresh control
 * block (its config errors start over). */
int msp_reattach_if_removed(void);

#endif
