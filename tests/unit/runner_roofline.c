/*
 * Unit tests for runner/analysis/roofline.c: the placement of a step law's
 * a and b against the roofline the server reports, on fixed numbers: a
 * bandwidth-bound intercept, an added token that is compute-bound, one
 * request after another, a above and below the weight-read floor, and each
 * missing number named with its placement skipped; a mixture of experts'
 * experts per step against C: sharing, the knee, and the local b below and
 * from it (roof_moe).
 */
#include <math.h>

#include "buf.h"
#include "test.h"

#include "analysis/roofline.h"

/* The words of a placement, in a static buffer. */
static const char *words(const struct roof_in *in, struct roof_place *p)
{
    static char text[1024];
    struct buf b;
    buf_init(&b, 1 << 16);
    roof_place(in, p);
    roof_words(&b, p);
    snprintf(text, sizeof(text), "%s", b.data ? b.data : "");
    buf_release(&b);
    return text;
}

/* 1.0 GB of weights at 100 GB/s: 10 ms to read them once. */
TEST(bandwidth_bound_and_compute_bound)
{
    struct roof_in in = {13.0, 1.0, 1e9, 2e9, 100};
    struct roof_place p;
    const char *w = words(&in, &p);
    CHECK_INT(p.a, ROOF_BANDWIDTH);
    CHECK_NEAR(p.floor_ms, 10.0, 1e-9);
    CHECK_NEAR(p.a_ratio, 1.3, 1e-9);
    CHECK(strstr(w, "a is 1.30x the time to read the weights once (10 ms): bandwidth-bound") !=
          NULL);
    CHECK_INT(p.b, ROOF_COMPUTE);
    CHECK_NEAR(p.b_share, 1.0 / 14, 1e-12);
    CHECK_NEAR(p.b_gflops, 2000.0, 1e-6);        /* 2 GFLOP in 1 ms */
    CHECK_NEAR(p.one_gflops, 2000.0 / 14, 1e-6); /* in the 14 ms one-request step */
    CHECK(strstr(w, "compute-bound") != NULL);
    CHECK(strstr(w, "14.0x what one request achieves") != NULL);
}

TEST(one_request_after_another)
{
    /* per-request decode: each added request reads the weights again */
    struct roof_in in = {1.0, 10.0, 1e9, 2e9, 100};
    struct roof_place p;
    const char *w = words(&in, &p);
    CHECK_INT(p.b, ROOF_SERIAL);
    CHECK(strstr(w, "b is 91% of the one-request step a + b") != NULL);
    CHECK(strstr(w, "one request after another") != NULL);
    CHECK(strstr(w, "compute-bound") == NULL);
    /* 1 ms against the 10 ms read, and b is that read: per-request decode */
    CHECK_INT(p.a, ROOF_PER_REQUEST);
    CHECK(strstr(w, "a is 0.10x the time to read the weights once (10 ms) and b is 1.00x it: "
                    "each request reads the weights itself") != NULL);
    CHECK(strstr(w, "below the bandwidth floor") == NULL);
    /* the same numbers from a batch measured to share its reads (a mixture
     * of experts' batched decode): not "each request reads the weights" */
    struct roof_in shared = {1.0, 10.0, 1e9, 2e9, 100, true};
    w = words(&shared, &p);
    CHECK_INT(p.a, ROOF_BELOW_FLOOR);
    CHECK(strstr(w, "each request reads the weights itself") == NULL);
    /* the same a with a b far above the read: below the floor, said so */
    struct roof_in slow = {1.0, 40.0, 1e9, 2e9, 100};
    w = words(&slow, &p);
    CHECK_INT(p.a, ROOF_BELOW_FLOOR);
    CHECK(strstr(w, "a is 0.10x the time to read the weights once (10 ms): below the bandwidth "
                    "floor") != NULL);
    CHECK_INT(p.b, ROOF_SERIAL);
    /* exactly at the threshold: 80% is already serial */
    struct roof_in edge = {1.0, 4.0, 1e9, 2e9, 100};
    words(&edge, &p);
    CHECK_INT(p.b, ROOF_SERIAL);
}

TEST(a_far_above_the_weight_read_is_not_bandwidth_bound)
{
    struct roof_in in = {50.0, 1.0, 1e9, 2e9, 100};
    struct roof_place p;
    const char *w = words(&in, &p);
    CHECK_INT(p.a, ROOF_OVERHEAD);
    CHECK(strstr(w, "a is 5.00x the time to read the weights once") != NULL);
    CHECK(strstr(w, "not bandwidth-bound") != NULL);
    struct roof_in edge = {20.0, 1.0, 1e9, 2e9, 100}; /* 2.0x: still bandwidth-bound */
    words(&edge, &p);
    CHECK_INT(p.a, ROOF_BANDWIDTH);
}

TEST(missing_numbers_are_named_and_not_placed)
{
    struct roof_place p;
    /* no bandwidth (fp4serve without --probe-bandwidth): a skipped, b placed */
    struct roof_in nobw = {13.0, 1.0, 1e9, 2e9, NAN};
    const char *w = words(&nobw, &p);
    CHECK_INT(p.a, ROOF_MISSING);
    CHECK(isnan(p.floor_ms));
    CHECK(strstr(w, "a not placed (missing: a measured memory bandwidth (fp4serve serve "
                    "--probe-bandwidth))") != NULL);
    CHECK(strstr(w, "bandwidth-bound") == NULL);
    CHECK_INT(p.b, ROOF_COMPUTE);
    /* a server that reports nothing (vLLM): both skipped, every number named */
    struct roof_in none = {13.0, 1.0, NAN, NAN, NAN};
    w = words(&none, &p);
    CHECK_INT(p.a, ROOF_MISSING);
    CHECK_INT(p.b, ROOF_MISSING);
    CHECK(strstr(w, "a not placed (missing: the weight bytes per step, a measured memory "
                    "bandwidth") != NULL);
    CHECK(strstr(w, "b not placed (missing: the FLOPs per token)") != NULL);
    /* zero is not a number reported (a gauge left at 0) */
    struct roof_in zero = {13.0, 1.0, 0, 2e9, 0};
    words(&zero, &p);
    CHECK_INT(p.a, ROOF_MISSING);
    CHECK(strstr(p.a_missing, "weight bytes") != NULL);
    /* no positive slope: b is not placed, whatever the server says */
    struct roof_in flat = {13.0, 0.0, 1e9, 2e9, 100};
    w = words(&flat, &p);
    CHECK_INT(p.b, ROOF_MISSING);
    CHECK(strstr(w, "b not placed (missing: a positive slope b)") != NULL);
    CHECK_INT(p.a, ROOF_BANDWIDTH);
    struct roof_in neg = {-5.0, 2.0, 1e9, 2e9, 100};
    w = words(&neg, &p);
    CHECK_INT(p.a, ROOF_MISSING);
    CHECK_INT(p.b, ROOF_MISSING); /* a + b < 0: no one-request step */
    CHECK(strstr(w, "a positive intercept a") != NULL);
}

/* The words of a MoE reading, in a static buffer. */
static const char *moe_words(struct roof_moe_point *pts, size_t n, double model, struct roof_moe *m)
{
    static char text[2048];
    struct buf b;
    buf_init(&b, 1 << 16);
    roof_moe(pts, n, model, m);
    roof_moe_words(&b, m, pts);
    snprintf(text, sizeof(text), "%s", b.data ? b.data : "");
    buf_release(&b);
    return text;
}

/* Batched decode on a model of 256 (layer, expert) pairs: experts per step
 * grow with C and level off; the step's slope falls until every expert is
 * read (C=32: 250 >= 95% of 256), then stays low. Given out of order. */
TEST(moe_batched_shares_experts_and_the_knee)
{
    struct roof_moe_point pts[] = {
        {64, 64, 84, 256, 9e6}, {1, 1, 10, 32, 2e6},  {2, 2, 13, 60, 3e6},
        {4, 4, 18, 110, 5e6},   {8, 8, 25, 180, 7e6}, {16, 16, 35, 236, 8.5e6},
        {32, 32, 52, 250, 9e6},
    };
    struct roof_moe m;
    const char *w = moe_words(pts, 7, 256, &m);
    CHECK_INT(m.n, 7);
    CHECK(pts[0].conc == 1 && pts[6].conc == 64); /* sorted by C */
    CHECK(m.ref_is_model);
    CHECK(m.shared);
    CHECK_NEAR(m.per_seq_first, 32.0, 1e-12);
    CHECK_NEAR(m.per_seq_last, 4.0, 1e-12);
    CHECK(m.knee_ok && m.all_touched);
    CHECK_INT(m.knee, 5); /* C=32; 236 at C=16 is under 243.2 */
    /* slopes 3, 2.5, 1.75, 1.25, 1.0625 up to the knee; 1.0 past it */
    CHECK_NEAR(m.b_below, (3 + 2.5 + 1.75 + 1.25 + 1.0625) / 5, 1e-12);
    CHECK_NEAR(m.b_from, 1.0, 1e-12);
    CHECK(strstr(w, "experts per step grow from 32 at C=1 to 256 at C=64, of the model's 256 "
                    "(layer, expert) pairs") != NULL);
    CHECK(strstr(w, "per sequence they fall from 32 to 4: the batch shares experts") != NULL);
    CHECK(strstr(w, "Every expert is touched from C=32 (250 per step, 95% of them or more): the "
                    "knee. From there a step reads the same weights whatever the batch") != NULL);
    CHECK(strstr(w, "1.91 ms below the knee, 1 ms from it: b fell") != NULL);
    /* the same reads with a step that grows evenly: said that b did not fall */
    for (size_t i = 0; i < 7; i++)
        pts[i].step_ms = 10 + 2 * pts[i].conc;
    w = moe_words(pts, 7, 256, &m);
    CHECK(strstr(w, "2 ms below the knee, 2 ms from it: b did not fall here") != NULL);
    CHECK(strstr(w, "b fell") == NULL);
}

/* Per-request decode: each sequence reads its own 32 pairs, so experts per
 * step are 32 x C, past the model's 256: nothing shared, no knee. */
TEST(moe_per_request_shares_nothing)
{
    struct roof_moe_point pts[] = {
        {1, 1, 10, 32, 2e6}, {4, 4, 40, 128, 8e6}, {16, 16, 160, 512, 32e6}};
    struct roof_moe m;
    const char *w = moe_words(pts, 3, 256, &m);
    CHECK(!m.shared);
    CHECK(!m.knee_ok);
    CHECK_NEAR(m.b_below, 10.0, 1e-12);
    CHECK(isnan(m.b_from));
    CHECK(strstr(w, "per sequence they stay at 32 (32 at the first point): each sequence reads "
                    "its own experts (per-request decode), nothing is shared, so there is no "
                    "knee") != NULL);
    CHECK(strstr(w, "10 ms between the first two points, 10 ms between the last two") != NULL);
    CHECK(strstr(w, "b fell") == NULL && strstr(w, "did not fall") == NULL); /* not shared */
    CHECK(strstr(w, "Every expert") == NULL);
}

/* Without the model's count, the knee is where experts per step level off
 * at the most seen; reaching the most seen only at the last point is still
 * growing: no knee. With the count, experts per step that level off below
 * it are a knee too (the router leaves some experts unused), and a grid
 * that stops while they still grow says so. */
TEST(moe_knee_without_the_models_count_and_beyond_the_grid)
{
    struct roof_moe_point flat[] = {
        {1, 1, 10, 32, NAN}, {8, 8, 20, 180, NAN}, {32, 32, 40, 250, NAN}, {64, 64, 70, 256, NAN}};
    struct roof_moe m;
    const char *w = moe_words(flat, 4, NAN, &m);
    CHECK(!m.ref_is_model);
    CHECK_NEAR(m.ref, 256, 1e-12);
    CHECK(m.knee_ok && !m.all_touched);
    CHECK_INT(m.knee, 2);
    CHECK(strstr(w, "(the server does not report the model's expert count)") != NULL);
    CHECK(strstr(w, "Experts per step level off from C=32 at 250 (95% of the most seen or more): "
                    "the knee") != NULL);
    /* with the count, a router that never picks some experts: a plateau at
     * 71% of the model's 256 (C=32 and 64 alike) is the knee, said so */
    struct roof_moe_point below[] = {{1, 1, 15, 38, NAN},
                                     {4, 3, 16, 86.5, NAN},
                                     {16, 11, 16, 158, NAN},
                                     {32, 21, 50, 180.9, NAN},
                                     {64, 40, 98, 181.2, NAN}};
    w = moe_words(below, 5, 256, &m);
    CHECK(m.knee_ok && !m.all_touched);
    CHECK_INT(m.knee, 3);
    CHECK(strstr(w, "Experts per step level off from C=32 at 180.9 (71% of the model's pairs): "
                    "the knee, where every expert the batch's tokens route to is touched") != NULL);
    /* b rose past the knee (a compute-bound step): said from the numbers */
    CHECK(strstr(w, "b did not fall here") != NULL);
    struct roof_moe_point growing[] = {
        {1, 1, 10, 32, NAN}, {4, 4, 15, 100, NAN}, {16, 16, 30, 200, NAN}};
    w = moe_words(growing, 3, NAN, &m);
    CHECK(m.shared);
    CHECK(!m.knee_ok);
    CHECK(strstr(w,
                 "Experts per step still grow at the last point (100% of the most seen at "
                 "C=16): the knee, where every expert is touched, lies beyond the grid") != NULL);
    CHECK(strstr(w, "From there") == NULL);
    /* slopes 5/3 then 15/12: falling, said from the first and last segment */
    CHECK_NEAR(m.b_first, 5.0 / 3, 1e-12);
    CHECK_NEAR(m.b_last, 15.0 / 12, 1e-12);
    CHECK(strstr(w, "1.67 ms between the first two points, 1.25 ms between the last two: b fell "
                    "as the batch shared experts") != NULL);
    w = moe_words(growing, 3, 256, &m);
    CHECK(!m.knee_ok);
    CHECK(strstr(w, "Experts per step still grow at the last point (78% of the model's pairs at "
                    "C=16)") != NULL);
    /* one point: nothing to read against C */
    w = moe_words(growing, 1, 256, &m);
    CHECK(!m.shared && !m.knee_ok);
    CHECK(strstr(w, "one point") != NULL);
}

TEST_MAIN()
