/*
 * matmul_avx2: the AVX2 + FMA + F16C kernel table. Weights are decoded 32
 * elements per ymm (FP4 through a vpshufb lookup). The 16 float lanes of the
 * portable kernel live in two ymm registers (elements 0..31 and 32..63 of
 * every 64), and every lane sees the portable kernel's float operations in
 * its order, so results are bit-identical to matmul.c.
 *
 * Small batches (<= QK_FUSED_B rows) use fused kernels that decode in
 * registers (the sign trick: |w| as u8 times activations carrying w's
 * sign); at batch 1, 4 weight rows side by side so that their decoding
 * overlaps. Batched decode and prefill use register tiles of 4 weight rows
 * x 2 activation rows over the decoded chunk: the biased activation bytes
 * are vpmaddubsw's unsigned operand and the decoder's -128 * sum(w) per lane
 * corrects the sum (types with a min have w >= 0 and take the signed
 * activations directly), so a lane costs vpmaddubsw, vpmaddwd, vcvtdq2ps
 * and one FMA, with the weight-scale x activation-scale product formed for
 * 4 rows in one multiply. Those four are all port 0/1 uops on Intel (and
 * bit-identity with the portable kernel fixes the per-lane float step), so
 * a core peaks near 32 MACs per 2 cycles whatever the tile shape: 4 x 3
 * tiles (with unsigned weights) and 4 x 2 measure the same. The int8 route
 * beats decoding to f32 here: the per-lane float step is the same, and the
 * f32 products of a lane would take 4 FMAs where the integer route takes 2
 * multiplies.
 */
#if defined(__x86_64__) || defined(__i386__)

#include <immintrin.h>
#include <string.h>

#include "cpu/qk.h"

#define ALWAYS_INLINE static inline __attribute__((always_inline))

ALWAYS_INLINE float h2f(uint16_t h)
{
    return _cvtsh_ss(h);
}

/* One split-half nibble block (16 bytes) as 32 values 0..15 in natural order:
 * low nibbles in the low 128 bits, high nibbles in the high 128 bits. */
ALWAYS_INLINE __m256i nib32(const uint8_t *qs)
{
    __m128i x = _mm_loadu_si128((const __m128i *)qs);
    __m256i y = _mm256_set_m128i(_mm_srli_epi16(x, 4), x);
    return _mm256_and_si256(y, _mm256_set1_epi8(0x0F));
}

/* Fifth bits of a Q5 block as 0x10 bytes in natural order. */
ALWAYS_INLINE __m256i q5_high(const uint8_t *qh)
{
    uint32_t h;
    memcpy(&h, qh, 4);
    /* byte j takes bit j: replicate each of the 4 mask bytes over 8 bytes, test its bit */
    const __m256i shuf = _mm256_set_epi64x(0x0303030303030303, 0x0202020202020202,
                                           0x0101010101010101, 0x0000000000000000);
    const __m256i bits = _mm256_set1_epi64x((long long)0x8040201008040201ull);
    __m256i v = _mm256_shuffle_epi8(_mm256_set1_epi32((int)h), shuf);
    v = _mm256_cmpeq_epi8(_mm256_and_si256(v, bits), bits);
    return _mm256_and_si256(v, _mm256_set1_epi8(0x10));
}

/* The f16 pairs (d, m) at the start of two Q4_1 / Q5_1 blocks in one
 * conversion (exact, like h2f). */
ALWAYS_INLINE void dm2(const void *b0, const void *b1, float *d0, float *d1, float *m)
{
    uint32_t x0, x1;
    memcpy(&x0, b0, 4);
    memcpy(&x1, b1, 4);
    __m128 f = _mm_cvtph_ps(_mm_set_epi32(0, 0, (int)x1, (int)x0)); /* d0 m0 d1 m1 */
    *d0 = _mm_cvtss_f32(f);
    *d1 = _mm_cvtss_f32(_mm_movehl_ps(f, f));
    m[0] = _mm_cvtss_f32(_mm_movehdup_ps(f));
    m[1] = _mm_cvtss_f32(_mm_shuffle_ps(f, f, 3));
}

ALWAYS_INLINE bool type_has_min(const uint32_t T)
{
    return T == Q_Q4_1 || T == Q_Q5_1 || T == Q_Q4_K;
}

static int64_t type_block(const uint32_t T)
{
    return T == Q_Q4_K || T == Q_Q6_K ? 256 : T == Q_NVFP4 ? 64 : 32;
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

ALWAYS_INLINE __m256 halves(float s0, float s1)
{
    return _mm256_set_m128(_mm_set1_ps(s1), _mm_set1_ps(s0));
}

/* Four UE4M3 bytes -> their half values (qk_ue4m3_half). With bit 7 dropped,
 * x << 7 is an f16 with the same fields worth 2^-8 of the E4M3 value
 * (subnormals included), so the half value is that f16 times 128 exactly;
 * 0x7F alone decodes as 0 (ggml). */
ALWAYS_INLINE __m128 ue4m3_4(const uint8_t *d)
{
    uint32_t v;
    memcpy(&v, d, 4);
    __m128i x = _mm_cvtepu8_epi16(_mm_cvtsi32_si128((int)v));
    __m128i h = _mm_slli_epi16(_mm_and_si128(x, _mm_set1_epi16(0x7F)), 7);
    __m128 s = _mm_mul_ps(_mm_cvtph_ps(h), _mm_set1_ps(128.0f));
    __m128i nan = _mm_cvtepi16_epi32(_mm_cmpeq_epi16(x, _mm_set1_epi16(0x7F)));
    return _mm_andnot_ps(_mm_castsi128_ps(nan), s);
}

/*
 * Group g (elements 64g .. 64g+63) of a weight row in registers: int8 values
 * w[0] (elements 0..31) and w[1] (32..63), their lane scales dw[0], dw[1],
 * and for types with a min the two 32-block mins in m[0..1]. nblk is the
 * number of type blocks up to the end of the row; a trailing odd 32-block
 * gets a zero second half.
 */
ALWAYS_INLINE void group(const uint32_t T, const void *row, int64_t g, int64_t nblk, __m256i *w,
                         __m256 *dw, float *m)
{
    const int64_t k = 2 * g;
    const bool half =
        (T == Q_Q4_0 || T == Q_Q4_1 || T == Q_Q5_0 || T == Q_Q5_1 || T == Q_Q8_0 || T == Q_MXFP4) &&
        k + 1 >= nblk;
    const int64_t k1 = half ? k : k + 1;
    const __m256i lut = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)qk_e2m1_x2));
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    float s0 = 0, s1 = 0;
    switch (T) {
    case Q_Q4_0: { /* nibbles - 8 */
        const struct blk_q4_0 *b = row;
        w[0] = _mm256_sub_epi8(nib32(b[k].qs), _mm256_set1_epi8(8));
        w[1] = _mm256_sub_epi8(nib32(b[k1].qs), _mm256_set1_epi8(8));
        s0 = h2f(b[k].d), s1 = h2f(b[k1].d);
        break;
    }
    case Q_Q4_1: { /* nibbles as they are; d and m from one f16 pair each */
        const struct blk_q4_1 *b = row;
        w[0] = nib32(b[k].qs);
        w[1] = nib32(b[k1].qs);
        dm2(&b[k], &b[k1], &s0, &s1, m);
        break;
    }
    case Q_Q5_0: { /* nibbles | fifth bit, - 16 */
        const struct blk_q5_0 *b = row;
        w[0] = _mm256_sub_epi8(_mm256_or_si256(nib32(b[k].qs), q5_high(b[k].qh)),
                               _mm256_set1_epi8(16));
        w[1] = _mm256_sub_epi8(_mm256_or_si256(nib32(b[k1].qs), q5_high(b[k1].qh)),
                               _mm256_set1_epi8(16));
        s0 = h2f(b[k].d), s1 = h2f(b[k1].d);
        break;
    }
    case Q_Q5_1: { /* nibbles | fifth bit; d and m */
        const struct blk_q5_1 *b = row;
        w[0] = _mm256_or_si256(nib32(b[k].qs), q5_high(b[k].qh));
        w[1] = _mm256_or_si256(nib32(b[k1].qs), q5_high(b[k1].qh));
        dm2(&b[k], &b[k1], &s0, &s1, m);
        break;
    }
    case Q_Q8_0: { /* the int8 values as stored */
        const struct blk_q8_0 *b = row;
        w[0] = _mm256_loadu_si256((const __m256i *)b[k].qs);
        w[1] = _mm256_loadu_si256((const __m256i *)b[k1].qs);
        s0 = h2f(b[k].d), s1 = h2f(b[k1].d);
        break;
    }
    case Q_MXFP4: { /* nibbles through the doubled E2M1 table (vpshufb) */
        const struct blk_mxfp4 *b = row;
        w[0] = _mm256_shuffle_epi8(lut, nib32(b[k].qs));
        w[1] = _mm256_shuffle_epi8(lut, nib32(b[k1].qs));
        s0 = qk_e8m0_half(b[k].e), s1 = qk_e8m0_half(b[k1].e);
        break;
    }
    case Q_NVFP4: { /* per 8 bytes: 8 low nibbles, then 8 high (one 16-element sub-block) */
        const struct blk_nvfp4 *b = (const struct blk_nvfp4 *)row + g;
        __m128 sc = ue4m3_4(b->d);
        dw[0] = _mm256_set_m128(_mm_shuffle_ps(sc, sc, 0x55), _mm_shuffle_ps(sc, sc, 0x00));
        dw[1] = _mm256_set_m128(_mm_shuffle_ps(sc, sc, 0xFF), _mm_shuffle_ps(sc, sc, 0xAA));
        for (int h = 0; h < 2; h++) {
            /* 16 bytes = sub-blocks 2h and 2h+1: per 8 bytes, low nibbles then high */
            __m128i x = _mm_loadu_si128((const __m128i *)(b->qs + 16 * h));
            __m128i lo = _mm_unpacklo_epi64(x, _mm_srli_epi16(x, 4));
            __m128i hi = _mm_unpackhi_epi64(x, _mm_srli_epi16(x, 4));
            w[h] = _mm256_shuffle_epi8(lut, _mm256_and_si256(_mm256_set_m128i(hi, lo), m4));
        }
        break;
    }
    case Q_Q4_K: { /* 64 elements = 32 bytes: low nibbles, then high; 2 scale/min pairs */
        const struct blk_q4_k *b = (const struct blk_q4_k *)row + g / 4;
        const int c = (int)(g % 4);
        float dd = h2f(b->d), dmin = h2f(b->dmin);
        int sc0, m0, sc1, m1;
        q4k_scale_min(b->scales, 2 * c, &sc0, &m0);
        q4k_scale_min(b->scales, 2 * c + 1, &sc1, &m1);
        __m256i y = _mm256_loadu_si256((const __m256i *)(b->qs + 32 * c));
        w[0] = _mm256_and_si256(y, m4);
        w[1] = _mm256_and_si256(_mm256_srli_epi16(y, 4), m4);
        s0 = dd * (float)sc0, s1 = dd * (float)sc1;
        m[0] = -(dmin * (float)m0), m[1] = -(dmin * (float)m1);
        break;
    }
    case Q_Q6_K: { /* 4 bits from ql, 2 from qh, - 32; 4 int8 scales */
        const struct blk_q6_k *b = (const struct blk_q6_k *)row + g / 4;
        const int hf = (int)(g % 4) / 2, part = (int)(g % 2);
        const __m256i m2 = _mm256_set1_epi8(0x30);
        /* in each 128-element half: elements 0..31 are the low nibbles of ql[0..31]
         * with qh bits 0-1, 32..63 the low nibbles of ql[32..63] with bits 2-3,
         * 64..95 and 96..127 the high nibbles with bits 4-5 and 6-7 */
        __m256i A = _mm256_loadu_si256((const __m256i *)(b->ql + 64 * hf));
        __m256i B = _mm256_loadu_si256((const __m256i *)(b->ql + 64 * hf + 32));
        __m256i H = _mm256_loadu_si256((const __m256i *)(b->qh + 32 * hf));
        if (part == 0) {
            w[0] = _mm256_or_si256(_mm256_and_si256(A, m4),
                                   _mm256_and_si256(_mm256_slli_epi16(H, 4), m2));
            w[1] = _mm256_or_si256(_mm256_and_si256(B, m4),
                                   _mm256_and_si256(_mm256_slli_epi16(H, 2), m2));
        } else {
            w[0] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(A, 4), m4),
                                   _mm256_and_si256(H, m2));
            w[1] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(B, 4), m4),
                                   _mm256_and_si256(_mm256_srli_epi16(H, 2), m2));
        }
        w[0] = _mm256_sub_epi8(w[0], _mm256_set1_epi8(32));
        w[1] = _mm256_sub_epi8(w[1], _mm256_set1_epi8(32));
        const int8_t *sc = b->scales + 8 * hf + 4 * part;
        float dd = h2f(b->d);
        dw[0] = halves(dd * (float)sc[0], dd * (float)sc[1]);
        dw[1] = halves(dd * (float)sc[2], dd * (float)sc[3]);
        break;
    }
    }
    if (T != Q_NVFP4 && T != Q_Q6_K) {
        dw[0] = _mm256_set1_ps(s0);
        dw[1] = _mm256_set1_ps(s1);
    }
    if (half) {
        w[1] = _mm256_setzero_si256();
        dw[1] = _mm256_setzero_ps();
        if (type_has_min(T))
            m[1] = 0.0f;
    }
}

/* -128 * sum(w) per 4-element lane, as int32 (|w| <= 32: the 16-bit pairs
 * 128 * (w0 + w1) are exact). */
ALWAYS_INLINE __m256i correction(__m256i w)
{
    __m256i p = _mm256_maddubs_epi16(_mm256_set1_epi8((char)0x80), w);
    return _mm256_madd_epi16(p, _mm256_set1_epi16(-1));
}

/* The buffered decoder: chunk [e0, e0 + n) into d, group by group, streaming
 * a software prefetch PF_BYTES ahead (rows are decoded in order). */
#define PF_BYTES 8192
ALWAYS_INLINE void decode_chunk(const uint32_t T, const void *row, int64_t e0, int64_t n,
                                struct qk_dec *d)
{
    const int64_t nblk = (e0 + n) / type_block(T), g0 = e0 / 64, ng = qk_round_up(n, 64) / 64;
    const int64_t bytes = T == Q_Q4_K ? 144 : T == Q_Q6_K ? 210 : T == Q_NVFP4 ? 36 : 0;
    const int64_t gbytes = bytes ? bytes * 64 / type_block(T) : (int64_t)q_info(T)->bytes * 2;
    float m[2] = {0, 0};
    for (int64_t g = 0; g < ng; g++) {
        __m256i w[2];
        __m256 dw[2];
        _mm_prefetch((const char *)row + (g0 + g) * gbytes + PF_BYTES, _MM_HINT_T0);
        group(T, row, g0 + g, nblk, w, dw, m);
        _mm256_storeu_si256((__m256i *)(d->w + 64 * g), w[0]);
        _mm256_storeu_si256((__m256i *)(d->w + 64 * g + 32), w[1]);
        for (int h = 0; h < 2; h++) { /* dot_q's extras: |w| or the lane corrections */
            if (T == Q_Q8_0)
                _mm256_storeu_si256((__m256i *)(d->x.aw + 64 * g + 32 * h), _mm256_abs_epi8(w[h]));
            else if (!type_has_min(T)) /* unsigned weights need no correction */
                _mm256_storeu_si256((__m256i *)(d->x.nc + 16 * g + 8 * h), correction(w[h]));
        }
        _mm256_storeu_ps(d->dw + 16 * g, dw[0]);
        _mm256_storeu_ps(d->dw + 16 * g + 8, dw[1]);
        d->mw[2 * g] = m[0];
        d->mw[2 * g + 1] = m[1];
    }
    for (int64_t k = 2 * ng; k < qk_nsum(64 * ng); k++)
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
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(out + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(h + i))));
    for (; i < n; i++)
        out[i] = h2f(h[i]);
    for (; i < qk_round_up(n, 16); i++)
        out[i] = 0.0f;
}

static void dec_bf16(const void *row, int64_t e0, int64_t n, float *out)
{
    const uint16_t *h = (const uint16_t *)row + e0;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256i v = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(h + i)));
        _mm256_storeu_ps(out + i, _mm256_castsi256_ps(_mm256_slli_epi32(v, 16)));
    }
    for (; i < n; i++)
        out[i] = q_bf16_to_f32(h[i]);
    for (; i < qk_round_up(n, 16); i++)
        out[i] = 0.0f;
}

/* ---- dot kernels: one weight row, up to two activation rows at a time ----
 *
 * Without VNNI the integer dot is vpmaddubsw (u8 x s8 pairs, saturating at
 * 16 bits) then vpmaddwd with ones (pairs of pairs into int32: the 4-element
 * lanes). |w| <= 128 and |x| <= 127 keep every pair below 2^15, so nothing
 * saturates and the lane sums are exact, equal to the other tables'.
 */

/* The 16 lanes (lo = 0..7, hi = 8..15) summed in matmul.c's tree. */
ALWAYS_INLINE float hsum16(__m256 lo, __m256 hi)
{
    __m256 s8 = _mm256_add_ps(lo, hi);
    __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
    __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
    return _mm_cvtss_f32(_mm_add_ss(s2, _mm_movehdup_ps(s2)));
}

/* Start (zero or saved) and end (output or saved) of a pair of lane halves. */
ALWAYS_INLINE void acc_start(const struct qk_out *out, const float *acc, __m256 *lo, __m256 *hi)
{
    *lo = out->first ? _mm256_setzero_ps() : _mm256_loadu_ps(acc);
    *hi = out->first ? _mm256_setzero_ps() : _mm256_loadu_ps(acc + 8);
}

/* Lane sums (8 x int32, as floats) of 32 elements: sum((x - 128) * w) with
 * xs = x - 128 as s8. Weights of the types with a min are non-negative and
 * go straight in as u8; signed ones use |w| and xs carrying w's sign. */
ALWAYS_INLINE __m256 isum32(const bool UNS, __m256i w, __m256i aw, __m256i xs)
{
    __m256i p =
        UNS ? _mm256_maddubs_epi16(w, xs) : _mm256_maddubs_epi16(aw, _mm256_sign_epi8(xs, w));
    return _mm256_cvtepi32_ps(_mm256_madd_epi16(p, _mm256_set1_epi16(1)));
}

ALWAYS_INLINE __m256i act32(const uint8_t *p)
{
    return _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)p), _mm256_set1_epi8((char)0x80));
}

/* One half (lanes 0..7: elements 0..31 of every 64, or lanes 8..15:
 * elements 32..63) of an NR x NB register tile over the whole chunk; the
 * accumulators start from zero or acc and end in acc. Signed path: the
 * biased activations x (u8) times w (s8) plus the decoder's lane correction
 * nc = -128 * sum(w); |w| <= 32 keeps the pairs below 2^15 (255 * 32 * 2).
 * Q8_0 (|w| up to 128): |w| (from the decoder) times x - 128 carrying w's
 * sign. Either way the lane sums are the exact sum((x - 128) * w). */
ALWAYS_INLINE void dotq_half(const bool Q8, const bool UNS, const bool UNI, const int NR,
                             const int NB, const struct qk_dec *dec, const float *dwt, int64_t npad,
                             int64_t e0, const struct q_act *a, int64_t b0, float *acc,
                             const struct qk_out *out, const int h)
{
    _Alignas(16) float s4[2][4];
    __m256 v[QK_R][2];
    const uint8_t *aq[2];
    const __m256i ones = _mm256_set1_epi16(1);
    for (int t = 0; t < NB; t++) {
        aq[t] = qk_act_grp(a, b0 + t, e0 / 64) + 32 * h;
        for (int r = 0; r < NR; r++)
            v[r][t] = out->first ? _mm256_setzero_ps()
                                 : _mm256_loadu_ps(acc + (r * QK_T + t) * 16 + 8 * h);
    }
    /* i counts elements of the chunk; per element the decoded row holds one
     * byte of w and of |w|, and per 4 one int32 correction and one float scale,
     * so byte offsets are i, i, i and i (and i / 2 into dwt) */
    for (size_t i = 32 * (size_t)h; i < (size_t)npad; i += 64) {
        for (int t = 0; t < NB; t++) {
            /* this half of group i / 64: q bytes, their 8 lane scales 64 bytes on */
            const uint8_t *g = aq[t] + 2 * (i - 32 * (size_t)h);
            __m256i x = _mm256_loadu_si256((const __m256i *)g);
            if (Q8 || UNS)
                x = _mm256_xor_si256(x, _mm256_set1_epi8((char)0x80));
            __m256 da = _mm256_setzero_ps();
            if (UNI) /* one scale per 32-block: the NR products dw * da in one multiply */
                _mm_store_ps(s4[t],
                             _mm_mul_ps(_mm_load_ps((const float *)((const uint8_t *)dwt + i / 2)),
                                        _mm_broadcast_ss((const float *)(g + 64))));
            else
                da = _mm256_loadu_ps((const float *)(g + 64));
            for (int r = 0; r < NR; r++) {
                const struct qk_dec *d = dec + r;
                __m256i w = _mm256_loadu_si256((const __m256i *)(d->w + i)), p;
                if (Q8)
                    p = _mm256_maddubs_epi16(_mm256_loadu_si256((const __m256i *)(d->x.aw + i)),
                                             _mm256_sign_epi8(x, w));
                else if (UNS)
                    p = _mm256_maddubs_epi16(w, x);
                else
                    p = _mm256_maddubs_epi16(x, w);
                __m256i s = _mm256_madd_epi16(p, ones);
                if (!Q8 && !UNS)
                    s = _mm256_add_epi32(
                        s, _mm256_loadu_si256((const __m256i *)((const uint8_t *)d->x.nc + i)));
                __m256 sc =
                    UNI ? _mm256_broadcast_ss(&s4[t][r])
                        : _mm256_mul_ps(
                              _mm256_loadu_ps((const float *)((const uint8_t *)d->dw + i)), da);
                v[r][t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), sc, v[r][t]);
            }
        }
    }
    for (int t = 0; t < NB; t++)
        for (int r = 0; r < NR; r++)
            _mm256_storeu_ps(acc + (r * QK_T + t) * 16 + 8 * h, v[r][t]);
}

/* An NR x NB tile: both halves, then the min term and the outputs. */
ALWAYS_INLINE void dotq_tile(const bool Q8, const bool UNS, const bool UNI, const int NR,
                             const int NB, const struct qk_dec *dec, const float *dwt, int64_t npad,
                             int64_t e0, bool has_min, const struct q_act *a, int64_t b0,
                             float *acc, float *macc, const struct qk_out *out)
{
    dotq_half(Q8, UNS, UNI, NR, NB, dec, dwt, npad, e0, a, b0, acc, out, 0);
    dotq_half(Q8, UNS, UNI, NR, NB, dec, dwt, npad, e0, a, b0, acc, out, 1);
    for (int t = 0; t < NB; t++) {
        const float *sa = qk_act_sa(a, b0 + t) + e0 / 32;
        for (int r = 0; r < NR; r++) {
            float *ac = acc + (r * QK_T + t) * 16, *mc = macc + (r * QK_T + t) * 16;
            __m256 m0 = _mm256_setzero_ps(), m1 = _mm256_setzero_ps();
            if (has_min) { /* over 32-blocks: lane k % 16; entries past the end are 0 */
                const float *mw = dec[r].mw;
                acc_start(out, mc, &m0, &m1);
                for (int64_t k = 0; k < qk_nsum(npad); k += 16) {
                    m0 = _mm256_fmadd_ps(_mm256_loadu_ps(mw + k), _mm256_loadu_ps(sa + k), m0);
                    m1 = _mm256_fmadd_ps(_mm256_loadu_ps(mw + k + 8), _mm256_loadu_ps(sa + k + 8),
                                         m1);
                }
            }
            if (out->last) {
                float v = hsum16(_mm256_loadu_ps(ac), _mm256_loadu_ps(ac + 8));
                if (has_min)
                    v += hsum16(m0, m1);
                out->y[(b0 + t) * out->ldy + out->r + r] = v * out->scale;
            } else if (has_min) {
                _mm256_storeu_ps(mc, m0);
                _mm256_storeu_ps(mc + 8, m1);
            }
        }
    }
}

#define DOTQ_NB(q8, uns, uni, nr)                                                                  \
    do {                                                                                           \
        for (; t + 2 <= nb; t += 2)                                                                \
            dotq_tile(q8, uns, uni, nr, 2, dec, dwt, npad, e0, has_min, a, b0 + t, acc + 16 * t,   \
                      macc + 16 * t, out);                                                         \
        if (t < nb)                                                                                \
            dotq_tile(q8, uns, uni, nr, 1, dec, dwt, npad, e0, has_min, a, b0 + t, acc + 16 * t,   \
                      macc + 16 * t, out);                                                         \
    } while (0)

/* Register tiles of up to 4 weight rows x 2 activation rows (8 accumulators;
 * 4 x 3 spills and measured slower). Types with one
 * scale per 32-block (all but Q6_K and NVFP4) gather the rows' block scales
 * here, so that one multiply forms the 4 rows' lane scales. */
static void dot_q(const struct qk_dec *dec, int nr, int64_t npad, int64_t e0, uint32_t type,
                  const struct q_act *a, int64_t b0, int nb, float *acc, float *macc,
                  const struct qk_out *out)
{
    const bool has_min = type_has_min(type), uni = type != Q_Q6_K && type != Q_NVFP4;
    _Alignas(16) float dwt[QK_CHUNK / 32 * 4]; /* [32-block][row] */
    int t = 0;
    if (uni)
        for (int64_t k = 0; k < npad / 32; k++)
            for (int r = 0; r < 4; r++)
                dwt[4 * k + r] = r < nr ? dec[r].dw[8 * k] : 0.0f;
    switch (nr + 8 * (type == Q_Q8_0) + 16 * uni + 32 * has_min) {
    case 1:
        DOTQ_NB(false, false, false, 1);
        break;
    case 2:
        DOTQ_NB(false, false, false, 2);
        break;
    case 3:
        DOTQ_NB(false, false, false, 3);
        break;
    case 4:
        DOTQ_NB(false, false, false, 4);
        break;
    case 17:
        DOTQ_NB(false, false, true, 1);
        break;
    case 18:
        DOTQ_NB(false, false, true, 2);
        break;
    case 19:
        DOTQ_NB(false, false, true, 3);
        break;
    case 20:
        DOTQ_NB(false, false, true, 4);
        break;
    case 25:
        DOTQ_NB(true, false, true, 1);
        break;
    case 26:
        DOTQ_NB(true, false, true, 2);
        break;
    case 27:
        DOTQ_NB(true, false, true, 3);
        break;
    case 28:
        DOTQ_NB(true, false, true, 4);
        break;
    case 49:
        DOTQ_NB(false, true, true, 1);
        break;
    case 50:
        DOTQ_NB(false, true, true, 2);
        break;
    case 51:
        DOTQ_NB(false, true, true, 3);
        break;
    case 52:
        DOTQ_NB(false, true, true, 4);
        break;
    default:
        break;
    }
}
#undef DOTQ_NB

/* ---- fused small-batch kernels: one weight row, decoded in registers ----
 *
 * With 16 ymm registers one row at a time fits best; the software prefetch
 * keeps the next rows streaming in. Same lane order and min-term flush as
 * dotq_tile, so the bits match the buffered path.
 */

ALWAYS_INLINE void fused_row(const uint32_t T, const int NB, const struct q_matrix *wm,
                             const struct q_act *a, int64_t b0, int64_t r, float *y, int64_t ldy,
                             float scale)
{
    const bool UNS = type_has_min(T);
    const int64_t cols = wm->cols, ng = qk_round_up(cols, 64) / 64, nblk = cols / type_block(T);
    const uint8_t *row = (const uint8_t *)wm->data + (size_t)r * wm->row_bytes;
    const size_t gbytes = wm->row_bytes / (size_t)ng;
    __m256 acc[QK_FUSED_B][2], macc[QK_FUSED_B][2];
    float mwb[16] = {0};
    for (int t = 0; t < NB; t++)
        acc[t][0] = acc[t][1] = macc[t][0] = macc[t][1] = _mm256_setzero_ps();
    for (int64_t g = 0; g < ng; g++) {
        __m256i w[2], aw[2];
        __m256 dw[2];
        _mm_prefetch((const char *)row + PF_BYTES + (size_t)g * gbytes, _MM_HINT_T0);
        group(T, row, g, nblk, w, dw, &mwb[(2 * g) % 16]);
        aw[0] = UNS ? w[0] : _mm256_abs_epi8(w[0]);
        aw[1] = UNS ? w[1] : _mm256_abs_epi8(w[1]);
        for (int t = 0; t < NB; t++) {
            const uint8_t *p = qk_act_grp(a, b0 + t, g);
            for (int h = 0; h < 2; h++) {
                __m256 sc = _mm256_mul_ps(dw[h], _mm256_loadu_ps((const float *)(p + 64 + 32 * h)));
                acc[t][h] =
                    _mm256_fmadd_ps(isum32(UNS, w[h], aw[h], act32(p + 32 * h)), sc, acc[t][h]);
            }
        }
        if (UNS && (g % 8 == 7 || g == ng - 1)) {
            int64_t k0 = g / 8 * 16;
            for (int t = 0; t < NB; t++) {
                const float *sa = qk_act_sa(a, b0 + t) + k0;
                macc[t][0] = _mm256_fmadd_ps(_mm256_loadu_ps(mwb), _mm256_loadu_ps(sa), macc[t][0]);
                macc[t][1] =
                    _mm256_fmadd_ps(_mm256_loadu_ps(mwb + 8), _mm256_loadu_ps(sa + 8), macc[t][1]);
            }
            memset(mwb, 0, sizeof(mwb));
        }
    }
    for (int t = 0; t < NB; t++) {
        float v = hsum16(acc[t][0], acc[t][1]);
        if (UNS)
            v += hsum16(macc[t][0], macc[t][1]);
        y[(b0 + t) * ldy + r] = v * scale;
    }
}

ALWAYS_INLINE void fused_rows(const uint32_t T, const int NR, const int NB,
                              const struct q_matrix *wm, const struct q_act *a, int64_t b0,
                              int64_t r, float *y, int64_t ldy, float scale)
{
    const bool UNS = type_has_min(T);
    const int64_t cols = wm->cols, ng = qk_round_up(cols, 64) / 64, nblk = cols / type_block(T);
    const uint8_t *rows[4];
    const size_t gbytes = wm->row_bytes / (size_t)ng;
    __m256 acc[4][QK_FUSED_B][2], macc[4][QK_FUSED_B][2];
    float mwb[4][16] = {{0}};
    for (int i = 0; i < NR; i++) {
        rows[i] = (const uint8_t *)wm->data + (size_t)(r + i) * wm->row_bytes;
        for (int t = 0; t < NB; t++)
            acc[i][t][0] = acc[i][t][1] = macc[i][t][0] = macc[i][t][1] = _mm256_setzero_ps();
    }
    /* Rows read side by side defeat the hardware prefetcher: fetch the same
     * position in the rows about PF_BYTES ahead. */
    const size_t tile = (size_t)NR * wm->row_bytes;
    const size_t ahead = (PF_BYTES + tile - 1) / tile * tile;
    for (int64_t g = 0; g < ng; g++) {
        __m256i x[QK_FUSED_B][2]; /* this group's activations, shared by the NR rows */
        __m256 da[QK_FUSED_B][2];
        for (int t = 0; t < NB; t++) {
            const uint8_t *p = qk_act_grp(a, b0 + t, g);
            for (int h = 0; h < 2; h++) {
                x[t][h] = act32(p + 32 * h);
                da[t][h] = _mm256_loadu_ps((const float *)(p + 64 + 32 * h));
            }
        }
        for (int i = 0; i < NR; i++) {
            __m256i w[2], aw[2];
            __m256 dw[2];
            _mm_prefetch((const char *)rows[i] + ahead + (size_t)g * gbytes, _MM_HINT_T0);
            group(T, rows[i], g, nblk, w, dw, &mwb[i][(2 * g) % 16]);
            aw[0] = UNS ? w[0] : _mm256_abs_epi8(w[0]);
            aw[1] = UNS ? w[1] : _mm256_abs_epi8(w[1]);
            for (int t = 0; t < NB; t++)
                for (int h = 0; h < 2; h++)
                    acc[i][t][h] = _mm256_fmadd_ps(isum32(UNS, w[h], aw[h], x[t][h]),
                                                   _mm256_mul_ps(dw[h], da[t][h]), acc[i][t][h]);
        }
        if (UNS && (g % 8 == 7 || g == ng - 1)) {
            int64_t k0 = g / 8 * 16;
            for (int t = 0; t < NB; t++) {
                const float *sa = qk_act_sa(a, b0 + t) + k0;
                for (int i = 0; i < NR; i++) {
                    macc[i][t][0] = _mm256_fmadd_ps(_mm256_loadu_ps(mwb[i]), _mm256_loadu_ps(sa),
                                                    macc[i][t][0]);
                    macc[i][t][1] = _mm256_fmadd_ps(_mm256_loadu_ps(mwb[i] + 8),
                                                    _mm256_loadu_ps(sa + 8), macc[i][t][1]);
                }
            }
            for (int i = 0; i < NR; i++)
                memset(mwb[i], 0, sizeof(mwb[i]));
        }
    }
    for (int t = 0; t < NB; t++) {
        for (int i = 0; i < NR; i++) {
            float v = hsum16(acc[i][t][0], acc[i][t][1]);
            if (UNS)
                v += hsum16(macc[i][t][0], macc[i][t][1]);
            y[(b0 + t) * ldy + r + i] = v * scale;
        }
    }
}

ALWAYS_INLINE void fused(const uint32_t T, const struct q_matrix *w, const struct q_act *a,
                         int64_t b0, int nb, float *y, int64_t ldy, int64_t r0, int64_t r1,
                         float scale)
{
    int64_t r = r0;
    /* At batch 1 the 4-bit types are bound by decoding, and 4 rows side by
     * side overlap it best (+10% on SmolLM2 Q4_1); Q8_0 is bound by memory
     * and reads fastest one row stream at a time */
    if (nb == 1 && T != Q_Q8_0)
        for (; r + 4 <= r1; r += 4)
            fused_rows(T, 4, 1, w, a, b0, r, y, ldy, scale);
    for (; r < r1; r++) {
        switch (nb) {
        case 1:
            fused_row(T, 1, w, a, b0, r, y, ldy, scale);
            break;
        case 2:
            fused_row(T, 2, w, a, b0, r, y, ldy, scale);
            break;
        case 3:
            fused_row(T, 3, w, a, b0, r, y, ldy, scale);
            break;
        case 4:
            fused_row(T, 4, w, a, b0, r, y, ldy, scale);
            break;
        default:
            break;
        }
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

ALWAYS_INLINE void dotf_tile(const float *w, int64_t n, int64_t e0, const struct q_act *a,
                             int64_t b, const int NB, float *acc, int r, const struct qk_out *out)
{
    __m256 vacc[2][2];
    const float *x[2];
    for (int t = 0; t < NB; t++) {
        x[t] = qk_act_f(a, b + t) + e0;
        acc_start(out, acc + t * 16, &vacc[t][0], &vacc[t][1]);
    }
    for (int64_t i = 0; i < n; i += 16) {
        __m256 w0, w1;
        if (n - i >= 16) {
            w0 = _mm256_loadu_ps(w + i);
            w1 = _mm256_loadu_ps(w + i + 8);
        } else { /* the row's tail, read as zero-padded */
            float tmp[16] = {0};
            memcpy(tmp, w + i, (size_t)(n - i) * sizeof(float));
            w0 = _mm256_loadu_ps(tmp);
            w1 = _mm256_loadu_ps(tmp + 8);
        }
        for (int t = 0; t < NB; t++) {
            vacc[t][0] = _mm256_fmadd_ps(w0, _mm256_loadu_ps(x[t] + i), vacc[t][0]);
            vacc[t][1] = _mm256_fmadd_ps(w1, _mm256_loadu_ps(x[t] + i + 8), vacc[t][1]);
        }
    }
    for (int t = 0; t < NB; t++) {
        if (out->last) {
            out->y[(b + t) * out->ldy + out->r + r] = hsum16(vacc[t][0], vacc[t][1]) * out->scale;
        } else {
            _mm256_storeu_ps(acc + t * 16, vacc[t][0]);
            _mm256_storeu_ps(acc + t * 16 + 8, vacc[t][1]);
        }
    }
}

static void dot_f(const float *const *w, int nr, int64_t n, int64_t e0, const struct q_act *a,
                  int64_t b0, int nb, float *acc, const struct qk_out *out)
{
    for (int r = 0; r < nr; r++) {
        for (int t = 0; t < nb; t += 2) {
            float *ac = acc + (r * QK_T + t) * 16;
            if (nb - t >= 2)
                dotf_tile(w[r], n, e0, a, b0 + t, 2, ac, r, out);
            else
                dotf_tile(w[r], n, e0, a, b0 + t, 1, ac, r, out);
        }
    }
}

/* ---- activation quantization (bit-identical to qk_ref_act_q8) ---- */

static void act_q8(struct q_act *a, const float *x, int64_t ldx, int64_t r0, int64_t r1)
{
    const int64_t pad = qk_act_pad(Q_Q8_1, a->cols), nk = a->cols / 32;
    const __m256 absmask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7FFFFFFF));
    const __m256i lo = _mm256_set1_epi32(-127), hi = _mm256_set1_epi32(127);
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
            __m256 v[4];
            __m256 mx = _mm256_setzero_ps();
            for (int j = 0; j < 4; j++) {
                v[j] = _mm256_loadu_ps(xr + 8 * j);
                mx = _mm256_max_ps(mx, _mm256_and_ps(v[j], absmask));
            }
            __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(mx), _mm256_extractf128_ps(mx, 1));
            m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
            m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
            float amax = _mm_cvtss_f32(m4);
            float id = amax != 0.0f ? 127.0f / amax : 0.0f;
            float d = _cvtsh_ss(_cvtss_sh(amax / 127.0f, _MM_FROUND_TO_NEAREST_INT));
            __m256 vid = _mm256_set1_ps(id);
            __m256i iv[4], sum = _mm256_setzero_si256();
            for (int j = 0; j < 4; j++) {
                iv[j] = _mm256_cvtps_epi32(_mm256_mul_ps(v[j], vid));
                iv[j] = _mm256_min_epi32(_mm256_max_epi32(iv[j], lo), hi);
                sum = _mm256_add_epi32(sum, iv[j]);
            }
            /* int32 -> int8 (in range, so the saturating packs are exact), restore order */
            __m256i p = _mm256_packs_epi16(_mm256_packs_epi32(iv[0], iv[1]),
                                           _mm256_packs_epi32(iv[2], iv[3]));
            p = _mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
            _mm256_storeu_si256((__m256i *)q, _mm256_xor_si256(p, _mm256_set1_epi8((char)0x80)));
            __m128i s4 =
                _mm_add_epi32(_mm256_castsi256_si128(sum), _mm256_extracti128_si256(sum, 1));
            s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0x4E));
            s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0xB1));
            _mm256_storeu_ps(da, _mm256_set1_ps(d));
            sa[k] = d * (float)_mm_cvtsi128_si32(s4);
        }
        for (int64_t k = pad / 32; k < qk_nsum(pad); k++)
            sa[k] = 0.0f;
    }
}

const struct q_kernels qk_avx2 = {
    .name = "avx2",
    .isa = Q_ISA_AVX2,
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
typedef int matmul_avx2_unused; /* not an x86 build: nothing here */
#endif
