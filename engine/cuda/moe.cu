/*
 * cuda/moe: the mixture-of-experts FFN of the CUDA backend (qwen3moe and
 * gpt-oss, docs/formats.md §2), the device twin of model/moe.c. Per
 * layer, all on the step's stream and without a trip to the host:
 *
 *   route    one block per row: RMSNorm (ffn_norm), router logits in f32,
 *            softmax over every expert, the top k (ties: the lower index),
 *            weights renormalised over the chosen (moe.c's route, step by
 *            step, so both backends pick the same experts); gpt-oss: the
 *            router's bias added, the top k of the raw logits, a softmax
 *            over those k (moe.c's route_oai);
 *   group    one block: a counting sort of the (row, rank) pairs by expert,
 *            rows in order within each expert, into the gathered block,
 *            and the tile list that mm_run_experts launches over (tiles of
 *            the regime's height, so in the GEMV regime each touched
 *            expert is one tile and its weights are read once per step);
 *   experts  the gathered rows normed again through op_norm's gather (so
 *            the activations are prepared in expert order), gate and up
 *            per tile, SwiGLU (gpt-oss: the expert's gate/up biases, then
 *            the clamped SwiGLU), down into moe_y;
 *   combine  one block per row: its k expert outputs (gpt-oss: plus the
 *            expert's down bias) weighted and summed in rank order, added
 *            to the residual stream.
 *
 * A row's result depends only on the row: the routing is per row, each
 * expert output element comes from one (weight row, activation row) pair
 * (the matmuls' batch invariance), and the sum runs in rank order. The
 * experts a pass read are flagged per layer in moe_hit and counted on the
 * host after the step (moe_count).
 */
#include "cuda/common.cuh"

#define MOE_THREADS 256
#define MOE_WARPS   (MOE_THREADS / 32)

/* ---- route ---- */

struct route_args {
    const float *x;      /* (rows, n_embd) residual stream */
    const float *norm;   /* (n_embd) ffn_norm */
    const float *router; /* (E, n_embd) */
    const float *bias;   /* (E) gpt-oss's router bias (its routing), or NULL */
    int32_t *exp;        /* (rows, k) out */
    float *w;            /* (rows, k) out */
    int n_embd, E, k;
    float eps;
};

/* The indices of the k largest of v[0..n), largest first (ties: the lower
 * index): k passes picking the largest untaken, as moe.c's top_k. */
__device__ void top_k(const float *v, int n, int k, int32_t *idx)
{
    for (int j = 0; j < k; j++) {
        int best = -1;
        for (int e = 0; e < n; e++) {
            bool taken = false;
            for (int i = 0; i < j; i++)
                taken |= idx[i] == e;
            if (!taken && (best < 0 || v[e] > v[best]))
                best = e;
        }
        idx[j] = best;
    }
}

/*
 * grid rows, block MOE_THREADS. The norm as norm_kernel computes it (sum
 * of squares in double), kept in shared memory; one warp per expert's
 * logit (lane-strided, then the butterfly); thread 0 then routes exactly
 * as moe.c's route: exp(l - max), their sum in double, p = e / sum, k
 * passes picking the largest untaken p, the chosen sum clamped below at
 * llama.cpp's 6.1e-5, each weight divided by it. With a bias (gpt-oss)
 * as route_oai: l + b, k passes over the raw logits, then exp(l - l_0)
 * of the chosen, their sum in double, each times 1 / sum.
 */
__global__ void __launch_bounds__(MOE_THREADS) route_kernel(route_args A)
{
    CU_SHARED(16, float, xs, [CU_MOE_EMBD_MAX]);
    CU_SHARED(4, float, p, [MODEL_MAX_EXPERTS]);
    CU_SHARED(8, double, red, [MOE_WARPS]);
    CU_SHARED(4, float, r_shared, );
    int row = blockIdx.x, warp = threadIdx.x >> 5, lane = threadIdx.x & 31, n = A.n_embd;
    const float *xr = A.x + (size_t)row * n;
    float r = block_rms_scale<MOE_THREADS>(xr, n, A.eps, red, &r_shared);
    for (int i = threadIdx.x; i < n; i += MOE_THREADS)
        xs[i] = __fmul_rn(__fmul_rn(xr[i], r), A.norm[i]);
    __syncthreads();
    for (int e = warp; e < A.E; e += MOE_WARPS) {
        const float *wr = A.router + (size_t)e * n;
        float acc = 0.0f;
        for (int i = lane; i < n; i += 32)
            acc = fmaf(wr[i], xs[i], acc);
        acc = warp_sum(acc);
        if (lane == 0)
            p[e] = A.bias ? __fadd_rn(acc, A.bias[e]) : acc;
    }
    __syncthreads();
    if (threadIdx.x != 0)
        return;
    int32_t *ex = A.exp + (size_t)row * A.k;
    float *w = A.w + (size_t)row * A.k;
    if (A.bias) {
        top_k(p, A.E, A.k, ex);
        float top = p[ex[0]];
        double sum = 0;
        for (int j = 0; j < A.k; j++) {
            w[j] = expf(__fsub_rn(p[ex[j]], top));
            sum += w[j];
        }
        float inv = (float)(1.0 / sum);
        for (int j = 0; j < A.k; j++)
            w[j] = __fmul_rn(w[j], inv);
        return;
    }
    float mx = p[0];
    for (int e = 1; e < A.E; e++)
        mx = p[e] > mx ? p[e] : mx;
    double sum = 0;
    for (int e = 0; e < A.E; e++) {
        p[e] = expf(__fsub_rn(p[e], mx));
        sum += p[e];
    }
    for (int e = 0; e < A.E; e++)
        p[e] = (float)(p[e] / sum);
    float chosen = 0.0f;
    top_k(p, A.E, A.k, ex);
    for (int j = 0; j < A.k; j++) {
        w[j] = p[ex[j]];
        chosen = __fadd_rn(chosen, p[ex[j]]);
    }
    if (chosen < 6.103515625e-5f)
        chosen = 6.103515625e-5f;
    for (int j = 0; j < A.k; j++)
        w[j] = __fdiv_rn(w[j], chosen);
}

/* ---- group ---- */

struct group_args {
    const int32_t *exp; /* (G) chosen experts, (row, rank) order */
    int32_t *pos;       /* (G) out: gathered row of each (row, rank) */
    int32_t *grow;      /* (G) out: row behind each gathered row */
    int32_t *gexp;      /* (G) out: expert of each gathered row */
    int32_t *tiles;     /* out: count, then (expert, first, end) per tile */
    uint8_t *hit;       /* (E) out: 1 when the expert has rows */
    int G, k, E, H;     /* H: tile height */
};

/*
 * grid 1, block MOE_THREADS (>= MODEL_MAX_EXPERTS): thread e counts expert
 * e's pairs; thread 0 turns the counts into offsets and the tile list (in
 * expert order); thread e then walks the pairs in order and places its
 * own, so a row comes before the later rows of the same expert, as the
 * CPU's counting sort places them. Every thread reads all G pairs twice:
 * cheap next to the expert matmuls at the batch sizes served.
 */
__global__ void __launch_bounds__(MOE_THREADS) group_kernel(group_args A)
{
    CU_SHARED(4, int, cnt, [MODEL_MAX_EXPERTS]);
    CU_SHARED(4, int, off, [MODEL_MAX_EXPERTS + 1]);
    int t = threadIdx.x;
    if (t < A.E) {
        int c = 0;
        for (int i = 0; i < A.G; i++)
            c += A.exp[i] == t;
        cnt[t] = c;
    }
    __syncthreads();
    if (t == 0) {
        int n = 0;
        off[0] = 0;
        for (int e = 0; e < A.E; e++) {
            off[e + 1] = off[e] + cnt[e];
            for (int f = off[e]; f < off[e + 1]; f += A.H, n++) {
                A.tiles[1 + 3 * n] = e;
                A.tiles[2 + 3 * n] = f;
                A.tiles[3 + 3 * n] = min(f + A.H, off[e + 1]);
            }
        }
        A.tiles[0] = n;
    }
    __syncthreads();
    if (t < A.E) {
        A.hit[t] = cnt[t] > 0;
        int g = off[t];
        for (int i = 0; i < A.G; i++)
            if (A.exp[i] == t) {
                A.pos[i] = g;
                A.gexp[g] = t;
                A.grow[g++] = i / A.k;
            }
    }
}

/* ---- combine ---- */

struct combine_args {
    float *x;       /* (rows, n_embd) residual stream */
    const float *y; /* (G, n_embd) expert outputs, gathered order */
    const int32_t *pos;
    const float *w;
    const int32_t *exp; /* (rows, k) the chosen experts */
    const float *bias;  /* (E, n_embd) gpt-oss's down biases, or NULL */
    int n_embd, k;
};

/* grid rows, block MOE_THREADS: x += sum over ranks j of y[pos] * w_j
 * (gpt-oss: (y[pos] + bias[expert]) * w_j), the sum started at rank 0
 * and taken in rank order (moe.c's order). */
__global__ void __launch_bounds__(MOE_THREADS) combine_kernel(combine_args A)
{
    int row = blockIdx.x;
    const int32_t *pos = A.pos + (size_t)row * A.k;
    const float *w = A.w + (size_t)row * A.k;
    float *x = A.x + (size_t)row * A.n_embd;
    for (int i = threadIdx.x; i < A.n_embd; i += MOE_THREADS) {
        float acc = 0.0f;
        for (int j = 0; j < A.k; j++) {
            float y = A.y[(size_t)pos[j] * A.n_embd + i];
            if (A.bias)
                y = __fadd_rn(y, A.bias[(size_t)A.exp[(size_t)row * A.k + j] * A.n_embd + i]);
            float v = __fmul_rn(y, w[j]);
            acc = j == 0 ? v : __fadd_rn(acc, v);
        }
        x[i] = __fadd_rn(x[i], acc);
    }
}

/* ---- the layer ---- */

void moe_ffn(cu_state *S, const struct model *m, int layer, int R, int flags)
{
    const struct model_config *c = &m->cfg;
    const cu_layer *L = &S->layers[layer];
    int E = c->n_expert, k = c->n_expert_used, D = c->n_embd, FF = c->n_ff_exp, G = R * k;
    bool gemv = R <= CU_GEMV_MAX_ROWS;
    int H = gemv ? CU_GEMV_MAX_ROWS : CU_TC_ROWS;
    int max_tiles = (E < G ? E : G) + G / H;

    cu_mark(S, PH_OTHER);
    route_args ra = {S->x,     L->ffn_norm, L->router, L->router_b, S->moe_exp,
                     S->moe_w, D,           E,         k,           c->rms_eps};
    CU_LAUNCH(route_kernel, R, MOE_THREADS, 0, S->stream, ra);
    CU_CHECK_LAUNCH();
    group_args ga = {S->moe_exp,
                     S->moe_pos,
                     S->moe_grow,
                     S->moe_gexp,
                     S->moe_tiles,
                     S->moe_hit + (size_t)layer * E,
                     G,
                     k,
                     E,
                     H};
    CU_LAUNCH(group_kernel, 1, MOE_THREADS, 0, S->stream, ga);
    CU_CHECK_LAUNCH();
    op_norm(S, S->x, S->moe_grow, L->ffn_norm, G, D, c->rms_eps, flags);

    cu_mark(S, PH_MATMUL);
    {
        const cu_mat *w[2] = {&L->gate_exps, &L->up_exps};
        const mm_out o[2] = {{S->hb, FF, false}, {S->hb2, FF, false}};
        mm_run_experts(S, w, o, 2, S->moe_tiles, max_tiles, gemv);
    }
    if (L->gate_b)
        op_swiglu_oai(S, S->hb, S->hb2, L->gate_b, L->up_b, S->moe_gexp, G, FF, flags);
    else
        op_silu(S, S->hb, S->hb2, G, FF, flags);
    {
        const cu_mat *w[1] = {&L->down_exps};
        const mm_out o[1] = {{S->moe_y, D, false}};
        mm_run_experts(S, w, o, 1, S->moe_tiles, max_tiles, gemv);
    }

    cu_mark(S, PH_OTHER);
    combine_args ca = {S->x, S->moe_y, S->moe_pos, S->moe_w, S->moe_exp, L->down_b, D, k};
    CU_LAUNCH(combine_kernel, R, MOE_THREADS, 0, S->stream, ca);
    CU_CHECK_LAUNCH();
}

void moe_count(cu_state *S, struct model *m)
{
    int E = m->cfg.n_expert;
    for (int l = 0; l < m->cfg.n_layer; l++)
        for (int e = 0; e < E; e++)
            if (S->moe_hit_host[(size_t)l * E + e]) {
                m->last_experts++;
                m->last_expert_bytes += model_expert_bytes(m, l, e);
            }
}
