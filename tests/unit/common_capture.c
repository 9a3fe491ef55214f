/*
 * Unit tests for common/capture.c: output captured from an argv vector, the
 * deadline (also when the child closes stdout and goes on), stderr on
 * request, the working folder, and a missing program named by errno.
 */
#include <errno.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>

#include "capture.h"
#include "test.h"
#include "timeutil.h"

TEST(captures_stdout_without_a_shell)
{
    const char *argv[] = {"printf", "%s,%s", "x y", "z", NULL};
    struct capture_opts opts = {.timeout_ms = 5000};
    struct capture_result res;
    struct buf out;
    buf_init(&out, 4096);
    CHECK_INT(capture_run(argv, &opts, &out, &res), 0);
    CHECK_INT(capture_exit_code(&res), 0);
    CHECK_STR(out.data, "x y,z");
    buf_release(&out);
}

TEST(stderr_only_on_request_and_exit_code)
{
    const char *argv[] = {"sh", "-c", "echo o; echo e >&2; exit 3", NULL};
    struct capture_opts opts = {.timeout_ms = 5000};
    struct capture_result res;
    struct buf out;
    buf_init(&out, 4096);
    CHECK_INT(capture_run(argv, &opts, &out, &res), 0);
    CHECK_STR(out.data, "o\n");
    CHECK_INT(capture_exit_code(&res), 3);
    buf_reset(&out);
    opts.with_stderr = true;
    CHECK_INT(capture_run(argv, &opts, &out, &res), 0);
    CHECK_STR(out.data, "o\ne\n");
    buf_release(&out);
}

TEST(runs_in_the_given_folder)
{
    const char *argv[] = {"pwd", NULL};
    struct capture_opts opts = {.dir = "/tmp", .timeout_ms = 5000};
    struct capture_result res;
    struct buf out;
    buf_init(&out, 4096);
    CHECK_INT(capture_run(argv, &opts, &out, &res), 0);
    CHECK_STR(out.data, "/tmp\n");
    buf_release(&out);
}

TEST(deadline_kills_and_reaps)
{
    const char *argv[] = {"sleep", "10", NULL};
    struct capture_opts opts = {.timeout_ms = 200};
    struct capture_result res;
    struct buf out;
    buf_init(&out, 4096);
    double t0 = clock_ms();
    CHECK_INT(capture_run(argv, &opts, &out, &res), 0);
    CHECK(clock_ms() - t0 < 1500);
    CHECK(res.timed_out);
    CHECK(WIFSIGNALED(res.wstatus) && WTERMSIG(res.wstatus) == SIGKILL);
    CHECK_INT(capture_exit_code(&res), -1);
    buf_release(&out);
}

TEST(deadline_holds_after_stdout_closes)
{
    /* a command that closes its stdout early and goes on running: the
     * deadline still bounds the wait for its exit */
    const char *argv[] = {"sh", "-c", "echo early; exec >&-; sleep 10", NULL};
    struct capture_opts opts = {.timeout_ms = 300};
    struct capture_result res;
    struct buf out;
    buf_init(&out, 4096);
    double t0 = clock_ms();
    CHECK_INT(capture_run(argv, &opts, &out, &res), 0);
    double ms = clock_ms() - t0;
    CHECK(res.timed_out);
    CHECK_MSG(ms < 2000, "capture_run took %.0f ms with a 300 ms deadline", ms);
    CHECK_STR(out.data, "early\n");
    buf_release(&out);
}

TEST(missing_program_is_enoent)
{
    const char *argv[] = {"sweep-no-such-tool", NULL};
    struct capture_opts opts = {.timeout_ms = 200};
    struct capture_result res;
    struct buf out;
    buf_init(&out, 64);
    CHECK_INT(capture_run(argv, &opts, &out, &res), ENOENT);
    buf_release(&out);
}

TEST(output_past_the_cap_is_dropped)
{
    const char *argv[] = {"sh", "-c",
                          "i=0; while [ $i -lt 100 ]; do echo 0123456789; i=$((i+1)); done", NULL};
    struct capture_opts opts = {.timeout_ms = 5000};
    struct capture_result res;
    struct buf out;
    buf_init(&out, 64);
    CHECK_INT(capture_run(argv, &opts, &out, &res), 0);
    CHECK_INT(capture_exit_code(&res), 0);
    CHECK(out.len <= 64);
    buf_release(&out);
}

TEST_MAIN()
