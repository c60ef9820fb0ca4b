/* A sliding extremum as a small monotone queue (window.h). */
#include "window.h"

#include <string.h>

void msp_window_add(struct msp_window *w, uint64_t at, uint64_t v, int min)
{
    /* older entries no better than v leave before it: never the answer again */
    while (w->n && (min ? w->e[w->n - 1].v >= v : w->e[w->n - 1].v <= v))
        w->n--;
    if (w->n == MSP_WINDOW_CAP) {
        w->e[w->n - 1].at = at; /* better than v: it answers for v too, as long */
        return;
    }
    w->e[w->n].at = at;
    w->e[w->n++].v = v;
}

void msp_window_drop(struct msp_window *w, uint64_t from)
{
    int k = 0;
    while (k < w->n && w->e[k].at < from)
        k++;
    w->n -= k;
    memmove(w->e, w->e + k, (size_t)w->n * sizeof *w->e);
}
