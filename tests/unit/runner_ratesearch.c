/*
 * runner_ratesearch: the rates bench.find_max probes, against a server
 * whose capacity is known: every probe at or below it meets the targets.
 */
#include <math.h>

#include "test.h"

#include "exec/ratesearch.h"

/* Run a search against capacity cap; returns the result, *n the probes. */
static double search(double start, double max, int steps, double cap, int *n, double *step)
{
    struct rs_search s;
    rs_init(&s, start, max, steps);
    *n = 0;
    while (s.next > 0 && *n < 100) {
        (*n)++;
        rs_report(&s, s.next <= cap);
    }
    *step = rs_step(&s);
    return s.lo;
}

TEST(doubles_then_bisects)
{
    struct rs_search s;
    rs_init(&s, 1, 1000, 3);
    double want[] = {1, 2, 4, 8, 16, 12, 10, 11};
    bool met[] = {1, 1, 1, 1, 0, 0, 1, 1}; /* capacity 11 */
    for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
        CHECK_NEAR(s.next, want[i], 0);
        rs_report(&s, met[i]);
    }
    CHECK_NEAR(s.next, 0, 0); /* over */
    CHECK_NEAR(s.lo, 11, 0);
    CHECK_NEAR(rs_step(&s), 1, 0);
}

TEST(ends_within_one_step_of_the_capacity)
{
    double caps[] = {0.3, 1, 7.5, 40, 99, 250, 999};
    for (size_t i = 0; i < sizeof(caps) / sizeof(caps[0]); i++) {
        int n;
        double step;
        double got = search(1, 1e4, 5, caps[i], &n, &step);
        CHECK_MSG(got <= caps[i] && caps[i] - got <= step, "cap %g: got %g, step %g", caps[i], got,
                  step);
        CHECK(n <= 20);
    }
}

TEST(max_and_nothing_met)
{
    int n;
    double step;
    /* everything meets: stops at max, probed exactly */
    CHECK_NEAR(search(3, 20, 4, 1e9, &n, &step), 20, 0);
    CHECK_INT(n, 4); /* 3, 6, 12, 20 */
    CHECK_NEAR(step, 0, 0);
    /* nothing meets: bisects below start, ends at 0 (none) */
    CHECK_NEAR(search(8, 100, 3, 0, &n, &step), 0, 0);
    CHECK_INT(n, 4); /* 8, 4, 2, 1 */
    /* steps 0: doubling alone */
    CHECK_NEAR(search(1, 100, 0, 5, &n, &step), 4, 0);
    CHECK_INT(n, 4); /* 1, 2, 4, 8 */
}

/* issue 14: the bound the progress line shows ("at most N") holds for
 * every capacity, and is reached when the last doubling probe misses */
TEST(max_probes_bounds_every_search)
{
    double caps[] = {0, 0.3, 1, 3, 7.5, 40, 99, 250, 999, 1e4, 1e9};
    int limits[][3] = {{1, 10000, 5}, {5, 1000, 3}, {3, 20, 4}, {8, 8, 2}, {1, 100, 0}};
    for (size_t l = 0; l < sizeof(limits) / sizeof(limits[0]); l++) {
        int *L = limits[l], most = 0;
        int bound = rs_max_probes(L[0], L[1], L[2]);
        for (size_t i = 0; i < sizeof(caps) / sizeof(caps[0]); i++) {
            int n;
            double step;
            search(L[0], L[1], L[2], caps[i], &n, &step);
            CHECK_MSG(n <= bound, "start %d max %d steps %d cap %g: %d probes > %d", L[0], L[1],
                      L[2], caps[i], n, bound);
            most = n > most ? n : most;
        }
        int n;
        double step;
        search(L[0], L[1], L[2], L[1] - 0.5, &n, &step); /* max itself misses */
        most = n > most ? n : most;
        CHECK_MSG(most == bound, "start %d max %d steps %d: at most %d, bound %d", L[0], L[1], L[2],
                  most, bound);
    }
    CHECK_INT(rs_max_probes(5, 1000, 3), 12); /* 5, 10, ..., 640, 1000; 3 bisections */
    CHECK_INT(rs_max_probes(0, 10, 3), 0);
    CHECK_INT(rs_max_probes(10, 5, 3), 0);
}

TEST_MAIN()
