/*
 * Unit tests for runner/exec/slurm.c without a cluster: the job array's
 * --wrap script, run by the real sh as sbatch's batch shell would, picks
 * the variant of its SLURM_ARRAY_TASK_ID and passes paths with blanks and
 * quotes through as single arguments; task states are read from squeue's
 * "%i|%T" lines. The cluster itself is integration/exec_slurm.sh.
 */
#include "test.h"

#include "exec/slurm.c"

/* Run script with SLURM_ARRAY_TASK_ID=id; its output. */
static char *run_script(const char *script, const char *id)
{
    char *env = xasprintf("SLURM_ARRAY_TASK_ID=%s", id);
    const char *argv[] = {"env", env, "/bin/sh", "-c", script, NULL};
    struct capture_opts opts = {.timeout_ms = 10000};
    struct capture_result res;
    struct buf out;
    buf_init(&out, 1 << 16);
    capture_run(argv, &opts, &out, &res);
    free(env);
    char *s = xstrdup(out.data ? out.data : "");
    buf_release(&out);
    return s;
}

TEST(wrap_script_arguments)
{
    struct task t[2] = {{.variant = "a"}, {.variant = "b"}};
    /* a stand-in sweep that prints the variable and every argument */
    struct slurm_run r = {.self_exe = NULL};
    char *dir = xstrdup("/tmp/sweep-slurm-unit-XXXXXX");
    CHECK(mkdtemp(dir) != NULL);
    char *fake = path_join(dir, "sweep");
    FILE *f = fopen(fake, "w");
    CHECK(f != NULL);
    if (f) {
        fputs("#!/bin/sh\nprintf '[%s]' \"$SWEEP_EXECUTOR\" \"$@\"\n", f);
        fclose(f);
    }
    chmod(fake, 0755);
    r.self_exe = fake;
    char *script = wrap_script(&r, "/runs/it's a $dir", t, 2);
    char *out = run_script(script, "1");
    CHECK_STR(out, "[local][run][/runs/it's a $dir/experiment.yaml][--only][b][--resume]"
                   "[/runs/it's a $dir/tasks/b]");
    free(out);
    out = run_script(script, "0");
    CHECK(strstr(out, "[--only][a]") != NULL);
    free(out);
    free(script);
    unlink(fake);
    rmdir(dir);
    free(fake);
    free(dir);
}

TEST(squeue_lines_give_task_states)
{
    /* poll_queue parses what squeue prints; feed the parser via a fake
     * squeue on PATH */
    char *dir = xstrdup("/tmp/sweep-slurm-unit-XXXXXX");
    CHECK(mkdtemp(dir) != NULL);
    char *fake = path_join(dir, "squeue");
    FILE *f = fopen(fake, "w");
    if (f) {
        fputs("#!/bin/sh\nprintf '12_1|RUNNING\\n12_0|PENDING\\n12_7|RUNNING\\n'\n", f);
        fclose(f);
    }
    chmod(fake, 0755);
    const char *old = getenv("PATH");
    char *saved = xstrdup(old ? old : "/usr/bin:/bin");
    char *path = xasprintf("%s:%s", dir, saved);
    setenv("PATH", path, 1);
    struct task t[2] = {{.variant = "a"}, {.variant = "b"}};
    CHECK_INT(poll_queue("12", t, 2), 2); /* 12_7 is not one of ours */
    CHECK_STR(t[0].state, "PENDING");
    CHECK_STR(t[1].state, "RUNNING");
    setenv("PATH", saved, 1);
    unlink(fake);
    rmdir(dir);
    free(path);
    free(saved);
    free(fake);
    free(dir);
}

/* A row for variant v at (c, p) with status st, started at stamp. */
static void put_row(struct res_table *t, const char *v, long c, long p, const char *st,
                    const char *key, const char *cause, const char *stamp)
{
    struct res_point r;
    res_point_init(&r);
    r.variant = xstrdup(v);
    r.concurrency = c;
    r.prompts = p;
    r.repeat = 1;
    r.status = xstrdup(st);
    r.key = xstrdup(key);
    r.cause = xstrdup(cause);
    r.log = xasprintf("%s/c%ld-n%ld.log", v, c, p);
    r.started = xstrdup(stamp);
    r.wall_s = 1;
    res_table_put(t, &r);
}

TEST(merge_names_the_task_state_and_moves_the_logs)
{
    static const char yaml[] = "name: m\n"
                               "server: {engine: command, command: [/bin/true]}\n"
                               "bench: {tool: command, command: [/bin/true], grid: [\"1:1\", "
                               "\"2:2\", \"4:4\"]}\n"
                               "variants: [{name: a}, {name: b}]\n";
    struct experiment exp;
    struct plan plan;
    struct err err;
    err_init(&err);
    CHECK_INT(exp_load_string("m.yaml", yaml, strlen(yaml), &exp, &err), 0);
    struct plan_opts po = {.run_dir = "/tmp/unused", .self_exe = "sweep"};
    CHECK_INT(plan_build(&exp, &po, &plan, &err), 0);
    char *run = xstrdup("/tmp/sweep-slurm-merge-XXXXXX");
    CHECK(mkdtemp(run) != NULL);
    char *tasks = path_join(run, "tasks");
    char *vdir = xasprintf("%s/b/b", tasks);
    CHECK_INT(mkdir_p(vdir, 0755, &err, 1), 0);
    char *rundir_b = path_join(run, "b");
    CHECK_INT(mkdir_p(rundir_b, 0755, &err, 1), 0);
    /* the task of b: point 1 ok, point 2 interrupted by the cancel (or
     * failed by the server's SIGTERM), point 3 never reached */
    const char *k1 = plan.points[3].key, *k2 = plan.points[4].key;
    struct res_table tt;
    res_table_init(&tt);
    put_row(&tt, "b", 1, 1, RES_OK, k1, "", "2026-01-01T00:00:01Z");
    put_row(&tt, "b", 2, 2, RES_FAILED, k2, "server exited with code 0 during the point",
            "2026-01-01T00:00:02Z");
    char *csv = xasprintf("%s/b/points.csv", tasks);
    CHECK_INT(res_table_save(&tt, csv, &err), 0);
    res_table_release(&tt);
    char *log1 = path_join(vdir, "c1-n1.log");
    CHECK_INT(file_write_atomic(log1, "x\n", 2, &err, 1), 0);
    struct res_table table;
    res_table_init(&table);
    struct slurm_run r = {.plan = &plan, .run_dir = run, .table = &table};
    struct task t = {.variant = "b"};
    snprintf(t.state, sizeof(t.state), "CANCELLED");
    merge_task(&r, tasks, "42", 1, &t, false);
    const struct res_point *p1 = res_table_find(&table, "b", 1, 1, 1);
    const struct res_point *p2 = res_table_find(&table, "b", 2, 2, 1);
    const struct res_point *p3 = res_table_find(&table, "b", 4, 4, 1);
    CHECK(p1 && strcmp(p1->status, RES_OK) == 0);
    CHECK(p2 && strcmp(p2->status, RES_FAILED) == 0 &&
          strstr(p2->cause, "slurm task 42_1 ended CANCELLED during the point (the task saw: "
                            "server exited") != NULL);
    CHECK(p3 && strcmp(p3->status, RES_FAILED) == 0 &&
          strstr(p3->cause, "slurm task 42_1 ended CANCELLED before the point finished") != NULL);
    CHECK_INT(res_table_find(&table, "a", 1, 1, 1) == NULL, 1); /* not this task's variant */
    CHECK_INT((long)r.n_ok, 1);
    CHECK_INT((long)r.n_failed, 2);
    char *moved = path_join(rundir_b, "c1-n1.log");
    CHECK(path_exists(moved));
    CHECK(!path_exists(log1));
    /* a completed task's failed point is a measurement: it stays as it is */
    struct res_table table2;
    res_table_init(&table2);
    r.table = &table2;
    r.n_ok = r.n_failed = 0;
    snprintf(t.state, sizeof(t.state), "COMPLETED");
    merge_task(&r, tasks, "43", 1, &t, false);
    p2 = res_table_find(&table2, "b", 2, 2, 1);
    CHECK(p2 && strcmp(p2->cause, "server exited with code 0 during the point") == 0);
    p3 = res_table_find(&table2, "b", 4, 4, 1);
    CHECK(p3 && strstr(p3->cause, "ended COMPLETED before the point finished") != NULL);
    /* after Ctrl-C of the submitter nothing is marked: --resume runs it */
    struct res_table table3;
    res_table_init(&table3);
    r.table = &table3;
    snprintf(t.state, sizeof(t.state), "CANCELLED");
    merge_task(&r, tasks, "44", 1, &t, true);
    CHECK(res_table_find(&table3, "b", 4, 4, 1) == NULL);
    p2 = res_table_find(&table3, "b", 2, 2, 1);
    CHECK(p2 && strstr(p2->cause, "slurm task") == NULL);
    res_table_release(&table);
    res_table_release(&table2);
    res_table_release(&table3);
    unlink(moved);
    unlink(csv);
    rmdir(vdir);
    char *tb = path_join(tasks, "b");
    rmdir(tb);
    rmdir(tasks);
    rmdir(rundir_b);
    rmdir(run);
    free(tb);
    free(moved);
    free(log1);
    free(csv);
    free(rundir_b);
    free(vdir);
    free(tasks);
    free(run);
    plan_release(&plan);
    exp_release(&exp);
}

/* W3-SLURM-CANCEL: after scancel, the warning that squeue still lists the
 * job rests on a squeue started once the cancel wait is over, not on a slow
 * one started before it. The fake squeue takes 1 s and notes when it
 * starts; the wait is 2 s. */
TEST(still_listed_warning_waits_the_whole_cancel_wait)
{
    char *dir = xstrdup("/tmp/sweep-slurm-unit-XXXXXX");
    CHECK(mkdtemp(dir) != NULL);
    char *squeue = xasprintf("#!/bin/sh\ndate +%%s.%%N >>'%s/starts'\nsleep 1\n"
                             "printf '12_0|CANCELLED\\n'\n",
                             dir);
    char *scancel = xasprintf("#!/bin/sh\ndate +%%s.%%N >'%s/cancel'\n", dir);
    const char *fakes[][2] = {{"squeue", squeue}, {"scancel", scancel}};
    for (size_t i = 0; i < 2; i++) {
        char *fake = path_join(dir, fakes[i][0]);
        FILE *f = fopen(fake, "w");
        if (f) {
            fputs(fakes[i][1], f);
            fclose(f);
        }
        chmod(fake, 0755);
        free(fake);
    }
    const char *old = getenv("PATH");
    char *saved = xstrdup(old ? old : "/usr/bin:/bin");
    char *path = xasprintf("%s:%s", dir, saved);
    setenv("PATH", path, 1);
    struct progress prog;
    prog_init(&prog, stderr, false, 1, 1);
    proc_stop_flag stop = 1; /* Ctrl-C already: cancel at once */
    struct slurm_run r = {.prog = &prog, .stop = &stop, .cancel_wait_s = 2};
    struct task t[1] = {{.variant = "a"}};
    bool cancelled = false;
    CHECK_INT(wait_job(&r, "12", dir, t, 1, &cancelled), 0);
    CHECK(cancelled);
    /* the last squeue began 2 s or more after scancel */
    char *cancel_path = path_join(dir, "cancel"), *starts_path = path_join(dir, "starts");
    struct buf c, st;
    struct err e;
    err_init(&e);
    buf_init(&c, 4096);
    buf_init(&st, 4096);
    CHECK_INT(file_read_all(cancel_path, &c, &e, 3), 0);
    CHECK_INT(file_read_all(starts_path, &st, &e, 3), 0);
    double at = c.data ? strtod(c.data, NULL) : 0, last = 0;
    for (char *l = st.data; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL)
        last = strtod(l, NULL);
    CHECK_MSG(last - at >= 2.0, "warned on a squeue started %.2f s after scancel", last - at);
    buf_release(&c);
    buf_release(&st);
    unlink(cancel_path);
    unlink(starts_path);
    free(cancel_path);
    free(starts_path);
    setenv("PATH", saved, 1);
    for (size_t i = 0; i < 2; i++) {
        char *fake = path_join(dir, fakes[i][0]);
        unlink(fake);
        free(fake);
    }
    rmdir(dir);
    free(squeue);
    free(scancel);
    free(path);
    free(saved);
    free(dir);
}

TEST_MAIN()
