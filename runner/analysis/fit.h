/*
 * fit: the scaling law of a run. Least squares y = a + b·x (by default the
 * median TPOT, i.e. the decode step time, against concurrency), with what
 * a performance engineer reads from it: R², the throughput ceiling 1000/b
 * tok/s, the concurrency that reaches 90% of it (9a/b), residuals with
 * regime changes flagged, predictions at untested concurrencies, and, when
 * points were repeated, seeded bootstrap confidence intervals.
 *
 * Pure arithmetic: no I/O, deterministic for a given seed.
 */
#ifndef RUNNER_FIT_H
#define RUNNER_FIT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define FIT_REGIME_REL   0.15 /* |y - fitted| / fitted beyond this is a regime change */
#define FIT_BOOTSTRAP_N  2000 /* bootstrap replicates */
#define FIT_SEED_DEFAULT 0x5eedULL
#define FIT_MAX_PRED     16  /* predictions at untested concurrencies, at most */
#define FIT_R2_MIN       0.9 /* below this (3+ levels) the line does not describe the points */
#define FIT_FALL_REL     0.05 /* noise: -a, or a fall over x, up to this share of the step at min x */
#define FIT_UNFIT        "the linear model does not describe these points"

/* y = a + b·x by ordinary least squares. */
struct fit_line {
    double a;  /* intercept, y units (ms for a step time) */
    double b;  /* slope, y units per unit of x (ms per added request) */
    double r2; /* coefficient of determination; 1 when every point is on the line */
    size_t n;  /* observations used */
};

/*
 * Fit x[0..n), y[0..n). Non-finite pairs are skipped. Returns 0, or -1 when
 * fewer than two usable points remain or x never varies (nothing to fit).
 */
int fit_linear(const double *x, const double *y, size_t n, struct fit_line *out);

/* One observation: a point's x (concurrency) and y (step time), per repeat. */
struct fit_obs {
    double x;
    double y;
    long repeat; /* 1-based; only reported back in residuals */
};

struct fit_residual {
    double x, y; /* the observation */
    long repeat;
    double fitted;      /* a + b·x */
    double residual;    /* y - fitted, y units */
    double relative;    /* residual / fitted; NAN when fitted is 0 */
    bool regime_change; /* |relative| > FIT_REGIME_REL (or fitted <= 0) */
};

struct fit_prediction {
    double x;          /* an untested concurrency (powers of two) */
    double y;          /* a + b·x: predicted step time, ms */
    double throughput; /* x·1000/y tok/s; NAN unless the fit is a step time */
};

/* A two-sided 95% percentile bootstrap interval. */
struct fit_ci {
    bool ok; /* false: no repeats, so no interval */
    double lo, hi;
};

struct fit_opts {
    bool step;     /* y is a per-token step time in ms: compute ceiling, c90, throughput */
    uint64_t seed; /* bootstrap seed; 0 = FIT_SEED_DEFAULT */
};

struct fit_analysis {
    bool ok; /* false: too few points; reason says why */
    char reason[160];
    struct fit_line line;
    size_t n_x;               /* distinct x values */
    double ceiling;           /* 1000/b tok/s when step and b > 0, else NAN */
    double c90;               /* 9a/b: concurrency at 90% of the ceiling, when step, a > 0, b > 0 */
    struct fit_residual *res; /* owned; one per observation, in input order */
    size_t n_res;
    size_t n_regime;             /* residuals flagged as regime changes */
    struct fit_prediction *pred; /* owned; ascending x */
    size_t n_pred;
    struct fit_ci a_ci, b_ci, ceiling_ci; /* bootstrap over repeats (ok only with repeats) */
    /* ok but not a law: a step time with a negative intercept or a falling
     * slope, or R² below FIT_R2_MIN over 3+ levels. Then nothing is derived
     * from the line: no ceiling, no c90, no predictions. */
    bool unfit;
    char unfit_why[320]; /* FIT_UNFIT ": " what is wrong "; likely " the reason */
};

/*
 * Fit obs[0..n) and derive everything in struct fit_analysis (except from
 * a line that does not describe the points: see unfit). Always fills
 * *out (release with fit_analysis_release); out->ok says whether a line
 * could be fitted. Bootstrap intervals are computed when some x has more
 * than one observation: each replicate resamples, for every x, its
 * observations with replacement and refits.
 */
void fit_analyse(const struct fit_obs *obs, size_t n, const struct fit_opts *opts,
                 struct fit_analysis *out);
void fit_analysis_release(struct fit_analysis *fa);

/* Spread of repeated measurements of one metric at one point. */
struct fit_spread {
    size_t n;        /* finite values */
    double mean, sd; /* sd: sample standard deviation (n - 1); 0 when n == 1 */
    double min, max;
    struct fit_ci mean_ci; /* bootstrap interval of the mean (ok when n >= 2) */
};

/* Summarise v[0..n) (non-finite values skipped); seed as in fit_opts. */
void fit_spread(const double *v, size_t n, uint64_t seed, struct fit_spread *out);

/*
 * The line as text for people: "a + b·X" with a to a_dec decimals and b to
 * b_dec, where X is x_name ("N"). A negative slope reads "a - |b|·X"
 * (never "+ -"), and a value that rounds to zero loses its sign ("0.0",
 * not "-0.0"). Writes at most size bytes into out and returns out. Every
 * printed formula (terminal, REPORT.md, compare, chart titles, estimates)
 * goes through here so they read alike.
 */
const char *fit_formula(double a, double b, int a_dec, int b_dec, const char *x_name, char *out,
                        size_t size);

/* x·1000/(a + b·x): the throughput the line predicts at concurrency x, tok/s
 * (NAN where the step time is not positive). */
double fit_throughput(const struct fit_line *l, double x);

#endif
