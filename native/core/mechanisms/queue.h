/* The bounded copy queue between the hook threads and the writer threads.
 * One mutex, one FIFO per writer (items of one layer scope go to one
 * writer, so dedup and write order are deterministic), and one global byte
 * budget shared by all of them. A hook thread's part is one copy into the
 * ring; the writers do every write, beside the host.
 *
 * Payloads go into the ring (ring.h) of the budget's size, mapped at the
 * first dump and reused lap after lap: a steady dump copies into memory that
 * is already faulted in, instead of a fresh mmap per tensor that the kernel
 * must fault and zero page by page. The queue is the ring's block and drop
 * policies: a full budget makes a hook wait for room, or refuses its item. */
#ifndef MSP_QUEUE_H
#define MSP_QUEUE_H

#include <pthread.h>
#include <stdint.h>

#include "msprobe_atb/control.h"
#include "fsutil.h"
#include "ring.h"
#include "window.h"

enum msp_item_kind { MSP_ITEM_TENSOR, MSP_ITEM_PARAM };

/* The struct, then its strings, then the payload: one region of the queue's
 * ring (or a malloc for the struct and strings and one for the payload, see
 * msp_queue_reserve). */
struct msp_item {
    struct msp_item *next;
    enum msp_item_kind kind;
    uint32_t task;         /* MSP_TASK_* of the snapshot at SaveTensor time */
    uint32_t save_child, filter_level;
    int dtype;             /* parsed dtype_s, for the statistics */
    uint64_t seq;
    uint64_t size;         /* payload bytes */
    uint64_t cost;         /* set by the queue: bytes charged to the budget (both parts) */
    char *path, *format_s, *dtype_s, *dims;
    uint32_t pathn, formatn, dtypen, dimsn; /* their lengths (the hook has them) */
    unsigned char *data;   /* set by the queue: the payload buffer */
    uint32_t lead;         /* bytes right before data kept for the .bin header: data - lead
                              is MSP_DIO_ALIGN-aligned, so header and payload go to the
                              file with O_DIRECT from where they lie (0: none) */
    int in_ring;           /* set by the queue: it and its data are a ring region, else
                              each its own malloc */
    void *region;          /* set by the queue: its ring region (it moves up as a writer
                              gives back what it wrote, msp_queue_release_front) */
    int stats_in_data;     /* the recorder kept only the statistics: data holds a struct
                              msp_stats, the payload is gone */
    uint32_t weight;       /* set by the queue: msp_item_weight, what
                              msp_queue_push_near balances */
};

/* An item in the heap, not in a ring: the struct and its strings (`meta`
 * bytes) in one malloc, the payload in another with room for `lead` bytes
 * before it, aligned as in the ring (lead < MSP_DIO_ALIGN). What it costs in
 * memory is ->cost. MSP_PUSH_OK, or MSP_PUSH_NOMEM. The queue's items that do
 * not fit its ring are such, and so are the flight recorder's. */
int msp_item_heap_alloc(uint64_t meta, uint64_t payload, uint32_t lead, struct msp_item **out);
uint64_t msp_item_heap_cost(uint64_t meta, uint64_t payload, uint32_t lead);
void msp_item_heap_free(struct msp_item *it);

/* The item's writer makes a file of it: an op_param.json, or a tensor's .bin
 * (its task writes data; a statistics item is its record alone). */
int msp_item_makes_file(const struct msp_item *it);
/* What writing the item costs its writer, in records: a file costs a directory
 * walk, a create, a write and a rename, a record alone a line in a batch. */
uint32_t msp_item_weight(const struct msp_item *it);
/* An op_param.json of 60 bytes on ext4 took 200-450 us (its op directory made
 * too, which only the param makes under the statistics task) against 2-3 us a
 * statistics record: measured on this 2-core VM under load 5-9. */
#define MSP_QUEUE_FILE_WEIGHT 64

/* What it takes to know writer w's head (control.h writer_head[]): the lowest
 * seq of the items handed to it. Its list's lowest is its front's while the list
 * is in seq order (one host thread pushes in the order it took the seqs); items
 * pushed below the one before them (several threads pushing at once) are its
 * dips, and the list's lowest seq is its front's or a dip's: the dips still
 * queued are a sliding minimum over push numbers (window.h), which may lag,
 * so the head may lag then, never lead. */
struct msp_head {
    uint64_t pushed, popped; /* items ever pushed to / popped from list w */
    struct msp_window dips;  /* (push number, seq) of the dips */
    uint64_t held;          /* lowest seq writer w has in hand: popped and not done,
                               */
    uint64_t in_hand;       /* items writer w has popped and not yet done */
    uint64_t load;          /* the weight of the items on list w and in its hands */
    uint64_t shown;         /* the value in the slot's writer_head[w] */
};

struct msp_queue {
    pthread_mutex_t mu;
    pthread_cond_t space;   /* bytes went down / closed */
    pthread_cond_t idle;    /* depth+inflight reached 0 */
    pthread_cond_t work[MSP_MAX_WRITERS];
    struct msp_item *head[MSP_MAX_WRITERS], *tail[MSP_MAX_WRITERS];
    /* Writer w waits with no timeout: a push wakes it. A writer that finds its
     * list empty first naps (MSP_QUEUE_NAP_NS) unwoken, so a steady stream of
     * small items costs a wake-up a nap, not one an item, and its records go
     * out in batches (writer.c); only a writer idle for a nap sleeps. */
    unsigned char sleeping[MSP_MAX_WRITERS];
    /* Writer w finds the end of its next run with mu released (msp_queue_pop);
     * msp_queue_close waits for that (walked) before it takes the lists. */
    unsigned char walking[MSP_MAX_WRITERS];
    pthread_cond_t walked;
    int nlists;
    struct msp_head heads[MSP_MAX_WRITERS];
    uint64_t given_up;      /* lowest seq msp_queue_close handed back, until forgotten:
                               every head stays at or below it (their records follow) */
    uint64_t depth, inflight;   /* inflight: popped, not yet done */
    struct msp_ring_load load; /* cost of the items reserved, queued or in flight */
    /* The payload ring (ring.h): the budget rounded down to pages, of private
     * anonymous memory on huge pages where the kernel allows, mapped lazily;
     * a full ring or budget blocks or drops (the policy). Each region is
     * charged to the budget with its item, so live regions never exceed the
     * budget (an item the budget has room for and the ring's shape has not,
     * its head caught up with a tail behind a pad, is malloc'd); the ring's
     * memory is at most the budget too (only the part the
     * head has reached is ever touched, and an empty ring starts again at
     * 0). It is unmapped before an item larger than the budget is admitted
     * alone, and after msp_queue_trim_idle. */
    struct msp_ring ring;
    uint64_t maps, heap_items; /* ring mappings / payloads malloc'd (tests, bench) */
    uint64_t budget;        /* the budget of the last reservation (a writer naps for
                               more records only while most of it is free) */
    int blocked;            /* reservations waiting for room now (tests: one is really
                               waiting before they free room) */
    /* Warming: while a dump that writes payloads is on (warm_budget, set by
     * msp_queue_expect), writer 0 maps the ring when it is idle and faults
     * it in (MADV_POPULATE_WRITE) up to WARM_AHEAD bytes past the furthest
     * offset the head has reached, so the hooks copy into memory that is
     * already there: the kernel's zeroing of fresh pages runs on the
     * writer's core, not the host's. */
    uint64_t warm_budget;   /* 0: no dump in progress, nothing to warm */
    uint64_t warm;          /* ring bytes from offset 0 already faulted in */
    int warming;            /* writer 0 is faulting a chunk in, outside mu */
    int warm_off;           /* the kernel cannot populate (no MADV_POPULATE_WRITE) */
    pthread_cond_t warmed;  /* warming went back to 0 */
    int used;               /* a reservation since the last msp_queue_trim_idle */
    /* While the config is awake (keep) the ring stays mapped between dumps, so
     * a service's next burst copies into memory already faulted in; it is
     * given back after keep_trims quiet trim periods (0: never while awake),
     * and at the first quiet period once the config sleeps. */
    int keep;
    uint64_t keep_trims;    /* MSPROBE_ATB_RING_IDLE_S / MSP_QUEUE_TRIM_PERIOD_S */
    uint64_t quiet_trims;   /* trim periods in a row with no reservation */
    /* A service that goes on dumping a little after a burst keeps only what the
     * ring has needed within the last keep_trims trim periods: ring.soft, where a
     * region starts again at offset 0 if the ring's front has room and live
     * regions span at most half of soft (else it grows on, and soft moves out
     * past it: a burst may use it all),
     * is lowered at each trim once the ring has been used (what was warmed
     * waits for the first burst) to the most bytes the live regions spanned in
     * those periods (`spans`, a sliding maximum of ring.span_peak, reset each
     * period), in whole huge pages, at least one; what was faulted in past it
     * is given back (MADV_DONTNEED) once no region lives there. */
    struct msp_window spans; /* (trim number, span_peak) of the recent periods */
    uint64_t trims;         /* trim periods with the ring mapped */
    int trimming;           /* memory past soft is being given back, outside mu:
                               nothing may be placed there meanwhile */
    uint64_t trimmed;       /* times memory past soft was given back (tests, bench) */
    int closed;
};

void msp_queue_init(struct msp_queue *q, int nlists);
/* Sets the number of writer lists (before anything is queued) and shows it
 * and the heads in the slot (msp_queue_show). */
void msp_queue_set_lists(struct msp_queue *q, int nlists);
/* Writes n_writers and every writer's head into this process's slot (a fresh
 * slot after a re-attach); the queue keeps them there as they change. */
void msp_queue_show(struct msp_queue *q);

enum { MSP_PUSH_OK = 0, MSP_PUSH_DROPPED = 1, MSP_PUSH_CLOSED = 2, MSP_PUSH_NOMEM = 3 };
/* Reserves an item within the byte budget: `meta` bytes for the struct and
 * its strings and `payload` bytes, one region of the ring; with `lead` > 0
 * (< MSP_DIO_ALIGN) the payload is placed `lead` bytes past an
 * MSP_DIO_ALIGN boundary, the room before it for the .bin header, and the
 * struct and its strings after the payload (msp_queue_release_front). When the budget
 * (or the ring, fragmented by out-of-order releases) has no room: `block`
 * waits; otherwise the item is refused (DROPPED). An item larger than the
 * whole budget is admitted once nothing else is reserved, in malloc'd
 * memory, so nothing deadlocks; so are items when the ring cannot be
 * mapped. On MSP_PUSH_OK *out is the item, with ->cost, ->data
 * and ->in_ring set; the caller fills it and hands it to msp_queue_push
 * (or msp_queue_release). MSP_PUSH_NOMEM: out of memory. */
int msp_queue_reserve(struct msp_queue *q, uint64_t meta, uint64_t payload, uint32_t lead,
                      uint64_t budget, int block, struct msp_item **out);
/* Charges an item made outside the queue (the flight recorder's, a heap
 * item: msp_item_heap_alloc) to the budget, with no wait: its memory is already
 * taken. Then push it like a reserved one. */
void msp_queue_adopt(struct msp_queue *q, struct msp_item *it);
/* A writer wrote the item's bytes up to `written` (in its lead and payload):
 * the part of its ring region before it goes back to the budget and the
 * ring at once, so a hook waiting for room waits for bytes, not for the whole
 * file. Only for items with a lead (their struct and strings lie after the
 * payload); 0 for others. Returns the bytes given back (the caller takes them
 * off the slot's queue_bytes; the item's cost is lowered by as much). */
uint64_t msp_queue_release_front(struct msp_queue *q, struct msp_item *it,
                                 const unsigned char *written);
/* Queues a reserved item (its seq set) on list `w`: MSP_PUSH_OK, or
 * MSP_PUSH_CLOSED (the caller keeps it and releases it). Writer w's head
 * covers it once this returns. */
int msp_queue_push(struct msp_queue *q, int w, struct msp_item *it);
/* The same for an item any writer may write (no dedup binds it to one): on list
 * `w`, unless w's load (the weight of the items queued and in hand: a writer
 * busy with files is loaded, one with records is not) exceeds the least loaded
 * list's among the first `span` (w below it) by more than MSP_QUEUE_SLACK;
 * then on that list. Lists that each take
 * their share by a hash drift apart under a full queue (a random walk), and
 * the longest one's front holds every writer's records back (the
 * control plane releases rows below the lowest head: control.h
 * writer_head[]); this bounds the drift. */
int msp_queue_push_near(struct msp_queue *q, int w, int span, struct msp_item *it);
#define MSP_QUEUE_SLACK 16
/* How long a writer whose list ran empty waits for more before it sleeps;
 * items pushed meanwhile wait for the nap's end (a hook about to block for
 * the budget wakes it). */
#define MSP_QUEUE_NAP_NS 1000000
/* A pop takes the items of a list a run at a time, one lock for the run: up
 * to this many, and no more bytes (of cost) than the first item's or this. */
#define MSP_QUEUE_POP_ITEMS 64
#define MSP_QUEUE_POP_BYTES (UINT64_C(1) << 20)
/* The next items of list w, in order, chained by ->next (the last's NULL), or
 * NULL once closed and list w is empty. wait: MSP_POP_WAIT blocks until there
 * is one; MSP_POP_NAP naps once (MSP_QUEUE_NAP_NS, unwoken by pushes, woken
 * by a hook that waits for room, and by msp_queue_close) if list w is empty,
 * no hook waits for room and more than half the budget is free (what the
 * writer holds meanwhile is budget the hooks may need);
 * MSP_POP_NOW returns NULL at once when it is. */
enum { MSP_POP_NOW, MSP_POP_WAIT, MSP_POP_NAP };
struct msp_item *msp_queue_pop(struct msp_queue *q, int w, int wait);
/* Writer w finished the popped items of `list` (chained by ->next), their
 * records in the log: releases their budget and ring regions and frees
 * them. `rest`: the popped items it still has in hand (chained by ->next,
 * NULL: none); its head moves up to the lowest of theirs and its list's. */
void msp_queue_done(struct msp_queue *q, int w, struct msp_item *list,
                    const struct msp_item *rest);
/* The same for a reserved item that was never queued. */
void msp_queue_release(struct msp_queue *q, struct msp_item *it);
/* Waits until nothing is queued or in flight, or until deadline
 * (CLOCK_MONOTONIC ns). Returns 1 if drained. */
int msp_queue_wait_idle(struct msp_queue *q, uint64_t deadline_mono_ns);
/* Closes the queue: nothing more is reserved or pushed. Hands back
 * every queued item (a list via ->next) but those `keep` keeps (NULL: none),
 * which stay on their lists for their writers to finish; *inflight gets the
 * number of items writers are working on, *kept the number kept. The heads
 * stay at or below the seqs of the items handed back until msp_queue_forget. */
struct msp_item *msp_queue_close(struct msp_queue *q, int (*keep)(const struct msp_item *),
                                 uint64_t *inflight, uint64_t *kept);
/* Releases the items msp_queue_close handed back, once their records (lost)
 * are in the log: the heads no longer wait for them. */
void msp_queue_forget(struct msp_queue *q, struct msp_item *list);
void msp_queue_stats(struct msp_queue *q, uint64_t *depth, uint64_t *bytes);
/* The budget of the dump now in progress whose payloads go through the
 * ring (0: none; the snapshot calls it at each config change). While it
 * is set an idle writer 0 keeps the ring mapped and warm (see warm_budget).
 * `keep`: the config is awake, so the ring stays between dumps (see keep). */
void msp_queue_expect(struct msp_queue *q, uint64_t budget, int keep);
/* How often the monitor calls msp_queue_trim_idle. */
#define MSP_QUEUE_TRIM_PERIOD_S 2
/* Unmaps the ring if it is empty and nothing was reserved since the
 * previous call, unless the config is awake and it has been quiet for fewer
 * than keep_trims calls: a process that stopped dumping gives the memory
 * back. A ring given back while awake is not warmed again before the next
 * config change. */
void msp_queue_trim_idle(struct msp_queue *q);

#endif
