/*
 * slurm: the SLURM executor's submitting side (see slurm.h): sbatch of one
 * job array, squeue polling with backoff, scancel on Ctrl-C, the final
 * state of each task, and the merge of the tasks' run folders into the
 * shared one. Every command is an argv vector; the array's --wrap script
 * is the one string a shell parses, and its words come from shq_word.
 */
#include "exec/slurm.h"

#include <dirent.h>
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "buf.h"
#include "capture.h"
#include "fileio.h"
#include "log.h"
#include "strutil.h"
#include "sweep.h"
#include "timeutil.h"
#include "xalloc.h"

#include "exec/shquote.h"

#define CMD_MS        60000.0 /* sbatch, squeue, sacct, scontrol, scancel */
#define POLL_FIRST_MS 500.0   /* squeue backoff: doubling from here ... */
#define POLL_MAX_MS   5000.0  /* ... up to here */
#define CANCEL_WAIT_S 60.0    /* after scancel, for squeue to empty */
#define STATE_MAX     32

/* One variant submitted as task index i of the array. */
struct task {
    const char *variant; /* borrowed from the plan */
    char state[STATE_MAX];
    size_t done, total; /* points with a finished row in the task's folder, of the plan's */
};

/* Run argv (NULL-terminated) to its end with stdout (and stderr when
 * asked) in out (fresh). Returns the exit code, or -1. */
static int run_cmd(const char *const *argv, struct buf *out, bool with_stderr)
{
    buf_init(out, 1 << 20);
    struct capture_opts opts = {.with_stderr = with_stderr, .timeout_ms = CMD_MS};
    struct capture_result res;
    if (capture_run(argv, &opts, out, &res) != 0)
        return -1;
    return capture_exit_code(&res);
}

/* The last line of text, at most 200 bytes, for messages. */
static char *last_line(const char *text)
{
    const char *line = "";
    size_t n = text ? str_last_line(text, strlen(text), &line) : 0;
    return xasprintf("%.*s", (int)(n > 200 ? 200 : n), line);
}

/* ---- submitting ---- */

/* Does variant vi have a point without an ok row? */
static bool pending(const struct slurm_run *r, size_t vi)
{
    for (size_t pi = 0; pi < r->plan->n_points; pi++) {
        const struct plan_point *pp = &r->plan->points[pi];
        if (pp->variant == vi &&
            !res_table_find_ok(r->table, r->plan->variants[vi].v->name, pp->key))
            return true;
    }
    return false;
}

/* The array's script (sbatch --wrap): task i runs variant i of the list
 * locally in its own run folder, seeded with the run's points.csv so that
 * what is ok already is not run again. */
static char *wrap_script(const struct slurm_run *r, const char *abs_run, const struct task *t,
                         size_t n)
{
    struct buf b;
    buf_init(&b, 1 << 20);
    buf_puts(&b, "set --");
    for (size_t i = 0; i < n; i++) {
        buf_putc(&b, ' ');
        shq_word(&b, t[i].variant);
    }
    buf_puts(&b, "\nshift \"$SLURM_ARRAY_TASK_ID\"\nexec env " SLURM_TASK_ENV "=local ");
    char *exp = path_join(abs_run, "experiment.yaml");
    char *tasks = path_join(abs_run, "tasks");
    shq_word(&b, r->self_exe);
    buf_puts(&b, " run ");
    shq_word(&b, exp);
    buf_puts(&b, " --only \"$1\" --resume ");
    shq_word(&b, tasks);
    buf_puts(&b, "/\"$1\"\n");
    free(exp);
    free(tasks);
    return buf_detach(&b, NULL);
}

/* Copy the run's points.csv, experiment.yaml and manifest.json into each
 * task folder (made here): the task resumes it, a resume checks that the
 * folder holds a run of the same experiment with the same keys, and the
 * task reads its logs with the extraction overrides sweep plot saved. */
static int seed_tasks(const struct slurm_run *r, const char *tasks_dir, const struct task *t,
                      size_t n, struct err *err)
{
    static const char *const names[] = {"points.csv", "experiment.yaml", "manifest.json"};
    int rc = 0;
    for (size_t f = 0; f < sizeof(names) / sizeof(names[0]) && rc == 0; f++) {
        struct buf data;
        buf_init(&data, BUF_MAX_DEFAULT);
        char *src = path_join(r->run_dir, names[f]);
        rc = file_read_all(src, &data, err, RN_ERR_ENV);
        for (size_t i = 0; rc == 0 && i < n; i++) {
            char *d = path_join(tasks_dir, t[i].variant);
            char *p = path_join(d, names[f]);
            if (mkdir_p(d, 0755, err, RN_ERR_ENV) != 0 ||
                file_write_atomic(p, data.data ? data.data : "", data.len, err, RN_ERR_ENV) != 0)
                rc = -1;
            free(p);
            free(d);
        }
        free(src);
        buf_release(&data);
    }
    return rc;
}

/* sbatch --parsable --array=0-(n-1) ...: the job id into job. */
static int submit(const struct slurm_run *r, const char *abs_run, const struct task *t, size_t n,
                  char *job, size_t job_size, struct err *err)
{
    const struct exp_executor *e = &r->plan->exp->executor;
    struct strvec a;
    strvec_init(&a);
    strvec_push(&a, "sbatch");
    strvec_push(&a, "--parsable");
    strvec_pushf(&a, "--array=0-%zu", n - 1);
    strvec_pushf(&a, "--job-name=sweep-%s", r->plan->exp->name);
    strvec_pushf(&a, "--output=%s/tasks/slurm-%%A_%%a.out", abs_run);
    char *cwd = getcwd(NULL, 0); /* heap, from libc: relative model paths are read there */
    if (cwd)
        strvec_pushf(&a, "--chdir=%s", cwd);
    free(cwd);
    if (e->partition)
        strvec_pushf(&a, "--partition=%s", e->partition);
    if (e->gres)
        strvec_pushf(&a, "--gres=%s", e->gres);
    if (e->time)
        strvec_pushf(&a, "--time=%s", e->time);
    if (e->account)
        strvec_pushf(&a, "--account=%s", e->account);
    strvec_extend(&a, &e->options);
    strvec_push(&a, "--wrap");
    strvec_push_owned(&a, wrap_script(r, abs_run, t, n));
    struct buf out;
    int code = run_cmd((const char *const *)strvec_argv(&a), &out, true);
    strvec_release(&a);
    int rc = -1;
    /* --parsable prints "JOBID" or "JOBID;CLUSTER" */
    size_t len = out.data ? strspn(out.data, "0123456789") : 0;
    if (code == 0 && len > 0 && len < job_size) {
        snprintf(job, job_size, "%.*s", (int)len, out.data);
        rc = 0;
    } else {
        char *line = last_line(out.data);
        err_set(err, RN_ERR_ENV, "sbatch refused the job array (exit %d%s%s%s)", code,
                *line ? ": '" : "", line, *line ? "'" : "");
        free(line);
    }
    buf_release(&out);
    return rc;
}

/* ---- waiting ---- */

/* "JOB_IDX|STATE" lines (squeue -o %i|%T, sacct -P -o JobID,State) into
 * each listed task's state, the first word only ("CANCELLED by 0");
 * text is changed in place. Returns how many lines named a task. */
static int read_states(char *text, struct task *t, size_t n)
{
    int listed = 0;
    for (char *line = text; line && *line;) {
        char *nl = strchr(line, '\n');
        if (nl)
            *nl = '\0';
        char *us = strchr(line, '_'), *bar = strchr(line, '|');
        long idx;
        if (us && bar && us < bar) {
            *bar = '\0';
            if (str_to_long(us + 1, &idx) == 0 && idx >= 0 && (size_t)idx < n) {
                char *sp = strchr(bar + 1, ' ');
                if (sp)
                    *sp = '\0';
                snprintf(t[idx].state, sizeof(t[idx].state), "%s", bar + 1);
                listed++;
            }
        }
        line = nl ? nl + 1 : NULL;
    }
    return listed;
}

/* squeue's view of the array: each task's state (tasks squeue no longer
 * lists keep theirs). Returns how many are listed, or -1 when squeue
 * failed for another reason than a job it has forgotten. */
static int poll_queue(const char *job, struct task *t, size_t n)
{
    const char *argv[] = {"squeue", "-h", "-r", "-j", job, "-o", "%i|%T", NULL};
    struct buf out;
    if (run_cmd(argv, &out, true) != 0) {
        bool gone = out.data && strstr(out.data, "Invalid job id");
        buf_release(&out);
        return gone ? 0 : -1;
    }
    int listed = read_states(out.data, t, n);
    buf_release(&out);
    return listed;
}

/* The final state of each task: sacct (with accounting), else scontrol
 * (for MinJobAge after the end), else "UNKNOWN". */
static void final_states(const char *job, struct task *t, size_t n)
{
    const char *sacct[] = {"sacct", "-n", "-X", "-P", "-j", job, "-o", "JobID,State", NULL};
    struct buf out;
    if (run_cmd(sacct, &out, false) == 0 && out.data && *out.data) {
        read_states(out.data, t, n);
        buf_release(&out);
        return;
    }
    buf_release(&out);
    for (size_t i = 0; i < n; i++) {
        char id[96];
        snprintf(id, sizeof(id), "%s_%zu", job, i);
        const char *argv[] = {"scontrol", "-o", "show", "job", id, NULL};
        const char *st = NULL;
        if (run_cmd(argv, &out, false) == 0 && out.data)
            st = strstr(out.data, "JobState=");
        if (st) {
            st += strlen("JobState=");
            snprintf(t[i].state, sizeof(t[i].state), "%.*s", (int)strcspn(st, " \n"), st);
        } else if (!*t[i].state) {
            snprintf(t[i].state, sizeof(t[i].state), "UNKNOWN");
        }
        buf_release(&out);
    }
}

/* How far each task got: rows of its variant in its own points.csv that
 * are not "interrupted" (the seeded ok ones count: they are done). */
static void count_done(const char *tasks_dir, struct task *t, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        char *csv = xasprintf("%s/%s/points.csv", tasks_dir, t[i].variant);
        struct res_table tt;
        struct err err;
        res_table_init(&tt);
        err_init(&err);
        if (res_table_load(csv, &tt, &err) == 0) {
            t[i].done = 0;
            for (size_t k = 0; k < tt.n; k++)
                if (tt.rows[k].variant && strcmp(tt.rows[k].variant, t[i].variant) == 0 &&
                    tt.rows[k].status && strcmp(tt.rows[k].status, RES_INTERRUPTED) != 0)
                    t[i].done++;
        }
        res_table_release(&tt);
        free(csv);
    }
}

/* "a RUNNING 1/4, b PENDING 0/2" into out. */
static void describe(const struct task *t, size_t n, struct buf *out)
{
    buf_reset(out);
    for (size_t i = 0; i < n; i++)
        buf_printf(out, "%s%s %s %zu/%zu", i ? ", " : "", t[i].variant,
                   *t[i].state ? t[i].state : "?", t[i].done, t[i].total);
}

static double cancel_wait_s(const struct slurm_run *r)
{
    return r->cancel_wait_s > 0 ? r->cancel_wait_s : CANCEL_WAIT_S;
}

/* Poll until no task is listed. On Ctrl-C: scancel, then wait for the
 * queue to empty: only a squeue started once the cancel wait is over may
 * say that the job is still listed (a slow squeue started before it may
 * not). Returns 0, or -1 (squeue failing all along). */
static int wait_job(struct slurm_run *r, const char *job, const char *tasks_dir, struct task *t,
                    size_t n, bool *cancelled)
{
    double wait_ms = POLL_FIRST_MS, cancel_at = 0, cancel_end = 0;
    int failures = 0;
    struct buf now, before;
    buf_init(&now, 1 << 16);
    buf_init(&before, 1 << 16);
    for (;;) {
        if (*r->stop && !*cancelled) {
            const char *argv[] = {"scancel", job, NULL};
            struct buf out;
            int code = run_cmd(argv, &out, true);
            if (code != 0) {
                char *line = last_line(out.data);
                log_warn("scancel %s failed (exit %d): %s", job, code, line);
                free(line);
            }
            buf_release(&out);
            prog_note(r->prog, "sweep: cancelled slurm job %s", job);
            *cancelled = true;
            cancel_at = clock_ms();
            cancel_end = cancel_at + cancel_wait_s(r) * 1000.0;
            wait_ms = POLL_FIRST_MS;
        }
        /* this poll decides: it starts after the cancel wait */
        bool last = *cancelled && clock_ms() >= cancel_end;
        int listed = poll_queue(job, t, n);
        if (listed < 0 && ++failures >= 5) {
            buf_release(&now);
            buf_release(&before);
            return -1;
        }
        if (listed == 0)
            break;
        if (listed > 0)
            failures = 0;
        count_done(tasks_dir, t, n);
        describe(t, n, &now);
        if (!before.data || strcmp(now.data, before.data) != 0) {
            prog_note(r->prog, "sweep: slurm job %s: %s", job, now.data);
            buf_reset(&before);
            buf_puts(&before, now.data);
        }
        if (last && listed > 0) {
            log_warn("slurm job %s still listed %.0f s after scancel", job,
                     (clock_ms() - cancel_at) / 1000.0);
            break;
        }
        /* a second Ctrl-C must not wait out a long backoff; after scancel
         * the sleep ends at the cancel wait's end at the latest */
        double nap = wait_ms;
        if (*cancelled && nap > cancel_end - clock_ms())
            nap = cancel_end - clock_ms();
        sleep_ms(nap, *cancelled ? NULL : r->stop);
        wait_ms = wait_ms * 2 > POLL_MAX_MS ? POLL_MAX_MS : wait_ms * 2;
    }
    buf_release(&now);
    buf_release(&before);
    return 0;
}

/* ---- merging ---- */

/* Move src to dst; an existing dst is kept as dst.1, .2 ... first. */
static void move_keeping(const char *src, const char *dst)
{
    if (path_exists(dst))
        for (int k = 1; k < 10000; k++) {
            char *cand = xasprintf("%s.%d", dst, k);
            bool taken = path_exists(cand);
            if (!taken && rename(dst, cand) != 0)
                log_warn("%s: cannot keep the old file: %s", dst, strerror(errno));
            free(cand);
            if (!taken)
                break;
        }
    if (rename(src, dst) != 0)
        log_warn("cannot move %s to %s: %s", src, dst, strerror(errno));
}

/* Every plain file of the task's variant folder into the run's. */
static void move_files(const char *from, const char *to)
{
    DIR *d = opendir(from);
    struct dirent *de;
    while (d && (de = readdir(d))) {
        char *src = path_join(from, de->d_name);
        struct stat st;
        if (de->d_name[0] != '.' && stat(src, &st) == 0 && S_ISREG(st.st_mode)) {
            char *dst = path_join(to, de->d_name);
            move_keeping(src, dst);
            free(dst);
        }
        free(src);
    }
    if (d)
        closedir(d);
}

/* Task t's rows of its variant into the run's table, its logs into the
 * run folder; then a failed row naming the task's state for every point
 * of the variant that has no finished row. */
static void merge_task(struct slurm_run *r, const char *tasks_dir, const char *job, size_t i,
                       const struct task *t, bool cancelled)
{
    char *dir = path_join(tasks_dir, t->variant);
    char *csv = path_join(dir, "points.csv");
    struct res_table tt;
    res_table_init(&tt);
    struct err err;
    err_init(&err);
    if (path_exists(csv) && res_table_load(csv, &tt, &err) != 0)
        log_warn("%s", err.msg);
    /* the task's last point that did not end ok: the one it was in */
    char *last_started = NULL;
    struct res_point last = {0};
    for (size_t k = 0; k < tt.n; k++) {
        struct res_point *row = &tt.rows[k];
        if (!row->variant || strcmp(row->variant, t->variant) != 0 || !row->status)
            continue;
        const struct res_point *old =
            res_table_find(r->table, row->variant, row->concurrency, row->prompts, row->repeat);
        bool same = old && old->started && row->started && strcmp(old->started, row->started) == 0;
        if (same) /* merged before (seeded from the run's own table) */
            continue;
        if (strcmp(row->status, RES_OK) == 0)
            r->n_ok++;
        else if (strcmp(row->status, RES_INTERRUPTED) != 0)
            r->n_failed++;
        if (strcmp(row->status, RES_OK) != 0 && row->started &&
            (!last_started || strcmp(row->started, last_started) > 0)) {
            free(last_started);
            last_started = xstrdup(row->started);
            last.concurrency = row->concurrency;
            last.prompts = row->prompts;
            last.repeat = row->repeat;
        }
        res_table_put(r->table, row);
    }
    res_table_release(&tt);
    /* a task that did not complete took that point down with it (a
     * cancelled job's SIGTERM reaches the server too, which the task may
     * report first): the row says so, keeping what the task saw */
    bool completed = strcmp(t->state, "COMPLETED") == 0;
    if (!completed && !cancelled && last_started) {
        struct res_point *row = (struct res_point *)res_table_find(
            r->table, t->variant, last.concurrency, last.prompts, last.repeat);
        if (row && row->status && strcmp(row->status, RES_OK) != 0) {
            char *cause =
                xasprintf("slurm task %s_%zu ended %s during the point%s%s%s", job, i, t->state,
                          row->cause && *row->cause ? " (the task saw: " : "",
                          row->cause ? row->cause : "", row->cause && *row->cause ? ")" : "");
            if (strcmp(row->status, RES_INTERRUPTED) == 0)
                r->n_failed++;
            free(row->cause);
            row->cause = cause;
            free(row->status);
            row->status = xstrdup(RES_FAILED);
        }
    }
    free(last_started);
    char *vdir = path_join(dir, t->variant);
    char *to = path_join(r->run_dir, t->variant);
    move_files(vdir, to);
    free(to);
    free(vdir);
    /* after a Ctrl-C here, what did not finish stays as it is (missing, or
     * interrupted) for --resume; otherwise a point of the variant without a
     * finished row (ok, or failed or timeout with the current key) did not
     * run to its end because the task ended: a failed row naming why */
    for (size_t pi = 0; pi < r->plan->n_points && !cancelled; pi++) {
        const struct plan_point *pp = &r->plan->points[pi];
        const struct plan_variant *pv = &r->plan->variants[pp->variant];
        if (strcmp(pv->v->name, t->variant) != 0)
            continue;
        const struct res_point *row =
            res_table_find(r->table, t->variant, pp->concurrency, pp->prompts, pp->repeat);
        bool finished =
            row && row->status &&
            (strcmp(row->status, RES_OK) == 0 || (strcmp(row->status, RES_INTERRUPTED) != 0 &&
                                                  row->key && strcmp(row->key, pp->key) == 0));
        if (finished)
            continue;
        struct res_point f;
        res_point_begin(&f, t->variant, pp->concurrency, pp->prompts, pp->repeat, pp->key,
                        row ? row->log : NULL, row ? row->started : NULL);
        f.status = xstrdup(RES_FAILED);
        f.cause =
            xasprintf("slurm task %s_%zu ended %s before the point finished", job, i, t->state);
        r->n_failed++;
        res_table_put(r->table, &f);
        res_point_release(&f);
    }
    free(csv);
    free(dir);
}

int slurm_run(struct slurm_run *r, struct err *err)
{
    const struct plan *p = r->plan;
    struct task *t = xcalloc(p->n_variants + 1, sizeof(*t));
    size_t n = 0;
    for (size_t vi = 0; vi < p->n_variants; vi++) {
        if (!pending(r, vi))
            continue;
        t[n].variant = p->variants[vi].v->name;
        for (size_t pi = 0; pi < p->n_points; pi++)
            t[n].total += p->points[pi].variant == vi;
        n++;
    }
    int rc = 0;
    char *abs_run = NULL, *tasks_dir = NULL;
    if (n == 0)
        goto out;
    abs_run = realpath(r->run_dir, NULL); /* heap, from libc: the nodes' path of it */
    if (!abs_run) {
        err_set(err, RN_ERR_ENV, "%s: %s", r->run_dir, strerror(errno));
        rc = -1;
        goto out;
    }
    tasks_dir = path_join(abs_run, "tasks");
    char job[64];
    if (seed_tasks(r, tasks_dir, t, n, err) != 0 ||
        submit(r, abs_run, t, n, job, sizeof(job), err) != 0) {
        rc = -1;
        goto out;
    }
    const char **names = xcalloc(n, sizeof(*names));
    for (size_t i = 0; i < n; i++)
        names[i] = t[i].variant;
    man_slurm_job(r->man, job, names, n);
    free(names);
    struct err e2;
    err_init(&e2);
    if (man_save(r->man, r->manifest_path, &e2) != 0)
        log_warn("%s", e2.msg);
    prog_note(r->prog,
              "sweep: submitted slurm job array %s (%zu task%s; logs in %s/slurm-%s_*.out)", job, n,
              n == 1 ? "" : "s", tasks_dir, job);
    bool cancelled = false;
    if (wait_job(r, job, tasks_dir, t, n, &cancelled) != 0) {
        err_set(err, RN_ERR_ENV,
                "squeue cannot report on job %s; it may still run (scancel %s stops it)", job, job);
        rc = -1;
    } else {
        final_states(job, t, n);
    }
    for (size_t i = 0; rc == 0 && i < n; i++) {
        merge_task(r, tasks_dir, job, i, &t[i], cancelled);
        prog_note(r->prog, "sweep: variant '%s': slurm task %s_%zu %s", t[i].variant, job, i,
                  t[i].state);
    }
    struct err e3;
    err_init(&e3);
    if (res_table_save(r->table, r->csv_path, &e3) != 0 && rc == 0) {
        err_set(err, RN_ERR_ENV, "%s", e3.msg);
        rc = -1;
    }
    if (rc == 0 && cancelled) {
        err_set(err, RN_ERR_INTERRUPTED, "interrupted");
        rc = -1;
    }
out:
    free(tasks_dir);
    free(abs_run);
    free(t);
    return rc;
}

/* ---- sweep status ---- */

int slurm_status(const char *run_dir, FILE *out)
{
    char *path = path_join(run_dir, "manifest.json");
    json_t *root = json_load_file(path, 0, NULL);
    json_t *e = json_object_get(root, "executor");
    const char *job = json_string_value(json_object_get(e, "job"));
    json_t *tasks = json_object_get(e, "tasks");
    int rc = RN_OK;
    if (!job || !json_is_object(tasks)) {
        log_error("%s: no slurm job recorded (not a run of executor: slurm, or never submitted)",
                  path);
        rc = RN_ERR_USAGE;
        goto out;
    }
    size_t n = json_object_size(tasks);
    struct task *t = xcalloc(n + 1, sizeof(*t));
    const char *name;
    json_t *val;
    json_object_foreach(tasks, name, val)
    {
        const char *id = json_string_value(val);
        const char *us = id ? strrchr(id, '_') : NULL;
        long idx;
        if (us && str_to_long(us + 1, &idx) == 0 && idx >= 0 && (size_t)idx < n)
            t[idx].variant = name;
    }
    if (poll_queue(job, t, n) <= 0)
        final_states(job, t, n);
    fprintf(out, "slurm job %s (%s)\n", job, run_dir);
    for (size_t i = 0; i < n; i++)
        if (t[i].variant)
            fprintf(out, "  %-20s %s_%zu  %s\n", t[i].variant, job, i,
                    *t[i].state ? t[i].state : "UNKNOWN");
    free(t);
out:
    json_decref(root);
    free(path);
    return rc;
}
