/*
 * cuda/common.cuh: what the CUDA backend's .cu files share: the device
 * state (weights, KV cache, activation buffers, plan, timers), the
 * argument structs of the kernel launchers, warp reductions and the error
 * path. CUDA C++ only; host C talks to it through cuda/cuda.h.
 */
#ifndef ENGINE_CUDA_COMMON_CUH
#define ENGINE_CUDA_COMMON_CUH

#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdint.h>

extern "C" {
#include "cuda/cuda.h"

#include "model/model.h"
}

/* Attention: keys per chunk (the CPU's grid, so partials fold alike), the
 * largest GQA group and head dimension the kernels hold in registers. */
#define CU_CHUNK  MODEL_ATTN_CHUNK
#define CU_GMAX   8
#define CU_HD_MAX 256
/* Activation rows are padded to this many elements (one Q8 block). */
#define CU_ACT_ALIGN 32
/* Query plus KV heads a row's per-head Q/K norm (qwen3) holds in shared memory. */
#define CU_NORM_HEADS 256
/* Activation rows per tensor-core tile (the tile height of an expert's
 * gathered rows in that regime). */
#define CU_TC_ROWS 64
/* Widest model the MoE router holds a normalised row of in shared memory. */
#define CU_MOE_EMBD_MAX 8192

/* Report a failed CUDA call made during a forward pass and exit with
 * FP_ERR_DEVICE (see cu_forward). what names the call. */
[[noreturn]] void cu_fatal(cudaError_t e, const char *what, const char *file, int line);

/* Check a runtime call, or the launch just made, on the forward path. */
#define CU_CHECK(call)                                                                             \
    do {                                                                                           \
        cudaError_t e_ = (call);                                                                   \
        if (e_ != cudaSuccess)                                                                     \
            cu_fatal(e_, #call, __FILE__, __LINE__);                                               \
    } while (0)
#define CU_CHECK_LAUNCH() CU_CHECK(cudaGetLastError())

/* Every kernel launch and every shared-memory declaration goes through
 * these two, so that the same source runs on a GPU (nvcc) and in the host
 * harness (tests/cudahost/, which defines CUDAHOST; docs/cudahost.md):
 *   CU_LAUNCH(kernel, grid, block, shared_bytes, stream, args...)
 *   CU_SHARED(align, T, name, dims)   __shared__ __align__(align) T name dims
 * (dims: "[N]", "[N][M]", or empty for a scalar). */
#ifdef CUDAHOST
#define CU_LAUNCH(kernel, grid, block, shmem, stream, ...)                                         \
    cudahost_launch(#kernel, kernel, dim3(grid), dim3(block), (shmem), (stream), __VA_ARGS__)
#define CU_SHARED(al, T, name, dims) CUDAHOST_SHARED(al, T, name, dims)
#else
#define CU_LAUNCH(kernel, grid, block, shmem, stream, ...)                                         \
    kernel<<<(grid), (block), (shmem), (stream)>>>(__VA_ARGS__)
#define CU_SHARED(al, T, name, dims)                                                               \
    __shared__ __align__(al)                                                                       \
    T name dims
#endif

/* ---- warp reductions (xor butterflies: every lane gets the same value,
 * in a fixed order, so results never depend on timing) ---- */

__device__ __forceinline__ float warp_sum(float v)
{
#pragma unroll
    for (int o = 16; o > 0; o >>= 1)
        v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

__device__ __forceinline__ double warp_sum_d(double v)
{
#pragma unroll
    for (int o = 16; o > 0; o >>= 1)
        v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

__device__ __forceinline__ float warp_max(float v)
{
#pragma unroll
    for (int o = 16; o > 0; o >>= 1)
        v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

/* rmsnorm's scale of row xr (n values) for a block of THREADS threads:
 * 1 / sqrt(mean(x^2) + eps), the sum of squares in double as
 * model/backend_cpu.c's cpu_rmsnorm (per thread, then warp butterflies,
 * then the warps in order). red (THREADS / 32 doubles) and r (one float)
 * are the caller's shared memory; every thread gets the scale. */
template <int THREADS>
__device__ __forceinline__ float block_rms_scale(const float *xr, int n, float eps, double *red,
                                                 float *r)
{
    double ss = 0;
    for (int i = threadIdx.x; i < n; i += THREADS)
        ss += (double)__fmul_rn(xr[i], xr[i]);
    ss = warp_sum_d(ss);
    if ((threadIdx.x & 31) == 0)
        red[threadIdx.x >> 5] = ss;
    __syncthreads();
    if (threadIdx.x == 0) {
        double t = 0;
        for (int k = 0; k < THREADS / 32; k++)
            t += red[k];
        *r = __fdiv_rn(1.0f, __fsqrt_rn(__fadd_rn((float)(t / n), eps)));
    }
    __syncthreads();
    return *r;
}

/* One step of the left-to-right fold of attention partials (max m, sum
 * s, weighted values o): the CPU's fold (model/backend_cpu.c) with the same
 * roundings. Updates m and s and returns in a and b the factors for o:
 * o = o * a + po * b (fold_o). Used by the attention walk and by the
 * split combine alike, so both give the same bits. */
__device__ __forceinline__ void fold_ms(float &m, float &s, float pm, float ps, float &a, float &b)
{
    float mx = m > pm ? m : pm;
    a = expf(m - mx);
    b = expf(pm - mx);
    s = __fadd_rn(__fmul_rn(s, a), __fmul_rn(ps, b));
    m = mx;
}
__device__ __forceinline__ float fold_o(float o, float po, float a, float b)
{
    return __fadd_rn(__fmul_rn(o, a), __fmul_rn(po, b));
}

/* The end of the fold, the CPU's fold_finish: the factor that turns the
 * running weighted value o into the output (o * f). Without a sink
 * (-INFINITY) f = 1 / s; gpt-oss's sink logit joins the denominator
 * alone: f = a / (s a + exp(sink - mx)) with mx = max(m, sink) and a =
 * exp(m - mx), taken as (o * a) * inv as the CPU does (fold_out). */
__device__ __forceinline__ void fold_finish(float m, float s, float sink, float &a, float &inv)
{
    if (sink == -INFINITY) {
        a = 1.0f;
        inv = __fdiv_rn(1.0f, s);
        return;
    }
    float mx = m > sink ? m : sink;
    a = expf(m - mx);
    inv = __fdiv_rn(1.0f, __fadd_rn(__fmul_rn(s, a), expf(sink - mx)));
}
__device__ __forceinline__ float fold_out(float o, float a, float inv, bool sink)
{
    return sink ? __fmul_rn(__fmul_rn(o, a), inv) : __fmul_rn(o, inv);
}

/* The first key a row at position pos attends to: pos - window + 1 in a
 * sliding-window layer (window = n_swa), else 0 (window 0): the CPU's
 * first_key. */
__device__ __forceinline__ int first_key(int pos, int window)
{
    int lo = pos + 1 - window;
    return window > 0 && lo > 0 ? lo : 0;
}

/* ---- device-side model ---- */

/* A weight matrix in device memory, in its GGUF block layout; or the
 * experts of a 3-D expert tensor, expert e's matrix at w + e * e_stride. */
struct cu_mat {
    uint32_t type;        /* ggml type id */
    int rows, cols;       /* rows = outputs, cols = the reduction dimension */
    size_t row_bytes;     /* bytes per row */
    float scale;          /* multiplies every output (NVFP4's per-tensor scale), else 1 */
    const uint8_t *w;     /* device, 256-byte aligned */
    size_t e_stride;      /* experts: bytes from one expert's matrix to the next (else 0) */
    const float *e_scale; /* experts: device (n_expert) output scale of each, or NULL */
};

struct cu_layer {
    const float *attn_norm, *ffn_norm; /* device (n_embd) */
    const float *q_norm, *k_norm;      /* device (head_dim) qwen3 per-head norms, or NULL */
    /* gpt-oss (else NULL): projection biases (q_dim, kv_dim, kv_dim, n_embd),
     * one sink logit per query head (n_head), the router's bias (n_expert),
     * the experts' gate/up biases (n_expert, n_ff_exp) and down bias
     * (n_expert, n_embd) */
    const float *bq, *bk, *bv, *bo, *sinks, *router_b, *gate_b, *up_b, *down_b;
    int window;                            /* n_swa in a sliding-window layer, else 0 */
    cu_mat wq, wk, wv, wo, gate, up, down; /* gate, up, down: rows 0 in a MoE layer */
    const float *router;                   /* MoE: device (n_expert, n_embd) f32 ffn_gate_inp */
    cu_mat gate_exps, up_exps, down_exps;  /* MoE: the experts (n_ff_exp x n_embd and back) */
};

/* Prepared activations: the formats the matmuls read, written by the
 * row kernels (ops.cu). Rows are ld elements apart (ld a multiple of
 * CU_ACT_ALIGN), zero beyond the row's columns up to the next multiple of
 * CU_ACT_ALIGN. */
struct cu_act {
    int8_t *q; /* (CU_GEMV_MAX_ROWS, ld) int8 values: round(x / d) per 32-block */
    float *d;  /* (CU_GEMV_MAX_ROWS, ld / 32) block scales d = f16(amax / 127) */
    float *s;  /* (CU_GEMV_MAX_ROWS, ld / 16) d * sum(q) over each 16-element half */
    float *f;  /* (CU_GEMV_MAX_ROWS, ld) f32 copy, for float weights */
    __half *h; /* (max(max_rows, max_logit_rows), ld) f16 copy, for the tensor-core path */
    int ld;    /* elements per row */
};

/* Which formats a row kernel writes. */
enum { PREP_Q8 = 1, PREP_F32 = 2, PREP_F16 = 4 };

/* Phases of model_timers. */
enum cu_phase { PH_OTHER = 0, PH_MATMUL = 1, PH_ATTN = 2 };

struct cu_state {
    int dev;
    cudaStream_t stream;
    void *arena; /* the one device allocation everything below lives in */
    size_t arena_bytes;
    size_t weight_bytes; /* of which weights and norms */

    cu_layer *layers; /* host array (n_layer) of device views */
    cu_mat tok_embd, output;
    const float *output_norm; /* device (n_embd) */
    float2 *rope;             /* device (ctx, n_rot / 2): cos, sin as the CPU builds them */

    __half *k_cache, *v_cache; /* device (n_layer, max_batch, n_head_kv, ctx, head_dim) */
    float *x;                  /* (max_rows, n_embd) residual stream */
    float *q;                  /* (max_rows, q_dim) queries, RoPE'd in place */
    float *k, *v;              /* (max_rows, kv_dim) new keys and values */
    float *att;                /* (max_rows, q_dim) attention output */
    float *hb, *hb2;           /* (max_rows, n_ff) gate and up; MoE: (max_rows * k, n_ff_exp) */
    float *y;                  /* gpt-oss: (max_rows, n_embd) output projection before its bias */
    float *part;               /* (max_batch, n_head_kv, n_chunks, group, head_dim + 2) */
    float *logits;             /* (max_logit_rows, n_vocab) */
    cu_act act;
    int n_chunks; /* ceil(ctx / CU_CHUNK) */

    /* Mixture of experts (n_expert > 0; k = n_expert_used). A step's
     * gathered block holds each row once per chosen expert, grouped by
     * expert, rows in order within each (moe.cu). */
    int32_t *moe_exp;      /* (max_rows, k) chosen experts, rank order */
    float *moe_w;          /* (max_rows, k) their renormalised weights */
    int32_t *moe_pos;      /* (max_rows, k) gathered row of (row, rank) */
    int32_t *moe_grow;     /* (max_rows * k) row behind each gathered row */
    int32_t *moe_gexp;     /* (max_rows * k) expert of each gathered row */
    int32_t *moe_tiles;    /* [count, then (expert, first, end) gathered rows per tile] */
    int moe_max_tiles;     /* capacity of moe_tiles */
    float *moe_y;          /* (max_rows * k, n_embd) expert outputs, gathered order */
    uint8_t *moe_hit;      /* (n_layer, n_expert): 1 when the pass read the expert */
    uint8_t *moe_hit_host; /* pinned copy, read after the step */

    /* The plan: pinned host copy (filled by cuda.c) and its device twin. */
    struct cu_plan plan;  /* host view; arrays point into plan_host */
    struct cu_plan dplan; /* the same arrays in plan_dev */
    void *plan_host, *plan_dev;
    size_t plan_bytes; /* capacity */
    size_t off_items;  /* byte offset of items (the last array) */
    size_t max_items;  /* items of one list (a model with a window has two) */

    /* Phase timing: an event at each phase change of a step. */
    cudaEvent_t *ev;
    uint8_t *ev_phase;
    int n_ev, max_ev;
};

/* ---- launchers (each checks its launch; all on S->stream) ---- */

/* Start phase ph at this point of the stream (nothing when it goes on). */
void cu_mark(cu_state *S, enum cu_phase ph);

/* One output of a matmul: y[b * ldy + r] = scale * dot(W row r, act row b),
 * added to y instead when add (the residual stream). */
struct mm_out {
    float *y;
    int ldy;
    bool add;
};

/* y_i = W_i . act for n (<= 3) matrices sharing one activation (same
 * cols); rows = activation rows. rows <= CU_GEMV_MAX_ROWS runs the GEMV
 * on act.q/d/s (quantized weights) or act.f (float weights), else the
 * tensor-core kernel on act.h. Matrices of different types are launched
 * one by one. */
void mm_run(cu_state *S, const cu_mat *const *w, const mm_out *out, int n, int rows);

/* The same for expert matrices (cu_mat with e_stride): one tile of tiles
 * (device: count, then (expert, first, end) per tile) per grid row, at
 * most max_tiles; y_i rows [first, end) = W_i[expert] . act rows [first,
 * end). gemv picks the regime (tiles of <= CU_GEMV_MAX_ROWS rows), else
 * the tensor cores (tiles of <= CU_TC_ROWS rows). */
void mm_run_experts(cu_state *S, const cu_mat *const *w, const mm_out *out, int n,
                    const int32_t *tiles, int max_tiles, bool gemv);

/* x[r] = dequantized row tok[r] of the embedding, for plan rows. */
void op_embed(cu_state *S, const cu_mat *te, const int32_t *tok, float *x, int rows, int n_embd);

/* The row kernels: produce act (flags of PREP_*) for rows from
 *   norm: rmsnorm(x[src], w) with src = gather ? gather[row] : row
 *   silu: silu(hb) * hb2
 *   attn: att, after folding the split partials of decode rows (dec >= 0). */
void op_norm(cu_state *S, const float *x, const int32_t *gather, const float *w, int rows, int cols,
             float eps, int flags);
void op_silu(cu_state *S, const float *g, const float *u, int rows, int cols, int flags);
/* gpt-oss's clamped SwiGLU of the experts' gathered rows, with the
 * gate/up biases (gb, ub: (n_expert, cols)) of each row's expert gexp[row]. */
void op_swiglu_oai(cu_state *S, const float *g, const float *u, const float *gb, const float *ub,
                   const int32_t *gexp, int rows, int cols, int flags);
void op_attn_out(cu_state *S, const struct model *m, int layer, const int32_t *pos,
                 const int32_t *dec, int rows, int flags);
/* x[r] += y[r] + b for rows rows of cols (gpt-oss's output projection
 * bias, added as the CPU adds it). */
void op_add_bias(cu_state *S, float *x, const float *y, const float *b, int rows, int cols);

/* gpt-oss's Q/K/V biases or qwen3's per-head norm of q and k (when the
 * layer has them), RoPE (NORM or NEOX pairs) on both, then k and v into
 * the cache at (layer, slot, pos) as f16. */
void op_rope_kv(cu_state *S, const struct model *m, int layer, const int32_t *pos,
                const int32_t *slot, int rows);

/* Attention items for every KV head: split items write partials, walk
 * items write att directly. items: the layer's list (dp->items, or the
 * windowed list after it). */
void op_attention(cu_state *S, const struct model *m, int layer, const struct cu_plan *dp,
                  const struct cu_item *items, int n_items);

/* The mixture-of-experts FFN of layer `layer` for R rows (moe.cu): route,
 * group by expert, gate/up/SwiGLU/down per touched expert, and the
 * weighted sum added to x. flags: the regime's activation formats. */
void moe_ffn(cu_state *S, const struct model *m, int layer, int R, int flags);
/* After the step's stream synchronised: add the experts the pass read to
 * m->last_experts and m->last_expert_bytes. */
void moe_count(cu_state *S, struct model *m);

#endif
