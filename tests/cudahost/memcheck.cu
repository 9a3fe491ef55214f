/*
 * Tests of the CUDA host harness itself (tests/cudahost/, docs/cudahost.md):
 * its execution model (barriers, shuffles with masks, shared memory per
 * block, WMMA, f16 conversions against the engine's) and its memory checks,
 * each shown to fire on a planted bug (out-of-bounds read, missing barrier,
 * write-write race, divergent barrier, read of never-written memory, use
 * after free, host dereference of device memory) and to stay quiet on the
 * correct kernel. Compiled as the engine's .cu files are (g++, instrumented).
 */
#include <stdio.h>
#include <stdlib.h>

#include "cuda/common.cuh"

extern "C" {
#include "test.h"

#include "format/quant.h"
}

/* Findings made by fn (the harness set to count rather than exit), and the
 * text of the last one in *msg. */
template <typename F> static long findings_of(F fn, const char **msg)
{
    cudahost_set_fatal(0);
    long before = cudahost_findings();
    fn();
    cudahost_set_fatal(1);
    *msg = cudahost_last_finding();
    return cudahost_findings() - before;
}

static float *dev_floats(int n, bool fill)
{
    float *d = NULL;
    if (cudaMalloc((void **)&d, sizeof(float) * (size_t)n) != cudaSuccess)
        return NULL;
    if (fill) {
        float *h = (float *)calloc((size_t)n, sizeof(float)); /* allow: host test buffer, C++ TU */
        for (int i = 0; i < n; i++)
            h[i] = (float)i;
        cudaMemcpy(d, h, sizeof(float) * (size_t)n, cudaMemcpyHostToDevice);
        free(h);
    }
    return d;
}

/* ---- kernels, each with a switch that plants its bug ---- */

/* out[i] = in[i + off] for i < n. */
__global__ void copy_kernel(const float *in, float *out, int n, int off)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        out[i] = in[i + off];
}

/* Rotate a block's values through shared memory: out[t] = in[(t + 1) % n].
 * barrier == 0 leaves out the __syncthreads between write and read. */
__global__ void rotate_kernel(const float *in, float *out, int barrier)
{
    CU_SHARED(4, float, s, [256]);
    int t = threadIdx.x, n = blockDim.x, base = blockIdx.x * n;
    s[t] = in[base + t];
    if (barrier)
        __syncthreads();
    out[base + t] = s[(t + 1) % n];
}

/* Every thread writes s[0] (race), or thread 0 alone (fine). */
__global__ void ww_kernel(float *out, int all)
{
    CU_SHARED(4, float, s, [1]);
    if (all || threadIdx.x == 0)
        s[0] = (float)threadIdx.x;
    __syncthreads();
    out[threadIdx.x] = s[0];
}

/* A barrier that only threads below `upto` reach. */
__global__ void diverge_kernel(float *out, int upto)
{
    if ((int)threadIdx.x < upto)
        __syncthreads();
    out[threadIdx.x] = 1.0f;
}

/* Warp sums (common.cuh's warp_sum) and a 16-lane shuffle with its mask. */
__global__ void shfl_kernel(const float *in, float *out, float *half_out)
{
    int t = threadIdx.x;
    out[t] = warp_sum(in[t]);
    if ((t & 31) < 16) {
        float v = in[t];
        for (int o = 8; o > 0; o >>= 1)
            v += __shfl_xor_sync(0x0000ffffu, v, o);
        half_out[t] = v;
    }
}

/* A full-warp shuffle that lanes >= 16 never join. */
__global__ void shfl_missing_kernel(float *out)
{
    if ((threadIdx.x & 31) < 16)
        out[threadIdx.x] = __shfl_xor_sync(0xffffffffu, 1.0f, 1);
}

/* C (16 x 16, row-major) = A (row-major) x B (col-major), f16 in, f32 out. */
__global__ void wmma_kernel(const __half *a, const __half *b, float *c)
{
    using namespace nvcuda;
    wmma::fragment<wmma::matrix_a, 16, 16, 16, __half, wmma::row_major> fa;
    wmma::fragment<wmma::matrix_b, 16, 16, 16, __half, wmma::col_major> fb;
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
    wmma::fill_fragment(acc, 1.0f);
    wmma::load_matrix_sync(fa, a, 16);
    wmma::load_matrix_sync(fb, b, 16);
    wmma::mma_sync(acc, fa, fb, acc);
    wmma::store_matrix_sync(c, acc, 16, wmma::mem_row_major);
}

/* Every block adds its index to out[0] (a race between blocks), or writes
 * its own element. */
__global__ void blocks_kernel(float *out, int shared_word)
{
    if (threadIdx.x == 0) {
        int i = shared_word ? 0 : blockIdx.x;
        out[i] = (shared_word ? out[i] : 0.0f) + (float)blockIdx.x;
    }
}

/* ---- execution model ---- */

TEST(shared_memory_is_per_block)
{
    const int n = 64, blocks = 3;
    float *in = dev_floats(n * blocks, true), *out = dev_floats(n * blocks, false);
    CU_LAUNCH(rotate_kernel, blocks, n, 0, (cudaStream_t)NULL, in, out, 1);
    CHECK_INT(cudaGetLastError(), cudaSuccess);
    float h[n * blocks];
    CHECK_INT(cudaMemcpy(h, out, sizeof(h), cudaMemcpyDeviceToHost), cudaSuccess);
    for (int b = 0; b < blocks; b++)
        for (int t = 0; t < n; t++)
            CHECK_NEAR(h[b * n + t], b * n + (t + 1) % n, 0);
    cudaFree(in);
    cudaFree(out);
}

TEST(shuffles_exchange_within_the_mask)
{
    const int n = 64;
    float *in = dev_floats(n, true), *out = dev_floats(n, false), *half = dev_floats(n, false);
    CU_LAUNCH(shfl_kernel, 1, n, 0, (cudaStream_t)NULL, in, out, half);
    float h[n], hh[n];
    cudaMemcpy(h, out, sizeof(h), cudaMemcpyDeviceToHost);
    for (int t = 0; t < n; t++) {
        int w = t / 32 * 32;
        CHECK_NEAR(h[t], 32 * w + 31 * 32 / 2, 0); /* sum of w .. w + 31 */
    }
    /* Lanes 16..31 wrote nothing: reading those is a finding, so copy 16. */
    for (int w = 0; w < n; w += 32) {
        cudaMemcpy(hh + w, half + w, 16 * sizeof(float), cudaMemcpyDeviceToHost);
        for (int l = 0; l < 16; l++)
            CHECK_NEAR(hh[w + l], 16 * w + 15 * 16 / 2, 0);
    }
    cudaFree(in);
    cudaFree(out);
    cudaFree(half);
}

TEST(wmma_matches_a_reference)
{
    __half ha[256], hb[256];
    float fa[256], fb[256];
    uint64_t s = 12345;
    for (int i = 0; i < 256; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        fa[i] = (float)((int)(s >> 40) % 200 - 100) / 64.0f;
        fb[i] = (float)((int)(s >> 20 & 0xFFFF) % 200 - 100) / 32.0f;
        ha[i] = __float2half_rn(fa[i]);
        hb[i] = __float2half_rn(fb[i]);
    }
    __half *da, *db;
    float *dc = dev_floats(256, false);
    cudaMalloc((void **)&da, sizeof(ha));
    cudaMalloc((void **)&db, sizeof(hb));
    cudaMemcpy(da, ha, sizeof(ha), cudaMemcpyHostToDevice);
    cudaMemcpy(db, hb, sizeof(hb), cudaMemcpyHostToDevice);
    CU_LAUNCH(wmma_kernel, 1, 32, 0, (cudaStream_t)NULL, da, db, dc);
    float c[256];
    CHECK_INT(cudaMemcpy(c, dc, sizeof(c), cudaMemcpyDeviceToHost), cudaSuccess);
    for (int i = 0; i < 16; i++)
        for (int j = 0; j < 16; j++) {
            double want = 1.0;
            for (int k = 0; k < 16; k++)
                want += (double)fa[i * 16 + k] * fb[j * 16 + k]; /* B col-major */
            CHECK_NEAR(c[i * 16 + j], want, 1e-3);
        }
    cudaFree(da);
    cudaFree(db);
    cudaFree(dc);
}

TEST(f16_conversions_match_the_engine)
{
    uint64_t s = 99;
    for (uint32_t h = 0; h < 0x10000; h++) {
        float a = cudahost_f16_to_f32((uint16_t)h), b = q_f16_to_f32((uint16_t)h);
        CHECK_MSG(memcmp(&a, &b, 4) == 0 || (isnan(a) && isnan(b)), "f16 %04x: %g vs %g", h, a, b);
    }
    int bad = 0;
    for (int i = 0; i < 2000000; i++) {
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        uint32_t u = (uint32_t)s;
        if (i % 4 == 0)
            u = (u & 0x807FFFFFu) | (uint32_t)(100 + i % 45) << 23; /* near the f16 range */
        float f;
        memcpy(&f, &u, 4);
        if (isnan(f))
            continue;
        bad += cudahost_f32_to_f16(f) != q_f32_to_f16(f);
    }
    CHECK_INT(bad, 0);
}

TEST(launch_config_errors)
{
    float *out = dev_floats(4, false);
    CU_LAUNCH(copy_kernel, 1, 2048, 0, (cudaStream_t)NULL, out, out, 0, 0);
    CHECK_INT(cudaGetLastError(), cudaErrorInvalidConfiguration);
    CHECK_INT(cudaGetLastError(), cudaSuccess);
    cudaFree(out);
}

/* ---- memory checks: planted bugs ---- */

TEST(planted_out_of_bounds_read)
{
    const int n = 100;
    float *in = dev_floats(n, true), *out = dev_floats(n, false);
    const char *msg;
    /* in[i + 1] for i < 100 reads in[100], one past the allocation. */
    long f = findings_of(
        [&] { CU_LAUNCH(copy_kernel, 2, 64, 0, (cudaStream_t)NULL, in, out, n, 1); }, &msg);
    CHECK_MSG(f >= 1 && strstr(msg, "out-of-bounds read") && strstr(msg, "copy_kernel"), "%ld: %s",
              f, msg);
    /* The same kernel in bounds is clean. */
    f = findings_of([&] { CU_LAUNCH(copy_kernel, 2, 64, 0, (cudaStream_t)NULL, in, out, n, 0); },
                    &msg);
    CHECK_INT(f, 0);
    cudaFree(in);
    cudaFree(out);
}

TEST(planted_missing_barrier)
{
    const int n = 64;
    float *in = dev_floats(n, true), *out = dev_floats(n, false);
    const char *msg;
    long f = findings_of([&] { CU_LAUNCH(rotate_kernel, 1, n, 0, (cudaStream_t)NULL, in, out, 0); },
                         &msg);
    CHECK_MSG(f >= 1 && (strstr(msg, "never-written shared") || strstr(msg, "race")), "%ld: %s", f,
              msg);
    f = findings_of([&] { CU_LAUNCH(rotate_kernel, 1, n, 0, (cudaStream_t)NULL, in, out, 1); },
                    &msg);
    CHECK_INT(f, 0);
    cudaFree(in);
    cudaFree(out);
}

TEST(planted_write_write_race)
{
    float *out = dev_floats(64, false);
    const char *msg;
    long f = findings_of([&] { CU_LAUNCH(ww_kernel, 1, 64, 0, (cudaStream_t)NULL, out, 1); }, &msg);
    CHECK_MSG(f >= 1 && strstr(msg, "race") && strstr(msg, "write"), "%ld: %s", f, msg);
    f = findings_of([&] { CU_LAUNCH(ww_kernel, 1, 64, 0, (cudaStream_t)NULL, out, 0); }, &msg);
    CHECK_INT(f, 0);
    cudaFree(out);
}

TEST(planted_divergent_barrier)
{
    float *out = dev_floats(64, false);
    const char *msg;
    long f = findings_of([&] { CU_LAUNCH(diverge_kernel, 1, 64, 0, (cudaStream_t)NULL, out, 16); },
                         &msg);
    CHECK_MSG(f >= 1 && strstr(msg, "divergent __syncthreads"), "%ld: %s", f, msg);
    f = findings_of([&] { CU_LAUNCH(diverge_kernel, 1, 64, 0, (cudaStream_t)NULL, out, 64); },
                    &msg);
    CHECK_INT(f, 0);
    cudaFree(out);
}

TEST(planted_shuffle_without_its_lanes)
{
    float *out = dev_floats(32, false);
    const char *msg;
    long f = findings_of([&] { CU_LAUNCH(shfl_missing_kernel, 1, 32, 0, (cudaStream_t)NULL, out); },
                         &msg);
    CHECK_MSG(f >= 1 && strstr(msg, "__shfl_xor_sync"), "%ld: %s", f, msg);
    cudaFree(out);
}

TEST(planted_race_between_blocks)
{
    float *out = dev_floats(4, true);
    const char *msg;
    long f =
        findings_of([&] { CU_LAUNCH(blocks_kernel, 4, 32, 0, (cudaStream_t)NULL, out, 1); }, &msg);
    CHECK_MSG(f >= 1 && strstr(msg, "race between blocks") && strstr(msg, "block 0 of the same"),
              "%ld: %s", f, msg);
    f = findings_of([&] { CU_LAUNCH(blocks_kernel, 4, 32, 0, (cudaStream_t)NULL, out, 0); }, &msg);
    CHECK_INT(f, 0);
    /* The next launch may read what any block of the last one wrote. */
    f = findings_of([&] { CU_LAUNCH(blocks_kernel, 1, 32, 0, (cudaStream_t)NULL, out, 1); }, &msg);
    CHECK_INT(f, 0);
    cudaFree(out);
}

TEST(planted_uninitialised_device_read)
{
    float *in = dev_floats(64, false), *out = dev_floats(64, false);
    const char *msg;
    long f = findings_of(
        [&] { CU_LAUNCH(copy_kernel, 1, 64, 0, (cudaStream_t)NULL, in, out, 64, 0); }, &msg);
    CHECK_MSG(f >= 1 && strstr(msg, "never-written device memory"), "%ld: %s", f, msg);
    cudaFree(in);
    cudaFree(out);
}

TEST(planted_use_after_free_and_host_dereference)
{
    float *in = dev_floats(64, true), *out = dev_floats(64, false);
    const char *msg;
    long f = findings_of(
        [&] {
            volatile float x = in[3];
            (void)x;
        },
        &msg);
    CHECK_MSG(f >= 1 && strstr(msg, "host code reads device memory"), "%ld: %s", f, msg);
    cudaFree(in);
    f = findings_of([&] { CU_LAUNCH(copy_kernel, 1, 64, 0, (cudaStream_t)NULL, in, out, 64, 0); },
                    &msg);
    CHECK_MSG(f >= 1 && strstr(msg, "out-of-bounds read") && strstr(msg, "freed"), "%ld: %s", f,
              msg);
    float h[65];
    f = findings_of([&] { cudaMemcpy(h, out, sizeof(h), cudaMemcpyDeviceToHost); }, &msg);
    CHECK_MSG(f >= 1 && strstr(msg, "out of bounds"), "%ld: %s", f, msg);
    cudaFree(out);
}

TEST_MAIN()
