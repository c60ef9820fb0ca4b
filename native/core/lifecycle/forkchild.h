/* fork() in an attached process: the child starts over. */
#ifndef MSP_FORKCHILD_H
#define MSP_FORKCHILD_H

/* The pthread_atfork child handler. The child has none of the parent's
 * threads: it forgets the attachment (the parent keeps its slot, record
 * log and queue) and attaches again, as a new process, on its own first
 * hook call. */
void msp_fork_child(void);

#endif
