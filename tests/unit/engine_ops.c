/* Unit tests for engine/cpu/ops: the SIMD kernels against the portable
 * ones (attention chunks over f16 and f32 K/V, SwiGLU, f32 -> f16). */
#include <math.h>
#include <stdlib.h>

#include "cpu/ops.h"
#include "quant.h"
#include "sample.h"
#include "test.h"

static float urand(uint64_t *s)
{
    return (float)((sample_rand_u64(s) >> 40) / 16777216.0) * 2.0f - 1.0f;
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

TEST(attention_chunk_matches_portable)
{
    const struct cpu_ops *a = cpu_ops_avx2(), *p = cpu_ops_portable();
    if (!a) {
        printf("skipped: no AVX2\n");
        return;
    }
    enum { G = 3, HD = 64, N = 61 };
    float q[G * HD], kf[N * HD], vf[N * HD], sc[G * N], p1[G * (HD + 2)], p2[G * (HD + 2)];
    uint16_t kh[N * HD], vh[N * HD];
    uint64_t s = 2;
    for (int i = 0; i < G * HD; i++)
        q[i] = urand(&s) * 3;
    for (int i = 0; i < N * HD; i++) {
        kf[i] = urand(&s) * 3;
        vf[i] = urand(&s);
        kh[i] = q_f32_to_f16(kf[i]);
        vh[i] = q_f32_to_f16(vf[i]);
    }
    for (int f32 = 0; f32 < 2; f32++) {
        if (f32) {
            a->attn_chunk_f32(q, G, HD, kf, vf, N, 0.125f, sc, p1);
            p->attn_chunk_f32(q, G, HD, kf, vf, N, 0.125f, sc, p2);
        } else {
            a->attn_chunk(q, G, HD, kh, vh, N, 0.125f, sc, p1);
            p->attn_chunk(q, G, HD, kh, vh, N, 0.125f, sc, p2);
        }
        double worst = 0;
        for (int h = 0; h < G; h++) {
            CHECK_NEAR(p1[h * (HD + 2)], p2[h * (HD + 2)], 1e-5);
            worst = fmax(worst, fabs(p1[h * (HD + 2) + 1] / p2[h * (HD + 2) + 1] - 1));
            for (int d = 0; d < HD; d++)
                worst = fmax(worst, fabs(p1[h * (HD + 2) + 2 + d] - p2[h * (HD + 2) + 2 + d]) /
                                        p2[h * (HD + 2) + 1]);
        }
        CHECK_MSG(worst < 1e-5, "attention (f32 %d) relative error %g", f32, worst);
    }
}

TEST_MAIN()
