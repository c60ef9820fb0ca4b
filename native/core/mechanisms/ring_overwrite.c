/* The flight recorder's ring: held items by round per top-level op, whole
 * rounds evicted oldest first (the ring's "overwrite" policy; ring_overwrite.h). */
#define _GNU_SOURCE
#include "ring_overwrite.h"

#include <stdlib.h>
#include <string.h>

#include "util.h"

#define FIRST_CAP 256
#define MAX_SCOPES (1u << 20)

/* The first three segments of "{dev}_{pid}/{exec}/{op}/...". */
static int split3(const char *p, size_t n, size_t *a, size_t *b, size_t *c)
{
    size_t i = 0, cuts[3];
    int k = 0;
    for (; i < n && k < 3; i++)
        if (p[i] == '/')
            cuts[k++] = i;
    if (k < 2)
        return -1;
    if (k == 2)
        cuts[2] = n;
    *a = cuts[0];
    *b = cuts[1];
    *c = cuts[2];
    return *a > 0 && *b > *a + 1 && *c > *b + 1 ? 0 : -1;
}

static int grow(struct msp_ow *r)
{
    uint32_t cap = r->cap ? r->cap * 2 : FIRST_CAP;
    if (cap > MAX_SCOPES)
        return -1;
    struct msp_ow_scope **t = calloc(cap, sizeof *t);
    if (!t)
        return -1;
    for (uint32_t i = 0; i < r->cap; i++) {
        struct msp_ow_scope *s = r->scopes[i];
        if (!s)
            continue;
        uint32_t j = (uint32_t)(s->hash % cap);
        while (t[j])
            j = (j + 1) % cap;
        t[j] = s;
    }
    free(r->scopes);
    r->scopes = t;
    r->cap = cap;
    return 0;
}

struct msp_ow_scope *msp_ow_scope_of(struct msp_ow *r, const char *path, size_t n,
                                         uint64_t *exec)
{
    size_t a, b, c;
    if (split3(path, n, &a, &b, &c) != 0)
        return NULL;
    uint64_t e = 0;
    for (size_t i = a + 1; i < b; i++) {
        if (path[i] < '0' || path[i] > '9' || e > UINT64_MAX / 10 - 10)
            return NULL;
        e = e * 10 + (uint64_t)(path[i] - '0');
    }
    *exec = e;
    uint64_t h = msp_fnv1a(msp_fnv1a(MSP_FNV_SEED, path, a), path + b + 1, c - b - 1) | 1;
    if (r->used * 2 >= r->cap && grow(r) != 0 && r->used >= r->cap)
        return NULL;
    uint32_t j = (uint32_t)(h % r->cap);
    for (; r->scopes[j]; j = (j + 1) % r->cap)
        if (r->scopes[j]->hash == h)
            return r->scopes[j];
    struct msp_ow_scope *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    s->hash = h;
    size_t opn = c - b - 1 < sizeof s->op - 1 ? c - b - 1 : sizeof s->op - 1;
    memcpy(s->op, path + b + 1, opn);
    s->wait_round = -1;
    r->scopes[j] = s;
    r->used++;
    return s;
}

void msp_ow_each(struct msp_ow *r, void (*fn)(struct msp_ow_scope *, void *), void *arg)
{
    for (uint32_t i = 0; i < r->cap; i++)
        if (r->scopes[i])
            fn(r->scopes[i], arg);
}

struct msp_ow_round *msp_ow_open(struct msp_ow *r, struct msp_ow_scope *s, uint64_t exec,
                                     uint64_t now_ns)
{
    struct msp_ow_round *rd = calloc(1, sizeof *rd);
    if (!rd)
        return NULL;
    rd->scope = s;
    rd->exec = exec;
    rd->start_ns = now_ns;
    rd->prev = r->newest;
    if (r->newest)
        r->newest->next = rd;
    else
        r->oldest = rd;
    r->newest = rd;
    if (s->newest)
        s->newest->snext = rd;
    else
        s->oldest = rd;
    s->newest = rd;
    s->nrounds++;
    r->rounds++;
    return rd;
}

void msp_ow_add(struct msp_ow *r, struct msp_ow_round *rd, struct msp_item *it)
{
    it->next = NULL;
    if (rd->tail)
        rd->tail->next = it;
    else
        rd->head = it;
    rd->tail = it;
    rd->n++;
    rd->bytes += it->cost;
    msp_ring_charge(&r->load, it->cost);
}

/* Unlinks rd from both lists and from the totals. */
static void unlink_round(struct msp_ow *r, struct msp_ow_round *rd)
{
    if (rd->prev)
        rd->prev->next = rd->next;
    else
        r->oldest = rd->next;
    if (rd->next)
        rd->next->prev = rd->prev;
    else
        r->newest = rd->prev;
    struct msp_ow_scope *s = rd->scope;
    struct msp_ow_round **pp = &s->oldest, *last = NULL;
    while (*pp && *pp != rd) {
        last = *pp;
        pp = &(*pp)->snext;
    }
    if (*pp)
        *pp = rd->snext;
    if (s->newest == rd)
        s->newest = last;
    s->nrounds--;
    r->rounds--;
    msp_ring_refund(&r->load, rd->bytes);
}

struct msp_item *msp_ow_take(struct msp_ow *r, struct msp_ow_round *rd)
{
    unlink_round(r, rd);
    struct msp_item *items = rd->head;
    free(rd);
    return items;
}

uint64_t msp_ow_evict(struct msp_ow *r, struct msp_ow_round *rd)
{
    uint64_t n = 0;
    for (struct msp_item *it = msp_ow_take(r, rd), *next; it; it = next) {
        next = it->next;
        msp_item_heap_free(it);
        n++;
    }
    return n;
}

uint64_t msp_ow_fit(struct msp_ow *r, uint64_t cost, uint64_t budget, int *fits)
{
    uint64_t evicted = 0;
    struct msp_ow_round *rd = r->oldest;
    while (!msp_ring_fits(&r->load, cost, budget) && rd) {
        struct msp_ow_round *next = rd->next;
        if (rd->scope->newest != rd) { /* never the round in progress */
            msp_ow_evict(r, rd);
            evicted++;
        }
        rd = next;
    }
    *fits = msp_ring_fits(&r->load, cost, budget);
    return evicted;
}

uint64_t msp_ow_clear(struct msp_ow *r)
{
    uint64_t n = 0;
    while (r->oldest)
        n += msp_ow_evict(r, r->oldest);
    return n;
}
