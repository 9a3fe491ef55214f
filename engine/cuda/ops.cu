/*
 * cuda/ops: the per-row kernels around the matmuls: embedding lookup,
 * RMSNorm, SwiGLU and the attention output (with the split-KV combine),
 * each fused with the preparation of the next matmul's activations (int8
 * blocks for the GEMV, f32 for float weights, f16 for the tensor cores);
 * and RoPE (NORM or NEOX pairs, after qwen3's per-head Q/K RMSNorm) with
 * the K/V cache write. One block per row. Arithmetic follows
 * model/backend_cpu.c operation by operation where that is cheap (RMSNorm sums
 * in double, RoPE from the same cos/sin table, the same int8 activation
 * quantizer), so the two backends differ mainly in summation order.
 */
#include "cuda/common.cuh"
#include "cuda/quant.cuh"

#define ROW_THREADS 256
#define ROW_WARPS   (ROW_THREADS / 32)

/* Where a row kernel writes its activations (see cu_act). */
struct prep_out {
    int8_t *q;
    float *d, *s, *f;
    __half *h;
    int ld;
    int flags; /* PREP_* */
};

static prep_out prep_of(const cu_state *S, int flags)
{
    const cu_act &a = S->act;
    return prep_out{a.q, a.d, a.s, a.f, a.h, a.ld, flags};
}

/*
 * Element 32 kb + lane of row `row` has value v (0 past the row's
 * columns): store it in every format asked. Warp-collective (all lanes,
 * same kb). The int8 format is q_act_prepare's for quantized weights:
 * d = f16(amax / 127), q = rne(v * 127 / amax) clamped to +-127, plus
 * d * sum(q) per 16-element half for the weights' min terms.
 */
__device__ __forceinline__ void prep_store(const prep_out &P, int row, int kb, int lane, float v)
{
    size_t i = (size_t)row * P.ld + 32 * kb + lane;
    if (P.flags & PREP_F32)
        P.f[i] = v;
    if (P.flags & PREP_F16)
        P.h[i] = __float2half_rn(v);
    if (P.flags & PREP_Q8) {
        float amax = warp_max(fabsf(v));
        float d = __half2float(__float2half_rn(__fdiv_rn(amax, 127.0f)));
        float id = amax != 0.0f ? __fdiv_rn(127.0f, amax) : 0.0f;
        int q = __float2int_rn(__fmul_rn(v, id));
        q = q < -127 ? -127 : q > 127 ? 127 : q;
        P.q[i] = (int8_t)q;
        int s = q;
#pragma unroll
        for (int o = 8; o > 0; o >>= 1)
            s += __shfl_xor_sync(0xffffffffu, s, o); /* within each 16-lane half */
        if ((lane & 15) == 0)
            P.s[(size_t)row * (P.ld / 16) + 2 * kb + (lane >> 4)] = __fmul_rn(d, (float)s);
        if (lane == 0)
            P.d[(size_t)row * (P.ld / 32) + kb] = d;
    }
}

/* ---- embedding ---- */

/* x[row] = row tok[row] of the embedding (times its scale), as
 * q_dequant_row gives it, bit for bit. grid rows, block ROW_THREADS; a
 * thread per 16-element unit (quantized) or element (float). */
template <uint32_t T>
__global__ void __launch_bounds__(ROW_THREADS)
    embed_kernel(const uint8_t *__restrict__ w, size_t row_bytes, float scale,
                 const int32_t *__restrict__ tok, float *__restrict__ x, int n)
{
    int row = blockIdx.x;
    const uint8_t *src = w + (size_t)tok[row] * row_bytes;
    float *dst = x + (size_t)row * n;
    if constexpr (is_float_type(T)) {
        for (int i = threadIdx.x; i < n; i += ROW_THREADS) {
            float v = ft<T>::at(src, i);
            dst[i] = scale != 1.0f ? __fmul_rn(v, scale) : v;
        }
    } else {
        for (int u = threadIdx.x; u < n / 16; u += ROW_THREADS) {
            unit16 o;
            qt<T>::unit(src, u, o);
#pragma unroll
            for (int i = 0; i < 16; i++) {
                float v = unit_value<T>(o, i);
                dst[16 * u + i] = scale != 1.0f ? __fmul_rn(v, scale) : v;
            }
        }
    }
}

void op_embed(cu_state *S, const cu_mat *te, const int32_t *tok, float *x, int rows, int n_embd)
{
    switch (te->type) {
#define CASE(T)                                                                                    \
    case T:                                                                                        \
        CU_LAUNCH(embed_kernel<T>, rows, ROW_THREADS, 0, S->stream, te->w, te->row_bytes,          \
                  te->scale, tok, x, n_embd);                                                      \
        break;
        CU_WEIGHT_TYPES(CASE)
#undef CASE
    default:
        cu_fatal(cudaErrorInvalidValue, "embedding: weight type without a kernel", __FILE__,
                 __LINE__);
    }
    CU_CHECK_LAUNCH();
}

/* ---- RMSNorm, SwiGLU, attention output: value per element, then prep ---- */

/* out = x * r * w with r = 1 / sqrt(mean(x^2) + eps), the sum of squares
 * in double as model/backend_cpu.c's rmsnorm (block tree instead of a loop).
 * grid rows (output row i reads x row gather[i]), block ROW_THREADS; each
 * warp then prepares whole 32-element blocks. */
__global__ void __launch_bounds__(ROW_THREADS)
    norm_kernel(const float *__restrict__ x, const int32_t *__restrict__ gather,
                const float *__restrict__ w, int cols, float eps, prep_out P)
{
    CU_SHARED(8, double, red, [ROW_WARPS]);
    CU_SHARED(4, float, r_shared, );
    int row = blockIdx.x, warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const float *xr = x + (size_t)(gather ? gather[row] : row) * cols;
    float r = block_rms_scale<ROW_THREADS>(xr, cols, eps, red, &r_shared);
    int n_kb = (cols + 31) / 32;
    for (int kb = warp; kb < n_kb; kb += ROW_WARPS) {
        int i = 32 * kb + lane;
        float v = i < cols ? __fmul_rn(__fmul_rn(xr[i], r), w[i]) : 0.0f;
        prep_store(P, row, kb, lane, v);
    }
}

/* silu(g) * u = g / (1 + exp(-g)) * u, as the portable CPU kernel. */
__global__ void __launch_bounds__(ROW_THREADS)
    silu_kernel(const float *__restrict__ g, const float *__restrict__ u, int cols, prep_out P)
{
    int row = blockIdx.x, warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const float *gr = g + (size_t)row * cols, *ur = u + (size_t)row * cols;
    int n_kb = (cols + 31) / 32;
    for (int kb = warp; kb < n_kb; kb += ROW_WARPS) {
        int i = 32 * kb + lane;
        float v = 0.0f;
        if (i < cols) {
            float x = gr[i];
            v = __fmul_rn(__fdiv_rn(x, __fadd_rn(1.0f, expf(-x))), ur[i]);
        }
        prep_store(P, row, kb, lane, v);
    }
}

/* gpt-oss's clamped SwiGLU on the experts' gathered rows, each row's
 * expert's gate and up biases added first: x = min(g + bg, 7), y = u + bu
 * clamped to [-7, 7], x / (1 + exp(1.702 (-x))) * (y + 1), as moe.c's
 * swiglu_oai. gexp: the expert of each gathered row. */
__global__ void __launch_bounds__(ROW_THREADS)
    swiglu_oai_kernel(const float *__restrict__ g, const float *__restrict__ u,
                      const float *__restrict__ gb, const float *__restrict__ ub,
                      const int32_t *__restrict__ gexp, int cols, prep_out P)
{
    const float alpha = 1.702f, limit = 7.0f;
    int row = blockIdx.x, warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const float *gr = g + (size_t)row * cols, *ur = u + (size_t)row * cols;
    const float *gbr = gb + (size_t)gexp[row] * cols, *ubr = ub + (size_t)gexp[row] * cols;
    int n_kb = (cols + 31) / 32;
    for (int kb = warp; kb < n_kb; kb += ROW_WARPS) {
        int i = 32 * kb + lane;
        float v = 0.0f;
        if (i < cols) {
            float x = __fadd_rn(gr[i], gbr[i]), y = __fadd_rn(ur[i], ubr[i]);
            x = x < limit ? x : limit;
            y = y < -limit ? -limit : y > limit ? limit : y;
            v = __fmul_rn(__fdiv_rn(x, __fadd_rn(1.0f, expf(__fmul_rn(alpha, -x)))),
                          __fadd_rn(y, 1.0f));
        }
        prep_store(P, row, kb, lane, v);
    }
}

/* x += y + b, one block per row. */
__global__ void __launch_bounds__(ROW_THREADS)
    add_bias_kernel(float *__restrict__ x, const float *__restrict__ y, const float *__restrict__ b,
                    int cols)
{
    size_t r = (size_t)blockIdx.x * cols;
    for (int i = threadIdx.x; i < cols; i += ROW_THREADS)
        x[r + i] = __fadd_rn(x[r + i], __fadd_rn(y[r + i], b[i]));
}

struct attn_out_args {
    float *att;        /* (rows, q_dim) */
    const float *part; /* see cu_state.part */
    const int32_t *pos, *dec;
    const float *sinks; /* (n_head) or NULL */
    int n_head, n_kv, g, hd, q_dim, n_chunks;
    int window; /* n_swa in a sliding-window layer, else 0 */
};

/* A split decode row first folds its chunk partials left to right (the
 * same fold as the attention walk, from the chunk of its first key) into
 * att, one thread per (query head, dim), and finishes with the head's
 * sink as the walk does; then att is prepared. Walk rows were written by
 * the attention kernel and are only prepared. grid rows, block
 * ROW_THREADS. */
__global__ void __launch_bounds__(ROW_THREADS) attn_out_kernel(attn_out_args A, prep_out P)
{
    int row = blockIdx.x, warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    float *att = A.att + (size_t)row * A.q_dim;
    int dec = A.dec[row];
    if (dec >= 0) {
        int n_ch = (A.pos[row] + CU_CHUNK) / CU_CHUNK;
        int c0 = first_key(A.pos[row], A.window) / CU_CHUNK;
        size_t stride = (size_t)A.g * (A.hd + 2); /* floats from one chunk's partial to the next */
        for (int idx = threadIdx.x; idx < A.n_head * A.hd; idx += ROW_THREADS) {
            int hq = idx / A.hd, d = idx % A.hd, kvh = hq / A.g, h = hq % A.g;
            const float *p = A.part +
                             (((size_t)dec * A.n_kv + kvh) * A.n_chunks * A.g + h) * (A.hd + 2) +
                             (size_t)c0 * stride;
            float m = -INFINITY, s = 0.0f, o = 0.0f, a, b;
            for (int c = c0; c < n_ch; c++, p += stride) {
                fold_ms(m, s, p[0], p[1], a, b);
                o = fold_o(o, p[2 + d], a, b);
            }
            float sink = A.sinks ? A.sinks[hq] : -INFINITY, fa, inv;
            fold_finish(m, s, sink, fa, inv);
            att[idx] = fold_out(o, fa, inv, A.sinks != NULL);
        }
        __syncthreads();
    }
    int n_kb = (A.q_dim + 31) / 32;
    for (int kb = warp; kb < n_kb; kb += ROW_WARPS) {
        int i = 32 * kb + lane;
        prep_store(P, row, kb, lane, i < A.q_dim ? att[i] : 0.0f);
    }
}

void op_norm(cu_state *S, const float *x, const int32_t *gather, const float *w, int rows, int cols,
             float eps, int flags)
{
    CU_LAUNCH(norm_kernel, rows, ROW_THREADS, 0, S->stream, x, gather, w, cols, eps,
              prep_of(S, flags));
    CU_CHECK_LAUNCH();
}

void op_silu(cu_state *S, const float *g, const float *u, int rows, int cols, int flags)
{
    CU_LAUNCH(silu_kernel, rows, ROW_THREADS, 0, S->stream, g, u, cols, prep_of(S, flags));
    CU_CHECK_LAUNCH();
}

void op_swiglu_oai(cu_state *S, const float *g, const float *u, const float *gb, const float *ub,
                   const int32_t *gexp, int rows, int cols, int flags)
{
    CU_LAUNCH(swiglu_oai_kernel, rows, ROW_THREADS, 0, S->stream, g, u, gb, ub, gexp, cols,
              prep_of(S, flags));
    CU_CHECK_LAUNCH();
}

void op_add_bias(cu_state *S, float *x, const float *y, const float *b, int rows, int cols)
{
    CU_LAUNCH(add_bias_kernel, rows, ROW_THREADS, 0, S->stream, x, y, b, cols);
    CU_CHECK_LAUNCH();
}

void op_attn_out(cu_state *S, const struct model *m, int layer, const int32_t *pos,
                 const int32_t *dec, int rows, int flags)
{
    const struct model_config *c = &m->cfg;
    const cu_layer *L = &S->layers[layer];
    attn_out_args A = {S->att,      S->part,   pos,          dec,
                       L->sinks,    c->n_head, c->n_head_kv, c->n_head / c->n_head_kv,
                       c->head_dim, c->q_dim,  S->n_chunks,  L->window};
    CU_LAUNCH(attn_out_kernel, rows, ROW_THREADS, 0, S->stream, A, prep_of(S, flags));
    CU_CHECK_LAUNCH();
}

/* ---- per-head Q/K norm, RoPE and the K/V write ---- */

struct rope_args {
    float *q;                  /* (rows, q_dim), normed and rotated in place */
    float *k;                  /* (rows, kv_dim), normed and rotated in place */
    const float *v;            /* (rows, kv_dim) */
    __half *kc, *vc;           /* the caches */
    const float2 *rope;        /* (ctx, n_rot / 2) */
    const float *qn, *kn;      /* (head_dim) qwen3's per-head RMSNorm weights, or NULL */
    const float *bq, *bk, *bv; /* gpt-oss's projection biases (q_dim, kv_dim, kv_dim), or NULL */
    const int32_t *pos, *slot;
    int layer, max_batch, ctx, n_head, n_kv, hd, n_rot, q_dim, kv_dim;
    int neox;  /* rotate (x[i], x[i + n_rot/2]) instead of (x[2i], x[2i+1]) */
    float eps; /* of the per-head norm */
};

/* (x0, x1) -> (x0 c - x1 s, x0 s + x1 c). */
__device__ __forceinline__ float2 rotate(float x0, float x1, float2 cs)
{
    return make_float2(__fsub_rn(__fmul_rn(x0, cs.x), __fmul_rn(x1, cs.y)),
                       __fadd_rn(__fmul_rn(x0, cs.y), __fmul_rn(x1, cs.x)));
}

/* The two elements of a head that pair i of hd / 2 covers: NORM pairs
 * (2i, 2i + 1); NEOX pairs (i, i + half) while i < half (the rotated
 * dims), then (2i, 2i + 1), the unrotated dims past n_rot. */
__device__ __forceinline__ void pair_of(int i, int half, int neox, int &a, int &b)
{
    a = neox && i < half ? i : 2 * i;
    b = neox && i < half ? i + half : 2 * i + 1;
}

/*
 * grid rows, block ROW_THREADS. gpt-oss's biases are added to each element
 * first (x + b, the CPU's add_bias; a model has biases or norms, never
 * both). With qwen3's norms, first the 1 / rms of
 * every head of q and k (one warp per head, the sum of squares in double
 * as cpu_rmsnorm), so that each element becomes x * r * w before it is
 * rotated. Then one thread per (head, pair) of q, then of k and v, which
 * go to the cache at (layer, slot, kv head, pos) as f16.
 */
__global__ void __launch_bounds__(ROW_THREADS) rope_kv_kernel(rope_args A)
{
    CU_SHARED(4, float, rms, [CU_NORM_HEADS]);
    int row = blockIdx.x, pos = A.pos[row], slot = A.slot[row];
    int hp = A.hd / 2, half = A.n_rot / 2;
    int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const float2 *cs = A.rope + (size_t)pos * half;
    float *q = A.q + (size_t)row * A.q_dim, *k = A.k + (size_t)row * A.kv_dim;
    if (A.qn) {
        for (int h = warp; h < A.n_head + A.n_kv; h += ROW_WARPS) {
            const float *x =
                h < A.n_head ? q + (size_t)h * A.hd : k + (size_t)(h - A.n_head) * A.hd;
            double ss = 0;
            for (int i = lane; i < A.hd; i += 32)
                ss += (double)__fmul_rn(x[i], x[i]);
            ss = warp_sum_d(ss);
            if (lane == 0)
                rms[h] = __fdiv_rn(1.0f, __fsqrt_rn(__fadd_rn((float)(ss / A.hd), A.eps)));
        }
        __syncthreads();
    }
    for (int idx = threadIdx.x; idx < A.n_head * hp; idx += ROW_THREADS) {
        int h = idx / hp, i = idx % hp, a, b;
        pair_of(i, half, A.neox, a, b);
        float *x = q + (size_t)h * A.hd;
        float x0 = x[a], x1 = x[b];
        if (A.bq) {
            x0 = __fadd_rn(x0, A.bq[(size_t)h * A.hd + a]);
            x1 = __fadd_rn(x1, A.bq[(size_t)h * A.hd + b]);
        }
        if (A.qn) {
            x0 = __fmul_rn(__fmul_rn(x0, rms[h]), A.qn[a]);
            x1 = __fmul_rn(__fmul_rn(x1, rms[h]), A.qn[b]);
        }
        float2 r = i < half ? rotate(x0, x1, cs[i]) : make_float2(x0, x1);
        x[a] = r.x;
        x[b] = r.y;
    }
    const float *v = A.v + (size_t)row * A.kv_dim;
    for (int idx = threadIdx.x; idx < A.n_kv * hp; idx += ROW_THREADS) {
        int h = idx / hp, i = idx % hp, a, b;
        pair_of(i, half, A.neox, a, b);
        const float *x = k + (size_t)h * A.hd, *y = v + (size_t)h * A.hd;
        float x0 = x[a], x1 = x[b], y0 = y[a], y1 = y[b];
        if (A.bk) {
            const float *bk = A.bk + (size_t)h * A.hd, *bv = A.bv + (size_t)h * A.hd;
            x0 = __fadd_rn(x0, bk[a]);
            x1 = __fadd_rn(x1, bk[b]);
            y0 = __fadd_rn(y0, bv[a]);
            y1 = __fadd_rn(y1, bv[b]);
        }
        if (A.kn) {
            x0 = __fmul_rn(__fmul_rn(x0, rms[A.n_head + h]), A.kn[a]);
            x1 = __fmul_rn(__fmul_rn(x1, rms[A.n_head + h]), A.kn[b]);
        }
        float2 r = i < half ? rotate(x0, x1, cs[i]) : make_float2(x0, x1);
        size_t off = (((size_t)A.layer * A.max_batch + slot) * A.n_kv + h) * A.ctx + pos;
        __half *kc = A.kc + off * A.hd, *vc = A.vc + off * A.hd;
        kc[a] = __float2half_rn(r.x);
        kc[b] = __float2half_rn(r.y);
        vc[a] = __float2half_rn(y0);
        vc[b] = __float2half_rn(y1);
    }
}

void op_rope_kv(cu_state *S, const struct model *m, int layer, const int32_t *pos,
                const int32_t *slot, int rows)
{
    const struct model_config *c = &m->cfg;
    const cu_layer *L = &S->layers[layer];
    rope_args A = {S->q,
                   S->k,
                   S->v,
                   S->k_cache,
                   S->v_cache,
                   S->rope,
                   L->q_norm,
                   L->k_norm,
                   L->bq,
                   L->bk,
                   L->bv,
                   pos,
                   slot,
                   layer,
                   m->max_batch,
                   m->ctx,
                   c->n_head,
                   c->n_head_kv,
                   c->head_dim,
                   c->n_rot,
                   c->q_dim,
                   c->kv_dim,
                   c->rope_neox ? 1 : 0,
                   c->rms_eps};
    CU_LAUNCH(rope_kv_kernel, rows, ROW_THREADS, 0, S->stream, A);
    CU_CHECK_LAUNCH();
}
