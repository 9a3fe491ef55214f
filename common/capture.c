/*
 * capture: posix_spawnp with a pipe for output and a deadline. The child gets
 * its own process group (POSIX_SPAWN_SETPGROUP), so a timed-out helper and
 * anything it started are killed together.
 */
#include "capture.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include "timeutil.h"

extern char **environ;

/* After the deadline, how long we wait for the killed group to be reaped. */
#define REAP_AFTER_KILL_MS 2000

static void drain(int fd, struct buf *out, double deadline_ms, bool *timed_out)
{
    for (;;) {
        double left = deadline_ms - clock_ms();
        if (left <= 0) {
            *timed_out = true;
            return;
        }
        struct pollfd p = {.fd = fd, .events = POLLIN};
        int r = poll(&p, 1, (int)left + 1);
        if (r <= 0)
            continue; /* EINTR or the deadline: checked above */
        char chunk[4096];
        ssize_t got = read(fd, chunk, sizeof(chunk));
        if (got < 0 && errno == EINTR)
            continue;
        if (got <= 0)
            return;
        buf_append(out, chunk, (size_t)got); /* past the cap, the rest is dropped */
    }
}

int capture_run(const char *const *argv, const struct capture_opts *opts, struct buf *out,
                struct capture_result *res)
{
    res->wstatus = -1;
    res->timed_out = false;
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0)
        return errno;
    posix_spawn_file_actions_t fa;
    posix_spawnattr_t attr;
    posix_spawn_file_actions_init(&fa);
    posix_spawnattr_init(&attr);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK |
                                        POSIX_SPAWN_SETSIGDEF);
    posix_spawnattr_setpgroup(&attr, 0);
    sigset_t none, all;
    sigemptyset(&none);
    sigfillset(&all);
    posix_spawnattr_setsigmask(&attr, &none);
    posix_spawnattr_setsigdefault(&attr, &all);
    if (opts->dir)
        posix_spawn_file_actions_addchdir_np(&fa, opts->dir);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_adddup2(&fa, fds[1], 1);
    if (opts->with_stderr)
        posix_spawn_file_actions_adddup2(&fa, fds[1], 2);
    else
        posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
    pid_t pid;
    int sp = posix_spawnp(&pid, argv[0], &fa, &attr, (char *const *)argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&attr);
    close(fds[1]);
    if (sp != 0) {
        close(fds[0]);
        return sp;
    }
    double deadline = clock_ms() + opts->timeout_ms;
    drain(fds[0], out, deadline, &res->timed_out);
    close(fds[0]);
    /* EOF only means stdout was closed: the exit is waited for under the
     * same deadline, or a helper that closes stdout and hangs would hang us */
    pid_t got;
    while (!res->timed_out && (got = waitpid(pid, &res->wstatus, WNOHANG)) == 0) {
        if (clock_ms() >= deadline)
            res->timed_out = true;
        else
            sleep_ms(5, NULL);
    }
    if (res->timed_out) {
        kill(-pid, SIGKILL);
        while (waitpid(pid, &res->wstatus, 0) < 0 && errno == EINTR)
            ;
    }
    return 0;
}

int capture_exit_code(const struct capture_result *res)
{
    if (res->timed_out || res->wstatus == -1 || !WIFEXITED(res->wstatus))
        return -1;
    return WEXITSTATUS(res->wstatus);
}
