/*
 * cudahost/cudahost.h: the CUDA the engine's kernels use, for g++, so that
 * the .cu files of engine/cuda/ run on a CPU in every `make test` (docs/cudahost.md).
 * Only what engine/cuda/ uses is here: threadIdx/blockIdx/blockDim/gridDim,
 * __syncthreads, __shfl_xor_sync, static shared memory (CU_SHARED in
 * common.cuh), __half/__half2, the f32 intrinsics with explicit rounding,
 * __dp4a, f16 WMMA 16x16x16, and the runtime calls of backend.cu (device
 * memory, streams, events). Kernels launch through CU_LAUNCH, which here
 * calls cudahost_launch: every block runs in turn, each of its threads a
 * fiber that switches only at barriers and shuffles. The .cu files are
 * compiled with -fsanitize=kernel-address and outline checks, so every load
 * and store they make calls the harness's checker (runtime.cc), which
 * knows device memory and shared memory. tests/cudahost/include/ holds the
 * cuda_runtime.h, cuda_fp16.h and mma.h that include this file.
 */
#ifndef CUDAHOST_H
#define CUDAHOST_H

#include <functional>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <tuple>
#include <type_traits>
#include <utility>

#define CUDAHOST 1

/* ---- qualifiers ---- */
#define __global__
#define __device__
#define __host__
#define __forceinline__        inline
#define __launch_bounds__(...) /* not modelled */
#define __align__(n)           __attribute__((aligned(n)))

/* ---- vector types ---- */
struct uint3 {
    unsigned x, y, z;
};
struct dim3 {
    unsigned x, y, z;
    constexpr dim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_)
    {
    }
};
struct __align__(8) float2
{
    float x, y;
};
struct __align__(16) float4
{
    float x, y, z, w;
};
struct __align__(16) int4
{
    int x, y, z, w;
};
struct __align__(16) uint4
{
    unsigned x, y, z, w;
};
static inline float2 make_float2(float x, float y)
{
    return float2{x, y};
}
static inline uint4 make_uint4(unsigned x, unsigned y, unsigned z, unsigned w)
{
    return uint4{x, y, z, w};
}

/* ---- half precision: bits only; conversions round to nearest even ---- */
struct __half {
    uint16_t x;
};
struct __align__(4) __half2
{
    __half x, y;
};
uint16_t cudahost_f32_to_f16(float f);
float cudahost_f16_to_f32(uint16_t h);
static inline __half __float2half_rn(float f)
{
    return __half{cudahost_f32_to_f16(f)};
}
static inline float __half2float(__half h)
{
    return cudahost_f16_to_f32(h.x);
}
static inline __half __ushort_as_half(unsigned short u)
{
    return __half{u};
}
static inline __half2 __floats2half2_rn(float a, float b)
{
    return __half2{__float2half_rn(a), __float2half_rn(b)};
}
static inline float2 __half22float2(__half2 h)
{
    return float2{__half2float(h.x), __half2float(h.y)};
}

/* ---- arithmetic intrinsics (the harness is built with -ffp-contract=off,
 * so a * b + c is two roundings, as __fmul_rn then __fadd_rn) ---- */
static inline float __fmul_rn(float a, float b)
{
    return a * b;
}
static inline float __fadd_rn(float a, float b)
{
    return a + b;
}
static inline float __fsub_rn(float a, float b)
{
    return a - b;
}
static inline float __fdiv_rn(float a, float b)
{
    return a / b;
}
static inline float __fsqrt_rn(float a)
{
    return sqrtf(a);
}
static inline int __float2int_rn(float a)
{
    return (int)nearbyintf(a);
}
static inline int __dp4a(int a, int b, int c)
{
    for (int i = 0; i < 32; i += 8)
        c += (int)(int8_t)(a >> i) * (int)(int8_t)(b >> i);
    return c;
}
static inline int min(int a, int b)
{
    return a < b ? a : b;
}

/* ---- execution model ---- */
namespace cudahost
{
struct thread_ctx {
    uint3 idx; /* threadIdx */
};
extern thread_ctx *cur;          /* the running thread */
extern uint3 block_idx;          /* blockIdx of the running block */
extern dim3 block_dim, grid_dim; /* of the running launch */

void syncthreads(const char *file, int line);
/* Lockstep exchange among the lanes of mask: each lane gives v and gets
 * the value of lane (lane ^ xor_mask). */
uint64_t shfl_xor(unsigned mask, uint64_t v, int xor_mask, const char *file, int line);

/* Static shared memory: one site per declaration (per template instance);
 * returns the site's storage in the running block's shared arena. */
struct shared_site {
    uint64_t block; /* block serial the offset is for */
    size_t off;
};
void *shared_at(shared_site *s, size_t bytes, size_t align, const char *name);

/* Run body(block, thread) for every thread of every block of a launch on
 * stream s (cudahost_launch below packs the kernel's arguments). */
int launch(const char *name, dim3 grid, dim3 block, size_t shmem, void *stream,
           std::function<void()> body);

/* The checker's hook, for the harness's own device-side code (WMMA). */
void access(const void *p, size_t n, bool write);
} // namespace cudahost

#define threadIdx                   (cudahost::cur->idx)
#define blockIdx                    (cudahost::block_idx)
#define blockDim                    (cudahost::block_dim)
#define gridDim                     (cudahost::grid_dim)
#define __syncthreads()             cudahost::syncthreads(__FILE__, __LINE__)
#define __shfl_xor_sync(mask, v, o) cudahost_shfl_xor((mask), (v), (o), __FILE__, __LINE__)

template <typename T>
static inline T cudahost_shfl_xor(unsigned mask, T v, int o, const char *file, int line)
{
    static_assert(sizeof(T) <= 8 && std::is_trivially_copyable<T>::value, "shuffle of 8 bytes");
    uint64_t u = 0;
    memcpy(&u, &v, sizeof(T));
    u = cudahost::shfl_xor(mask, u, o, file, line);
    memcpy(&v, &u, sizeof(T));
    return v;
}

/* CU_SHARED(align, T, name, dims) (common.cuh) declares shared storage. */
#define CUDAHOST_SHARED(al, T, name, dims)                                                         \
    static cudahost::shared_site name##_site_;                                                     \
    T(&name)                                                                                       \
    dims = *reinterpret_cast<T(*) dims>(                                                           \
        cudahost::shared_at(&name##_site_, sizeof(T dims), (al) > 16 ? (al) : 16, #name))

/* CU_LAUNCH(kernel, grid, block, shmem, stream, args...) (common.cuh). */
template <typename... P, typename... A>
static inline void cudahost_launch(const char *name, void (*k)(P...), dim3 grid, dim3 block,
                                   size_t shmem, void *stream, A &&...args)
{
    std::tuple<std::decay_t<P>...> t(std::forward<A>(args)...);
    cudahost::launch(name, grid, block, shmem, stream, [k, t]() { std::apply(k, t); });
}

/* ---- WMMA: f16 inputs, f32 accumulators, 16x16x16. Each lane holds the
 * whole operand matrices (loads are warp-uniform), but computes and stores
 * only its share of the accumulator: elements lane, lane + 32, ... of the
 * row-major 16x16 (the rest hold NaN), as the hardware spreads it. ---- */
namespace nvcuda
{
namespace wmma
{
struct matrix_a {
};
struct matrix_b {
};
struct accumulator {
};
struct row_major {
};
struct col_major {
};
enum layout_t { mem_row_major, mem_col_major };
template <typename Use, int M, int N, int K, typename T, typename Layout = void> struct fragment {
    static_assert(M == 16 && N == 16 && K == 16, "the harness models 16x16x16 only");
    float v[16][16]; /* [row][col] of the logical matrix, as floats */
};
using frag_a = fragment<matrix_a, 16, 16, 16, __half, row_major>;
using frag_b = fragment<matrix_b, 16, 16, 16, __half, col_major>;
using frag_c = fragment<accumulator, 16, 16, 16, float, void>;
void fill_fragment(frag_c &c, float v);
void load_matrix_sync(frag_a &a, const __half *p, unsigned ldm);
void load_matrix_sync(frag_b &b, const __half *p, unsigned ldm);
void mma_sync(frag_c &d, const frag_a &a, const frag_b &b, const frag_c &c);
void store_matrix_sync(float *p, const frag_c &c, unsigned ldm, layout_t layout);
} // namespace wmma
} // namespace nvcuda

/* ---- runtime API (host memory standing in for the device's) ---- */
enum cudaError_t {
    cudaSuccess = 0,
    cudaErrorInvalidValue = 1,
    cudaErrorMemoryAllocation = 2,
    cudaErrorInvalidConfiguration = 9,
    cudaErrorInvalidDevicePointer = 17,
    cudaErrorInsufficientDriver = 35,
    cudaErrorNoDevice = 100,
    cudaErrorInvalidResourceHandle = 400,
    cudaErrorLaunchFailure = 719,
};
enum cudaMemcpyKind {
    cudaMemcpyHostToHost = 0,
    cudaMemcpyHostToDevice = 1,
    cudaMemcpyDeviceToHost = 2,
    cudaMemcpyDeviceToDevice = 3,
};
typedef struct cudahost_stream *cudaStream_t;
typedef struct cudahost_event *cudaEvent_t;
#define cudaStreamNonBlocking 1u
#define cudaHostAllocDefault  0u
struct cudaDeviceProp {
    char name[256];
    int major, minor, multiProcessorCount;
    size_t totalGlobalMem;
};

const char *cudaGetErrorString(cudaError_t e);
const char *cudaGetErrorName(cudaError_t e);
cudaError_t cudaGetLastError(void);
cudaError_t cudaGetDeviceCount(int *n);
cudaError_t cudaDriverGetVersion(int *v);
cudaError_t cudaSetDevice(int dev);
cudaError_t cudaGetDeviceProperties(cudaDeviceProp *p, int dev);
cudaError_t cudaDeviceSynchronize(void);
cudaError_t cudaMemGetInfo(size_t *free_b, size_t *total_b);
cudaError_t cudaMalloc(void **p, size_t bytes);
cudaError_t cudaFree(void *p);
cudaError_t cudaHostAlloc(void **p, size_t bytes, unsigned flags);
cudaError_t cudaFreeHost(void *p);
cudaError_t cudaMemset(void *p, int v, size_t bytes);
cudaError_t cudaMemcpy(void *dst, const void *src, size_t bytes, cudaMemcpyKind kind);
cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t bytes, cudaMemcpyKind kind,
                            cudaStream_t s);
cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned flags);
cudaError_t cudaStreamSynchronize(cudaStream_t s);
cudaError_t cudaStreamDestroy(cudaStream_t s);
cudaError_t cudaEventCreate(cudaEvent_t *e);
cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s);
cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t a, cudaEvent_t b);
cudaError_t cudaEventDestroy(cudaEvent_t e);

/* For the harness's own tests (memcheck.cu): findings so far, and whether
 * a finding exits the process (the default) or is only counted. */
long cudahost_findings(void);
void cudahost_set_fatal(int fatal);
/* The text of the last finding ("" when none). */
const char *cudahost_last_finding(void);

#endif
