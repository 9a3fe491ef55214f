/*
 * Unit tests for runner/analysis/estimate.c: the DESIGN.md wave example (a=40,
 * b=31, C=64, 96 prompts, 128 tokens -> 259 s + 132 s = 391 s), TTFT per
 * wave, a model fitted from a results table, and the ETA scaling.
 */
#include <math.h>

#include "test.h"
#include "xalloc.h"

#include "analysis/estimate.h"

TEST(design_example_waves)
{
    struct est_model m = {40, 31, 0, 0};
    struct est_point p = {64, 96, 128};
    /* 128·(40+31·64) ms + 128·(40+31·32) ms */
    CHECK_NEAR(est_point_s(&m, &p), (128.0 * (40 + 31 * 64) + 128.0 * (40 + 31 * 32)) / 1000, 1e-9);
    CHECK_NEAR(est_point_s(&m, &p), 391, 1);
    struct est_point p1 = {1, 8, 128}; /* 8 waves of one */
    CHECK_NEAR(est_point_s(&m, &p1), 8 * 128.0 * 71 / 1000, 1e-9);
    struct est_point p0 = {16, 0, 128};
    CHECK_NEAR(est_point_s(&m, &p0), 0, 0);
}

TEST(ttft_is_added_per_wave)
{
    struct est_model m = {40, 31, 100, 10};
    struct est_point p = {16, 48, 128}; /* 3 full waves */
    double want = 3 * (128.0 * (40 + 31 * 16) + 100 + 10 * 16) / 1000;
    CHECK_NEAR(est_point_s(&m, &p), want, 1e-9);
    struct est_model neg = {40, 31, -500, 1}; /* negative TTFT predictions count as 0 */
    struct est_point q = {1, 1, 1};
    CHECK_NEAR(est_point_s(&neg, &q), 0.071, 1e-12);
}

TEST(falling_line_below_zero_predicts_nothing)
{
    /* step = 51 - 1.33·N is <= 0 from N = 39: no prediction there, not 0 s */
    struct est_model m = {51, -1.33, 0, 0};
    struct est_point p = {64, 96, 128};
    CHECK(isnan(est_point_s(&m, &p)));
    struct est_point last = {64, 80, 128}; /* waves of 64 and 16: the first is below zero */
    CHECK(isnan(est_point_s(&m, &last)));
    struct est_point small = {16, 16, 128}; /* above zero: an honest, if falling, estimate */
    CHECK_NEAR(est_point_s(&m, &small), 128.0 * (51 - 1.33 * 16) / 1000, 1e-9);
    char b[16];
    est_format(est_point_s(&m, &p), b, sizeof(b));
    CHECK_STR(b, "?");
    struct est_point todo[2] = {{16, 16, 128}, {64, 96, 128}};
    CHECK(isnan(est_eta_s(&m, todo, 2, 0, 0))); /* the run's ETA falls back to its average */
}

static void add_row(struct res_table *t, const char *variant, long c, const char *status,
                    double tpot, double ttft)
{
    struct res_point p;
    res_point_init(&p);
    p.variant = xstrdup(variant);
    p.concurrency = c;
    p.prompts = 3 * c;
    p.repeat = 1;
    p.status = xstrdup(status);
    mset_set(&p.metrics, "median_tpot_ms", tpot);
    if (!isnan(ttft))
        mset_set(&p.metrics, "median_ttft_ms", ttft);
    res_table_add(t, &p);
}

TEST(model_from_table)
{
    struct res_table t;
    struct est_model m;
    struct err e;
    res_table_init(&t);
    err_init(&e);
    add_row(&t, "a", 1, RES_OK, 71, 95);
    add_row(&t, "a", 8, RES_OK, 286, 180);
    add_row(&t, "a", 16, RES_OK, 533, 310);
    add_row(&t, "a", 32, RES_FAILED, 9999, 9999); /* failed rows are ignored */
    add_row(&t, "b", 4, RES_OK, 100, NAN);
    CHECK(est_model_from_table(&t, "a", &m, &e) == 0);
    CHECK_NEAR(m.a_ms, 890.0 / 3 - 10411.0 / 338 * 25 / 3, 1e-9);
    CHECK_NEAR(m.b_ms, 10411.0 / 338, 1e-9);
    CHECK(m.ttft_b_ms > 0);
    struct est_point p = {64, 96, 128};
    double s = est_point_s(&m, &p);
    CHECK_MSG(fabs(s - 391) <= 39.1, "C=64 estimate %.1f s", s);
    /* one level: constant step, no TTFT */
    CHECK(est_model_from_table(&t, "b", &m, &e) == 0);
    CHECK_NEAR(m.a_ms, 100, 0);
    CHECK_NEAR(m.b_ms, 0, 0);
    CHECK_NEAR(m.ttft_a_ms, 0, 0);
    CHECK(est_model_from_table(&t, "c", &m, &e) == -1);
    CHECK_STR(e.msg, "no ok point of variant 'c' has a median TPOT to estimate from");
    res_table_release(&t);
}

TEST(eta_scales_by_what_finished_points_took)
{
    struct est_model m = {40, 31, 0, 0};
    struct est_point todo[] = {{64, 96, 128}, {1, 8, 128}};
    double base = est_point_s(&m, &todo[0]) + est_point_s(&m, &todo[1]);
    CHECK_NEAR(est_eta_s(&m, todo, 2, 0, 0), base, 1e-9);
    CHECK_NEAR(est_eta_s(&m, todo, 2, 100, 150), base * 1.5, 1e-9);
    CHECK_NEAR(est_eta_s(&m, todo, 0, 100, 150), 0, 0);
}

TEST(format_durations)
{
    char buf[16], *b = buf;
    est_format(42.4, b, sizeof(buf));
    CHECK_STR(b, "42s");
    est_format(391.2, b, sizeof(buf));
    CHECK_STR(b, "6m31s");
    est_format(7500, b, sizeof(buf));
    CHECK_STR(b, "2h05m");
    est_format(NAN, b, sizeof(buf));
    CHECK_STR(b, "?");
}

TEST_MAIN()
