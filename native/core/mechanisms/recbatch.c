/* A writer's batch of records: the lines in one buffer, their room claimed in
 * the log, one write(2) for all of them, then what waits for each (recbatch.h). */
#include "recbatch.h"

#include <stdlib.h>
#include <string.h>

#include "pending.h"
#include "record.h"

struct joined {
    size_t end; /* where its line ends in buf */
    struct msp_recbatch_entry e;
};

struct msp_recbatch {
    char *buf;
    size_t len, cap;
    struct joined *j;
    size_t n, jcap;
    msp_recbatch_after after;
};

/* A full batch plus its last record: a record longer than that grows it. */
#define START_CAP (MSP_RECBATCH_BYTES + (16u << 10))
#define START_RECORDS 512

struct msp_recbatch *msp_recbatch_new(msp_recbatch_after after)
{
    struct msp_recbatch *rb = calloc(1, sizeof *rb);
    if (!rb)
        return NULL;
    rb->buf = malloc(START_CAP);
    rb->j = malloc(START_RECORDS * sizeof *rb->j);
    if (!rb->buf || !rb->j) {
        free(rb->buf);
        free(rb->j);
        free(rb);
        return NULL;
    }
    rb->cap = START_CAP;
    rb->jcap = START_RECORDS;
    rb->after = after;
    return rb;
}

void msp_recbatch_reset(struct msp_recbatch *rb)
{
    rb->len = rb->n = 0;
}

/* Room for one more record of n bytes; 0 if out of memory. */
static int room(struct msp_recbatch *rb, size_t n)
{
    if (n > rb->cap - rb->len) {
        size_t cap = rb->len + n > 2 * rb->cap ? rb->len + n : 2 * rb->cap;
        char *p = realloc(rb->buf, cap);
        if (!p)
            return 0;
        rb->buf = p;
        rb->cap = cap;
    }
    if (rb->n == rb->jcap) {
        struct joined *j = realloc(rb->j, 2 * rb->jcap * sizeof *j);
        if (!j)
            return 0;
        rb->j = j;
        rb->jcap *= 2;
    }
    return 1;
}

int msp_recbatch_commit(struct msp_recbatch *rb, struct jbuf *b,
                        const struct msp_recbatch_entry *e)
{
    /* "}\n" still to come (msp_rec_close); with no memory for it, the record
     * goes out alone, after the batch, so the order stays */
    if (rb && !room(rb, b->len + 2)) {
        msp_recbatch_flush(rb);
        rb = NULL;
    }
    if (!rb) {
        int rc = msp_rec_commit(b);
        if (rc == 0 && e->path)
            msp_pending_recorded(e->path, e->pathn);
        return rc;
    }
    int joined = msp_rec_close(b) == 0;
    if (joined) {
        memcpy(rb->buf + rb->len, b->p, b->len);
        rb->len += b->len;
        rb->j[rb->n++] = (struct joined){rb->len, *e};
    }
    jb_free(b);
    return joined ? 1 : -1;
}

int msp_recbatch_full(const struct msp_recbatch *rb)
{
    return rb->len >= MSP_RECBATCH_BYTES;
}

void msp_recbatch_flush(struct msp_recbatch *rb)
{
    if (!rb->n)
        return;
    size_t done = msp_rec_append(rb->buf, rb->len), landed = 0;
    while (landed < rb->n && rb->j[landed].end <= done)
        landed++;
    if (landed)
        msp_rec_landed(landed);
    for (size_t i = 0; i < rb->n; i++) {
        const struct msp_recbatch_entry *e = &rb->j[i].e;
        if (i < landed && e->path)
            msp_pending_recorded(e->path, e->pathn);
        rb->after(e, i < landed);
    }
    rb->len = rb->n = 0;
}
