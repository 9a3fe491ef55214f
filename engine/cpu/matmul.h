/*
 * cpu/matmul.h: the CPU kernels' interface: activations prepared once per
 * step (act.c), the kernel table of each instruction set, and q_matmul
 * (matmul.c and the per-ISA files). Weight matrices and their types are
 * format/quant.h; the kernels' private layouts are qk.h.
 *
 * The kernel contract that makes batched decode cheap and deterministic:
 * q_matmul reads each weight block once for all B activation rows, and the
 * value computed for (weight row r, activation row b) does not depend on B
 * or on the other rows (same reduction order), so greedy output is the same
 * alone or inside a batch.
 */
#ifndef ENGINE_CPU_MATMUL_H
#define ENGINE_CPU_MATMUL_H

#include <stddef.h>
#include <stdint.h>

#include "format/quant.h"

/* The activation type q_act_prepare produces for a weight type: Q_F32 for
 * F32/F16/BF16, Q_Q8_1 for every quantized type. Weight types with the same
 * vec type can share one prepared q_act. */
uint32_t q_vec_type(uint32_t weight_type);

/* Activations prepared once per step for one weight type. For quantized
 * weights (vec_type Q_Q8_1) each 32-element block is quantized as llama.cpp
 * quantizes Q8_0/Q8_1 activations (d = amax/127 rounded to f16, q =
 * rne(x * 127/amax)) and keeps its sum; K-quants use the same 32-element
 * blocks (finer than llama.cpp's 256-element Q8_K). The byte layout is
 * private to the kernels (engine/cpu/qk.h). For F32/F16/BF16 weights the rows stay f32.
 * Buffers are allocated at init for the largest shape, so preparing during a
 * forward pass never allocates. Preparation is deterministic and the same on
 * every ISA. */
struct q_act {
    uint32_t vec_type;  /* Q_Q8_1 or Q_F32 (q_vec_type of the weight type) */
    int64_t rows, cols; /* current shape */
    int64_t max_rows, max_cols;
    void *data;       /* owned; rows x row_bytes, 64-byte aligned */
    size_t row_bytes; /* bytes per prepared row */
    size_t cap_bytes; /* bytes allocated */
};

/* Allocate for up to max_rows x max_cols (aborts if out of memory). */
void q_act_init(struct q_act *a, int64_t max_rows, int64_t max_cols);
void q_act_release(struct q_act *a);
/* Prepare x (rows x cols f32, row stride ldx floats) for weights of type
 * weight_type. rows <= max_rows, cols <= max_cols, and cols a multiple of 32
 * for quantized types (asserted). */
void q_act_prepare(struct q_act *a, uint32_t weight_type, const float *x, int64_t ldx, int64_t rows,
                   int64_t cols);
/* Split preparation across threads: q_act_shape sets the shape once, then
 * each worker prepares rows [r0, r1) of the same x (row r is read at
 * x + r * ldx). The result equals one q_act_prepare. */
void q_act_shape(struct q_act *a, uint32_t weight_type, int64_t rows, int64_t cols);
void q_act_prepare_rows(struct q_act *a, const float *x, int64_t ldx, int64_t r0, int64_t r1);
/* The values a prepared row stands for (cols floats into dst): what the
 * kernels multiply with. For tests and diagnostics. */
void q_act_dequant_row(const struct q_act *a, int64_t row, float *dst);

/* Which instruction set a kernel table uses. */
enum q_isa { Q_ISA_AUTO = 0, Q_ISA_PORTABLE, Q_ISA_AVX2, Q_ISA_AVX512, Q_ISA_NEON };

struct q_kernels; /* a table of kernels for one ISA (opaque) */

/* The kernel table for isa (Q_ISA_AUTO: the best this CPU supports). A
 * request for an ISA the CPU lacks returns NULL. The table is static and
 * shared; callers keep the pointer in their context. */
const struct q_kernels *q_kernels_select(enum q_isa isa);
const char *q_kernels_name(const struct q_kernels *k); /* "avx512", "avx2", "neon", "portable" */
/* The ISA a kernel table is for (Q_ISA_AUTO for NULL). */
enum q_isa q_kernels_isa(const struct q_kernels *k);
/* enum q_isa for "auto", "portable", "avx2", "avx512" or "neon", or -1. */
int q_isa_from_name(const char *name);

/*
 * y[b * ldy + r] = scale * dot(W row r, activation row b), for weight rows
 * r in [r0, r1) and every activation row b < a->rows (k NULL: the best table
 * for this CPU). a must have been prepared for w->type (same q_vec_type,
 * same cols; asserted). Each weight block is read from memory once for all
 * activation rows. The value for
 * (r, b) is bit-identical whatever a->rows, r0 and r1 are, and the same on
 * every kernel table (no tolerance: the batched and prefill tiles of the
 * SIMD tables, AVX2's included, reproduce the portable arithmetic exactly;
 * tests/unit/engine_kernels.c compares them bit for bit). Never allocates;
 * uses about 60 KB of stack. Safe to call from several threads on disjoint
 * row ranges.
 */
void q_matmul(const struct q_kernels *k, const struct q_matrix *w, const struct q_act *a, float *y,
              int64_t ldy, int64_t r0, int64_t r1);

#endif
