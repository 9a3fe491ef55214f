/*
 * qk: private interface of the CPU kernel files (act.c prepares
 * activations; matmul.c portable, matmul_avx2.c, matmul_avx512.c,
 * matmul_neon.c): the prepared-activation layout, the decoded-weight buffer
 * and the kernel table. The block structs are format/blocks.h. Nothing
 * outside engine/cpu/ and the unit tests includes this file.
 */
#ifndef ENGINE_CPU_QK_H
#define ENGINE_CPU_QK_H

#include <stdbool.h>
#include <stdint.h>

#include "cpu/matmul.h"

#include "format/blocks.h"
#include "format/quant.h"

/*
 * Prepared activations for quantized weights (vec_type Q_Q8_1), one row of
 * cols_pad = round_up(cols, 64) elements, 64-byte aligned, as cols_pad / 64
 * groups of 128 bytes followed by the block sums:
 *
 *   group g:  uint8_t q[64]   int8 value + 128 (ggml's Q8_0 rounding: d = amax/127
 *                             stored as f16, q = rne(x * 127/amax)); padding 128
 *             float da[16]    the f16-rounded block scale of each 4-element lane
 *                             (8 lanes per 32-block); padding 0
 *   float sa[qk_nsum]         da * sum(q) per 32-block (Q8_1's s); padding 0 up to a
 *                             multiple of 16 entries
 *
 * q and da of a group share one pointer, which keeps the kernels' address
 * registers few. For float weights (vec_type Q_F32): cols_pad = round_up(cols,
 * 16) floats, zero padded.
 */
#define QK_ACT_ALIGN 64
#define QK_ACT_GROUP 128 /* bytes per 64-element group */

static inline int64_t qk_round_up(int64_t n, int64_t m)
{
    return (n + m - 1) / m * m;
}
static inline int64_t qk_act_pad(uint32_t vec_type, int64_t cols)
{
    return qk_round_up(cols, vec_type == Q_F32 ? 16 : 64);
}
/* Entries of sa (and of qk_dec.mw): 32-blocks rounded up to 16, so the
 * kernels load whole vectors of them (the extra entries are zero). */
static inline int64_t qk_nsum(int64_t pad)
{
    return qk_round_up(pad / 32, 16);
}
/* Bytes of a prepared Q_Q8_1 row before its alignment slack. */
static inline size_t qk_act_used_bytes(int64_t cols)
{
    int64_t pad = qk_act_pad(Q_Q8_1, cols);
    return (size_t)(2 * pad) + (size_t)qk_nsum(pad) * sizeof(float);
}
static inline const uint8_t *qk_act_row(const struct q_act *a, int64_t row)
{
    return (const uint8_t *)a->data + (size_t)row * a->row_bytes;
}
/* Group g (elements 64g .. 64g+63) of a prepared row: q bytes, then da at +64. */
static inline const uint8_t *qk_act_grp(const struct q_act *a, int64_t row, int64_t g)
{
    return qk_act_row(a, row) + QK_ACT_GROUP * g;
}
static inline const float *qk_act_sa(const struct q_act *a, int64_t row)
{
    return (const float *)(qk_act_row(a, row) + 2 * qk_act_pad(Q_Q8_1, a->cols));
}
static inline const float *qk_act_f(const struct q_act *a, int64_t row)
{
    return (const float *)qk_act_row(a, row);
}

/*
 * Decoded weights: a chunk of at most QK_CHUNK elements of one weight row,
 * turned into int8 values in natural element order plus float scales, so a
 * single integer-dot kernel serves every quantized type. The dot of one
 * 4-element lane l is isum_l = sum(w * q_act); the row's value is
 *   sum_l isum_l * (dw_l * da_l)  +  sum_k mw_k * sa_k   (k: 32-blocks)
 * The chunk is padded with zeros to a multiple of 64 elements.
 */
#define QK_CHUNK   4096 /* elements per decode chunk (multiple of 512) */
#define QK_CHUNK_F 2048 /* the same for F16/BF16 rows decoded to f32 */
#define QK_R       4    /* weight rows per tile */
#define QK_T       8    /* activation rows per tile (accumulator arrays) */

struct qk_dec {
    int8_t w[QK_CHUNK];      /* weight values (offsets such as -8 applied) */
    float dw[QK_CHUNK / 4];  /* scale of each 4-element lane */
    float mw[QK_CHUNK / 32]; /* min term per 32-block (types with a min only), zero
                                up to qk_nsum(npad) entries */
    /* Table-private extras, written only by the decoders of tables whose dot_q
     * reads them (AVX2), never compared across tables: */
    union {
        int32_t nc[QK_CHUNK / 4]; /* -128 * sum(w) of each lane (every type but Q8_0) */
        uint8_t aw[QK_CHUNK];     /* |w| (Q8_0) */
    } x;
};

/* Decode elements [e0, e0 + n) of a weight row (n a multiple of the type's
 * block, e0 a multiple of QK_CHUNK) into d, zero-padded to round_up(n, 64). */
typedef void (*qk_decode_fn)(const void *row, int64_t e0, int64_t n, struct qk_dec *d);
/* Decode elements [e0, e0 + n) of an F16/BF16 row to floats, zero-padded to
 * round_up(n, 16). */
typedef void (*qk_decode_f_fn)(const void *row, int64_t e0, int64_t n, float *out);

/* Where a tile's lane accumulators start and end. On the first chunk of a
 * row they start at zero (else they are loaded from acc/macc); on the last
 * chunk the kernel writes finished outputs y[(b0 + t) * ldy + r + i] =
 * scale * (sum16(acc) + sum16(macc)) (else it stores acc/macc back), with
 * sum16 the tree (i, i+8), (i, i+4), (i, i+2), (0, 1) on every ISA. */
struct qk_out {
    bool first, last;
    float *y;
    int64_t ldy, r; /* y row stride; first weight row of the tile */
    float scale;
};

/*
 * Integer dot for a tile: nr weight rows of type `type` (decoded chunk
 * dec[r], npad elements, a multiple of 64) against activation rows b0 ..
 * b0+nb-1 at element offset e0. Lane accumulators live in acc[(r * QK_T + t) * 16 +
 * lane] between chunks (lane l holds elements 64i + 4l .. 64i + 4l + 3 of
 * every 64), and, for types with a min, in macc the same way over 32-blocks (block k
 * -> lane k % 16). Every ISA performs the same float operations per lane in
 * the same order. The types with a min (Q4_1, Q5_1, Q4_K) decode to
 * non-negative values.
 */
typedef void (*qk_dot_q_fn)(const struct qk_dec *dec, int nr, int64_t npad, int64_t e0,
                            uint32_t type, const struct q_act *a, int64_t b0, int nb, float *acc,
                            float *macc, const struct qk_out *out);
/* Float dot for a tile: rows w[r] (n floats from element e0; read as zero
 * beyond n) against f32 activation rows; lane l holds elements 16i + l. */
typedef void (*qk_dot_f_fn)(const float *const *w, int nr, int64_t n, int64_t e0,
                            const struct q_act *a, int64_t b0, int nb, float *acc,
                            const struct qk_out *out);

/* The 16-lane sum every ISA reproduces. */
static inline float qk_sum16(const float *v)
{
    float s8[8], s4[4], s2[2];
    for (int i = 0; i < 8; i++)
        s8[i] = v[i] + v[i + 8];
    for (int i = 0; i < 4; i++)
        s4[i] = s8[i] + s8[i + 4];
    for (int i = 0; i < 2; i++)
        s2[i] = s4[i] + s4[i + 2];
    return s2[0] + s2[1];
}

/*
 * Fused small-batch kernel for one weight type: decodes in registers and
 * writes finished outputs y[b * ldy + r] (lane sums, min term and scale
 * included) for rows [r0, r1) and activation rows b0 .. b0+nb-1, nb <= the
 * table's fused_b (QK_FUSED_B when 0). It must produce the same bits as the
 * decode + dot_q path.
 */
typedef void (*qk_fused_fn)(const struct q_matrix *w, const struct q_act *a, int64_t b0, int nb,
                            float *y, int64_t ldy, int64_t r0, int64_t r1, float scale);
#define QK_FUSED_B 4

/* Quantize activation rows [r0, r1) of x (row stride ldx) into a (layout above). */
typedef void (*qk_act_rows_fn)(struct q_act *a, const float *x, int64_t ldx, int64_t r0,
                               int64_t r1);

struct q_kernels {
    const char *name; /* "portable", "avx2", "avx512", "neon" */
    enum q_isa isa;
    qk_decode_fn decode[QK_NTYPES];     /* quantized weight types */
    qk_decode_f_fn decode_f[QK_NTYPES]; /* F16, BF16 */
    qk_dot_q_fn dot_q;
    qk_fused_fn fused[QK_NTYPES]; /* optional, per quantized type */
    int fused_b;                  /* most activation rows per fused call (0: QK_FUSED_B) */
    qk_dot_f_fn dot_f;
    qk_act_rows_fn act_q8; /* quantize rows for Q_Q8_1 */
};

extern const struct q_kernels qk_portable;
#if defined(__x86_64__) || defined(__i386__)
extern const struct q_kernels qk_avx2, qk_avx512;
#endif
#if defined(__aarch64__)
extern const struct q_kernels qk_neon; /* matmul_neon.c */
#endif

/* Portable building blocks (matmul.c) that the SIMD tables reuse for types
 * that are rarely hot. */
void qk_ref_decode_q4_0(const void *row, int64_t e0, int64_t n, struct qk_dec *d);
void qk_ref_decode_q4_1(const void *row, int64_t e0, int64_t n, struct qk_dec *d);
void qk_ref_decode_q5_0(const void *row, int64_t e0, int64_t n, struct qk_dec *d);
void qk_ref_decode_q5_1(const void *row, int64_t e0, int64_t n, struct qk_dec *d);
void qk_ref_decode_q8_0(const void *row, int64_t e0, int64_t n, struct qk_dec *d);
void qk_ref_decode_q4_k(const void *row, int64_t e0, int64_t n, struct qk_dec *d);
void qk_ref_decode_q6_k(const void *row, int64_t e0, int64_t n, struct qk_dec *d);
void qk_ref_decode_mxfp4(const void *row, int64_t e0, int64_t n, struct qk_dec *d);
void qk_ref_decode_nvfp4(const void *row, int64_t e0, int64_t n, struct qk_dec *d);
void qk_ref_decode_f16(const void *row, int64_t e0, int64_t n, float *out);
void qk_ref_decode_bf16(const void *row, int64_t e0, int64_t n, float *out);
void qk_ref_act_q8(struct q_act *a, const float *x, int64_t ldx, int64_t r0, int64_t r1);

/* True for types whose decoded form carries a min term (Q4_1, Q5_1, Q4_K). */
bool qk_type_has_min(uint32_t type);
/* True for F32, F16 and BF16 (dot against f32 activations). */
bool qk_type_is_float(uint32_t type);

#endif
