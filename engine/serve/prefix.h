/*
 * prefix: which KV slot a new sequence should take so that it reuses the
 * longest prompt prefix already computed (slot-level prefix caching, like
 * llama.cpp's slot reuse with cache_prompt). The table mirrors, per slot,
 * the token ids whose K/V the slot holds; it knows nothing of the model:
 * the scheduler passes each slot's KV length and whether it is busy, and
 * does the copying (model_slot_copy) and the bookkeeping.
 *
 * Rules of a choice (pfx_choose):
 *   - a match is the common prefix of the prompt and a slot's ids, capped
 *     by the slot's KV length and by n_prompt - 1 (the last prompt token
 *     is always computed: its logits give the first generated token);
 *   - the free slot with the longest match wins; with no match at all, the
 *     least recently used free slot (what it holds is worth least);
 *   - when a busy slot matches longer and the backend can copy KV, the
 *     prefix is copied from it into the least recently used free slot.
 */
#ifndef ENGINE_PREFIX_H
#define ENGINE_PREFIX_H

#include <stdbool.h>
#include <stdint.h>

struct pfx {
    int n_slots;
    int ctx;        /* ids per slot */
    int32_t *ids;   /* (n_slots, ctx) token ids whose K/V the slot holds */
    int *n_ids;     /* (n_slots) valid ids per slot */
    uint64_t *used; /* (n_slots) stamp of the last pfx_take, 0 = never */
    uint64_t clock;
};

/* A new sequence's place: its slot, the positions it reuses (0 = compute
 * the whole prompt), and the busy slot to copy them from (-1 = none: they
 * are already in slot). */
struct pfx_choice {
    int slot;
    int reuse;
    int src;
};

void pfx_init(struct pfx *p, int n_slots, int ctx);
void pfx_release(struct pfx *p);

/* Common prefix of slot's ids and t[0..n). */
int pfx_common(const struct pfx *p, int slot, const int32_t *t, int n);

/* Choose a slot for prompt t[0..n) (n >= 1). busy[i]: slot i runs a
 * sequence; kv_len[i]: positions its KV holds; can_copy: the backend can
 * copy a prefix between slots. At least one slot must be free. */
struct pfx_choice pfx_choose(const struct pfx *p, const bool *busy, const int *kv_len,
                             bool can_copy, const int32_t *t, int n);

/* slot now belongs to a sequence whose first n ids are t (its prompt). */
void pfx_take(struct pfx *p, int slot, const int32_t *t, int n);
/* slot's sequence ended; its KV holds the positions of t[0..n). */
void pfx_keep(struct pfx *p, int slot, const int32_t *t, int n);
/* slot holds nothing reusable. */
void pfx_forget(struct pfx *p, int slot);

#endif
