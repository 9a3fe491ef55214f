/* Unit tests for engine/cpu/ops: the SIMD kernels against the portable
 * ones (attention chunks over f16 and f32 K/V, SwiGLU, f32 -> f16). */
#include <math.h>
#include <stdlib.h>

#include "rng.h"
#include "test.h"

#include "cpu/ops.h"
#include "format/quant.h"

static float urand(uint64_t *s)
{
    return (float)((rng_next(s) >> 40) / 16777216.0) * 2.0f - 1.0f;
}

TEST(silu_matches_portable)
{
    const struct cpu_ops *a = cpu_ops_avx2(), *p = cpu_ops_portable();
    if (!a) {
        printf("skipped: no AVX2\n");
        return;
    }
    enum { N = 1003 };
    float g1[N], g2[N], up[N];
    uint64_t s = 1;
    double worst = 0;
    for (int i = 0; i < N; i++) {
        g1[i] = g2[i] = urand(&s) * 20.0f;
        up[i] = urand(&s);
    }
    a->silu_mul(g1, up, N);
    p->silu_mul(g2, up, N);
    for (int i = 0; i < N; i++)
        worst = fmax(worst, fabs(g1[i] - g2[i]) / fmax(1e-30, fabs(g2[i])));
    CHECK_MSG(worst < 1e-6, "silu relative error %g", worst);
}

/* Every SIMD attention kernel against the portable one, on f16 and f32
 * caches in the tiled key layout, for head counts 1-5 and partial tiles. */
TEST(attention_chunk_matches_portable)
{
    const struct cpu_ops *simd[2] = {cpu_ops_avx2(), cpu_ops_avx512()}, *p = cpu_ops_portable();
    enum { HD = 64, NMAX = 64, GMAX = 5 };
    static float q[GMAX * HD], kf[NMAX * HD], vf[NMAX * HD], sc[GMAX * NMAX];
    static float p1[GMAX * (HD + 2)], p2[GMAX * (HD + 2)];
    static uint16_t kh[NMAX * HD], vh[NMAX * HD];
    uint64_t s = 2;
    for (int i = 0; i < GMAX * HD; i++)
        q[i] = urand(&s) * 3;
    for (int t = 0; t < NMAX; t++)
        for (int d = 0; d < HD; d++) {
            float kv = urand(&s) * 3, vv = urand(&s);
            kf[ops_k_index(t, d, HD)] = kv;
            kh[ops_k_index(t, d, HD)] = q_f32_to_f16(kv);
            vf[t * HD + d] = vv;
            vh[t * HD + d] = q_f32_to_f16(vv);
        }
    int ran = 0;
    for (int k = 0; k < 2; k++) {
        if (!simd[k])
            continue;
        ran++;
        const int ns[3] = {64, 61, 7}, gs[3] = {3, 5, 1};
        for (int c = 0; c < 3; c++)
            for (int f32 = 0; f32 < 2; f32++) {
                int n = ns[c], g = gs[c];
                if (f32) {
                    simd[k]->attn_chunk_f32(q, g, HD, kf, vf, n, 0.125f, sc, p1);
                    p->attn_chunk_f32(q, g, HD, kf, vf, n, 0.125f, sc, p2);
                } else {
                    simd[k]->attn_chunk(q, g, HD, kh, vh, n, 0.125f, sc, p1);
                    p->attn_chunk(q, g, HD, kh, vh, n, 0.125f, sc, p2);
                }
                double worst = 0;
                for (int h = 0; h < g; h++) {
                    const float *a = p1 + h * (HD + 2), *b = p2 + h * (HD + 2);
                    worst = fmax(worst, fabs(a[0] - b[0]));
                    worst = fmax(worst, fabs(a[1] / b[1] - 1));
                    for (int d = 0; d < HD; d++)
                        worst = fmax(worst, fabs(a[2 + d] - b[2 + d]) / b[1]);
                }
                CHECK_MSG(worst < 1e-5, "%s: n %d, g %d, f32 %d: error %g", simd[k]->name, n, g,
                          f32, worst);
            }
    }
    if (!ran)
        printf("skipped: no AVX2\n");
}

TEST_MAIN()
