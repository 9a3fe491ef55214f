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

#include <jansson.h>

#include "err.h"
#include "analysis/extract.h"
#include "client/scrape.h"
#include "store/results.h"
#include "analysis/goodput.h"
#include "strvec.h"

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

/*
 * Write root to path atomically as JSON for a run folder: indented, keys in
 * insertion order, a final newline (easy to diff); extra_flags adds jansson
 * dump flags such as JSON_REAL_PRECISION(10). Returns 0, or -1 with err set
 * (RN_ERR_ENV).
 */
int rundir_write_json(const char *path, const json_t *root, size_t extra_flags, struct err *err);

/* The open-loop rate variant ran at in req/s (0: closed loop, or not known). */
double rundir_rate(const struct rundir *rd, const char *variant);

/* The lock file every command that writes into a run folder holds. */
#define RUNDIR_LOCK_NAME ".sweep.lock"

/*
 * Own run folder dir (which must exist) for as long as the returned fd stays
 * open: an advisory flock on dir/.sweep.lock (created if missing, opened
 * CLOEXEC so servers and clients do not inherit it), with our pid written
 * into it. The lock file is opened with O_NOFOLLOW: a symlink there (or
 * anything but a regular file) is refused, never written through. Another
 * process holding it is refused at once, never waited for: -1 with err
 * "run folder 'dir' is in use by pid N (...)". Any failure is RN_ERR_ENV.
 * Release with rundir_unlock (or by exiting).
 */
int rundir_lock(const char *dir, struct err *err);
/* rundir_lock, and *created (may be NULL) says whether this call created
 * the lock file (for rundir_unlock_undo). */
int rundir_lock_ex(const char *dir, bool *created, struct err *err);
/* Release a lock taken by rundir_lock; a negative fd does nothing. */
void rundir_unlock(int fd);
/*
 * Release a lock after the command was refused before writing anything:
 * with remove_lock the lock file goes too (the caller created it), so a
 * refused command leaves the user's folder as it found it.
 */
void rundir_unlock_undo(int fd, const char *dir, bool remove_lock);

/*
 * mkdir -p dir, pushing onto made (may be NULL) each folder this call
 * created, outermost first. Returns 0, or -1 with err (RN_ERR_ENV).
 */
int rundir_mkdirs(const char *dir, struct strvec *made, struct err *err);
/* rmdir the folders of made, innermost first; one that is no longer empty
 * stays. */
void rundir_unmake(const struct strvec *made);

/* True when dir has no entry but the lock file (or does not exist). A
 * .sweep.lock that is not a regular file (a symlink) is an entry. */
bool rundir_is_empty(const char *dir);

/*
 * Make a new folder parent/stem, or parent/stem-2, -3 ... when taken (parent
 * is created when missing). mkdir is the claim, so two runs started in the
 * same second get different folders. The folders created are pushed onto
 * made (may be NULL; see rundir_unmake). Returns the heap path, or NULL with
 * err (RN_ERR_ENV).
 */
char *rundir_claim_new(const char *parent, const char *stem, struct strvec *made, struct err *err);

/*
 * Move everything in dir except the lock file and earlier previous-N
 * folders into dir/previous-N/ (the first N from 1 not taken); the caller
 * holds the lock. Nothing is deleted. used (may be NULL) lists paths the
 * caller's run reads (the experiment file, models, datasets, programs): when
 * an entry to move is one of them or holds one (as the path is written, or
 * where it resolves to), nothing moves and -1 is returned with err
 * (RN_ERR_USAGE) naming both. Returns 0 with the new folder's path in
 * *moved_to (heap; NULL when there was nothing to move), or -1 with err
 * (RN_ERR_ENV); what was moved before a failure stays in previous-N.
 */
int rundir_move_aside(const char *dir, const struct strvec *used, char **moved_to, struct err *err);

#endif
