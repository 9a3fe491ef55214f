/*
 * run: the `sweep run` loop. One server at a time (the current variant's),
 * one client at a time (the current point's); both are supervised children
 * in their own process groups (proc.c). Every point ends as a row in
 * points.csv, saved atomically at once, so a crash or Ctrl-C loses at most
 * the point in flight. Flow: run_experiment -> preflight -> prepare_folder
 * -> run_variant (server_ensure -> run_point -> record) -> finish.
 */
#include "exec/run.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "buf.h"
#include "sweep.h"
#include "analysis/estimate.h"
#include "config/experiment.h"
#include "config/expdiff.h"
#include "client/extract.h"
#include "analysis/judge.h"
#include "fileio.h"
#include "log.h"
#include "exec/manifest.h"
#include "config/plan.h"
#include "exec/progress.h"
#include "analysis/report.h"
#include "client/scrape.h"
#include "http.h"
#include "store/results.h"
#include "analysis/rundir.h"
#include "store/runfolder.h"
#include "exec/cause.h"
#include "exec/executor.h"
#include "exec/slurm.h"
#include "exec/cgroup.h"
#include "exec/gpu.h"
#include "exec/ports.h"
#include "exec/proc.h"
#include "exec/ratesearch.h"
#include "exec/ready.h"
#include "exec/resume.h"
#include "strutil.h"
#include "timeutil.h"
#include "xalloc.h"

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
    struct cg_base cg;     /* a cgroup per server and client (cg_open); zeroed: none */
    int *metrics_misses;   /* per variant: /metrics scrapes failed in a row */
    struct res_table from; /* --from RUN_DIR's points (empty without) */
};

/* Ctrl-C (or SIGTERM/SIGHUP) arrived: finish the current step, start none. */
static bool stopping(const struct run_ctx *c)
{
    return *c->stop != 0;
}

/* ---- preflight and the run folder ---- */

/* results/<name>/<stamp>, with -2, -3 ... when two runs start in one second;
 * with claim the folder is made here (rundir_claim_new), so two runs started
 * together never pick the same one. NULL with err. */
static char *default_run_dir(const struct experiment *exp, struct strvec *made, bool claim,
                             struct err *err)
{
    char stamp[32];
    time_stamp_dir(stamp, sizeof(stamp));
    char *parent = xasprintf("results/%s", exp->name);
    char *dir =
        claim ? rundir_claim_new(parent, stamp, made, err) : xasprintf("%s/%s", parent, stamp);
    for (int n = 2; !claim && path_exists(dir) && n < 1000; n++) {
        free(dir);
        dir = xasprintf("%s/%s-%d", parent, stamp, n);
    }
    free(parent);
    return dir;
}

/* Everything that can be checked before a process starts or a file is
 * written: model paths, programs, fixed ports. Returns 0 or -1 (err). */
static int preflight(struct run_ctx *c, struct err *err)
{
    if (c->ex.kind == EXP_EXEC_SSH) /* the same checks, made on the remote host */
        return exec_preflight(&c->ex, &c->plan, err);
    for (size_t vi = 0; vi < c->plan.n_variants; vi++) {
        struct plan_variant *pv = &c->plan.variants[vi];
        const struct exp_server *s = &pv->v->server;
        /* plan_build checked and fingerprinted the model a moment ago */
        if (pv->model_problem)
            return err_set(err, RN_ERR_ENV, "variant '%s': %s", pv->v->name, pv->model_problem), -1;
        char *prog = proc_resolve_program(pv->server_argv.n ? pv->server_argv.v[0] : "", err);
        if (!prog) {
            err_prefix(err, "variant '%s': server", pv->v->name);
            return -1;
        }
        free(prog);
        /* under slurm a fixed port is the node's, unknown here */
        if (s->port != 0 && c->ex.kind == EXP_EXEC_LOCAL && port_in_use(s->host, s->port))
            return err_set(err, RN_ERR_ENV,
                           "variant '%s': port %ld in use on %s (server.port is fixed: stop "
                           "what listens there, or use port: auto)",
                           pv->v->name, s->port, s->host),
                   -1;
    }
    /* every client program, once per distinct argv[0] */
    for (size_t pi = 0; pi < c->plan.n_points; pi++) {
        const struct plan_point *pp = &c->plan.points[pi];
        if (pi > 0 && pp->client_argv.n && c->plan.points[pi - 1].client_argv.n &&
            strcmp(pp->client_argv.v[0], c->plan.points[pi - 1].client_argv.v[0]) == 0)
            continue;
        char *prog = proc_resolve_program(pp->client_argv.n ? pp->client_argv.v[0] : "", err);
        if (!prog) {
            err_prefix(err, "variant '%s': bench client", c->plan.variants[pp->variant].v->name);
            return -1;
        }
        free(prog);
    }
    return 0;
}

/* results/<name>/latest -> <stamp>, replaced atomically. */
static void update_latest(const char *run_dir)
{
    const char *base = path_base(run_dir);
    if (base == run_dir)
        return;
    char *dir = xstrndup(run_dir, (size_t)(base - run_dir) - 1);
    char *link = path_join(dir, "latest");
    char *tmp = xasprintf("%s.tmp.%ld", link, (long)getpid());
    unlink(tmp);
    if (symlink(base, tmp) != 0 || rename(tmp, link) != 0) {
        log_warn("%s: cannot update the link: %s", link, strerror(errno));
        unlink(tmp);
    }
    free(tmp);
    free(link);
    free(dir);
}

/* How many points (grid entry x repeat) variant `now` has that `was`, the
 * same variant in the folder's experiment.yaml, did not. */
static size_t points_added(const struct exp_variant *was, const struct exp_variant *now)
{
    size_t n = 0;
    for (size_t g = 0; g < now->bench.n_grid; g++) {
        const struct exp_point *pt = &now->bench.grid[g];
        long had = 0; /* repeats the folder's experiment planned for this point */
        for (size_t k = 0; k < was->bench.n_grid; k++)
            if (was->bench.grid[k].concurrency == pt->concurrency &&
                was->bench.grid[k].prompts == pt->prompts)
                had = was->bench.repeat;
        if (now->bench.repeat > had)
            n += (size_t)(now->bench.repeat - had);
    }
    return n;
}

static void note_added(const struct exp_variant *was, const struct exp_variant *now)
{
    size_t n = points_added(was, now);
    if (n)
        log_info("resume: variant '%s': adding %zu point(s)", now->name, n);
}

/*
 * --resume: the folder must hold a run of the same experiment, or its rows
 * and the new ones would end up in one table and one fit. Its
 * experiment.yaml must have the same name, and each of its variants must
 * still be in the experiment (by name, or renamed: an unknown name with
 * the same settings) with the same server and client (expdiff.h). New
 * variants and new points are allowed and said on stderr. Returns 0, or -1
 * with err (RN_ERR_USAGE) naming the difference.
 */
static int resume_check(struct run_ctx *c, struct err *err)
{
    const char *dir = c->run_dir;
    const struct experiment *now = &c->exp;
    char *path = path_join(dir, "experiment.yaml");
    struct experiment was;
    struct rundir rd;
    bool *taken = NULL;
    int rc = -1;
    /* a manifest.json that does not parse would be replaced, its earlier
     * sessions lost: refuse it as rundir_open does (path:line:col) */
    if (rundir_open(dir, &rd, err) != 0) {
        err_prefix(err, "--resume '%s'", dir);
        goto out_path;
    }
    rundir_release(&rd);
    if (!path_exists(path)) {
        err_set(err, RN_ERR_USAGE,
                "--resume '%s': no experiment.yaml, so the folder cannot be checked to hold a "
                "run of '%s' (was it made by sweep import?); run into a new folder with --out",
                dir, now->name);
        goto out_path;
    }
    if (exp_load_file(path, &was, err) != 0) {
        err_prefix(err, "--resume '%s'", dir);
        goto out_path;
    }
    if (strcmp(was.name, now->name) != 0) {
        err_set(err, RN_ERR_USAGE,
                "--resume '%s': the folder holds experiment '%s', not '%s' (name differs); "
                "run '%s' into a new folder with --out",
                dir, was.name, now->name, now->path);
        goto out;
    }
    taken = xcalloc(now->n_variants + 1, sizeof(*taken));
    for (size_t i = 0; i < was.n_variants; i++) {
        const struct exp_variant *wv = &was.variants[i], *nv = exp_find_variant(now, wv->name);
        if (nv) {
            const char *field = expdiff_variant(wv, nv);
            if (field) {
                err_set(err, RN_ERR_USAGE,
                        "--resume '%s': variant '%s': %s differs from the folder's "
                        "experiment.yaml (one folder holds one setup); run into a new folder "
                        "with --out",
                        dir, wv->name, field);
                goto out;
            }
            field = expdiff_rules(wv, nv); /* H2: one extraction rule per column */
            if (field) {
                err_set(err, RN_ERR_USAGE,
                        "--resume '%s': variant '%s': %s differs from the folder's "
                        "experiment.yaml, so old and new rows would be read by two rules; "
                        "resume with the folder's rule and change it for every row with "
                        "'sweep plot %s --preset/--pattern', or run into a new folder with --out",
                        dir, wv->name, field, dir);
                goto out;
            }
            taken[nv - now->variants] = true;
            note_added(wv, nv);
            continue;
        }
        /* renamed: a variant the folder does not know, with the same settings */
        size_t j = 0;
        while (j < now->n_variants &&
               (taken[j] || exp_find_variant(&was, now->variants[j].name) ||
                expdiff_variant(wv, &now->variants[j]) || expdiff_rules(wv, &now->variants[j])))
            j++;
        if (j == now->n_variants) {
            err_set(err, RN_ERR_USAGE,
                    "--resume '%s': the folder's variant '%s' is not in %s (a resume can add "
                    "variants and points, not drop or change them); run into a new folder with "
                    "--out",
                    dir, wv->name, now->path);
            goto out;
        }
        taken[j] = true;
        log_info("resume: variant '%s' is now called '%s'", wv->name, now->variants[j].name);
        note_added(wv, &now->variants[j]);
    }
    for (size_t j = 0; j < now->n_variants; j++)
        if (!taken[j])
            log_info("resume: adding variant '%s' (%zu point(s))", now->variants[j].name,
                     now->variants[j].bench.n_grid * (size_t)now->variants[j].bench.repeat);
    rc = 0;
out:
    free(taken);
    exp_release(&was);
out_path:
    free(path);
    return rc;
}

/* What this run reads from disk (--force must not move it away):
 * the experiment file, --from, models and datasets (local ones), and the
 * server and client programs given with a path. */
static void used_paths(const struct run_ctx *c, struct strvec *out)
{
    strvec_push(out, c->o->exp_path);
    if (c->o->from_dir)
        strvec_push(out, c->o->from_dir);
    for (size_t vi = 0; vi < c->plan.n_variants; vi++) {
        const struct plan_variant *pv = &c->plan.variants[vi];
        if (pv->model_path && c->ex.kind != EXP_EXEC_SSH)
            strvec_push(out, pv->model_path);
        if (pv->v->bench.dataset_path)
            strvec_push(out, pv->v->bench.dataset_path);
        if (pv->server_argv.n && strchr(pv->server_argv.v[0], '/'))
            strvec_push(out, pv->server_argv.v[0]);
    }
    for (size_t pi = 0; pi < c->plan.n_points; pi++) {
        const struct strvec *a = &c->plan.points[pi].client_argv;
        if (a->n && strchr(a->v[0], '/') && strvec_find(out, a->v[0]) < 0)
            strvec_push(out, a->v[0]);
    }
}

/*
 * Own the run folder before anything is written into it: create it and
 * take its lock, held until the run ends (a second sweep writing into it is
 * refused, exit 3). A resumed folder must hold the same experiment
 * (resume_check); a new --out must be empty, or with --force its old
 * contents move into previous-N/ (never deleted). Returns 0 or -1 (err).
 */
static int own_folder(struct run_ctx *c, struct err *err)
{
    if (rundir_mkdirs(c->run_dir, &c->made, err) != 0) {
        err_prefix(err, "results folder not writable");
        return -1;
    }
    c->lock_fd = rundir_lock_ex(c->run_dir, &c->lock_made, err);
    if (c->lock_fd < 0)
        return -1;
    c->have_lock = true;
    if (c->o->resume_dir)
        return resume_check(c, err);
    if (rundir_is_empty(c->run_dir))
        return 0;
    if (!c->o->force)
        return err_set(err, RN_ERR_USAGE,
                       "--out '%s' is not empty (an earlier run?): continue that run with "
                       "--resume %s, or add --force to move what it holds into %s/previous-N/",
                       c->run_dir, c->run_dir, c->run_dir),
               -1;
    char *moved_to = NULL;
    struct strvec used = STRVEC_INIT;
    used_paths(c, &used);
    int rc = rundir_move_aside(c->run_dir, &used, &moved_to, err);
    strvec_release(&used);
    if (rc != 0) {
        free(moved_to);
        return -1;
    }
    if (moved_to)
        log_info("--force: moved what %s held into %s", c->run_dir, moved_to);
    free(moved_to);
    return 0;
}

/* Create the run folder and everything that exists before the first
 * point: experiment.yaml, manifest.json, points.csv, variant folders. */
static int prepare_folder(struct run_ctx *c, bool fresh_default, struct err *err)
{
    if (mkdir_p(c->run_dir, 0755, err, RN_ERR_ENV) != 0)
        goto fail;
    for (size_t vi = 0; vi < c->plan.n_variants; vi++) {
        char *d = path_join(c->run_dir, c->plan.variants[vi].v->name);
        int rc = mkdir_p(d, 0755, err, RN_ERR_ENV);
        free(d);
        if (rc != 0)
            goto fail;
    }
    struct buf yaml;
    buf_init(&yaml, BUF_MAX_DEFAULT);
    exp_dump_yaml(&c->exp, &yaml);
    char *yaml_path = path_join(c->run_dir, "experiment.yaml");
    int rc = file_write_atomic(yaml_path, yaml.data ? yaml.data : "", yaml.len, err, RN_ERR_ENV);
    free(yaml_path);
    buf_release(&yaml);
    if (rc != 0)
        goto fail;
    man_init(&c->man, &c->plan, c->o->argc, c->o->argv, c->o->resume_dir ? c->manifest_path : NULL);
    c->have_manifest = true;
    if (man_save(&c->man, c->manifest_path, err) != 0 ||
        res_table_save(&c->table, c->csv_path, err) != 0)
        goto fail;
    if (fresh_default)
        update_latest(c->run_dir);
    c->prepared = true;
    return 0;
fail:
    err_prefix(err, "results folder not writable");
    return -1;
}

/* ---- the server ---- */

/* "http://HOST:PORT/health" for the variant's current port, as polled from
 * here (through a forward under ssh). NULL with err set. */
static char *ready_url(struct run_ctx *c, const struct plan_variant *pv, struct err *err)
{
    return exec_ready_url(&c->ex, pv, err);
}

/* The variant's folder in the remote run folder (made before a remote
 * start, for ${run_dir} and the builtin client's records); NULL for local. */
static char *remote_dir(const struct run_ctx *c, const struct exp_variant *v)
{
    if (c->ex.kind == EXP_EXEC_LOCAL || !c->plan.run_dir)
        return NULL;
    return path_join(c->plan.run_dir, v->name);
}

/* Children of ours that are neither server nor client: the ssh master. */
static void kill_strays(const struct run_ctx *c)
{
    pid_t keep = exec_pid(&c->ex);
    proc_kill_strays(&keep, keep ? 1 : 0);
}

/* The last lines of a server's log on stderr, indented with "  | ", after
 * a failed start: usually the real reason is in there. */
static void print_tail(struct run_ctx *c, const struct proc *p)
{
    char *tail = proc_log_tail(p, TAIL_LINES);
    if (*tail) {
        prog_note(&c->prog, "sweep: last lines of %s:", p->log_path);
        for (char *line = tail; line;) {
            char *nl = strchr(line, '\n');
            if (nl)
                *nl = '\0';
            prog_note(&c->prog, "  | %s", line);
            line = nl ? nl + 1 : NULL;
        }
    }
    free(tail);
}

/* Stop the current server (if any) with its variant's grace period; a
 * second Ctrl-C shortens it to nothing (proc_stop reads the flag). Helpers
 * it moved out of its group (setsid) came to us as subreaper: they go too,
 * before the next server could find its GPU memory or port still held.
 * Callers stop the client first, so no other child of ours is running. */
static void server_stop(struct run_ctx *c)
{
    if (!c->server.pid)
        return;
    const struct exp_server *s = &c->plan.variants[c->server_vi].v->server;
    /* who was in the group, for the next start's stale check (the leader
     * too, though it may be a zombie already: the GPU may still list it) */
    c->stale_pgid = c->server.pid;
    c->stale[0] = c->server.pid;
    c->n_stale = 1 + proc_group_members(c->server.pid, c->stale + 1, STALE_MAX - 1);
    struct proc_stop_info info;
    if (exec_stop(&c->ex, &c->server, s->stop_grace_s, c->stop, &info) != 0)
        log_error("server process group %ld is not empty after SIGKILL", (long)c->server.pid);
    else if (info.hurried) /* its grace was cut short: it did not ignore anything */
        prog_note(&c->prog, "sweep: second interrupt: server (pid %ld) killed without waiting",
                  (long)c->server.pid);
    else if (info.escalated)
        prog_note(&c->prog, "sweep: server (pid %ld) ignored SIGTERM for %.1f s; killed",
                  (long)c->server.pid, info.elapsed_s);
    proc_release(&c->server);
    kill_strays(c);
}

/* The first process of the last server's group that still runs, or that
 * nvidia-smi still lists with a GPU context (why says which); 0 if none. */
static pid_t stale_pid(struct run_ctx *c, const char **why)
{
    for (size_t i = 0; i < c->n_stale; i++)
        if (proc_pid_in_group(c->stale[i], c->stale_pgid)) {
            *why = "still running";
            return c->stale[i];
        }
    if (!c->nvsmi_looked) {
        struct err e;
        err_init(&e);
        c->nvsmi = proc_resolve_program("nvidia-smi", &e);
        c->nvsmi_looked = true;
    }
    if (!c->nvsmi)
        return 0;
    pid_t gpu[256];
    int n = gpu_pids(c->nvsmi, gpu, sizeof(gpu) / sizeof(gpu[0]));
    for (int g = 0; g < n; g++)
        for (size_t i = 0; i < c->n_stale; i++)
            if (gpu[g] == c->stale[i]) {
                *why = "still listed by nvidia-smi";
                return gpu[g];
            }
    return 0;
}

/*
 * Reliability R9: a server starts only once the processes of the one
 * before it are gone and off the GPU, or it would find the memory or the
 * port still held and fail in a way that blames it. Waits up to
 * STALE_WAIT_S; then err says "stale server process PID n" and the caller
 * fails the next point only (the one after looks again).
 */
static int stale_wait(struct run_ctx *c, struct err *err)
{
    double t0 = clock_ms();
    bool noted = false;
    while (c->n_stale) {
        const char *why = "";
        pid_t pid = stale_pid(c, &why);
        if (!pid) {
            c->n_stale = 0;
            break;
        }
        double waited_s = (clock_ms() - t0) / 1000.0;
        if (waited_s >= STALE_WAIT_S)
            return err_set(err, RN_ERR_ENV,
                           "stale server process PID %ld (%s %.0f s after the server was stopped)",
                           (long)pid, why, waited_s),
                   -1;
        if (!noted)
            prog_note(&c->prog,
                      "sweep: waiting up to %.0f s for the last server's process %ld (%s)",
                      STALE_WAIT_S, (long)pid, why);
        noted = true;
        sleep_ms(STALE_POLL_MS, c->stop);
        if (stopping(c))
            return err_set(err, RN_ERR_INTERRUPTED, "interrupted"), -1;
    }
    return 0;
}

/* A cgroup for the next child (role "server" or "client"), or NULL; the
 * first mkdir that fails is said once and process groups carry on. */
static char *new_cgroup(struct run_ctx *c, const char *role)
{
    char *why;
    char *dir = cg_create(&c->cg, role, &why);
    if (why)
        prog_note(&c->prog, "sweep: %s; using process groups only", why);
    free(why);
    return dir;
}

/* Write one line to server.log before a start, so restarts are visible. */
static void mark_server_log(const char *log, const struct plan_variant *pv, long start_no)
{
    char stamp[32];
    time_iso8601(stamp, sizeof(stamp));
    char *mem = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&mem, &len);
    if (!f)
        return;
    fprintf(f, "==== sweep %s: starting server for variant '%s' (start %ld): ", stamp, pv->v->name,
            start_no);
    strvec_print_quoted(f, &pv->server_argv);
    fputc('\n', f); /* strvec_print_quoted does not end the line */
    fclose(f);
    struct err e;
    err_init(&e);
    if (file_append_sync(log, mem, len, &e, RN_ERR_ENV) != 0)
        log_warn("%s", e.msg);
    free(mem);
}

/*
 * Start variant vi's server and wait until it is ready. An auto port that
 * something else took since planning is replaced; a fixed one is refused.
 * On failure the server is stopped, err says why (its log tail printed).
 */
static int server_start(struct run_ctx *c, size_t vi, struct err *err)
{
    struct plan_variant *pv = &c->plan.variants[vi];
    const struct exp_server *s = &pv->v->server;
    c->start_stale = false;
    if (stale_wait(c, err) != 0) {
        c->start_stale = err->code != RN_ERR_INTERRUPTED;
        return -1;
    }
    if (exec_port_in_use(&c->ex, pv, pv->port)) {
        if (s->port != 0)
            return err_set(err, RN_ERR_ENV, "port %ld in use on %s%s (server.port is fixed)",
                           pv->port, s->host, c->ex.where),
                   -1;
        long port = -1;
        for (int tries = 0; tries < 5 && port < 0; tries++) {
            port = exec_port_free(&c->ex, s->host);
            if (port > 0 && exec_port_in_use(&c->ex, pv, port))
                port = -1;
        }
        if (port < 0)
            return err_set(err, RN_ERR_ENV, "no free port on %s", s->host), -1;
        prog_note(&c->prog, "sweep: port %ld is taken now; using %ld", pv->port, port);
        if (plan_set_port(&c->plan, vi, port, err) != 0)
            return -1;
    }
    char *dir = path_join(c->run_dir, pv->v->name);
    char *log = path_join(dir, "server.log");
    free(dir);
    c->server_starts++;
    mark_server_log(log, pv, c->server_starts);
    proc_init(&c->server);
    c->server.cg_dir = new_cgroup(c, "server");
    c->server_vi = vi;
    int rc = -1;
    char *url = NULL;
    char *rdir = remote_dir(c, pv->v);
    int spawned = exec_spawn(&c->ex, &c->server, &pv->server_argv, &pv->server_env, log, rdir,
                             s->stop_grace_s, err);
    free(rdir);
    if (spawned != 0)
        goto out;
    url = ready_url(c, pv, err);
    if (!url)
        goto out;
    prog_note(&c->prog, "sweep: variant '%s': server started (pid %ld), waiting for %s",
              pv->v->name, (long)c->server.pid, url);
    double t0 = clock_ms();
    enum ready_result r = ready_wait(&c->server, url, s->ready_timeout_s, c->stop, err);
    double ready_s = (clock_ms() - t0) / 1000.0;
    man_server_started(&c->man, &c->plan, vi, c->server.pid, r == READY_OK ? ready_s : -1);
    struct err e2;
    err_init(&e2);
    if (man_save(&c->man, c->manifest_path, &e2) != 0) {
        log_error("%s; stopping the run", e2.msg);
        c->fatal = true;
    }
    if (r == READY_OK) {
        prog_note(&c->prog, "sweep: variant '%s': server ready after %.1f s", pv->v->name, ready_s);
        rc = 0;
    } else if (r != READY_INTERRUPTED) {
        print_tail(c, &c->server);
    }
out:
    if (rc != 0)
        server_stop(c);
    free(url);
    free(log);
    return rc;
}

/*
 * Before a point: the server of variant vi is alive and answers its ready
 * path; otherwise (died between points, stopped answering) restart it.
 */
static int server_ensure(struct run_ctx *c, size_t vi, struct err *err)
{
    if (!c->server.pid)
        prog_note(&c->prog, "sweep: variant '%s': restarting the server",
                  c->plan.variants[vi].v->name);
    if (c->server.pid && c->server_vi == vi) {
        if (proc_alive(&c->server)) {
            struct err e2;
            err_init(&e2);
            char *url = ready_url(c, &c->plan.variants[vi], &e2);
            enum ready_result r =
                url ? ready_wait(&c->server, url, HEALTH_RECHECK_S, c->stop, &e2) : READY_EXITED;
            free(url);
            if (r == READY_OK)
                return 0;
            if (r == READY_INTERRUPTED)
                return err_set(err, RN_ERR_INTERRUPTED, "interrupted"), -1;
            prog_note(&c->prog, "sweep: server unhealthy before the point (%s); restarting",
                      e2.msg);
        } else {
            char *cause = cause_of_exit(&c->server, "server");
            prog_note(&c->prog, "sweep: %s between points; restarting", cause);
            free(cause);
        }
    }
    server_stop(c);
    return server_start(c, vi, err);
}

/* ---- one point ---- */

/* A rerun never overwrites a client log: the old one becomes LOG.1, .2 ...
 * (and the builtin client's per-request records, X.jsonl, the same way).
 * Returns -1 with err when the old file cannot be moved: the client would
 * append to it, and the log would hold two runs. */
static int keep_old_file(const char *path, struct err *err)
{
    if (!path_exists(path))
        return 0;
    for (int n = 1; n < 10000; n++) {
        char *cand = xasprintf("%s.%d", path, n);
        bool taken = path_exists(cand);
        int rc = 0;
        if (!taken && rename(path, cand) != 0) {
            err_set(err, RN_ERR_ENV, "%s: cannot keep the old log as %s: %s", path, cand,
                    strerror(errno));
            rc = -1;
        }
        free(cand);
        if (!taken)
            return rc;
    }
    return err_set(err, RN_ERR_ENV, "%s: cannot keep the old log: 9999 old copies", path), -1;
}

static int keep_old_log(const char *path, struct err *err)
{
    int rc = keep_old_file(path, err);
    for (int before = 0; rc == 0 && before < 2; before++) {
        char *scrape = scrape_path(path, before);
        rc = keep_old_file(scrape, err);
        free(scrape);
    }
    size_t n = strlen(path);
    if (rc == 0 && n > 4 && strcmp(path + n - 4, ".log") == 0) {
        char *jsonl = xasprintf("%.*s.jsonl", (int)(n - 4), path);
        rc = keep_old_file(jsonl, err);
        free(jsonl);
    }
    return rc;
}

/* Save the server's Prometheus text beside the point's log (client/scrape.h),
 * before or after the point. A failed scrape is said when a run of failures
 * starts and the next scrape asks again; after SCRAPE_GIVE_UP in a row the
 * variant is not asked again. A scrape that cannot be saved (a full disk)
 * is a write error, not the server's: exit 3. */
static void scrape_server(struct run_ctx *c, size_t vi, const char *log, bool before)
{
    const struct plan_variant *pv = &c->plan.variants[vi];
    if (!pv->v->metrics.server || c->metrics_misses[vi] >= SCRAPE_GIVE_UP)
        return;
    struct err e;
    err_init(&e);
    char *base = exec_base_url(&c->ex, pv, &e); /* under ssh: through the forward */
    char *url = http_join_url(base ? base : pv->url, pv->v->metrics.server_path);
    free(base);
    char *path = scrape_path(log, before);
    bool unsaved = false;
    if (!e.code && scrape_fetch_save(url, path, &unsaved, &e) == 0) {
        c->metrics_misses[vi] = 0;
    } else if (unsaved) {
        c->env_failure = true;
        prog_note(&c->prog, "sweep: error: cannot save the server metrics: %s", e.msg);
    } else if (++c->metrics_misses[vi] == 1) {
        prog_note(&c->prog,
                  "sweep: variant '%s': no server metrics at %s (%s); this point's server_* "
                  "columns stay empty (asked again next time; metrics.server: false stops asking)",
                  pv->v->name, url, e.msg);
    } else if (c->metrics_misses[vi] == SCRAPE_GIVE_UP) {
        prog_note(&c->prog, "sweep: variant '%s': %s failed %d times in a row: not asked again",
                  pv->v->name, url, SCRAPE_GIVE_UP);
    }
    free(path);
    free(url);
}

/* The compiled patterns of variant vi (preset plus its own patterns and
 * the overrides sweep plot saved),
 * built once and kept in the context. NULL with err set if they fail. */
static const ext_set *extractor(struct run_ctx *c, size_t vi, struct err *err)
{
    if (c->ext[vi])
        return c->ext[vi];
    /* with the overrides sweep plot saved in the folder (exec/resume.h) */
    resume_extractor(c->run_dir, &c->plan.variants[vi].v->metrics, &c->ext[vi], err);
    return c->ext[vi];
}

/* Judge the point from its client log (analysis/judge.c): metrics into
 * row, and on an ok status so far, the verdict. Returns the final status. */
static const char *judge(struct run_ctx *c, size_t pi, const char *log_path, const char *status,
                         struct buf *cause, struct res_point *row)
{
    const struct plan_point *pp = &c->plan.points[pi];
    const struct exp_variant *v = c->plan.variants[pp->variant].v;
    struct err err;
    err_init(&err);
    bool client_ok = strcmp(status, RES_OK) == 0, ok = false;
    const ext_set *set = extractor(c, pp->variant, &err);
    struct scrape_map *map = xcalloc(v->metrics.n_server_map + 1, sizeof(*map));
    for (size_t i = 0; i < v->metrics.n_server_map; i++)
        map[i] = (struct scrape_map){v->metrics.server_map[i].key, v->metrics.server_map[i].value};
    struct gp_slo slo = {c->exp.slo_ttft_ms, c->exp.slo_tpot_ms, c->exp.slo_e2e_ms};
    double rate = pp->rate > 0 ? pp->rate : v->bench.request_rate; /* a rate point's own */
    struct judge_spec spec = {
        set, &v->metrics.require, pp->concurrency, pp->prompts, rate, map, v->metrics.n_server_map,
        &slo};
    int rc = set ? judge_point(&spec, log_path, client_ok, &row->metrics, &ok, cause, &err) : -1;
    free(map);
    if (rc != 0) {
        if (client_ok)
            buf_printf(cause, "%s", err.msg);
        return client_ok ? RES_FAILED : status;
    }
    if (ok && cause->len)
        prog_note(&c->prog, "sweep: warning: %s", cause->data);
    return ok ? RES_OK : client_ok ? RES_FAILED : status;
}

/*
 * Run point pi against the running server and fill row. The client is
 * watched together with the server: a server death, the point's timeout
 * or Ctrl-C stop the client's group at once. Returns the row's status.
 */
static const char *run_point(struct run_ctx *c, size_t pi, struct res_point *row)
{
    const struct plan_point *pp = &c->plan.points[pi];
    const struct exp_variant *v = c->plan.variants[pp->variant].v;
    char *rel = xasprintf("%s/%s", v->name, pp->log_name);
    char *log = path_join(c->run_dir, rel);
    char started[32];
    time_iso8601(started, sizeof(started));

    row->variant = xstrdup(v->name);
    row->concurrency = pp->concurrency;
    row->prompts = pp->prompts;
    row->repeat = pp->repeat;
    row->key = xstrdup(pp->key);
    row->log = rel;
    row->started = xstrdup(started);

    struct buf cause;
    buf_init(&cause, 16 << 10);
    const char *status = RES_OK;
    struct err err;
    err_init(&err);
    struct proc client;
    proc_init(&client);
    if (keep_old_log(log, &err) != 0) {
        buf_printf(&cause, "client did not start: %s", err.msg);
        status = RES_FAILED;
        log_error("%s; stopping the run", err.msg);
        c->fatal = true; /* the folder does not take renames: nothing after this can be kept */
        goto out;
    }
    client.cg_dir = new_cgroup(c, "client");
    scrape_server(c, pp->variant, log, true);
    double t0 = clock_ms();
    char *rdir = remote_dir(c, v);
    int spawned =
        exec_spawn(&c->ex, &client, &pp->client_argv, NULL, log, rdir, CLIENT_GRACE_S, &err);
    free(rdir);
    if (spawned != 0) {
        buf_printf(&cause, "client did not start: %s", err.msg);
        status = RES_FAILED;
        goto out;
    }
    double deadline = t0 + v->bench.timeout_s * 1000.0;
    struct proc *watch[2] = {&client, &c->server};
    enum { RUNNING, DONE, SERVER_DIED, TIMED_OUT, INTERRUPTED } why = RUNNING;
    while (why == RUNNING) {
        proc_wait_any(watch, 2, 100, c->stop);
        prog_tick(&c->prog);
        if (!proc_alive(&client))
            why = DONE;
        else if (!proc_alive(&c->server))
            why = SERVER_DIED;
        else if (stopping(c))
            why = INTERRUPTED;
        else if (clock_ms() >= deadline)
            why = TIMED_OUT;
    }
    /* A client that failed may have seen the server die a moment before
     * we did: give the death a moment to show before blaming the client. */
    bool client_failed =
        why == DONE && !(WIFEXITED(client.wstatus) && WEXITSTATUS(client.wstatus) == 0);
    if (client_failed) {
        struct proc *srv[1] = {&c->server};
        proc_wait_any(srv, 1, DEATH_SETTLE_MS, c->stop);
    }
    if (why == DONE && !proc_alive(&c->server))
        why = SERVER_DIED;
    exec_stop(&c->ex, &client, CLIENT_GRACE_S, c->stop, NULL);
    row->wall_s = (clock_ms() - t0) / 1000.0;
    if (why == DONE)
        exec_point_done(&c->ex, &c->plan, pp, log);
    if (why == DONE) /* a point that ended early gets no server columns */
        scrape_server(c, pp->variant, log, false);

    switch (why) {
    case SERVER_DIED: {
        char *sc = cause_of_exit(&c->server, "server");
        buf_printf(&cause, "%s during the point", sc);
        free(sc);
        status = RES_FAILED;
        /* clear what is left of its group now; the next point restarts it */
        server_stop(c);
        break;
    }
    case TIMED_OUT:
        buf_printf(&cause, "client still running after %g s (bench.timeout_s); stopped",
                   v->bench.timeout_s);
        status = RES_TIMEOUT;
        break;
    case INTERRUPTED:
        buf_printf(&cause, "sweep was interrupted (SIGINT/SIGTERM); the client was stopped");
        status = RES_INTERRUPTED;
        break;
    case DONE:
    case RUNNING:
        if (client_failed) {
            char how[96];
            proc_describe_status(client.wstatus, how, sizeof(how));
            char *tail = proc_log_tail(&client, 5);
            const char *line;
            size_t n = str_last_line(tail, strlen(tail), &line);
            if (n > 160)
                n = 160;
            buf_printf(&cause, "client %s%s%.*s%s", how, n ? " ('" : "", (int)n, line,
                       n ? "')" : "");
            free(tail);
            status = RES_FAILED;
        }
        break;
    }
    status = judge(c, pi, log, status, &cause, row);
out:
    proc_release(&client);
    row->status = xstrdup(status);
    row->cause = xstrdup(cause.data ? cause.data : "");
    buf_release(&cause);
    free(log);
    return row->status;
}

/* Put row into the table and save points.csv at once. */
static void record(struct run_ctx *c, struct res_point *row)
{
    if (strcmp(row->status, RES_OK) == 0)
        c->n_ok++;
    else if (strcmp(row->status, RES_INTERRUPTED) != 0)
        c->n_failed++;
    res_table_put(&c->table, row);
    struct err err;
    err_init(&err);
    if (res_table_save(&c->table, c->csv_path, &err) != 0) {
        log_error("%s; stopping the run", err.msg);
        c->fatal = true;
    }
}

/* Rows for points that cannot run because their server did not start. */
static void fail_points(struct run_ctx *c, const size_t *todo, size_t from, size_t n,
                        const char *why)
{
    for (size_t i = from; i < n; i++) {
        const struct plan_point *pp = &c->plan.points[todo[i]];
        const struct exp_variant *v = c->plan.variants[pp->variant].v;
        c->attempted[todo[i]] = true;
        struct res_point row;
        res_point_init(&row);
        row.variant = xstrdup(v->name);
        row.concurrency = pp->concurrency;
        row.prompts = pp->prompts;
        row.repeat = pp->repeat;
        row.key = xstrdup(pp->key);
        row.log = xstrdup("");
        row.started = xstrdup("");
        row.status = xstrdup(RES_FAILED);
        row.cause = xasprintf("not run: %s", why);
        prog_skip(&c->prog, (double)pp->prompts * (double)v->bench.output_len);
        record(c, &row);
        res_point_release(&row);
    }
}

/* Point pi has an ok row (from this session or an earlier one). */
static bool point_done(const struct run_ctx *c, size_t pi)
{
    const struct plan_point *pp = &c->plan.points[pi];
    return res_table_find_ok(&c->table, c->plan.variants[pp->variant].v->name, pp->key) != NULL;
}

/*
 * Resume after a variant was renamed: keys leave the variant's name out, so
 * an ok row of a variant the experiment no longer has, with the key of a
 * point that has no ok row yet, is that point measured under the old name.
 * The row takes the new name and the point is not rerun. Returns how many
 * rows were renamed.
 */
static size_t adopt_renamed(struct run_ctx *c)
{
    size_t n = 0;
    for (size_t pi = 0; pi < c->plan.n_points; pi++) {
        const struct plan_point *pp = &c->plan.points[pi];
        const char *name = c->plan.variants[pp->variant].v->name;
        if (point_done(c, pi))
            continue;
        for (size_t r = 0; r < c->table.n; r++) {
            struct res_point *row = &c->table.rows[r];
            if (!row->key || strcmp(row->key, pp->key) != 0 || !row->status ||
                strcmp(row->status, RES_OK) != 0 || !row->variant ||
                exp_find_variant(&c->exp, row->variant) ||
                res_table_find(&c->table, name, row->concurrency, row->prompts, row->repeat))
                continue;
            free(row->variant);
            row->variant = xstrdup(name);
            n++;
            break;
        }
    }
    return n;
}

/* Every point of variant vi that has no ok row yet, in plan order. */
static size_t pending_points(struct run_ctx *c, size_t vi, size_t *todo)
{
    size_t n = 0;
    for (size_t pi = 0; pi < c->plan.n_points; pi++)
        if (c->plan.points[pi].variant == vi && !point_done(c, pi))
            todo[n++] = pi;
    return n;
}

/* Distinct concurrency levels of the ok rows with a median TPOT (variant
 * NULL: every row): a step law needs two. */
static size_t tpot_levels(const struct res_table *t, const char *variant)
{
    long seen[64];
    size_t n = 0;
    for (size_t r = 0; r < t->n; r++) {
        const struct res_point *p = &t->rows[r];
        bool dup = false;
        if ((variant && strcmp(p->variant, variant) != 0) || strcmp(p->status, RES_OK) != 0 ||
            !mset_get(&p->metrics, "median_tpot_ms", NULL))
            continue;
        for (size_t i = 0; i < n && !dup; i++)
            dup = seen[i] == p->concurrency;
        if (!dup && n < 64)
            seen[n++] = p->concurrency;
    }
    return n;
}

/*
 * Refresh the ETA from the scaling law (estimate.h) fitted to the ok rows
 * so far: per variant, the predicted time of its points still to run,
 * scaled by how its finished points compared with their predictions. A
 * variant without rows of its own borrows the model of all rows. Until a
 * variant has run two concurrency levels its model assumes perfect
 * batching: --from's fit replaces it then, else the ETA is shown as a lower
 * bound (">= 46s"). Without any usable model the progress module's own
 * average stays in use.
 */
static void update_eta(struct run_ctx *c)
{
    struct err err;
    err_init(&err);
    struct est_model all, from_all;
    bool have_all = est_model_from_table(&c->table, NULL, &all, &err) == 0;
    bool have_from = c->from.n && est_model_from_table(&c->from, NULL, &from_all, &err) == 0;
    if (!have_all && !have_from)
        return;
    size_t all_levels = have_all ? tpot_levels(&c->table, NULL) : 0;
    bool lower = false;
    struct est_point *todo = xcalloc(c->plan.n_points + 1, sizeof(*todo));
    double total = 0;
    for (size_t vi = 0; vi < c->plan.n_variants; vi++) {
        const struct exp_variant *v = c->plan.variants[vi].v;
        struct est_model m = all;
        err_init(&err);
        size_t levels = all_levels;
        if (est_model_from_table(&c->table, v->name, &m, &err) == 0)
            levels = tpot_levels(&c->table, v->name);
        else if (!have_all)
            levels = 0;
        bool weak = levels < 2; /* b unknown: perfect batching assumed */
        if (weak && have_from) {
            err_init(&err);
            if (est_model_from_table(&c->from, v->name, &m, &err) != 0)
                m = from_all;
            weak = false;
        }
        size_t n = 0;
        double pred_done = 0, actual_done = 0;
        for (size_t pi = 0; pi < c->plan.n_points; pi++) {
            const struct plan_point *pp = &c->plan.points[pi];
            if (pp->variant != vi)
                continue;
            struct est_point ep = {pp->concurrency, pp->prompts, v->bench.output_len};
            if (!c->attempted[pi] && !point_done(c, pi)) {
                todo[n++] = ep;
            } else if (c->took_s[pi] >= 0) {
                pred_done += est_point_s(&m, &ep);
                actual_done += c->took_s[pi];
            }
        }
        total += est_eta_s(&m, todo, n, pred_done, actual_done);
        lower = lower || (weak && n > 0);
    }
    free(todo);
    prog_set_eta_bound(&c->prog, total, lower);
}

/* The row of point pi in the table (any status), or NULL. */
static const struct res_point *row_of(const struct run_ctx *c, size_t pi)
{
    const struct plan_point *pp = &c->plan.points[pi];
    const char *name = c->plan.variants[pp->variant].v->name;
    for (size_t r = c->table.n; r-- > 0;) {
        const struct res_point *row = &c->table.rows[r];
        if (row->key && strcmp(row->key, pp->key) == 0 && row->variant &&
            strcmp(row->variant, name) == 0)
            return row;
    }
    return NULL;
}

/*
 * bench.find_max of variant vi, once its grid is done, against the running
 * server: each probe is a rate point added to the plan, run and recorded
 * like any other (a probe with an ok row from an earlier session is reused,
 * so a resumed search repeats nothing), and meets the targets when ok with
 * slo_attainment >= bench.find_max.meet. Ends with one line naming
 * the highest rate that met them.
 */
static void find_max(struct run_ctx *c, size_t vi)
{
    const struct exp_variant *v = c->plan.variants[vi].v;
    const struct exp_bench *b = &v->bench;
    struct rs_search s;
    struct err err;
    rs_init(&s, b->find_start, b->find_max_rate, (int)b->find_steps);
    size_t max_probes = (size_t)rs_max_probes(b->find_start, b->find_max_rate, (int)b->find_steps);
    for (size_t probe = 1; s.next > 0 && !stopping(c) && !c->fatal; probe++) {
        size_t pi;
        err_init(&err);
        if (plan_add_probe(&c->plan, vi, s.next, &pi, &err) != 0) {
            log_error("variant '%s': find_max: %s", v->name, err.msg);
            return;
        }
        c->attempted = xrealloc(c->attempted, (pi + 1) * sizeof(*c->attempted));
        c->took_s = xrealloc(c->took_s, (pi + 1) * sizeof(*c->took_s));
        c->attempted[pi] = false;
        c->took_s[pi] = -1;
        const struct plan_point *pp = &c->plan.points[pi];
        if (!point_done(c, pi)) {
            if (server_ensure(c, vi, &err) != 0) {
                log_error("variant '%s': find_max: %s", v->name, err.msg);
                c->env_failure = true;
                return;
            }
            char label[128];
            snprintf(label, sizeof(label), "%s find_max rate=%g n=%ld", v->name, pp->rate,
                     pp->prompts);
            c->attempted[pi] = true;
            prog_probe(&c->prog, probe, max_probes);
            prog_begin(&c->prog, label, (double)pp->prompts * (double)b->output_len);
            struct res_point row;
            res_point_init(&row);
            char *status = xstrdup(run_point(c, pi, &row));
            char *cause = xstrdup(row.cause);
            if (strcmp(status, RES_OK) == 0)
                c->took_s[pi] = row.wall_s;
            record(c, &row);
            res_point_release(&row);
            prog_end(&c->prog, status, cause);
            bool interrupted = strcmp(status, RES_INTERRUPTED) == 0;
            free(status);
            free(cause);
            if (interrupted)
                return;
        }
        const struct res_point *row = row_of(c, pi);
        double att = -1;
        bool met = row && row->status && strcmp(row->status, RES_OK) == 0 &&
                   mset_get(&row->metrics, "slo_attainment", &att) && att >= b->find_attainment;
        prog_note(&c->prog,
                  "sweep: variant '%s': find_max: %g req/s %s the targets "
                  "(slo_attainment %.3g, want >= %g)",
                  v->name, s.next, met ? "meets" : "misses", att, b->find_attainment);
        rs_report(&s, met);
    }
    if (s.next > 0) /* interrupted */
        return;
    if (s.lo > 0 && s.hi == 0)
        prog_note(&c->prog,
                  "sweep: variant '%s': find_max: %g req/s, bench.find_max.max, meets the targets",
                  v->name, s.lo);
    else if (s.lo > 0)
        prog_note(&c->prog,
                  "sweep: variant '%s': find_max: the highest rate meeting the targets is %g "
                  "req/s (%g req/s missed them)",
                  v->name, s.lo, s.hi);
    else
        prog_note(&c->prog,
                  "sweep: variant '%s': find_max: no rate down to %g req/s met the targets",
                  v->name, s.hi);
}

/* Whether a variant from index `from` on has a bench.find_max search. */
static bool search_ahead(const struct run_ctx *c, size_t from)
{
    for (size_t vi = from; vi < c->plan.n_variants; vi++)
        if (c->plan.variants[vi].v->bench.find_start > 0)
            return true;
    return false;
}

/*
 * All pending points of variant vi against one server: start it, then per
 * point check it (restart if needed), run the point and record the row.
 * A server that cannot start fails the remaining points of the variant
 * (rows with the reason), and the run goes on with the next variant.
 */
static void run_variant(struct run_ctx *c, size_t vi, size_t *todo)
{
    size_t n = pending_points(c, vi, todo);
    bool search = c->plan.variants[vi].v->bench.find_start > 0;
    if (n == 0 && !search)
        return;
    const struct exp_variant *v = c->plan.variants[vi].v;
    struct err err;
    err_init(&err);
    size_t i = 0;
    if (server_start(c, vi, &err) != 0) {
        if (err.code == RN_ERR_INTERRUPTED || stopping(c))
            return;
        log_error("variant '%s': %s", v->name, err.msg);
        c->env_failure = true;
        /* a stale process of the last server fails one point; the next looks again */
        fail_points(c, todo, 0, c->start_stale ? 1 : n, err.msg);
        if (!c->start_stale)
            return;
        i = 1;
    }
    for (; i < n && !stopping(c) && !c->fatal; i++) {
        const struct plan_point *pp = &c->plan.points[todo[i]];
        err_init(&err);
        if (server_ensure(c, vi, &err) != 0) {
            if (err.code == RN_ERR_INTERRUPTED || stopping(c))
                break;
            if (c->start_stale) {
                log_error("variant '%s': %s", v->name, err.msg);
                c->env_failure = true;
                fail_points(c, todo, i, i + 1, err.msg);
                continue;
            }
            log_error("variant '%s': server restart failed: %s", v->name, err.msg);
            c->env_failure = true;
            fail_points(c, todo, i, n, err.msg);
            break;
        }
        char label[128], rep[32] = "";
        if (v->bench.repeat > 1)
            snprintf(rep, sizeof(rep), " repeat %ld/%ld", pp->repeat, v->bench.repeat);
        snprintf(label, sizeof(label), "%s c=%ld n=%ld%s", v->name, pp->concurrency, pp->prompts,
                 rep);
        update_eta(c);
        c->attempted[todo[i]] = true;
        prog_begin(&c->prog, label, (double)pp->prompts * (double)v->bench.output_len);
        struct res_point row;
        res_point_init(&row);
        char *status = xstrdup(run_point(c, todo[i], &row));
        char *cause = xstrdup(row.cause);
        if (strcmp(status, RES_OK) == 0)
            c->took_s[todo[i]] = row.wall_s;
        record(c, &row); /* the table takes the row */
        res_point_release(&row);
        update_eta(c);
        prog_end(&c->prog, status, cause);
        bool interrupted = strcmp(status, RES_INTERRUPTED) == 0;
        free(status);
        free(cause);
        if (interrupted)
            break;
    }
    if (search && !stopping(c) && !c->fatal)
        find_max(c, vi);
    c->prog.searching = search_ahead(c, vi + 1);
    server_stop(c);
}

/* ---- the whole run ---- */

/* "PROG run EXP [--only V]... --resume RUN_DIR", shell-quoted, on stdout. */
static void print_resume_hint(const struct run_ctx *c)
{
    struct strvec cmd;
    strvec_init(&cmd);
    strvec_push(&cmd, c->o->argc > 0 ? c->o->argv[0] : "sweep");
    strvec_push(&cmd, "run");
    strvec_push(&cmd, c->o->exp_path);
    for (size_t i = 0; c->o->only && i < c->o->only->n; i++) {
        strvec_push(&cmd, "--only");
        strvec_push(&cmd, c->o->only->v[i]);
    }
    strvec_push(&cmd, "--resume");
    strvec_push(&cmd, c->run_dir);
    printf("sweep: interrupted; what was measured is in %s\nsweep: to run the missing points: ",
           c->run_dir);
    strvec_print_quoted(stdout, &cmd);
    putchar('\n');
    fflush(stdout);
    strvec_release(&cmd);
}

/* Final status over the planned points (rows from earlier sessions count). */
static int final_status(struct run_ctx *c, bool interrupted)
{
    if (interrupted)
        return RN_ERR_INTERRUPTED;
    if (c->env_failure || c->fatal)
        return RN_ERR_ENV;
    for (size_t pi = 0; pi < c->plan.n_points; pi++)
        if (!point_done(c, pi))
            return RN_ERR_POINTS;
    return RN_OK;
}

/* After the loop (normal end or interrupt): close the manifest, build the
 * report from whatever points.csv holds, print the summary and, after an
 * interrupt, the resume command. An artifact that could not be written
 * (manifest.json, fit.json, a chart, REPORT.md) is an error:
 * exit 3, unless the run was interrupted (130 says more). A missing
 * gnuplot only skips the charts (the report says so). Returns the exit
 * status. */
static int finish(struct run_ctx *c)
{
    bool interrupted = stopping(c);
    int status = final_status(c, interrupted);
    bool unwritten = false;
    man_finish(&c->man, status, c->n_ok, c->n_failed, interrupted);
    struct err err;
    err_init(&err);
    if (man_save(&c->man, c->manifest_path, &err) != 0) {
        log_error("%s", err.msg);
        unwritten = true;
    }
    if (c->table.n > 0) {
        struct report_opts ro = {
            .fit_x = c->exp.fit_x,
            .fit_y = c->exp.fit_y,
            .preview = c->o->preview && !interrupted,
            .quiet = false,
            .charts_optional = true,
        };
        err_init(&err);
        if (report_build(c->run_dir, &ro, &err) != 0) {
            log_error("report: %s", err.msg);
            unwritten = true;
        }
    }
    printf("sweep: %zu ok, %zu failed this session (%zu already ok); results in %s\n", c->n_ok,
           c->n_failed, c->n_skipped, c->run_dir);
    if (interrupted)
        print_resume_hint(c);
    fflush(stdout); /* a failure is main.c's: exit 3 for any command */
    if (unwritten && !interrupted)
        status = RN_ERR_ENV;
    return status;
}

/* Free everything; stops the server first if one is still up (error paths). */
static void ctx_release(struct run_ctx *c)
{
    server_stop(c);
    exec_close(&c->ex);
    if (c->ext)
        for (size_t i = 0; i < c->plan.n_variants; i++)
            ext_free(c->ext[i]);
    free(c->ext);
    free(c->metrics_misses);
    free(c->nvsmi);
    cg_close(&c->cg);
    free(c->attempted);
    free(c->took_s);
    if (c->have_manifest)
        man_release(&c->man);
    res_table_release(&c->table);
    res_table_release(&c->from);
    if (c->have_plan)
        plan_release(&c->plan);
    if (c->have_exp)
        exp_release(&c->exp);
    /* the folder is ours until everything is written; a run refused before
     * it wrote anything leaves no lock file or folder of its own */
    if (c->have_lock && !c->prepared)
        rundir_unlock_undo(c->lock_fd, c->run_dir, c->lock_made);
    else if (c->have_lock)
        rundir_unlock(c->lock_fd);
    if (!c->prepared)
        rundir_unmake(&c->made);
    strvec_release(&c->made);
    free(c->run_dir);
    free(c->csv_path);
    free(c->manifest_path);
}

int run_experiment(const struct run_opts *o, proc_stop_flag *stop)
{
    struct run_ctx ctx, *c = &ctx;
    memset(c, 0, sizeof(*c));
    c->o = o;
    c->stop = stop;
    proc_init(&c->server);
    res_table_init(&c->table);
    res_table_init(&c->from);
    struct err err;
    err_init(&err);
    int status = RN_OK;
    size_t *todo = NULL;

    if (exp_load_file(o->exp_path, &c->exp, &err) != 0)
        goto fail;
    c->have_exp = true;
    /* a task of the slurm executor runs its variant here, on its node */
    const char *forced = getenv(SLURM_TASK_ENV);
    if (forced && strcmp(forced, "local") == 0)
        c->exp.executor.kind = EXP_EXEC_LOCAL;
    bool fresh_default = !o->out_dir && !o->resume_dir;
    if (o->resume_dir) {
        char *csv = path_join(o->resume_dir, "points.csv");
        char *yaml = path_join(o->resume_dir, "experiment.yaml");
        bool is_run = path_exists(csv) || path_exists(yaml);
        free(csv);
        free(yaml);
        if (!is_run) {
            err_set(&err, RN_ERR_USAGE,
                    "--resume '%s': not a run folder (no points.csv or experiment.yaml)",
                    o->resume_dir);
            goto fail;
        }
        c->run_dir = xstrdup(o->resume_dir);
    } else {
        c->run_dir = o->out_dir ? xstrdup(o->out_dir)
                                : default_run_dir(&c->exp, &c->made, !o->dry_run, &err);
        if (!c->run_dir)
            goto fail;
    }
    c->csv_path = path_join(c->run_dir, "points.csv");
    c->manifest_path = path_join(c->run_dir, "manifest.json");

    struct plan_opts po = {
        .run_dir = c->run_dir,
        .only = o->only && o->only->n ? o->only : NULL,
        .self_exe = o->self_exe,
        .bundled_engine = NULL,
    };
    /* a failed plan_build leaves a plan to release, too */
    c->have_plan = true;
    if (plan_build(&c->exp, &po, &c->plan, &err) != 0)
        goto fail;
    if (o->dry_run) {
        plan_print(stdout, &c->plan);
        goto out;
    }
    /* Before preflight: a leftover of a killed sweep may hold the port. */
    if (cg_open(&c->cg, NULL, NULL) != 0)
        log_warn("cgroup v2 not usable (%s); processes that leave their group (setsid) may "
                 "outlive a SIGKILLed sweep",
                 c->cg.why);
    cg_clean_leftovers(&c->cg);
    if (exec_open(&c->ex, &c->exp, c->stop, &err) != 0 || preflight(c, &err) != 0 ||
        own_folder(c, &err) != 0)
        goto fail;
    if (o->resume_dir && path_exists(c->csv_path) &&
        (res_table_load(c->csv_path, &c->table, &err) != 0 ||
         resume_keys_check(c->run_dir, &c->plan, &c->table, &err) != 0))
        goto fail;
    if (o->from_dir) {
        char *csv = path_join(o->from_dir, "points.csv");
        int lrc = res_table_load(csv, &c->from, &err);
        free(csv);
        if (lrc != 0) {
            err_prefix(&err, "--from '%s'", o->from_dir);
            goto fail;
        }
    }
    size_t n_renamed = adopt_renamed(c); /* saved with the table by prepare_folder */
    if (prepare_folder(c, fresh_default, &err) != 0)
        goto fail;

    c->ext = xcalloc(c->plan.n_variants, sizeof(*c->ext));
    c->metrics_misses = xcalloc(c->plan.n_variants + 1, sizeof(*c->metrics_misses));
    c->attempted = xcalloc(c->plan.n_points + 1, sizeof(*c->attempted));
    c->took_s = xcalloc(c->plan.n_points + 1, sizeof(*c->took_s));
    for (size_t pi = 0; pi < c->plan.n_points; pi++)
        c->took_s[pi] = -1;
    todo = xcalloc(c->plan.n_points + 1, sizeof(*todo));
    size_t n_run = 0;
    double work = 0;
    for (size_t pi = 0; pi < c->plan.n_points; pi++) {
        const struct plan_point *pp = &c->plan.points[pi];
        if (point_done(c, pi)) {
            c->n_skipped++;
            continue;
        }
        n_run++;
        work += (double)pp->prompts * (double)c->plan.variants[pp->variant].v->bench.output_len;
    }
    prog_init(&c->prog, stderr, o->progress_tty, n_run, work);
    c->prog.searching = search_ahead(c, 0); /* probes are not in n_run */
    if (n_renamed)
        prog_note(&c->prog, "sweep: %zu ok row(s) of renamed variants took their new names",
                  n_renamed);
    if (c->n_skipped)
        prog_note(&c->prog, "sweep: %zu of %zu points already ok in %s; running the other %zu",
                  c->n_skipped, c->plan.n_points, c->run_dir, n_run);
    prog_note(&c->prog, "sweep: run folder %s", c->run_dir);

    if (c->ex.kind == EXP_EXEC_SLURM) {
        struct slurm_run sr = {
            .plan = &c->plan,
            .run_dir = c->run_dir,
            .self_exe = o->self_exe,
            .table = &c->table,
            .csv_path = c->csv_path,
            .man = &c->man,
            .manifest_path = c->manifest_path,
            .prog = &c->prog,
            .stop = c->stop,
        };
        if (slurm_run(&sr, &err) != 0 && err.code != RN_ERR_INTERRUPTED) {
            log_error("%s", err.msg);
            c->env_failure = true;
        }
        c->n_ok = sr.n_ok;
        c->n_failed = sr.n_failed;
    }
    for (size_t vi = 0;
         vi < c->plan.n_variants && c->ex.kind != EXP_EXEC_SLURM && !stopping(c) && !c->fatal; vi++)
        run_variant(c, vi, todo);
    server_stop(c);
    /* descendants that escaped a client's process group (setsid) came to us */
    kill_strays(c);
    status = finish(c);
    goto out;
fail:
    status = err.code ? err.code : RN_ERR_USAGE;
    log_error("%s", err.msg);
out:
    free(todo);
    ctx_release(c);
    return status;
}
