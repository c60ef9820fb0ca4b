/* The cache of the filters' verdicts on op paths (selcache.h). */
#define _GNU_SOURCE
#include "selcache.h"

#include <string.h>
#include <sys/mman.h>

#include "filter.h"

#if __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the key's last word is taken from a little-endian load"
#endif

struct msp_sel_entry {
    uint64_t version; /* odd while a writer fills the entry */
    uint64_t meta;    /* epoch << 32 | length << 1 | verdict; epoch 0: empty */
    uint64_t hash;
    uint64_t key[MSP_SEL_KEY_WORDS];
};
_Static_assert(sizeof(struct msp_sel_entry) == 192, "an entry is three cache lines");

struct msp_selcache {
    uint64_t mask; /* entries - 1 */
    struct msp_sel_entry e[];
};

struct msp_selcache *msp_selcache_new(unsigned bits)
{
    size_t n = (size_t)1 << bits;
    struct msp_selcache *c = mmap(NULL, sizeof *c + n * sizeof c->e[0], PROT_READ | PROT_WRITE,
                                  MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (c == MAP_FAILED)
        return NULL;
    c->mask = n - 1;
    return c;
}

static inline uint64_t load64(const char *p)
{
    uint64_t w;
    memcpy(&w, p, 8);
    return w;
}

/* The key of op path [p, p + n): its whole words, then the last partial one
 * from a load that ends at p + n (the bytes before p it also reads are
 * shifted out; the caller guarantees they are readable). */
static inline uint64_t last_word(const char *p, size_t n)
{
    return load64(p + n - 8) >> (8 * (8 - (n & 7)));
}

#define MIX(h, w) (((h) ^ (w)) * UINT64_C(0x9E3779B97F4A7C15))

static inline uint64_t key_hash(const char *p, size_t n)
{
    uint64_t h = n;
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        h = MIX(h, load64(p + i));
    if (n & 7)
        h = MIX(h, last_word(p, n));
    return h ^ (h >> 29);
}

#define RELAXED(x) __atomic_load_n(&(x), __ATOMIC_RELAXED)
/* Key words are read with acquire loads and written with release stores:
 * the version read after them then sees a writer that changed any of them
 * (a plain load and store on x86; no fence, which TSan does not model). */
#define ACQUIRE(x) __atomic_load_n(&(x), __ATOMIC_ACQUIRE)

/* The verdict on op path [p, p + n) in entry e under `epoch`, or -1. */
static inline int entry_verdict(const struct msp_sel_entry *e, uint32_t epoch, const char *p,
                                size_t n, uint64_t h)
{
    uint64_t v = __atomic_load_n(&e->version, __ATOMIC_ACQUIRE);
    uint64_t meta = ACQUIRE(e->meta);
    if ((v & 1) || (meta | 1) != ((uint64_t)epoch << 32 | (uint64_t)n << 1 | 1) ||
        ACQUIRE(e->hash) != h)
        return -1;
    uint64_t diff = 0;
    size_t i = 0;
    for (; i < n / 8; i++)
        diff |= ACQUIRE(e->key[i]) ^ load64(p + 8 * i);
    if (n & 7)
        diff |= ACQUIRE(e->key[i]) ^ last_word(p, n);
    /* rewritten while read: the key may be torn, decide afresh */
    return diff == 0 && RELAXED(e->version) == v ? (int)(meta & 1) : -1;
}

static void keep(struct msp_selcache *c, uint32_t epoch, const char *p, size_t n, uint64_t h,
                 int verdict)
{
    /* a free slot or one of another epoch, else the home slot */
    struct msp_sel_entry *e = &c->e[h & c->mask];
    for (uint64_t w = 0; w < MSP_SEL_WAYS; w++) {
        struct msp_sel_entry *x = &c->e[(h + w) & c->mask];
        if (RELAXED(x->meta) >> 32 != epoch) {
            e = x;
            break;
        }
    }
    uint64_t v = RELAXED(e->version);
    /* another writer has it: this verdict is not kept */
    if ((v & 1) || !__atomic_compare_exchange_n(&e->version, &v, v + 1, 0, __ATOMIC_RELAXED,
                                                __ATOMIC_RELAXED))
        return;
    __atomic_store_n(&e->meta, (uint64_t)epoch << 32 | (uint64_t)n << 1 | (uint64_t)(verdict != 0),
                     __ATOMIC_RELEASE);
    __atomic_store_n(&e->hash, h, __ATOMIC_RELEASE);
    for (size_t i = 0; i < n / 8; i++)
        __atomic_store_n(&e->key[i], load64(p + 8 * i), __ATOMIC_RELEASE);
    if (n & 7)
        __atomic_store_n(&e->key[n / 8], last_word(p, n), __ATOMIC_RELEASE);
    __atomic_store_n(&e->version, v + 2, __ATOMIC_RELEASE);
}

/* Can op path [p, p + pn) of a dir of n bytes be kept? (last_word reads
 * the 8 bytes before its end) */
static inline int cacheable(size_t pn, size_t n)
{
    return pn - 1 < MSP_SEL_KEY_BYTES && n >= 8;
}

/* Past the home slot of op path [p, p + pn) (hash h): the other ways, else
 * the filters' verdict, kept. */
static __attribute__((noinline)) int decide(struct msp_selcache *c, uint32_t epoch,
                                            const struct msp_config *cfg, const char *dir,
                                            size_t n, const char *p, size_t pn, uint64_t h)
{
    for (uint64_t w = 1; w < MSP_SEL_WAYS; w++) {
        int verdict = entry_verdict(&c->e[(h + w) & c->mask], epoch, p, pn, h);
        if (verdict >= 0)
            return verdict;
    }
    int verdict = msp_op_selected(cfg, dir, n);
    keep(c, epoch, p, pn, h, verdict);
    return verdict;
}

int msp_selcache_op_selected(struct msp_selcache *c, uint32_t epoch,
                             const struct msp_config *cfg, const char *dir, size_t n)
{
    const char *p = msp_dump_dir_shape(dir, n) ? msp_dir_op_path(dir, n) : NULL;
    if (!p)
        return 0; /* no dump dir, or no op segment: msp_op_selected says no */
    size_t pn = (size_t)(dir + n - p);
    if (!epoch || !cacheable(pn, n))
        return msp_op_selected(cfg, dir, n);
    uint64_t h = key_hash(p, pn);
    int verdict = entry_verdict(&c->e[h & c->mask], epoch, p, pn, h); /* the home slot */
    return verdict >= 0 ? verdict : decide(c, epoch, cfg, dir, n, p, pn, h);
}
