/* Which rounds have all their records: counts per round of the selected tensors
 * without a record, and the round that just became complete (rounds.h). */
#include "rounds.h"

#include <string.h>

void msp_rounds_init(struct msp_rounds *r)
{
    pthread_mutex_init(&r->mu, NULL);
    r->n = 0;
    r->current[0] = r->untracked[0] = 0;
}

static int find(const struct msp_rounds *r, const char *key)
{
    for (int i = r->n - 1; i >= 0; i--) /* the newest rounds are the busiest */
        if (!strcmp(r->e[i].key, key))
            return i;
    return -1;
}

static void drop(struct msp_rounds *r, int i, char done[MSP_ROUND_KEY_LEN])
{
    memcpy(done, r->e[i].key, MSP_ROUND_KEY_LEN);
    r->e[i] = r->e[--r->n];
}

int msp_rounds_selected(struct msp_rounds *r, const char *key, size_t len, int live,
                        char done[MSP_ROUND_KEY_LEN])
{
    if (!len)
        return 0;
    pthread_mutex_lock(&r->mu);
    int announced = 0;
    if (live && strcmp(key, r->current) != 0) {
        /* the host left the current round: complete if nothing of it is left */
        int i = r->current[0] ? find(r, r->current) : -1;
        if (i >= 0 && r->e[i].count == 0) {
            drop(r, i, done);
            announced = 1;
        }
        memcpy(r->current, key, len + 1);
    }
    int i = find(r, key);
    if (i < 0 && r->n < MSP_ROUNDS_MAX && strcmp(key, r->untracked) != 0) {
        i = r->n++;
        memcpy(r->e[i].key, key, len + 1);
        r->e[i].count = 0;
    } else if (i < 0 && live) {
        /* not counted from its first tensor: never announced */
        memcpy(r->untracked, key, len + 1);
    }
    if (i >= 0)
        r->e[i].count++;
    pthread_mutex_unlock(&r->mu);
    return announced;
}

int msp_rounds_recorded(struct msp_rounds *r, const char *key, size_t len, uint64_t n,
                        char done[MSP_ROUND_KEY_LEN])
{
    if (!len)
        return 0;
    pthread_mutex_lock(&r->mu);
    int announced = 0;
    int i = find(r, key);
    if (i >= 0 && r->e[i].count > 0) {
        r->e[i].count -= r->e[i].count < n ? r->e[i].count : n;
        if (r->e[i].count == 0 && strcmp(key, r->current) != 0) {
            drop(r, i, done);
            announced = 1;
        }
    }
    pthread_mutex_unlock(&r->mu);
    return announced;
}
