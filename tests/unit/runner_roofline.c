/*
 * Unit tests for runner/analysis/roofline.c: the placement of a step law's
 * a and b against the roofline the server reports, on fixed numbers: a
 * bandwidth-bound intercept, an added token that is compute-bound, one
 * request after another, a above and below the weight-read floor, and each
 * missing number named with its placement skipped.
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

TEST_MAIN()
