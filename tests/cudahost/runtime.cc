/*
 * cudahost/runtime: the harness's execution model and memory checker
 * (docs/cudahost.md). Compiled without instrumentation.
 *
 * Execution: a launch runs at once (every stream is the one in-order
 * queue; Async calls complete before they return), block after block in
 * x, y, z order; the threads of a block are fibers on this OS thread, each
 * run until it waits at a barrier or a shuffle or ends. A barrier opens
 * when every thread of the block waits at the same __syncthreads; a
 * shuffle completes when every lane of its mask has arrived.
 *
 * Memory: device allocations come from one reserved region, a guard gap
 * between any two, with a shadow byte per byte (0 no access, 1 allocated,
 * 2 written). Shared memory is one arena per block with a shadow per byte
 * of (epoch, thread) of the last write and read; the epoch advances at each
 * block start and barrier. Findings: an access outside an allocation
 * (guard, freed, never allocated), a read of never-written device or
 * shared memory, two threads touching a shared byte between the same
 * barriers where one writes, a barrier not reached by every thread (or
 * reached at different lines), a shuffle some lane of its mask never
 * joins, and host code dereferencing device memory. Each prints one line
 * naming kernel, block and thread; the first ends the process with status
 * 86 unless a test set cudahost_set_fatal(0).
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <time.h>

#include <vector>

#include "cudahost.h"

#if !defined(__x86_64__)
#include <ucontext.h>
#endif

#define FINDING_EXIT 86
#define MAX_THREADS  1024
#define STACK_BYTES  (256u << 10)
#define DEV_RESERVE  ((size_t)16 << 30) /* virtual; also what cudaMemGetInfo reports */
#define DEV_GAP      4096               /* guard between allocations */
#define SHARED_BYTES (48u << 10)        /* the static shared memory limit */
#define TID_MANY     0xFFFFu

namespace cudahost
{
thread_ctx *cur;
uint3 block_idx;
dim3 block_dim, grid_dim;
} // namespace cudahost

using namespace cudahost;

/* ---- findings ---- */

static long n_findings;
static int fatal = 1;
static char last_finding[512];
static const char *kernel_name; /* the running launch, NULL on the host */

static void finding(const char *fmt, ...)
{
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    if (kernel_name)
        snprintf(last_finding, sizeof(last_finding),
                 "cudahost: %s in kernel %s, block (%u,%u,%u) thread (%u,%u,%u)", msg, kernel_name,
                 block_idx.x, block_idx.y, block_idx.z, cur ? cur->idx.x : 0, cur ? cur->idx.y : 0,
                 cur ? cur->idx.z : 0);
    else
        snprintf(last_finding, sizeof(last_finding), "cudahost: %s in host code", msg);
    if (n_findings++ < 20)
        fprintf(stderr, "%s\n", last_finding);
    if (fatal)
        exit(FINDING_EXIT);
}

long cudahost_findings(void)
{
    return n_findings;
}
void cudahost_set_fatal(int f)
{
    fatal = f;
}
const char *cudahost_last_finding(void)
{
    return last_finding;
}

/* ---- half precision ---- */

uint16_t cudahost_f32_to_f16(float f)
{
    uint32_t x;
    memcpy(&x, &f, 4);
    uint32_t sign = x >> 16 & 0x8000u, a = x & 0x7FFFFFFFu;
    if (a > 0x7F800000u)
        return (uint16_t)(sign | 0x7E00u | (a >> 13 & 0x3FFu)); /* NaN stays NaN */
    if (a >= 0x477FF000u)                                       /* rounds past 65504 */
        return (uint16_t)(sign | 0x7C00u);
    if (a < 0x38800000u) { /* f16 subnormal or zero: units of 2^-24 */
        if (a < 0x33000000u)
            return (uint16_t)sign; /* below half of the smallest subnormal */
        uint32_t m = (a & 0x7FFFFFu) | 0x800000u;
        int shift = 126 - (int)(a >> 23); /* value = m 2^(e - 150) = (m >> shift) 2^-24 */
        uint32_t q = m >> shift, rem = m & ((1u << shift) - 1), halfway = 1u << (shift - 1);
        if (rem > halfway || (rem == halfway && (q & 1)))
            q++;
        return (uint16_t)(sign | q);
    }
    uint32_t r = a - 0x38000000u; /* rebias 127 -> 15 */
    uint32_t q = r >> 13, rem = r & 0x1FFFu;
    if (rem > 0x1000u || (rem == 0x1000u && (q & 1)))
        q++;
    return (uint16_t)(sign | q);
}

static float f16_calc(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = h >> 10 & 0x1F, m = h & 0x3FFu, x;
    if (e == 0x1F)
        x = sign | 0x7F800000u | m << 13;
    else if (e != 0)
        x = sign | (e + 112) << 23 | m << 13;
    else if (m == 0)
        x = sign;
    else {
        int k = 0;
        while (!(m & 0x400u)) {
            m <<= 1;
            k++;
        }
        x = sign | (uint32_t)(113 - k) << 23 | (m & 0x3FFu) << 13;
    }
    float f;
    memcpy(&f, &x, 4);
    return f;
}

static float f16_table[65536];
static bool f16_ready = [] {
    for (uint32_t h = 0; h < 65536; h++)
        f16_table[h] = f16_calc((uint16_t)h);
    return true;
}();
float cudahost_f16_to_f32(uint16_t h)
{
    return f16_table[h];
}

/* ---- device memory and its shadow ---- */

static uint8_t *dev_base, *dev_shadow;
/* Per 4-byte word of device memory: the serial of the block that last
 * wrote it from a kernel. Blocks of one launch have serials from
 * launch_first on; block_serial is the running block's. */
static uint64_t *dev_writer;
static uint64_t launch_first, block_serial;
static size_t dev_used;
struct dev_alloc {
    size_t off, bytes;
    bool live;
};
static std::vector<dev_alloc> allocs;

static void dev_init(void)
{
    if (dev_base)
        return;
    int fl = MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE;
    dev_base = (uint8_t *)mmap(NULL, DEV_RESERVE, PROT_READ | PROT_WRITE, fl, -1, 0);
    dev_shadow = (uint8_t *)mmap(NULL, DEV_RESERVE, PROT_READ | PROT_WRITE, fl, -1, 0);
    dev_writer = (uint64_t *)mmap(NULL, DEV_RESERVE / 4 * sizeof(uint64_t), PROT_READ | PROT_WRITE,
                                  fl, -1, 0);
    if (dev_base == MAP_FAILED || dev_shadow == MAP_FAILED || dev_writer == MAP_FAILED) {
        fprintf(stderr, "cudahost: cannot reserve %zu bytes of address space\n", DEV_RESERVE);
        exit(FINDING_EXIT);
    }
    dev_used = DEV_GAP;
}

static bool is_dev(const void *p)
{
    return dev_base && (const uint8_t *)p >= dev_base &&
           (const uint8_t *)p < dev_base + DEV_RESERVE;
}

static const dev_alloc *alloc_of(size_t off)
{
    for (const dev_alloc &a : allocs)
        if (off >= a.off && off < a.off + a.bytes)
            return &a;
    return NULL;
}

/* Describe device offset off for a finding: "allocation+N (of S bytes)" or
 * where it lies relative to the nearest allocation. */
static void where(size_t off, char *buf, size_t size)
{
    const dev_alloc *best = NULL;
    for (const dev_alloc &a : allocs)
        if (a.off <= off + DEV_GAP && (!best || a.off > best->off))
            best = &a;
    if (best && off >= best->off + best->bytes)
        snprintf(buf, size, "%zu bytes past the end of %s allocation of %zu bytes",
                 off - (best->off + best->bytes) + 1, best->live ? "an" : "a freed", best->bytes);
    else if (best && off >= best->off)
        snprintf(buf, size, "offset %zu of %s allocation of %zu bytes", off - best->off,
                 best->live ? "an" : "a freed", best->bytes);
    else
        snprintf(buf, size, "%zu bytes before an allocation", best ? best->off - off : off);
}

static void dev_check(size_t off, size_t n, bool write)
{
    uint8_t *sh = dev_shadow + off;
    for (size_t i = 0; i < n; i++) {
        if (sh[i] == 0) {
            char w[160];
            where(off + i, w, sizeof(w));
            finding("out-of-bounds %s of %zu bytes at device %s", write ? "write" : "read", n, w);
            return;
        }
        if (!write && sh[i] == 1) {
            char w[160];
            where(off + i, w, sizeof(w));
            finding("read of never-written device memory (%zu bytes at %s)", n, w);
            return;
        }
    }
    if (write)
        memset(sh, 2, n);
    if (!kernel_name)
        return;
    /* Blocks of one launch run in no fixed order on a GPU: a word one
     * block wrote may not be read or written by another. */
    for (size_t w = off / 4; w <= (off + n - 1) / 4; w++) {
        uint64_t b = dev_writer[w];
        if (b >= launch_first && b != block_serial) {
            char where_[160];
            where(w * 4, where_, sizeof(where_));
            return finding("race between blocks: this block %s device memory (%s) that block "
                           "%llu of the same launch wrote",
                           write ? "writes" : "reads", where_,
                           (unsigned long long)(b - launch_first));
        }
        if (write)
            dev_writer[w] = block_serial;
    }
}

cudaError_t cudaMalloc(void **p, size_t bytes)
{
    dev_init();
    size_t need = (bytes + 255) / 256 * 256 + DEV_GAP;
    if (bytes == 0 || dev_used + need > DEV_RESERVE) {
        *p = NULL;
        return bytes == 0 ? cudaErrorInvalidValue : cudaErrorMemoryAllocation;
    }
    allocs.push_back(dev_alloc{dev_used, bytes, true});
    memset(dev_shadow + dev_used, 1, bytes);
    *p = dev_base + dev_used;
    dev_used += need;
    return cudaSuccess;
}

cudaError_t cudaFree(void *p)
{
    if (!p)
        return cudaSuccess;
    if (!is_dev(p))
        return cudaErrorInvalidDevicePointer;
    size_t off = (size_t)((uint8_t *)p - dev_base);
    for (dev_alloc &a : allocs)
        if (a.off == off && a.live) {
            a.live = false;
            memset(dev_shadow + a.off, 0, a.bytes); /* use after free is out of bounds */
            madvise(dev_base + a.off, a.bytes / 4096 * 4096, MADV_DONTNEED);
            return cudaSuccess;
        }
    return cudaErrorInvalidDevicePointer;
}

cudaError_t cudaMemGetInfo(size_t *free_b, size_t *total_b)
{
    dev_init();
    *total_b = DEV_RESERVE;
    *free_b = DEV_RESERVE - dev_used;
    return cudaSuccess;
}

cudaError_t cudaHostAlloc(void **p, size_t bytes, unsigned flags)
{
    *p = calloc(1, bytes ? bytes : 1);
    return *p ? cudaSuccess : cudaErrorMemoryAllocation;
}
cudaError_t cudaFreeHost(void *p)
{
    free(p);
    return cudaSuccess;
}

/* A host-side copy touching device memory: bounds, and for a device
 * source, that it was written. */
static cudaError_t copy_check(const void *p, size_t n, bool write)
{
    if (!is_dev(p))
        return cudaSuccess;
    size_t off = (size_t)((const uint8_t *)p - dev_base);
    const dev_alloc *a = alloc_of(off);
    if (!a || !a->live || off + n > a->off + a->bytes) {
        char w[160];
        where(a && off + n > a->off + a->bytes ? a->off + a->bytes : off, w, sizeof(w));
        finding("cudaMemcpy/cudaMemset of %zu bytes out of bounds (%s)", n, w);
        return cudaErrorInvalidValue;
    }
    dev_check(off, n, write);
    return cudaSuccess;
}

cudaError_t cudaMemset(void *p, int v, size_t bytes)
{
    if (!is_dev(p))
        return cudaErrorInvalidValue;
    if (copy_check(p, bytes, true) != cudaSuccess)
        return cudaErrorInvalidValue;
    memset(p, v, bytes);
    return cudaSuccess;
}

cudaError_t cudaMemcpy(void *dst, const void *src, size_t bytes, cudaMemcpyKind kind)
{
    bool dd = kind == cudaMemcpyDeviceToDevice || kind == cudaMemcpyHostToDevice;
    bool sd = kind == cudaMemcpyDeviceToDevice || kind == cudaMemcpyDeviceToHost;
    if (dd != is_dev(dst) || sd != is_dev(src))
        return cudaErrorInvalidValue; /* a pointer on the wrong side of the copy */
    if (copy_check(src, bytes, false) != cudaSuccess || copy_check(dst, bytes, true) != cudaSuccess)
        return cudaErrorInvalidValue;
    memmove(dst, src, bytes);
    return cudaSuccess;
}

cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t bytes, cudaMemcpyKind kind,
                            cudaStream_t s)
{
    return cudaMemcpy(dst, src, bytes, kind);
}

/* ---- shared memory ---- */

struct sh_shadow {
    uint32_t wep, rep; /* epoch of the last write and read */
    uint16_t wtid, rtid;
};
static __attribute__((aligned(256))) uint8_t shared_mem[SHARED_BYTES];
static sh_shadow shared_shadow[SHARED_BYTES / 4]; /* per 4-byte word */
static uint32_t epoch, block_epoch;               /* now, and at the running block's start */
static size_t shared_used;

void *cudahost::shared_at(shared_site *s, size_t bytes, size_t align, const char *name)
{
    if (s->block != block_serial) {
        size_t off = (shared_used + align - 1) / align * align;
        if (off + bytes > SHARED_BYTES) {
            finding("static shared memory over %u bytes (%s)", SHARED_BYTES, name);
            off = 0;
        }
        s->off = off;
        s->block = block_serial;
        shared_used = off + bytes;
    }
    return shared_mem + s->off;
}

static uint16_t my_tid(void)
{
    return (uint16_t)(cur->idx.x + block_dim.x * (cur->idx.y + block_dim.y * cur->idx.z));
}

static void shared_check(size_t off, size_t n, bool write)
{
    uint16_t me = my_tid();
    if (off + n > shared_used)
        return finding("out-of-bounds %s of shared memory (offset %zu, %zu bytes declared)",
                       write ? "write" : "read", off + n - 1, shared_used);
    for (size_t i = off & ~(size_t)3; i < off + n; i += 4) {
        sh_shadow &s = shared_shadow[i / 4];
        if (write) {
            if (s.wep == epoch && s.wtid != me)
                return finding("shared-memory race: threads %u and %u write offset %zu between the "
                               "same barriers",
                               s.wtid, me, i);
            if (s.rep == epoch && s.rtid != me)
                return finding("shared-memory race: thread %u writes offset %zu that thread %s "
                               "read since the last barrier",
                               me, i, s.rtid == TID_MANY ? "(several)" : "another");
            s.wep = epoch;
            s.wtid = me;
        } else {
            if (s.wep < block_epoch)
                return finding("read of never-written shared memory (offset %zu)", i);
            if (s.wep == epoch && s.wtid != me)
                return finding("shared-memory race: thread %u reads offset %zu that thread %u "
                               "wrote since the last barrier",
                               me, i, s.wtid);
            s.rtid = s.rep == epoch && s.rtid != me ? TID_MANY : me;
            s.rep = epoch;
        }
    }
}

/* ---- the checker's entry: every load and store of the .cu files ---- */

void cudahost::access(const void *p, size_t n, bool write)
{
    const uint8_t *b = (const uint8_t *)p;
    if (b >= shared_mem && b < shared_mem + SHARED_BYTES) {
        if (kernel_name)
            shared_check((size_t)(b - shared_mem), n, write);
        return;
    }
    if (!is_dev(b))
        return;
    if (!kernel_name)
        return finding("host code %s device memory at %p", write ? "writes" : "reads", p);
    dev_check((size_t)(b - dev_base), n, write);
}

#define HOOKS(N)                                                                                   \
    extern "C" void __asan_load##N##_noabort(uintptr_t a)                                          \
    {                                                                                              \
        cudahost::access((const void *)a, N, false);                                               \
    }                                                                                              \
    extern "C" void __asan_store##N##_noabort(uintptr_t a)                                         \
    {                                                                                              \
        cudahost::access((const void *)a, N, true);                                                \
    }
HOOKS(1)
HOOKS(2)
HOOKS(4)
HOOKS(8)
HOOKS(16)
extern "C" void __asan_loadN_noabort(uintptr_t a, size_t n)
{
    cudahost::access((const void *)a, n, false);
}
extern "C" void __asan_storeN_noabort(uintptr_t a, size_t n)
{
    cudahost::access((const void *)a, n, true);
}
extern "C" void __asan_handle_no_return(void)
{
}

/* ---- fibers ---- */

enum th_state { TH_READY, TH_BARRIER, TH_SHFL, TH_DONE };
struct fiber {
    thread_ctx ctx;
    th_state state;
    const char *bar_file; /* the barrier it waits at */
    int bar_line;
    uint64_t shfl_val, shfl_out;
    unsigned shfl_mask;
    int shfl_src;
    uint8_t *stack;
#if defined(__x86_64__)
    void *sp;
#else
    ucontext_t uc;
#endif
};
static fiber fibers[MAX_THREADS];
struct warp_state {
    int arrived; /* lanes waiting in the current shuffle */
    unsigned mask;
};
static warp_state warps[MAX_THREADS / 32];
static fiber *running;
static std::function<void()> *body;
static int n_threads;
#if defined(__x86_64__)
static void *sched_sp;

/* Save the callee-saved registers and stack pointer in *save, load to's. */
extern "C" void cudahost_switch(void **save, void *to);
asm(".text\n"
    ".globl cudahost_switch\n"
    ".type cudahost_switch,@function\n"
    "cudahost_switch:\n"
    "  pushq %rbp\n  pushq %rbx\n  pushq %r12\n  pushq %r13\n  pushq %r14\n  pushq %r15\n"
    "  movq %rsp, (%rdi)\n"
    "  movq %rsi, %rsp\n"
    "  popq %r15\n  popq %r14\n  popq %r13\n  popq %r12\n  popq %rbx\n  popq %rbp\n"
    "  ret\n"
    ".size cudahost_switch, .-cudahost_switch\n");
#else
static ucontext_t sched_uc;
#endif

static void to_scheduler(void)
{
    fiber *f = running;
#if defined(__x86_64__)
    cudahost_switch(&f->sp, sched_sp);
#else
    swapcontext(&f->uc, &sched_uc);
#endif
}

static void fiber_main(void)
{
    (*body)();
    running->state = TH_DONE;
    to_scheduler();
    abort(); /* never resumed */
}

static void fiber_start(fiber *f)
{
    if (!f->stack) {
        uint8_t *m = (uint8_t *)mmap(NULL, STACK_BYTES + 4096, PROT_READ | PROT_WRITE,
                                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (m == MAP_FAILED) {
            fprintf(stderr, "cudahost: cannot map a fiber stack\n");
            exit(FINDING_EXIT);
        }
        mprotect(m, 4096, PROT_NONE); /* overflow faults */
        f->stack = m + 4096;
    }
#if defined(__x86_64__)
    uintptr_t top = ((uintptr_t)f->stack + STACK_BYTES) & ~(uintptr_t)15;
    void **sp = (void **)top;
    *--sp = NULL;               /* fiber_main's return address (never used) */
    *--sp = (void *)fiber_main; /* where the first switch returns to */
    for (int i = 0; i < 6; i++)
        *--sp = NULL; /* rbp rbx r12 r13 r14 r15 */
    f->sp = sp;
#else
    getcontext(&f->uc);
    f->uc.uc_stack.ss_sp = f->stack;
    f->uc.uc_stack.ss_size = STACK_BYTES;
    f->uc.uc_link = NULL;
    makecontext(&f->uc, fiber_main, 0);
#endif
}

static void resume(fiber *f)
{
    running = f;
    cur = &f->ctx;
#if defined(__x86_64__)
    cudahost_switch(&sched_sp, f->sp);
#else
    swapcontext(&sched_uc, &f->uc);
#endif
}

/* ---- barriers and shuffles ---- */

void cudahost::syncthreads(const char *file, int line)
{
    fiber *f = running;
    f->state = TH_BARRIER;
    f->bar_file = file;
    f->bar_line = line;
    to_scheduler();
}

uint64_t cudahost::shfl_xor(unsigned mask, uint64_t v, int xm, const char *file, int line)
{
    fiber *f = running;
    int tid = my_tid(), lane = tid & 31, w0 = tid - lane;
    warp_state &W = warps[tid >> 5];
    if (!(mask >> lane & 1)) {
        finding("__shfl_xor_sync at %s:%d by lane %d, which is not in mask 0x%08x", file, line,
                lane, mask);
        return v;
    }
    if (W.arrived == 0)
        W.mask = mask;
    else if (W.mask != mask) {
        finding("__shfl_xor_sync at %s:%d: lane %d gives mask 0x%08x, lanes before it 0x%08x", file,
                line, lane, mask, W.mask);
        return v;
    }
    f->shfl_val = v;
    f->shfl_mask = mask;
    f->shfl_src = lane ^ (xm & 31);
    f->state = TH_SHFL;
    if (++W.arrived < __builtin_popcount(mask)) {
        to_scheduler();
        return f->shfl_out;
    }
    /* The last lane of the mask to arrive completes the exchange. */
    W.arrived = 0;
    if (w0 + 31 - __builtin_clz(mask) >= n_threads) {
        finding("__shfl_xor_sync at %s:%d: mask 0x%08x names lanes past the block", file, line,
                mask);
        return v;
    }
    for (int l = 0; l < 32; l++) {
        if (!(mask >> l & 1))
            continue;
        fiber *o = &fibers[w0 + l];
        int src = o->shfl_src;
        o->shfl_out = mask >> src & 1 ? fibers[w0 + src].shfl_val : o->shfl_val;
        o->state = TH_READY;
    }
    return f->shfl_out;
}

/* When no thread can run: open the barrier if every thread waits at the
 * same one; anything else is a finding. Returns false when the block is
 * finished or stuck. */
static bool unblock(void)
{
    int done = 0, bar = 0, shfl = 0;
    fiber *first = NULL;
    for (int i = 0; i < n_threads; i++) {
        fiber *f = &fibers[i];
        done += f->state == TH_DONE;
        shfl += f->state == TH_SHFL;
        if (f->state == TH_BARRIER) {
            bar++;
            if (!first)
                first = f;
            else if (f->bar_line != first->bar_line || strcmp(f->bar_file, first->bar_file)) {
                running = f;
                cur = &f->ctx;
                finding("divergent __syncthreads: threads wait at %s:%d and at %s:%d",
                        first->bar_file, first->bar_line, f->bar_file, f->bar_line);
                return false;
            }
        }
    }
    if (done == n_threads)
        return false;
    if (shfl > 0) {
        for (int i = 0; i < n_threads; i++)
            if (fibers[i].state == TH_SHFL) {
                running = &fibers[i];
                cur = &fibers[i].ctx;
                finding("__shfl_xor_sync with mask 0x%08x that some lane of the mask never joins "
                        "(it ended or waits at a barrier)",
                        fibers[i].shfl_mask);
                return false;
            }
    }
    if (done > 0) {
        running = first;
        cur = &first->ctx;
        finding("divergent __syncthreads at %s:%d: %d of %d threads ended without reaching it",
                first->bar_file, first->bar_line, done, n_threads);
        return false;
    }
    epoch++;
    for (int i = 0; i < n_threads; i++)
        fibers[i].state = TH_READY;
    return true;
}

static void run_block(void)
{
    block_serial++;
    epoch++;
    block_epoch = epoch;
    shared_used = 0;
    memset(warps, 0, sizeof(warps));
    for (int i = 0; i < n_threads; i++) {
        fiber *f = &fibers[i];
        f->ctx.idx = uint3{(unsigned)i % block_dim.x, (unsigned)i / block_dim.x % block_dim.y,
                           (unsigned)i / (block_dim.x * block_dim.y)};
        f->state = TH_READY;
        fiber_start(f);
    }
    for (;;) {
        bool ran = false;
        for (int i = 0; i < n_threads; i++)
            if (fibers[i].state == TH_READY) {
                resume(&fibers[i]);
                ran = true;
            }
        if (!ran && !unblock())
            break;
    }
    cur = NULL;
    running = NULL;
}

/* ---- launches, streams, events ---- */

static cudaError_t last_error;

int cudahost::launch(const char *name, dim3 grid, dim3 block, size_t shmem, void *stream,
                     std::function<void()> fn)
{
    unsigned long nt = (unsigned long)block.x * block.y * block.z;
    if (nt == 0 || nt > MAX_THREADS || grid.x == 0 || grid.y == 0 || grid.z == 0 ||
        grid.y > 65535 || grid.z > 65535 || shmem > 0) {
        last_error = cudaErrorInvalidConfiguration;
        return -1;
    }
    body = &fn;
    kernel_name = name;
    grid_dim = grid;
    block_dim = block;
    n_threads = (int)nt;
    launch_first = block_serial + 1;
    for (unsigned z = 0; z < grid.z; z++)
        for (unsigned y = 0; y < grid.y; y++)
            for (unsigned x = 0; x < grid.x; x++) {
                block_idx = uint3{x, y, z};
                run_block();
            }
    kernel_name = NULL;
    body = NULL;
    return 0;
}

struct cudahost_stream {
    unsigned flags;
};
struct cudahost_event {
    double t_ms; /* wall time at record: launches run when made */
    bool recorded;
};

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned flags)
{
    *s = new cudahost_stream{flags};
    return cudaSuccess;
}
cudaError_t cudaStreamSynchronize(cudaStream_t s)
{
    return cudaSuccess;
}
cudaError_t cudaStreamDestroy(cudaStream_t s)
{
    delete s;
    return cudaSuccess;
}
cudaError_t cudaEventCreate(cudaEvent_t *e)
{
    *e = new cudahost_event{0, false};
    return cudaSuccess;
}
cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s)
{
    e->t_ms = now_ms();
    e->recorded = true;
    return cudaSuccess;
}
cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t a, cudaEvent_t b)
{
    if (!a->recorded || !b->recorded)
        return cudaErrorInvalidResourceHandle;
    *ms = (float)(b->t_ms - a->t_ms);
    return cudaSuccess;
}
cudaError_t cudaEventDestroy(cudaEvent_t e)
{
    delete e;
    return cudaSuccess;
}

/* ---- device and errors ---- */

cudaError_t cudaGetLastError(void)
{
    cudaError_t e = last_error;
    last_error = cudaSuccess;
    return e;
}
cudaError_t cudaGetDeviceCount(int *n)
{
    *n = 1;
    return cudaSuccess;
}
cudaError_t cudaDriverGetVersion(int *v)
{
    *v = 13000;
    return cudaSuccess;
}
cudaError_t cudaSetDevice(int dev)
{
    return dev == 0 ? cudaSuccess : cudaErrorInvalidValue;
}
cudaError_t cudaGetDeviceProperties(cudaDeviceProp *p, int dev)
{
    memset(p, 0, sizeof(*p));
    snprintf(p->name, sizeof(p->name), "cudahost (CPU harness)");
    p->major = 9;
    p->minor = 0;
    p->multiProcessorCount = 1;
    p->totalGlobalMem = DEV_RESERVE;
    return cudaSuccess;
}
cudaError_t cudaDeviceSynchronize(void)
{
    return cudaSuccess;
}

const char *cudaGetErrorName(cudaError_t e)
{
    switch (e) {
    case cudaSuccess:
        return "cudaSuccess";
    case cudaErrorInvalidValue:
        return "cudaErrorInvalidValue";
    case cudaErrorMemoryAllocation:
        return "cudaErrorMemoryAllocation";
    case cudaErrorInvalidConfiguration:
        return "cudaErrorInvalidConfiguration";
    case cudaErrorInvalidDevicePointer:
        return "cudaErrorInvalidDevicePointer";
    case cudaErrorInsufficientDriver:
        return "cudaErrorInsufficientDriver";
    case cudaErrorNoDevice:
        return "cudaErrorNoDevice";
    case cudaErrorInvalidResourceHandle:
        return "cudaErrorInvalidResourceHandle";
    default:
        return "cudaErrorLaunchFailure";
    }
}
const char *cudaGetErrorString(cudaError_t e)
{
    switch (e) {
    case cudaSuccess:
        return "no error";
    case cudaErrorMemoryAllocation:
        return "out of memory";
    case cudaErrorInvalidConfiguration:
        return "invalid configuration argument";
    default:
        return cudaGetErrorName(e);
    }
}

/* ---- WMMA (see cudahost.h) ---- */

namespace nvcuda
{
namespace wmma
{
void fill_fragment(frag_c &c, float v)
{
    for (int i = 0; i < 16; i++)
        for (int j = 0; j < 16; j++)
            c.v[i][j] = v;
}
void load_matrix_sync(frag_a &a, const __half *p, unsigned ldm)
{
    for (int i = 0; i < 16; i++) {
        cudahost::access(p + (size_t)i * ldm, 32, false);
        for (int k = 0; k < 16; k++)
            a.v[i][k] = cudahost_f16_to_f32(p[(size_t)i * ldm + k].x);
    }
}
void load_matrix_sync(frag_b &b, const __half *p, unsigned ldm)
{
    for (int j = 0; j < 16; j++) {
        cudahost::access(p + (size_t)j * ldm, 32, false);
        for (int k = 0; k < 16; k++)
            b.v[k][j] = cudahost_f16_to_f32(p[(size_t)j * ldm + k].x);
    }
}
void mma_sync(frag_c &d, const frag_a &a, const frag_b &b, const frag_c &c)
{
    int lane = my_tid() & 31;
    float r[8];
    for (int t = 0; t < 8; t++) {
        int e = lane + 32 * t, i = e / 16, j = e % 16;
        float acc = c.v[i][j];
        for (int k = 0; k < 16; k++)
            acc += a.v[i][k] * b.v[k][j]; /* f16 x f16 is exact in f32 */
        r[t] = acc;
    }
    if (&d != &c)
        for (int i = 0; i < 16; i++)
            for (int j = 0; j < 16; j++)
                d.v[i][j] = NAN; /* not this lane's */
    for (int t = 0; t < 8; t++)
        d.v[(lane + 32 * t) / 16][(lane + 32 * t) % 16] = r[t];
}
void store_matrix_sync(float *p, const frag_c &c, unsigned ldm, layout_t layout)
{
    int lane = my_tid() & 31;
    for (int e = lane; e < 256; e += 32) {
        int i = e / 16, j = e % 16;
        float *q = layout == mem_col_major ? p + (size_t)j * ldm + i : p + (size_t)i * ldm + j;
        cudahost::access(q, 4, true);
        *q = c.v[i][j];
    }
}
} // namespace wmma
} // namespace nvcuda
