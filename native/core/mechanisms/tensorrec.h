/* The records of the writers' items (docs/contracts.md §4): a tensor's
 * `tensor` record and an op_param.json's `param` record, whatever became of
 * the item (written, linked, a stub, lost), and what the slot counts once
 * they are in the log. */
#ifndef MSP_TENSORREC_H
#define MSP_TENSORREC_H

#include <stddef.h>
#include <stdint.h>

#include "queue.h"
#include "recbatch.h"
#include "stats.h"

/* What a `tensor` record describes; strings are (pointer, length) views. */
struct msp_tensor_desc {
    uint64_t seq;
    const char *path, *dims, *format_s, *dtype_s;
    size_t pathn, dimsn, formatn, dtypen;
    uint64_t size;
    uint32_t task;
    int hashed;    /* the payload was hashed: `hash` goes in the record */
    uint64_t hash; /* msp_content_hash of the payload */
};

/* What a record says became of its item: its `file`, and what the slot
 * counts for it once the record is in the log (msp_tensorrec_appended). */
enum msp_outcome { MSP_OUT_BIN, MSP_OUT_LINKED, MSP_OUT_STUB, MSP_OUT_STUB_REFUSED, MSP_OUT_NONE,
                   MSP_OUT_LOST, MSP_OUT_PARAM, MSP_OUT_PARAM_LOST };

/* The batch this thread's records join (a writer thread's, recbatch.h); on
 * other threads (NULL) each record is appended at once. */
void msp_tensorrec_use_batch(struct msp_recbatch *batch);
/* The batch's `after` (recbatch.h): n records are in the log (landed) or
 * not; counts their outcomes, or takes back the files no row would name. */
void msp_tensorrec_appended(const struct msp_recbatch_entry *e, size_t n, int landed);

/* The desc of a queued tensor (not hashed). */
void msp_tensor_desc_of(const struct msp_item *it, struct msp_tensor_desc *d);
/* The `tensor` record of outcome o (alias: the file a link or stub names).
 * 1 if it is in the log, or will be with its batch. */
int msp_tensor_record(const struct msp_tensor_desc *d, enum msp_outcome o, const char *alias,
                      const struct msp_stats *stats, const char *note);
/* The `param` record of outcome o. */
void msp_param_record(uint64_t seq, const char *path, size_t pathn, enum msp_outcome o,
                      const char *note);

/* A selected tensor that will not be written: record + log (counters are
 * the caller's, since drops and errors are counted apart). On a writer
 * thread its record joins the writer's batch (recbatch.h); elsewhere it is
 * appended at once. */
void msp_tensor_lost(const struct msp_tensor_desc *d, const char *note);
/* An op_param.json that will not be written. */
void msp_param_lost(uint64_t seq, const char *path, size_t pathn, const char *note);
/* The same for a queued item (tensor or param). */
void msp_item_lost(const struct msp_item *it, const char *note);

#endif
