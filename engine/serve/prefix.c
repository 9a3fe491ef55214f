/* prefix: the slot table of the prefix cache and its choice rule (see prefix.h). */
#include "serve/prefix.h"

#include <stdlib.h>
#include <string.h>

#include "xalloc.h"

void pfx_init(struct pfx *p, int n_slots, int ctx)
{
    memset(p, 0, sizeof(*p));
    p->n_slots = n_slots;
    p->ctx = ctx;
    p->ids = xcalloc((size_t)n_slots * (size_t)ctx, sizeof(*p->ids));
    p->n_ids = xcalloc((size_t)n_slots, sizeof(*p->n_ids));
    p->used = xcalloc((size_t)n_slots, sizeof(*p->used));
}

void pfx_release(struct pfx *p)
{
    free(p->ids);
    free(p->n_ids);
    free(p->used);
    memset(p, 0, sizeof(*p));
}

int pfx_common(const struct pfx *p, int slot, const int32_t *t, int n)
{
    const int32_t *s = p->ids + (size_t)slot * (size_t)p->ctx;
    int lim = p->n_ids[slot] < n ? p->n_ids[slot] : n, k = 0;
    while (k < lim && s[k] == t[k])
        k++;
    return k;
}

struct pfx_choice pfx_choose(const struct pfx *p, const bool *busy, const int *kv_len,
                             bool can_copy, const int32_t *t, int n)
{
    int best_free = -1, best_free_len = 0, lru = -1, best_busy = -1, best_busy_len = 0;
    for (int i = 0; i < p->n_slots; i++) {
        int k = pfx_common(p, i, t, n);
        if (k > kv_len[i])
            k = kv_len[i];
        if (k > n - 1)
            k = n - 1;
        if (busy[i]) {
            if (k > best_busy_len)
                best_busy = i, best_busy_len = k;
            continue;
        }
        if (lru < 0 || p->used[i] < p->used[lru])
            lru = i;
        if (k > best_free_len)
            best_free = i, best_free_len = k;
    }
    if (can_copy && best_busy >= 0 && best_busy_len > best_free_len)
        return (struct pfx_choice){.slot = lru, .reuse = best_busy_len, .src = best_busy};
    if (best_free >= 0)
        return (struct pfx_choice){.slot = best_free, .reuse = best_free_len, .src = -1};
    return (struct pfx_choice){.slot = lru, .reuse = 0, .src = -1};
}

static void set_ids(struct pfx *p, int slot, const int32_t *t, int n)
{
    if (n > p->ctx)
        n = p->ctx;
    if (n < 0)
        n = 0;
    memmove(p->ids + (size_t)slot * (size_t)p->ctx, t, (size_t)n * sizeof(*t));
    p->n_ids[slot] = n;
}

void pfx_take(struct pfx *p, int slot, const int32_t *t, int n)
{
    set_ids(p, slot, t, n);
    p->used[slot] = ++p->clock;
}

void pfx_keep(struct pfx *p, int slot, const int32_t *t, int n)
{
    set_ids(p, slot, t, n);
}

void pfx_forget(struct pfx *p, int slot)
{
    p->n_ids[slot] = 0;
}
