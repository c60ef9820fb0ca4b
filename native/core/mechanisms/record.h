/* The per-process record log (docs/contracts.md §4): one JSON object per
 * line, appended to an O_APPEND file with a write(2) a record, or a write a
 * batch of whole records (recbatch.h). */
#ifndef MSP_RECORD_H
#define MSP_RECORD_H

#include <stddef.h>
#include <stdint.h>

#include "jsonw.h"

/* Opens <dump_root>/.probe/records/<pid>-<start_ns>.jsonl. fd or -1. */
int msp_rec_open(const char *dump_root, uint64_t pid, uint64_t start_ns);
/* The log records are appended to (-1: none; atomic). The lifecycle sets it to
 * what msp_rec_open gave at attach, swaps a fresh log in under the same number
 * after the dump root was removed, and closes it in a forked child
 * (msp_rec_forget). */
extern int msp_rec_fd;
/* The copy queue's budget in force (the config's), which sizes the reserve;
 * set by the lifecycle at each new config. */
void msp_rec_budget(uint64_t bytes);
/* A forked child: closes its copy of the parent's log; no config sizes the
 * reserve until its own. */
void msp_rec_forget(void);
/* Starts a record: {"k":kind,"t":now (this thread's stamp, if set) */
void msp_rec_begin(struct jbuf *b, const char *kind);
/* The time this thread's records say from now on (CLOCK_REALTIME ns; 0: the
 * clock, read a record). A writer stamps a run of records with one read: at
 * ~27 ns a read (this VM), a clock a record was ~5% of the record path. */
void msp_rec_stamp(uint64_t now_ns);
/* Closes the object, appends it to the log and frees the buffer. Counts
 * the record and the activity in the proc slot. Returns 0 or -1. */
int msp_rec_commit(struct jbuf *b);
/* For a batch (recbatch.h), which appends the record later with others:
 * closes the record in b ("}\n") and claims its room in the log, so the
 * append cannot fail for want of space. 0, or -1 (said) if it is lost (out
 * of memory, no log) or held back (no room left but the floor). */
int msp_rec_close(struct jbuf *b);
/* Appends n bytes of whole records whose room was claimed, with one write(2)
 * (a short one is finished), and gives back the room of what a failure
 * (said) left out. Returns the bytes appended. */
size_t msp_rec_append(const char *p, size_t n);
/* `records` records are in the log: counted in the slot, with the activity. */
void msp_rec_landed(uint64_t records);
/* Like msp_rec_commit, for the exit record: it may use the reserve's floor,
 * which the other records leave alone once the disk is full. */
int msp_rec_commit_final(struct jbuf *b);
/* Appends {"k":"round","round":key}: every selected tensor of that round
 * has its record above it (rounds.h). */
void msp_rec_round(const char *key);
/* Bytes appended to the current log so far. */
uint64_t msp_rec_size(void);
/* Gives the unused reserve back to the file system (at exit). */
void msp_rec_release_reserve(void);

#endif
