/*
 * server: child-process supervision for sweep (the server under test and
 * the per-point clients): spawn into a fresh process group with output in a
 * log, readiness polling with libcurl, stop with grace and SIGKILL, reaping
 * of reparented descendants, and the cause of death from the log tail.
 */
#include "server.h"

#include <curl/curl.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "commands.h"
#include "log.h"
#include "strutil.h"
#include "timeutil.h"
#include "xalloc.h"

extern char **environ;

#define TAIL_READ_BYTES  ((long long)64 << 10) /* how much of a log end we look at */
#define POLL_SLICE_MS    20                    /* reap/group poll interval while stopping */
#define GROUP_GONE_MS    1000                  /* wait for zombies to clear after SIGKILL */
#define GPU_QUERY_MS     5000                  /* nvidia-smi may take a while on a busy GPU */
#define PROBE_CONNECT_MS 500                   /* readiness probe: connect timeout */
#define PROBE_TOTAL_MS   1500                  /* readiness probe: whole request */
#define BACKOFF_FIRST_MS 50
#define BACKOFF_MAX_MS   1000

void srv_proc_init(struct srv_proc *p)
{
    memset(p, 0, sizeof(*p));
    p->pidfd = -1;
}

void srv_proc_release(struct srv_proc *p)
{
    if (p->pidfd >= 0)
        close(p->pidfd);
    free(p->log_path);
    srv_proc_init(p);
}

int srv_become_subreaper(void)
{
    return prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0 ? 0 : -1;
}

/* A regular file we may execute (a directory with x bits is not one). */
static bool is_executable_file(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode) && access(path, X_OK) == 0;
}

char *srv_resolve_program(const char *prog, struct err *err)
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
    pid_t parent;  /* for the PDEATHSIG race check */
};

static void __attribute__((noreturn)) child_exec(const struct child_setup *cs)
{
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
 * srv_wait_any sleep in poll() instead of polling waitpid. -1 on kernels
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

int srv_spawn(struct srv_proc *p, const struct strvec *argv, const struct strvec *env_add,
              const char *log_path, struct err *err)
{
    int rc = -1, log_fd = -1, null_fd = -1, pipe_fd[2] = {-1, -1};
    char **envp = NULL;
    char *path = NULL;

    if (!argv || argv->n == 0) {
        err_set(err, RN_ERR_ENV, "empty command");
        return -1;
    }
    /* Resolve first: a missing binary is an environment error we can name
     * before any process exists, not an exit 127 found later. */
    path = srv_resolve_program(argv->v[0], err);
    if (!path)
        goto out;
    log_fd = open(log_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (log_fd < 0) {
        err_set(err, RN_ERR_ENV, "%s: %s", log_path, strerror(errno));
        goto out;
    }
    null_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (null_fd < 0 || pipe2(pipe_fd, O_CLOEXEC) != 0) {
        err_set(err, RN_ERR_ENV, "cannot prepare to start '%s': %s", argv->v[0], strerror(errno));
        goto out;
    }
    /* The log may hold earlier runs (a restarted server appends): remember
     * where this process's output starts, for srv_log_tail. */
    struct stat st;
    long long offset = fstat(log_fd, &st) == 0 ? (long long)st.st_size : 0;
    envp = build_env(env_add);
    struct child_setup cs = {
        .path = path,
        .argv = argv->v,
        .envp = envp,
        .fd_in = null_fd,
        .fd_out = log_fd,
        .fd_err = log_fd,
        .report_fd = pipe_fd[1],
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
    rc = 0;
out:
    if (log_fd >= 0)
        close(log_fd);
    if (null_fd >= 0)
        close(null_fd);
    if (pipe_fd[0] >= 0)
        close(pipe_fd[0]);
    if (pipe_fd[1] >= 0)
        close(pipe_fd[1]);
    free(envp);
    free(path);
    return rc;
}

/* Record the child's exit if waitpid returned it. */
static void note_reaped(struct srv_proc *p, pid_t got, int status)
{
    if (got == p->pid && !p->reaped) {
        p->reaped = true;
        p->wstatus = status;
    }
}

/* waitpid(pid, WNOHANG) on the child itself (never -1): other children,
 * such as the server while we poll the client, keep their statuses. */
bool srv_alive(struct srv_proc *p)
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
static bool has_exited(const struct srv_proc *p)
{
    if (!p->pid || p->reaped)
        return true;
    siginfo_t si;
    memset(&si, 0, sizeof(si));
    if (waitid(P_PID, (id_t)p->pid, &si, WEXITED | WNOHANG | WNOWAIT) != 0)
        return true;
    return si.si_pid == p->pid;
}

void srv_wait_any(struct srv_proc *const *procs, size_t n, double timeout_ms,
                  const srv_stop_flag *stop)
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
static void reap_group(struct srv_proc *p)
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
        srv_alive(p);
}

/* No process (zombies included) has this process group id any more. */
static bool group_gone(pid_t pgid)
{
    return killpg(pgid, 0) != 0 && errno == ESRCH;
}

int srv_stop(struct srv_proc *p, double grace_s, const srv_stop_flag *stop,
             struct srv_stop_info *info)
{
    struct srv_stop_info local = {0};
    if (!info)
        info = &local;
    memset(info, 0, sizeof(*info));
    if (!p->pid) {
        info->group_emptied = true;
        return 0;
    }
    /* 1. SIGTERM to the whole group (the server and any workers it forked),
     *    then wait for the group to empty, up to the grace period. */
    uint64_t t0 = clock_ns();
    reap_group(p);
    if (!group_gone(p->pid)) {
        killpg(p->pid, SIGTERM);
        double end = clock_ms() + grace_s * 1000.0;
        for (;;) {
            reap_group(p);
            if (group_gone(p->pid))
                break;
            if (clock_ms() >= end || (stop && *stop >= 2))
                break;
            sleep_ms(POLL_SLICE_MS, NULL);
        }
    }
    /* 2. Whatever is left (SIGTERM ignored, or a second Ctrl-C): SIGKILL. */
    if (!group_gone(p->pid)) {
        info->escalated = true;
        killpg(p->pid, SIGKILL);
    }
    /* Zombies keep the group alive until reaped; those reparented to init
     * (when we are not a subreaper) take init a moment. */
    double end = clock_ms() + GROUP_GONE_MS;
    for (;;) {
        reap_group(p);
        if (group_gone(p->pid)) {
            info->group_emptied = true;
            break;
        }
        if (clock_ms() >= end)
            break;
        sleep_ms(POLL_SLICE_MS / 2, NULL);
    }
    /* The leader may have been reaped by an earlier srv_alive; or, without
     * subreaper, may still be a zombie of ours: make sure. */
    if (!p->reaped) {
        int status;
        if (waitpid(p->pid, &status, WNOHANG) == p->pid)
            note_reaped(p, p->pid, status);
    }
    info->elapsed_s = (double)(clock_ns() - t0) / 1e9;
    return info->group_emptied ? 0 : -1;
}

/* Parent pid from /proc/PID/stat, or -1. The command name may hold spaces
 * and parentheses, so the fields are read after the last ')'. */
/* State letter, parent and process group of /proc/<pid_dir>; false when
 * there is no such process (or its stat line cannot be read). */
static bool proc_stat(const char *pid_dir, char *state, pid_t *ppid, pid_t *pgrp)
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

static pid_t proc_ppid(const char *pid_dir)
{
    char state;
    pid_t ppid, pgrp;
    return proc_stat(pid_dir, &state, &ppid, &pgrp) ? ppid : -1;
}

size_t srv_group_members(pid_t pgid, pid_t *out, size_t max)
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
        if (str_to_long(de->d_name, &pid) == 0 && proc_stat(de->d_name, &state, &ppid, &pgrp) &&
            pgrp == pgid && state != 'Z')
            out[n++] = (pid_t)pid;
    }
    closedir(d);
    return n;
}

bool srv_pid_in_group(pid_t pid, pid_t pgid)
{
    char dir[24], state;
    pid_t ppid, pgrp;
    snprintf(dir, sizeof(dir), "%ld", (long)pid);
    return proc_stat(dir, &state, &ppid, &pgrp) && pgrp == pgid && state != 'Z';
}

int srv_gpu_pids(const char *nvsmi, pid_t *out, size_t max)
{
    struct strvec argv;
    strvec_init(&argv);
    strvec_push(&argv, nvsmi);
    strvec_push(&argv, "--query-compute-apps=pid");
    strvec_push(&argv, "--format=csv,noheader,nounits");
    struct buf text;
    buf_init(&text, 1 << 20);
    int n = -1;
    if (srv_capture(&argv, &text, GPU_QUERY_MS) == 0) {
        n = 0;
        /* one pid per line; anything else (a "No running processes" line
         * from old drivers, blanks) is skipped */
        for (char *line = text.data, *next; line && *line && (size_t)n < max; line = next) {
            next = strchr(line, '\n');
            if (next)
                *next++ = '\0';
            long pid;
            while (*line == ' ' || *line == '\t')
                line++;
            size_t len = strlen(line);
            while (len && (line[len - 1] == ' ' || line[len - 1] == '\r'))
                line[--len] = '\0';
            if (str_to_long(line, &pid) == 0 && pid > 0)
                out[n++] = (pid_t)pid;
        }
    }
    buf_release(&text);
    strvec_release(&argv);
    return n;
}

/* Children of a subreaper are found by their parent pid; /proc is the one
 * portable way to list them (task/N/children needs CONFIG_PROC_CHILDREN). */
int srv_kill_strays(const pid_t *keep, size_t n)
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
        if (str_to_long(de->d_name, &pid) != 0 || proc_ppid(de->d_name) != self)
            continue;
        bool kept = false;
        for (size_t i = 0; i < n && !kept; i++)
            kept = keep[i] == (pid_t)pid;
        if (!kept)
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

/* connect(), not bind(): a server with SO_REUSEPORT would let a second
 * bind succeed silently (reliability.md 3.1 rule 8). Non-blocking, so a
 * filtered address costs at most PROBE_CONNECT_MS. */
int srv_port_in_use(const char *host, long port)
{
    char port_s[16];
    snprintf(port_s, sizeof(port_s), "%ld", port);
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM};
    struct addrinfo *res = NULL;
    if (getaddrinfo(host && *host ? host : "127.0.0.1", port_s, &hints, &res) != 0)
        return 0;
    int in_use = 0;
    for (struct addrinfo *ai = res; ai && !in_use; ai = ai->ai_next) {
        int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (fd < 0)
            continue;
        if (connect(fd, ai->ai_addr, ai->ai_addrlen) == 0) {
            in_use = 1;
        } else if (errno == EINPROGRESS) {
            struct pollfd pfd = {.fd = fd, .events = POLLOUT};
            int soerr = 0;
            socklen_t len = sizeof(soerr);
            if (poll(&pfd, 1, PROBE_CONNECT_MS) == 1 &&
                getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &len) == 0 && soerr == 0)
                in_use = 1;
        }
        close(fd);
    }
    freeaddrinfo(res);
    return in_use;
}

long srv_free_port(const char *host)
{
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM};
    struct addrinfo *res = NULL;
    if (getaddrinfo(host && *host ? host : "127.0.0.1", "0", &hints, &res) != 0)
        return -1;
    long port = -1;
    for (struct addrinfo *ai = res; ai && port < 0; ai = ai->ai_next) {
        int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, 0);
        if (fd < 0)
            continue;
        struct sockaddr_storage ss;
        socklen_t len = sizeof(ss);
        if (bind(fd, ai->ai_addr, ai->ai_addrlen) == 0 &&
            getsockname(fd, (struct sockaddr *)&ss, &len) == 0)
            port = ss.ss_family == AF_INET6 ? ntohs(((struct sockaddr_in6 *)&ss)->sin6_port)
                                            : ntohs(((struct sockaddr_in *)&ss)->sin_port);
        close(fd);
    }
    freeaddrinfo(res);
    return port;
}

/* libcurl write callback: keep the first 4 KiB of the body, drop the rest
 * (returning less than given would abort the transfer). */
static size_t body_sink(char *data, size_t size, size_t nmemb, void *user)
{
    struct buf *b = user;
    size_t n = size * nmemb;
    if (b && b->len < 4096)
        buf_append(b, data, n < 4096 - b->len ? n : 4096 - b->len);
    return n;
}

long srv_http_get(const char *url, long timeout_ms, struct buf *body, char *why, size_t why_size)
{
    /* A fresh handle per probe: no connection reuse, so each probe sees the
     * server as a new client would. NOSIGNAL: no SIGALRM for timeouts. */
    CURL *c = curl_easy_init();
    if (!c) {
        if (why)
            snprintf(why, why_size, "libcurl init failed");
        return 0;
    }
    long connect_ms = timeout_ms < PROBE_CONNECT_MS ? timeout_ms : PROBE_CONNECT_MS;
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, connect_ms);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, timeout_ms);
    curl_easy_setopt(c, CURLOPT_NOPROXY, "*"); /* the server is local: never a proxy */
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, body_sink);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, body);
    long code = 0;
    CURLcode rc = curl_easy_perform(c);
    if (rc == CURLE_OK)
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code);
    else if (why)
        snprintf(why, why_size, "%s", curl_easy_strerror(rc));
    if (code && why)
        snprintf(why, why_size, "HTTP %ld", code);
    curl_easy_cleanup(c);
    return code;
}

/*
 * A /health body that names a pid ("pid":N, as fakeserver and fp4serve
 * do) lets us notice that someone else's server answered on our port (a
 * SO_REUSEPORT twin). Only a warning: in a container the pid namespace
 * differs and the number means nothing here.
 */
static void check_health_pid(const struct srv_proc *p, const struct buf *body)
{
    const char *s = body->data ? strstr(body->data, "\"pid\"") : NULL;
    if (!s)
        return;
    s = strchr(s, ':');
    long pid;
    char num[24];
    size_t k = 0;
    if (!s)
        return;
    for (s++; *s == ' '; s++)
        ;
    while (k + 1 < sizeof(num) && *s >= '0' && *s <= '9')
        num[k++] = *s++;
    num[k] = '\0';
    if (str_to_long(num, &pid) != 0 || pid <= 0)
        return;
    pid_t pg = getpgid((pid_t)pid);
    if (pg >= 0 && pg != p->pid)
        log_warn("the server answering on this port reports pid %ld, which is not in the "
                 "process group %ld that sweep started (another server on the same port?)",
                 pid, (long)p->pid);
}

/* Sleep up to ms, waking early when the process exits or stop is set. */
static void nap(struct srv_proc *p, double ms, const srv_stop_flag *stop)
{
    struct srv_proc *one[1] = {p};
    srv_wait_any(one, 1, ms, stop);
}

enum srv_ready srv_wait_ready(struct srv_proc *p, const char *url, double timeout_s,
                              const srv_stop_flag *stop, struct err *err)
{
    double start = clock_ms();
    double deadline = start + timeout_s * 1000.0;
    double delay = BACKOFF_FIRST_MS;
    char last[160] = "no probe yet";
    struct buf body;
    buf_init(&body, 8192);
    enum srv_ready result;
    for (;;) {
        if (stop && *stop) {
            result = SRV_INTERRUPTED;
            err_set(err, RN_ERR_INTERRUPTED, "interrupted while waiting for the server");
            break;
        }
        if (!srv_alive(p)) {
            char *cause = srv_exit_cause(p, "server");
            err_set(err, RN_ERR_ENV, "%s while starting, %.1f s after launch (log: %s)", cause,
                    (clock_ms() - start) / 1000.0, p->log_path);
            free(cause);
            result = SRV_EXITED;
            break;
        }
        double left = deadline - clock_ms();
        long probe_ms = left < PROBE_TOTAL_MS ? (long)left : PROBE_TOTAL_MS;
        if (probe_ms < 100)
            probe_ms = 100;
        /* one probe, never past the deadline by more than its own cap */
        buf_reset(&body);
        long code = srv_http_get(url, probe_ms, &body, last, sizeof(last));
        if (code == 200) {
            check_health_pid(p, &body);
            result = SRV_READY;
            break;
        }
        if (code == 503)
            snprintf(last, sizeof(last), "HTTP 503, still loading");
        if (clock_ms() >= deadline) {
            /* one last look: an exit during the final probe is the better message */
            if (!srv_alive(p))
                continue;
            err_set(err, RN_ERR_ENV, "server not ready at %s after %g s (last probe: %s)", url,
                    timeout_s, last);
            result = SRV_TIMEOUT;
            break;
        }
        /* back off (50 ms doubling to 1 s) but wake at once if it exits */
        left = deadline - clock_ms();
        nap(p, delay < left ? delay : left, stop);
        delay = delay * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : delay * 2;
    }
    buf_release(&body);
    return result;
}

void srv_describe_status(int wstatus, char *out, size_t size)
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
char *srv_log_tail(const struct srv_proc *p, int max_lines)
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

/* Known failure signatures, checked case-insensitively on each log line
 * from the last one up; on one line, earlier rows win (an out-of-memory
 * line that also says CUDA is "out of memory"). */
static const struct {
    const char *needle;
    const char *label;
} causes[] = {
    {"out of memory", "out of memory"},
    {"OutOfMemoryError", "out of memory"},
    {"std::bad_alloc", "out of memory"},
    {"Cannot allocate memory", "out of memory"},
    {"CUDA error", "CUDA error"},
    {"CUDA_ERROR_", "CUDA error"},
    {"cudaError", "CUDA error"},
    {"illegal memory access", "CUDA error"},
    {"CUBLAS_STATUS_", "CUDA error"},
    {"NCCL error", "NCCL error"},
    {"no CUDA-capable device", "no GPU"},
    {"Address already in use", "port in use"},
    {"EADDRINUSE", "port in use"},
    {"error while loading shared libraries", "missing shared library"},
    {"sweep: cannot execute", "cannot execute"},
    {"Segmentation fault", "segmentation fault"},
};

const char *srv_log_cause(const char *text, char **line_out)
{
    if (line_out)
        *line_out = NULL;
    if (!text)
        return NULL;
    size_t end = strlen(text);
    while (end > 0) {
        size_t start = end;
        while (start > 0 && text[start - 1] != '\n')
            start--;
        char *line = xstrndup(text + start, end - start);
        for (size_t i = 0; i < sizeof(causes) / sizeof(causes[0]); i++) {
            if (strcasestr(line, causes[i].needle)) {
                if (line_out)
                    *line_out = line;
                else
                    free(line);
                return causes[i].label;
            }
        }
        free(line);
        end = start ? start - 1 : 0;
    }
    return NULL;
}

char *srv_exit_cause(const struct srv_proc *p, const char *who)
{
    char how[96];
    srv_describe_status(p->reaped ? p->wstatus : -1, how, sizeof(how));
    char *tail = srv_log_tail(p, 30);
    char *line = NULL;
    const char *label = srv_log_cause(tail, &line);
    char *out;
    if (label) {
        /* trim the line to something a CSV cell and a terminal can show */
        char *s = line;
        while (*s == ' ' || *s == '\t')
            s++;
        out = xasprintf("%s %s: %s ('%.160s%s')", who, how, label, s, strlen(s) > 160 ? "..." : "");
    } else {
        out = xasprintf("%s %s", who, how);
    }
    free(line);
    free(tail);
    return out;
}

/* Same child setup as srv_spawn, but stdout is a pipe we drain here, so
 * only for commands with small output. */
int srv_capture(const struct strvec *argv, struct buf *out, double timeout_ms)
{
    struct err err;
    err_init(&err);
    int rc = -1, pipe_out[2] = {-1, -1}, report[2] = {-1, -1}, null_fd = -1;
    char **envp = NULL;
    char *path = srv_resolve_program(argv->n ? argv->v[0] : "", &err);
    if (!path)
        return -1;
    null_fd = open("/dev/null", O_RDWR | O_CLOEXEC);
    if (null_fd < 0 || pipe2(pipe_out, O_CLOEXEC) != 0 || pipe2(report, O_CLOEXEC) != 0)
        goto out;
    envp = build_env(NULL);
    struct child_setup cs = {
        .path = path,
        .argv = argv->v,
        .envp = envp,
        .fd_in = null_fd,
        .fd_out = pipe_out[1],
        .fd_err = null_fd,
        .report_fd = report[1],
        .parent = getpid(),
    };
    pid_t pid = fork_child(&cs);
    if (pid < 0)
        goto out;
    close(pipe_out[1]);
    close(report[1]);
    pipe_out[1] = report[1] = -1;
    bool exec_failed = read_exec_report(report[0]) != 0;
    double end = clock_ms() + timeout_ms;
    bool timed_out = false;
    while (!exec_failed) {
        double left = end - clock_ms();
        if (left <= 0) {
            timed_out = true;
            break;
        }
        struct pollfd pfd = {.fd = pipe_out[0], .events = POLLIN};
        if (poll(&pfd, 1, (int)left + 1) <= 0)
            continue;
        char chunk[4096];
        ssize_t n = read(pipe_out[0], chunk, sizeof(chunk));
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        buf_append(out, chunk, (size_t)n);
    }
    /* EOF only means stdout was closed: the exit is waited for under the
     * same deadline, or a command that closes stdout and hangs would hang us */
    int status = 0;
    pid_t got = 0;
    while (!timed_out && (got = waitpid(pid, &status, WNOHANG)) == 0) {
        if (clock_ms() >= end)
            timed_out = true;
        else
            sleep_ms(POLL_SLICE_MS / 4, NULL);
    }
    if (timed_out) { /* SIGKILL to the group, every member reaped */
        struct srv_proc sp;
        srv_proc_init(&sp);
        sp.pid = pid;
        srv_stop(&sp, 0, NULL, NULL);
        srv_proc_release(&sp);
    }
    if (!exec_failed && !timed_out && got == pid && WIFEXITED(status))
        rc = WEXITSTATUS(status);
out:
    for (int i = 0; i < 2; i++) {
        if (pipe_out[i] >= 0)
            close(pipe_out[i]);
        if (report[i] >= 0)
            close(report[i]);
    }
    if (null_fd >= 0)
        close(null_fd);
    free(envp);
    free(path);
    return rc;
}
