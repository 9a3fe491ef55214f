/*
 * engine_quant: the type table, the scalar codecs at their edges, row
 * dequantization of hand-built blocks (nibble orders, scale decoders), the
 * quantizers (ggml reference rules, OCP MXFP4, NVFP4 with a tensor scale),
 * FP4 accuracy on 2^20 Gaussian values, round-trip stability, and the
 * activation preparation.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "rng.h"
#include "test.h"
#include "xalloc.h"

#include "cpu/qk.h"
#include "format/quant.h"

/* ---- deterministic random numbers ---- */

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static float rng_gauss(float sigma)
{
    double u = rng_unit(&rng_state), v = rng_unit(&rng_state);
    return (float)(sigma * sqrt(-2.0 * log(u + 1e-300)) * cos(2.0 * M_PI * v));
}

static double rel_rms(const float *x, const float *y, int64_t n)
{
    double num = 0, den = 0;
    for (int64_t i = 0; i < n; i++) {
        num += ((double)x[i] - y[i]) * ((double)x[i] - y[i]);
        den += (double)x[i] * x[i];
    }
    return sqrt(num / den);
}

static uint16_t h(float f)
{
    return q_f32_to_f16(f);
}

/* The E2M1 value table, undoubled, written out from the format (1 sign, 2
 * exponent bits with bias 1, 1 mantissa bit). */
static const float e2m1_values[16] = {0.0f,  0.5f,  1,  1.5f,  2,  3,  4,  6,
                                      -0.0f, -0.5f, -1, -1.5f, -2, -3, -4, -6};

TEST(type_table)
{
    CHECK_INT(q_info(Q_Q4_1)->bytes, 20);
    CHECK_INT(q_info(Q_Q4_1)->block, 32);
    CHECK_INT(q_info(Q_MXFP4)->bytes, 17);
    CHECK_INT(q_info(Q_NVFP4)->block, 64);
    CHECK_INT(q_info(Q_NVFP4)->bytes, 36);
    CHECK_INT(q_info(Q_Q4_K)->bytes, 144);
    CHECK_INT(q_info(Q_Q6_K)->bytes, 210);
    CHECK_INT(q_info(Q_BF16)->bytes, 2);
    CHECK(q_info(Q_Q8_1) && !q_info(Q_Q8_1)->weights);
    CHECK(q_info(13) && !q_info(13)->weights); /* q5_k: sized, not computed */
    CHECK(q_info(4) == NULL);                  /* removed id */
    CHECK(q_info(1000) == NULL);
    CHECK_INT(q_type_from_name("NVFP4"), Q_NVFP4);
    CHECK_INT(q_type_from_name("q8_0"), Q_Q8_0);
    CHECK_INT(q_type_from_name("q9_9"), -1);
    CHECK_INT(q_row_bytes(Q_Q4_1, 576), 18 * 20);
    CHECK_INT(q_row_bytes(Q_NVFP4, 576), 9 * 36);
    CHECK_INT(q_row_bytes(Q_F16, 7), 14);
    CHECK_INT(q_vec_type(Q_F16), Q_F32);
    CHECK_INT(q_vec_type(Q_MXFP4), Q_Q8_1);
}

TEST(e2m1_all_codes)
{
    for (int c = 0; c < 16; c++) {
        float v = q_e2m1_to_f32((uint8_t)c);
        CHECK_MSG(v == e2m1_values[c] && signbit(v) == signbit(e2m1_values[c]), "code %d -> %g", c,
                  v);
        CHECK_INT(q_f32_to_e2m1(v), c);
        CHECK_INT(qk_e2m1_x2[c], (int)(2 * e2m1_values[c]));
    }
}

TEST(e2m1_rounding)
{
    /* ties go to the even code (mantissa bit 0) */
    static const struct {
        float x;
        uint8_t code;
    } cases[] = {
        {0.25f, 0}, {0.26f, 1},  {0.75f, 2}, {0.74f, 1},  {1.25f, 2},    {1.75f, 4},
        {2.5f, 4},  {2.6f, 5},   {3.5f, 6},  {5.0f, 6},   {5.01f, 7},    {6.5f, 7},
        {1e9f, 7},  {-5.0f, 14}, {-0.1f, 8}, {-7.0f, 15}, {INFINITY, 7}, {NAN, 0},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
        CHECK_MSG(q_f32_to_e2m1(cases[i].x) == cases[i].code, "e2m1(%g) = %d, want %d", cases[i].x,
                  q_f32_to_e2m1(cases[i].x), cases[i].code);
}

TEST(e8m0_edges)
{
    CHECK(q_e8m0_to_f32(127) == 1.0f);
    CHECK(q_e8m0_to_f32(128) == 2.0f);
    CHECK(q_e8m0_to_f32(0) == ldexpf(1.0f, -127));
    CHECK(q_e8m0_to_f32(1) == ldexpf(1.0f, -126));
    CHECK(q_e8m0_to_f32(254) == ldexpf(1.0f, 127));
    CHECK(isnan(q_e8m0_to_f32(0xFF)));
    /* ggml's half decoder, which pairs with the doubled table */
    CHECK(qk_e8m0_half(0) == ldexpf(1.0f, -128));
    CHECK(qk_e8m0_half(1) == ldexpf(1.0f, -127));
    CHECK(qk_e8m0_half(127) == 0.5f);
    CHECK(qk_e8m0_half(254) == ldexpf(1.0f, 126));
}

TEST(e4m3_edges)
{
    CHECK(q_e4m3_to_f32(0x00) == 0.0f);
    CHECK(q_e4m3_to_f32(0x01) == ldexpf(1.0f, -9)); /* smallest subnormal */
    CHECK(q_e4m3_to_f32(0x07) == 7 * ldexpf(1.0f, -9));
    CHECK(q_e4m3_to_f32(0x08) == ldexpf(1.0f, -6)); /* smallest normal */
    CHECK(q_e4m3_to_f32(0x38) == 1.0f);
    CHECK(q_e4m3_to_f32(0x7E) == 448.0f);
    CHECK(isnan(q_e4m3_to_f32(0x7F)));
    CHECK(isnan(q_e4m3_to_f32(0xFF)));
    CHECK(q_e4m3_to_f32(0xB8) == -1.0f);
    CHECK_INT(q_f32_to_e4m3(0.0f), 0x00);
    CHECK_INT(q_f32_to_e4m3(ldexpf(1.0f, -9)), 0x01);
    CHECK_INT(q_f32_to_e4m3(ldexpf(1.0f, -10)), 0x00);        /* tie between 0 and 2^-9 -> 0 */
    CHECK_INT(q_f32_to_e4m3(1.5f * ldexpf(1.0f, -10)), 0x01); /* 0.75 ulp -> 1 */
    CHECK_INT(q_f32_to_e4m3(448.0f), 0x7E);
    CHECK_INT(q_f32_to_e4m3(1000.0f), 0x7E); /* saturates */
    CHECK_INT(q_f32_to_e4m3(INFINITY), 0x7E);
    CHECK_INT(q_f32_to_e4m3(NAN), 0x7F);
    CHECK_INT(q_f32_to_e4m3(1.0625f), 0x38); /* tie 1.0 / 1.125 -> even */
    CHECK_INT(q_f32_to_e4m3(1.1875f), 0x3A); /* tie 1.125 / 1.25 -> even */
    CHECK_INT(q_f32_to_e4m3(-2.0f), 0xC0);
    CHECK_INT(q_f32_to_e4m3(0.0155f), 0x08); /* rounds up into the normal range */
    for (int c = 0; c < 0x7F; c++)
        CHECK_MSG(q_f32_to_e4m3(q_e4m3_to_f32((uint8_t)c)) == c, "e4m3 code %#x", c);
    /* ggml's UE4M3 decoder: half value, 0x00 and 0x7F are zero, bit 7 ignored */
    CHECK(qk_ue4m3_half(0x38) == 0.5f);
    CHECK(qk_ue4m3_half(0x01) == ldexpf(1.0f, -10));
    CHECK(qk_ue4m3_half(0x7E) == 224.0f);
    CHECK(qk_ue4m3_half(0x7F) == 0.0f);
    CHECK(qk_ue4m3_half(0xB8) == 0.5f);
}

TEST(f16_bf16)
{
    CHECK_INT(q_f32_to_f16(1.0f), 0x3C00);
    CHECK_INT(q_f32_to_f16(-2.0f), 0xC000);
    CHECK_INT(q_f32_to_f16(65504.0f), 0x7BFF);
    CHECK_INT(q_f32_to_f16(65519.0f), 0x7BFF);
    CHECK_INT(q_f32_to_f16(65520.0f), 0x7C00);
    CHECK_INT(q_f32_to_f16(ldexpf(1.0f, -24)), 0x0001);
    CHECK_INT(q_f32_to_f16(ldexpf(1.0f, -25)), 0x0000);        /* tie -> even */
    CHECK_INT(q_f32_to_f16(3 * ldexpf(1.0f, -26)), 0x0001);    /* 0.75 ulp */
    CHECK_INT(q_f32_to_f16(1.0f + ldexpf(1.0f, -11)), 0x3C00); /* tie -> even */
    CHECK_INT(q_f32_to_f16(1.0f + 3 * ldexpf(1.0f, -11)), 0x3C02);
    CHECK_INT(q_f32_to_f16(ldexpf(1023.5f, -24)), 0x0400); /* subnormal rounds up to normal */
    CHECK(isnan(q_f16_to_f32(q_f32_to_f16(NAN))));
    CHECK(q_f16_to_f32(0x7C00) == INFINITY);
    CHECK(q_f16_to_f32(0x0001) == ldexpf(1.0f, -24));
    CHECK(q_f16_to_f32(0x8000) == 0.0f && signbit(q_f16_to_f32(0x8000)));
    int bad = 0;
    for (uint32_t c = 0; c < 0x10000; c++) {
        float f = q_f16_to_f32((uint16_t)c);
        if (!isnan(f) && q_f32_to_f16(f) != c)
            bad++;
    }
    CHECK_INT(bad, 0);
    CHECK(q_bf16_to_f32(0x3F80) == 1.0f);
    CHECK_INT(q_f32_to_bf16(1.0f + ldexpf(1.0f, -8)), 0x3F80); /* tie -> even */
    CHECK_INT(q_f32_to_bf16(1.0f + 3 * ldexpf(1.0f, -8)), 0x3F82);
    CHECK(isnan(q_bf16_to_f32(q_f32_to_bf16(NAN))));
}

/* ---- dequantization of hand-built blocks ---- */

TEST(dequant_q4_0_q4_1_q8_0)
{
    struct blk_q4_0 b0 = {.d = h(0.25f)};
    struct blk_q4_1 b1 = {.d = h(0.5f), .m = h(-1.0f)};
    struct blk_q8_0 b8 = {.d = h(0.125f)};
    float y[32];
    for (int j = 0; j < 16; j++) {
        b0.qs[j] = b1.qs[j] = (uint8_t)(j | (15 - j) << 4);
    }
    for (int j = 0; j < 32; j++)
        b8.qs[j] = (int8_t)(j * 8 - 128);
    q_dequant_row(Q_Q4_0, &b0, y, 32);
    for (int j = 0; j < 16; j++) {
        CHECK(y[j] == (j - 8) * 0.25f);
        CHECK(y[j + 16] == (7 - j) * 0.25f);
    }
    q_dequant_row(Q_Q4_1, &b1, y, 32);
    for (int j = 0; j < 16; j++) {
        CHECK(y[j] == j * 0.5f - 1.0f);
        CHECK(y[j + 16] == (15 - j) * 0.5f - 1.0f);
    }
    q_dequant_row(Q_Q8_0, &b8, y, 32);
    for (int j = 0; j < 32; j++)
        CHECK(y[j] == (j * 8 - 128) * 0.125f);
}

TEST(dequant_q5)
{
    struct blk_q5_0 b0 = {.d = h(1.0f)};
    struct blk_q5_1 b1 = {.d = h(2.0f), .m = h(0.5f)};
    uint32_t qh = 0xA5A5F00Fu;
    memcpy(b0.qh, &qh, 4);
    memcpy(b1.qh, &qh, 4);
    for (int j = 0; j < 16; j++)
        b0.qs[j] = b1.qs[j] = (uint8_t)(j | ((j * 3) & 15) << 4);
    float y[32];
    q_dequant_row(Q_Q5_0, &b0, y, 32);
    for (int j = 0; j < 32; j++) {
        int nib = j < 16 ? j : (((j - 16) * 3) & 15), hi = (qh >> j) & 1;
        CHECK_MSG(y[j] == (float)((nib | hi << 4) - 16), "q5_0 elem %d = %g", j, y[j]);
    }
    q_dequant_row(Q_Q5_1, &b1, y, 32);
    for (int j = 0; j < 32; j++) {
        int nib = j < 16 ? j : (((j - 16) * 3) & 15), hi = (qh >> j) & 1;
        CHECK_MSG(y[j] == (float)(nib | hi << 4) * 2.0f + 0.5f, "q5_1 elem %d = %g", j, y[j]);
    }
}

TEST(dequant_q4_k)
{
    struct blk_q4_k b = {.d = h(1.0f), .dmin = h(0.5f)};
    /* 6-bit scales/mins: entries 0..3 in the low bits of bytes 0..7, entries
     * 4..7 split over bytes 8..11 (low nibbles = scales, high = mins) and the
     * top two bits of bytes 0..7 */
    static const uint8_t s[12] = {1 | 1 << 6, 2,          3 | 2 << 6, 4 | 3 << 6, 5 | 1 << 6, 6,
                                  7 | 2 << 6, 8 | 3 << 6, 0x21,       0x43,       0x65,       0x87};
    static const int sc[8] = {1, 2, 3, 4, 17, 3, 37, 55}, mn[8] = {5, 6, 7, 8, 18, 4, 38, 56};
    memcpy(b.scales, s, 12);
    for (int i = 0; i < 128; i++)
        b.qs[i] = (uint8_t)((i & 15) | (15 - (i & 15)) << 4);
    float y[256];
    q_dequant_row(Q_Q4_K, &b, y, 256);
    for (int c = 0; c < 4; c++) {
        for (int l = 0; l < 32; l++) {
            float lo = (float)sc[2 * c] * (float)(l & 15) - 0.5f * (float)mn[2 * c];
            float hi = (float)sc[2 * c + 1] * (float)(15 - (l & 15)) - 0.5f * (float)mn[2 * c + 1];
            CHECK_MSG(y[64 * c + l] == lo, "q4_k elem %d = %g want %g", 64 * c + l, y[64 * c + l],
                      lo);
            CHECK_MSG(y[64 * c + 32 + l] == hi, "q4_k elem %d = %g want %g", 64 * c + 32 + l,
                      y[64 * c + 32 + l], hi);
        }
    }
}

TEST(dequant_q6_k)
{
    struct blk_q6_k b = {.d = h(0.5f)};
    int q[256];
    for (int e = 0; e < 256; e++)
        q[e] = (e * 7 + 3) % 64;
    for (int s = 0; s < 16; s++)
        b.scales[s] = (int8_t)(s * 9 - 70);
    /* the layout: per 128 elements, 64 ql bytes and 32 qh bytes; element
     * 32g + l (g = 0..3, l < 32) uses ql[l + 32 (g % 2)] nibble g / 2 and qh[l]
     * bits 2g..2g+1 */
    for (int half = 0; half < 2; half++) {
        for (int g = 0; g < 4; g++) {
            for (int l = 0; l < 32; l++) {
                int v = q[128 * half + 32 * g + l];
                uint8_t *ql = &b.ql[64 * half + l + 32 * (g % 2)];
                *ql |= (uint8_t)((v & 15) << (4 * (g / 2)));
                b.qh[32 * half + l] |= (uint8_t)((v >> 4) << (2 * g));
            }
        }
    }
    float y[256];
    q_dequant_row(Q_Q6_K, &b, y, 256);
    for (int e = 0; e < 256; e++)
        CHECK_MSG(y[e] == 0.5f * (float)b.scales[e / 16] * (float)(q[e] - 32), "q6_k elem %d = %g",
                  e, y[e]);
}

TEST(dequant_mxfp4_nibble_order)
{
    struct blk_mxfp4 b = {.e = 128}; /* scale 2 */
    for (int j = 0; j < 16; j++)
        b.qs[j] = (uint8_t)(j | (15 - j) << 4);
    float y[32];
    q_dequant_row(Q_MXFP4, &b, y, 32);
    for (int j = 0; j < 16; j++) {
        CHECK_MSG(y[j] == 2 * e2m1_values[j], "mxfp4 elem %d = %g", j, y[j]);
        CHECK_MSG(y[j + 16] == 2 * e2m1_values[15 - j], "mxfp4 elem %d = %g", j + 16, y[j + 16]);
    }
    b.e = 0; /* 2^-127: ggml's subnormal pattern */
    q_dequant_row(Q_MXFP4, &b, y, 32);
    CHECK(y[1] == ldexpf(0.5f, -127));
}

TEST(dequant_nvfp4_nibble_order)
{
    struct blk_nvfp4 b = {.d = {0x38, 0x40, 0x30, 0x01}}; /* 1, 2, 0.5, 2^-9 */
    const float scale[4] = {1.0f, 2.0f, 0.5f, ldexpf(1.0f, -9)};
    for (int s = 0; s < 4; s++)
        for (int j = 0; j < 8; j++)
            b.qs[8 * s + j] = (uint8_t)(((j + s) & 15) | ((j + 8 + s) & 15) << 4);
    float y[64];
    q_dequant_row(Q_NVFP4, &b, y, 64);
    for (int s = 0; s < 4; s++) {
        for (int j = 0; j < 8; j++) {
            CHECK_MSG(y[16 * s + j] == e2m1_values[(j + s) & 15] * scale[s], "nvfp4 elem %d",
                      16 * s + j);
            CHECK_MSG(y[16 * s + j + 8] == e2m1_values[(j + 8 + s) & 15] * scale[s],
                      "nvfp4 elem %d", 16 * s + j + 8);
        }
    }
}

TEST(dequant_float_types)
{
    uint16_t hv[3] = {0x3C00, 0xC400, 0x7BFF}, bv[3] = {0x3F80, 0xC040, 0x0000};
    float f[3] = {1.5f, -2.25f, 1e-3f}, y[3];
    q_dequant_row(Q_F16, hv, y, 3);
    CHECK(y[0] == 1.0f && y[1] == -4.0f && y[2] == 65504.0f);
    q_dequant_row(Q_BF16, bv, y, 3);
    CHECK(y[0] == 1.0f && y[1] == -3.0f && y[2] == 0.0f);
    q_dequant_row(Q_F32, f, y, 3);
    CHECK(memcmp(f, y, sizeof(f)) == 0);
}

/* ---- quantizers ---- */

TEST(quant_reference_rules)
{
    float x[32];
    for (int j = 0; j < 32; j++)
        x[j] = (float)j;
    struct blk_q4_1 b1;
    q_quant_row(Q_Q4_1, x, &b1, 32, NULL);
    CHECK(q_f16_to_f32(b1.m) == 0.0f);
    CHECK_INT(b1.d, h(31.0f / 15));
    /* q = (int)(x / d + 0.5): element 1 -> 0, 3 -> 1, 30 -> 15, 16 -> 8 */
    CHECK_INT(b1.qs[1] & 15, 0);
    CHECK_INT(b1.qs[3] & 15, 1);
    CHECK_INT(b1.qs[14] >> 4, 15);
    CHECK_INT(b1.qs[0] >> 4, 8);

    struct blk_q8_0 b8;
    x[5] = -127.0f * 0.5f; /* amax 63.5 -> d = 0.5 */
    for (int j = 0; j < 32; j++)
        x[j] = j == 5 ? x[5] : (float)j * 0.25f;
    q_quant_row(Q_Q8_0, x, &b8, 32, NULL);
    CHECK(q_f16_to_f32(b8.d) == 0.5f);
    CHECK_INT(b8.qs[5], -127);
    CHECK_INT(b8.qs[2], 1);   /* 0.5 / 0.5 */
    CHECK_INT(b8.qs[1], 1);   /* roundf(0.5) rounds half away from zero */
    CHECK_INT(b8.qs[3], 2);   /* roundf(1.5) */
    CHECK_INT(b8.qs[31], 16); /* roundf(15.5) */

    struct blk_q4_0 b0;
    for (int j = 0; j < 32; j++)
        x[j] = (float)(j - 16);
    q_quant_row(Q_Q4_0, x, &b0, 32, NULL);
    CHECK(q_f16_to_f32(b0.d) == 2.0f); /* max = -16 -> d = -16 / -8 */
    CHECK_INT(b0.qs[0] & 15, 0);       /* -16 / 2 + 8.5 -> 0 */
    CHECK_INT(b0.qs[15] >> 4, 15);     /* 15 / 2 + 8.5 = 16 -> min(15) */
}

TEST(quant_mxfp4_ocp)
{
    float x[32] = {0};
    struct blk_mxfp4 b;
    x[0] = 5.0f;  /* amax 5: e = floor(log2 5) - 2 = 0 -> byte 127; 5 ties to 4 */
    x[1] = -3.2f; /* -> -3 */
    x[17] = 0.3f; /* -> 0.5 */
    q_quant_row(Q_MXFP4, x, &b, 32, NULL);
    CHECK_INT(b.e, 127);
    CHECK_INT(b.qs[0] & 15, 6);
    CHECK_INT(b.qs[1] & 15, 13);
    CHECK_INT(b.qs[1] >> 4, 1);
    x[0] = 7.0f; /* still e = 0 (floor(log2 7) = 2); 7 saturates to 6 */
    q_quant_row(Q_MXFP4, x, &b, 32, NULL);
    CHECK_INT(b.e, 127);
    CHECK_INT(b.qs[0] & 15, 7);
    /* all 7.5: the OCP exponent clips to 6; the search prefers e+1 (7.5/2 -> 4 -> 8) */
    for (int j = 0; j < 32; j++)
        x[j] = 7.5f;
    q_quant_row(Q_MXFP4, x, &b, 32, NULL);
    CHECK_INT(b.e, 127);
    CHECK_INT(b.qs[3], 0x77);
    q_quant_row(Q_MXFP4, x, &b, 32, &(struct q_quant_opts){.mxfp4_search = 1});
    CHECK_INT(b.e, 128);
    CHECK_INT(b.qs[3], 0x66);
    memset(x, 0, sizeof(x));
    q_quant_row(Q_MXFP4, x, &b, 32, NULL);
    CHECK_INT(b.e, 0);
    CHECK_INT(b.qs[0], 0);
}

TEST(quant_nvfp4_tensor_scale)
{
    float x[64] = {0};
    struct blk_nvfp4 b;
    x[0] = 2688.0f; /* tensor amax: s2 = 2688 / (6 * 448) = 1 */
    x[16] = 6.0f;   /* sub-block 1: scale 6 / 6 = 1 -> 0x38 */
    x[17] = 3.0f;   /* -> code 5 */
    x[40] = -1.5f;  /* sub-block 2: amax 1.5, scale 0.25 -> 0x28; -1.5 / 0.25 = -6 -> 15 */
    x[41] = 0.3f;   /* 0.3 / 0.25 = 1.2 -> 1.0 -> code 2 */
    CHECK(q_nvfp4_tensor_scale(x, 64) == 1.0f);
    q_quant_row(Q_NVFP4, x, &b, 64, NULL);
    CHECK_INT(b.d[0], 0x7E); /* 448 */
    CHECK_INT(b.d[1], 0x38);
    CHECK_INT(b.d[2], 0x28);
    CHECK_INT(b.d[3], 0x00); /* all zero */
    CHECK_INT(b.qs[0] & 15, 7);
    CHECK_INT(b.qs[8] & 15, 7);
    CHECK_INT(b.qs[9] & 15, 5);
    CHECK_INT(b.qs[16] >> 4, 15); /* element 40 = 16*2 + 8: high nibble of qs[16] */
    CHECK_INT(b.qs[17] >> 4, 2);
    /* an explicit tensor scale overrides the row's own */
    q_quant_row(Q_NVFP4, x, &b, 64, &(struct q_quant_opts){.nvfp4_tensor_scale = 2.0f});
    CHECK_INT(b.d[1], q_f32_to_e4m3(0.5f));
    float zero[64] = {0};
    CHECK(q_nvfp4_tensor_scale(zero, 64) == 1.0f);
}

#define BIG (1 << 20)

TEST(fp4_accuracy_gaussian)
{
    float *x = xmalloc(BIG * sizeof(float)), *y = xmalloc(BIG * sizeof(float));
    uint8_t *q = xmalloc(q_row_bytes(Q_MXFP4, BIG) + q_row_bytes(Q_NVFP4, BIG));
    for (int i = 0; i < BIG; i++)
        x[i] = rng_gauss(0.02f);
    q_quant_row(Q_MXFP4, x, q, BIG, NULL);
    q_dequant_row(Q_MXFP4, q, y, BIG);
    double e_mx = rel_rms(x, y, BIG);
    q_quant_row(Q_MXFP4, x, q, BIG, &(struct q_quant_opts){.mxfp4_search = 1});
    q_dequant_row(Q_MXFP4, q, y, BIG);
    double e_mx3 = rel_rms(x, y, BIG);
    float s2 = q_nvfp4_tensor_scale(x, BIG);
    q_quant_row(Q_NVFP4, x, q, BIG, &(struct q_quant_opts){.nvfp4_tensor_scale = s2});
    q_dequant_row(Q_NVFP4, q, y, BIG);
    for (int i = 0; i < BIG; i++)
        y[i] *= s2;
    double e_nv = rel_rms(x, y, BIG);
    printf("relative rms on 2^20 N(0, 0.02^2): mxfp4 %.4f, mxfp4 best-of-3 %.4f, nvfp4 %.4f\n",
           e_mx, e_mx3, e_nv);
    CHECK_MSG(e_mx < 0.13, "mxfp4 rel rms %g", e_mx);
    CHECK_MSG(e_mx3 < e_mx && e_mx3 < 0.13, "mxfp4 search rel rms %g", e_mx3);
    CHECK_MSG(e_nv < 0.10, "nvfp4 rel rms %g", e_nv);
    CHECK_MSG(e_nv < e_mx3, "nvfp4 %g should beat mxfp4 %g", e_nv, e_mx3);
    free(x);
    free(y);
    free(q);
}

/* quantize -> dequantize -> quantize gives the same bytes */
static void check_stable(uint32_t type, const struct q_quant_opts *opts, float s2, int64_t n,
                         const float *x, const char *what)
{
    size_t bytes = q_row_bytes(type, n);
    uint8_t *q1 = xmalloc(bytes), *q2 = xmalloc(bytes);
    float *y = xmalloc((size_t)n * sizeof(float));
    q_quant_row(type, x, q1, n, opts);
    q_dequant_row(type, q1, y, n);
    for (int64_t i = 0; i < n; i++)
        y[i] *= s2;
    q_quant_row(type, y, q2, n, opts);
    size_t diff = 0;
    for (size_t i = 0; i < bytes; i++)
        diff += q1[i] != q2[i];
    CHECK_MSG(diff == 0, "%s: %zu of %zu bytes changed on requantization", what, diff, bytes);
    free(q1);
    free(q2);
    free(y);
}

TEST(fp4_round_trip_stable)
{
    float *x = xmalloc(BIG * sizeof(float));
    for (int i = 0; i < BIG; i++)
        x[i] = i % 1000 == 7 ? rng_gauss(0.4f) : rng_gauss(0.02f); /* with outliers */
    check_stable(Q_MXFP4, NULL, 1.0f, BIG, x, "mxfp4");
    check_stable(Q_MXFP4, &(struct q_quant_opts){.mxfp4_search = 1}, 1.0f, BIG, x,
                 "mxfp4 best-of-3");
    float s2 = q_nvfp4_tensor_scale(x, BIG);
    check_stable(Q_NVFP4, &(struct q_quant_opts){.nvfp4_tensor_scale = s2}, s2, BIG, x,
                 "nvfp4 fixed s2");
    check_stable(Q_NVFP4, NULL, 1.0f, BIG, x, "nvfp4 derived s2");
    free(x);
}

TEST(every_weight_type_quantizes)
{
    static const struct {
        uint32_t type;
        double max_rel_rms;
    } cases[] = {
        {Q_F32, 0},     {Q_F16, 1e-3},   {Q_BF16, 5e-3},  {Q_Q8_0, 0.01},
        {Q_Q5_0, 0.05}, {Q_Q5_1, 0.045}, {Q_Q4_0, 0.1},   {Q_Q4_1, 0.09},
        {Q_Q4_K, 0.1},  {Q_Q6_K, 0.03},  {Q_MXFP4, 0.13}, {Q_NVFP4, 0.10},
    };
    enum { N = 256 * 64 };
    static float x[N], y[N];
    static uint8_t q[N * 4];
    for (int i = 0; i < N; i++)
        x[i] = rng_gauss(0.02f);
    for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
        uint32_t t = cases[c].type;
        float s2 = t == Q_NVFP4 ? q_nvfp4_tensor_scale(x, N) : 1.0f;
        q_quant_row(t, x, q, N, NULL);
        q_dequant_row(t, q, y, N);
        for (int i = 0; i < N; i++)
            y[i] *= s2;
        double e = rel_rms(x, y, N);
        CHECK_MSG(e <= cases[c].max_rel_rms, "%s: rel rms %g > %g", q_info(t)->name, e,
                  cases[c].max_rel_rms);
    }
}

/* ---- activation preparation ---- */

TEST(act_prepare_values)
{
    struct q_act a;
    float x[64];
    q_act_init(&a, 4, 64);
    for (int j = 0; j < 32; j++)
        x[j] = (float)(j - 16); /* amax 16: d = f16(16/127), q = rne(x * 127/16) */
    for (int j = 32; j < 64; j++)
        x[j] = 0.0f;
    q_act_prepare(&a, Q_Q4_1, x, 64, 1, 64);
    CHECK_INT(a.vec_type, Q_Q8_1);
    float y[64];
    q_act_dequant_row(&a, 0, y);
    float d = q_f16_to_f32(q_f32_to_f16(16.0f / 127.0f));
    int sum = 0;
    for (int j = 0; j < 32; j++) {
        float v = (float)(j - 16) * (127.0f / 16.0f);
        int qv = (int)nearbyintf(v);
        sum += qv;
        CHECK_MSG(y[j] == (float)qv * d, "act elem %d = %g want %g", j, y[j], (float)qv * d);
    }
    CHECK(qk_act_sa(&a, 0)[0] == d * (float)sum);
    for (int j = 32; j < 64; j++)
        CHECK(y[j] == 0.0f);
    q_act_prepare(&a, Q_F16, x, 64, 1, 64);
    CHECK_INT(a.vec_type, Q_F32);
    q_act_dequant_row(&a, 0, y);
    CHECK(memcmp(x, y, sizeof(x)) == 0);
    q_act_release(&a);
}

TEST(act_prepare_in_pieces)
{
    enum { R = 13, C = 576 + 32 };
    static float x[R * (C + 5)];
    for (int i = 0; i < R * (C + 5); i++)
        x[i] = rng_gauss(1.0f) * (i % 97 == 0 ? 30.0f : 1.0f);
    for (int j = 0; j < 32; j++)
        x[3 * (C + 5) + 64 + j] = 0.0f; /* an all-zero block */
    struct q_act one, parts;
    q_act_init(&one, R, C);
    q_act_init(&parts, R, C);
    q_act_prepare(&one, Q_MXFP4, x, C + 5, R, C);
    q_act_shape(&parts, Q_MXFP4, R, C);
    q_act_prepare_rows(&parts, x, C + 5, 5, R);
    q_act_prepare_rows(&parts, x, C + 5, 0, 2);
    q_act_prepare_rows(&parts, x, C + 5, 2, 5);
    CHECK(one.row_bytes == parts.row_bytes);
    CHECK(memcmp(one.data, parts.data, one.row_bytes * R) == 0);
    q_act_release(&one);
    q_act_release(&parts);
}

TEST(act_prepare_same_on_every_isa)
{
    enum { R = 9, C = 1536 + 32 };
    static float x[R * C];
    for (int i = 0; i < R * C; i++)
        x[i] = rng_gauss(1.0f) * (i % 61 == 0 ? 100.0f : 1.0f) * (i / C == 4 ? 1e-6f : 1.0f);
    for (int j = 0; j < 32; j++)
        x[2 * C + 32 + j] = 0.0f;
    for (int j = 0; j < 32; j++)
        x[5 * C + 64 + j] = rng_gauss(1e-30f); /* scale below f16's range */
    for (int j = 0; j < 32; j++)
        x[6 * C + 96 + j] = rng_gauss(1e-6f); /* scale subnormal in f16 */
    struct q_act ref, got;
    q_act_init(&ref, R, C);
    q_act_init(&got, R, C);
    q_act_shape(&ref, Q_Q8_0, R, C);
    q_act_shape(&got, Q_Q8_0, R, C);
    qk_ref_act_q8(&ref, x, C, 0, R);
    for (int isa = Q_ISA_PORTABLE; isa <= Q_ISA_NEON; isa++) {
        const struct q_kernels *k = q_kernels_select((enum q_isa)isa);
        if (!k) {
            printf("skipped: %d not supported by this CPU\n", isa);
            continue;
        }
        memset(got.data, 0xAB, got.cap_bytes);
        k->act_q8(&got, x, C, 0, R);
        for (int r = 0; r < R; r++)
            CHECK_MSG(memcmp(qk_act_row(&ref, r), qk_act_row(&got, r), qk_act_used_bytes(C)) == 0,
                      "%s act_q8 differs in row %d", q_kernels_name(k), r);
    }
    q_act_release(&ref);
    q_act_release(&got);
}

TEST_MAIN()
