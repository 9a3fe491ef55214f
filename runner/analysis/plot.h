/*
 * plot: gnuplot charts. A chart is a set of series (one per variant or
 * compared run) of points against concurrency, optionally with a fitted
 * line or throughput curve. plot_write fills a template from plots/NAME.gp
 * (embedded at build time) into DIR/NAME.gp and writes DIR/NAME.dat;
 * plot_render runs gnuplot on it (argv vector, no shell) to produce
 * DIR/NAME.png and DIR/NAME.svg. The .gp stays next to the images so users
 * can edit and rerun it: `gnuplot NAME.gp`, or
 * `gnuplot -e 'outputs="dumb"' NAME.gp` for a terminal preview.
 *
 * Environment: SWEEP_GNUPLOT names the gnuplot binary (default: gnuplot on
 * PATH); SWEEP_PLOT_TEMPLATES names a folder of NAME.gp templates to use
 * instead of the embedded ones.
 */
#ifndef RUNNER_PLOT_H
#define RUNNER_PLOT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "buf.h"
#include "err.h"

enum plot_fit {
    PLOT_FIT_NONE,
    PLOT_FIT_LINE,       /* y = a + b·x, equation in the key */
    PLOT_FIT_THROUGHPUT, /* y = x·1000/(a + b·x): a, b are E2E(N) / out per token (TTFT
                            included), with the decode-only ceiling when given */
};

/* What a series is on a Pareto chart (report_charts.c, pareto.h): the
 * frontier of a variant, or its dominated points (grey, no line) or its knee
 * (a ring) belonging to the nearest PLOT_ROLE_SERIES before it, whose colour
 * and marker they take. Every other chart has PLOT_ROLE_SERIES only. */
enum plot_role { PLOT_ROLE_SERIES, PLOT_ROLE_DOMINATED, PLOT_ROLE_KNEE };

struct plot_series {
    char *title;     /* owned; legend entry ("mxfp4", "runA:nvfp4"); "" for no entry */
    double *x;       /* owned; concurrency, > 0 */
    double *y;       /* owned; the value (mean over repeats) */
    double *lo, *hi; /* owned; spread over repeats (min, max); equal to y without repeats */
    size_t n, cap;
    bool fit;          /* a fitted line belongs to this series */
    double a, b, r2;   /* fit: y = a + b·x (ms, ms per request for a step-time fit) */
    double out_tokens; /* PLOT_FIT_THROUGHPUT: tokens per request (E2E = out·(a + b·N)) */
    double ceiling;    /* PLOT_FIT_THROUGHPUT: decode-only ceiling tok/s; 0 or NAN: none */
    int color;         /* 0: by position; else the line colour (series of one group share it) */
    int mark;          /* 0: by position; else 1 + the point type's index (one per member) */
    enum plot_role role;
    char **note; /* owned; per point NULL or a word for its tooltip ("C=16") */
};

struct plot_chart {
    char *name;   /* owned; file stem: NAME.dat, NAME.gp, NAME.png, NAME.svg */
    char *tmpl;   /* owned; template name: throughput, tpot, ttft or ratio */
    char *title;  /* owned; chart title */
    char *xlabel; /* owned; with unit */
    char *ylabel; /* owned; with unit */
    enum plot_fit fit;
    struct plot_series *s; /* owned */
    size_t n_s, cap_s;
};

void plot_chart_init(struct plot_chart *c, const char *name, const char *tmpl, const char *title,
                     const char *ylabel, enum plot_fit fit);
void plot_chart_release(struct plot_chart *c);
/* Add an empty series titled title; the pointer stays valid until the next
 * plot_chart_series call on c. */
struct plot_series *plot_chart_series(struct plot_chart *c, const char *title);
/* Append a point; non-finite y or x <= 0 is ignored (it cannot be drawn):
 * returns whether it was added. */
bool plot_series_add(struct plot_series *s, double x, double y, double lo, double hi);
/* Give the last point added a note (copied) shown beside its values in the
 * HTML report's tooltip, e.g. the concurrency of a point not drawn against it. */
void plot_series_note(struct plot_series *s, const char *note);
/* Number of points over every series. */
size_t plot_chart_points(const struct plot_chart *c);

/*
 * Write dir/NAME.dat and dir/NAME.gp (atomically) for chart c. Returns 0,
 * or -1 with err set (RN_ERR_ENV for I/O, RN_ERR_USAGE for an unknown
 * template or an unknown @PLACEHOLDER@ in it).
 */
int plot_write(const struct plot_chart *c, const char *dir, struct err *err);

/*
 * Run gnuplot on dir/NAME.gp, producing dir/NAME.png and dir/NAME.svg.
 * gnuplot writes into a scratch folder beside them; both images move into
 * dir only when whole (a PNG ending in IEND, an SVG in </svg>), and the old
 * ones go first, so the chart in dir is the new one or none. Returns 0, or
 * -1 with err set (RN_ERR_ENV): gnuplot missing (the message says so and how
 * to install it), a non-zero exit with its last message, no answer within
 * 60 s, or an image cut short (a full disk).
 */
int plot_render(const char *dir, const char *name, struct err *err);

/* Note a chart that failed: its name onto names (", " between them) and
 * "NAME: why" onto whys ("; " between them), so that a report names every
 * missing chart before the reasons, which a one-line message may cut. */
void plot_note_failure(struct buf *names, struct buf *whys, const char *name, const char *why);

/* Run gnuplot's `dumb` terminal on dir/NAME.gp and copy the text to out. */
int plot_preview(const char *dir, const char *name, FILE *out, struct err *err);

/* The text of template name (embedded or from SWEEP_PLOT_TEMPLATES), in a
 * fresh heap string, or NULL if there is no such template. */
char *plot_template(const char *name);

/* Escape s for a gnuplot double-quoted string into a fresh heap string. */
char *plot_quote(const char *s);

#endif
