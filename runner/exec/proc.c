/*
 * proc: child-process supervision for sweep (the server under test and
 * the per-point clients): spawn into a fresh process group with output in a
 * log, stop with grace and SIGKILL, reaping of reparented descendants, and
 * the members of a process group read from /proc. A child given a cgroup
 * (cgroup.c) joins it before exec; stopping then covers the cgroup too.
 */
#include "exec/proc.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fileio.h"
#include "log.h"
#include "strutil.h"
#include "sweep.h"
#include "timeutil.h"
#include "xalloc.h"

#include "exec/cgroup.h"

extern char **environ;

#define TAIL_READ_BYTES ((long long)64 << 10) /* how much of a log end we look at */
#define POLL_SLICE_MS   20                    /* reap/group poll interval while stopping */
#define GROUP_GONE_MS   1000                  /* wait for zombies to clear after SIGKILL */

void proc_init(struct proc *p)
{
    memset(p, 0, sizeof(*p));
    p->pidfd = -1;
    p->stdin_w = -1;
}

/* rmdir p's cgroup and any a child made below it (it fails, harmlessly,
 * while a process is in it) and forget it. */
static void drop_cgroup(struct proc *p)
{
    if (p->cg_dir)
        cg_remove(p->cg_dir);
    free(p->cg_dir);
    p->cg_dir = NULL;
}

void proc_release(struct proc *p)
{
    if (p->pidfd >= 0)
        close(p->pidfd);
    if (p->stdin_w >= 0)
        close(p->stdin_w);
    free(p->log_path);
    drop_cgroup(p);
    proc_init(p);
}

int proc_become_subreaper(void)
{
    return prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0 ? 0 : -1;
}

/* A regular file we may execute (a directory with x bits is not one). */
static bool is_executable_file(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode) && access(path, X_OK) == 0;
}

char *proc_resolve_program(const char *prog, struct err *err)
{
    if (!prog || !*prog) {
        err_set(err, RN_ERR_ENV, "empty program name in argv");
        return NULL;
    }
    /* A path (absolute or relative to the working directory) is taken as
     * is, exactly as execve would; the message says why it cannot run. */
    if (strchr(prog, '/')) {
        if (is_executable_file(prog))
            return xstrdup(prog);
        if (access(prog, F_OK) != 0)
            err_set(err, RN_ERR_ENV, "program '%s': %s", prog, strerror(errno));
        else
            err_set(err, RN_ERR_ENV, "program '%s': not an executable file", prog);
        return NULL;
    }
    const char *path = getenv("PATH");
    if (!path || !*path)
        path = "/usr/local/bin:/usr/bin:/bin";
    /* Walk PATH like execvp: an empty entry means the current directory. */
    for (const char *s = path;;) {
        const char *e = strchr(s, ':');
        size_t len = e ? (size_t)(e - s) : strlen(s);
        char *cand = len ? xasprintf("%.*s/%s", (int)len, s, prog) : xstrdup(prog);
        if (is_executable_file(cand))
            return cand;
        free(cand);
        if (!e)
            break;
        s = e + 1;
    }
    err_set(err, RN_ERR_ENV, "program '%s': not found in PATH", prog);
    return NULL;
}

/* Environment for the child: ours, minus names that env_add overrides,
 * then env_add. Entries are borrowed; the array is heap. */
static char **build_env(const struct strvec *env_add)
{
    size_t n_env = 0;
    while (environ && environ[n_env])
        n_env++;
    size_t n_add = env_add ? env_add->n : 0;
    char **out = xcalloc(n_env + n_add + 1, sizeof(*out));
    size_t k = 0;
    for (size_t i = 0; i < n_env; i++) {
        const char *eq = strchr(environ[i], '=');
        size_t nl = eq ? (size_t)(eq - environ[i]) : strlen(environ[i]);
        bool overridden = false;
        for (size_t j = 0; j < n_add && !overridden; j++)
            overridden = strncmp(env_add->v[j], environ[i], nl) == 0 && env_add->v[j][nl] == '=';
        if (!overridden)
            out[k++] = environ[i];
    }
    for (size_t j = 0; j < n_add; j++)
        out[k++] = env_add->v[j];
    out[k] = NULL;
    return out;
}

/* What the child needs, prepared before fork so the child only makes
 * async-signal-safe calls. */
struct child_setup {
    const char *path; /* resolved program */
    char **argv;      /* argv[0] as the user wrote it */
    char **envp;
    int fd_in;     /* becomes stdin */
    int fd_out;    /* becomes stdout */
    int fd_err;    /* becomes stderr */
    int report_fd; /* CLOEXEC pipe: the exec errno is written here on failure */
    int cg_fd;     /* CLOEXEC cgroup.procs of the child's cgroup, or -1 */
    pid_t parent;  /* for the PDEATHSIG race check */
};

static void __attribute__((noreturn)) child_exec(const struct child_setup *cs)
{
    /* Into the cgroup first ("0" = the writer), before anything we exec
     * can fork: from here on every descendant is in it, setsid or not. */
    if (cs->cg_fd >= 0) {
        ssize_t w = write(cs->cg_fd, "0", 1);
        (void)w; /* if refused, the process group still holds it */
    }
    setpgid(0, 0);
    /* Die with the runner. If it is already gone, the signal would never
     * come, so check that our parent is still the one that forked us. */
    prctl(PR_SET_PDEATHSIG, SIGTERM, 0, 0, 0);
    if (getppid() != cs->parent)
        _exit(127);
    /* Dispositions and the mask are inherited across exec; a server must
     * start with defaults or SIGTERM might be ignored. */
    struct sigaction dfl;
    memset(&dfl, 0, sizeof(dfl));
    dfl.sa_handler = SIG_DFL;
    for (int sig = 1; sig < NSIG; sig++)
        if (sig != SIGKILL && sig != SIGSTOP)
            sigaction(sig, &dfl, NULL);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    if (dup2(cs->fd_in, 0) < 0 || dup2(cs->fd_out, 1) < 0 || dup2(cs->fd_err, 2) < 0)
        _exit(127);
    execve(cs->path, cs->argv, cs->envp);
    /* Tell the parent why (it writes the message to the log). */
    int e = errno;
    ssize_t w = write(cs->report_fd, &e, sizeof(e));
    (void)w;
    _exit(127);
}

/* fork with every signal blocked around it, so that no handler of ours runs
 * in the child before its dispositions are reset. */
static pid_t fork_child(const struct child_setup *cs)
{
    sigset_t all, old;
    sigfillset(&all);
    sigprocmask(SIG_BLOCK, &all, &old);
    pid_t pid = fork();
    if (pid == 0)
        child_exec(cs);
    int e = errno;
    if (pid > 0)
        setpgid(pid, pid); /* both sides set it: no window where it is unset */
    sigprocmask(SIG_SETMASK, &old, NULL);
    errno = e;
    return pid;
}

/* After fork: read the exec report pipe. Returns 0 when exec succeeded
 * (EOF), else the child's errno. */
static int read_exec_report(int fd)
{
    int e = 0;
    for (;;) {
        ssize_t n = read(fd, &e, sizeof(e));
        if (n < 0 && errno == EINTR)
            continue;
        return n == (ssize_t)sizeof(e) ? e : 0;
    }
}

/* A pidfd for pid: it becomes readable when the process exits, which lets
 * proc_wait_any sleep in poll() instead of polling waitpid. -1 on kernels
 * before 5.3 (or without the syscall number), where we fall back. */
static int pidfd_for(pid_t pid)
{
#ifdef SYS_pidfd_open
    return (int)syscall(SYS_pidfd_open, pid, 0);
#else
    (void)pid;
    return -1;
#endif
}

int proc_spawn(struct proc *p, const struct strvec *argv, const struct strvec *env_add,
               const char *log_path, struct err *err)
{
    int rc = -1, log_fd = -1, null_fd = -1, cg_fd = -1, pipe_fd[2] = {-1, -1}, in_fd[2] = {-1, -1};
    char **envp = NULL;
    char *path = NULL;

    if (!argv || argv->n == 0) {
        err_set(err, RN_ERR_ENV, "empty command");
        return -1;
    }
    /* Resolve first: a missing binary is an environment error we can name
     * before any process exists, not an exit 127 found later. */
    path = proc_resolve_program(argv->v[0], err);
    if (!path)
        goto out;
    log_fd = open(log_path, O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (log_fd < 0) {
        err_set(err, RN_ERR_ENV, "%s: %s", log_path, strerror(errno));
        goto out;
    }
    null_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (null_fd < 0 || pipe2(pipe_fd, O_CLOEXEC) != 0 ||
        (p->stdin_pipe && pipe2(in_fd, O_CLOEXEC) != 0)) {
        err_set(err, RN_ERR_ENV, "cannot prepare to start '%s': %s", argv->v[0], strerror(errno));
        goto out;
    }
    if (p->cg_dir) {
        char *procs = path_join(p->cg_dir, "cgroup.procs");
        cg_fd = open(procs, O_WRONLY | O_CLOEXEC);
        free(procs);
        if (cg_fd < 0)
            drop_cgroup(p);
    }
    /* The log may hold earlier runs (a restarted server appends): remember
     * where this process's output starts, for proc_log_tail. */
    struct stat st;
    long long offset = fstat(log_fd, &st) == 0 ? (long long)st.st_size : 0;
    envp = build_env(env_add);
    struct child_setup cs = {
        .path = path,
        .argv = argv->v,
        .envp = envp,
        .fd_in = p->stdin_pipe ? in_fd[0] : null_fd,
        .fd_out = log_fd,
        .fd_err = log_fd,
        .report_fd = pipe_fd[1],
        .cg_fd = cg_fd,
        .parent = getpid(),
    };
    pid_t pid = fork_child(&cs);
    if (pid < 0) {
        err_set(err, RN_ERR_ENV, "cannot start '%s': fork: %s", argv->v[0], strerror(errno));
        goto out;
    }
    /* Our copy of the write end must go, or the read below never sees EOF.
     * The child's copy closes on exec (CLOEXEC), or carries its errno. */
    close(pipe_fd[1]);
    pipe_fd[1] = -1;
    int exec_errno = read_exec_report(pipe_fd[0]);
    if (exec_errno) {
        int st_ignored;
        while (waitpid(pid, &st_ignored, 0) < 0 && errno == EINTR)
            ;
        err_set(err, RN_ERR_ENV, "cannot execute '%s': %s", path, strerror(exec_errno));
        dprintf(log_fd, "sweep: cannot execute '%s': %s (exit 127)\n", path, strerror(exec_errno));
        goto out;
    }
    p->pid = pid;
    p->pidfd = pidfd_for(pid);
    p->reaped = false;
    p->wstatus = 0;
    p->log_path = xstrdup(log_path);
    p->log_offset = offset;
    p->started_ns = clock_ns();
    p->stdin_w = in_fd[1];
    in_fd[1] = -1;
    rc = 0;
out:
    if (rc != 0)
        drop_cgroup(p);
    if (cg_fd >= 0)
        close(cg_fd);
    if (log_fd >= 0)
        close(log_fd);
    if (null_fd >= 0)
        close(null_fd);
    if (pipe_fd[0] >= 0)
        close(pipe_fd[0]);
    if (pipe_fd[1] >= 0)
        close(pipe_fd[1]);
    for (int i = 0; i < 2; i++)
        if (in_fd[i] >= 0)
            close(in_fd[i]);
    free(envp);
    free(path);
    return rc;
}

/* Record the child's exit if waitpid returned it. */
static void note_reaped(struct proc *p, pid_t got, int status)
{
    if (got == p->pid && !p->reaped) {
        p->reaped = true;
        p->wstatus = status;
    }
}

/* waitpid(pid, WNOHANG) on the child itself (never -1): other children,
 * such as the server while we poll the client, keep their statuses. */
bool proc_alive(struct proc *p)
{
    if (!p->pid || p->reaped)
        return false;
    int status;
    pid_t got;
    while ((got = waitpid(p->pid, &status, WNOHANG)) < 0 && errno == EINTR)
        ;
    if (got == p->pid) {
        note_reaped(p, got, status);
        return false;
    }
    if (got < 0) { /* ECHILD: someone else reaped it; the status is lost */
        p->reaped = true;
        p->wstatus = -1;
        return false;
    }
    return true;
}

/* True if p's child has exited, without reaping it. */
static bool has_exited(const struct proc *p)
{
    if (!p->pid || p->reaped)
        return true;
    siginfo_t si;
    memset(&si, 0, sizeof(si));
    if (waitid(P_PID, (id_t)p->pid, &si, WEXITED | WNOHANG | WNOWAIT) != 0)
        return true;
    return si.si_pid == p->pid;
}

void proc_wait_any(struct proc *const *procs, size_t n, double timeout_ms,
                   const proc_stop_flag *stop)
{
    struct pollfd pfd[8];
    double end = clock_ms() + timeout_ms;
    for (;;) {
        if (stop && *stop)
            return;
        size_t k = 0;
        bool pidfds = true;
        for (size_t i = 0; i < n; i++) {
            if (!procs[i] || !procs[i]->pid)
                continue;
            if (has_exited(procs[i]))
                return;
            if (procs[i]->pidfd < 0 || k == sizeof(pfd) / sizeof(pfd[0]))
                pidfds = false;
            else
                pfd[k++] = (struct pollfd){.fd = procs[i]->pidfd, .events = POLLIN};
        }
        double left = end - clock_ms();
        if (left <= 0)
            return;
        /* Short slices keep a stop flag set between checks from waiting
         * long; without pidfds the slice is also the exit-detection lag. */
        int slice = (int)(left < 100 ? left + 1 : 100);
        if (!pidfds && slice > POLL_SLICE_MS)
            slice = POLL_SLICE_MS;
        if (pidfds && k)
            poll(pfd, k, slice);
        else
            poll(NULL, 0, slice);
    }
}

/* Reap the child and any other child of ours in its process group
 * (members orphaned in the group are reparented to us as subreaper). */
static void reap_group(struct proc *p)
{
    for (;;) {
        int status;
        pid_t got = waitpid(-p->pid, &status, WNOHANG);
        if (got < 0 && errno == EINTR)
            continue;
        if (got <= 0)
            break;
        note_reaped(p, got, status);
    }
    if (!p->reaped)
        proc_alive(p);
}

/* No process (zombies included) has this process group id any more. */
static bool group_gone(pid_t pgid)
{
    return killpg(pgid, 0) != 0 && errno == ESRCH;
}

/* Nothing of p is left: its process group is gone and its cgroup (when it
 * has one) holds no process, setsid'd helpers included. */
static bool all_gone(const struct proc *p)
{
    return group_gone(p->pid) && (!p->cg_dir || cg_populated(p->cg_dir) != 1);
}

/* Send sig to the group and to every member of the cgroup. A group that
 * is gone is not signalled: its id might name someone else's group now. */
static void signal_all(const struct proc *p, int sig)
{
    if (!group_gone(p->pid))
        killpg(p->pid, sig);
    if (p->cg_dir) {
        if (sig == SIGKILL)
            cg_kill(p->cg_dir);
        else
            cg_signal(p->cg_dir, sig);
    }
}

int proc_stop(struct proc *p, double grace_s, const proc_stop_flag *stop,
              struct proc_stop_info *info)
{
    struct proc_stop_info local = {0};
    if (!info)
        info = &local;
    memset(info, 0, sizeof(*info));
    if (!p->pid) {
        info->group_emptied = true;
        return 0;
    }
    /* 1. SIGTERM to the whole group (the server and any workers it forked)
     *    and the cgroup (helpers that left the group), then wait for both
     *    to empty, up to the grace period. */
    uint64_t t0 = clock_ns();
    reap_group(p);
    if (!all_gone(p)) {
        signal_all(p, SIGTERM);
        double end = clock_ms() + grace_s * 1000.0;
        for (;;) {
            reap_group(p);
            if (all_gone(p))
                break;
            if (clock_ms() >= end || (stop && *stop >= 2))
                break;
            sleep_ms(POLL_SLICE_MS, NULL);
        }
    }
    /* 2. Whatever is left (SIGTERM ignored, or a second Ctrl-C): SIGKILL,
     *    and cgroup.kill for the cgroup. */
    if (!all_gone(p)) {
        info->escalated = true;
        info->hurried = stop && *stop >= 2;
        signal_all(p, SIGKILL);
    }
    /* Zombies keep the group alive until reaped; those reparented to init
     * (when we are not a subreaper) take init a moment. A cgroup counts
     * only live processes, but cgroup.kill takes a moment as well. */
    double end = clock_ms() + GROUP_GONE_MS;
    for (;;) {
        reap_group(p);
        if (all_gone(p)) {
            info->group_emptied = true;
            break;
        }
        if (clock_ms() >= end)
            break;
        if (p->cg_dir && cg_populated(p->cg_dir) == 1)
            cg_kill(p->cg_dir); /* per pid without cgroup.kill: catch late forks */
        sleep_ms(POLL_SLICE_MS / 2, NULL);
    }
    /* The leader may have been reaped by an earlier proc_alive; or, without
     * subreaper, may still be a zombie of ours: make sure. */
    if (!p->reaped) {
        int status;
        if (waitpid(p->pid, &status, WNOHANG) == p->pid)
            note_reaped(p, p->pid, status);
    }
    if (info->group_emptied)
        drop_cgroup(p);
    info->elapsed_s = (double)(clock_ns() - t0) / 1e9;
    return info->group_emptied ? 0 : -1;
}

/* State letter, parent and process group of /proc/<pid_dir>; false when
 * there is no such process (or its stat line cannot be read). */
static bool read_stat(const char *pid_dir, char *state, pid_t *ppid, pid_t *pgrp)
{
    char path[300], text[512];
    snprintf(path, sizeof(path), "/proc/%.255s/stat", pid_dir);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return false;
    ssize_t n = read(fd, text, sizeof(text) - 1);
    close(fd);
    if (n <= 0)
        return false;
    text[n] = '\0';
    char *rp = strrchr(text, ')'); /* the name in parentheses may hold anything */
    int pp, pg;
    if (!rp || sscanf(rp + 1, " %c %d %d", state, &pp, &pg) != 3)
        return false;
    *ppid = (pid_t)pp;
    *pgrp = (pid_t)pg;
    return true;
}

size_t proc_group_members(pid_t pgid, pid_t *out, size_t max)
{
    DIR *d = opendir("/proc");
    if (!d)
        return 0;
    size_t n = 0;
    struct dirent *de;
    while ((de = readdir(d)) && n < max) {
        long pid;
        char state;
        pid_t ppid, pgrp;
        if (str_to_long(de->d_name, &pid) == 0 && read_stat(de->d_name, &state, &ppid, &pgrp) &&
            pgrp == pgid && state != 'Z')
            out[n++] = (pid_t)pid;
    }
    closedir(d);
    return n;
}

bool proc_pid_in_group(pid_t pid, pid_t pgid)
{
    char dir[24], state;
    pid_t ppid, pgrp;
    snprintf(dir, sizeof(dir), "%ld", (long)pid);
    return read_stat(dir, &state, &ppid, &pgrp) && pgrp == pgid && state != 'Z';
}

/* Children of a subreaper are found by their parent pid; /proc is the one
 * portable way to list them (task/N/children needs CONFIG_PROC_CHILDREN). */
int proc_kill_strays(const pid_t *keep, size_t n)
{
    DIR *d = opendir("/proc");
    if (!d)
        return 0;
    pid_t self = getpid();
    pid_t found[256];
    size_t n_found = 0;
    struct dirent *de;
    while ((de = readdir(d)) && n_found < sizeof(found) / sizeof(found[0])) {
        long pid;
        char state;
        pid_t ppid, pgrp;
        if (str_to_long(de->d_name, &pid) != 0 || !read_stat(de->d_name, &state, &ppid, &pgrp) ||
            ppid != self)
            continue;
        bool kept = false;
        for (size_t i = 0; i < n && !kept; i++)
            kept = keep[i] == (pid_t)pid;
        if (kept)
            continue;
        if (state == 'Z') { /* already dead (killed with its cgroup): reap, say nothing */
            int status;
            waitpid((pid_t)pid, &status, WNOHANG);
            continue;
        }
        found[n_found++] = (pid_t)pid;
    }
    closedir(d);
    for (size_t i = 0; i < n_found; i++) {
        log_warn("killing stray process %ld (it left its process group)", (long)found[i]);
        kill(found[i], SIGKILL);
    }
    double end = clock_ms() + GROUP_GONE_MS;
    for (size_t i = 0; i < n_found; i++) {
        int status;
        while (waitpid(found[i], &status, WNOHANG) == 0 && clock_ms() < end)
            sleep_ms(5, NULL);
    }
    return (int)n_found;
}

void proc_describe_status(int wstatus, char *out, size_t size)
{
    if (wstatus == -1) {
        snprintf(out, size, "exited (status unknown)");
    } else if (WIFEXITED(wstatus)) {
        snprintf(out, size, "exited with code %d", WEXITSTATUS(wstatus));
    } else if (WIFSIGNALED(wstatus)) {
        int sig = WTERMSIG(wstatus);
        const char *abbrev = sigabbrev_np(sig);
        if (abbrev)
            snprintf(out, size, "killed by SIG%s%s", abbrev,
                     WCOREDUMP(wstatus) ? " (core dumped)" : "");
        else
            snprintf(out, size, "killed by signal %d", sig);
    } else {
        snprintf(out, size, "stopped (wait status 0x%x)", (unsigned)wstatus);
    }
}

/* Reads at most the last TAIL_READ_BYTES of the log (a chatty server can
 * write gigabytes), starting no earlier than this process's first byte. */
char *proc_log_tail(const struct proc *p, int max_lines)
{
    struct buf b;
    buf_init(&b, (size_t)TAIL_READ_BYTES + 1);
    int fd = p->log_path ? open(p->log_path, O_RDONLY | O_CLOEXEC) : -1;
    if (fd >= 0) {
        struct stat st;
        long long from = p->log_offset;
        if (fstat(fd, &st) == 0 && st.st_size - from > TAIL_READ_BYTES)
            from = st.st_size - TAIL_READ_BYTES;
        if (lseek(fd, (off_t)from, SEEK_SET) >= 0) {
            char chunk[8192];
            ssize_t n;
            while ((n = read(fd, chunk, sizeof(chunk))) > 0)
                if (buf_append(&b, chunk, (size_t)n) != 0)
                    break;
        }
        close(fd);
    }
    if (!b.data) {
        buf_release(&b);
        return xstrdup("");
    }
    /* Keep printable text: control bytes would garble a terminal. */
    for (size_t i = 0; i < b.len; i++) {
        unsigned char c = (unsigned char)b.data[i];
        if (c < 0x20 && c != '\n' && c != '\t')
            b.data[i] = '?';
    }
    while (b.len && b.data[b.len - 1] == '\n')
        b.data[--b.len] = '\0';
    /* walk back from the end to the start of the max_lines-th last line */
    size_t start = b.len;
    int lines = 0;
    while (start > 0) {
        if (b.data[start - 1] == '\n' && ++lines >= max_lines)
            break;
        start--;
    }
    char *out = xstrdup(b.data + start);
    buf_release(&b);
    return out;
}
