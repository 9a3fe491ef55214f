/*
 * cuda/attention: causal attention over the f16 KV cache, cut on the
 * CPU's grid of CU_CHUNK (= MODEL_ATTN_CHUNK) keys. A block takes one work
 * item (a row, and one chunk or all of them) for one KV head, and serves
 * every query head of that GQA group, so each K and V row is read once
 * per group. Per chunk it computes the partial (max, sum, unnormalised
 * sum of p * V) for each query head:
 *
 *   split (flash-decoding): decode rows get one block per chunk, which
 *   writes its partial; op_attn_out folds them left to right (ops.cu).
 *   walk: prefill rows (and all rows with --attention serial) get one
 *   block that folds its chunks as it goes and writes the output.
 *
 * Both fold with the same function in the same order, so --attention
 * split and serial, and a row computed as decode or as prefill, give the
 * same bits. Scores: thread t of the block takes key t of the chunk.
 */
#include "cuda/common.cuh"

#define ATT_WARPS (CU_CHUNK / 32)
#define ATT_DPT   (CU_HD_MAX / CU_CHUNK) /* head dims per thread in the V sum */

struct att_args {
    const float *q;        /* (rows, q_dim), RoPE'd */
    const __half *kc, *vc; /* (n_layer, max_batch, n_kv, ctx, hd) */
    const int32_t *pos, *slot, *dec;
    const struct cu_item *items;
    float *part;        /* split partials, see cu_state.part */
    float *att;         /* (rows, q_dim) output of walk items */
    const float *sinks; /* (n_head) gpt-oss's sink logits, or NULL */
    int layer, max_batch, ctx, n_kv, g, hd, q_dim, n_chunks;
    int window;  /* n_swa in a sliding-window layer, else 0 */
    float scale; /* 1 / sqrt(hd) */
};

/*
 * grid (items, n_kv), block CU_CHUNK threads. Per chunk of the item:
 *   1. scores: thread t dots key t0 + t (f16, 16-byte loads) with the g
 *      queries of the group held in shared memory, times 1/sqrt(hd);
 *   2. per head max and sum of exp(score - max) over the chunk (warp
 *      butterflies, then the two warps in order);
 *   3. thread d sums p[t] * V[t][d] over the chunk's keys in order, for
 *      head dims d, d + CU_CHUNK, ... (coalesced across threads);
 * then a split item stores (max, sum, o) as the partial of its chunk and
 * a walk item folds it into its running (max, sum, o) in registers.
 * In a sliding-window layer the keys before the row's first key are
 * masked (score -inf, no V read), and a walk starts at the chunk that
 * holds it; the window's first chunk is then not whole, as on the CPU.
 */
__global__ void __launch_bounds__(CU_CHUNK) attn_kernel(att_args A)
{
    CU_SHARED(16, float, qs, [CU_GMAX * CU_HD_MAX]); /* (g, hd) queries of the group */
    CU_SHARED(4, float, ps, [CU_GMAX][CU_CHUNK]);    /* probabilities of the chunk */
    CU_SHARED(4, float, red, [ATT_WARPS][CU_GMAX]);
    const struct cu_item it = A.items[blockIdx.x];
    int kvh = blockIdx.y, tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
    int row = it.row, n_keys = A.pos[row] + 1, g = A.g, hd = A.hd;
    int k_lo = first_key(A.pos[row], A.window);

    /* The group's queries (heads kvh * g .. kvh * g + g - 1 are adjacent). */
    const float *qr = A.q + (size_t)row * A.q_dim + (size_t)kvh * g * hd;
    for (int i = tid; i < g * hd; i += CU_CHUNK)
        qs[i] = qr[i];
    size_t base = (((size_t)A.layer * A.max_batch + A.slot[row]) * A.n_kv + kvh) * A.ctx * hd;
    const __half *K = A.kc + base, *V = A.vc + base;
    /* A split item covers its one chunk; a walk item every chunk of the row. */
    int c0 = it.chunk >= 0 ? it.chunk : k_lo / CU_CHUNK;
    int c1 = it.chunk >= 0 ? it.chunk + 1 : (n_keys + CU_CHUNK - 1) / CU_CHUNK;

    /* The walk's running fold per head (registers: every index below is a
     * compile-time constant after unrolling; heads >= g are skipped). */
    float m_acc[CU_GMAX], s_acc[CU_GMAX], o_acc[CU_GMAX][ATT_DPT];
#pragma unroll
    for (int h = 0; h < CU_GMAX; h++) {
        m_acc[h] = -INFINITY;
        s_acc[h] = 0.0f;
#pragma unroll
        for (int k = 0; k < ATT_DPT; k++)
            o_acc[h][k] = 0.0f;
    }
    __syncthreads();

    for (int c = c0; c < c1; c++) {
        int t0 = c * CU_CHUNK, n = min(CU_CHUNK, n_keys - t0);
        int t_lo = k_lo > t0 ? k_lo - t0 : 0; /* the chunk's first key in the window */
        bool live = tid >= t_lo && tid < n;
        /* Scores of key t0 + tid against each query head: dot, then * scale. */
        float sc[CU_GMAX];
#pragma unroll
        for (int h = 0; h < CU_GMAX; h++)
            sc[h] = 0.0f;
        if (live) {
            const __half *kt = K + (size_t)(t0 + tid) * hd;
            for (int d = 0; d < hd; d += 8) {
                uint4 w = *(const uint4 *)(kt + d);
                const uint32_t ws[4] = {w.x, w.y, w.z, w.w};
                float kf[8];
#pragma unroll
                for (int e = 0; e < 4; e++) {
                    float2 f = __half22float2(*(const __half2 *)&ws[e]);
                    kf[2 * e] = f.x;
                    kf[2 * e + 1] = f.y;
                }
#pragma unroll
                for (int h = 0; h < CU_GMAX; h++) {
                    if (h >= g)
                        break;
                    const float *qh = qs + h * hd + d;
#pragma unroll
                    for (int e = 0; e < 8; e++)
                        sc[h] = fmaf(qh[e], kf[e], sc[h]);
                }
            }
        }
        /* Softmax pieces per head: max, then p = exp(s - max) and its sum
         * (block reductions through red, in a fixed order). */
        float mx[CU_GMAX], sum[CU_GMAX];
#pragma unroll
        for (int h = 0; h < CU_GMAX; h++) {
            if (h >= g)
                break;
            sc[h] = live ? __fmul_rn(sc[h], A.scale) : -INFINITY;
            float v = warp_max(sc[h]);
            if (lane == 0)
                red[warp][h] = v;
        }
        __syncthreads();
#pragma unroll
        for (int h = 0; h < CU_GMAX; h++) {
            if (h >= g)
                break;
            mx[h] = red[0][h];
            for (int w = 1; w < ATT_WARPS; w++)
                mx[h] = fmaxf(mx[h], red[w][h]);
        }
        __syncthreads();
#pragma unroll
        for (int h = 0; h < CU_GMAX; h++) {
            if (h >= g)
                break;
            float p = live ? expf(sc[h] - mx[h]) : 0.0f;
            ps[h][tid] = p;
            p = warp_sum(p);
            if (lane == 0)
                red[warp][h] = p;
        }
        __syncthreads();
#pragma unroll
        for (int h = 0; h < CU_GMAX; h++) {
            if (h >= g)
                break;
            sum[h] = red[0][h];
            for (int w = 1; w < ATT_WARPS; w++)
                sum[h] += red[w][h];
        }
        /* Unnormalised p . V for this thread's head dims, keys in order. */
        float o[CU_GMAX][ATT_DPT];
#pragma unroll
        for (int h = 0; h < CU_GMAX; h++)
#pragma unroll
            for (int k = 0; k < ATT_DPT; k++)
                o[h][k] = 0.0f;
        for (int t = t_lo; t < n; t++) {
            const __half *vt = V + (size_t)(t0 + t) * hd;
#pragma unroll
            for (int k = 0; k < ATT_DPT; k++) {
                int d = tid + CU_CHUNK * k;
                if (d >= hd)
                    break;
                float vv = __half2float(vt[d]);
#pragma unroll
                for (int h = 0; h < CU_GMAX; h++) {
                    if (h >= g)
                        break;
                    o[h][k] = fmaf(ps[h][t], vv, o[h][k]);
                }
            }
        }
        if (it.chunk >= 0) {
            float *dst = A.part + (((size_t)A.dec[row] * A.n_kv + kvh) * A.n_chunks + c) *
                                      (size_t)g * (hd + 2);
#pragma unroll
            for (int h = 0; h < CU_GMAX; h++) {
                if (h >= g)
                    break;
                float *ph = dst + (size_t)h * (hd + 2);
                if (tid == 0) {
                    ph[0] = mx[h];
                    ph[1] = sum[h];
                }
#pragma unroll
                for (int k = 0; k < ATT_DPT; k++) {
                    int d = tid + CU_CHUNK * k;
                    if (d < hd)
                        ph[2 + d] = o[h][k];
                }
            }
        } else {
#pragma unroll
            for (int h = 0; h < CU_GMAX; h++) {
                if (h >= g)
                    break;
                float a, b;
                fold_ms(m_acc[h], s_acc[h], mx[h], sum[h], a, b);
#pragma unroll
                for (int k = 0; k < ATT_DPT; k++)
                    o_acc[h][k] = fold_o(o_acc[h][k], o[h][k], a, b);
            }
        }
        __syncthreads(); /* ps and red are reused by the next chunk */
    }
    if (it.chunk >= 0)
        return;
    /* Walk: normalise as the CPU's fold_finish does (o * (1 / sum), or
     * with a sink in the denominator). */
    float *out = A.att + (size_t)row * A.q_dim + (size_t)kvh * g * hd;
#pragma unroll
    for (int h = 0; h < CU_GMAX; h++) {
        if (h >= g)
            break;
        float sink = A.sinks ? A.sinks[kvh * g + h] : -INFINITY, a, inv;
        fold_finish(m_acc[h], s_acc[h], sink, a, inv);
#pragma unroll
        for (int k = 0; k < ATT_DPT; k++) {
            int d = tid + CU_CHUNK * k;
            if (d < hd)
                out[(size_t)h * hd + d] = fold_out(o_acc[h][k], a, inv, A.sinks != NULL);
        }
    }
}

/* The scale is computed as the CPU computes it: 1.0f / sqrtf(hd). */
void op_attention(cu_state *S, const struct model *m, int layer, const struct cu_plan *dp,
                  const struct cu_item *items, int n_items)
{
    const struct model_config *c = &m->cfg;
    const cu_layer *L = &S->layers[layer];
    att_args A = {
        S->q,        S->k_cache,   S->v_cache,  dp->pos,      dp->slot,
        dp->dec,     items,        S->part,     S->att,       L->sinks,
        layer,       m->max_batch, m->ctx,      c->n_head_kv, c->n_head / c->n_head_kv,
        c->head_dim, c->q_dim,     S->n_chunks, L->window,    1.0f / sqrtf((float)c->head_dim)};
    dim3 grid((unsigned)n_items, (unsigned)c->n_head_kv);
    CU_LAUNCH(attn_kernel, grid, CU_CHUNK, 0, S->stream, A);
    CU_CHECK_LAUNCH();
}
