/*
 * rundir: a results folder as the commands that re-read one see it (plot,
 * compare, import, check --from, and report_build): the extraction and fit
 * settings (experiment.yaml, or manifest.json's "imported" entry for runs
 * made by `sweep import`), the facts REPORT.md quotes (manifest.json), the
 * client logs on disk (<variant>/c<C>-n<P>[-r<R>].log), and re-extracting
 * one point from its saved log.
 */
#ifndef RUNNER_RUNDIR_H
#define RUNNER_RUNDIR_H

#include <stdbool.h>
#include <stddef.h>

#include "err.h"
#include "strvec.h"

#include "analysis/goodput.h"

#include "client/extract.h"
#include "client/scrape.h"
#include "store/results.h"

/* How to read one variant's logs. */
struct rundir_extract {
    char *preset;                 /* owned; NULL = no preset (user patterns only) */
    struct ext_pattern *patterns; /* owned, names and regexes included */
    size_t n_patterns;
    struct strvec require;         /* metrics a point needs to count as ok */
    struct scrape_map *server_map; /* owned, strings included: metrics.server_map */
    size_t n_server_map;
};

struct rundir_variant {
    char *name; /* owned */
    struct rundir_extract ext;
    char *model;               /* owned; model path as run, or NULL */
    struct strvec server_argv; /* the server's argv as run (manifest), may be empty */
    long output_len;           /* tokens per request, -1 if unknown */
    double request_rate;       /* open-loop rate, req/s; 0 closed loop or unknown */
    char *energy;              /* owned: where its power came from, or "not measured: WHY" (manifest
                                  "energy", exec/energy.h); NULL when the manifest does not say */
};

struct rundir {
    char *dir;                /* owned; the folder as given */
    char *name;               /* owned; experiment name, else the folder's name */
    char *description;        /* owned; "" if none */
    char *fit_x, *fit_y;      /* owned; analysis.fit, default concurrency / median_tpot_ms */
    struct strvec plots;      /* charts to draw: throughput, tpot, ttft by default */
    char *group_by;           /* owned; analysis.group_by, a matrix axis, or NULL */
    bool has_experiment;      /* experiment.yaml was read */
    bool has_manifest;        /* manifest.json was read */
    bool imported;            /* made by `sweep import` */
    struct rundir_variant *v; /* owned; declared variants, in order */
    size_t n_v;
    struct rundir_extract fallback; /* for variants found only on disk */
    /* from manifest.json, NULL/empty when absent */
    char *sweep_version, *host, *start, *end;
    struct strvec command; /* argv of the sweep command that made the run */
    bool interrupted;      /* the newest session was stopped (Ctrl-C) */
    struct strvec sources; /* imported: "ORIGINAL -> VARIANT/cC-nP.log" */
    struct gp_slo slo;     /* analysis.slo of experiment.yaml, zeros when absent */
};

/*
 * Read dir/experiment.yaml and dir/manifest.json where present (neither is
 * required). Returns 0 with *rd filled (release with rundir_release), or -1
 * with err set: RN_ERR_ENV when dir is not a readable folder, RN_ERR_USAGE
 * when experiment.yaml or manifest.json is malformed.
 */
int rundir_open(const char *dir, struct rundir *rd, struct err *err);
void rundir_release(struct rundir *rd);

/* The extraction settings for variant (the fallback for unknown names). */
const struct rundir_extract *rundir_extract_for(const struct rundir *rd, const char *variant);

/*
 * Replace every variant's extraction settings from the command line: a
 * non-NULL preset replaces the preset; patterns replace or add by name.
 * Returns 0, or -1 with err set (RN_ERR_USAGE) for a bad pattern or preset.
 */
int rundir_override(struct rundir *rd, const char *preset, const struct ext_pattern *patterns,
                    size_t n, struct err *err);

/*
 * Save extraction overrides given to `sweep plot` (--preset, --pattern) in
 * dir/manifest.json under "replot", so that later plots and REPORT.md use
 * them too; rundir_open applies them over the run's own settings. Patterns
 * add to or replace earlier overrides by name; reset drops every earlier
 * override first. argv is recorded. Returns 0 or -1 with err (RN_ERR_ENV).
 */
int rundir_save_overrides(const char *dir, const char *preset, const struct ext_pattern *patterns,
                          size_t n, bool reset, int argc, char **argv, struct err *err);

/* A client log found on disk. */
struct rundir_log {
    char *variant;    /* owned */
    long concurrency; /* C from the name */
    long prompts;     /* P from the name */
    long repeat;      /* R from the name, 1 without "-r<R>" */
    char *rel;        /* owned; "variant/c16-n48.log", relative to the run folder */
};

/*
 * Parse a log file name "c<C>-n<P>.log" or "c<C>-n<P>-r<R>.log". Returns
 * true with the numbers set (repeat 1 without the suffix).
 */
bool rundir_parse_log_name(const char *base, long *c, long *p, long *r);

/*
 * Every client log under dir/<variant>/ (folders other than plots/), sorted
 * by the declared variant order (then by name), C, P and R. *out is owned
 * by the caller (rundir_logs_free). Returns 0 or -1 with err (RN_ERR_ENV).
 */
int rundir_scan_logs(const struct rundir *rd, struct rundir_log **out, size_t *n, struct err *err);
void rundir_logs_free(struct rundir_log *logs, size_t n);

/* The open-loop rate variant ran at in req/s (0: closed loop, or not known). */
double rundir_rate(const struct rundir *rd, const char *variant);

#endif
