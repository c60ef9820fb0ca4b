/* Per-round counts of selected tensors without a record, in the process's slot
 * of the control block, and their summary in the exit record (pending.h). */
#include "pending.h"

#include <string.h>

#include "jsonw.h"

#define LOAD(p) __atomic_load_n((p), __ATOMIC_ACQUIRE)

struct msp_rounds msp_pending_rounds = {.mu = PTHREAD_MUTEX_INITIALIZER};
uint64_t msp_seq;

size_t msp_round_key(const char *path, size_t n, char key[MSP_ROUND_KEY_LEN])
{
    size_t k = 0, i = 0;
    int comps = 0;
    while (i < n && comps < 3) {
        while (i < n && path[i] == '/')
            i++;
        if (i == n)
            break;
        if (++comps == 3)
            break; /* a file or op below the round: the key is whole */
        size_t start = i;
        while (i < n && path[i] != '/')
            i++;
        size_t len = i - start;
        if (k + len + (comps == 2 ? 1 : 2) > MSP_ROUND_KEY_LEN)
            return 0;
        if (comps == 2)
            key[k++] = '/';
        memcpy(key + k, path + start, len);
        k += len;
    }
    if (comps < 3)
        return 0;
    key[k] = 0;
    return k;
}

#define COUNT(w) ((w) & MSP_PENDING_COUNT_MASK)
#define LIVE(w) (COUNT(w) > 0 && !((w) & MSP_PENDING_CLAIMING))

/* The key bytes are atomics (relaxed): a reader may race a claimer rewriting them;
 * the state word's CAS, not the bytes, decides, but the race must not be a data race. */
static int key_is(const struct msp_pending *e, const char *key, size_t len)
{
    /* from the end, terminator first: keys differ in their round number */
    for (size_t i = len + 1; i-- > 0;)
        if (__atomic_load_n(&e->key[i], __ATOMIC_RELAXED) != key[i])
            return 0;
    return 1;
}

/* The entry this thread moved last: a thread's tensors come round after
 * round, so it is nearly always the one. */
static __thread int t_hint;

/* Adds one to (add), or takes up to n from, the count of the live entry of
 * this key; how much it moved (0: there is no live entry of it). */
static uint64_t move_live(struct msp_proc *p, const char *key, size_t len, int add, uint64_t n)
{
    for (int k = 0; k < MSP_PENDING_ROUNDS; k++) {
        int i = (t_hint + k) % MSP_PENDING_ROUNDS;
        struct msp_pending *e = &p->pending[i];
        uint64_t w = LOAD(&e->state);
        while (LIVE(w) && key_is(e, key, len)) {
            uint64_t by = add ? 1 : COUNT(w) < n ? COUNT(w) : n;
            if (__atomic_compare_exchange_n(&e->state, &w, add ? w + by : w - by, 1,
                                            __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
                t_hint = i;
                return by;
            }
        }
    }
    return 0;
}

void msp_pending_add(struct msp_proc *p, const char *key, size_t len)
{
    if (len && move_live(p, key, len, 1, 1))
        return;
    for (int i = 0; len && i < MSP_PENDING_ROUNDS; i++) {
        struct msp_pending *e = &p->pending[i];
        uint64_t w = LOAD(&e->state);
        if (COUNT(w) || (w & MSP_PENDING_CLAIMING))
            continue;
        uint64_t gen = (w & ~(MSP_PENDING_COUNT_MASK | MSP_PENDING_CLAIMING)) + MSP_PENDING_GEN_ONE;
        if (!__atomic_compare_exchange_n(&e->state, &w, gen | MSP_PENDING_CLAIMING, 0,
                                         __ATOMIC_ACQ_REL, __ATOMIC_RELAXED))
            continue;
        /* a reader may see a torn key only while the flag is set */
        for (size_t k = 0; k <= len; k++)
            __atomic_store_n(&e->key[k], key[k], __ATOMIC_RELAXED);
        __atomic_store_n(&e->state, gen | 1, __ATOMIC_RELEASE);
        t_hint = i;
        return;
    }
    __atomic_fetch_add(&p->pending_other, 1, __ATOMIC_RELAXED);
}

void msp_pending_done(struct msp_proc *p, const char *key, size_t len, uint64_t n)
{
    if (len)
        n -= move_live(p, key, len, 0, n);
    /* the rest was counted under pending_other (the table was full, or the
     * path had no round), or in the slot of a removed tree (docs/contracts.md
     * §2): never below zero */
    uint64_t c = __atomic_load_n(&p->pending_other, __ATOMIC_RELAXED);
    while (n && c > 0 &&
           !__atomic_compare_exchange_n(&p->pending_other, &c, c - (c < n ? c : n), 1,
                                        __ATOMIC_RELAXED, __ATOMIC_RELAXED))
        ;
}

uint64_t msp_pending_json(struct jbuf *b, const char *key, const struct msp_proc *p)
{
    uint64_t sum = 0;
    jb_key(b, key);
    jb_open(b, '{');
    for (int i = 0; i < MSP_PENDING_ROUNDS; i++) {
        uint64_t w = LOAD(&p->pending[i].state);
        if (!LIVE(w))
            continue;
        char k[MSP_ROUND_KEY_LEN];
        for (size_t j = 0; j < sizeof k; j++)
            k[j] = __atomic_load_n(&p->pending[i].key[j], __ATOMIC_RELAXED);
        k[sizeof k - 1] = 0;
        jb_str(b, k, strlen(k)); /* a round key is ATB's bytes: escaped, unlike jb_key's */
        jb_raw(b, ":", 1);
        jb_u64(b, COUNT(w));
        sum += COUNT(w);
    }
    uint64_t other = LOAD(&p->pending_other);
    if (other) {
        jb_ku64(b, "", other);
        sum += other;
    }
    jb_close(b, '}');
    return sum;
}

void msp_pending_clear(struct msp_proc *p)
{
    for (int i = 0; i < MSP_PENDING_ROUNDS; i++) {
        uint64_t w = LOAD(&p->pending[i].state);
        __atomic_store_n(&p->pending[i].state, w & ~MSP_PENDING_COUNT_MASK, __ATOMIC_RELEASE);
    }
    __atomic_store_n(&p->pending_other, 0, __ATOMIC_RELEASE);
}
