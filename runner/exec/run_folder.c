/*
 * run_folder: before the first point. The preflight (models, ports,
 * binaries, the executor), the run folder (a default one claimed, an
 * --out one owned by its lock, --force moving an earlier run aside but
 * never what the run uses), --resume's checks against the folder's
 * experiment and rows, and the files a run writes first (experiment.yaml,
 * manifest.json, points.csv).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fileio.h"
#include "log.h"
#include "sweep.h"
#include "timeutil.h"
#include "xalloc.h"

#include "exec/ports.h"
#include "exec/run_int.h"

#include "config/expdiff.h"
#include "store/runfolder.h"

/* results/<name>/<stamp>, with -2, -3 ... when two runs start in one second;
 * with claim the folder is made here (rundir_claim_new), so two runs started
 * together never pick the same one. NULL with err. */
char *default_run_dir(const struct experiment *exp, struct strvec *made, bool claim,
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
int preflight(struct run_ctx *c, struct err *err)
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
int own_folder(struct run_ctx *c, struct err *err)
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
int prepare_folder(struct run_ctx *c, bool fresh_default, struct err *err)
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
