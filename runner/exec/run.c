/*
 * run: the `sweep run` loop. One server at a time (the current variant's),
 * one client at a time (the current point's); both are supervised children
 * in their own process groups (proc.c). Every point ends as a row in
 * points.csv, saved atomically at once, so a crash or Ctrl-C loses at most
 * the point in flight. Flow: run_experiment -> preflight -> prepare_folder
 * (run_folder.c) -> run_variant (server_ensure in run_server.c -> run_one:
 * run_point -> record; find_max in run_search.c) -> finish. run_int.h holds
 * the state the four files share.
 */
#include "exec/run.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fileio.h"
#include "http.h"
#include "log.h"
#include "strutil.h"
#include "sweep.h"
#include "timeutil.h"
#include "xalloc.h"

#include "exec/cause.h"
#include "exec/resume.h"
#include "exec/run_int.h"
#include "exec/slurm.h"

#include "analysis/estimate.h"
#include "analysis/judge.h"
#include "analysis/power.h"
#include "analysis/report.h"
#include "client/loadgen.h"
#include "store/runfolder.h"

/* Ctrl-C (or SIGTERM/SIGHUP) arrived: finish the current step, start none. */
bool stopping(const struct run_ctx *c)
{
    return *c->stop != 0;
}

/* ---- one point ---- */

/* A rerun never overwrites a client log: the old one, its scrapes and its
 * per-request records (X.jsonl) and power samples are kept aside
 * (rundir_keep_old). */
static int keep_old_log(const char *path, struct err *err)
{
    int rc = rundir_keep_old(path, err);
    for (int before = 0; rc == 0 && before < 2; before++) {
        char *scrape = scrape_path(path, before);
        rc = rundir_keep_old(scrape, err);
        free(scrape);
    }
    size_t n = strlen(path);
    if (rc == 0) {
        char *power = power_path(path);
        rc = rundir_keep_old(power, err);
        free(power);
    }
    if (rc == 0 && n > 4 && strcmp(path + n - 4, ".log") == 0) {
        char *jsonl = xasprintf("%.*s.jsonl", (int)(n - 4), path);
        rc = rundir_keep_old(jsonl, err);
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

/* Variant vi's power source (exec/energy.h), chosen at its first point and
 * written to manifest.json for REPORT.md: nvidia-smi for the GPUs in the
 * server's CUDA_VISIBLE_DEVICES (its env: entry, else ours), else RAPL. */
static const struct energy_src *energy_source(struct run_ctx *c, size_t vi)
{
    if (c->energy_chosen[vi])
        return &c->energy[vi];
    const struct plan_variant *pv = &c->plan.variants[vi];
    const char *cvd = getenv("CUDA_VISIBLE_DEVICES");
    for (size_t i = 0; i < pv->server_env.n; i++)
        if (str_starts_with(pv->server_env.v[i], "CUDA_VISIBLE_DEVICES="))
            cvd = pv->server_env.v[i] + strlen("CUDA_VISIBLE_DEVICES=");
    if (!c->nvsmi_looked) {
        struct err e;
        err_init(&e);
        c->nvsmi = proc_resolve_program("nvidia-smi", &e);
        c->nvsmi_looked = true;
    }
    energy_choose(&c->energy[vi], c->nvsmi, cvd, c->ex.kind == EXP_EXEC_SSH, "/sys/class/powercap");
    c->energy_chosen[vi] = true;
    man_energy(&c->man, vi, c->energy[vi].what);
    return &c->energy[vi];
}

/*
 * Run point pi against the running server; begins row and fills it. The client is
 * watched together with the server: a server death, the point's timeout
 * or Ctrl-C stop the client's group at once. Returns the row's status.
 */
const char *run_point(struct run_ctx *c, size_t pi, struct res_point *row)
{
    const struct plan_point *pp = &c->plan.points[pi];
    const struct exp_variant *v = c->plan.variants[pp->variant].v;
    char *rel = xasprintf("%s/%s", v->name, pp->log_name);
    char *log = path_join(c->run_dir, rel);
    char started[32];
    time_iso8601(started, sizeof(started));

    res_point_begin(row, v->name, pp->concurrency, pp->prompts, pp->repeat, pp->key, rel, started);
    free(rel);

    struct buf cause;
    buf_init(&cause, 16 << 10);
    const char *status = RES_OK;
    struct err err;
    err_init(&err);
    struct proc client;
    proc_init(&client);
    char *pfile = NULL;    /* the client's progress file, removed after the point */
    char *cmetrics = NULL; /* where the client saves the metrics after its warmup */
    if (keep_old_log(log, &err) != 0) {
        buf_printf(&cause, "client did not start: %s", err.msg);
        status = RES_FAILED;
        log_error("%s; stopping the run", err.msg);
        c->fatal = true; /* the folder does not take renames: nothing after this can be kept */
        goto out;
    }
    client.cg_dir = new_cgroup(c, "client");
    scrape_server(c, pp->variant, log, true);
    /* the builtin client's progress (client/loadgen.h), for the live line;
     * a local client only: a remote one could not write here */
    struct strvec env = STRVEC_INIT;
    if (c->ex.kind == EXP_EXEC_LOCAL) {
        pfile = xasprintf("%s/%s/.%s.progress", c->run_dir, v->name, pp->log_name);
        strvec_pushf(&env, "%s=%s", LG_PROGRESS_ENV, pfile);
    }
    /* the builtin client scrapes the server again once its warmup is over,
     * over the file just saved (client/loadgen.h): the deltas then leave the
     * warmup out. The environment, not the argv: the argv is in the key. */
    const struct plan_variant *pv = &c->plan.variants[pp->variant];
    if (pv->v->metrics.server && c->metrics_misses[pp->variant] < SCRAPE_GIVE_UP)
        cmetrics = exec_client_metrics_file(&c->ex, &c->plan, pp, log);
    if (cmetrics) {
        char *murl = http_join_url(pv->url, pv->v->metrics.server_path); /* as the client sees it */
        strvec_pushf(&env, "%s=%s", LG_METRICS_URL_ENV, murl);
        strvec_pushf(&env, "%s=%s", LG_METRICS_FILE_ENV, cmetrics);
        free(murl);
    }
    /* power while the client runs, into X.power.csv (analysis/power.h) */
    struct energy_run power;
    energy_run_init(&power);
    char *ppath = power_path(log);
    if (energy_start(energy_source(c, pp->variant), &power, ppath, &err) != 0) {
        prog_note(&c->prog, "sweep: warning: no power samples for this point: %s", err.msg);
        err_init(&err);
    }
    free(ppath);
    double t0 = clock_ms();
    char *rdir = remote_dir(c, v);
    int spawned =
        exec_spawn(&c->ex, &client, &pp->client_argv, &env, log, rdir, CLIENT_GRACE_S, &err);
    free(rdir);
    strvec_release(&env);
    if (spawned != 0) {
        energy_stop(&power);
        buf_printf(&cause, "client did not start: %s", err.msg);
        status = RES_FAILED;
        goto out;
    }
    double deadline = t0 + v->bench.timeout_s * 1000.0;
    struct proc *watch[2] = {&client, &c->server};
    enum { RUNNING, DONE, SERVER_DIED, TIMED_OUT, INTERRUPTED } why = RUNNING;
    while (why == RUNNING) {
        proc_wait_any(watch, 2, 100, c->stop);
        prog_client_file(&c->prog, pfile, log, client.log_offset);
        energy_tick(&power);
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
    energy_stop(&power);
    if (why == DONE)
        exec_point_done(&c->ex, &c->plan, pp, log, cmetrics);
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
    if (strcmp(status, RES_OK) != 0) /* the client printed the server's refusal: say it */
        cause_quote_server(&cause, &client);
out:
    proc_release(&client);
    if (pfile)
        unlink(pfile);
    free(pfile);
    free(cmetrics);
    row->status = xstrdup(status);
    row->cause = xstrdup(cause.data ? cause.data : "");
    buf_release(&cause);
    free(log);
    return row->status;
}

/* Put row into the table and save points.csv at once. */
void record(struct run_ctx *c, struct res_point *row)
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
        res_point_begin(&row, v->name, pp->concurrency, pp->prompts, pp->repeat, pp->key, "", "");
        row.status = xstrdup(RES_FAILED);
        row.cause = xasprintf("not run: %s", why);
        prog_skip(&c->prog, (double)pp->prompts * (double)v->bench.output_len);
        record(c, &row);
        res_point_release(&row);
    }
}

/* Point pi has an ok row (from this session or an earlier one). */
bool point_done(const struct run_ctx *c, size_t pi)
{
    return plan_point_done(&c->plan, &c->table, pi);
}

/* Refresh the ETA the progress line shows (analysis/estimate.h); without
 * a usable model the progress module's own average stays in use. */
static void update_eta(struct run_ctx *c)
{
    bool lower = false;
    double s = est_plan_eta(&c->plan, &c->table, &c->from, c->attempted, c->took_s, &lower);
    if (s >= 0)
        prog_set_eta_bound(&c->prog, s, lower);
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

bool run_one(struct run_ctx *c, size_t pi, const char *label, bool eta)
{
    const struct plan_point *pp = &c->plan.points[pi];
    const struct exp_variant *v = c->plan.variants[pp->variant].v;
    c->attempted[pi] = true;
    prog_begin(&c->prog, label, (double)pp->prompts * (double)v->bench.output_len);
    struct res_point row; /* run_point begins it */
    char *status = xstrdup(run_point(c, pi, &row));
    char *cause = xstrdup(row.cause);
    if (strcmp(status, RES_OK) == 0)
        c->took_s[pi] = row.wall_s;
    record(c, &row); /* the table takes the row */
    res_point_release(&row);
    if (eta) /* before the point's line, which shows it */
        update_eta(c);
    prog_end(&c->prog, status, cause);
    bool interrupted = strcmp(status, RES_INTERRUPTED) == 0;
    free(status);
    free(cause);
    return !interrupted;
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
        if (!run_one(c, todo[i], label, true))
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
    for (size_t i = 0; c->energy && i < c->plan.n_variants; i++)
        energy_src_release(&c->energy[i]);
    free(c->energy);
    free(c->energy_chosen);
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

/* The slurm executor's path: one array task per variant runs it on its
 * node (exec/slurm.h); this process submits, follows and merges the rows. */
static void run_on_slurm(struct run_ctx *c, const char *self_exe)
{
    struct err err;
    err_init(&err);
    struct slurm_run sr = {
        .plan = &c->plan,
        .run_dir = c->run_dir,
        .self_exe = self_exe,
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
    size_t n_renamed = resume_adopt_renamed(&c->plan, &c->exp,
                                            &c->table); /* saved with the table by prepare_folder */
    if (prepare_folder(c, fresh_default, &err) != 0)
        goto fail;

    c->ext = xcalloc(c->plan.n_variants, sizeof(*c->ext));
    c->metrics_misses = xcalloc(c->plan.n_variants + 1, sizeof(*c->metrics_misses));
    c->energy = xcalloc(c->plan.n_variants + 1, sizeof(*c->energy));
    c->energy_chosen = xcalloc(c->plan.n_variants + 1, sizeof(*c->energy_chosen));
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

    if (c->ex.kind == EXP_EXEC_SLURM)
        run_on_slurm(c, o->self_exe);
    else
        for (size_t vi = 0; vi < c->plan.n_variants && !stopping(c) && !c->fatal; vi++)
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
