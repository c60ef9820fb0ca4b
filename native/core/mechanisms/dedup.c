/* filter_level's duplicate finder: per writer, the recent tensors of each layer
 * scope by content hash, so that dedup_link.c can link a repeat to its first copy
 * (dedup.h says why identity is by content). */
#define _GNU_SOURCE
#include "dedup.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SCOPES 4                 /* recent scopes kept per writer */
#define MAX_ENTRIES (1u << 16)   /* per scope; beyond it tensors are written in full */

struct entry {
    uint64_t hash;
    char *path;
};

struct scope {
    char *key;
    uint64_t stamp;
    struct entry *e;
    uint32_t n, cap;
};

struct msp_dedup {
    struct scope s[SCOPES];
    uint64_t clock;
};

struct msp_dedup *msp_dedup_new(void)
{
    return calloc(1, sizeof(struct msp_dedup));
}

static void scope_clear(struct scope *s)
{
    for (uint32_t i = 0; i < s->n; i++)
        free(s->e[i].path);
    free(s->e);
    free(s->key);
    memset(s, 0, sizeof *s);
}

void msp_dedup_free(struct msp_dedup *d)
{
    if (!d)
        return;
    for (int i = 0; i < SCOPES; i++)
        scope_clear(&d->s[i]);
    free(d);
}

size_t msp_dedup_scope_len(const char *path)
{
    const char *p = path;
    for (int i = 0; i < 3; i++) {
        p = strchr(p, '/');
        if (!p)
            return 0;
        p++;
    }
    return (size_t)(p - path - 1);
}

/* The scope of path, or NULL; with create, evicts the least recent one. */
static struct scope *get_scope(struct msp_dedup *d, const char *path, int create)
{
    size_t n = msp_dedup_scope_len(path);
    if (!n)
        return NULL;
    struct scope *lru = &d->s[0];
    for (int i = 0; i < SCOPES; i++) {
        struct scope *s = &d->s[i];
        if (s->key && strlen(s->key) == n && memcmp(s->key, path, n) == 0) {
            s->stamp = ++d->clock;
            return s;
        }
        if (!s->key || s->stamp < lru->stamp)
            lru = s;
    }
    if (!create)
        return NULL;
    scope_clear(lru);
    lru->key = malloc(n + 1);
    if (!lru->key)
        return NULL;
    memcpy(lru->key, path, n);
    lru->key[n] = 0;
    lru->stamp = ++d->clock;
    return lru;
}

const char *msp_dedup_find(struct msp_dedup *d, const char *path, uint64_t hash,
                           int (*same_bytes)(const char *, void *), void *ctx)
{
    struct scope *s = get_scope(d, path, 0);
    if (!s)
        return NULL;
    /* newest first: a full copy written when the older one had too many
     * links (EMLINK) is the one to link to next */
    for (uint32_t i = s->n; i-- > 0;)
        if (s->e[i].hash == hash && same_bytes(s->e[i].path, ctx))
            return s->e[i].path;
    return NULL;
}

void msp_dedup_add(struct msp_dedup *d, const char *path, uint64_t hash)
{
    struct scope *s = get_scope(d, path, 1);
    if (!s || s->n >= MAX_ENTRIES)
        return;
    if (s->n == s->cap) {
        uint32_t cap = s->cap ? s->cap * 2 : 64;
        struct entry *e = realloc(s->e, cap * sizeof *e);
        if (!e)
            return;
        s->e = e;
        s->cap = cap;
    }
    char *copy = strdup(path);
    if (!copy)
        return;
    s->e[s->n].hash = hash;
    s->e[s->n].path = copy;
    s->n++;
}

int msp_relpath(const char *from, const char *to, char *out, size_t cap)
{
    /* longest common directory prefix */
    size_t common = 0;
    for (size_t i = 0; from[i] && from[i] == to[i]; i++)
        if (from[i] == '/')
            common = i + 1;
    size_t used = 0;
    out[0] = 0;
    for (const char *p = from + common; (p = strchr(p, '/')); p++) {
        if (used + 3 >= cap)
            return -1;
        memcpy(out + used, "../", 4);
        used += 3;
    }
    int n = snprintf(out + used, cap - used, "%s", to + common);
    return (n < 0 || (size_t)n >= cap - used) ? -1 : 0;
}
