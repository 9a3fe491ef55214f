/*
 * Unit tests for runner/exec/ (proc.c, ready.c, cause.c, ports.c, gpu.c):
 * spawning into a process group with the output in a log, exec failures,
 * stop with grace and SIGKILL (group empty afterwards), strays that left
 * the group, the port probe, the readiness poll against a small in-process
 * HTTP responder, and the cause of death read from a log tail. Real
 * processes throughout.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "buf.h"
#include "capture.h"
#include "fileio.h"
#include "strvec.h"
#include "test.h"
#include "timeutil.h"
#include "xalloc.h"

#include "exec/cause.h"
#include "exec/gpu.h"
#include "exec/ports.h"
#include "exec/proc.h"
#include "exec/ready.h"

static char tmpdir[64];

static void setup_tmp(void)
{
    if (tmpdir[0])
        return;
    /* as in sweep: orphans come back to us, so their zombies are reaped */
    if (proc_become_subreaper() != 0)
        abort();
    snprintf(tmpdir, sizeof(tmpdir), "/tmp/sweep-srv-XXXXXX");
    if (!mkdtemp(tmpdir))
        abort();
}

static char *tmp_path(const char *name)
{
    setup_tmp();
    return path_join(tmpdir, name);
}

static char *read_file(const char *path)
{
    struct buf b;
    struct err e;
    buf_init(&b, 1 << 20);
    err_init(&e);
    if (file_read_all(path, &b, &e, 1) != 0 || !b.data) {
        buf_release(&b);
        return xstrdup("");
    }
    return buf_detach(&b, NULL);
}

/* argv from a NULL-terminated list */
static void argv_of(struct strvec *sv, const char *first, ...)
{
    strvec_init(sv);
    va_list ap;
    va_start(ap, first);
    for (const char *s = first; s; s = va_arg(ap, const char *))
        strvec_push(sv, s);
    va_end(ap);
}

/* Spawn argv with output in a fresh log named log_name. */
static int spawn(struct proc *p, const char *log_name, struct strvec *argv,
                 const struct strvec *env, struct err *e)
{
    char *log = tmp_path(log_name);
    unlink(log);
    proc_init(p);
    err_init(e);
    int rc = proc_spawn(p, argv, env, log, e);
    free(log);
    return rc;
}

/* Wait (blocking, bounded) until p exits; true if it did within ms. */
static bool wait_exit(struct proc *p, double ms)
{
    double end = clock_ms() + ms;
    while (proc_alive(p)) {
        if (clock_ms() > end)
            return false;
        sleep_ms(10, NULL);
    }
    return true;
}

/* A TCP port on 127.0.0.1 that nothing listens on now. */
static int free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(a);
    bind(fd, (struct sockaddr *)&a, sizeof(a));
    getsockname(fd, (struct sockaddr *)&a, &len);
    close(fd);
    return ntohs(a.sin_port);
}

TEST(spawn_logs_output_env_and_exit_status)
{
    struct strvec argv, env;
    argv_of(&argv, "sh", "-c", "echo out-line; echo err-line >&2; echo \"A=$SWEEP_T_A\"; exit 3",
            NULL);
    argv_of(&env, "SWEEP_T_A=one two", NULL);
    struct proc p;
    struct err e;
    CHECK_INT(spawn(&p, "basic.log", &argv, &env, &e), 0);
    CHECK(p.pid > 0);
    CHECK_INT(getpgid(p.pid) == p.pid || !proc_alive(&p), 1);
    CHECK(wait_exit(&p, 5000));
    char how_buf[96];
    const char *how = how_buf;
    proc_describe_status(p.wstatus, how_buf, sizeof(how_buf));
    CHECK_STR(how, "exited with code 3");
    char *log = read_file(p.log_path);
    CHECK(strstr(log, "out-line\n") != NULL);
    CHECK(strstr(log, "err-line\n") != NULL);
    CHECK(strstr(log, "A=one two\n") != NULL);
    free(log);
    struct proc_stop_info info;
    CHECK_INT(proc_stop(&p, 1.0, NULL, &info), 0);
    CHECK(!info.escalated);
    proc_release(&p);
    strvec_release(&argv);
    strvec_release(&env);
}

TEST(spawn_passes_hostile_values_verbatim)
{
    /* Each element arrives as one argv word; nothing is run by a shell. */
    char *marker = tmp_path("pwned");
    char *hostile = xasprintf("$(id); touch %s", marker);
    struct strvec argv;
    argv_of(&argv, "printf", "[%s]\\n", hostile, "a b", "'q'\"", "`id`", NULL);
    struct proc p;
    struct err e;
    CHECK_INT(spawn(&p, "verbatim.log", &argv, NULL, &e), 0);
    CHECK(wait_exit(&p, 5000));
    char *log = read_file(p.log_path);
    char *want = xasprintf("[%s]\n[a b]\n['q'\"]\n[`id`]\n", hostile);
    CHECK_STR(log, want);
    CHECK(!path_exists(marker));
    free(want);
    free(log);
    proc_stop(&p, 1.0, NULL, NULL);
    proc_release(&p);
    strvec_release(&argv);
    free(hostile);
    free(marker);
}

TEST(spawn_missing_program_fails_before_fork)
{
    struct strvec argv;
    argv_of(&argv, "/nonexistent/llm-server", "--port", "1", NULL);
    struct proc p;
    struct err e;
    CHECK_INT(spawn(&p, "missing.log", &argv, NULL, &e), -1);
    CHECK_INT(e.code, 3);
    CHECK(strstr(e.msg, "/nonexistent/llm-server") != NULL);
    CHECK_INT(p.pid, 0);
    strvec_release(&argv);

    argv_of(&argv, "sweep-no-such-program-anywhere", NULL);
    CHECK_INT(spawn(&p, "missing2.log", &argv, NULL, &e), -1);
    CHECK(strstr(e.msg, "not found in PATH") != NULL);
    strvec_release(&argv);
}

TEST(spawn_exec_failure_is_reported_with_log_message)
{
    /* Executable, but its interpreter does not exist: execve fails in the
     * child with ENOENT, which the parent learns over the report pipe. */
    char *script = tmp_path("badshebang");
    const char text[] = "#!/nonexistent/interpreter\necho never\n";
    struct err e;
    err_init(&e);
    CHECK_INT(file_write_atomic(script, text, sizeof(text) - 1, &e, 1), 0);
    chmod(script, 0755);
    struct strvec argv;
    argv_of(&argv, script, NULL);
    struct proc p;
    CHECK_INT(spawn(&p, "execfail.log", &argv, NULL, &e), -1);
    CHECK(strstr(e.msg, "cannot execute") != NULL);
    CHECK(strstr(e.msg, "No such file or directory") != NULL);
    char *lp = tmp_path("execfail.log");
    char *log = read_file(lp);
    CHECK(strstr(log, "sweep: cannot execute") != NULL);
    free(log);
    free(lp);
    strvec_release(&argv);
    free(script);
}

TEST(stop_sigterm_is_quick_even_if_parent_ignores_it)
{
    /* Ignored and blocked signals are inherited across exec; the child must
     * reset them or SIGTERM would never reach the server. */
    struct sigaction ign = {.sa_handler = SIG_IGN}, old;
    sigaction(SIGTERM, &ign, &old);
    sigset_t term, oldmask;
    sigemptyset(&term);
    sigaddset(&term, SIGTERM);
    sigprocmask(SIG_BLOCK, &term, &oldmask);
    struct strvec argv;
    argv_of(&argv, "sleep", "300", NULL);
    struct proc p;
    struct err e;
    CHECK_INT(spawn(&p, "sleep.log", &argv, NULL, &e), 0);
    sigprocmask(SIG_SETMASK, &oldmask, NULL);
    sigaction(SIGTERM, &old, NULL);
    sleep_ms(50, NULL);
    struct proc_stop_info info;
    CHECK_INT(proc_stop(&p, 5.0, NULL, &info), 0);
    CHECK(!info.escalated);
    CHECK(info.group_emptied);
    CHECK_MSG(info.elapsed_s < 1.0, "stop took %.3f s", info.elapsed_s);
    char how_buf[96];
    const char *how = how_buf;
    proc_describe_status(p.wstatus, how_buf, sizeof(how_buf));
    CHECK_STR(how, "killed by SIGTERM");
    proc_release(&p);
    strvec_release(&argv);
}

TEST(stop_escalates_after_grace_and_empties_the_group)
{
    /* The leader and its two helpers all ignore SIGTERM (the ignore is
     * inherited by the helpers): only SIGKILL after the grace period works. */
    struct strvec argv;
    argv_of(&argv, "sh", "-c", "trap '' TERM; sleep 300 & sleep 300 & echo started; wait", NULL);
    struct proc p;
    struct err e;
    CHECK_INT(spawn(&p, "ignore.log", &argv, NULL, &e), 0);
    double end = clock_ms() + 5000;
    char *log = read_file(p.log_path);
    while (!strstr(log, "started") && clock_ms() < end) {
        free(log);
        sleep_ms(20, NULL);
        log = read_file(p.log_path);
    }
    free(log);
    pid_t pgid = p.pid;
    struct proc_stop_info info;
    CHECK_INT(proc_stop(&p, 0.6, NULL, &info), 0);
    CHECK(info.escalated);
    CHECK(!info.hurried); /* the grace ran out: it did ignore SIGTERM */
    CHECK(info.group_emptied);
    CHECK_MSG(info.elapsed_s >= 0.6 && info.elapsed_s < 2.0, "stop took %.3f s", info.elapsed_s);
    CHECK(killpg(pgid, 0) != 0 && errno == ESRCH);
    proc_release(&p);
    strvec_release(&argv);
}

TEST(stop_second_interrupt_skips_the_grace)
{
    struct strvec argv;
    argv_of(&argv, "sh", "-c", "trap '' TERM; echo started; sleep 300", NULL);
    struct proc p;
    struct err e;
    CHECK_INT(spawn(&p, "hurry.log", &argv, NULL, &e), 0);
    sleep_ms(100, NULL);
    proc_stop_flag hurry = 2;
    struct proc_stop_info info;
    CHECK_INT(proc_stop(&p, 30.0, &hurry, &info), 0);
    CHECK(info.escalated);
    CHECK(info.hurried); /* killed for the second interrupt, not for ignoring SIGTERM */
    CHECK_MSG(info.elapsed_s < 1.5, "stop took %.3f s", info.elapsed_s);
    proc_release(&p);
    strvec_release(&argv);
}

TEST(stop_reaps_group_members_left_by_a_dead_leader)
{
    /* The leader exits at once; its helper stays in the group, orphaned. */
    CHECK_INT(proc_become_subreaper(), 0);
    struct strvec argv;
    argv_of(&argv, "sh", "-c", "sleep 300 & exit 0", NULL);
    struct proc p;
    struct err e;
    CHECK_INT(spawn(&p, "orphan.log", &argv, NULL, &e), 0);
    CHECK(wait_exit(&p, 5000));
    pid_t pgid = p.pid;
    CHECK_MSG(killpg(pgid, 0) == 0, "the helper should still be alive in the group");
    struct proc_stop_info info;
    CHECK_INT(proc_stop(&p, 2.0, NULL, &info), 0);
    CHECK(!info.escalated);
    CHECK(killpg(pgid, 0) != 0 && errno == ESRCH);
    proc_release(&p);
    strvec_release(&argv);
}

TEST(kill_strays_finds_a_process_that_left_the_group)
{
    CHECK_INT(proc_become_subreaper(), 0);
    struct strvec argv;
    argv_of(&argv, "sh", "-c", "setsid sleep 301 & echo started; sleep 300", NULL);
    struct proc p;
    struct err e;
    CHECK_INT(spawn(&p, "stray.log", &argv, NULL, &e), 0);
    sleep_ms(200, NULL);
    CHECK_INT(proc_stop(&p, 2.0, NULL, NULL), 0);
    /* the setsid'd sleep escaped killpg and was reparented to us */
    CHECK_INT(proc_kill_strays(NULL, 0), 1);
    CHECK_INT(proc_kill_strays(NULL, 0), 0);
    proc_release(&p);
    strvec_release(&argv);
}

TEST(group_members_and_stale_pids)
{
    /* the members a stop leaves behind (R9): listed while they run, gone after */
    CHECK_INT(proc_become_subreaper(), 0);
    struct strvec argv;
    argv_of(&argv, "sh", "-c", "sleep 302 & sleep 303 & wait", NULL);
    struct proc p;
    struct err e;
    CHECK_INT(spawn(&p, "members.log", &argv, NULL, &e), 0);
    pid_t members[8];
    size_t n = 0;
    for (int tries = 0; tries < 100 && n < 3; tries++, sleep_ms(20, NULL))
        n = proc_group_members(p.pid, members, 8);
    CHECK_INT((long)n, 3); /* sh and its two sleeps */
    bool has_leader = false;
    for (size_t i = 0; i < n; i++)
        has_leader |= members[i] == p.pid;
    CHECK(has_leader);
    CHECK_INT((long)proc_group_members(p.pid, members, 1), 1); /* max is honoured */
    CHECK(proc_pid_in_group(p.pid, p.pid));
    CHECK(!proc_pid_in_group(p.pid, getpgrp())); /* running, but in another group */
    pid_t leader = p.pid;
    CHECK_INT(proc_stop(&p, 2.0, NULL, NULL), 0);
    CHECK_INT((long)proc_group_members(leader, members, 8), 0);
    CHECK(!proc_pid_in_group(leader, leader));
    proc_release(&p);
    strvec_release(&argv);
}

TEST(gpu_pids_from_nvidia_smi)
{
    /* a stand-in for nvidia-smi: pids one per line, padded, with a line of
     * prose some drivers print; then one that fails */
    char *ok = tmp_path("nvsmi-ok"), *bad = tmp_path("nvsmi-bad");
    FILE *f = fopen(ok, "w");
    fprintf(f, "#!/bin/sh\n"
               "case \"$*\" in *--query-compute-apps=pid*) ;; *) exit 9 ;; esac\n"
               "printf ' 12\\nNo running processes found\\n\\n34\\r\\n'\n");
    fclose(f);
    f = fopen(bad, "w");
    fprintf(f, "#!/bin/sh\necho 56\nexit 1\n");
    fclose(f);
    chmod(ok, 0755);
    chmod(bad, 0755);
    pid_t pids[4] = {0};
    CHECK_INT(gpu_pids(ok, pids, 4), 2);
    CHECK_INT(pids[0], 12);
    CHECK_INT(pids[1], 34);
    CHECK_INT(gpu_pids(ok, pids, 1), 1);
    CHECK_INT(gpu_pids(bad, pids, 4), -1);
    free(ok);
    free(bad);
}

TEST(wait_any_returns_when_one_exits)
{
    struct strvec a1, a2;
    argv_of(&a1, "sleep", "0.2", NULL);
    argv_of(&a2, "sleep", "300", NULL);
    struct proc p1, p2;
    struct err e;
    /* timed from before the spawns: the sleep cannot end before 200 ms,
     * however slow a loaded machine makes them; well under the 5 s
     * timeout means it returned when p1 ended */
    double t0 = clock_ms();
    CHECK_INT(spawn(&p1, "w1.log", &a1, NULL, &e), 0);
    CHECK_INT(spawn(&p2, "w2.log", &a2, NULL, &e), 0);
    struct proc *both[2] = {&p1, &p2};
    proc_wait_any(both, 2, 5000, NULL);
    double took = clock_ms() - t0;
    CHECK_MSG(took >= 190 && took < 3000, "took %.0f ms", took);
    CHECK(!proc_alive(&p1));
    CHECK(proc_alive(&p2));
    proc_stop_flag stop = 1;
    t0 = clock_ms();
    proc_wait_any(both + 1, 1, 5000, &stop);
    CHECK(clock_ms() - t0 < 100);
    proc_stop(&p1, 1, NULL, NULL);
    proc_stop(&p2, 1, NULL, NULL);
    proc_release(&p1);
    proc_release(&p2);
    strvec_release(&a1);
    strvec_release(&a2);
}

TEST(port_probe_sees_a_listener)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(a);
    CHECK_INT(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
    CHECK_INT(listen(fd, 4), 0);
    getsockname(fd, (struct sockaddr *)&a, &len);
    int port = ntohs(a.sin_port);
    CHECK_INT(port_in_use("127.0.0.1", port), 1);
    CHECK_INT(port_in_use("localhost", port), 1);
    close(fd);
    CHECK_INT(port_in_use("127.0.0.1", port), 0);
}

/* ---- a tiny HTTP responder for the readiness tests ---- */

struct responder {
    int fd; /* listening socket */
    int port;
    double ok_after_ms; /* answer 503 until this long after start, then 200; <0: never */
    double t0;          /* clock_ms at start */
    atomic_int stop;
    atomic_int probes; /* requests answered */
    pthread_t thread;
};

static void *responder_main(void *arg)
{
    struct responder *r = arg;
    while (!atomic_load(&r->stop)) {
        struct pollfd pfd = {.fd = r->fd, .events = POLLIN};
        if (poll(&pfd, 1, 50) <= 0)
            continue;
        int c = accept(r->fd, NULL, NULL);
        if (c < 0)
            continue;
        char req[2048];
        ssize_t n = read(c, req, sizeof(req));
        (void)n;
        bool ok = r->ok_after_ms >= 0 && clock_ms() - r->t0 >= r->ok_after_ms;
        const char *resp =
            ok ? "HTTP/1.1 200 OK\r\nContent-Length: 15\r\nConnection: close\r\n\r\n"
                 "{\"status\":\"ok\"}"
               : "HTTP/1.1 503 Service Unavailable\r\nContent-Length: 2\r\nConnection: "
                 "close\r\n\r\n{}";
        ssize_t w = write(c, resp, strlen(resp));
        (void)w;
        atomic_fetch_add(&r->probes, 1);
        close(c);
    }
    return NULL;
}

static void responder_start(struct responder *r, double ok_after_ms)
{
    memset(r, 0, sizeof(*r));
    r->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {.sin_family = AF_INET};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(a);
    bind(r->fd, (struct sockaddr *)&a, sizeof(a));
    listen(r->fd, 16);
    getsockname(r->fd, (struct sockaddr *)&a, &len);
    r->port = ntohs(a.sin_port);
    r->ok_after_ms = ok_after_ms;
    r->t0 = clock_ms();
    pthread_create(&r->thread, NULL, responder_main, r);
}

static void responder_stop(struct responder *r)
{
    atomic_store(&r->stop, 1);
    pthread_join(r->thread, NULL);
    close(r->fd);
}

/* A stand-in server process: alive, but the HTTP side is the responder. */
static void spawn_sleeper(struct proc *p, const char *log)
{
    struct strvec argv;
    argv_of(&argv, "sleep", "300", NULL);
    struct err e;
    spawn(p, log, &argv, NULL, &e);
    strvec_release(&argv);
}

TEST(ready_after_loading)
{
    struct responder r;
    responder_start(&r, 600);
    struct proc p;
    spawn_sleeper(&p, "ready.log");
    char url[64];
    snprintf(url, sizeof(url), "http://127.0.0.1:%d/health", r.port);
    struct err e;
    err_init(&e);
    double t0 = clock_ms();
    CHECK_INT(ready_wait(&p, url, 30, NULL, &e), READY_OK);
    double took = clock_ms() - t0;
    /* backoff 50, 100, 200, 400, 800: ready is seen within 1 s after 600 ms */
    CHECK_MSG(took >= 550 && took < 2500, "took %.0f ms", took);
    CHECK_MSG(atomic_load(&r.probes) >= 3 && atomic_load(&r.probes) <= 8, "%d probes",
              atomic_load(&r.probes));
    proc_stop(&p, 1, NULL, NULL);
    proc_release(&p);
    responder_stop(&r);
}

TEST(ready_503_until_the_deadline)
{
    struct responder r;
    responder_start(&r, -1);
    struct proc p;
    spawn_sleeper(&p, "r503.log");
    char url[64];
    snprintf(url, sizeof(url), "http://127.0.0.1:%d/health", r.port);
    struct err e;
    err_init(&e);
    double t0 = clock_ms();
    CHECK_INT(ready_wait(&p, url, 1.5, NULL, &e), READY_TIMEOUT);
    double took = clock_ms() - t0;
    CHECK_MSG(took >= 1450 && took < 2600, "took %.0f ms", took);
    CHECK_MSG(strstr(e.msg, "HTTP 503") != NULL, "msg: %s", e.msg);
    CHECK_INT(e.code, 3);
    struct proc_stop_info info;
    CHECK_INT(proc_stop(&p, 1, NULL, &info), 0);
    proc_release(&p);
    responder_stop(&r);
}

TEST(ready_fails_fast_when_the_server_exits)
{
    /* The server exits with code 2 after 0.3 s; the deadline is 600 s. */
    struct strvec argv;
    argv_of(&argv, "sh", "-c",
            "echo 'loading model'; echo 'error: unknown flag --quantt' >&2; sleep 0.3; exit 2",
            NULL);
    struct proc p;
    struct err e;
    CHECK_INT(spawn(&p, "exit2.log", &argv, NULL, &e), 0);
    char url[64];
    snprintf(url, sizeof(url), "http://127.0.0.1:%d/health", free_port());
    double t0 = clock_ms();
    CHECK_INT(ready_wait(&p, url, 600, NULL, &e), READY_EXITED);
    double took = clock_ms() - t0;
    CHECK_MSG(took < 0.3 * 1000 + 2000, "noticed after %.0f ms", took);
    CHECK_MSG(strstr(e.msg, "exited with code 2") != NULL, "msg: %s", e.msg);
    char *tail = proc_log_tail(&p, 30);
    CHECK_STR(tail, "loading model\nerror: unknown flag --quantt");
    free(tail);
    proc_stop(&p, 1, NULL, NULL);
    proc_release(&p);
    strvec_release(&argv);
}

TEST(ready_interrupted)
{
    struct proc p;
    spawn_sleeper(&p, "rint.log");
    char url[64];
    snprintf(url, sizeof(url), "http://127.0.0.1:%d/health", free_port());
    proc_stop_flag stop = 1;
    struct err e;
    err_init(&e);
    CHECK_INT(ready_wait(&p, url, 600, &stop, &e), READY_INTERRUPTED);
    proc_stop(&p, 1, NULL, NULL);
    proc_release(&p);
}

TEST(log_tail_starts_at_this_run)
{
    char *log = tmp_path("tail.log");
    const char old[] = "old run: CUDA error: out of memory\n";
    struct err e;
    err_init(&e);
    CHECK_INT(file_write_atomic(log, old, sizeof(old) - 1, &e, 1), 0);
    struct strvec argv;
    argv_of(&argv, "sh", "-c", "for i in 1 2 3 4 5; do echo line$i; done; kill -KILL $$", NULL);
    struct proc p;
    proc_init(&p);
    CHECK_INT(proc_spawn(&p, &argv, NULL, log, &e), 0);
    CHECK(wait_exit(&p, 5000));
    char *tail = proc_log_tail(&p, 2);
    CHECK_STR(tail, "line4\nline5");
    free(tail);
    /* the old run's out-of-memory line must not be blamed on this one */
    char *cause = cause_of_exit(&p, "server");
    CHECK_STR(cause, "server killed by SIGKILL");
    free(cause);
    proc_stop(&p, 1, NULL, NULL);
    proc_release(&p);
    strvec_release(&argv);
    free(log);
}

TEST(exit_cause_names_the_log_signature)
{
    struct strvec argv;
    argv_of(&argv, "sh", "-c",
            "echo 'Traceback (most recent call last):'; "
            "echo 'RuntimeError: CUDA out of memory. Tried to allocate 20.00 GiB'; exit 1",
            NULL);
    struct proc p;
    struct err e;
    CHECK_INT(spawn(&p, "oom.log", &argv, NULL, &e), 0);
    CHECK(wait_exit(&p, 5000));
    char *cause = cause_of_exit(&p, "server");
    CHECK_STR(cause, "server exited with code 1: out of memory ('RuntimeError: CUDA out of "
                     "memory. Tried to allocate 20.00 GiB')");
    free(cause);
    proc_stop(&p, 1, NULL, NULL);
    proc_release(&p);
    strvec_release(&argv);
}

TEST(log_cause_table)
{
    static const struct {
        const char *text, *label, *line;
    } cases[] = {
        {"a\nb\nRuntimeError: CUDA error: an illegal memory access was encountered\n", "CUDA error",
         "RuntimeError: CUDA error: an illegal memory access was encountered"},
        {"OSError: [Errno 98] error while attempting to bind: Address already in use\nbye",
         "port in use",
         "OSError: [Errno 98] error while attempting to bind: Address already in "
         "use"},
        {"fakeserver: address already in use", "port in use", "fakeserver: address already in use"},
        {"torch.OutOfMemoryError: CUDA out of memory", "out of memory",
         "torch.OutOfMemoryError: CUDA out of memory"},
        {"terminate called after throwing an instance of 'std::bad_alloc'", "out of memory",
         "terminate called after throwing an instance of 'std::bad_alloc'"},
        {"./server: error while loading shared libraries: libcudart.so.12",
         "missing shared library",
         "./server: error while loading shared libraries: libcudart.so.12"},
        /* the latest matching line wins */
        {"CUDA error: x\nlater: out of memory\nnothing", "out of memory", "later: out of memory"},
        {"all fine\nshutting down", NULL, NULL},
        {"", NULL, NULL},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char *line = NULL;
        const char *label = cause_from_log(cases[i].text, &line);
        if (cases[i].label) {
            CHECK_MSG(label && strcmp(label, cases[i].label) == 0, "case %zu: label %s", i,
                      label ? label : "(none)");
            CHECK_MSG(line && strcmp(line, cases[i].line) == 0, "case %zu: line %s", i,
                      line ? line : "(none)");
        } else {
            CHECK_MSG(!label && !line, "case %zu: unexpected %s", i, label);
        }
        free(line);
    }
}

/* A server's error message as clients print it: the openai client's
 * exception (Python's repr, double quotes around a value with a '),
 * lm-eval's retry warning (the JSON body), vLLM's error object, escapes;
 * the last one wins; lines that do not say "error" are not read. */
TEST(server_message_in_client_logs)
{
    static const struct {
        const char *text, *msg;
    } cases[] = {
        {"Traceback (most recent call last):\n"
         "openai.BadRequestError: Error code: 400 - {'error': {'message': \"'stream_options."
         "continuous_usage_stats' is not supported\", 'type': 'invalid_request_error', "
         "'param': None, 'code': None}}\nRuntimeError: 1 of 1 failed\n",
         "'stream_options.continuous_usage_stats' is not supported"},
        {"WARNING [api_models.py:479] API request failed with error message: "
         "{\"error\":{\"message\":\"'max_tokens' is 0\",\"type\":\"invalid_request_error\","
         "\"param\":\"max_tokens\",\"code\":null}}. Retrying...\nrequests.exceptions.HTTPError: "
         "400 Client Error",
         "'max_tokens' is 0"},
        {"{\"object\":\"error\",\"message\":\"This model's maximum context length is 2048\","
         "\"type\":\"BadRequestError\",\"code\":400}",
         "This model's maximum context length is 2048"},
        {"error: {\"message\" : \"a \\\"quoted\\\" word\\nnext\"}", "a \"quoted\" word next"},
        {"Error: 404 {\"detail\":\"Not Found\"}", "Not Found"},
        /* the latest line wins */
        {"error {'message': 'first'}\nerror {'message': 'second'}\nbye", "second"},
        /* no "error" on the line, an empty value, no value: nothing */
        {"{\"message\": \"hello\"}", NULL},
        {"error {\"message\": \"\"}", NULL},
        {"error: message: plain", NULL},
        {"", NULL},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char *msg = cause_server_message(cases[i].text, 300);
        if (cases[i].msg)
            CHECK_MSG(msg && strcmp(msg, cases[i].msg) == 0, "case %zu: %s", i,
                      msg ? msg : "(none)");
        else
            CHECK_MSG(!msg, "case %zu: unexpected %s", i, msg);
        free(msg);
    }
    char *cut = cause_server_message("error {'message': 'abcdefghij'}", 4);
    CHECK_STR(cut, "abcd...");
    free(cut);
}

TEST(describe_status)
{
    char buf[96];
    const char *s = buf;
    proc_describe_status(0, buf, sizeof(buf));
    CHECK_STR(s, "exited with code 0");
    proc_describe_status(127 << 8, buf, sizeof(buf));
    CHECK_STR(s, "exited with code 127");
    proc_describe_status(SIGKILL, buf, sizeof(buf));
    CHECK_STR(s, "killed by SIGKILL");
    proc_describe_status(SIGSEGV | 0x80, buf, sizeof(buf));
    CHECK_STR(s, "killed by SIGSEGV (core dumped)");
}

TEST(zz_cleanup)
{
    /* every test stopped what it started: no child of ours is left */
    CHECK_INT(proc_kill_strays(NULL, 0), 0);
    const char *argv[] = {"rm", "-rf", tmpdir, NULL};
    struct capture_opts opts = {.timeout_ms = 10000};
    struct capture_result res;
    struct buf out;
    buf_init(&out, 1024);
    CHECK_INT(capture_run(argv, &opts, &out, &res), 0);
    CHECK_INT(capture_exit_code(&res), 0);
    buf_release(&out);
}

TEST_MAIN()
