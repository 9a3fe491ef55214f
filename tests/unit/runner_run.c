/*
 * Unit tests for the pieces of runner/exec/run.c that judge a point without
 * processes: the measurement invariants and keeping old client logs. (The
 * run loop itself is exercised end to end by tests/integration/run_*.sh.)
 */
/* The source, not the header: the tests reach its statics (keep_old_log, server_start). */
#include "exec/run.c"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include "capture.h"
#include "strutil.h"
#include "test.h"

#include "exec/ports.h"

static void set(struct metric_set *m, const char *name, double v)
{
    mset_set(m, name, v);
}

TEST(invariants_hold)
{
    struct metric_set m;
    mset_init(&m);
    set(&m, "median_ttft_ms", 10);
    set(&m, "median_e2e_ms", 700);
    set(&m, "successful_requests", 48);
    set(&m, "failed_requests", 0);
    set(&m, "concurrency", 15.2);
    struct buf notes;
    buf_init(&notes, 4096);
    CHECK(!ext_check_invariants(&m, 16, 48, 0, &notes));
    CHECK_INT(notes.len, 0);
    buf_release(&notes);
    mset_release(&m);
}

TEST(invariants_violated)
{
    static const struct {
        double ttft, e2e, ok, failed, conc; /* < 0: metric absent */
        long c, p;
        double rate;
        bool bad;
        const char *note;
    } cases[] = {
        {800, 700, 8, 0, 1, 1, 8, 0, true, "median TTFT 800.00 ms exceeds median E2E 700.00 ms"},
        {10, 700, 40, 0, -1, 4, 48, 0, true,
         "40 successful + 0 failed requests, but 48 were planned"},
        {10, 700, 0, 8, -1, 1, 8, 0, true, "no request succeeded"},
        {10, 700, 99, 1, -1, 4, 100, 0, false, "1 of 100 requests failed"},
        {10, 700, 90, 10, -1, 4, 100, 0, true, "10 of 100 requests failed"},
        {10, 700, 47, -1, -1, 4, 48, 0, false, "only 47 of 48 requests succeeded"},
        {10, 700, 30, -1, -1, 4, 48, 0, true, "only 30 of 48 requests succeeded"},
        {10, 700, 48, 0, 3.1, 16, 48, 0, false,
         "achieved concurrency 3.10 is far below the requested 16"},
        /* min(C, P): 4 prompts cannot keep 16 in flight; said, not failed */
        {10, 700, 4, 0, 3.5, 16, 4, 0, false,
         "only 4 prompts for concurrency 16: at most 4 requests ran at once"},
        /* open loop (request rate): concurrency is not the client's to keep */
        {10, 700, 48, 0, 3.1, 16, 48, 5.0, false, ""},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct metric_set m;
        mset_init(&m);
        set(&m, "median_ttft_ms", cases[i].ttft);
        set(&m, "median_e2e_ms", cases[i].e2e);
        set(&m, "successful_requests", cases[i].ok);
        if (cases[i].failed >= 0)
            set(&m, "failed_requests", cases[i].failed);
        if (cases[i].conc >= 0)
            set(&m, "achieved_concurrency", cases[i].conc);
        struct buf notes;
        buf_init(&notes, 4096);
        bool bad = ext_check_invariants(&m, cases[i].c, cases[i].p, cases[i].rate, &notes);
        CHECK_MSG(bad == cases[i].bad, "case %zu: bad = %d", i, bad);
        CHECK_MSG(strcmp(notes.data ? notes.data : "", cases[i].note) == 0,
                  "case %zu: notes '%s', want '%s'", i, notes.data ? notes.data : "",
                  cases[i].note);
        buf_release(&notes);
        mset_release(&m);
    }
}

/* W3-N12: a negative latency, duration or throughput in a client log
 * fails the point, whatever else holds (TTFT -5 is still below E2E). */
TEST(negative_times_fail_the_point)
{
    static const char *const names[] = {"median_ttft_ms", "p99_itl_ms", "duration_s",
                                        "output_throughput", "mean_e2e_ms"};
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        struct metric_set m;
        mset_init(&m);
        set(&m, "median_ttft_ms", 10);
        set(&m, "median_e2e_ms", 700);
        set(&m, "successful_requests", 8);
        set(&m, "failed_requests", 0);
        set(&m, names[i], -5);
        struct buf notes;
        buf_init(&notes, 4096);
        CHECK_MSG(ext_check_invariants(&m, 1, 8, 0, &notes), "%s accepted", names[i]);
        CHECK_MSG(notes.data && strstr(notes.data, names[i]) &&
                      strstr(notes.data, " is negative (-5): a time or rate cannot be"),
                  "%s: %s", names[i], notes.data ? notes.data : "");
        buf_release(&notes);
        mset_release(&m);
    }
    /* a server column or a user's own metric may be negative */
    struct metric_set m;
    mset_init(&m);
    set(&m, "successful_requests", 8);
    set(&m, "server_step_delta_ms", -1);
    set(&m, "temperature_delta", -3);
    struct buf notes;
    buf_init(&notes, 4096);
    CHECK(!ext_check_invariants(&m, 1, 8, 0, &notes));
    buf_release(&notes);
    mset_release(&m);
}

TEST(old_logs_are_kept)
{
    char dir[] = "/tmp/sweep-run-XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    char *log = path_join(dir, "c1-n8.log");
    struct err e;
    err_init(&e);
    CHECK_INT(keep_old_log(log, &e), 0); /* nothing there: nothing happens */
    CHECK(!path_exists(log));
    file_write_atomic(log, "first", 5, &e, 1);
    char *jsonl = path_join(dir, "c1-n8.jsonl");
    file_write_atomic(jsonl, "{}", 2, &e, 1);
    CHECK_INT(keep_old_log(log, &e), 0);
    char *jsonl1 = xasprintf("%s.1", jsonl);
    CHECK(!path_exists(jsonl) && path_exists(jsonl1));
    unlink(jsonl1);
    free(jsonl1);
    free(jsonl);
    file_write_atomic(log, "second", 6, &e, 1);
    CHECK_INT(keep_old_log(log, &e), 0);
    char *one = xasprintf("%s.1", log), *two = xasprintf("%s.2", log);
    struct buf b;
    buf_init(&b, 1 << 20);
    CHECK(!path_exists(log));
    CHECK_INT(file_read_all(one, &b, &e, 1), 0);
    CHECK_STR(b.data, "first");
    buf_reset(&b);
    CHECK_INT(file_read_all(two, &b, &e, 1), 0);
    CHECK_STR(b.data, "second");
    buf_release(&b);
    unlink(one);
    unlink(two);
    rmdir(dir);
    free(one);
    free(two);
    free(log);
}

TEST(old_log_that_cannot_be_moved_is_an_error)
{
    /* a log whose name is 255 bytes cannot become LOG.1 (ENAMETOOLONG, even
     * for root): the client must not append to it, the point must fail */
    char dir[] = "/tmp/sweep-run-XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    char name[256];
    memset(name, 'c', 251);
    memcpy(name + 251, ".log", 5);
    char *log = path_join(dir, name);
    struct err e;
    err_init(&e);
    int fd = open(log, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
    CHECK(fd >= 0);
    close(fd);
    CHECK_INT(keep_old_log(log, &e), -1);
    CHECK_INT(e.code, RN_ERR_ENV);
    CHECK_MSG(strstr(e.msg, "cannot keep the old log"), "%s", e.msg);
    CHECK(path_exists(log));
    unlink(log);
    rmdir(dir);
    free(log);
}

/* ---- the server steps of the loop, on a context built from YAML ---- */

static proc_stop_flag no_stop;
static struct run_opts quiet_opts = {.exp_path = "t.yaml", .self_exe = "sweep"};

/* A context as run_experiment builds it, up to the run loop; the server is
 * build/bin/fakeserver (unit tests run from the repository root). */
static int make_ctx_with(struct run_ctx *c, const char *command, const char *port_line)
{
    memset(c, 0, sizeof(*c));
    c->o = &quiet_opts;
    c->stop = &no_stop;
    proc_init(&c->server);
    res_table_init(&c->table);
    char *yaml = xasprintf("name: t\n"
                           "server:\n"
                           "  engine: command\n"
                           "  command: %s\n"
                           "  %s\n"
                           "  ready: {path: /health, timeout_s: 10}\n"
                           "  stop: {grace_s: 2}\n"
                           "bench:\n"
                           "  tool: command\n"
                           "  command: [true]\n"
                           "  grid: ['1:1']\n",
                           command, port_line);
    struct err err;
    err_init(&err);
    char dir[] = "/tmp/sweep-run-XXXXXX";
    int rc = -1;
    if (!mkdtemp(dir))
        goto out;
    c->run_dir = xstrdup(dir);
    c->csv_path = path_join(dir, "points.csv");
    c->manifest_path = path_join(dir, "manifest.json");
    if (exp_load_string("t.yaml", yaml, strlen(yaml), &c->exp, &err) != 0)
        goto out;
    c->have_exp = true;
    struct plan_opts po = {.run_dir = c->run_dir, .self_exe = "sweep"};
    if (plan_build(&c->exp, &po, &c->plan, &err) != 0)
        goto out;
    c->have_plan = true;
    if (prepare_folder(c, false, &err) != 0)
        goto out;
    c->ext = xcalloc(c->plan.n_variants, sizeof(*c->ext));
    c->attempted = xcalloc(c->plan.n_points + 1, sizeof(*c->attempted));
    c->took_s = xcalloc(c->plan.n_points + 1, sizeof(*c->took_s));
    prog_init(&c->prog, stderr, false, c->plan.n_points, 1);
    rc = 0;
out:
    if (rc != 0)
        fprintf(stderr, "make_ctx: %s\n", err.msg);
    free(yaml);
    return rc;
}

static int make_ctx(struct run_ctx *c, const char *port_line)
{
    return make_ctx_with(c, "[build/bin/fakeserver, --port, '${port}']", port_line);
}

static void drop_ctx(struct run_ctx *c)
{
    char *dir = xstrdup(c->run_dir);
    ctx_release(c);
    const char *argv[] = {"rm", "-rf", dir, NULL};
    struct capture_opts opts = {.timeout_ms = 10000};
    struct capture_result res;
    struct buf out;
    buf_init(&out, 1024);
    capture_run(argv, &opts, &out, &res);
    buf_release(&out);
    free(dir);
}

/* A listening socket on 127.0.0.1:port (or -1). */
static int squat(long port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(fd, (struct sockaddr *)&a, sizeof(a)) != 0 || listen(fd, 4) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

TEST(auto_port_taken_after_planning_is_replaced)
{
    struct run_ctx c;
    if (make_ctx(&c, "port: auto") != 0) {
        CHECK_MSG(0, "no context");
        return;
    }
    long planned = c.plan.variants[0].port;
    int fd = squat(planned);
    CHECK(fd >= 0);
    struct err err;
    err_init(&err);
    CHECK_INT(server_start(&c, 0, &err), 0);
    long now = c.plan.variants[0].port;
    CHECK_MSG(now != planned && now > 0, "port %ld -> %ld", planned, now);
    CHECK(strstr(c.plan.variants[0].url, "127.0.0.1:") != NULL);
    CHECK(proc_alive(&c.server));
    CHECK_INT(port_in_use("127.0.0.1", now), 1);
    /* healthy: server_ensure keeps the same process */
    pid_t pid = c.server.pid;
    CHECK_INT(server_ensure(&c, 0, &err), 0);
    CHECK_INT(c.server.pid, pid);
    /* dead between points: server_ensure starts a new one */
    kill(pid, SIGKILL);
    proc_wait_any((struct proc *[]){&c.server}, 1, 2000, NULL);
    CHECK_INT(server_ensure(&c, 0, &err), 0);
    CHECK(c.server.pid != pid && proc_alive(&c.server));
    CHECK_INT(c.server_starts, 2);
    close(fd);
    drop_ctx(&c);
}

TEST(fixed_port_taken_is_refused)
{
    long port = port_free("127.0.0.1");
    int fd = squat(port);
    CHECK(fd >= 0);
    char *line = xasprintf("port: %ld", port);
    struct run_ctx c;
    /* preflight refuses it; so does the start itself, if taken later */
    if (make_ctx(&c, line) == 0) {
        struct err err;
        err_init(&err);
        CHECK_INT(preflight(&c, &err), -1);
        CHECK_MSG(strstr(err.msg, "in use") != NULL, "%s", err.msg);
        err_init(&err);
        CHECK_INT(server_start(&c, 0, &err), -1);
        CHECK_INT(err.code, RN_ERR_ENV);
        CHECK_INT(c.server.pid, 0);
        drop_ctx(&c);
    } else {
        CHECK_MSG(0, "no context");
    }
    close(fd);
    free(line);
}

TEST(server_stop_kills_a_helper_that_left_the_group)
{
    /* the server starts a helper in a session of its own (setsid), out of
     * reach of killpg; as subreaper we inherit it when the server dies, and
     * stopping the server must not leave it running into the next variant */
    CHECK_INT(proc_become_subreaper(), 0);
    struct run_ctx c;
    if (make_ctx_with(&c,
                      "[sh, -c, 'setsid sleep 300 & echo $! >\"$1\"; exec build/bin/fakeserver "
                      "--port \"$0\"', '${port}', '${run_dir}/helper.pid']",
                      "port: auto") != 0) {
        CHECK_MSG(0, "no context");
        return;
    }
    struct err err;
    err_init(&err);
    CHECK_INT(server_start(&c, 0, &err), 0);
    char *pid_path = path_join(c.run_dir, "helper.pid");
    struct buf text;
    buf_init(&text, 64);
    long helper = 0;
    CHECK_MSG(file_read_all(pid_path, &text, &err, 1) == 0 && text.data, "%s", err.msg);
    while (text.len && text.data[text.len - 1] == '\n')
        text.data[--text.len] = '\0';
    CHECK(text.data && str_to_long(text.data, &helper) == 0);
    CHECK_MSG(helper > 0 && kill((pid_t)helper, 0) == 0, "helper %ld not running", helper);
    /* the pid file is written before the helper's setsid() has run; on a
     * loaded machine it may still be in the server's group for a moment */
    for (int i = 0; i < 200 && helper > 0 && getpgid((pid_t)helper) == c.server.pid; i++)
        sleep_ms(10, NULL);
    CHECK(getpgid((pid_t)helper) != c.server.pid);
    server_stop(&c);
    bool gone = helper > 0 && kill((pid_t)helper, 0) != 0 && errno == ESRCH;
    CHECK_MSG(gone, "helper %ld outlived its server", helper);
    proc_kill_strays(NULL, 0);
    buf_release(&text);
    free(pid_path);
    drop_ctx(&c);
}

TEST(plan_error_is_a_usage_error_and_frees_the_plan)
{
    /* --only naming no variant fails in plan_build: exit status 2, and
     * what plan_build made is released (the sanitizer run sees a leak) */
    char path[] = "/tmp/sweep-run-exp-XXXXXX";
    int fd = mkstemp(path);
    const char *yaml = "name: t\n"
                       "server: {engine: command, command: [build/bin/fakeserver]}\n"
                       "bench: {tool: command, command: [true], grid: ['1:1']}\n"
                       "variants: [{name: a}]\n";
    CHECK(write(fd, yaml, strlen(yaml)) == (ssize_t)strlen(yaml));
    close(fd);
    struct strvec only;
    strvec_init(&only);
    strvec_push(&only, "nosuch");
    struct run_opts o = quiet_opts;
    o.exp_path = path;
    o.only = &only;
    o.dry_run = true;
    proc_stop_flag stop = 0;
    CHECK_INT(run_experiment(&o, &stop), RN_ERR_USAGE);
    strvec_release(&only);
    unlink(path);
}

TEST_MAIN()
