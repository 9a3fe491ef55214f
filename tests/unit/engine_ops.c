/* Unit tests for engine/cpu/ops: the SIMD kernels against the portable
 * ones, bit for bit (ops.h states the arithmetic every table follows):
 * attention chunks over f16 and f32 K/V at SmolLM2-135M's shape (head_dim
 * 64, 3 query heads per KV head, chunks of MODEL_ATTN_CHUNK = 64 and
 * partial ones around the 8-lane and 16-key tile boundaries), SwiGLU at
 * its n_ff (1536) and with a tail, f32 -> f16, and ops_exp itself. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "rng.h"
#include "test.h"

#include "cpu/ops.h"
#include "format/quant.h"

static float urand(uint64_t *s)
{
    return (float)((rng_next(s) >> 40) / 16777216.0) * 2.0f - 1.0f;
}

/* How many of n floats differ in their bits. */
static int ndiff(const float *a, const float *b, int n)
{
    int d = 0;
    for (int i = 0; i < n; i++)
        d += memcmp(a + i, b + i, sizeof(float)) != 0;
    return d;
}

TEST(silu_matches_portable_bit_for_bit)
{
    const struct cpu_ops *simd[2] = {cpu_ops_avx2(), cpu_ops_avx512()}, *p = cpu_ops_portable();
    if (!simd[0]) {
        printf("skipped: no AVX2\n");
        return;
    }
    enum { N = 1536 }; /* SmolLM2-135M's n_ff; 1003 leaves a scalar tail */
    static float g1[N], g2[N], up[N];
    static const int ns[2] = {N, 1003};
    uint64_t s = 1;
    for (int k = 0; k < 2; k++) {
        if (!simd[k])
            continue;
        for (int c = 0; c < 2; c++) {
            for (int i = 0; i < N; i++) {
                g1[i] = g2[i] = urand(&s) * 20.0f;
                up[i] = urand(&s) * 4.0f;
            }
            simd[k]->silu_mul(g1, up, ns[c]);
            p->silu_mul(g2, up, ns[c]);
            CHECK_MSG(ndiff(g1, g2, N) == 0, "%s: n %d: %d of %d values differ from portable",
                      simd[k]->name, ns[c], ndiff(g1, g2, N), N);
        }
    }
}

TEST(to_f16_matches_portable)
{
    const struct cpu_ops *simd[2] = {cpu_ops_avx2(), cpu_ops_avx512()}, *p = cpu_ops_portable();
    enum { N = 579 }; /* n_embd 576 and a tail */
    static float x[N];
    static uint16_t h1[N], h2[N];
    uint64_t s = 5;
    for (int i = 0; i < N; i++) /* normal, subnormal and overflowing f16 values */
        x[i] = urand(&s) * ldexpf(1.0f, (int)(rng_next(&s) % 48) - 30);
    for (int k = 0; k < 2; k++) {
        if (!simd[k])
            continue;
        simd[k]->to_f16(x, h1, N);
        p->to_f16(x, h2, N);
        CHECK_MSG(memcmp(h1, h2, sizeof(h1)) == 0, "%s: f16 conversion differs", simd[k]->name);
    }
}

/* ops_exp against libm: a sanity bound on the reference itself. */
TEST(ops_exp_is_close_to_expf)
{
    double worst = 0;
    for (float x = -87.0f; x < 88.0f; x += 0.0371f)
        worst = fmax(worst, fabs((double)ops_exp(x) / exp((double)x) - 1));
    CHECK_MSG(worst < 1e-6, "ops_exp relative error %g", worst);
    CHECK(ops_exp(0.0f) == 1.0f);
    CHECK(ops_exp(-INFINITY) < 1e-37f && ops_exp(-INFINITY) > 0);
}

/* Every SIMD attention kernel against the portable one, bit for bit, on
 * f16 and f32 caches in the tiled key layout: SmolLM2-135M's head_dim 64
 * and group of 3, other group sizes (1-5, and 9 for more than one group of
 * 8 in the portable loops), full chunks of 64 and partial ones (n = 1, 7, 8,
 * 9, 15, 16, 17, 61); head_dim 128 and 16, 24 (AVX-512 hands it to AVX2)
 * and 12 (both hand it to portable). Scores spread over tens (q, k up to 3)
 * so the softmax exponentials cover a wide range. */
TEST(attention_chunk_matches_portable_bit_for_bit)
{
    const struct cpu_ops *simd[2] = {cpu_ops_avx2(), cpu_ops_avx512()}, *p = cpu_ops_portable();
    enum { HDMAX = 128, NMAX = 64, GMAX = 9 };
    static float q[GMAX * HDMAX], kf[NMAX * HDMAX], vf[NMAX * HDMAX], sc[GMAX * NMAX];
    static float p1[GMAX * (HDMAX + 2)], p2[GMAX * (HDMAX + 2)];
    static uint16_t kh[NMAX * HDMAX], vh[NMAX * HDMAX];
    static const int hds[] = {64, 128, 16, 24, 12};
    static const int ns[] = {64, 61, 17, 16, 15, 9, 8, 7, 1}, gs[] = {3, 1, 2, 4, 5, 9};
    int ran = 0;
    for (size_t hi = 0; hi < sizeof(hds) / sizeof(hds[0]); hi++) {
        int hd = hds[hi];
        uint64_t s = 2 + hi;
        for (int i = 0; i < GMAX * hd; i++)
            q[i] = urand(&s) * 3;
        for (int t = 0; t < NMAX; t++)
            for (int d = 0; d < hd; d++) {
                float kv = urand(&s) * 3, vv = urand(&s);
                kf[ops_k_index(t, d, hd)] = kv;
                kh[ops_k_index(t, d, hd)] = q_f32_to_f16(kv);
                vf[t * hd + d] = vv;
                vh[t * hd + d] = q_f32_to_f16(vv);
            }
        for (int k = 0; k < 2; k++) {
            if (!simd[k])
                continue;
            ran++;
            for (size_t c = 0; c < sizeof(ns) / sizeof(ns[0]); c++)
                for (size_t gi = 0; gi < sizeof(gs) / sizeof(gs[0]); gi++)
                    for (int f32 = 0; f32 < 2; f32++) {
                        int n = ns[c], g = gs[gi], len = g * (hd + 2);
                        memset(p1, 0xA5, sizeof(p1));
                        memset(p2, 0x5A, sizeof(p2));
                        if (f32) {
                            simd[k]->attn_chunk_f32(q, g, hd, kf, vf, n, 0.125f, sc, p1);
                            p->attn_chunk_f32(q, g, hd, kf, vf, n, 0.125f, sc, p2);
                        } else {
                            simd[k]->attn_chunk(q, g, hd, kh, vh, n, 0.125f, sc, p1);
                            p->attn_chunk(q, g, hd, kh, vh, n, 0.125f, sc, p2);
                        }
                        int d = ndiff(p1, p2, len);
                        CHECK_MSG(d == 0, "%s: hd %d, n %d, g %d, f32 %d: %d of %d values differ",
                                  simd[k]->name, hd, n, g, f32, d, len);
                    }
        }
    }
    if (!ran)
        printf("skipped: no AVX2\n");
}

/* The portable table's bits are the same on every platform (no libm
 * function but fmaf and nearbyintf, both exact): a digest of its attention
 * and SiLU outputs on fixed inputs, pinned. engine_neon.sh runs this on
 * aarch64 too. A deliberate change of ops.h's arithmetic changes it. */
TEST(portable_bits_are_pinned)
{
    const struct cpu_ops *p = cpu_ops_portable();
    enum { HD = 64, N = 61, G = 3, NS = 1003 };
    static float q[G * HD], sc[G * 64], part[G * (HD + 2)], g[NS], up[NS];
    static uint16_t kh[64 * HD], vh[64 * HD];
    uint64_t s = 9;
    for (int i = 0; i < G * HD; i++)
        q[i] = urand(&s) * 3;
    for (int i = 0; i < 64 * HD; i++) {
        kh[i] = q_f32_to_f16(urand(&s) * 3);
        vh[i] = q_f32_to_f16(urand(&s));
    }
    for (int i = 0; i < NS; i++) {
        g[i] = urand(&s) * 20;
        up[i] = urand(&s) * 4;
    }
    p->attn_chunk(q, G, HD, kh, vh, N, 0.125f, sc, part);
    p->silu_mul(g, up, NS);
    uint64_t h = 1469598103934665603ull; /* FNV-1a over the output bytes */
    const unsigned char *b[2] = {(const unsigned char *)part, (const unsigned char *)g};
    const size_t len[2] = {sizeof(part), sizeof(g)};
    for (int k = 0; k < 2; k++)
        for (size_t i = 0; i < len[k]; i++)
            h = (h ^ b[k][i]) * 1099511628211ull;
    printf("portable digest %016llx\n", (unsigned long long)h);
    CHECK_MSG(h == 0xce1b118db531c673ull, "portable ops digest %016llx", (unsigned long long)h);
}

TEST_MAIN()
