/*
 * Unit tests for the remote side of runner/exec/ssh.c without an sshd: the
 * line ssh_run_line builds is what sshd hands to `$SHELL -c`, so running
 * `sh -c LINE` here, as a proc_spawn child whose stdin is a pipe we hold
 * (p->stdin_pipe, as ssh_spawn does), is the remote side exactly. Checked:
 * argv and environment arrive byte for byte, the work folder and the
 * folder to make, the exit status, and the stop: end of file on stdin
 * stops the program's whole group (SIGKILL after the grace period for one
 * that ignores SIGTERM), also when it is given at once.
 */
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "buf.h"
#include "fileio.h"
#include "sweep.h"
#include "test.h"
#include "testtmp.h"
#include "timeutil.h"

#include "exec/proc.h"
#include "exec/ssh.h"

/* Run the wrapper line for argv (env, dir) as `sh -c LINE` with a held
 * stdin; when stop_after_ms >= 0 close stdin then. Returns the exit status
 * (-1 if it did not end within 20 s) and the output in *out (caller frees). */
static long heartbeat_s; /* run_wrapped's heartbeat timeout (0: none) */

static int run_wrapped(const char *workdir, double grace_s, const char *dir,
                       const struct strvec *env, const struct strvec *argv, double stop_after_ms,
                       char **out)
{
    struct buf line, envs;
    struct err err;
    err_init(&err);
    *out = xstrdup("");
    if (ssh_run_line(workdir, grace_s, dir, env, argv, heartbeat_s, &line, &envs, &err) != 0) {
        buf_release(&line);
        buf_release(&envs);
        return -2;
    }
    struct strvec sh;
    strvec_init(&sh);
    strvec_push(&sh, "/bin/sh");
    strvec_push(&sh, "-c");
    strvec_push(&sh, line.data);
    buf_release(&line);
    char *log = test_tmp_path("wrapped.log");
    unlink(log);
    struct proc p;
    proc_init(&p);
    p.stdin_pipe = true;
    int status = -1;
    if (proc_spawn(&p, &sh, NULL, log, &err) != 0)
        goto out;
    /* what ssh_spawn does: the environment script first, on the held stdin */
    CHECK_INT(write(p.stdin_w, envs.data ? envs.data : "", envs.len), (long long)envs.len);
    double t0 = clock_ms();
    while (proc_alive(&p) && clock_ms() - t0 < 20000) {
        if (stop_after_ms >= 0 && p.stdin_w >= 0 && clock_ms() - t0 >= stop_after_ms) {
            close(p.stdin_w);
            p.stdin_w = -1;
        }
        sleep_ms(10, NULL);
    }
    if (!proc_alive(&p) && p.reaped && WIFEXITED(p.wstatus))
        status = WEXITSTATUS(p.wstatus);
    proc_stop(&p, 0.5, NULL, NULL);
    struct buf b;
    buf_init(&b, 1 << 20);
    if (file_read_all(log, &b, &err, 1) == 0) {
        free(*out);
        *out = xstrdup(b.data ? b.data : "");
    }
    buf_release(&b);
out:
    buf_release(&envs);
    proc_release(&p);
    strvec_release(&sh);
    free(log);
    return status;
}

TEST(argv_arrives_word_for_word)
{
    static const char *const words[] = {"two words", "",   "'", "it's \"x\"", "$HOME", "$(id)",
                                        "`id`",      "\\", "*", ";true",      "a\nb",  "-n",
                                        "--",        "~",  "é", NULL};
    struct strvec argv;
    strvec_init(&argv);
    strvec_push(&argv, "printf");
    strvec_push(&argv, "[%s]");
    char want[512] = "";
    for (size_t i = 0; words[i]; i++) {
        strvec_push(&argv, words[i]);
        snprintf(want + strlen(want), sizeof(want) - strlen(want), "[%s]", words[i]);
    }
    char *out;
    CHECK_INT(run_wrapped("/", 1, NULL, NULL, &argv, -1, &out), 0);
    CHECK_STR(out, want);
    free(out);
    strvec_release(&argv);
}

TEST(environment_workdir_dir_and_exit_status)
{
    free(test_tmp_path("x")); /* makes the scratch folder */
    const char *wd = test_tmpdir;
    struct strvec env, argv;
    strvec_init(&env);
    strvec_init(&argv);
    strvec_push(&env, "A=x y");
    strvec_push(&env, "B=$HOME'`\nline 2\n");
    strvec_push(&env, "HF_TOKEN=secret-in-env");
    strvec_push(&argv, "sh");
    strvec_push(&argv, "-c");
    strvec_push(&argv, "printf '%s|%s|' \"$A\" \"$B\"; pwd; test -d made/here; exit 7");
    char *out;
    CHECK_INT(run_wrapped(wd, 1, "made/here", &env, &argv, -1, &out), 7);
    char *want = xasprintf("x y|$HOME'`\nline 2\n|%s\n", wd);
    CHECK_STR(out, want);
    free(want);
    free(out);
    char *made = test_tmp_path("made/here");
    rmdir(made);
    free(made);
    made = test_tmp_path("made");
    rmdir(made);
    free(made);
    strvec_release(&env);
    strvec_release(&argv);
}

TEST(environment_values_stay_out_of_the_command_line)
{
    struct strvec env, argv;
    strvec_init(&env);
    strvec_init(&argv);
    strvec_push(&env, "HF_TOKEN=hf_s3cr3t");
    strvec_push(&argv, "true");
    struct buf line, envs;
    struct err err;
    err_init(&err);
    CHECK_INT(ssh_run_line("/", 1, NULL, &env, &argv, 0, &line, &envs, &err), 0);
    CHECK(strstr(line.data, "hf_s3cr3t") == NULL);
    CHECK_STR(envs.data, "export 'HF_TOKEN=hf_s3cr3t'\n");
    buf_release(&line);
    buf_release(&envs);
    strvec_release(&env);
    strvec_release(&argv);
}

TEST(missing_workdir_is_exit_125)
{
    struct strvec argv;
    strvec_init(&argv);
    strvec_push(&argv, "true");
    char *out;
    CHECK_INT(run_wrapped("/nonexistent/folder", 1, NULL, NULL, &argv, -1, &out), 125);
    free(out);
    strvec_release(&argv);
}

/* The pids a program printed ("PID PID\n"), for checking they are gone. */
static int gone_after(const char *out, double wait_ms)
{
    long a = 0, b = 0;
    if (sscanf(out, "%ld %ld", &a, &b) != 2 || a <= 1 || b <= 1)
        return 0;
    double t0 = clock_ms();
    while (clock_ms() - t0 < wait_ms) {
        if (kill((pid_t)a, 0) != 0 && kill((pid_t)b, 0) != 0)
            return 1;
        sleep_ms(20, NULL);
    }
    kill((pid_t)a, SIGKILL);
    kill((pid_t)b, SIGKILL);
    return 0;
}

TEST(end_of_stdin_stops_the_whole_group)
{
    struct strvec argv;
    strvec_init(&argv);
    /* a leader and a worker in its group, both printing their pids */
    strvec_push(&argv, "sh");
    strvec_push(&argv, "-c");
    strvec_push(&argv, "sleep 100 & echo $$ $!; wait");
    char *out;
    double t0 = clock_ms();
    int st = run_wrapped("/", 5, NULL, NULL, &argv, 300, &out);
    CHECK_MSG(st != -1, "the wrapper did not end after its stdin closed");
    CHECK_MSG(clock_ms() - t0 < 4000, "SIGTERM should have ended it well before the grace period");
    CHECK_MSG(gone_after(out, 2000), "leader or worker still runs: '%s'", out);
    free(out);
    strvec_release(&argv);
}

TEST(sigterm_ignored_means_sigkill_after_grace)
{
    struct strvec argv;
    strvec_init(&argv);
    strvec_push(&argv, "sh");
    strvec_push(&argv, "-c");
    strvec_push(&argv, "trap '' TERM; sleep 100 & echo $$ $!; while :; do wait; done");
    char *out;
    int st = run_wrapped("/", 1, NULL, NULL, &argv, 300, &out);
    CHECK_INT(st, 137); /* 128 + SIGKILL, passed on by the wrapper */
    CHECK(strstr(out, "ended by signal 9") != NULL);
    CHECK_MSG(gone_after(out, 2000), "leader or worker still runs: '%s'", out);
    free(out);
    strvec_release(&argv);
}

TEST(no_heartbeat_stops_the_group_though_stdin_stays_open)
{
    /* a link that died silently: the channel stays open, no byte comes */
    struct strvec argv;
    strvec_init(&argv);
    strvec_push(&argv, "sh");
    strvec_push(&argv, "-c");
    strvec_push(&argv, "sleep 100 & echo $$ $!; wait");
    char *out;
    heartbeat_s = 1;
    double t0 = clock_ms();
    int st = run_wrapped("/", 1, NULL, NULL, &argv, -1, &out);
    heartbeat_s = 0;
    CHECK_MSG(st != -1, "the wrapper kept running without heartbeats");
    CHECK_MSG(clock_ms() - t0 >= 900, "it stopped before the heartbeat timeout");
    CHECK_MSG(gone_after(out, 2000), "leader or worker still runs: '%s'", out);
    free(out);
    strvec_release(&argv);
}

TEST(stop_at_once_still_stops)
{
    struct strvec argv;
    strvec_init(&argv);
    strvec_push(&argv, "sleep");
    strvec_push(&argv, "100");
    char *out;
    CHECK_MSG(run_wrapped("/", 1, NULL, NULL, &argv, 0, &out) != -1,
              "a stop given before the program started was lost");
    free(out);
    strvec_release(&argv);
}

TEST(bad_environment_entry_and_length_are_refused)
{
    struct strvec env, argv;
    strvec_init(&env);
    strvec_init(&argv);
    strvec_push(&argv, "true");
    strvec_push(&env, "1A=x");
    struct buf line, envs;
    struct err err;
    err_init(&err);
    CHECK_INT(ssh_run_line("/", 1, NULL, &env, &argv, 0, &line, &envs, &err), -1);
    CHECK_INT(err.code, RN_ERR_USAGE);
    buf_release(&line);
    buf_release(&envs);
    strvec_release(&env);
    char *big = xcalloc(SSH_REMOTE_MAX + 1, 1);
    memset(big, 'x', SSH_REMOTE_MAX);
    strvec_push(&argv, big);
    free(big);
    err_init(&err);
    CHECK_INT(ssh_run_line("/", 1, NULL, NULL, &argv, 0, &line, &envs, &err), -1);
    CHECK_INT(err.code, RN_ERR_ENV);
    CHECK(strstr(err.msg, "KiB") != NULL);
    buf_release(&line);
    buf_release(&envs);
    strvec_release(&argv);
}

TEST_MAIN()
