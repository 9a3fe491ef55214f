/*
 * matmul: q_matmul's driver (row and batch tiling, column chunks, the final
 * lane reduction), run-time kernel selection, and the portable kernel table
 * that defines the arithmetic every SIMD table reproduces bit for bit.
 *
 * How a weight row r meets activation row b: the row is decoded chunk by
 * chunk into int8 values and per-lane scales (struct qk_dec), then a dot
 * kernel accumulates 16 float lanes per (r, b); the lanes are summed in a
 * fixed tree at the end. Each (r, b) sees the same operations whatever the
 * batch size, the row range or the tile it falls in.
 */
#include <assert.h>
#include <math.h>
#include <string.h>

#include "cpu/isa.h"
#include "cpu/qk.h"

/* Types whose values are d * q + m: their decoded q are non-negative (the
 * kernels exploit that) and the m part becomes the per-32-block min term. */
bool qk_type_has_min(uint32_t type)
{
    return type == Q_Q4_1 || type == Q_Q5_1 || type == Q_Q4_K;
}

bool qk_type_is_float(uint32_t type)
{
    return type == Q_F32 || type == Q_F16 || type == Q_BF16;
}

/* ---- portable decoders: exact, and the reference for the SIMD ones ----
 *
 * Each turns ggml blocks into int8 values in natural element order (the
 * order the activations are in) and writes the block scale once per 4-element
 * lane. Offsets such as Q4_0's -8 are applied to the integers, so the scale
 * alone turns an integer dot into the ggml value; the scale is the exact
 * float ggml's dequantization multiplies by (f16 -> f32, E8M0 / 2, UE4M3 / 2
 * with the doubled E2M1 table, d * sc for the K-quants). Decoding is exact,
 * so every ISA's decoder must produce these bytes; the tests check it.
 */

/* Zero the padding after n decoded elements up to the next multiple of 64. */
static void pad_dec(struct qk_dec *d, int64_t n)
{
    int64_t npad = qk_round_up(n, 64);
    memset(d->w + n, 0, (size_t)(npad - n));
    for (int64_t l = n / 4; l < npad / 4; l++)
        d->dw[l] = 0.0f;
    for (int64_t k = n / 32; k < qk_nsum(npad); k++)
        d->mw[k] = 0.0f;
}

/* The scale v for elements [first_elem, first_elem + n_elems), one per lane. */
static void set_lanes(float *dw, int64_t first_elem, int n_elems, float v)
{
    for (int l = 0; l < n_elems / 4; l++)
        dw[first_elem / 4 + l] = v;
}

void qk_ref_decode_q4_0(const void *row, int64_t e0, int64_t n, struct qk_dec *d)
{
    const struct blk_q4_0 *b = (const struct blk_q4_0 *)row + e0 / 32;
    for (int64_t k = 0; k < n / 32; k++, b++) {
        for (int j = 0; j < 16; j++) {
            d->w[32 * k + j] = (int8_t)((b->qs[j] & 0xF) - 8);
            d->w[32 * k + j + 16] = (int8_t)((b->qs[j] >> 4) - 8);
        }
        set_lanes(d->dw, 32 * k, 32, q_f16_to_f32(b->d));
    }
    pad_dec(d, n);
}

void qk_ref_decode_q4_1(const void *row, int64_t e0, int64_t n, struct qk_dec *d)
{
    const struct blk_q4_1 *b = (const struct blk_q4_1 *)row + e0 / 32;
    for (int64_t k = 0; k < n / 32; k++, b++) {
        for (int j = 0; j < 16; j++) {
            d->w[32 * k + j] = (int8_t)(b->qs[j] & 0xF);
            d->w[32 * k + j + 16] = (int8_t)(b->qs[j] >> 4);
        }
        set_lanes(d->dw, 32 * k, 32, q_f16_to_f32(b->d));
        d->mw[k] = q_f16_to_f32(b->m);
    }
    pad_dec(d, n);
}

/* Q5: the low four bits split-half in qs, the fifth bit of element j at bit
 * j of the 32-bit qh. */
static void decode_q5(const uint8_t *qs, const uint8_t *qh_bytes, int offset, int8_t *w)
{
    uint32_t qh;
    memcpy(&qh, qh_bytes, 4);
    for (int j = 0; j < 16; j++) {
        w[j] = (int8_t)(((qs[j] & 0xF) | ((qh >> j) & 1) << 4) - offset);
        w[j + 16] = (int8_t)(((qs[j] >> 4) | ((qh >> (j + 16)) & 1) << 4) - offset);
    }
}

void qk_ref_decode_q5_0(const void *row, int64_t e0, int64_t n, struct qk_dec *d)
{
    const struct blk_q5_0 *b = (const struct blk_q5_0 *)row + e0 / 32;
    for (int64_t k = 0; k < n / 32; k++, b++) {
        decode_q5(b->qs, b->qh, 16, d->w + 32 * k);
        set_lanes(d->dw, 32 * k, 32, q_f16_to_f32(b->d));
    }
    pad_dec(d, n);
}

void qk_ref_decode_q5_1(const void *row, int64_t e0, int64_t n, struct qk_dec *d)
{
    const struct blk_q5_1 *b = (const struct blk_q5_1 *)row + e0 / 32;
    for (int64_t k = 0; k < n / 32; k++, b++) {
        decode_q5(b->qs, b->qh, 0, d->w + 32 * k);
        set_lanes(d->dw, 32 * k, 32, q_f16_to_f32(b->d));
        d->mw[k] = q_f16_to_f32(b->m);
    }
    pad_dec(d, n);
}

void qk_ref_decode_q8_0(const void *row, int64_t e0, int64_t n, struct qk_dec *d)
{
    const struct blk_q8_0 *b = (const struct blk_q8_0 *)row + e0 / 32;
    for (int64_t k = 0; k < n / 32; k++, b++) {
        memcpy(d->w + 32 * k, b->qs, 32);
        set_lanes(d->dw, 32 * k, 32, q_f16_to_f32(b->d));
    }
    pad_dec(d, n);
}

/* Q4_K: each 32-element sub-block becomes a Q4_1-like block with scale
 * d * sc and min -dmin * m (the same products ggml's dequantization forms). */
void qk_ref_decode_q4_k(const void *row, int64_t e0, int64_t n, struct qk_dec *d)
{
    const struct blk_q4_k *b = (const struct blk_q4_k *)row + e0 / 256;
    for (int64_t k = 0; k < n / 256; k++, b++) {
        float dd = q_f16_to_f32(b->d), dmin = q_f16_to_f32(b->dmin);
        int8_t *w = d->w + 256 * k;
        for (int s = 0; s < 8; s++) {
            const uint8_t *sc6 = b->scales;
            int sc, m;
            if (s < 4) {
                sc = sc6[s] & 63;
                m = sc6[s + 4] & 63;
            } else {
                sc = (sc6[s + 4] & 0xF) | ((sc6[s - 4] >> 6) << 4);
                m = (sc6[s + 4] >> 4) | ((sc6[s] >> 6) << 4);
            }
            const uint8_t *q = b->qs + 32 * (s / 2);
            for (int l = 0; l < 32; l++)
                w[32 * s + l] = (int8_t)(s % 2 ? q[l] >> 4 : q[l] & 0xF);
            set_lanes(d->dw, 256 * k + 32 * s, 32, dd * (float)sc);
            d->mw[8 * k + s] = -(dmin * (float)m);
        }
    }
    pad_dec(d, n);
}

/* Q6_K: per 128 elements, 64 bytes of low nibbles and 32 bytes of 2-bit
 * high parts (docs/formats.md §1.5); int8 scale per 16 elements. */
void qk_ref_decode_q6_k(const void *row, int64_t e0, int64_t n, struct qk_dec *d)
{
    const struct blk_q6_k *b = (const struct blk_q6_k *)row + e0 / 256;
    for (int64_t k = 0; k < n / 256; k++, b++) {
        float dd = q_f16_to_f32(b->d);
        for (int half = 0; half < 2; half++) {
            const uint8_t *ql = b->ql + 64 * half, *qh = b->qh + 32 * half;
            int8_t *w = d->w + 256 * k + 128 * half;
            for (int l = 0; l < 32; l++) {
                w[l] = (int8_t)(((ql[l] & 0xF) | ((qh[l] >> 0) & 3) << 4) - 32);
                w[l + 32] = (int8_t)(((ql[l + 32] & 0xF) | ((qh[l] >> 2) & 3) << 4) - 32);
                w[l + 64] = (int8_t)(((ql[l] >> 4) | ((qh[l] >> 4) & 3) << 4) - 32);
                w[l + 96] = (int8_t)(((ql[l + 32] >> 4) | ((qh[l] >> 6) & 3) << 4) - 32);
            }
        }
        for (int s = 0; s < 16; s++)
            set_lanes(d->dw, 256 * k + 16 * s, 16, dd * (float)b->scales[s]);
    }
    pad_dec(d, n);
}

/* MXFP4: split-half nibbles through the doubled E2M1 table (integers -12..12)
 * with half the E8M0 scale, exactly ggml's pairing. */
void qk_ref_decode_mxfp4(const void *row, int64_t e0, int64_t n, struct qk_dec *d)
{
    const struct blk_mxfp4 *b = (const struct blk_mxfp4 *)row + e0 / 32;
    for (int64_t k = 0; k < n / 32; k++, b++) {
        for (int j = 0; j < 16; j++) {
            d->w[32 * k + j] = qk_e2m1_x2[b->qs[j] & 0xF];
            d->w[32 * k + j + 16] = qk_e2m1_x2[b->qs[j] >> 4];
        }
        set_lanes(d->dw, 32 * k, 32, qk_e8m0_half(b->e));
    }
    pad_dec(d, n);
}

/* NVFP4: four 16-element sub-blocks, each split-half over 8 bytes, each with
 * its UE4M3 scale (halved, like ggml); the tensor scale is q_matrix.scale. */
void qk_ref_decode_nvfp4(const void *row, int64_t e0, int64_t n, struct qk_dec *d)
{
    const struct blk_nvfp4 *b = (const struct blk_nvfp4 *)row + e0 / 64;
    for (int64_t k = 0; k < n / 64; k++, b++) {
        for (int s = 0; s < 4; s++) {
            int8_t *w = d->w + 64 * k + 16 * s;
            for (int j = 0; j < 8; j++) {
                w[j] = qk_e2m1_x2[b->qs[8 * s + j] & 0xF];
                w[j + 8] = qk_e2m1_x2[b->qs[8 * s + j] >> 4];
            }
            set_lanes(d->dw, 64 * k + 16 * s, 16, qk_ue4m3_half(b->d[s]));
        }
    }
    pad_dec(d, n);
}

void qk_ref_decode_f16(const void *row, int64_t e0, int64_t n, float *out)
{
    const uint16_t *h = (const uint16_t *)row + e0;
    int64_t i = 0;
    for (; i < n; i++)
        out[i] = q_f16_to_f32(h[i]);
    for (; i < qk_round_up(n, 16); i++)
        out[i] = 0.0f;
}

void qk_ref_decode_bf16(const void *row, int64_t e0, int64_t n, float *out)
{
    const uint16_t *h = (const uint16_t *)row + e0;
    int64_t i = 0;
    for (; i < n; i++)
        out[i] = q_bf16_to_f32(h[i]);
    for (; i < qk_round_up(n, 16); i++)
        out[i] = 0.0f;
}

/* ---- portable dot kernels ----
 *
 * The arithmetic every table reproduces: per 4-element lane an exact integer
 * sum, converted to float, times (weight scale * activation scale), fused
 * multiply-added into lane l of 16 accumulators in element order; the min
 * term likewise per 32-block; then qk_sum16. fmaf is a true fused
 * multiply-add, like vfmadd231ps.
 */

static void ref_dot_q(const struct qk_dec *dec, int nr, int64_t npad, int64_t e0, uint32_t type,
                      const struct q_act *a, int64_t b0, int nb, float *acc, float *macc,
                      const struct qk_out *out)
{
    const bool has_min = qk_type_has_min(type);
    for (int r = 0; r < nr; r++) {
        for (int t = 0; t < nb; t++) {
            float *ac = acc + (r * QK_T + t) * 16, *mc = macc + (r * QK_T + t) * 16;
            if (out->first) {
                memset(ac, 0, 16 * sizeof(float));
                memset(mc, 0, 16 * sizeof(float));
            }
            for (int64_t i = 0; i < npad; i += 64) {
                const uint8_t *q = qk_act_grp(a, b0 + t, (e0 + i) / 64);
                const float *da = (const float *)(q + 64);
                for (int l = 0; l < 16; l++) {
                    const int8_t *w = dec[r].w + i + 4 * l;
                    const uint8_t *x = q + 4 * l;
                    int32_t isum = 0;
                    for (int j = 0; j < 4; j++)
                        isum += ((int32_t)x[j] - 128) * w[j];
                    float s = dec[r].dw[i / 4 + l] * da[l];
                    ac[l] = fmaf((float)isum, s, ac[l]);
                }
            }
            if (has_min) {
                const float *sa = qk_act_sa(a, b0 + t) + e0 / 32;
                for (int64_t k = 0; k < qk_nsum(npad); k++)
                    mc[k % 16] = fmaf(dec[r].mw[k], sa[k], mc[k % 16]);
            }
            if (out->last) {
                float v = qk_sum16(ac);
                if (has_min)
                    v += qk_sum16(mc);
                out->y[(b0 + t) * out->ldy + out->r + r] = v * out->scale;
            }
        }
    }
}

static void ref_dot_f(const float *const *w, int nr, int64_t n, int64_t e0, const struct q_act *a,
                      int64_t b0, int nb, float *acc, const struct qk_out *out)
{
    for (int r = 0; r < nr; r++) {
        for (int t = 0; t < nb; t++) {
            const float *x = qk_act_f(a, b0 + t) + e0;
            float *ac = acc + (r * QK_T + t) * 16;
            if (out->first)
                memset(ac, 0, 16 * sizeof(float));
            for (int64_t i = 0; i < qk_round_up(n, 16); i++)
                ac[i % 16] = fmaf(i < n ? w[r][i] : 0.0f, x[i], ac[i % 16]);
            if (out->last)
                out->y[(b0 + t) * out->ldy + out->r + r] = qk_sum16(ac) * out->scale;
        }
    }
}

const struct q_kernels qk_portable = {
    .name = "portable",
    .isa = Q_ISA_PORTABLE,
    .decode =
        {
            [Q_Q4_0] = qk_ref_decode_q4_0,
            [Q_Q4_1] = qk_ref_decode_q4_1,
            [Q_Q5_0] = qk_ref_decode_q5_0,
            [Q_Q5_1] = qk_ref_decode_q5_1,
            [Q_Q8_0] = qk_ref_decode_q8_0,
            [Q_Q4_K] = qk_ref_decode_q4_k,
            [Q_Q6_K] = qk_ref_decode_q6_k,
            [Q_MXFP4] = qk_ref_decode_mxfp4,
            [Q_NVFP4] = qk_ref_decode_nvfp4,
        },
    .decode_f = {[Q_F16] = qk_ref_decode_f16, [Q_BF16] = qk_ref_decode_bf16},
    .dot_q = ref_dot_q,
    .dot_f = ref_dot_f,
    .act_q8 = qk_ref_act_q8,
};

/* ---- selection: the best table the CPU supports (cpuid via the compiler's
 * builtins, which also check that the OS saves the vector state) and this
 * process may use (isa.h) ---- */

static bool cpu_has_avx2(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_cpu_init();
    return !isa_withheld("avx2") && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#else
    return false;
#endif
}

static bool cpu_has_avx512(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_cpu_init();
    return cpu_has_avx2() && !isa_withheld("avx512") && __builtin_cpu_supports("avx512f") &&
           __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
           __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vnni");
#else
    return false;
#endif
}

/* The tables this build has for the CPU's architecture. */
#if defined(__x86_64__) || defined(__i386__)
#define AVX2_TABLE   (&qk_avx2)
#define AVX512_TABLE (&qk_avx512)
#else
#define AVX2_TABLE   NULL
#define AVX512_TABLE NULL
#endif
#if defined(__aarch64__)
#define NEON_TABLE (&qk_neon) /* Advanced SIMD is part of every aarch64 CPU */
#else
#define NEON_TABLE NULL
#endif

const struct q_kernels *q_kernels_select(enum q_isa isa)
{
    switch (isa) {
    case Q_ISA_AUTO:
#if defined(__aarch64__)
        return NEON_TABLE;
#else
        return cpu_has_avx512() ? AVX512_TABLE : cpu_has_avx2() ? AVX2_TABLE : &qk_portable;
#endif
    case Q_ISA_PORTABLE:
        return &qk_portable;
    case Q_ISA_AVX2:
        return cpu_has_avx2() ? AVX2_TABLE : NULL;
    case Q_ISA_AVX512:
        return cpu_has_avx512() ? AVX512_TABLE : NULL;
    case Q_ISA_NEON:
        return NEON_TABLE;
    }
    return NULL;
}

const char *q_kernels_name(const struct q_kernels *k)
{
    return k ? k->name : "none";
}

enum q_isa q_kernels_isa(const struct q_kernels *k)
{
    return k ? k->isa : Q_ISA_AUTO;
}

int q_isa_from_name(const char *name)
{
    static const char *const names[] = {
        [Q_ISA_AUTO] = "auto",     [Q_ISA_PORTABLE] = "portable", [Q_ISA_AVX2] = "avx2",
        [Q_ISA_AVX512] = "avx512", [Q_ISA_NEON] = "neon",
    };
    for (int i = 0; i < (int)(sizeof(names) / sizeof(names[0])); i++)
        if (strcmp(names[i], name) == 0)
            return i;
    return -1;
}

/* ---- the driver ----
 *
 * Batches up to QK_FUSED_PIECES x the table's fused_b activation rows (32
 * on AVX2, 64 on AVX-512) go to the table's fused kernels, which decode
 * weights in registers, in near-equal pieces of at most fused_b rows over
 * blocks of weight rows that stay in cache between the pieces (each piece
 * decodes the block again). Measured with build/bench/kernels on a loaded
 * 2-vCPU EPYC, 1 thread, that beats the decoded tile below by 10-50% at
 * 5-32 rows for every type on both tables, and matches it at 48-64 on
 * AVX-512; an MoE expert's block at batch 64 is about 8 rows. Larger batches
 * (prompt chunks) decode weight rows QK_R at a time into a stack buffer and
 * run every tile of QK_T activation rows against that buffer, so each
 * weight byte comes from memory once per step whatever the batch; rows
 * longer than a chunk are decoded chunk by chunk (per activation tile,
 * from cache). Both paths give
 * the same bits for every (r, b).
 */

#define QK_FUSED_PIECES 8           /* most fused pieces per call (batches above run the tiles) */
#define QK_FUSED_L2     (64 * 1024) /* weight bytes per row block of the fused pieces */

union dec_buf { /* on the stack: about 35 KB */
    struct qk_dec q[QK_R];
    float f[QK_R][QK_CHUNK_F];
};

/* Decode chunk [e0, e0 + n) of rows r .. r+nr-1 into buf; for F32 weights
 * point at the row itself. */
static void decode_rows(const struct q_kernels *k, const struct q_matrix *w, int64_t r, int nr,
                        int64_t e0, int64_t n, union dec_buf *buf, const float **frows)
{
    for (int i = 0; i < nr; i++) {
        const void *row = (const uint8_t *)w->data + (size_t)(r + i) * w->row_bytes;
        if (w->type == Q_F32)
            frows[i] = (const float *)row + e0;
        else if (qk_type_is_float(w->type)) {
            k->decode_f[w->type](row, e0, n, buf->f[i]);
            frows[i] = buf->f[i];
        } else
            k->decode[w->type](row, e0, n, &buf->q[i]);
    }
}

void q_matmul(const struct q_kernels *k, const struct q_matrix *w, const struct q_act *a, float *y,
              int64_t ldy, int64_t r0, int64_t r1)
{
    if (!k)
        k = q_kernels_select(Q_ISA_AUTO);
    assert(a->vec_type == q_vec_type(w->type) && a->cols == w->cols);
    assert(r0 >= 0 && r0 <= r1 && r1 <= w->rows);
    const bool is_float = qk_type_is_float(w->type);
    const int64_t cols = w->cols, nbatch = a->rows;
    const float scale = w->scale != 0.0f ? w->scale : 1.0f;
    const int64_t chunk = is_float ? QK_CHUNK_F : QK_CHUNK;
    const bool one_chunk = cols <= chunk;
    union dec_buf buf;
    const float *frows[QK_R];
    float acc[QK_R * QK_T * 16], macc[QK_R * QK_T * 16];

    const int fb = k->fused_b ? k->fused_b : QK_FUSED_B;
    if (!is_float && nbatch <= QK_FUSED_PIECES * fb && k->fused[w->type]) {
        /* ceil(nbatch / fused_b) near-equal pieces (5 rows run as 3 +
         * 2, not 4 + 1: a piece's cost is mostly its weight decode), over
         * blocks of weight rows small enough to stay in cache between
         * pieces. */
        int np = (int)((nbatch + fb - 1) / fb);
        int64_t rb = np == 1 ? r1 - r0 : (int64_t)(QK_FUSED_L2 / w->row_bytes) & ~(int64_t)15;
        if (rb < 16)
            rb = 16;
        for (int64_t rr = r0; rr < r1; rr += rb) {
            int64_t re = r1 - rr < rb ? r1 : rr + rb;
            for (int p = 0, b0 = 0; p < np; p++) {
                int nb = (int)((nbatch - b0) / (np - p));
                k->fused[w->type](w, a, b0, nb, y, ldy, rr, re, scale);
                b0 += nb;
            }
        }
        return;
    }
    for (int64_t r = r0; r < r1; r += QK_R) {
        int nr = r1 - r < QK_R ? (int)(r1 - r) : QK_R;
        if (one_chunk)
            decode_rows(k, w, r, nr, 0, cols, &buf, frows);
        for (int64_t b0 = 0; b0 < nbatch; b0 += QK_T) {
            int nb = nbatch - b0 < QK_T ? (int)(nbatch - b0) : QK_T;
            for (int64_t e0 = 0; e0 < cols; e0 += chunk) {
                int64_t n = cols - e0 < chunk ? cols - e0 : chunk;
                struct qk_out out = {e0 == 0, e0 + n == cols, y, ldy, r, scale};
                if (!one_chunk)
                    decode_rows(k, w, r, nr, e0, n, &buf, frows);
                if (is_float)
                    k->dot_f(frows, nr, n, e0, a, b0, nb, acc, &out);
                else
                    k->dot_q(buf.q, nr, qk_round_up(n, 64), e0, w->type, a, b0, nb, acc, macc,
                             &out);
            }
        }
    }
}
