/*
 * matmul_neon: the aarch64 Advanced SIMD kernel table (Q_ISA_NEON), with the
 * integer dot through sdot where the CPU has the dot-product extension
 * (checked once at run time) and through smull + pairwise adds otherwise.
 * Weights are decoded by the portable decoders (exact, so every table sees
 * the same bytes), activations prepared by the portable quantizer, and the
 * 16 float lanes of matmul.c's kernels live in four q registers: lane l of
 * a 64-element group is int32 lane l % 4 of register l / 4, exactly what
 * sdot produces for 16 bytes. Every lane sees the portable float operations
 * in the same order (fused multiply-adds), so results are bit-identical to
 * matmul.c. There are no fused small-batch kernels: q_matmul decodes into
 * its buffer for every batch size.
 *
 * Built on aarch64 only (the Makefile's test-aarch64 target cross-compiles
 * it and runs the kernel tests under qemu-user).
 */
#if defined(__aarch64__)

#include <arm_neon.h>
#include <stdbool.h>
#include <string.h>
#include <sys/auxv.h>

#include "cpu/qk.h"

#ifndef HWCAP_ASIMDDP
#define HWCAP_ASIMDDP (1 << 20)
#endif

/* Lane sums of 16 elements: int32 lane j = sum of w * xs over elements
 * 4j .. 4j+3. |w| <= 128 and |xs| <= 127 keep each product within int16. */
static inline int32x4_t isum16(int8x16_t w, int8x16_t xs)
{
    int16x8_t lo = vmull_s8(vget_low_s8(w), vget_low_s8(xs));
    int16x8_t hi = vmull_high_s8(w, xs);
    return vpaddq_s32(vpaddlq_s16(lo), vpaddlq_s16(hi));
}

__attribute__((target("arch=armv8.2-a+dotprod"))) static inline int32x4_t isum16_dot(int8x16_t w,
                                                                                     int8x16_t xs)
{
    return vdotq_s32(vdupq_n_s32(0), w, xs);
}

/* Start (zero or saved) and end (output or saved) of 16 lanes. */
static inline void lanes_start(const struct qk_out *out, const float *acc, float32x4_t *v)
{
    for (int q = 0; q < 4; q++)
        v[q] = out->first ? vdupq_n_f32(0.0f) : vld1q_f32(acc + 4 * q);
}

static inline float lanes_sum(const float32x4_t *v)
{
    float l[16];
    for (int q = 0; q < 4; q++)
        vst1q_f32(l + 4 * q, v[q]);
    return qk_sum16(l);
}

/* One weight row against one activation row over the chunk (lanes in acc /
 * macc between chunks). DOT selects sdot. */
static inline __attribute__((always_inline)) void
dotq_one(const bool DOT, const struct qk_dec *dec, int64_t npad, int64_t e0, bool has_min,
         const struct q_act *a, int64_t b, float *acc, float *macc, int r, const struct qk_out *out)
{
    float32x4_t v[4], m[4];
    lanes_start(out, acc, v);
    const uint8_t *aq = qk_act_grp(a, b, e0 / 64);
    const uint8x16_t bias = vdupq_n_u8(0x80);
    for (int64_t i = 0; i < npad; i += 64) {
        const uint8_t *g = aq + 2 * i; /* group i / 64: q bytes, then 16 lane scales */
        const float *da = (const float *)(g + 64);
        for (int q = 0; q < 4; q++) {
            int8x16_t xs = vreinterpretq_s8_u8(veorq_u8(vld1q_u8(g + 16 * q), bias));
            int8x16_t w = vld1q_s8(dec->w + i + 16 * q);
            int32x4_t s = DOT ? isum16_dot(w, xs) : isum16(w, xs);
            float32x4_t sc = vmulq_f32(vld1q_f32(dec->dw + i / 4 + 4 * q), vld1q_f32(da + 4 * q));
            v[q] = vfmaq_f32(v[q], vcvtq_f32_s32(s), sc);
        }
    }
    if (has_min) { /* over 32-blocks: lane k % 16; entries past the end are 0 */
        const float *sa = qk_act_sa(a, b) + e0 / 32;
        lanes_start(out, macc, m);
        for (int64_t k = 0; k < qk_nsum(npad); k += 16)
            for (int q = 0; q < 4; q++)
                m[q] = vfmaq_f32(m[q], vld1q_f32(dec->mw + k + 4 * q), vld1q_f32(sa + k + 4 * q));
    }
    if (out->last) {
        float s = lanes_sum(v);
        if (has_min)
            s += lanes_sum(m);
        out->y[b * out->ldy + out->r + r] = s * out->scale;
        return;
    }
    for (int q = 0; q < 4; q++) {
        vst1q_f32(acc + 4 * q, v[q]);
        if (has_min)
            vst1q_f32(macc + 4 * q, m[q]);
    }
}

static bool has_dotprod(void)
{
    static int cached = -1;
    if (cached < 0)
        cached = (getauxval(AT_HWCAP) & HWCAP_ASIMDDP) != 0;
    return cached;
}

__attribute__((target("arch=armv8.2-a+dotprod"))) static void
dot_q_sdot(const struct qk_dec *dec, int nr, int64_t npad, int64_t e0, bool has_min,
           const struct q_act *a, int64_t b0, int nb, float *acc, float *macc,
           const struct qk_out *out)
{
    for (int r = 0; r < nr; r++)
        for (int t = 0; t < nb; t++)
            dotq_one(true, &dec[r], npad, e0, has_min, a, b0 + t, acc + (r * QK_T + t) * 16,
                     macc + (r * QK_T + t) * 16, r, out);
}

static void dot_q(const struct qk_dec *dec, int nr, int64_t npad, int64_t e0, uint32_t type,
                  const struct q_act *a, int64_t b0, int nb, float *acc, float *macc,
                  const struct qk_out *out)
{
    const bool has_min = qk_type_has_min(type);
    if (has_dotprod()) {
        dot_q_sdot(dec, nr, npad, e0, has_min, a, b0, nb, acc, macc, out);
        return;
    }
    for (int r = 0; r < nr; r++)
        for (int t = 0; t < nb; t++)
            dotq_one(false, &dec[r], npad, e0, has_min, a, b0 + t, acc + (r * QK_T + t) * 16,
                     macc + (r * QK_T + t) * 16, r, out);
}

/* Float rows: lane l holds elements 16i + l, as in matmul.c. */
static void dot_f(const float *const *w, int nr, int64_t n, int64_t e0, const struct q_act *a,
                  int64_t b0, int nb, float *acc, const struct qk_out *out)
{
    for (int r = 0; r < nr; r++) {
        for (int t = 0; t < nb; t++) {
            const float *x = qk_act_f(a, b0 + t) + e0;
            float *ac = acc + (r * QK_T + t) * 16;
            float32x4_t v[4];
            lanes_start(out, ac, v);
            for (int64_t i = 0; i < n; i += 16) {
                const float *wr = w[r] + i;
                float tmp[16] = {0};
                if (n - i < 16) { /* the row's tail, read as zero-padded */
                    memcpy(tmp, wr, (size_t)(n - i) * sizeof(float));
                    wr = tmp;
                }
                for (int q = 0; q < 4; q++)
                    v[q] = vfmaq_f32(v[q], vld1q_f32(wr + 4 * q), vld1q_f32(x + i + 4 * q));
            }
            if (out->last)
                out->y[(b0 + t) * out->ldy + out->r + r] = lanes_sum(v) * out->scale;
            else
                for (int q = 0; q < 4; q++)
                    vst1q_f32(ac + 4 * q, v[q]);
        }
    }
}

const struct q_kernels qk_neon = {
    .name = "neon",
    .isa = Q_ISA_NEON,
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
    .dot_q = dot_q,
    .dot_f = dot_f,
    .act_q8 = qk_ref_act_q8,
};

#else
typedef int matmul_neon_unused; /* ISO C: a translation unit is not empty */
#endif
