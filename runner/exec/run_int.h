/*
 * run_int: what the files of `sweep run` share: the run's state (struct
 * run_ctx) and the steps each file gives the others. run.c is the loop
 * (variants, points, the row of each, the end of the run); run_folder.c
 * the preflight and the run folder (own, resume checks, prepare);
 * run_server.c the server's life (start, health, stop, the last server's
 * leftovers); run_search.c bench.find_max's probes. Private to those files.
 */
#ifndef RUNNER_RUN_INT_H
#define RUNNER_RUN_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "err.h"
#include "strvec.h"

#include "exec/cgroup.h"
#include "exec/energy.h"
#include "exec/executor.h"
#include "exec/manifest.h"
#include "exec/proc.h"
#include "exec/progress.h"
#include "exec/run.h"

#include "analysis/rundir.h"
#include "client/extract.h"
#include "config/experiment.h"
#include "config/plan.h"
#include "store/results.h"

#define CLIENT_GRACE_S   1.0   /* a client stopped early gets this long after SIGTERM */
#define HEALTH_RECHECK_S 30.0  /* an alive server that stopped answering: wait this long */
#define DEATH_SETTLE_MS  250.0 /* after a client failure, time for a dying server to show */
#define TAIL_LINES       30
#define STALE_MAX        64    /* group members remembered when a server stops */
#define STALE_WAIT_S     10.0  /* R9: longest wait for the last server's processes */
#define STALE_POLL_MS    250.0 /* between two looks at them (nvidia-smi included) */
#define SCRAPE_GIVE_UP   3     /* /metrics failures in a row before a variant is not asked */

struct run_ctx {
    const struct run_opts *o;
    proc_stop_flag *stop;
    struct experiment exp;
    struct plan plan;
    bool have_exp, have_plan, have_manifest;
    char *run_dir;       /* owned */
    char *csv_path;      /* owned: run_dir/points.csv */
    char *manifest_path; /* owned: run_dir/manifest.json */
    int lock_fd;         /* the run folder's lock (rundir_lock), when have_lock */
    bool have_lock;
    struct strvec made; /* folders this run created (undone when refused) */
    bool lock_made;     /* this run created the folder's lock file */
    bool prepared;      /* prepare_folder wrote the folder (else a failure undoes) */
    struct res_table table;
    struct manifest man;
    ext_set **ext;      /* per variant, compiled on first use */
    struct executor ex; /* where servers and clients run (local, ssh; slurm: the tasks) */
    struct proc server; /* the running server, if server.pid */
    size_t server_vi;   /* its variant */
    long server_starts; /* servers started this session (restarts included) */
    bool env_failure;   /* a server never became healthy or its port was taken */
    bool fatal;         /* results could not be saved: stop at once */
    size_t n_ok, n_failed, n_skipped;
    bool *attempted; /* per plan point: run (or failed to run) in this session */
    double *took_s;  /* per plan point: client seconds when it ended ok, else < 0 */
    struct progress prog;
    /* R9: the processes of the last stopped server's group; the next server
     * starts once none of them runs or holds a GPU context */
    pid_t stale[STALE_MAX];
    size_t n_stale;
    pid_t stale_pgid;
    bool start_stale; /* the last server_start failed on one of them */
    char *nvsmi;      /* owned: nvidia-smi's path, NULL without it */
    bool nvsmi_looked;
    struct cg_base cg;         /* a cgroup per server and client (cg_open); zeroed: none */
    int *metrics_misses;       /* per variant: /metrics scrapes failed in a row */
    struct energy_src *energy; /* per variant: where its power comes from (exec/energy.h),
                                  chosen at its first point; kind ENERGY_NONE until then */
    bool *energy_chosen;       /* per variant */
    struct res_table from;     /* --from RUN_DIR's points (empty without) */
};

/* ---- run.c ---- */

/* Ctrl-C (or SIGTERM/SIGHUP) arrived: finish the current step, start none. */
bool stopping(const struct run_ctx *c);
/* Run plan point pi against the running server and fill row (the table
 * takes it through record()); returns the row's status. */
const char *run_point(struct run_ctx *c, size_t pi, struct res_point *row);
/* Put row into the table and save points.csv at once (a failure to save
 * stops the run: c->fatal). */
void record(struct run_ctx *c, struct res_point *row);
/* Whether point pi has an ok row from an earlier session (--resume). */
bool point_done(const struct run_ctx *c, size_t pi);
/* Run point pi as one step of the progress display, labelled label, and
 * record its row (with eta, the ETA is refreshed before the point's line);
 * returns false when it was interrupted. */
bool run_one(struct run_ctx *c, size_t pi, const char *label, bool eta);

/* ---- run_folder.c ---- */

char *default_run_dir(const struct experiment *exp, struct strvec *made, bool claim,
                      struct err *err);
int preflight(struct run_ctx *c, struct err *err);
int own_folder(struct run_ctx *c, struct err *err);
int prepare_folder(struct run_ctx *c, bool fresh_default, struct err *err);

/* ---- run_server.c ---- */

char *remote_dir(const struct run_ctx *c, const struct exp_variant *v);
void kill_strays(const struct run_ctx *c);
void server_stop(struct run_ctx *c);
char *new_cgroup(struct run_ctx *c, const char *role);
int server_start(struct run_ctx *c, size_t vi, struct err *err);
int server_ensure(struct run_ctx *c, size_t vi, struct err *err);

/* ---- run_search.c ---- */

void find_max(struct run_ctx *c, size_t vi);
bool search_ahead(const struct run_ctx *c, size_t from);

#endif
