/*
 * Unit tests for runner/exec/slurm.c without a cluster: the job array's
 * --wrap script, run by the real sh as sbatch's batch shell would, picks
 * the variant of its SLURM_ARRAY_TASK_ID and passes paths with blanks and
 * quotes through as single arguments; task states are read from squeue's
 * "%i|%T" lines. The cluster itself is integration/exec_slurm.sh.
 */
#include "exec/slurm.c"

#include "test.h"

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

TEST_MAIN()
