/*
 * matmul_avx512: the AVX-512 kernel table (F, BW, VL, DQ and VNNI). Weights
 * are decoded 64 elements per zmm (FP4 and Q4 nibbles through a vpshufb
 * lookup or a mask), activations are biased u8, and vpdpbusd forms the
 * integer lane sums; the -128 * sum(w) correction is taken per weight chunk,
 * so it is amortized over the batch. Float operations match matmul.c's
 * portable kernels lane for lane, so results are bit-identical to them.
 */
#if defined(__x86_64__) || defined(__i386__)

#include <immintrin.h>
#include <string.h>

#include "cpu/qk.h"

#define ALWAYS_INLINE static inline __attribute__((always_inline))
#ifndef PF_BYTES
#define PF_BYTES 8192 /* software prefetch distance (rounded up to whole row tiles) */
#endif

/* [s0 x 8 lanes, s1 x 8 lanes] */
ALWAYS_INLINE __m512 lanes2(float s0, float s1)
{
    return _mm512_insertf32x8(_mm512_set1_ps(s0), _mm256_set1_ps(s1), 1);
}

/* Lanes 0..7 from element 0 of v, lanes 8..15 from element `second`. */
ALWAYS_INLINE __m512 spread2(__m128 v, const int second)
{
    const __m512i idx = second == 1
                            ? _mm512_set_epi32(1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0)
                            : _mm512_set_epi32(2, 2, 2, 2, 2, 2, 2, 2, 0, 0, 0, 0, 0, 0, 0, 0);
    return _mm512_permutexvar_ps(idx, _mm512_castps128_ps512(v));
}

ALWAYS_INLINE float h2f(uint16_t h)
{
    return _cvtsh_ss(h);
}

/* Two split-half nibble blocks (16 bytes each) as 64 values 0..15 in natural
 * order: [low nibbles of A, high of A, low of B, high of B]. The 128-bit
 * lanes are loaded as [A, A, B, B] and the second copy of each shifted right
 * by 4 with one variable shift, so the nibble split needs no byte shuffle. */
ALWAYS_INLINE __m512i nib_pair(const uint8_t *qs0, const uint8_t *qs1)
{
    __m512i x = _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)qs0));
    x = _mm512_mask_broadcast_i32x4(x, 0xFF00, _mm_loadu_si128((const __m128i *)qs1));
    x = _mm512_srlv_epi64(x, _mm512_set_epi64(4, 4, 0, 0, 4, 4, 0, 0));
    return _mm512_and_si512(x, _mm512_set1_epi8(0x0F));
}

/* Fifth bits of two Q5 blocks (32 bits each) as 0x10 bytes in natural order:
 * the 64 bits are a byte mask (vpmovm2b), bit j selecting element j. */
ALWAYS_INLINE __m512i q5_high(const uint8_t *qh0, const uint8_t *qh1)
{
    uint32_t h0, h1;
    memcpy(&h0, qh0, 4);
    memcpy(&h1, qh1, 4);
    __m512i m = _mm512_movm_epi8(h0 | (uint64_t)h1 << 32);
    return _mm512_and_si512(m, _mm512_set1_epi8(0x10));
}

/* The f16 scales of two blocks on [8, 8] lanes. */
ALWAYS_INLINE __m512 f16_pair(uint16_t d0, uint16_t d1)
{
    __m128 f = _mm_cvtph_ps(_mm_cvtsi32_si128((int)(d0 | (uint32_t)d1 << 16)));
    return spread2(f, 1);
}

/* The (d, m) f16 pairs of two blocks: d on [8, 8] lanes, m into m[0..1]. */
ALWAYS_INLINE __m512 f16_dm_pair(const uint16_t *dm0, const uint16_t *dm1, float *m)
{
    uint32_t a, b;
    memcpy(&a, dm0, 4);
    memcpy(&b, dm1, 4);
    __m128 f = _mm_cvtph_ps(_mm_insert_epi32(_mm_cvtsi32_si128((int)a), (int)b, 1));
    m[0] = _mm_cvtss_f32(_mm_movehdup_ps(f));
    m[1] = _mm_cvtss_f32(_mm_permute_ps(f, 3));
    return spread2(f, 2);
}

/* Four UE4M3 bytes -> their half values (qk_ue4m3_half), each on 4 lanes.
 * With bit 7 dropped, x << 7 is an f16 with the same exponent and mantissa
 * fields, worth 2^-8 of the E4M3 value (subnormals included), so the half
 * value is that f16 times 128 exactly; 0x7F alone decodes as 0 (ggml). */
ALWAYS_INLINE __m512 ue4m3_lanes(const uint8_t *d)
{
    uint32_t v;
    memcpy(&v, d, 4);
    __m128i x = _mm_cvtepu8_epi16(_mm_cvtsi32_si128((int)v));
    __m128i h = _mm_slli_epi16(_mm_and_si128(x, _mm_set1_epi16(0x7F)), 7);
    __m128 s = _mm_mul_ps(_mm_cvtph_ps(h), _mm_set1_ps(128.0f));
    __mmask8 nan = _mm_cmpeq_epi16_mask(x, _mm_set1_epi16(0x7F));
    s = _mm_maskz_mov_ps((__mmask8)~nan, s);
    const __m512i idx = _mm512_set_epi32(3, 3, 3, 3, 2, 2, 2, 2, 1, 1, 1, 1, 0, 0, 0, 0);
    return _mm512_permutexvar_ps(idx, _mm512_castps128_ps512(s));
}

/* Sub-block scale and min of Q4_K (6 bits each, packed in 12 bytes). */
ALWAYS_INLINE void q4k_scale_min(const uint8_t *s6, int j, int *sc, int *m)
{
    if (j < 4) {
        *sc = s6[j] & 63;
        *m = s6[j + 4] & 63;
    } else {
        *sc = (s6[j + 4] & 0xF) | ((s6[j - 4] >> 6) << 4);
        *m = (s6[j + 4] >> 4) | ((s6[j] >> 6) << 4);
    }
}

ALWAYS_INLINE bool type_has_min(const uint32_t T)
{
    return T == Q_Q4_1 || T == Q_Q5_1 || T == Q_Q4_K;
}

/*
 * Group g (elements 64g .. 64g+63) of a weight row, decoded in registers:
 * int8 values w in natural order, lane scales dw, and for types with a min
 * the two 32-block mins into m[0..1]. nblk is the number of type blocks up
 * to the end of the row; a trailing odd 32-block gets a zero second half.
 */
ALWAYS_INLINE void group(const uint32_t T, const void *row, int64_t g, int64_t nblk, __m512i *w,
                         __m512 *dw, float *m)
{
    const int64_t k = 2 * g;
    const bool half =
        (T == Q_Q4_0 || T == Q_Q4_1 || T == Q_Q5_0 || T == Q_Q5_1 || T == Q_Q8_0 || T == Q_MXFP4) &&
        k + 1 >= nblk;
    const int64_t k1 = half ? k : k + 1;
    const __m512i lut = _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)qk_e2m1_x2));
    switch (T) {
    case Q_Q4_0: { /* nibbles - 8 */
        const struct blk_q4_0 *b = row;
        *w = _mm512_sub_epi8(nib_pair(b[k].qs, b[k1].qs), _mm512_set1_epi8(8));
        *dw = f16_pair(b[k].d, b[k1].d);
        break;
    }
    case Q_Q4_1: { /* nibbles as they are; d and m from one f16 pair each */
        const struct blk_q4_1 *b = row;
        *w = nib_pair(b[k].qs, b[k1].qs);
        *dw = f16_dm_pair(&b[k].d, &b[k1].d, m);
        break;
    }
    case Q_Q5_0: { /* nibbles | fifth bit, - 16 */
        const struct blk_q5_0 *b = row;
        __m512i v = _mm512_or_si512(nib_pair(b[k].qs, b[k1].qs), q5_high(b[k].qh, b[k1].qh));
        *w = _mm512_sub_epi8(v, _mm512_set1_epi8(16));
        *dw = f16_pair(b[k].d, b[k1].d);
        break;
    }
    case Q_Q5_1: { /* nibbles | fifth bit; d and m */
        const struct blk_q5_1 *b = row;
        *w = _mm512_or_si512(nib_pair(b[k].qs, b[k1].qs), q5_high(b[k].qh, b[k1].qh));
        *dw = f16_dm_pair(&b[k].d, &b[k1].d, m);
        break;
    }
    case Q_Q8_0: { /* the int8 values as stored */
        const struct blk_q8_0 *b = row;
        *w =
            _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)b[k].qs)),
                               _mm256_loadu_si256((const __m256i *)b[k1].qs), 1);
        *dw = f16_pair(b[k].d, b[k1].d);
        break;
    }
    case Q_MXFP4: { /* nibbles through the doubled E2M1 table (vpshufb) */
        const struct blk_mxfp4 *b = row;
        *w = _mm512_shuffle_epi8(lut, nib_pair(b[k].qs, b[k1].qs));
        *dw = lanes2(qk_e8m0_half(b[k].e), qk_e8m0_half(b[k1].e));
        break;
    }
    case Q_NVFP4: { /* per 8 bytes: 8 low nibbles, then 8 high (one 16-element sub-block) */
        const struct blk_nvfp4 *b = (const struct blk_nvfp4 *)row + g;
        const __m512i dup = _mm512_set_epi64(3, 3, 2, 2, 1, 1, 0, 0);
        const __m512i shift = _mm512_set_epi64(4, 0, 4, 0, 4, 0, 4, 0);
        __m256i y = _mm256_loadu_si256((const __m256i *)b->qs);
        __m512i z = _mm512_permutexvar_epi64(dup, _mm512_castsi256_si512(y));
        z = _mm512_and_si512(_mm512_srlv_epi64(z, shift), _mm512_set1_epi8(0x0F));
        *w = _mm512_shuffle_epi8(lut, z);
        *dw = ue4m3_lanes(b->d);
        break;
    }
    case Q_Q4_K: { /* 64 elements = 32 bytes: low nibbles, then high; 2 scale/min pairs */
        const struct blk_q4_k *b = (const struct blk_q4_k *)row + g / 4;
        const int c = (int)(g % 4);
        const __m256i m4 = _mm256_set1_epi8(0x0F);
        int sc0, m0, sc1, m1;
        q4k_scale_min(b->scales, 2 * c, &sc0, &m0);
        q4k_scale_min(b->scales, 2 * c + 1, &sc1, &m1);
        __m256i y = _mm256_loadu_si256((const __m256i *)(b->qs + 32 * c));
        *w = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_and_si256(y, m4)),
                                _mm256_and_si256(_mm256_srli_epi16(y, 4), m4), 1);
        /* [d*sc0, d*sc1, dmin*m0, dmin*m1]: the products ggml's dequantization forms */
        uint32_t ddm;
        memcpy(&ddm, &b->d, 4);
        __m128 f = _mm_cvtph_ps(_mm_cvtsi32_si128((int)ddm)); /* d, dmin */
        __m128 v = _mm_mul_ps(_mm_cvtepi32_ps(_mm_set_epi32(m1, m0, sc1, sc0)),
                              _mm_shuffle_ps(f, f, 0x50));
        *dw = spread2(v, 1);
        m[0] = -_mm_cvtss_f32(_mm_movehl_ps(v, v));
        m[1] = -_mm_cvtss_f32(_mm_shuffle_ps(v, v, 3));
        break;
    }
    case Q_Q6_K: { /* 4 bits from ql, 2 from qh, - 32; 4 int8 scales */
        const struct blk_q6_k *b = (const struct blk_q6_k *)row + g / 4;
        const int hf = (int)(g % 4) / 2, part = (int)(g % 2);
        const __m256i m4 = _mm256_set1_epi8(0x0F), m2 = _mm256_set1_epi8(0x30);
        /* in each 128-element half: elements 0..31 are the low nibbles of ql[0..31]
         * with qh bits 0-1, 32..63 the low nibbles of ql[32..63] with bits 2-3,
         * 64..95 and 96..127 the high nibbles with bits 4-5 and 6-7 */
        __m256i A = _mm256_loadu_si256((const __m256i *)(b->ql + 64 * hf));
        __m256i B = _mm256_loadu_si256((const __m256i *)(b->ql + 64 * hf + 32));
        __m256i H = _mm256_loadu_si256((const __m256i *)(b->qh + 32 * hf));
        __m256i qa, qb;
        if (part == 0) {
            qa = _mm256_or_si256(_mm256_and_si256(A, m4),
                                 _mm256_and_si256(_mm256_slli_epi16(H, 4), m2));
            qb = _mm256_or_si256(_mm256_and_si256(B, m4),
                                 _mm256_and_si256(_mm256_slli_epi16(H, 2), m2));
        } else {
            qa = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(A, 4), m4),
                                 _mm256_and_si256(H, m2));
            qb = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(B, 4), m4),
                                 _mm256_and_si256(_mm256_srli_epi16(H, 2), m2));
        }
        *w = _mm512_sub_epi8(_mm512_inserti64x4(_mm512_castsi256_si512(qa), qb, 1),
                             _mm512_set1_epi8(32));
        const int8_t *sc = b->scales + 8 * hf + 4 * part;
        float dd = h2f(b->d);
        __m128 s4 =
            _mm_set_ps(dd * (float)sc[3], dd * (float)sc[2], dd * (float)sc[1], dd * (float)sc[0]);
        const __m512i idx = _mm512_set_epi32(3, 3, 3, 3, 2, 2, 2, 2, 1, 1, 1, 1, 0, 0, 0, 0);
        *dw = _mm512_permutexvar_ps(idx, _mm512_castps128_ps512(s4));
        break;
    }
    }
    if (half) {
        *w = _mm512_maskz_mov_epi8(0xFFFFFFFFull, *w);
        *dw = _mm512_maskz_mov_ps(0x00FF, *dw);
        if (type_has_min(T))
            m[1] = 0.0f;
    }
}

static int64_t type_block(const uint32_t T)
{
    return T == Q_Q4_K || T == Q_Q6_K ? 256 : T == Q_NVFP4 ? 64 : 32;
}

/* The buffered decoder: chunk [e0, e0 + n) into d, group by group, with the
 * same group decoder as the fused kernels (so both paths see equal values). */
ALWAYS_INLINE void decode_chunk(const uint32_t T, const void *row, int64_t e0, int64_t n,
                                struct qk_dec *d)
{
    const int64_t nblk = (e0 + n) / type_block(T), g0 = e0 / 64;
    const int64_t bytes = T == Q_Q4_K ? 144 : T == Q_Q6_K ? 210 : T == Q_NVFP4 ? 36 : 0;
    const int64_t gbytes = bytes ? bytes * 64 / type_block(T) : (int64_t)q_info(T)->bytes * 2;
    float m[2] = {0, 0};
    for (int64_t g = 0; g < qk_round_up(n, 64) / 64; g++) {
        __m512i w;
        __m512 dw;
        /* rows are decoded in order, so this streams ahead through the matrix */
        _mm_prefetch((const char *)row + (g0 + g) * gbytes + PF_BYTES, _MM_HINT_T0);
        group(T, row, g0 + g, nblk, &w, &dw, m);
        _mm512_storeu_si512(d->w + 64 * g, w);
        _mm512_storeu_ps(d->dw + 16 * g, dw);
        d->mw[2 * g] = m[0];
        d->mw[2 * g + 1] = m[1];
    }
    for (int64_t k = qk_round_up(n, 64) / 32; k < qk_nsum(qk_round_up(n, 64)); k++)
        d->mw[k] = 0.0f;
}

#define DECODER(T, name)                                                                           \
    static void name(const void *row, int64_t e0, int64_t n, struct qk_dec *d)                     \
    {                                                                                              \
        decode_chunk(T, row, e0, n, d);                                                            \
    }
DECODER(Q_Q4_0, dec_q4_0)
DECODER(Q_Q4_1, dec_q4_1)
DECODER(Q_Q5_0, dec_q5_0)
DECODER(Q_Q5_1, dec_q5_1)
DECODER(Q_Q8_0, dec_q8_0)
DECODER(Q_Q4_K, dec_q4_k)
DECODER(Q_Q6_K, dec_q6_k)
DECODER(Q_MXFP4, dec_mxfp4)
DECODER(Q_NVFP4, dec_nvfp4)

static void dec_f16(const void *row, int64_t e0, int64_t n, float *out)
{
    const uint16_t *h = (const uint16_t *)row + e0;
    int64_t i = 0;
    for (; i + 16 <= n; i += 16)
        _mm512_storeu_ps(out + i, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(h + i))));
    for (; i < n; i++)
        out[i] = h2f(h[i]);
    for (; i < qk_round_up(n, 16); i++)
        out[i] = 0.0f;
}

static void dec_bf16(const void *row, int64_t e0, int64_t n, float *out)
{
    const uint16_t *h = (const uint16_t *)row + e0;
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m512i v = _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)(h + i)));
        _mm512_storeu_ps(out + i, _mm512_castsi512_ps(_mm512_slli_epi32(v, 16)));
    }
    for (; i < n; i++)
        out[i] = q_bf16_to_f32(h[i]);
    for (; i < qk_round_up(n, 16); i++)
        out[i] = 0.0f;
}

/* ---- integer dot kernels ----
 *
 * vpdpbusd multiplies unsigned bytes by signed bytes and adds each group of
 * 4 products into an int32 lane: exactly the 4-element lanes of qk.h. The
 * activations are stored as u8 (q + 128). Signed weights take them as the
 * unsigned operand and start the lane at -128 * sum(w), computed once per
 * weight group and reused for every activation row; min types flip the
 * activations back to s8 instead and need no correction.
 */

/* The 16 lanes summed in matmul.c's tree: (i, i+8), (i, i+4), (i, i+2), (0, 1). */
ALWAYS_INLINE float hsum512(__m512 v)
{
    __m256 s8 = _mm256_add_ps(_mm512_castps512_ps256(v), _mm512_extractf32x8_ps(v, 1));
    __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
    __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
    return _mm_cvtss_f32(_mm_add_ss(s2, _mm_movehdup_ps(s2)));
}

/* One 64-element step for weight row values w (lane scales dw) against
 * activation bytes x (biased u8) with lane scales da. Signed weights use
 * x as u8 and the per-lane correction nc = -128 * sum(w); the types with a
 * min have non-negative weights, so they flip x to s8 instead. Either way
 * the lane sums are the exact integers sum((x - 128) * w). */
ALWAYS_INLINE __m512 step(const bool UNS, __m512 acc, __m512i w, __m512i nc, __m512 dw, __m512i x,
                          __m512 da)
{
    __m512i s =
        UNS ? _mm512_dpbusd_epi32(_mm512_setzero_si512(), w, x) : _mm512_dpbusd_epi32(nc, x, w);
    return _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), _mm512_mul_ps(dw, da), acc);
}

ALWAYS_INLINE __m512i correction(const bool UNS, __m512i w)
{
    if (UNS)
        return _mm512_setzero_si512();
    __m512i zero = _mm512_setzero_si512();
    return _mm512_sub_epi32(zero, _mm512_dpbusd_epi32(zero, _mm512_set1_epi8((char)0x80), w));
}

ALWAYS_INLINE __m512i act_bytes(const bool UNS, const uint8_t *p)
{
    __m512i x = _mm512_loadu_si512(p);
    return UNS ? _mm512_xor_si512(x, _mm512_set1_epi8((char)0x80)) : x;
}

/* The min term for 32-blocks k0 .. k0+15: lane k % 16 (entries past the end
 * are zero in both arrays; masked loads are avoided, they are slow on AMD). */
ALWAYS_INLINE __m512 min_step(__m512 macc, const float *mw, const float *sa)
{
    return _mm512_fmadd_ps(_mm512_loadu_ps(mw), _mm512_loadu_ps(sa), macc);
}

ALWAYS_INLINE void dotq_tile(const bool UNS, const struct qk_dec *dec, const int NR, int64_t npad,
                             int64_t e0, const struct q_act *a, int64_t b0, const int NB,
                             float *acc, float *macc, const struct qk_out *out)
{
    __m512 vacc[QK_R][QK_T];
    const uint8_t *aq[QK_T];
    for (int t = 0; t < NB; t++) {
        aq[t] = qk_act_grp(a, b0 + t, e0 / 64);
        for (int r = 0; r < NR; r++)
            vacc[r][t] =
                out->first ? _mm512_setzero_ps() : _mm512_loadu_ps(acc + (r * QK_T + t) * 16);
    }
    for (int64_t i = 0; i < npad; i += 64) {
        __m512i w[QK_R], nc[QK_R];
        __m512 dw[QK_R];
        for (int r = 0; r < NR; r++) {
            w[r] = _mm512_loadu_si512(dec[r].w + i);
            nc[r] = correction(UNS, w[r]);
            dw[r] = _mm512_loadu_ps(dec[r].dw + i / 4);
        }
        for (int t = 0; t < NB; t++) {
            const uint8_t *p = aq[t] + 2 * i; /* group i / 64: q bytes, then da */
            __m512i x = act_bytes(UNS, p);
            __m512 da = _mm512_loadu_ps(p + 64);
            for (int r = 0; r < NR; r++)
                vacc[r][t] = step(UNS, vacc[r][t], w[r], nc[r], dw[r], x, da);
        }
    }
    for (int t = 0; t < NB; t++) {
        const float *sa = qk_act_sa(a, b0 + t) + e0 / 32;
        for (int r = 0; r < NR; r++) {
            float *mc = macc + (r * QK_T + t) * 16;
            __m512 m = _mm512_setzero_ps();
            if (UNS) {
                if (!out->first)
                    m = _mm512_loadu_ps(mc);
                for (int64_t k = 0; k < qk_nsum(npad); k += 16)
                    m = min_step(m, dec[r].mw + k, sa + k);
            }
            if (out->last) {
                float v = hsum512(vacc[r][t]);
                if (UNS)
                    v += hsum512(m);
                out->y[(b0 + t) * out->ldy + out->r + r] = v * out->scale;
            } else {
                _mm512_storeu_ps(acc + (r * QK_T + t) * 16, vacc[r][t]);
                if (UNS)
                    _mm512_storeu_ps(mc, m);
            }
        }
    }
}

#define DOTQ_CASE(uns, nr, nb)                                                                     \
    case (uns)*256 + (nr)*16 + (nb):                                                               \
        dotq_tile(uns, dec, nr, npad, e0, a, b0, nb, acc, macc, out);                              \
        break;
#define DOTQ_CASES(uns, nr)                                                                        \
    DOTQ_CASE(uns, nr, 1)                                                                          \
    DOTQ_CASE(uns, nr, 2)                                                                          \
    DOTQ_CASE(uns, nr, 3)                                                                          \
    DOTQ_CASE(uns, nr, 4)                                                                          \
    DOTQ_CASE(uns, nr, 5)                                                                          \
    DOTQ_CASE(uns, nr, 6)                                                                          \
    DOTQ_CASE(uns, nr, 7)                                                                          \
    DOTQ_CASE(uns, nr, 8)

static void dot_q_part(const struct qk_dec *dec, int nr, int64_t npad, int64_t e0, bool has_min,
                       const struct q_act *a, int64_t b0, int nb, float *acc, float *macc,
                       const struct qk_out *out)
{
    switch ((int)has_min * 256 + nr * 16 + nb) {
        DOTQ_CASES(0, 1)
        DOTQ_CASES(0, 2)
        DOTQ_CASES(1, 1)
        DOTQ_CASES(1, 2)
        DOTQ_CASE(0, 3, 1)
        DOTQ_CASE(0, 3, 2)
        DOTQ_CASE(0, 3, 3)
        DOTQ_CASE(0, 3, 4)
        DOTQ_CASE(1, 3, 1)
        DOTQ_CASE(1, 3, 2)
        DOTQ_CASE(1, 3, 3)
        DOTQ_CASE(1, 3, 4)
        DOTQ_CASE(0, 4, 1)
        DOTQ_CASE(0, 4, 2)
        DOTQ_CASE(0, 4, 3)
        DOTQ_CASE(0, 4, 4)
        DOTQ_CASE(1, 4, 1)
        DOTQ_CASE(1, 4, 2)
        DOTQ_CASE(1, 4, 3)
        DOTQ_CASE(1, 4, 4)
    default:
        break;
    }
}

/* Register tiles: up to 2 weight rows x 8 activation rows, or 3-4 x 4. */
static void dot_q(const struct qk_dec *dec, int nr, int64_t npad, int64_t e0, uint32_t type,
                  const struct q_act *a, int64_t b0, int nb, float *acc, float *macc,
                  const struct qk_out *out)
{
    const bool has_min = type_has_min(type);
    if (nr <= 2) {
        dot_q_part(dec, nr, npad, e0, has_min, a, b0, nb, acc, macc, out);
        return;
    }
    for (int t = 0; t < nb; t += 4) {
        int n = nb - t < 4 ? nb - t : 4;
        dot_q_part(dec, nr, npad, e0, has_min, a, b0 + t, n, acc + 16 * t, macc + 16 * t, out);
    }
}

/* ---- fused small-batch kernels ----
 *
 * At small batches the decode buffer's store and reload cost as much as the
 * dot, so the weights are decoded in registers, NR rows side by side, for up
 * to FUSED_B activation rows a call (matmul.c runs batches up to 8 calls'
 * worth through here, in pieces over cache-sized blocks of weight rows). Short rows
 * read side by side defeat the hardware prefetcher, hence the software
 * prefetch PF_BYTES ahead. The min term is flushed every 16 32-blocks, in the
 * same lanes and order as dotq_tile's.
 */

#define FUSED_B 8 /* activation rows per fused call (the table's fused_b) */

/* Rows r .. r+NR-1 against activation rows b0 .. b0+NB-1, finished outputs. */
ALWAYS_INLINE void fused_rows(const uint32_t T, const int NR, const int NB,
                              const struct q_matrix *wm, const struct q_act *a, int64_t b0,
                              int64_t r, float *y, int64_t ldy, float scale)
{
    const bool UNS = type_has_min(T);
    const int64_t cols = wm->cols, ng = qk_round_up(cols, 64) / 64, nblk = cols / type_block(T);
    const void *rows[4];
    __m512 acc[4][FUSED_B], macc[4][FUSED_B];
    float mwb[4][16] = {{0}};
    const uint8_t *aq[FUSED_B];
    const float *sa[FUSED_B];
    for (int i = 0; i < NR; i++)
        rows[i] = (const uint8_t *)wm->data + (size_t)(r + i) * wm->row_bytes;
    for (int t = 0; t < NB; t++) {
        aq[t] = qk_act_row(a, b0 + t);
        sa[t] = qk_act_sa(a, b0 + t);
        for (int i = 0; i < NR; i++)
            acc[i][t] = macc[i][t] = _mm512_setzero_ps();
    }
    /* Short rows read side by side defeat the hardware prefetcher: fetch the
     * same position in the rows about PF_BYTES ahead. */
    const size_t tile = (size_t)NR * wm->row_bytes;
    const size_t ahead = (PF_BYTES + tile - 1) / tile * tile;
    const size_t gbytes = wm->row_bytes / (size_t)ng;
    for (int64_t g = 0; g < ng; g++) {
        __m512i w[4], nc[4];
        __m512 dw[4];
        for (int i = 0; i < NR; i++) {
            _mm_prefetch((const char *)rows[i] + ahead + (size_t)g * gbytes, _MM_HINT_T0);
            group(T, rows[i], g, nblk, &w[i], &dw[i], &mwb[i][(2 * g) % 16]);
            nc[i] = correction(UNS, w[i]);
        }
        for (int t = 0; t < NB; t++) {
            const uint8_t *p = aq[t] + QK_ACT_GROUP * g;
            __m512i x = act_bytes(UNS, p);
            __m512 da = _mm512_loadu_ps(p + 64);
            for (int i = 0; i < NR; i++)
                acc[i][t] = step(UNS, acc[i][t], w[i], nc[i], dw[i], x, da);
        }
        if (UNS && (g % 8 == 7 || g == ng - 1)) {
            int64_t k0 = g / 8 * 16;
            for (int t = 0; t < NB; t++)
                for (int i = 0; i < NR; i++)
                    macc[i][t] = min_step(macc[i][t], mwb[i], sa[t] + k0);
            for (int i = 0; i < NR; i++)
                memset(mwb[i], 0, sizeof(mwb[i]));
        }
    }
    for (int t = 0; t < NB; t++) {
        for (int i = 0; i < NR; i++) {
            float v = hsum512(acc[i][t]);
            if (UNS)
                v += hsum512(macc[i][t]);
            y[(b0 + t) * ldy + r + i] = v * scale;
        }
    }
}

/* Rows [r0, r1) for nb activation rows: 4 weight rows per step at nb <= 2,
 * 2 at nb = 3..4 (registers; measured on Zen 5), and at 5..8 2 for types
 * without a min, 1 for those with one (their min accumulators would not fit
 * in the 32 registers; measured on Zen 4). */
ALWAYS_INLINE void fused(const uint32_t T, const struct q_matrix *w, const struct q_act *a,
                         int64_t b0, int nb, float *y, int64_t ldy, int64_t r0, int64_t r1,
                         float scale)
{
    int64_t r = r0;
    switch (nb) {
    case 1:
        /* Q8_0 is bound by memory, and one row stream at a time reads fastest;
         * the 4-bit types are bound by decoding, and 4 rows overlap it best */
        if (T != Q_Q8_0)
            for (; r + 4 <= r1; r += 4)
                fused_rows(T, 4, 1, w, a, b0, r, y, ldy, scale);
        for (; r < r1; r++)
            fused_rows(T, 1, 1, w, a, b0, r, y, ldy, scale);
        break;
#define FUSED_NB(n)                                                                                \
    case n:                                                                                        \
        for (; r + 2 <= r1; r += 2)                                                                \
            fused_rows(T, 2, n, w, a, b0, r, y, ldy, scale);                                       \
        for (; r < r1; r++)                                                                        \
            fused_rows(T, 1, n, w, a, b0, r, y, ldy, scale);                                       \
        break;
    case 2:
        for (; r + 4 <= r1; r += 4)
            fused_rows(T, 4, 2, w, a, b0, r, y, ldy, scale);
        for (; r < r1; r++)
            fused_rows(T, 1, 2, w, a, b0, r, y, ldy, scale);
        break;
        FUSED_NB(3)
        FUSED_NB(4)
#undef FUSED_NB
#define FUSED_NB_WIDE(n)                                                                           \
    case n:                                                                                        \
        if (!type_has_min(T))                                                                      \
            for (; r + 2 <= r1; r += 2)                                                            \
                fused_rows(T, 2, n, w, a, b0, r, y, ldy, scale);                                   \
        for (; r < r1; r++)                                                                        \
            fused_rows(T, 1, n, w, a, b0, r, y, ldy, scale);                                       \
        break;
        FUSED_NB_WIDE(5)
        FUSED_NB_WIDE(6)
        FUSED_NB_WIDE(7)
        FUSED_NB_WIDE(8)
#undef FUSED_NB_WIDE
    default:
        break;
    }
}

#define FUSED(T, name)                                                                             \
    static void name(const struct q_matrix *w, const struct q_act *a, int64_t b0, int nb,          \
                     float *y, int64_t ldy, int64_t r0, int64_t r1, float scale)                   \
    {                                                                                              \
        fused(T, w, a, b0, nb, y, ldy, r0, r1, scale);                                             \
    }
FUSED(Q_Q4_0, fused_q4_0)
FUSED(Q_Q4_1, fused_q4_1)
FUSED(Q_Q5_0, fused_q5_0)
FUSED(Q_Q5_1, fused_q5_1)
FUSED(Q_Q8_0, fused_q8_0)
FUSED(Q_Q4_K, fused_q4_k)
FUSED(Q_Q6_K, fused_q6_k)
FUSED(Q_MXFP4, fused_mxfp4)
FUSED(Q_NVFP4, fused_nvfp4)

/* ---- float kernels ---- */

ALWAYS_INLINE void dotf_tile(const float *const *w, const int NR, int64_t n, int64_t e0,
                             const struct q_act *a, int64_t b0, const int NB, float *acc,
                             const struct qk_out *out)
{
    __m512 vacc[QK_R][QK_T];
    const float *x[QK_T];
    for (int t = 0; t < NB; t++) {
        x[t] = qk_act_f(a, b0 + t) + e0;
        for (int r = 0; r < NR; r++)
            vacc[r][t] =
                out->first ? _mm512_setzero_ps() : _mm512_loadu_ps(acc + (r * QK_T + t) * 16);
    }
    for (int64_t i = 0; i < n; i += 16) {
        __m512 wv[QK_R];
        for (int r = 0; r < NR; r++) {
            if (n - i >= 16) {
                wv[r] = _mm512_loadu_ps(w[r] + i);
            } else { /* the row's tail, read as zero-padded */
                float tmp[16] = {0};
                memcpy(tmp, w[r] + i, (size_t)(n - i) * sizeof(float));
                wv[r] = _mm512_loadu_ps(tmp);
            }
        }
        for (int t = 0; t < NB; t++) {
            __m512 xv = _mm512_loadu_ps(x[t] + i);
            for (int r = 0; r < NR; r++)
                vacc[r][t] = _mm512_fmadd_ps(wv[r], xv, vacc[r][t]);
        }
    }
    for (int t = 0; t < NB; t++) {
        for (int r = 0; r < NR; r++) {
            if (out->last)
                out->y[(b0 + t) * out->ldy + out->r + r] = hsum512(vacc[r][t]) * out->scale;
            else
                _mm512_storeu_ps(acc + (r * QK_T + t) * 16, vacc[r][t]);
        }
    }
}

#define DOTF_CASE(nr, nb)                                                                          \
    case (nr)*16 + (nb):                                                                           \
        dotf_tile(w, nr, n, e0, a, b0, nb, acc, out);                                              \
        break;

static void dot_f2(const float *const *w, int nr, int64_t n, int64_t e0, const struct q_act *a,
                   int64_t b0, int nb, float *acc, const struct qk_out *out)
{
    switch (nr * 16 + nb) {
        DOTF_CASE(1, 1)
        DOTF_CASE(1, 2)
        DOTF_CASE(1, 3)
        DOTF_CASE(1, 4)
        DOTF_CASE(1, 5)
        DOTF_CASE(1, 6)
        DOTF_CASE(1, 7)
        DOTF_CASE(1, 8)
        DOTF_CASE(2, 1)
        DOTF_CASE(2, 2)
        DOTF_CASE(2, 3)
        DOTF_CASE(2, 4)
        DOTF_CASE(2, 5)
        DOTF_CASE(2, 6)
        DOTF_CASE(2, 7)
        DOTF_CASE(2, 8)
    default:
        break;
    }
}

/* Float tiles of up to 2 weight rows x 8 activation rows. */
static void dot_f(const float *const *w, int nr, int64_t n, int64_t e0, const struct q_act *a,
                  int64_t b0, int nb, float *acc, const struct qk_out *out)
{
    for (int r = 0; r < nr; r += 2) {
        struct qk_out o = *out;
        o.r += r;
        dot_f2(w + r, nr - r < 2 ? nr - r : 2, n, e0, a, b0, nb, acc + r * QK_T * 16, &o);
    }
}

/* ---- activation quantization (bit-identical to qk_ref_act_q8) ---- */

static void act_q8(struct q_act *a, const float *x, int64_t ldx, int64_t r0, int64_t r1)
{
    const int64_t pad = qk_act_pad(Q_Q8_1, a->cols), nk = a->cols / 32;
    const __m512 absmask = _mm512_castsi512_ps(_mm512_set1_epi32(0x7FFFFFFF));
    const __m512i lo = _mm512_set1_epi32(-127), hi = _mm512_set1_epi32(127);
    const __m512i b128 = _mm512_set1_epi32(128);
    for (int64_t r = r0; r < r1; r++) {
        const float *xr = x + r * ldx;
        float *sa = (float *)qk_act_sa(a, r);
        for (int64_t k = 0; k < pad / 32; k++, xr += 32) {
            uint8_t *q = (uint8_t *)qk_act_grp(a, r, k / 2) + 32 * (k % 2);
            float *da = (float *)(qk_act_grp(a, r, k / 2) + 64) + 8 * (k % 2);
            if (k >= nk) { /* padding */
                _mm256_storeu_si256((__m256i *)q, _mm256_set1_epi8((char)128));
                _mm256_storeu_ps(da, _mm256_setzero_ps());
                sa[k] = 0.0f;
                continue;
            }
            __m512 v0 = _mm512_loadu_ps(xr), v1 = _mm512_loadu_ps(xr + 16);
            __m512 mx = _mm512_max_ps(_mm512_and_ps(v0, absmask), _mm512_and_ps(v1, absmask));
            float amax = _mm512_reduce_max_ps(mx);
            float id = amax != 0.0f ? 127.0f / amax : 0.0f;
            float d = _cvtsh_ss(_cvtss_sh(amax / 127.0f, _MM_FROUND_TO_NEAREST_INT));
            __m512 vid = _mm512_set1_ps(id);
            __m512i i0 = _mm512_cvtps_epi32(_mm512_mul_ps(v0, vid));
            __m512i i1 = _mm512_cvtps_epi32(_mm512_mul_ps(v1, vid));
            i0 = _mm512_min_epi32(_mm512_max_epi32(i0, lo), hi);
            i1 = _mm512_min_epi32(_mm512_max_epi32(i1, lo), hi);
            int sum = _mm512_reduce_add_epi32(_mm512_add_epi32(i0, i1));
            _mm_storeu_si128((__m128i *)q, _mm512_cvtepi32_epi8(_mm512_add_epi32(i0, b128)));
            _mm_storeu_si128((__m128i *)(q + 16), _mm512_cvtepi32_epi8(_mm512_add_epi32(i1, b128)));
            _mm256_storeu_ps(da, _mm256_set1_ps(d));
            sa[k] = d * (float)sum;
        }
        for (int64_t k = pad / 32; k < qk_nsum(pad); k++)
            sa[k] = 0.0f;
    }
}

const struct q_kernels qk_avx512 = {
    .name = "avx512",
    .isa = Q_ISA_AVX512,
    .decode =
        {
            [Q_Q4_0] = dec_q4_0,
            [Q_Q4_1] = dec_q4_1,
            [Q_Q5_0] = dec_q5_0,
            [Q_Q5_1] = dec_q5_1,
            [Q_Q8_0] = dec_q8_0,
            [Q_Q4_K] = dec_q4_k,
            [Q_Q6_K] = dec_q6_k,
            [Q_MXFP4] = dec_mxfp4,
            [Q_NVFP4] = dec_nvfp4,
        },
    .decode_f = {[Q_F16] = dec_f16, [Q_BF16] = dec_bf16},
    .dot_q = dot_q,
    .fused_b = FUSED_B,
    .fused =
        {
            [Q_Q4_0] = fused_q4_0,
            [Q_Q4_1] = fused_q4_1,
            [Q_Q5_0] = fused_q5_0,
            [Q_Q5_1] = fused_q5_1,
            [Q_Q8_0] = fused_q8_0,
            [Q_Q4_K] = fused_q4_k,
            [Q_Q6_K] = fused_q6_k,
            [Q_MXFP4] = fused_mxfp4,
            [Q_NVFP4] = fused_nvfp4,
        },
    .dot_f = dot_f,
    .act_q8 = act_q8,
};

#else
typedef int matmul_avx512_unused; /* not an x86 build: nothing here */
#endif
