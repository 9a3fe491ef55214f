/*
 * engine_kernels: q_matmul against a double-precision reference (dequantized
 * weights x dequantized prepared activations) for every weight type, batch
 * sizes 1, 3, 16, 64 and odd row ranges; every ISA table against the
 * portable one (decoders byte for byte, results bit for bit, the batched
 * tiles over many odd shapes and random block bytes); batch and row-range
 * invariance; the multi-chunk path for long rows.
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

static uint64_t rng_state = 0x2545F4914F6CDD1Dull;
static float rng_gauss(float sigma)
{
    double u = rng_unit(&rng_state), v = rng_unit(&rng_state);
    return (float)(sigma * sqrt(-2.0 * log(u + 1e-300)) * cos(2.0 * M_PI * v));
}

static const uint32_t all_types[] = {Q_F32,  Q_F16,  Q_BF16, Q_Q4_0, Q_Q4_1,  Q_Q5_0,
                                     Q_Q5_1, Q_Q8_0, Q_Q4_K, Q_Q6_K, Q_MXFP4, Q_NVFP4};
#define N_TYPES (sizeof(all_types) / sizeof(all_types[0]))

/* A quantized random matrix and its dequantized values (f32 and NVFP4's scale). */
struct mat {
    struct q_matrix m;
    void *data;
    float *deq; /* rows x cols, with m.scale applied */
};

static void mat_make(struct mat *mt, uint32_t type, int64_t rows, int64_t cols)
{
    float *x = xmalloc((size_t)(rows * cols) * sizeof(float));
    for (int64_t i = 0; i < rows * cols; i++)
        x[i] = rng_gauss(0.02f) + (i % 131 == 0 ? 0.05f : 0.0f);
    mt->m = (struct q_matrix){.type = type,
                              .rows = rows,
                              .cols = cols,
                              .row_bytes = q_row_bytes(type, cols),
                              .scale = 1.0f};
    if (type == Q_NVFP4)
        mt->m.scale = q_nvfp4_tensor_scale(x, rows * cols);
    mt->data = xmalloc(mt->m.row_bytes * (size_t)rows);
    mt->deq = xmalloc((size_t)(rows * cols) * sizeof(float));
    struct q_quant_opts opts = {.nvfp4_tensor_scale = mt->m.scale};
    for (int64_t r = 0; r < rows; r++) {
        void *row = (uint8_t *)mt->data + (size_t)r * mt->m.row_bytes;
        q_quant_row(type, x + r * cols, row, cols, &opts);
        q_dequant_row(type, row, mt->deq + r * cols, cols);
        for (int64_t j = 0; j < cols; j++)
            mt->deq[r * cols + j] *= mt->m.scale;
    }
    mt->m.data = mt->data;
    free(x);
}

static void mat_free(struct mat *mt)
{
    free(mt->data);
    free(mt->deq);
}

static float *acts(int64_t rows, int64_t cols)
{
    float *x = xmalloc((size_t)(rows * cols) * sizeof(float));
    for (int64_t i = 0; i < rows * cols; i++)
        x[i] = rng_gauss(1.0f) * (i % 37 == 0 ? 8.0f : 1.0f);
    return x;
}

static int64_t cols_for(uint32_t type, int variant)
{
    static const int64_t k_cols[] = {768, 512}, cols32[] = {576, 544}, colsf[] = {576, 100};
    if (type == Q_Q4_K || type == Q_Q6_K)
        return k_cols[variant];
    if (type == Q_NVFP4)
        return cols32[0] + 64 * variant;
    if (qk_type_is_float(type))
        return colsf[variant];
    return cols32[variant]; /* 544 = 17 blocks: an odd trailing 32-block */
}

/* |y - ref| against a double-precision reference with the prepared
 * activations' values; the bound is relative to sum |w * a|. */
static void check_against_reference(const struct mat *mt, const struct q_act *a, const float *y,
                                    int64_t ldy, int64_t r0, int64_t r1, const char *what)
{
    int64_t cols = mt->m.cols;
    float *av = xmalloc((size_t)cols * sizeof(float));
    int bad = 0;
    double worst = 0;
    for (int64_t b = 0; b < a->rows; b++) {
        q_act_dequant_row(a, b, av);
        for (int64_t r = r0; r < r1; r++) {
            double ref = 0, mag = 0;
            for (int64_t j = 0; j < cols; j++) {
                ref += (double)mt->deq[r * cols + j] * av[j];
                mag += fabs((double)mt->deq[r * cols + j] * av[j]);
            }
            double err = fabs(y[b * ldy + r] - ref) / (mag + 1e-30);
            worst = err > worst ? err : worst;
            bad += err > 2e-6;
        }
    }
    CHECK_MSG(bad == 0, "%s: %d outputs off the reference (worst %.3g of sum|w a|)", what, bad,
              worst);
    free(av);
}

static const struct q_kernels *tables[4];
static int n_tables;

static void init_tables(void)
{
    if (n_tables)
        return;
    for (int isa = Q_ISA_PORTABLE; isa <= Q_ISA_NEON; isa++) {
        const struct q_kernels *k = q_kernels_select((enum q_isa)isa);
        if (k)
            tables[n_tables++] = k;
        else
            printf("skipped: kernel table %d (CPU lacks it)\n", isa);
    }
}

TEST(select)
{
    const struct q_kernels *k = q_kernels_select(Q_ISA_AUTO);
    CHECK(k != NULL);
    CHECK_STR(q_kernels_name(q_kernels_select(Q_ISA_PORTABLE)), "portable");
    printf("auto kernels: %s\n", q_kernels_name(k));
    CHECK_INT(q_isa_from_name("avx2"), Q_ISA_AVX2);
    CHECK_INT(q_isa_from_name("neon"), Q_ISA_NEON);
    CHECK_INT(q_isa_from_name("sse2"), -1);
}

/* The reference test: every type, every ISA, B = 1, 3, 16, 64, odd row ranges. */
TEST(matmul_matches_reference)
{
    init_tables();
    static const int64_t batches[] = {1, 3, 16, 64};
    const int64_t rows = 37, r0 = 3, r1 = 34;
    for (size_t ti = 0; ti < N_TYPES; ti++) {
        for (int variant = 0; variant < 2; variant++) {
            uint32_t type = all_types[ti];
            int64_t cols = cols_for(type, variant);
            struct mat mt;
            mat_make(&mt, type, rows, cols);
            float *x = acts(64, cols);
            struct q_act a;
            q_act_init(&a, 64, cols);
            float *y = xmalloc((size_t)(64 * rows) * sizeof(float));
            for (size_t bi = 0; bi < 4; bi++) {
                q_act_prepare(&a, type, x, cols, batches[bi], cols);
                for (int k = 0; k < n_tables; k++) {
                    char what[96];
                    snprintf(what, sizeof(what), "%s cols %lld B %lld %s", q_info(type)->name,
                             (long long)cols, (long long)batches[bi], q_kernels_name(tables[k]));
                    q_matmul(tables[k], &mt.m, &a, y, rows, r0, r1);
                    check_against_reference(&mt, &a, y, rows, r0, r1, what);
                }
            }
            free(y);
            free(x);
            q_act_release(&a);
            mat_free(&mt);
        }
    }
}

/* Every ISA gives the same bits as the portable table, and the same bits
 * for a row whatever the batch it sits in and the row range it is part of. */
TEST(matmul_isa_equal_and_batch_invariant)
{
    init_tables();
    const int64_t rows = 21, B = 16;
    for (size_t ti = 0; ti < N_TYPES; ti++) {
        uint32_t type = all_types[ti];
        int64_t cols = cols_for(type, 1);
        struct mat mt;
        mat_make(&mt, type, rows, cols);
        float *x = acts(B, cols);
        struct q_act a, one;
        q_act_init(&a, B, cols);
        q_act_init(&one, 1, cols);
        q_act_prepare(&a, type, x, cols, B, cols);
        float *ref = xmalloc((size_t)(B * rows) * sizeof(float));
        float *y = xmalloc((size_t)(B * rows) * sizeof(float));
        q_matmul(tables[0], &mt.m, &a, ref, rows, 0, rows);
        for (int k = 0; k < n_tables; k++) {
            const struct q_kernels *kt = tables[k];
            q_matmul(kt, &mt.m, &a, y, rows, 0, rows);
            CHECK_MSG(memcmp(y, ref, sizeof(float) * (size_t)(B * rows)) == 0,
                      "%s: %s differs from portable", q_info(type)->name, q_kernels_name(kt));
            /* row ranges split unevenly give the same bits */
            memset(y, 0, sizeof(float) * (size_t)(B * rows));
            q_matmul(kt, &mt.m, &a, y, rows, 0, 5);
            q_matmul(kt, &mt.m, &a, y, rows, 5, 6);
            q_matmul(kt, &mt.m, &a, y, rows, 6, rows);
            CHECK_MSG(memcmp(y, ref, sizeof(float) * (size_t)(B * rows)) == 0,
                      "%s: %s row split changes results", q_info(type)->name, q_kernels_name(kt));
            /* each activation row alone (B = 1) gives the same bits as inside B = 16 */
            int diff = 0;
            for (int64_t b = 0; b < B; b++) {
                float y1[21];
                q_act_prepare(&one, type, x + b * cols, cols, 1, cols);
                q_matmul(kt, &mt.m, &one, y1, rows, 0, rows);
                diff += memcmp(y1, ref + b * rows, sizeof(y1)) != 0;
            }
            CHECK_MSG(diff == 0, "%s: %s: %d of 16 rows differ alone vs batched",
                      q_info(type)->name, q_kernels_name(kt), diff);
            /* and inside batches of 3 (the fused small-batch kernels) and 7 (a
             * tile size that leaves a remainder), over uneven row ranges */
            static const int sizes[] = {3, 7};
            for (int si = 0; si < 2; si++) {
                int n = sizes[si];
                struct q_act part;
                float yp[7 * 21];
                q_act_init(&part, n, cols);
                q_act_prepare(&part, type, x + 9 * cols, cols, n, cols);
                q_matmul(kt, &mt.m, &part, yp, rows, 0, 7);
                q_matmul(kt, &mt.m, &part, yp, rows, 7, 10);
                q_matmul(kt, &mt.m, &part, yp, rows, 10, rows);
                CHECK_MSG(memcmp(yp, ref + 9 * rows, sizeof(float) * (size_t)(n * rows)) == 0,
                          "%s: %s: batch of %d differs", q_info(type)->name, q_kernels_name(kt), n);
                q_act_release(&part);
            }
            /* a single activation row over uneven row ranges */
            float y1[21];
            q_act_prepare(&one, type, x + 4 * cols, cols, 1, cols);
            q_matmul(kt, &mt.m, &one, y1, rows, 0, 6);
            q_matmul(kt, &mt.m, &one, y1, rows, 6, 13);
            q_matmul(kt, &mt.m, &one, y1, rows, 13, rows);
            CHECK_MSG(memcmp(y1, ref + 4 * rows, sizeof(y1)) == 0,
                      "%s: %s: B = 1 row split changes results", q_info(type)->name,
                      q_kernels_name(kt));
        }
        free(ref);
        free(y);
        free(x);
        q_act_release(&a);
        q_act_release(&one);
        mat_free(&mt);
    }
}

/* Decoders: every ISA produces the portable decoder's bytes, from random
 * block bytes (finite f16 scales). */
TEST(decoders_match_portable)
{
    init_tables();
    static const uint32_t qtypes[] = {Q_Q4_0, Q_Q4_1, Q_Q5_0,  Q_Q5_1, Q_Q8_0,
                                      Q_Q4_K, Q_Q6_K, Q_MXFP4, Q_NVFP4};
    static struct qk_dec ref, got;
    static uint8_t raw[QK_CHUNK * 2];
    for (size_t ti = 0; ti < sizeof(qtypes) / sizeof(qtypes[0]); ti++) {
        uint32_t type = qtypes[ti];
        const struct q_type_info *info = q_info(type);
        int64_t n = type == Q_Q4_K || type == Q_Q6_K ? 1024 : type == Q_NVFP4 ? 960 : 992;
        int64_t nblk = n / info->block, npad = qk_round_up(n, 64);
        int scale_code = 0, bad = 0;
        for (int iter = 0; iter < 24; iter++) {
            for (size_t i = 0; i < sizeof(raw); i++)
                raw[i] = (uint8_t)rng_next(&rng_state);
            for (int64_t k = 0; k < nblk; k++) {
                uint8_t *b = raw + k * info->bytes;
                /* FP4 scale bytes: every code 0..255 in turn (NaN codes included) */
                if (type == Q_MXFP4)
                    b[0] = (uint8_t)scale_code++;
                if (type == Q_NVFP4)
                    for (int j = 0; j < 4; j++)
                        b[j] = (uint8_t)scale_code++;
                /* f16 scales finite: clear the top exponent bit of every f16 field */
                if (type == Q_Q6_K)
                    b[209] &= 0x3F;
                else if (type != Q_MXFP4 && type != Q_NVFP4) {
                    b[1] &= 0x3F;
                    if (qk_type_has_min(type))
                        b[3] &= 0x3F;
                }
            }
            memset(&ref, 0x55, sizeof(ref));
            qk_portable.decode[type](raw, 0, n, &ref);
            for (int k = 1; k < n_tables; k++) {
                memset(&got, 0xAA, sizeof(got));
                tables[k]->decode[type](raw, 0, n, &got);
                bad += memcmp(ref.w, got.w, (size_t)npad) != 0;
                bad += memcmp(ref.dw, got.dw, (size_t)npad) != 0;
                if (qk_type_has_min(type))
                    bad += memcmp(ref.mw, got.mw, (size_t)qk_nsum(npad) * sizeof(float)) != 0;
            }
        }
        CHECK_MSG(bad == 0, "%s: %d decoded buffers differ from the portable decoder", info->name,
                  bad);
        if (type == Q_MXFP4 || type == Q_NVFP4)
            CHECK(scale_code >= 256);
    }
}

/* Rows longer than one decode chunk (QK_CHUNK) take the multi-chunk path. */
TEST(matmul_long_rows)
{
    init_tables();
    static const uint32_t types[] = {Q_Q4_1, Q_F16, Q_Q6_K, Q_NVFP4};
    const int64_t rows = 5, cols = QK_CHUNK + 1024, B = 11;
    for (size_t ti = 0; ti < sizeof(types) / sizeof(types[0]); ti++) {
        struct mat mt;
        mat_make(&mt, types[ti], rows, cols);
        float *x = acts(B, cols);
        struct q_act a;
        q_act_init(&a, B, cols);
        q_act_prepare(&a, types[ti], x, cols, B, cols);
        float y[11 * 5], ref[11 * 5];
        for (int k = 0; k < n_tables; k++) {
            q_matmul(tables[k], &mt.m, &a, y, rows, 0, rows);
            check_against_reference(&mt, &a, y, rows, 0, rows, q_info(types[ti])->name);
            if (k == 0)
                memcpy(ref, y, sizeof(y));
            CHECK_MSG(memcmp(ref, y, sizeof(y)) == 0, "%s long rows: %s differs",
                      q_info(types[ti])->name, q_kernels_name(tables[k]));
            /* the same bits for one activation row alone (the fused path) */
            struct q_act one;
            float y1[5];
            q_act_init(&one, 1, cols);
            q_act_prepare(&one, types[ti], x + 6 * cols, cols, 1, cols);
            q_matmul(tables[k], &mt.m, &one, y1, rows, 0, rows);
            CHECK_MSG(memcmp(y1, ref + 6 * rows, sizeof(y1)) == 0,
                      "%s long rows: %s B = 1 differs from B = 11", q_info(types[ti])->name,
                      q_kernels_name(tables[k]));
            q_act_release(&one);
        }
        free(x);
        q_act_release(&a);
        mat_free(&mt);
    }
}

/* A matrix of random block bytes (every weight code, Q8_0's -128 included)
 * with finite, moderate scales, like decoders_match_portable's. */
static void raw_matrix(struct q_matrix *m, uint32_t type, int64_t rows, int64_t cols)
{
    const struct q_type_info *info = q_info(type);
    *m = (struct q_matrix){.type = type,
                           .rows = rows,
                           .cols = cols,
                           .row_bytes = q_row_bytes(type, cols),
                           .scale = type == Q_NVFP4 ? 0.5f : 1.0f};
    uint8_t *d = xmalloc(m->row_bytes * (size_t)rows);
    for (size_t i = 0; i < m->row_bytes * (size_t)rows; i++)
        d[i] = (uint8_t)rng_next(&rng_state);
    if (!qk_type_is_float(type)) {
        for (int64_t k = 0; k < rows * cols / info->block; k++) {
            uint8_t *b = d + k * info->bytes;
            if (type == Q_Q6_K)
                b[209] &= 0x3F;
            else if (type == Q_MXFP4)
                b[0] = (uint8_t)(100 + b[0] % 40); /* E8M0: 2^-28 .. 2^11 */
            else if (type != Q_NVFP4) {
                b[1] &= 0x3F;
                if (qk_type_has_min(type))
                    b[3] &= 0x3F;
            }
        }
    } else if (type == Q_F16 || type == Q_BF16) {
        for (int64_t i = 0; i < rows * cols; i++)
            d[2 * i + 1] &= 0x3F; /* finite, small */
    } else {
        float *f = (float *)d;
        for (int64_t i = 0; i < rows * cols; i++)
            f[i] = rng_gauss(1.0f);
    }
    m->data = d;
}

/* The fused (B <= 32: pieces of at most 4 rows over blocks of weight rows;
 * 37 rows of the long variant are 3 blocks), batched and prefill kernels of
 * every table against the portable kernel (which has no fused kernels),
 * bit for bit, over many (rows, batch) shapes, odd ones included: random
 * block bytes, and activation rows at the quantizer's extremes (every q at
 * +127 or -127, so the biased bytes are 255 or 1). */
TEST(matmul_tiles_match_portable)
{
    init_tables();
    static const int64_t batches[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 15, 16, 17, 23, 33, 64};
    static const int64_t row_counts[] = {1, 2, 3, 5, 6, 7, 9, 13, 37};
    const int64_t max_rows = 40, max_b = 64;
    int bad = 0, checked = 0;
    for (size_t ti = 0; ti < N_TYPES; ti++) {
        uint32_t type = all_types[ti];
        for (int variant = 0; variant < 3; variant++) {
            /* variant 2: rows longer than a decode chunk */
            int64_t cols = variant < 2 ? cols_for(type, variant)
                                       : (qk_type_is_float(type) ? QK_CHUNK_F : QK_CHUNK) + 256;
            struct q_matrix m;
            raw_matrix(&m, type, max_rows, cols);
            float *x = acts(max_b, cols);
            for (int64_t j = 0; j < cols; j++) {
                x[j] = 3.0f;                      /* q = 127 everywhere */
                x[cols + j] = -0.5f;              /* q = -127 */
                x[2 * cols + j] = j % 2 ? 1 : -1; /* alternating extremes */
            }
            struct q_act a;
            q_act_init(&a, max_b, cols);
            float *ref = xmalloc((size_t)(max_b * max_rows) * sizeof(float));
            float *y = xmalloc((size_t)(max_b * max_rows) * sizeof(float));
            for (size_t bi = 0; bi < sizeof(batches) / sizeof(batches[0]); bi++) {
                int64_t B = batches[bi];
                if (variant == 2 && B > 17)
                    continue;
                q_act_prepare(&a, type, x, cols, B, cols);
                for (size_t ri = 0; ri < sizeof(row_counts) / sizeof(row_counts[0]); ri++) {
                    int64_t r0 = (int64_t)(ri % 3), r1 = r0 + row_counts[ri];
                    for (int k = 1; k < n_tables; k++) {
                        for (int64_t i = 0; i < B * max_rows; i++)
                            ref[i] = y[i] = -1.0f;
                        q_matmul(tables[0], &m, &a, ref, max_rows, r0, r1);
                        q_matmul(tables[k], &m, &a, y, max_rows, r0, r1);
                        checked++;
                        if (memcmp(ref, y, sizeof(float) * (size_t)(B * max_rows)) != 0 &&
                            bad++ < 5)
                            printf("  %s cols %lld B %lld rows [%lld, %lld): %s differs\n",
                                   q_info(type)->name, (long long)cols, (long long)B, (long long)r0,
                                   (long long)r1, q_kernels_name(tables[k]));
                    }
                }
            }
            free(ref);
            free(y);
            free(x);
            q_act_release(&a);
            free((void *)m.data);
        }
    }
    CHECK_MSG(bad == 0, "%d of %d (type, shape, table) results differ from portable", bad, checked);
    if (n_tables > 1)
        CHECK(checked > 0);
}

/* The NVFP4 tensor scale multiplies every output; scale 0 reads as 1. */
TEST(matmul_scale)
{
    init_tables();
    struct mat mt;
    mat_make(&mt, Q_Q8_0, 4, 64);
    float *x = acts(2, 64);
    struct q_act a;
    q_act_init(&a, 2, 64);
    q_act_prepare(&a, Q_Q8_0, x, 64, 2, 64);
    float y1[8], y2[8], y0[8];
    const struct q_kernels *k = q_kernels_select(Q_ISA_AUTO);
    q_matmul(k, &mt.m, &a, y1, 4, 0, 4);
    mt.m.scale = 0.25f;
    q_matmul(k, &mt.m, &a, y2, 4, 0, 4);
    mt.m.scale = 0.0f;
    q_matmul(k, &mt.m, &a, y0, 4, 0, 4);
    for (int i = 0; i < 8; i++) {
        CHECK(y2[i] == y1[i] * 0.25f);
        CHECK(y0[i] == y1[i]);
    }
    free(x);
    q_act_release(&a);
    mat_free(&mt);
}

TEST_MAIN()
