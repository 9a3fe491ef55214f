/*
 * Unit tests for runner/exec/cgroup.c and its use by proc.c: parsing
 * mountinfo, /proc/self/cgroup, /proc/PID/stat and cgroup names from
 * fixed text; then, on a host with a writable cgroup2 hierarchy, real
 * processes: a child and its setsid'd helper in a cgroup stopped by
 * proc_stop, and the clean-up of cgroups a dead sweep left (live owners'
 * cgroups untouched). Without cgroup2 the real-process tests say "skip"
 * with the reason and pass.
 */
/* The source, not the header: the tests reach its statics. */
#include <sys/wait.h>

#include "strvec.h"
#include "test.h"

#include "exec/cgroup.c"
#include "exec/proc.h"

static char tmpdir[64];

static char *tmp_file(const char *name, const char *text)
{
    if (!tmpdir[0]) {
        snprintf(tmpdir, sizeof(tmpdir), "/tmp/sweep-cg-XXXXXX");
        if (!mkdtemp(tmpdir))
            abort();
    }
    char *path = path_join(tmpdir, name);
    FILE *f = fopen(path, "w");
    fputs(text, f);
    fclose(f);
    return path;
}

TEST(mountinfo_hybrid_and_unified)
{
    /* a hybrid host (v1 controllers, cgroup2 at .../unified) and an escaped
     * mount point with a space */
    char *hybrid = tmp_file("hybrid", "31 23 0:28 / /sys/fs/cgroup rw - tmpfs tmpfs rw,mode=755\n"
                                      "35 31 0:32 / /sys/fs/cgroup/memory rw - cgroup cgroup rw\n"
                                      "41 31 0:38 / /sys/fs/cgroup/unified rw,relatime shared:9 - "
                                      "cgroup2 cgroup2 rw\n");
    char *mnt = NULL, *root = NULL;
    CHECK(find_cgroup2(hybrid, &mnt, &root));
    CHECK_STR(mnt, "/sys/fs/cgroup/unified");
    CHECK_STR(root, "/");
    free(mnt);
    free(root);
    char *odd = tmp_file("odd", "50 1 0:40 /ns /mnt/c\\040g rw - cgroup2 none rw\n");
    mnt = root = NULL;
    CHECK(find_cgroup2(odd, &mnt, &root));
    CHECK_STR(mnt, "/mnt/c g");
    CHECK_STR(root, "/ns");
    free(mnt);
    free(root);
    char *none = tmp_file("none", "35 31 0:32 / /sys/fs/cgroup/memory rw - cgroup cgroup rw\n");
    CHECK(!find_cgroup2(none, &mnt, &root));
    CHECK(!find_cgroup2("/nonexistent/mountinfo", &mnt, &root));
    free(hybrid);
    free(odd);
    free(none);
}

TEST(own_cgroup_is_the_zero_line)
{
    char *f = tmp_file("cg", "4:memory:/x\n0::/user.slice/session-2.scope\n1:cpu:/\n");
    char *own = own_cgroup(f);
    CHECK_STR(own, "/user.slice/session-2.scope");
    free(own);
    char *v1 = tmp_file("cg1", "4:memory:/x\n1:cpu:/\n");
    CHECK(own_cgroup(v1) == NULL);
    free(f);
    free(v1);
}

TEST(open_says_why_when_unusable)
{
    struct cg_base b;
    char *v1only = tmp_file("v1only", "35 31 0:32 / /sys/fs/cgroup/memory rw - cgroup cgroup rw\n");
    CHECK_INT(cg_open(&b, v1only, NULL), -1);
    CHECK_STR(b.why, "no cgroup2 file system is mounted");
    CHECK(cg_create(&b, "server", NULL) == NULL);
    cg_close(&b);
    /* our cgroup outside the subtree the mount shows */
    char *ns = tmp_file("ns", "50 1 0:40 /ns /mnt/cg rw - cgroup2 none rw\n");
    char *cg = tmp_file("cgx", "0::/other/x\n");
    CHECK_INT(cg_open(&b, ns, cg), -1);
    CHECK_MSG(b.why && strstr(b.why, "outside the cgroup2 mount"), "%s", b.why);
    cg_close(&b);
    /* a directory that does not exist cannot take a child */
    char *cg2 = tmp_file("cgy", "0::/ns/nosuch\n");
    CHECK_INT(cg_open(&b, ns, cg2), -1);
    CHECK_MSG(b.why && strstr(b.why, "/mnt/cg/nosuch/cgroup.procs"), "%s", b.why);
    cg_close(&b);
    free(v1only);
    free(ns);
    free(cg);
    free(cg2);
}

TEST(start_time_and_names)
{
    /* field 22 of stat, checked against what a child reads from its own stat
     * with a different parser (awk splits on spaces; our comm has none) */
    unsigned long long self;
    CHECK(start_time(getpid(), &self));
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "awk '{ print $22 }' /proc/%ld/stat", (long)getpid());
    FILE *p = popen(cmd, "r"); /* allow: test only, fixed command */
    unsigned long long want = 0;
    CHECK(p && fscanf(p, "%llu", &want) == 1);
    if (p)
        pclose(p);
    CHECK_MSG(self == want && self > 0, "start time %llu, awk says %llu", self, want);
    CHECK(!start_time(0, &self));
    pid_t pid;
    unsigned long long start, ns = 99;
    CHECK(parse_name("sweep-123-4567-ns4026531836-server-1", &pid, &start, &ns));
    CHECK_INT(pid, 123);
    CHECK_INT((long long)start, 4567);
    CHECK_INT((long long)ns, 4026531836LL);
    /* an older sweep's name, without the namespace */
    CHECK(parse_name("sweep-123-4567-server-1", &pid, &start, &ns));
    CHECK_INT((long long)ns, 0);
    CHECK(parse_name("sweep-123-4567-nsx-server-1", &pid, &start, &ns));
    CHECK_INT((long long)ns, 0);
    CHECK(!parse_name("sweep-probe-99", &pid, &start, &ns));
    CHECK(!parse_name("sweep-123", &pid, &start, &ns));
    CHECK(!parse_name("system.slice", &pid, &start, &ns));
    CHECK(!parse_name("sweep--1-2-x", &pid, &start, &ns));
}

/* ---- real cgroups ---- */

/* An open base in our own cgroup, or false after printing why not. */
static bool real_base(struct cg_base *b, const char *test)
{
    if (cg_open(b, NULL, NULL) == 0)
        return true;
    printf("skip: %s: cgroup v2 not usable (%s)\n", test, b->why);
    cg_close(b);
    return false;
}

/* No such process, or only its zombie (waiting for init to reap it). */
static bool pid_gone(pid_t pid)
{
    char path[64], text[512];
    snprintf(path, sizeof(path), "/proc/%ld/stat", (long)pid);
    if (read_small(path, text, sizeof(text)) <= 0)
        return true;
    const char *rp = strrchr(text, ')');
    return rp && rp[1] == ' ' && rp[2] == 'Z';
}

/* Wait up to ms for a pid file to hold a pid; 0 if it did not. */
static pid_t read_pid_file(const char *path, double ms)
{
    double end = clock_ms() + ms;
    for (;;) {
        char text[32];
        long pid;
        if (read_small(path, text, sizeof(text)) > 0) {
            text[strcspn(text, "\n")] = '\0';
            if (str_to_long(text, &pid) == 0 && pid > 0)
                return (pid_t)pid;
        }
        if (clock_ms() > end)
            return 0;
        sleep_ms(10, NULL);
    }
}

TEST(stop_kills_a_setsid_helper_through_the_cgroup)
{
    /* R15: the helper leaves the process group; without a subreaper (not
     * set in this binary) nothing but the cgroup can find it */
    struct cg_base b;
    if (!real_base(&b, "stop_kills_a_setsid_helper_through_the_cgroup"))
        return;
    char *pidf = tmp_file("helper.pid", "");
    char *script = xasprintf("setsid sh -c 'echo $$ >%s; exec sleep 310' & sleep 311", pidf);
    struct strvec argv;
    strvec_init(&argv);
    strvec_push(&argv, "sh");
    strvec_push(&argv, "-c");
    strvec_push(&argv, script);
    char *log = path_join(tmpdir, "stop.log");
    struct proc p;
    struct err e;
    err_init(&e);
    proc_init(&p);
    p.cg_dir = cg_create(&b, "server", NULL);
    CHECK(p.cg_dir != NULL);
    char *dir = xstrdup(p.cg_dir ? p.cg_dir : "");
    CHECK_INT(proc_spawn(&p, &argv, NULL, log, &e), 0);
    pid_t helper = read_pid_file(pidf, 5000);
    CHECK(helper > 0);
    /* wait for setsid to have run: the helper leads a session of its own */
    for (int i = 0; i < 300 && helper > 0 && getsid(helper) != helper; i++)
        sleep_ms(10, NULL);
    CHECK(helper > 0 && getpgid(helper) != p.pid);
    pid_t in[16];
    size_t n = cg_pids(dir, in, 16);
    bool found = false;
    for (size_t i = 0; i < n; i++)
        found |= in[i] == helper;
    CHECK_MSG(found, "the helper %ld is not in %s (%zu pids there)", (long)helper, dir, n);
    CHECK_INT(cg_populated(dir), 1);
    struct proc_stop_info info;
    CHECK_INT(proc_stop(&p, 2.0, NULL, &info), 0);
    CHECK(!info.escalated); /* sleep dies of SIGTERM: the polite phase reached it */
    for (int i = 0; i < 100 && helper > 0 && !pid_gone(helper); i++) {
        waitpid(-1, NULL, WNOHANG); /* in case it was reparented to us */
        sleep_ms(10, NULL);
    }
    CHECK_MSG(helper > 0 && pid_gone(helper), "helper %ld outlived proc_stop", (long)helper);
    CHECK_MSG(access(dir, F_OK) != 0, "%s was not removed", dir);
    CHECK(p.cg_dir == NULL);
    proc_release(&p);
    strvec_release(&argv);
    free(script);
    free(log);
    free(dir);
    free(pidf);
    cg_close(&b);
}

TEST(stop_kills_the_cgroup_when_sigterm_is_ignored)
{
    /* the hard phase: a helper that ignores SIGTERM goes with cgroup.kill */
    struct cg_base b;
    if (!real_base(&b, "stop_kills_the_cgroup_when_sigterm_is_ignored"))
        return;
    struct strvec argv;
    strvec_init(&argv);
    strvec_push(&argv, "sh");
    strvec_push(&argv, "-c");
    strvec_push(&argv, "setsid sh -c 'trap \"\" TERM; sleep 312' & exec sleep 313");
    char *log = tmp_file("hard.log", "");
    struct proc p;
    struct err e;
    err_init(&e);
    proc_init(&p);
    p.cg_dir = cg_create(&b, "server", NULL);
    char *dir = xstrdup(p.cg_dir ? p.cg_dir : "");
    CHECK_INT(proc_spawn(&p, &argv, NULL, log, &e), 0);
    pid_t in[16];
    size_t n = 0;
    for (int i = 0; i < 300 && n < 3; i++, sleep_ms(10, NULL))
        n = cg_pids(dir, in, 16);
    CHECK_INT((long)n, 3); /* sleep 313 (the leader), the helper sh, its sleep 312 */
    struct proc_stop_info info;
    CHECK_INT(proc_stop(&p, 0.3, NULL, &info), 0);
    CHECK(info.escalated);
    CHECK_INT(cg_populated(dir), -1); /* removed */
    for (size_t i = 0; i < n; i++) {
        for (int k = 0; k < 100 && !pid_gone(in[i]); k++) {
            waitpid(-1, NULL, WNOHANG);
            sleep_ms(10, NULL);
        }
        CHECK_MSG(pid_gone(in[i]), "pid %ld survived", (long)in[i]);
    }
    proc_release(&p);
    strvec_release(&argv);
    free(log);
    free(dir);
    cg_close(&b);
}

/* Start `sleep secs` moved into cgroup dir; returns its pid (our child). */
static pid_t sleeper_in(const char *dir, const char *secs)
{
    pid_t pid = fork();
    if (pid == 0) {
        char *procs = path_join(dir, "cgroup.procs");
        int fd = open(procs, O_WRONLY);
        if (fd < 0 || write(fd, "0", 1) != 1)
            _exit(126);
        close(fd);
        execlp("sleep", "sleep", secs, (char *)NULL);
        _exit(127);
    }
    for (int i = 0; i < 300 && cg_populated(dir) != 1; i++)
        sleep_ms(10, NULL);
    return pid;
}

/* A pid that ran and is gone now (reaped), and the start time it had. */
static pid_t dead_pid(unsigned long long *start)
{
    int fds[2];
    if (pipe(fds) != 0)
        abort();
    pid_t pid = fork();
    if (pid == 0) {
        char c;
        close(fds[1]);
        ssize_t r = read(fds[0], &c, 1); /* until the parent has our start time */
        _exit(r < 0);
    }
    close(fds[0]);
    *start = 0;
    start_time(pid, start);
    close(fds[1]);
    waitpid(pid, NULL, 0);
    return pid;
}

TEST(leftovers_of_a_dead_sweep_are_killed_live_ones_kept)
{
    /* R16: cgroups named after a dead sweep (pid gone, or pid reused by a
     * process started at another time) are emptied and removed; a live
     * sweep's (same pid and start time) are not touched, nor are cgroups
     * that are not sweep's, nor those a sweep of another PID namespace
     * named (its pid means nothing here) */
    struct cg_base b;
    if (!real_base(&b, "leftovers_of_a_dead_sweep_are_killed_live_ones_kept"))
        return;
    unsigned long long dead_start;
    pid_t dead = dead_pid(&dead_start);
    /* an older sweep's name (no namespace) is judged as one of ours */
    char *gone = xasprintf("%s/sweep-%ld-%llu-server-1", b.dir, (long)dead, dead_start);
    char *reused = xasprintf("%s/sweep-%ld-%llu-ns%llu-client-2", b.dir, (long)getpid(),
                             b.owner_start + 1, b.owner_ns);
    char *foreign = xasprintf("%s/sweep-%ld-%llu-ns%llu-server-4", b.dir, (long)dead, dead_start,
                              b.owner_ns + 1);
    char *empty = xasprintf("%s/sweep-%ld-%llu-client-3", b.dir, (long)dead, dead_start);
    char *other = xasprintf("%s/sweep-notours-%ld", b.dir, (long)getpid());
    char *live = cg_create(&b, "server", NULL);
    CHECK(live != NULL);
    CHECK_INT(mkdir(gone, 0755), 0);
    CHECK_INT(mkdir(reused, 0755), 0);
    CHECK_INT(mkdir(empty, 0755), 0);
    CHECK_INT(mkdir(other, 0755), 0);
    CHECK_INT(mkdir(foreign, 0755), 0);
    pid_t s_foreign = sleeper_in(foreign, "324");
    pid_t s_gone = sleeper_in(gone, "320");
    pid_t s_reused = sleeper_in(reused, "321");
    pid_t s_live = live ? sleeper_in(live, "322") : 0;
    pid_t s_other = sleeper_in(other, "323");
    /* 2 here; more if an earlier run of a test died and left its own */
    size_t killed = cg_clean_leftovers(&b);
    CHECK_MSG(killed >= 2, "%zu processes killed, want 2", killed);
    /* the killed ones are our children here: reap them to see them gone */
    int st;
    CHECK(waitpid(s_gone, &st, 0) == s_gone && WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
    CHECK(waitpid(s_reused, &st, 0) == s_reused && WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
    CHECK_MSG(access(gone, F_OK) != 0, "%s is still there", gone);
    CHECK_MSG(access(reused, F_OK) != 0, "%s is still there", reused);
    CHECK_MSG(access(empty, F_OK) != 0, "the empty %s is still there", empty);
    CHECK_MSG(s_live > 0 && kill(s_live, 0) == 0, "the live sweep's process was killed");
    CHECK_MSG(kill(s_other, 0) == 0, "a process in a cgroup not named by sweep was killed");
    CHECK_MSG(live && access(live, F_OK) == 0, "the live sweep's cgroup was removed");
    CHECK_MSG(access(other, F_OK) == 0, "%s was removed", other);
    CHECK_MSG(kill(s_foreign, 0) == 0, "another PID namespace's sweep's process was killed");
    CHECK_MSG(access(foreign, F_OK) == 0, "%s was removed", foreign);
    /* tidy up */
    for (pid_t *pp = (pid_t[]){s_live, s_other, s_foreign, 0}; *pp; pp++) {
        kill(*pp, SIGKILL);
        waitpid(*pp, NULL, 0);
    }
    if (live) {
        cg_wait_empty(live, 2000);
        rmdir(live);
    }
    cg_wait_empty(other, 2000);
    rmdir(other);
    cg_wait_empty(foreign, 2000);
    rmdir(foreign);
    free(foreign);
    free(gone);
    free(reused);
    free(empty);
    free(other);
    free(live);
    cg_close(&b);
}

TEST(spawn_without_a_usable_cgroup_falls_back)
{
    /* a cgroup path whose cgroup.procs cannot be opened: the child runs in
     * its process group only and the stop works as before */
    struct strvec argv;
    strvec_init(&argv);
    strvec_push(&argv, "sleep");
    strvec_push(&argv, "330");
    char *log = tmp_file("fallback.log", "");
    struct proc p;
    struct err e;
    err_init(&e);
    proc_init(&p);
    p.cg_dir = xstrdup("/nonexistent/cgroup");
    CHECK_INT(proc_spawn(&p, &argv, NULL, log, &e), 0);
    CHECK(p.cg_dir == NULL);
    CHECK_INT(proc_stop(&p, 2.0, NULL, NULL), 0);
    proc_release(&p);
    strvec_release(&argv);
    free(log);
}

TEST(kill_without_cgroup_kill_signals_each_pid)
{
    /* before Linux 5.14 there is no cgroup.kill: each listed pid gets
     * SIGKILL (a plain folder stands in for the cgroup) */
    pid_t child = fork();
    if (child == 0) {
        pause();
        _exit(0);
    }
    char text[32];
    snprintf(text, sizeof(text), "%ld\n", (long)child);
    free(tmp_file("cgroup.procs", text));
    CHECK(cg_has_pid(tmpdir, child));
    CHECK(!cg_has_pid(tmpdir, child + 1));
    cg_kill(tmpdir);
    int st = 0;
    CHECK(waitpid(child, &st, 0) == child && WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
    char *procs = path_join(tmpdir, "cgroup.procs");
    unlink(procs);
    free(procs);
}

TEST(failed_spawn_removes_its_cgroup)
{
    /* a program that does not exist: nothing starts, and the cgroup made
     * for it does not stay behind */
    struct cg_base b;
    if (!real_base(&b, "failed_spawn_removes_its_cgroup"))
        return;
    struct strvec argv;
    strvec_init(&argv);
    strvec_push(&argv, "/nonexistent/server");
    char *log = tmp_file("nostart.log", "");
    struct proc p;
    struct err e;
    err_init(&e);
    proc_init(&p);
    p.cg_dir = cg_create(&b, "server", NULL);
    char *dir = xstrdup(p.cg_dir ? p.cg_dir : "");
    CHECK(access(dir, F_OK) == 0);
    CHECK_INT(proc_spawn(&p, &argv, NULL, log, &e), -1);
    CHECK_MSG(access(dir, F_OK) != 0, "%s stayed", dir);
    CHECK(p.cg_dir == NULL);
    proc_release(&p);
    strvec_release(&argv);
    free(log);
    free(dir);
    cg_close(&b);
}

TEST_MAIN()
