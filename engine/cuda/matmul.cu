/*
 * cuda/matmul: y = W . act for the linear layers and the head, in two
 * regimes chosen by the number of activation rows (CU_GEMV_MAX_ROWS):
 *
 *   GEMV (decode at small batch): one warp per weight row, each lane a
 *   16-element unit at a time, decoded once and multiplied with dp4a
 *   against every activation row's int8 values (ggml's MMVQ scheme), so
 *   the weights stream from memory once per step. Float weights dot
 *   against the f32 activations instead.
 *
 *   Tensor cores (prefill, large batch): 64 x 64 output tiles; each
 *   32-column slice of the weights is decoded to f16 in shared memory and
 *   multiplied with the f16 activations by WMMA (f32 accumulators). We
 *   write our own rather than call cuBLAS GemmEx: cuBLAS needs the whole
 *   matrix in f16 (4x the bytes of a 4-bit one, re-read every step), while
 *   decoding tile by tile keeps the quantized layout as the only copy and
 *   needs no extra library (the static cuBLAS is not installed, the shared
 *   one would tie fp4serve to its exact version).
 *
 * A MoE layer runs its experts through the same kernels in expert mode
 * (mm_run_experts): grid row y takes tile y of a device-side list of
 * (expert, gathered rows), so the host launches once per layer without
 * knowing the routing, and each expert's weights are read by the blocks
 * of its tiles only (one tile per touched expert in the GEMV regime: a
 * row chooses an expert at most once, so an expert has at most
 * CU_GEMV_MAX_ROWS rows there).
 *
 * Both are batch-invariant: the value for (weight row r, activation row
 * b) is computed in an order fixed by the weights alone, whatever the
 * other rows of the step are. Each output element is written by exactly
 * one thread, so the residual add is fused without atomics.
 */
#include <mma.h>

#include "cuda/common.cuh"
#include "cuda/quant.cuh"

/* A matrix of a launch group with its output; start = its first GEMV row
 * (or tensor-core tile) in the launch's numbering. */
struct mm_job {
    const uint8_t *w;
    float *y;
    size_t row_bytes;
    int rows, ldy;
    float scale;
    int add;
    size_t e_stride;      /* experts: bytes between experts' matrices */
    const float *e_scale; /* experts: per-expert scale, or NULL (scale) */
};
struct mm_group {
    mm_job job[3];
    int start[3]; /* first item of each job */
    int total;    /* items in the launch */
    int n;
    const int32_t *tiles; /* experts: the tile list (mm_run_experts), else NULL */
};

#define GEMV_WARPS 4 /* weight rows per GEMV block */
#define TC_M       64
#define TC_N       CU_TC_ROWS
#define TC_K       32
#define TC_LDS     (TC_K + 8) /* halves per shared row (16-byte rows, spread banks) */
#define TC_LDC     (TC_M + 4) /* floats per accumulator column in shared memory */
#define TC_THREADS 128

/* The job holding item idx (a GEMV row or a tile), and idx made local to
 * it. Constant indices only, so the group stays in parameter space. */
__device__ __forceinline__ mm_job find_job(const mm_group &g, int &idx)
{
    mm_job J = g.job[0];
    int s = 0;
    if (g.n > 1 && idx >= g.start[1]) {
        J = g.job[1];
        s = g.start[1];
    }
    if (g.n > 2 && idx >= g.start[2]) {
        J = g.job[2];
        s = g.start[2];
    }
    idx -= s;
    return J;
}

/* Expert mode: the tile of grid row blockIdx.y names an expert and its
 * gathered rows [first, end); point J at that expert's matrix, its scale
 * and its output rows, set rows = end - first and return first (the
 * activation row the tile starts at), or -1 past the list's count (the
 * grid is sized for the most tiles a step can have). Uniform per block. */
__device__ __forceinline__ int expert_tile(const int32_t *tiles, mm_job &J, int &rows)
{
    int t = (int)blockIdx.y;
    if (t >= tiles[0])
        return -1;
    const int32_t *tl = tiles + 1 + 3 * t;
    int e = tl[0];
    J.w += (size_t)e * J.e_stride;
    if (J.e_scale)
        J.scale = J.e_scale[e];
    rows = tl[2] - tl[1];
    J.y += (size_t)tl[1] * J.ldy;
    return tl[1];
}

__device__ __forceinline__ void put(const mm_job &J, int r, int b, float v)
{
    float *y = J.y + (size_t)b * J.ldy + r;
    v = __fmul_rn(J.scale, v);
    *y = J.add ? __fadd_rn(*y, v) : v;
}

/* ---- GEMV ---- */

/* A GEMV warp's end: each activation row's lane sums reduced across the
 * warp, and lane 0 stores output r of that row. */
__device__ __forceinline__ void gemv_put(const mm_job &J, int r, const float *acc, int rows,
                                         int lane)
{
#pragma unroll
    for (int b = 0; b < CU_GEMV_MAX_ROWS; b++) {
        if (b >= rows)
            break;
        float v = warp_sum(acc[b]);
        if (lane == 0)
            put(J, r, b, v);
    }
}

/* Quantized weights against int8 activations. Lane l takes units l, l+32,
 * ...; per unit and activation row b: isum = dp4a over 16 int8 pairs, then
 * acc_b += (d_w * d_a) * isum (+ m_w * s_a for types with a min, s_a
 * being d_a * sum of the 16 activation values). */
template <uint32_t T>
__global__ void __launch_bounds__(GEMV_WARPS * 32)
    gemv_q(mm_group g, int cols, const int8_t *__restrict__ aq, const float *__restrict__ ad,
           const float *__restrict__ as, int ld, int rows)
{
    int r = blockIdx.x * GEMV_WARPS + (int)(threadIdx.x >> 5), lane = threadIdx.x & 31;
    if (r >= g.total)
        return;
    mm_job J = find_job(g, r);
    int n_units = cols / 16, ldd = ld / 32, lds = ld / 16;
    if (g.tiles) {
        int a0 = expert_tile(g.tiles, J, rows);
        if (a0 < 0)
            return;
        aq += (size_t)a0 * ld;
        ad += (size_t)a0 * ldd;
        as += (size_t)a0 * lds;
    }
    const uint8_t *w = J.w + (size_t)r * J.row_bytes;
    float acc[CU_GEMV_MAX_ROWS];
#pragma unroll
    for (int b = 0; b < CU_GEMV_MAX_ROWS; b++)
        acc[b] = 0.0f;
    for (int u = lane; u < n_units; u += 32) {
        unit16 o;
        qt<T>::unit(w, u, o);
#pragma unroll
        for (int b = 0; b < CU_GEMV_MAX_ROWS; b++) {
            if (b >= rows)
                break;
            int4 a = *(const int4 *)(aq + (size_t)b * ld + 16 * u);
            int s = __dp4a(o.q[0], a.x, 0);
            s = __dp4a(o.q[1], a.y, s);
            s = __dp4a(o.q[2], a.z, s);
            s = __dp4a(o.q[3], a.w, s);
            acc[b] = fmaf(__fmul_rn(o.d, ad[b * ldd + (u >> 1)]), (float)s, acc[b]);
            if (qt<T>::has_min)
                acc[b] = fmaf(o.m, as[b * lds + u], acc[b]);
        }
    }
    gemv_put(J, r, acc, rows, lane);
}

/* Float weights against f32 activations: 8 elements per lane and step
 * when the row length allows 16-byte loads, else one. */
template <uint32_t T>
__global__ void __launch_bounds__(GEMV_WARPS * 32)
    gemv_f(mm_group g, int cols, const float *__restrict__ af, int ld, int rows)
{
    int r = blockIdx.x * GEMV_WARPS + (int)(threadIdx.x >> 5), lane = threadIdx.x & 31;
    if (r >= g.total)
        return;
    mm_job J = find_job(g, r);
    if (g.tiles) {
        int a0 = expert_tile(g.tiles, J, rows);
        if (a0 < 0)
            return;
        af += (size_t)a0 * ld;
    }
    const uint8_t *w = J.w + (size_t)r * J.row_bytes;
    float acc[CU_GEMV_MAX_ROWS];
#pragma unroll
    for (int b = 0; b < CU_GEMV_MAX_ROWS; b++)
        acc[b] = 0.0f;
    if (cols % 8 == 0) {
        for (int i = lane * 8; i < cols; i += 32 * 8) {
            float wv[8];
            ft<T>::at8(w, i, wv);
#pragma unroll
            for (int b = 0; b < CU_GEMV_MAX_ROWS; b++) {
                if (b >= rows)
                    break;
                const float4 *a = (const float4 *)(af + (size_t)b * ld + i);
                float4 a0 = a[0], a1 = a[1];
                float s = acc[b];
                s = fmaf(wv[0], a0.x, s);
                s = fmaf(wv[1], a0.y, s);
                s = fmaf(wv[2], a0.z, s);
                s = fmaf(wv[3], a0.w, s);
                s = fmaf(wv[4], a1.x, s);
                s = fmaf(wv[5], a1.y, s);
                s = fmaf(wv[6], a1.z, s);
                acc[b] = fmaf(wv[7], a1.w, s);
            }
        }
    } else {
        for (int i = lane; i < cols; i += 32) {
            float wv = ft<T>::at(w, i);
#pragma unroll
            for (int b = 0; b < CU_GEMV_MAX_ROWS; b++) {
                if (b >= rows)
                    break;
                acc[b] = fmaf(wv, af[(size_t)b * ld + i], acc[b]);
            }
        }
    }
    gemv_put(J, r, acc, rows, lane);
}

/* ---- tensor cores ---- */

/* Elements [k, k + 16) of weight row `w` as f16 into dst (16-byte aligned):
 * quantized types through their unit decoder, float types element by
 * element with zeros past cols. */
template <uint32_t T>
__device__ __forceinline__ void decode16(const uint8_t *w, int k, int cols, __half *dst)
{
    __align__(16) __half v[16];
    if constexpr (is_float_type(T)) {
#pragma unroll
        for (int i = 0; i < 16; i++)
            v[i] = __float2half_rn(k + i < cols ? ft<T>::at(w, k + i) : 0.0f);
    } else {
        unit16 o;
        qt<T>::unit(w, k / 16, o);
#pragma unroll
        for (int i = 0; i < 16; i++)
            v[i] = __float2half_rn(unit_value<T>(o, i));
    }
    ((uint4 *)dst)[0] = ((const uint4 *)v)[0];
    ((uint4 *)dst)[1] = ((const uint4 *)v)[1];
}

/*
 * One 64 x 64 tile of y (64 weight rows x 64 activation rows) per block of
 * four warps, each warp 32 x 32 as 2 x 2 WMMA 16x16x16 fragments. Per
 * 32-column slice: thread t decodes half a row's slice (row t / 2, 16
 * elements) into A, and copies two 16-byte pieces of activations into B;
 * activation rows past `rows` read as zero. Accumulators go through shared
 * memory so that the stores to y are coalesced along the weight rows.
 */
template <uint32_t T>
__global__ void __launch_bounds__(TC_THREADS)
    mm_tc(mm_group g, int cols, const __half *__restrict__ ah, int ld, int rows)
{
    using namespace nvcuda;
    constexpr int in_bytes = 2 * TC_M * TC_LDS * (int)sizeof(__half);
    constexpr int c_bytes = TC_N * TC_LDC * (int)sizeof(float);
    CU_SHARED(128, unsigned char, smem, [in_bytes > c_bytes ? in_bytes : c_bytes]);
    __half *As = (__half *)smem;     /* (TC_M, TC_LDS) weights, row-major */
    __half *Bs = As + TC_M * TC_LDS; /* (TC_N, TC_LDS) activations: B col-major */
    float *Cs = (float *)smem;       /* (TC_N, TC_LDC): C col-major after the loop */

    int tile = blockIdx.x;
    mm_job J = find_job(g, tile);
    int m0 = tile * TC_M, n0 = blockIdx.y * TC_N;
    if (g.tiles) { /* one tile of an expert's rows: n0 = 0 from its first */
        int a0 = expert_tile(g.tiles, J, rows);
        if (a0 < 0)
            return;
        ah += (size_t)a0 * ld;
        n0 = 0;
    }
    int tid = threadIdx.x, warp = tid >> 5;
    int wm = (warp >> 1) * 32, wn = (warp & 1) * 32;

    wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[2][2];
#pragma unroll
    for (int i = 0; i < 2; i++)
#pragma unroll
        for (int j = 0; j < 2; j++)
            wmma::fill_fragment(acc[i][j], 0.0f);

    int a_row = tid >> 1, a_half = tid & 1;
    bool a_live = m0 + a_row < J.rows;
    const uint8_t *a_src = J.w + (size_t)(a_live ? m0 + a_row : 0) * J.row_bytes;
    int k_end = (cols + TC_K - 1) / TC_K * TC_K;
    for (int k0 = 0; k0 < k_end; k0 += TC_K) {
        __half *a_dst = As + a_row * TC_LDS + 16 * a_half;
        if (a_live) {
            decode16<T>(a_src, k0 + 16 * a_half, cols, a_dst);
        } else {
            ((uint4 *)a_dst)[0] = make_uint4(0, 0, 0, 0);
            ((uint4 *)a_dst)[1] = make_uint4(0, 0, 0, 0);
        }
#pragma unroll
        for (int i = 0; i < 2; i++) {
            int idx = tid + TC_THREADS * i, br = idx >> 2, part = idx & 3;
            uint4 v = make_uint4(0, 0, 0, 0);
            if (n0 + br < rows)
                v = *(const uint4 *)(ah + (size_t)(n0 + br) * ld + k0 + 8 * part);
            *(uint4 *)(Bs + br * TC_LDS + 8 * part) = v;
        }
        __syncthreads();
#pragma unroll
        for (int kk = 0; kk < TC_K; kk += 16) {
            wmma::fragment<wmma::matrix_a, 16, 16, 16, __half, wmma::row_major> fa[2];
            wmma::fragment<wmma::matrix_b, 16, 16, 16, __half, wmma::col_major> fb[2];
#pragma unroll
            for (int i = 0; i < 2; i++)
                wmma::load_matrix_sync(fa[i], As + (wm + 16 * i) * TC_LDS + kk, TC_LDS);
#pragma unroll
            for (int j = 0; j < 2; j++)
                wmma::load_matrix_sync(fb[j], Bs + (wn + 16 * j) * TC_LDS + kk, TC_LDS);
#pragma unroll
            for (int i = 0; i < 2; i++)
#pragma unroll
                for (int j = 0; j < 2; j++)
                    wmma::mma_sync(acc[i][j], fa[i], fb[j], acc[i][j]);
        }
        __syncthreads();
    }
#pragma unroll
    for (int i = 0; i < 2; i++)
#pragma unroll
        for (int j = 0; j < 2; j++)
            wmma::store_matrix_sync(Cs + (wn + 16 * j) * TC_LDC + wm + 16 * i, acc[i][j], TC_LDC,
                                    wmma::mem_col_major);
    __syncthreads();
    for (int idx = tid; idx < TC_M * TC_N; idx += TC_THREADS) {
        int n = idx / TC_M, mm = idx % TC_M;
        if (m0 + mm < J.rows && n0 + n < rows)
            put(J, m0 + mm, n0 + n, Cs[n * TC_LDC + mm]);
    }
}

/* ---- dispatch ---- */

/* rows: activation rows, or in expert mode (g.tiles) the grid rows (tiles). */
template <uint32_t T>
static void launch(cu_state *S, mm_group &g, const cu_mat *w0, int rows, bool gemv)
{
    const cu_act &a = S->act;
    if (gemv) {
        int total = 0;
        for (int j = 0; j < g.n; j++) {
            g.start[j] = total;
            total += g.job[j].rows;
        }
        g.total = total;
        dim3 grid((unsigned)((total + GEMV_WARPS - 1) / GEMV_WARPS), g.tiles ? (unsigned)rows : 1);
        if constexpr (is_float_type(T))
            CU_LAUNCH(gemv_f<T>, grid, GEMV_WARPS * 32, 0, S->stream, g, w0->cols, a.f, a.ld, rows);
        else
            CU_LAUNCH(gemv_q<T>, grid, GEMV_WARPS * 32, 0, S->stream, g, w0->cols, a.q, a.d, a.s,
                      a.ld, rows);
    } else {
        int total = 0;
        for (int j = 0; j < g.n; j++) {
            g.start[j] = total;
            total += (g.job[j].rows + TC_M - 1) / TC_M;
        }
        g.total = total;
        dim3 grid((unsigned)total, g.tiles ? (unsigned)rows : (unsigned)((rows + TC_N - 1) / TC_N));
        CU_LAUNCH(mm_tc<T>, grid, TC_THREADS, 0, S->stream, g, w0->cols, a.h, a.ld, rows);
    }
    CU_CHECK_LAUNCH();
}

static void launch_group(cu_state *S, const cu_mat *const *w, const mm_out *out, int n, int rows,
                         const int32_t *tiles, bool gemv)
{
    mm_group g = {};
    g.n = n;
    g.tiles = tiles;
    for (int j = 0; j < n; j++)
        g.job[j] =
            mm_job{w[j]->w,     out[j].y,           w[j]->row_bytes, w[j]->rows,   out[j].ldy,
                   w[j]->scale, out[j].add ? 1 : 0, w[j]->e_stride,  w[j]->e_scale};
    switch (w[0]->type) {
#define CASE(T)                                                                                    \
    case T:                                                                                        \
        launch<T>(S, g, w[0], rows, gemv);                                                         \
        break;
        CU_WEIGHT_TYPES(CASE)
#undef CASE
    default:
        /* cu_prepare refuses every other type. */
        cu_fatal(cudaErrorInvalidValue, "matmul: weight type without a kernel", __FILE__, __LINE__);
    }
}

/* Matrices of one type share a launch; others are launched one by one. */
static void run(cu_state *S, const cu_mat *const *w, const mm_out *out, int n, int rows,
                const int32_t *tiles, bool gemv)
{
    bool same = true;
    for (int j = 1; j < n; j++)
        same = same && w[j]->type == w[0]->type;
    if (same) {
        launch_group(S, w, out, n, rows, tiles, gemv);
        return;
    }
    for (int j = 0; j < n; j++)
        launch_group(S, &w[j], &out[j], 1, rows, tiles, gemv);
}

void mm_run(cu_state *S, const cu_mat *const *w, const mm_out *out, int n, int rows)
{
    run(S, w, out, n, rows, NULL, rows <= CU_GEMV_MAX_ROWS);
}

void mm_run_experts(cu_state *S, const cu_mat *const *w, const mm_out *out, int n,
                    const int32_t *tiles, int max_tiles, bool gemv)
{
    run(S, w, out, n, max_tiles, tiles, gemv);
}
