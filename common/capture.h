/*
 * capture: run a short-lived helper program (gnuplot, nvidia-smi) from an
 * argv vector, never a shell, with its output captured into a buffer and a
 * hard deadline. Long-lived children with logs and process-group
 * supervision are the runner's exec/proc.c; this is for small queries.
 */
#ifndef COMMON_CAPTURE_H
#define COMMON_CAPTURE_H

#include <stdbool.h>

#include "buf.h"

struct capture_opts {
    const char *dir;   /* working directory of the child; NULL: ours */
    bool with_stderr;  /* capture stderr too; otherwise it goes to /dev/null */
    double timeout_ms; /* then SIGKILL to the child's process group */
};

struct capture_result {
    int wstatus;    /* waitpid status, valid once the child was reaped */
    bool timed_out; /* killed at the deadline */
};

/*
 * Run argv (NULL-terminated; argv[0] searched in PATH like execvp) in its
 * own process group, stdin from /dev/null, stdout (and stderr when asked)
 * appended to out (bytes past out's cap are dropped). Waits for the exit
 * within opts->timeout_ms, reading as it goes; at the deadline the group is
 * killed and reaped. Returns 0 once the child was reaped (see *res), or an
 * errno value when it could not start (ENOENT: no such program).
 */
int capture_run(const char *const *argv, const struct capture_opts *opts, struct buf *out,
                struct capture_result *res);

/* Exit code of a finished spawn: WEXITSTATUS when it exited, else -1
 * (killed, timed out). */
int capture_exit_code(const struct capture_result *res);

#endif
