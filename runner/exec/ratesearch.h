/*
 * ratesearch: the sequence of offered rates that bench.find_max probes,
 * GuideLLM's way: double from `start` while the rate meets the targets (up
 * to `max`), then bisect between the highest rate that met them and the
 * lowest that did not, `steps` times. Pure state; run.c runs each probe as
 * a recorded point and reports whether it met the targets.
 */
#ifndef RUNNER_RATESEARCH_H
#define RUNNER_RATESEARCH_H

#include <stdbool.h>

struct rs_search {
    double start, max; /* req/s */
    int steps;         /* bisections after the doubling */
    double lo;         /* highest rate that met the targets, 0 when none yet */
    double hi;         /* lowest rate that missed them, 0 while doubling */
    int bisected;      /* bisections done */
    double next;       /* the rate to probe next; 0 when the search is over */
};

/* Start a search (start > 0, max >= start, steps >= 0). */
void rs_init(struct rs_search *s, double start, double max, int steps);

/* The probe of s->next met the targets (met) or not; sets the next rate. */
void rs_report(struct rs_search *s, bool met);

/* The step the bisection ends on (hi - lo), for the ± of the result; 0
 * while the search runs or when it ended at max. */
double rs_step(const struct rs_search *s);

/* The most probes a search rs_init(start, max, steps) can make: every rate
 * of the doubling up to max, then `steps` bisections (fewer when a rate
 * misses early). 0 for limits rs_init does not take. */
int rs_max_probes(double start, double max, int steps);

#endif
