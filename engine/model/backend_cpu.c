/*
 * model/backend_cpu: the CPU backend (backend_cpu), on the kernels of
 * engine/cpu/ (cpu/matmul.h, cpu/ops.h). One model_step is one tp_run: every thread
 * walks the same sequence of sections (norm, QKV, RoPE, attention, output
 * projection, FFN ... head) separated by tp_barrier, each thread taking its
 * share of rows, weight rows or attention items. Nothing allocates here;
 * run_state is sized in cpu_prepare.
 *
 * Determinism: every reduction has a fixed order that depends only on the
 * row itself. Matmul rows are computed per (weight row, activation row)
 * (cpu/matmul.h's contract); attention is always cut on the fixed grid of
 * MODEL_ATTN_CHUNK positions, each chunk reduced by the same kernel and the
 * chunks folded left to right by the same function, whether one worker
 * walks them (serial, prefill) or several compute them (split decode).
 */
#include "model/backend_cpu.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fp4.h"
#include "log.h"
#include "timeutil.h"
#include "xalloc.h"

#include "model/backend.h"
#include "model/model.h"
#include "model/threadpool.h"

#include "cpu/matmul.h"
#include "cpu/ops.h"

/* End a section: wait for everyone, and on thread 0 charge the section's
 * wall time (barrier included) to its phase. */
void cpu_section_end(struct fwd *F, int ith, enum phase ph)
{
    tp_barrier(F->m->pool);
    if (ith != 0)
        return;
    uint64_t now = clock_ns(), dt = now - F->t;
    F->t = now;
    struct model_timers *tm = &F->m->last;
    if (ph == PH_MATMUL)
        tm->matmul_ns += dt;
    else if (ph == PH_ATTN)
        tm->attn_ns += dt;
    else
        tm->other_ns += dt;
}

/* [*lo, *hi): thread ith's share of n items, cut at multiples of align. */
void cpu_share(int64_t n, int ith, int nth, int64_t align, int64_t *lo, int64_t *hi)
{
    int64_t blocks = (n + align - 1) / align;
    *lo = blocks * ith / nth * align;
    *hi = blocks * (ith + 1) / nth * align;
    if (*lo > n)
        *lo = n;
    if (*hi > n)
        *hi = n;
}

/* out = x / sqrt(mean(x^2) + eps) * w, the sum of squares in double as
 * ggml's rms_norm does. */
void cpu_rmsnorm(float *out, const float *x, const float *w, int n, float eps)
{
    double ss = 0;
    for (int i = 0; i < n; i++)
        ss += (double)(x[i] * x[i]);
    float r = 1.0f / sqrtf((float)(ss / n) + eps);
    for (int i = 0; i < n; i++)
        out[i] = x[i] * r * w[i];
}

/* RoPE NORM: rotate adjacent pairs (x[2i], x[2i+1]) of the first n_rot
 * dims; NEOX (neox true): the pairs (x[i], x[i + n_rot/2]), same angles. */
static void rope(float *x, const float *cs, const float *sn, int n_rot, bool neox)
{
    int half = n_rot / 2, stride = neox ? 1 : 2, off = neox ? half : 1;
    for (int i = 0; i < half; i++) {
        float *a = x + i * stride, *b = a + off;
        float x0 = *a, x1 = *b;
        *a = x0 * cs[i] - x1 * sn[i];
        *b = x0 * sn[i] + x1 * cs[i];
    }
}

/* q += bq (qn), k += bk and v += bv (kvn): gpt-oss's projection biases. */
static void add_bias(float *q, const float *bq, int qn, float *k, const float *bk, float *v,
                     const float *bv, int kvn)
{
    for (int i = 0; i < qn; i++)
        q[i] += bq[i];
    for (int i = 0; i < kvn; i++) {
        k[i] += bk[i];
        v[i] += bv[i];
    }
}

/* acc (max, sum, out[hd]) <- acc folded with one chunk's partial p. The
 * one place partials are combined, so serial and split agree bit for bit. */
__attribute__((noinline)) static void fold(float *acc, const float *p, int hd)
{
    float mx = acc[0] > p[0] ? acc[0] : p[0];
    float a = expf(acc[0] - mx), b = expf(p[0] - mx);
    acc[0] = mx;
    acc[1] = acc[1] * a + p[1] * b;
    for (int d = 0; d < hd; d++)
        acc[2 + d] = acc[2 + d] * a + p[2 + d] * b;
}

static void fold_init(float *acc, int hd)
{
    acc[0] = -INFINITY;
    acc[1] = 0;
    memset(acc + 2, 0, sizeof(float) * (size_t)hd);
}

/* out = acc's weighted sum / its denominator. A sink logit (gpt-oss; -inf
 * = none) joins the denominator here, once per row and head, after every
 * chunk is folded: it adds exp(sink) to the sum and nothing to the values. */
static void fold_finish(float *out, const float *acc, int hd, float sink)
{
    if (sink == -INFINITY) {
        float inv = 1.0f / acc[1];
        for (int d = 0; d < hd; d++)
            out[d] = acc[2 + d] * inv;
        return;
    }
    float mx = acc[0] > sink ? acc[0] : sink;
    float a = expf(acc[0] - mx);
    float inv = 1.0f / (acc[1] * a + expf(sink - mx));
    for (int d = 0; d < hd; d++)
        out[d] = acc[2 + d] * a * inv;
}

/* The first key a row attends to in this layer: pos - n_swa + 1 in a
 * sliding-window layer, else 0. */
static int first_key(const struct model *m, int layer, int pos)
{
    int lo = pos + 1 - m->cfg.n_swa;
    return m->w.layers[layer].swa && lo > 0 ? lo : 0;
}

static size_t cache_off(const struct model *m, int layer, int slot, int kvh)
{
    return ((((size_t)layer * (size_t)m->max_batch + (size_t)slot) * (size_t)m->cfg.n_head_kv +
             (size_t)kvh) *
            (size_t)m->rs.ctx_pad) *
           (size_t)m->cfg.head_dim;
}

/* Store one position's key (into its tile, see cpu/ops.h) and value. */
static void write_kv(struct model *m, int layer, int slot, int kvh, int pos, const float *k,
                     const float *v)
{
    struct run_state *rs = &m->rs;
    int hd = m->cfg.head_dim;
    size_t base = cache_off(m, layer, slot, kvh), voff = base + (size_t)pos * hd;
    if (rs->kv_elem == 4) {
        float *kc = (float *)rs->k_cache + base;
        for (int d = 0; d < hd; d++)
            kc[ops_k_index(pos, d, hd)] = k[d];
        memcpy((float *)rs->v_cache + voff, v, sizeof(float) * (size_t)hd);
        return;
    }
    uint16_t tmp[1024]; /* head_dim <= 1024 (model_read_config) */
    uint16_t *kc = (uint16_t *)rs->k_cache + base;
    rs->ops->to_f16(k, tmp, hd);
    for (int d = 0; d < hd; d++)
        kc[ops_k_index(pos, d, hd)] = tmp[d];
    rs->ops->to_f16(v, (uint16_t *)rs->v_cache + voff, hd);
}

static void chunk(const struct run_state *rs, const float *q, int g, int hd, const uint8_t *k,
                  const uint8_t *v, int n, float scale, float *scores, float *part)
{
    if (rs->kv_elem == 4)
        rs->ops->attn_chunk_f32(q, g, hd, (const float *)k, (const float *)v, n, scale, scores,
                                part);
    else
        rs->ops->attn_chunk(q, g, hd, (const uint16_t *)k, (const uint16_t *)v, n, scale, scores,
                            part);
}

/* The partial of keys [a, b) of one chunk when a is not on a key tile
 * (a sliding window's first chunk): the keys up to the next tile in plain
 * loops, the rest by the chunk kernel into tmp, folded in. Serial and
 * split walks both come here, so they still agree bit for bit. */
static void chunk_from(const struct run_state *rs, const float *q, int g, int hd, const uint8_t *K,
                       const uint8_t *V, int a, int b, float scale, float *scores, float *part,
                       float *tmp)
{
    size_t row = (size_t)hd * rs->kv_elem;
    if (a % OPS_KTILE == 0) {
        chunk(rs, q, g, hd, K + (size_t)a * row, V + (size_t)a * row, b - a, scale, scores, part);
        return;
    }
    int a1 = (a / OPS_KTILE + 1) * OPS_KTILE;
    a1 = a1 < b ? a1 : b;
    for (int h = 0; h < g; h++) {
        const float *qh = q + (size_t)h * hd;
        float *p = part + (size_t)h * (hd + 2), sc[OPS_KTILE], mx = -INFINITY, sum = 0;
        for (int t = a; t < a1; t++) {
            float dot = 0;
            for (int d = 0; d < hd; d++) {
                size_t i = ops_k_index(t, d, hd);
                dot += qh[d] * (rs->kv_elem == 4 ? ((const float *)K)[i]
                                                 : q_f16_to_f32(((const uint16_t *)K)[i]));
            }
            sc[t - a] = dot * scale;
            mx = sc[t - a] > mx ? sc[t - a] : mx;
        }
        memset(p + 2, 0, sizeof(float) * (size_t)hd);
        for (int t = a; t < a1; t++) {
            float w = expf(sc[t - a] - mx);
            sum += w;
            for (int d = 0; d < hd; d++) {
                size_t i = (size_t)t * hd + d;
                p[2 + d] += w * (rs->kv_elem == 4 ? ((const float *)V)[i]
                                                  : q_f16_to_f32(((const uint16_t *)V)[i]));
            }
        }
        p[0] = mx;
        p[1] = sum;
    }
    if (a1 == b)
        return;
    chunk(rs, q, g, hd, K + (size_t)a1 * row, V + (size_t)a1 * row, b - a1, scale, scores, tmp);
    for (int h = 0; h < g; h++)
        fold(part + (size_t)h * (hd + 2), tmp + (size_t)h * (hd + 2), hd);
}

/* One attention item: chunk c of (row, kvh) into its partial slot, or (c
 * = -1) every chunk of the row folded into att. A sliding-window layer
 * starts at the row's first key: chunks wholly before it are skipped. */
static void attn_item(struct model *m, int layer, const struct model_attn_item *it, float *scratch)
{
    const struct model_config *c = &m->cfg;
    struct run_state *rs = &m->rs;
    int hd = c->head_dim, g = c->n_head / c->n_head_kv, r = it->row;
    int n_keys = rs->row_pos[r] + 1, k_lo = first_key(m, layer, rs->row_pos[r]);
    size_t base = cache_off(m, layer, rs->row_slot[r], it->kvh);
    const uint8_t *K = (const uint8_t *)rs->k_cache + base * rs->kv_elem;
    const uint8_t *V = (const uint8_t *)rs->v_cache + base * rs->kv_elem;
    const float *q = rs->q + (size_t)r * c->q_dim + (size_t)it->kvh * g * hd;
    const float *sinks = m->w.layers[layer].sinks;
    float scale = 1.0f / sqrtf((float)hd);
    float *scores = scratch, *part = scratch + g * MODEL_ATTN_CHUNK;
    float *acc = part + g * (hd + 2), *tmp = acc + g * (hd + 2);
    if (it->chunk >= 0) {
        int t0 = it->chunk * MODEL_ATTN_CHUNK, t1 = t0 + MODEL_ATTN_CHUNK;
        if (t1 <= k_lo)
            return;
        float *dst =
            rs->att_part +
            (((size_t)rs->dec_row[r] * c->n_head_kv + it->kvh) * rs->n_chunks + (size_t)it->chunk) *
                (size_t)g * (hd + 2);
        chunk_from(rs, q, g, hd, K, V, t0 > k_lo ? t0 : k_lo, n_keys < t1 ? n_keys : t1, scale,
                   scores, dst, tmp);
        return;
    }
    for (int h = 0; h < g; h++)
        fold_init(acc + h * (hd + 2), hd);
    for (int t0 = k_lo / MODEL_ATTN_CHUNK * MODEL_ATTN_CHUNK; t0 < n_keys; t0 += MODEL_ATTN_CHUNK) {
        int t1 = t0 + MODEL_ATTN_CHUNK;
        chunk_from(rs, q, g, hd, K, V, t0 > k_lo ? t0 : k_lo, n_keys < t1 ? n_keys : t1, scale,
                   scores, part, tmp);
        for (int h = 0; h < g; h++)
            fold(acc + h * (hd + 2), part + h * (hd + 2), hd);
    }
    float *out = rs->att + (size_t)r * c->q_dim + (size_t)it->kvh * g * hd;
    for (int h = 0; h < g; h++)
        fold_finish(out + h * hd, acc + h * (hd + 2), hd,
                    sinks ? sinks[it->kvh * g + h] : -INFINITY);
}

/* Combine a split decode row's chunk partials into its attention output. */
static void attn_combine(struct model *m, int layer, int r, float *scratch)
{
    const struct model_config *c = &m->cfg;
    struct run_state *rs = &m->rs;
    int hd = c->head_dim, g = c->n_head / c->n_head_kv;
    int n_ch = (rs->row_pos[r] + MODEL_ATTN_CHUNK) / MODEL_ATTN_CHUNK;
    int ch0 = first_key(m, layer, rs->row_pos[r]) / MODEL_ATTN_CHUNK;
    const float *sinks = m->w.layers[layer].sinks;
    for (int kvh = 0; kvh < c->n_head_kv; kvh++)
        for (int h = 0; h < g; h++) {
            float *acc = scratch;
            fold_init(acc, hd);
            for (int ch = ch0; ch < n_ch; ch++) {
                const float *p =
                    rs->att_part +
                    ((((size_t)rs->dec_row[r] * c->n_head_kv + kvh) * rs->n_chunks + (size_t)ch) *
                         (size_t)g +
                     (size_t)h) *
                        (hd + 2);
                fold(acc, p, hd);
            }
            fold_finish(rs->att + (size_t)r * c->q_dim + ((size_t)kvh * g + h) * hd, acc, hd,
                        sinks ? sinks[kvh * g + h] : -INFINITY);
        }
}

/* True when no matrix before mats[i] has its type: only the first of each
 * type owns an activation slot, the later ones read it. */
static bool first_of_type(const struct q_matrix *const *mats, int i)
{
    for (int j = 0; j < i; j++)
        if (mats[j]->type == mats[i]->type)
            return false;
    return true;
}

/* Set the shapes of the activation buffers feeding mats[0..n) (one per
 * distinct type; later matrices of the same type share the first one's). */
void cpu_shape_group(struct run_state *rs, int first, const struct q_matrix *const *mats, int n,
                     int rows)
{
    for (int i = 0; i < n; i++)
        if (first_of_type(mats, i))
            q_act_shape(&rs->act[first + i], mats[i]->type, rows, mats[i]->cols);
}

void cpu_prep_group(struct run_state *rs, int first, const struct q_matrix *const *mats, int n,
                    const float *x, int64_t ldx, int64_t r0, int64_t r1)
{
    for (int i = 0; i < n; i++)
        if (first_of_type(mats, i))
            q_act_prepare_rows(&rs->act[first + i], x, ldx, r0, r1);
}

const struct q_act *cpu_act_for(const struct run_state *rs, int first,
                                const struct q_matrix *const *mats, int i)
{
    for (int j = 0; j < i; j++)
        if (mats[j]->type == mats[i]->type)
            return &rs->act[first + j];
    return &rs->act[first + i];
}

/* This thread's weight rows of w times the prepared activations. Shares
 * start at multiples of 16 rows, so the SIMD SwiGLU that follows on the
 * same columns always sees the same vector/tail split whatever the thread
 * count. */
void cpu_matmul_share(struct model *m, const struct q_matrix *w, const struct q_act *a, float *y,
                      int64_t ldy, int ith, int nth, int64_t *lo, int64_t *hi)
{
    cpu_share(w->rows, ith, nth, 16, lo, hi);
    if (*hi > *lo)
        q_matmul(m->kern, w, a, y, ldy, *lo, *hi);
}

static void step_fn(void *arg, int ith, int nth)
{
    struct fwd *F = arg;
    struct model *m = F->m;
    const struct model_config *c = &m->cfg;
    struct run_state *rs = &m->rs;
    const int R = F->rows, E = c->n_embd, FF = c->n_ff;
    float *scratch = rs->scratch + (size_t)ith * rs->scratch_floats;
    int64_t r0, r1, lo, hi;
    cpu_share(R, ith, nth, 1, &r0, &r1);

    /* Embedding lookup. */
    for (int64_t r = r0; r < r1; r++) {
        const struct q_matrix *te = &m->w.tok_embd;
        float *x = rs->x + (size_t)r * E;
        q_dequant_row(te->type, (const uint8_t *)te->data + (size_t)rs->row_tok[r] * te->row_bytes,
                      x, E);
        if (te->scale != 1.0f)
            for (int i = 0; i < E; i++)
                x[i] *= te->scale;
    }
    for (int l = 0; l < c->n_layer; l++) {
        const struct model_layer *L = &m->w.layers[l];
        const struct q_matrix *qkv[3] = {&L->wq, &L->wk, &L->wv};
        const struct q_matrix *gu[2] = {&L->w_gate, &L->w_up};

        /* Attention norm and the Q/K/V activations (shaped by thread 0 in
         * the previous section). */
        for (int64_t r = r0; r < r1; r++)
            cpu_rmsnorm(rs->xb + (size_t)r * E, rs->x + (size_t)r * E, L->attn_norm, E, c->rms_eps);
        cpu_prep_group(rs, ACT_Q, qkv, 3, rs->xb, E, r0, r1);
        cpu_section_end(F, ith, PH_OTHER);

        cpu_matmul_share(m, &L->wq, cpu_act_for(rs, ACT_Q, qkv, 0), rs->q, c->q_dim, ith, nth, &lo,
                         &hi);
        cpu_matmul_share(m, &L->wk, cpu_act_for(rs, ACT_Q, qkv, 1), rs->k, c->kv_dim, ith, nth, &lo,
                         &hi);
        cpu_matmul_share(m, &L->wv, cpu_act_for(rs, ACT_Q, qkv, 2), rs->v, c->kv_dim, ith, nth, &lo,
                         &hi);
        cpu_section_end(F, ith, PH_MATMUL);

        /* RoPE on q and k, then k and v into the cache as f16. */
        for (int64_t r = r0; r < r1; r++) {
            int pos = rs->row_pos[r], half = c->n_rot / 2;
            const float *cs = rs->rope_cos + (size_t)pos * half,
                        *sn = rs->rope_sin + (size_t)pos * half;
            if (L->bq) /* gpt-oss: Q/K/V biases before RoPE */
                add_bias(rs->q + (size_t)r * c->q_dim, L->bq, c->q_dim,
                         rs->k + (size_t)r * c->kv_dim, L->bk, rs->v + (size_t)r * c->kv_dim, L->bv,
                         c->kv_dim);
            for (int h = 0; h < c->n_head; h++) {
                float *q = rs->q + (size_t)r * c->q_dim + (size_t)h * c->head_dim;
                if (L->q_norm) /* qwen3: per-head RMSNorm before RoPE */
                    cpu_rmsnorm(q, q, L->q_norm, c->head_dim, c->rms_eps);
                rope(q, cs, sn, c->n_rot, c->rope_neox);
            }
            for (int h = 0; h < c->n_head_kv; h++) {
                float *k = rs->k + (size_t)r * c->kv_dim + (size_t)h * c->head_dim;
                if (L->k_norm)
                    cpu_rmsnorm(k, k, L->k_norm, c->head_dim, c->rms_eps);
                rope(k, cs, sn, c->n_rot, c->rope_neox);
                write_kv(m, l, rs->row_slot[r], h, pos, k,
                         rs->v + (size_t)r * c->kv_dim + (size_t)h * c->head_dim);
            }
        }
        if (ith == 0)
            q_act_shape(&rs->act[ACT_O], L->wo.type, R, L->wo.cols);
        cpu_section_end(F, ith, PH_OTHER);

        /* Attention items, cut by estimated work. */
        {
            bool w = L->swa; /* the window's own list */
            const struct model_attn_item *items = rs->items + (w ? rs->max_items : 0);
            const double *item_cost = rs->item_cost + (w ? rs->max_items : 0);
            double cost = w ? F->swa_cost : F->cost;
            double c0 = cost * ith / nth, c1 = cost * (ith + 1) / nth;
            for (int i = 0; i < (w ? F->n_swa_items : F->n_items); i++) {
                double start = item_cost[i];
                if (start < c0)
                    continue;
                if (start >= c1 && !(ith == nth - 1))
                    break;
                attn_item(m, l, &items[i], scratch);
            }
        }
        cpu_section_end(F, ith, PH_ATTN);

        for (int64_t r = r0; r < r1; r++)
            if (rs->dec_row[r] >= 0)
                attn_combine(m, l, (int)r, scratch);
        if (r1 > r0)
            q_act_prepare_rows(&rs->act[ACT_O], rs->att, c->q_dim, r0, r1);
        cpu_section_end(F, ith, PH_ATTN);

        /* Output projection and the residual add, on this thread's columns. */
        cpu_matmul_share(m, &L->wo, &rs->act[ACT_O], rs->y, E, ith, nth, &lo, &hi);
        for (int r = 0; r < R; r++)
            for (int64_t i = lo; i < hi; i++)
                rs->x[(size_t)r * E + i] +=
                    L->bo ? rs->y[(size_t)r * E + i] + L->bo[i] : rs->y[(size_t)r * E + i];
        if (ith == 0 && c->n_expert)
            moe_shape_router(rs, L, R);
        else if (ith == 0)
            cpu_shape_group(rs, ACT_GATE, gu, 2, R);
        cpu_section_end(F, ith, PH_MATMUL);

        for (int64_t r = r0; r < r1; r++)
            cpu_rmsnorm(rs->xb + (size_t)r * E, rs->x + (size_t)r * E, L->ffn_norm, E, c->rms_eps);
        if (c->n_expert) {
            if (r1 > r0)
                q_act_prepare_rows(&rs->act[ACT_GATE], rs->xb, E, r0, r1);
            cpu_section_end(F, ith, PH_OTHER);
            moe_ffn(F, L, l, ith, nth);
            goto next_layer;
        }
        cpu_prep_group(rs, ACT_GATE, gu, 2, rs->xb, E, r0, r1);
        cpu_section_end(F, ith, PH_OTHER);

        /* Gate and up on the same columns, then SwiGLU on them. */
        cpu_matmul_share(m, &L->w_gate, cpu_act_for(rs, ACT_GATE, gu, 0), rs->hb, FF, ith, nth, &lo,
                         &hi);
        cpu_matmul_share(m, &L->w_up, cpu_act_for(rs, ACT_GATE, gu, 1), rs->hb2, FF, ith, nth, &lo,
                         &hi);
        for (int r = 0; r < R; r++)
            if (hi > lo)
                rs->ops->silu_mul(rs->hb + (size_t)r * FF + lo, rs->hb2 + (size_t)r * FF + lo,
                                  (int)(hi - lo));
        if (ith == 0)
            q_act_shape(&rs->act[ACT_DOWN], L->w_down.type, R, FF);
        cpu_section_end(F, ith, PH_MATMUL);

        if (r1 > r0)
            q_act_prepare_rows(&rs->act[ACT_DOWN], rs->hb, FF, r0, r1);
        cpu_section_end(F, ith, PH_MATMUL);

        cpu_matmul_share(m, &L->w_down, &rs->act[ACT_DOWN], rs->y, E, ith, nth, &lo, &hi);
        for (int r = 0; r < R; r++)
            for (int64_t i = lo; i < hi; i++)
                rs->x[(size_t)r * E + i] += rs->y[(size_t)r * E + i];
    next_layer:
        if (ith == 0) {
            if (l + 1 < c->n_layer) {
                const struct model_layer *N = &m->w.layers[l + 1];
                const struct q_matrix *nq[3] = {&N->wq, &N->wk, &N->wv};
                cpu_shape_group(rs, ACT_Q, nq, 3, R);
            } else if (F->n_out > 0) {
                q_act_shape(&rs->act[ACT_Q], m->w.output.type, F->n_out, E);
            }
        }
        cpu_section_end(F, ith, PH_MATMUL);
    }
    if (F->hidden) { /* the final norm of every row whose sequence asks (embeddings) */
        cpu_share(F->rows, ith, nth, 1, &r0, &r1);
        for (int64_t r = r0; r < r1; r++) {
            const struct model_seq *q = &F->seqs[rs->row_seq[r]];
            if (q->hidden)
                cpu_rmsnorm(q->hidden + (size_t)(rs->row_pos[r] - q->pos) * E,
                            rs->x + (size_t)r * E, m->w.output_norm, E, c->rms_eps);
        }
    }
    if (F->n_out == 0)
        return;
    /* Final norm on the rows whose logits are wanted, then the head. */
    cpu_share(F->n_out, ith, nth, 1, &r0, &r1);
    for (int64_t j = r0; j < r1; j++)
        cpu_rmsnorm(rs->xb + (size_t)j * E, rs->x + (size_t)rs->out_row[j] * E, m->w.output_norm, E,
                    c->rms_eps);
    if (r1 > r0)
        q_act_prepare_rows(&rs->act[ACT_Q], rs->xb, E, r0, r1);
    cpu_section_end(F, ith, PH_OTHER);
    cpu_matmul_share(m, &m->w.output, &rs->act[ACT_Q],
                     rs->logits + (size_t)F->logit_row0 * c->n_vocab, c->n_vocab, ith, nth, &lo,
                     &hi);
    cpu_section_end(F, ith, PH_MATMUL);
}

/* Append row R's attention items for keys [k_lo, n_keys) to the list at
 * items/cost (split: one per chunk that holds some of them). */
static void plan_row(const struct model *m, int R, int k_lo, int n_keys, bool split,
                     struct model_attn_item *items, double *item_cost, int *n_items, double *cost)
{
    for (int h = 0; h < m->cfg.n_head_kv; h++) {
        if (!split) {
            items[*n_items] = (struct model_attn_item){R, h, -1};
            item_cost[(*n_items)++] = *cost;
            *cost += n_keys - k_lo;
            continue;
        }
        for (int ch = k_lo / MODEL_ATTN_CHUNK; ch * MODEL_ATTN_CHUNK < n_keys; ch++) {
            int t0 = ch * MODEL_ATTN_CHUNK, t1 = t0 + MODEL_ATTN_CHUNK;
            items[*n_items] = (struct model_attn_item){R, h, ch};
            item_cost[(*n_items)++] = *cost;
            *cost += (n_keys < t1 ? n_keys : t1) - (k_lo > t0 ? k_lo : t0);
        }
    }
}

/* Lay the step out: rows, logits rows and the attention work lists (a
 * second one, from rs->max_items on, for sliding-window layers, so their
 * work is shared by what they really attend to). */
static void plan(struct model *m, struct model_seq *seqs, int n, int logit_row0, struct fwd *F)
{
    const struct model_config *c = &m->cfg;
    struct run_state *rs = &m->rs;
    int R = 0, n_out = 0, n_dec = 0, n_items = 0, n_swa_items = 0;
    double cost = 0, swa_cost = 0;
    bool split = m->opts.attention == MODEL_ATTN_SPLIT;
    for (int i = 0; i < n; i++) {
        struct model_seq *s = &seqs[i];
        int first_out = n_out;
        for (int t = 0; t < s->n_tokens; t++, R++) {
            rs->row_seq[R] = i;
            rs->row_pos[R] = s->pos + t;
            rs->row_slot[R] = s->slot;
            rs->row_tok[R] = s->tokens[t];
            rs->dec_row[R] = -1;
            if (s->logits == MODEL_LOGITS_ALL ||
                (s->logits == MODEL_LOGITS_LAST && t == s->n_tokens - 1))
                rs->out_row[n_out++] = R;
            int n_keys = s->pos + t + 1;
            bool split_row = split && s->n_tokens == 1;
            if (split_row)
                rs->dec_row[R] = n_dec++;
            plan_row(m, R, 0, n_keys, split_row, rs->items, rs->item_cost, &n_items, &cost);
            if (c->n_swa > 0) {
                int k_lo = n_keys - c->n_swa > 0 ? n_keys - c->n_swa : 0;
                plan_row(m, R, k_lo, n_keys, split_row, rs->items + rs->max_items,
                         rs->item_cost + rs->max_items, &n_swa_items, &swa_cost);
            }
        }
        s->out =
            n_out > first_out ? rs->logits + (size_t)(logit_row0 + first_out) * c->n_vocab : NULL;
    }
    F->m = m;
    F->seqs = seqs;
    F->hidden = false;
    for (int i = 0; i < n; i++)
        F->hidden = F->hidden || seqs[i].hidden;
    F->rows = R;
    F->n_out = n_out;
    F->logit_row0 = logit_row0;
    F->n_items = n_items;
    F->cost = cost;
    F->n_swa_items = n_swa_items;
    F->swa_cost = swa_cost;
}

static void cpu_forward(struct model *m, struct model_seq *seqs, int n, int logit_row0)
{
    struct fwd F;
    uint64_t t0 = clock_ns();
    plan(m, seqs, n, logit_row0, &F);
    const struct model_layer *L0 = &m->w.layers[0];
    const struct q_matrix *qkv[3] = {&L0->wq, &L0->wk, &L0->wv};
    cpu_shape_group(&m->rs, ACT_Q, qkv, 3, F.rows);
    F.t = clock_ns();
    m->last.other_ns += F.t - t0;
    tp_run(m->pool, step_fn, &F);
}

/* ---- allocation ---- */

/* cos and sin of every (position, pair) angle. theta_i = pos *
 * base^(-2i/n_rot), built by repeated multiplication in float as ggml
 * does. With YaRN (ext_factor 1), pair i's angle mixes the interpolated
 * theta * freq_scale and the original theta by a ramp over the pairs
 * between the correction dims of beta_fast and beta_slow (original below,
 * interpolated above), and cos and sin are scaled by mscale: ggml's
 * rope_yarn, in the same float operations. Shared with the CUDA backend
 * (model/backend.h), so both rotate by the same numbers. */
void backend_rope_tables(const struct model_config *c, int ctx, float *cs, float *sn)
{
    int half = c->n_rot / 2;
    float theta_scale = powf(c->rope_base, -2.0f / (float)c->n_rot);
    float fs = c->rope_freq_scale, ext = c->yarn_ext_factor, lo = 0, hi = 0;
    if (ext != 0.0f) {
        float betas[2] = {c->yarn_beta_fast, c->yarn_beta_slow}, dims[2];
        for (int j = 0; j < 2; j++)
            dims[j] = c->n_rot * logf(c->n_ctx_orig / (betas[j] * 2 * (float)M_PI)) /
                      (2 * logf(c->rope_base));
        lo = floorf(dims[0]);
        hi = ceilf(dims[1]);
        lo = lo > 0 ? lo : 0;
        hi = hi < c->n_rot - 1 ? hi : c->n_rot - 1;
    }
    for (int p = 0; p < ctx; p++) {
        float theta_ex = (float)p;
        for (int i = 0; i < half; i++) {
            float theta = fs * theta_ex, ms = 1.0f;
            if (ext != 0.0f) {
                float span = hi - lo > 0.001f ? hi - lo : 0.001f, y = (i - lo) / span;
                float ramp = 1 - (y < 0 ? 0 : y > 1 ? 1 : y), mix = ramp * ext;
                theta = theta * (1 - mix) + theta_ex * mix;
                ms = c->yarn_mscale;
            }
            cs[(size_t)p * half + i] = cosf(theta) * ms;
            sn[(size_t)p * half + i] = sinf(theta) * ms;
            theta_ex *= theta_scale;
        }
    }
}

static void *alloc_floats(size_t n)
{
    return xaligned_alloc(64, (n ? n : 1) * sizeof(float));
}

static int cpu_prepare(struct model *m, struct err *err)
{
    const struct model_config *c = &m->cfg;
    struct run_state *rs = &m->rs;
    int nth = tp_threads(m->pool), g = c->n_head / c->n_head_kv;
    size_t rows = (size_t)m->max_rows;
    size_t xrows = rows > (size_t)m->max_logit_rows ? rows : (size_t)m->max_logit_rows;
    /* The cache first: it is the one allocation that can be unreasonably large. */
    rs->ctx_pad = (m->ctx + OPS_KTILE - 1) / OPS_KTILE * OPS_KTILE;
    size_t per_cache = (size_t)c->n_layer * (size_t)m->max_batch * (size_t)c->n_head_kv *
                       (size_t)rs->ctx_pad * (size_t)c->head_dim;
    rs->kv_elem = m->opts.kv_f32 ? 4 : 2;
    per_cache *= rs->kv_elem;
    rs->kv_bytes = 2 * per_cache;
    m->kv_bytes = rs->kv_bytes;
    long pages = sysconf(_SC_PHYS_PAGES), psize = sysconf(_SC_PAGESIZE);
    double phys = pages > 0 && psize > 0 ? (double)pages * (double)psize : 0;
    if (phys > 0 && (double)rs->kv_bytes > 0.8 * phys)
        return err_set(err, FP_ERR_RESOURCE,
                       "kv cache of %.1f GB (%d slots x %d positions) does not fit in %.1f GB of "
                       "memory (lower --max-batch or --ctx)",
                       rs->kv_bytes / 1e9, m->max_batch, m->ctx, phys / 1e9),
               -1;
    /* Zeroed (lazily, by the allocator's fresh pages) so the unused key
     * lanes of a partial tile hold finite numbers. */
    rs->k_cache = xcalloc(1, per_cache);
    rs->v_cache = xcalloc(1, per_cache);
    rs->x = alloc_floats(rows * c->n_embd);
    rs->xb = alloc_floats(xrows * c->n_embd);
    rs->q = alloc_floats(rows * c->q_dim);
    rs->k = alloc_floats(rows * c->kv_dim);
    rs->v = alloc_floats(rows * c->kv_dim);
    rs->att = alloc_floats(rows * c->q_dim);
    rs->y = alloc_floats(rows * c->n_embd);
    size_t ff_rows = rows * c->n_ff, k = (size_t)c->n_expert_used;
    if (c->n_expert && rows * k * c->n_ff_exp > ff_rows)
        ff_rows = rows * k * c->n_ff_exp;
    rs->hb = alloc_floats(ff_rows);
    rs->hb2 = alloc_floats(ff_rows);
    if (c->n_expert) {
        rs->moe_y = alloc_floats(rows * k * c->n_embd);
        rs->moe_xg = alloc_floats(rows * k * c->n_embd);
        rs->moe_logits = alloc_floats(rows * c->n_expert);
        rs->moe_w = alloc_floats(rows * k);
        rs->moe_exp = xcalloc(rows * k, sizeof(int));
        rs->moe_pos = xcalloc(rows * k, sizeof(int));
        rs->moe_grow = xcalloc(rows * k, sizeof(int));
        rs->moe_off = xcalloc((size_t)c->n_expert + 1, sizeof(int));
        rs->moe_fill = xcalloc((size_t)c->n_expert, sizeof(int));
        m->expert_rows = xcalloc((size_t)c->n_layer * c->n_expert, sizeof(uint64_t));
    }
    rs->logits = alloc_floats((size_t)m->max_logit_rows * c->n_vocab);
    int max_cols = c->n_embd > c->q_dim ? c->n_embd : c->q_dim;
    max_cols = max_cols > c->n_ff ? max_cols : c->n_ff;
    size_t act_rows = xrows;
    if (c->n_expert && rows * (size_t)c->n_expert_used > act_rows)
        act_rows = rows * (size_t)c->n_expert_used; /* the gathered expert rows */
    for (int i = 0; i < MODEL_N_ACT; i++)
        q_act_init(&rs->act[i], (int64_t)act_rows, max_cols);
    rs->n_chunks = (m->ctx + MODEL_ATTN_CHUNK - 1) / MODEL_ATTN_CHUNK;
    rs->att_part =
        alloc_floats((size_t)m->max_batch * c->n_head_kv * rs->n_chunks * g * (c->head_dim + 2));
    rs->scratch_floats = (size_t)g * (MODEL_ATTN_CHUNK + 3 * (c->head_dim + 2));
    rs->scratch_floats = (rs->scratch_floats + 15) & ~(size_t)15;
    rs->scratch = alloc_floats((size_t)nth * rs->scratch_floats);
    int half = c->n_rot / 2;
    rs->rope_cos = alloc_floats((size_t)m->ctx * half);
    rs->rope_sin = alloc_floats((size_t)m->ctx * half);
    backend_rope_tables(c, m->ctx, rs->rope_cos, rs->rope_sin);
    rs->row_seq = xcalloc(rows, sizeof(int));
    rs->row_pos = xcalloc(rows, sizeof(int));
    rs->row_slot = xcalloc(rows, sizeof(int));
    rs->row_tok = xcalloc(rows, sizeof(int32_t));
    rs->dec_row = xcalloc(rows, sizeof(int));
    rs->out_row = xcalloc((size_t)m->max_logit_rows, sizeof(int));
    rs->max_items = rows * c->n_head_kv + (size_t)m->max_batch * c->n_head_kv * rs->n_chunks;
    size_t lists = c->n_swa > 0 ? 2 : 1; /* the sliding-window layers' own list */
    rs->items = xcalloc(lists * rs->max_items, sizeof(*rs->items));
    rs->item_cost = xcalloc(lists * rs->max_items, sizeof(double));
    rs->ops = cpu_ops_for_isa(q_kernels_isa(m->kern));
    log_info("kv cache: %d slots x %d positions, %s, %.1f MB; %d threads; kernels %s/%s",
             m->max_batch, m->ctx, rs->kv_elem == 4 ? "f32" : "f16", rs->kv_bytes / 1e6, nth,
             q_kernels_name(m->kern), rs->ops->name);
    return 0;
}

static void cpu_release(struct model *m)
{
    struct run_state *rs = &m->rs;
    free(rs->k_cache);
    free(rs->v_cache);
    free(rs->x);
    free(rs->xb);
    free(rs->q);
    free(rs->k);
    free(rs->v);
    free(rs->att);
    free(rs->y);
    free(rs->hb);
    free(rs->hb2);
    free(rs->moe_y);
    free(rs->moe_xg);
    free(rs->moe_logits);
    free(rs->moe_w);
    free(rs->moe_exp);
    free(rs->moe_pos);
    free(rs->moe_grow);
    free(rs->moe_off);
    free(rs->moe_fill);
    free(m->expert_rows);
    m->expert_rows = NULL;
    free(rs->logits);
    if (rs->ops)
        for (int i = 0; i < MODEL_N_ACT; i++)
            q_act_release(&rs->act[i]);
    free(rs->att_part);
    free(rs->scratch);
    free(rs->rope_cos);
    free(rs->rope_sin);
    free(rs->row_seq);
    free(rs->row_pos);
    free(rs->row_slot);
    free(rs->row_tok);
    free(rs->dec_row);
    free(rs->out_row);
    free(rs->items);
    free(rs->item_cost);
    memset(rs, 0, sizeof(*rs));
}

/* Whole key tiles of positions [0, n) per (layer, KV head): a block is
 * tiled keys (cpu/ops.h) and position-major values, so the first
 * ceil(n / OPS_KTILE) tiles of both are one contiguous run each. */
static void cpu_kv_copy(struct model *m, int src, int dst, int n)
{
    struct run_state *rs = &m->rs;
    int tiles = (n + OPS_KTILE - 1) / OPS_KTILE;
    size_t bytes = (size_t)tiles * OPS_KTILE * (size_t)m->cfg.head_dim * rs->kv_elem;
    for (int l = 0; l < m->cfg.n_layer; l++)
        for (int h = 0; h < m->cfg.n_head_kv; h++) {
            size_t from = cache_off(m, l, src, h) * rs->kv_elem;
            size_t to = cache_off(m, l, dst, h) * rs->kv_elem;
            memcpy((char *)rs->k_cache + to, (const char *)rs->k_cache + from, bytes);
            memcpy((char *)rs->v_cache + to, (const char *)rs->v_cache + from, bytes);
        }
}

const struct backend backend_cpu = {.name = "cpu",
                                    .prepare = cpu_prepare,
                                    .forward = cpu_forward,
                                    .release = cpu_release,
                                    .kv_copy = cpu_kv_copy,
                                    .hidden_out = true};
