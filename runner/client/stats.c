/*
 * stats: sort, mean and interpolated percentiles over double samples. The
 * mean is accumulated in long double so that a million ITL samples of a
 * few ms each lose nothing to rounding.
 */
#include "client/stats.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "xalloc.h"

/* numpy's default ("linear"): rank r = p/100 (n - 1), then interpolate
 * between the samples at floor(r) and ceil(r). P50 of {1, 2, 3, 4} is 2.5. */
double stats_percentile(const double *sorted, size_t n, double p)
{
    if (n == 0)
        return 0;
    if (p <= 0)
        return sorted[0];
    if (p >= 100)
        return sorted[n - 1];
    double r = p / 100.0 * (double)(n - 1);
    size_t lo = (size_t)floor(r);
    size_t hi = lo + 1 < n ? lo + 1 : lo;
    double frac = r - (double)lo;
    return sorted[lo] + (sorted[hi] - sorted[lo]) * frac;
}

/* qsort order for doubles without the overflow of a subtraction. */
static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

void stats_summarize(double *x, size_t n, struct stats_summary *out)
{
    memset(out, 0, sizeof(*out));
    out->n = n;
    if (n == 0)
        return;
    qsort(x, n, sizeof(*x), cmp_double);
    long double sum = 0;
    for (size_t i = 0; i < n; i++)
        sum += x[i];
    out->mean = (double)(sum / (long double)n);
    out->median = stats_percentile(x, n, 50);
    out->p90 = stats_percentile(x, n, 90);
    out->p95 = stats_percentile(x, n, 95);
    out->p99 = stats_percentile(x, n, 99);
    out->min = x[0];
    out->max = x[n - 1];
}

void stats_vec_push(struct stats_vec *sv, double x)
{
    XGROW(sv->v, sv->cap, sv->n + 1);
    sv->v[sv->n++] = x;
}

void stats_vec_release(struct stats_vec *sv)
{
    free(sv->v);
    sv->v = NULL;
    sv->n = sv->cap = 0;
}
