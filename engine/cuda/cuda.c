/*
 * cuda/cuda: the CUDA backend's table (backend.h) and its host-side step
 * planning in plain C: rows, logits rows and the attention work list,
 * written into the pinned plan buffer that cu_forward (backend.cu) ships
 * to the device. Compiled only when the build has nvcc (HAVE_CUDA).
 */
#ifdef HAVE_CUDA
#include "cuda/cuda.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "fp4.h"
#include "timeutil.h"

#include "model/backend.h"
#include "model/model.h"

/* Row r's attention items for keys [k_lo, n_keys) at items + *n: one
 * per chunk that holds some of them (split), or one walk item. */
static void plan_row(struct cu_item *items, int *n, int r, int k_lo, int n_keys, bool split)
{
    if (!split) {
        items[(*n)++] = (struct cu_item){r, -1};
        return;
    }
    for (int ch = k_lo / MODEL_ATTN_CHUNK; ch * MODEL_ATTN_CHUNK < n_keys; ch++)
        items[(*n)++] = (struct cu_item){r, ch};
}

/* Lay the step out as the CPU backend does (model/backend_cpu.c plan): one row
 * per token, logits rows in sequence order, and the attention items. A
 * decode row under --attention split gets one item per chunk of its keys
 * and a partial slot; every other row gets one item that walks its keys.
 * With a sliding window (gpt-oss) the windowed layers get their own list,
 * from items[max_items] on, whose split items cover the window's chunks
 * only (the rest is packed after the first list before the copy). */
static void plan(struct model *m, struct model_seq *seqs, int n, int logit_row0, struct cu_plan *p)
{
    int R = 0, n_out = 0, n_dec = 0, n_items = 0, n_swa = 0, win = m->cfg.n_swa;
    bool split = m->opts.attention == MODEL_ATTN_SPLIT;
    struct cu_item *swa_items = p->items + cu_max_items(m);
    for (int i = 0; i < n; i++) {
        struct model_seq *s = &seqs[i];
        int first_out = n_out;
        for (int t = 0; t < s->n_tokens; t++, R++) {
            p->tok[R] = s->tokens[t];
            p->pos[R] = s->pos + t;
            p->slot[R] = s->slot;
            p->dec[R] = -1;
            if (s->logits == MODEL_LOGITS_ALL ||
                (s->logits == MODEL_LOGITS_LAST && t == s->n_tokens - 1))
                p->out[n_out++] = R;
            int n_keys = s->pos + t + 1;
            bool split_row = split && s->n_tokens == 1;
            if (split_row)
                p->dec[R] = n_dec++;
            plan_row(p->items, &n_items, R, 0, n_keys, split_row);
            if (win > 0)
                plan_row(swa_items, &n_swa, R, n_keys > win ? n_keys - win : 0, n_keys, split_row);
        }
        s->out = n_out > first_out
                     ? m->rs.logits + (size_t)(logit_row0 + first_out) * (size_t)m->cfg.n_vocab
                     : NULL;
    }
    if (n_swa > 0)
        memmove(p->items + n_items, swa_items, sizeof(*swa_items) * (size_t)n_swa);
    p->rows = R;
    p->n_out = n_out;
    p->n_items = n_items;
    p->n_swa_items = n_swa;
    p->n_dec = n_dec;
    p->logit_row0 = logit_row0;
}

static void cuda_forward(struct model *m, struct model_seq *seqs, int n, int logit_row0)
{
    uint64_t t0 = clock_ns();
    struct cu_plan *p = cu_plan_of(m);
    plan(m, seqs, n, logit_row0, p);
    cu_forward(m, p, t0);
}

/* The architectures the kernels run; any other is refused at load with
 * one line, before any device memory is taken. */
static const enum model_arch cuda_archs[] = {ARCH_LLAMA, ARCH_QWEN3, ARCH_QWEN3MOE, ARCH_GPT_OSS};

static int cuda_prepare(struct model *m, struct err *err)
{
    for (size_t i = 0; i < sizeof(cuda_archs) / sizeof(cuda_archs[0]); i++)
        if (m->cfg.arch == cuda_archs[i])
            return cu_prepare(m, err);
    return err_set(err, FP_ERR_UNSUPPORTED,
                   "--device cuda does not run '%s' models; they run on --device cpu",
                   model_arch_name(m->cfg.arch)),
           -1;
}

static int cuda_usable(char *why, size_t why_size)
{
    char reason[160];
    if (cu_device_count(reason, sizeof(reason)) > 0)
        return 0;
    snprintf(why, why_size, "no usable CUDA device (%s)", reason);
    return -1;
}

const struct backend backend_cuda = {.name = "cuda",
                                     .prepare = cuda_prepare,
                                     .forward = cuda_forward,
                                     .release = cu_release,
                                     .usable = cuda_usable,
                                     .kv_copy = cu_kv_copy};
#endif
