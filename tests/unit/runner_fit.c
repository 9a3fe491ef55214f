/*
 * Unit tests for runner/analysis/fit.c: least squares against hand-computed values,
 * the DESIGN.md example (71, 286, 533 ms at 1, 8, 16 -> a 40, b 31, ceiling
 * 32 tok/s), regime flags, predictions, and the seeded bootstrap.
 */
#include <math.h>

#include "test.h"

#include "analysis/fit.h"

TEST(linear_exact_and_hand_computed)
{
    double x[] = {1, 2, 3, 4}, y[] = {3, 5, 7, 9};
    struct fit_line l;
    CHECK(fit_linear(x, y, 4, &l) == 0);
    CHECK_NEAR(l.a, 1, 1e-12);
    CHECK_NEAR(l.b, 2, 1e-12);
    CHECK_NEAR(l.r2, 1, 1e-12);
    CHECK_INT(l.n, 4);
    /* y = 1, 3, 2 at x = 0, 1, 2: b = 0.5, a = 1.5, R² = 1 - 1.5/2 = 0.25 */
    double x2[] = {0, 1, 2}, y2[] = {1, 3, 2};
    CHECK(fit_linear(x2, y2, 3, &l) == 0);
    CHECK_NEAR(l.b, 0.5, 1e-12);
    CHECK_NEAR(l.a, 1.5, 1e-12);
    CHECK_NEAR(l.r2, 0.25, 1e-12);
}

TEST(linear_refuses_degenerate_input)
{
    struct fit_line l;
    double x[] = {4, 4, 4}, y[] = {1, 2, 3};
    CHECK(fit_linear(x, y, 3, &l) == -1);
    double x1[] = {1, NAN}, y1[] = {2, 3};
    CHECK(fit_linear(x1, y1, 2, &l) == -1);
    CHECK(fit_linear(x1, y1, 0, &l) == -1);
}

/* The measured example of DESIGN.md "The idea". */
TEST(design_example_step_times)
{
    struct fit_obs obs[] = {{1, 71, 1}, {8, 286, 1}, {16, 533, 1}};
    struct fit_opts o = {true, 0};
    struct fit_analysis fa;
    fit_analyse(obs, 3, &o, &fa);
    CHECK(fa.ok);
    /* Sxx = 112.667, Sxy = 3470.33: b = 30.8018, a = 40.0178 */
    CHECK_NEAR(fa.line.b, 10411.0 / 338.0, 1e-9);
    CHECK_NEAR(fa.line.a, 890.0 / 3 - fa.line.b * 25.0 / 3, 1e-9);
    CHECK_NEAR(fa.line.a, 40.0, 0.05 * 40);
    CHECK_NEAR(fa.line.b, 31.0, 0.05 * 31);
    CHECK_NEAR(fa.ceiling, 1000.0 / fa.line.b, 1e-9);
    CHECK_NEAR(fa.ceiling, 32.0, 0.05 * 32);
    CHECK_NEAR(fa.c90, 9 * fa.line.a / fa.line.b, 1e-9);
    CHECK(fa.line.r2 > 0.999);
    CHECK_INT(fa.n_res, 3);
    CHECK_INT(fa.n_regime, 0);
    CHECK(!fa.a_ci.ok && !fa.b_ci.ok); /* no repeats */
    /* throughput the line predicts at the tested points: 14, 28, 30 tok/s */
    CHECK_NEAR(fit_throughput(&fa.line, 1), 14, 0.5);
    CHECK_NEAR(fit_throughput(&fa.line, 8), 28, 0.5);
    CHECK_NEAR(fit_throughput(&fa.line, 16), 30, 0.5);
    /* predictions: untested powers of two up to 64 */
    double want[] = {2, 4, 32, 64};
    CHECK_INT(fa.n_pred, 4);
    for (size_t i = 0; i < fa.n_pred && i < 4; i++) {
        CHECK_NEAR(fa.pred[i].x, want[i], 0);
        CHECK_NEAR(fa.pred[i].y, fa.line.a + fa.line.b * want[i], 1e-9);
        CHECK_NEAR(fa.pred[i].throughput, fit_throughput(&fa.line, want[i]), 1e-9);
    }
    fit_analysis_release(&fa);
}

TEST(regime_change_is_flagged)
{
    /* on the line 40 + 31·x except at x = 8, which is 50% slower */
    struct fit_obs obs[] = {{1, 71, 1},  {2, 102, 1},  {4, 164, 1},
                            {8, 432, 1}, {16, 536, 1}, {32, 1032, 1}};
    struct fit_opts o = {true, 0};
    struct fit_analysis fa;
    fit_analyse(obs, 6, &o, &fa);
    CHECK(fa.ok);
    CHECK(fa.res[3].regime_change);
    CHECK(fa.res[3].residual > 0);
    CHECK_NEAR(fa.res[3].relative, fa.res[3].residual / fa.res[3].fitted, 1e-12);
    for (size_t i = 0; i < fa.n_res; i++)
        CHECK(fabs(fa.res[i].relative) <= fabs(fa.res[3].relative));
    CHECK(!fa.res[4].regime_change && !fa.res[5].regime_change);
    CHECK_INT(fa.n_regime, 3); /* x = 8, and x = 1, 2 where the pulled line is low */
    fit_analysis_release(&fa);
}

TEST(one_level_is_not_a_fit)
{
    struct fit_obs obs[] = {{8, 100, 1}, {8, 101, 2}};
    struct fit_analysis fa;
    fit_analyse(obs, 2, NULL, &fa);
    CHECK(!fa.ok);
    CHECK(strstr(fa.reason, "1 concurrency level") != NULL);
    CHECK(isnan(fa.ceiling));
    fit_analysis_release(&fa);
}

TEST(non_step_fit_has_no_ceiling)
{
    struct fit_obs obs[] = {{1, 10, 1}, {2, 20, 1}, {4, 40, 1}};
    struct fit_opts o = {false, 0};
    struct fit_analysis fa;
    fit_analyse(obs, 3, &o, &fa);
    CHECK(fa.ok);
    CHECK(isnan(fa.ceiling) && isnan(fa.c90));
    CHECK(fa.n_pred > 0 && isnan(fa.pred[0].throughput));
    fit_analysis_release(&fa);
}

/* Repeats: intervals contain the point estimate, shrink with less noise,
 * and are identical for the same seed. */
TEST(bootstrap_over_repeats)
{
    struct fit_obs obs[12];
    double noise[] = {-3, 1, 2};
    size_t k = 0;
    double xs[] = {1, 4, 8, 16};
    for (int i = 0; i < 4; i++)
        for (int r = 0; r < 3; r++)
            obs[k++] = (struct fit_obs){xs[i], 40 + 31 * xs[i] + noise[r] * (1 + i), r + 1};
    struct fit_opts o = {true, 7};
    struct fit_analysis fa, fb;
    fit_analyse(obs, 12, &o, &fa);
    fit_analyse(obs, 12, &o, &fb);
    CHECK(fa.ok && fa.a_ci.ok && fa.b_ci.ok && fa.ceiling_ci.ok);
    CHECK(fa.a_ci.lo <= fa.line.a && fa.line.a <= fa.a_ci.hi);
    CHECK(fa.b_ci.lo <= fa.line.b && fa.line.b <= fa.b_ci.hi);
    CHECK(fa.ceiling_ci.lo <= fa.ceiling && fa.ceiling <= fa.ceiling_ci.hi);
    CHECK(fa.b_ci.hi - fa.b_ci.lo > 0);
    CHECK(fa.a_ci.lo == fb.a_ci.lo && fa.b_ci.hi == fb.b_ci.hi); /* seeded */
    CHECK_INT(fa.n_res, 12);
    CHECK_INT(fa.res[11].repeat, 3);
    fit_analysis_release(&fa);
    fit_analysis_release(&fb);
}

TEST(spread_of_repeats)
{
    double v[] = {10, 12, 14, NAN};
    struct fit_spread s;
    fit_spread(v, 4, 0, &s);
    CHECK_INT(s.n, 3);
    CHECK_NEAR(s.mean, 12, 1e-12);
    CHECK_NEAR(s.sd, 2, 1e-12);
    CHECK_NEAR(s.min, 10, 0);
    CHECK_NEAR(s.max, 14, 0);
    CHECK(s.mean_ci.ok && s.mean_ci.lo >= 10 && s.mean_ci.hi <= 14);
    CHECK(s.mean_ci.lo < 12 && s.mean_ci.hi > 12);
    double one[] = {5};
    fit_spread(one, 1, 0, &s);
    CHECK(s.n == 1 && s.sd == 0 && !s.mean_ci.ok);
}

TEST(formula_reads_like_arithmetic)
{
    char f[128];
    CHECK_STR(fit_formula(40, 31, 1, 2, "N", f, sizeof(f)), "40.0 + 31.00·N");
    /* a negative slope is a minus sign, never "+ -" */
    CHECK_STR(fit_formula(0.3, -0.12, 1, 2, "N", f, sizeof(f)), "0.3 - 0.12·N");
    CHECK_STR(fit_formula(-2.5, 1, 1, 2, "C", f, sizeof(f)), "-2.5 + 1.00·C");
    /* what rounds to zero has no sign: "0.0 + 0.00·N", not "-0.0 - 0.00·N" */
    CHECK_STR(fit_formula(-0.01, -0.001, 1, 2, "N", f, sizeof(f)), "0.0 + 0.00·N");
    CHECK_STR(fit_formula(12.345, -0.004, 2, 3, "N", f, sizeof(f)), "12.35 - 0.004·N");
}

/* issue 13: a step fit that cannot be a law is named and predicts nothing */
TEST(negative_intercept_is_not_a_law)
{
    /* the fp4-compare example: TPOT = -43 + 42·N at C = 1, 4, 16 */
    struct fit_obs obs[] = {{1, 0.5, 1}, {4, 125, 1}, {16, 629, 1}};
    struct fit_opts o = {true, 0};
    struct fit_analysis fa;
    fit_analyse(obs, 3, &o, &fa);
    CHECK(fa.ok);
    CHECK(fa.line.a < 0);
    CHECK(fa.unfit);
    CHECK(strstr(fa.unfit_why, FIT_UNFIT ": negative intercept (a = -4") == fa.unfit_why);
    CHECK(strstr(fa.unfit_why, "likely prefill of arriving requests"));
    CHECK(isnan(fa.ceiling) && isnan(fa.c90));
    CHECK_INT(fa.n_pred, 0);
    fit_analysis_release(&fa);
    /* not a step time: a negative intercept is only a number */
    o.step = false;
    fit_analyse(obs, 3, &o, &fa);
    CHECK(fa.ok && !fa.unfit && fa.n_pred > 0);
    fit_analysis_release(&fa);
}

/* W3-N21: one tolerance for both unphysical signs. A noise-level negative
 * intercept (a = -0.04 ms against a 9.96 ms step) is a law like a step that
 * falls by under 5%; past 5% of the step at the smallest x either is not. */
TEST(noise_level_negative_intercept_is_tolerated_like_a_small_fall)
{
    struct fit_opts o = {true, 0};
    struct fit_analysis fa;
    struct fit_obs tiny[] = {{1, 9.96, 1}, {4, 39.96, 1}, {16, 159.96, 1}};
    fit_analyse(tiny, 3, &o, &fa);
    CHECK(fa.ok && fa.line.a < 0 && fa.line.a > -0.05);
    CHECK_MSG(!fa.unfit, "%s", fa.unfit_why);
    CHECK_NEAR(fa.ceiling, 100, 1e-6);
    CHECK(isnan(fa.c90)); /* 9a/b needs a > 0 */
    fit_analysis_release(&fa);
    /* the same 4% of the step as a fall over the range: tolerated too */
    struct fit_obs fall4[] = {{1, 50, 1}, {4, 49.25, 1}, {9, 48, 1}};
    fit_analyse(fall4, 3, &o, &fa);
    CHECK_MSG(!fa.unfit, "%s", fa.unfit_why);
    fit_analysis_release(&fa);
    /* 6% of the step, either way: not a law */
    struct fit_obs neg6[] = {{1, 9.4, 1}, {4, 39.4, 1}, {16, 159.4, 1}}; /* a = -0.6, step 9.4 */
    fit_analyse(neg6, 3, &o, &fa);
    CHECK(fa.unfit && strstr(fa.unfit_why, "negative intercept (a = -0.6)"));
    fit_analysis_release(&fa);
    struct fit_obs fall6[] = {{1, 50, 1}, {4, 48.875, 1}, {9, 47, 1}};
    fit_analyse(fall6, 3, &o, &fa);
    CHECK(fa.unfit && strstr(fa.unfit_why, "negative slope"));
    fit_analysis_release(&fa);
}

TEST(falling_slope_and_poor_r2_are_not_a_law)
{
    struct fit_opts o = {true, 0};
    struct fit_analysis fa;
    struct fit_obs fall[] = {{1, 60, 1}, {4, 50, 1}, {16, 30, 1}};
    fit_analyse(fall, 3, &o, &fa);
    CHECK(fa.unfit && strstr(fa.unfit_why, "negative slope"));
    CHECK(isnan(fa.ceiling) && fa.n_pred == 0);
    fit_analysis_release(&fa);
    /* flat within noise (a fall of 0.2 ms over the range): still a law */
    struct fit_obs flat[] = {{1, 30.1, 1}, {4, 30.0, 1}, {16, 29.9, 1}};
    fit_analyse(flat, 3, &o, &fa);
    CHECK(!fa.unfit);
    fit_analysis_release(&fa);
    /* a regime change: 20, 22, 200, 30 at 1, 2, 4, 8 */
    struct fit_obs jump[] = {{1, 20, 1}, {2, 22, 1}, {4, 200, 1}, {8, 30, 1}};
    fit_analyse(jump, 4, &o, &fa);
    CHECK(fa.unfit && strstr(fa.unfit_why, "R² 0."));
    CHECK(strstr(fa.unfit_why, "below 0.90"));
    CHECK(isnan(fa.ceiling) && fa.n_pred == 0);
    fit_analysis_release(&fa);
    /* a good fit keeps everything */
    struct fit_obs good[] = {{1, 22, 1}, {4, 28, 1}, {16, 52, 1}};
    fit_analyse(good, 3, &o, &fa);
    CHECK(!fa.unfit && fa.unfit_why[0] == '\0');
    CHECK_NEAR(fa.ceiling, 500, 1e-6);
    CHECK(fa.n_pred > 0);
    fit_analysis_release(&fa);
}

TEST_MAIN()
