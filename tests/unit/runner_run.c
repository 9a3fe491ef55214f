/*
 * Unit tests for the pieces of runner/run.c that judge a point without
 * processes: the measurement invariants, keeping old client logs, and the
 * last line of a log tail. (The run loop itself is exercised end to end by
 * tests/integration/run_*.sh.)
 */
#include "run.c"

#include "test.h"

static void set(struct metric_set *m, const char *name, double v)
{
    ms_set(m, name, v);
}

TEST(invariants_hold)
{
    struct metric_set m;
    ms_init(&m);
    set(&m, "median_ttft_ms", 10);
    set(&m, "median_e2e_ms", 700);
    set(&m, "successful_requests", 48);
    set(&m, "failed_requests", 0);
    set(&m, "concurrency", 15.2);
    struct buf notes;
    buf_init(&notes, 4096);
    CHECK(!check_invariants(&m, 16, 48, 0, &notes));
    CHECK_INT(notes.len, 0);
    buf_release(&notes);
    ms_release(&m);
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
        /* min(C, P): 4 prompts cannot keep 16 in flight */
        {10, 700, 4, 0, 3.5, 16, 4, 0, false, ""},
        /* open loop (request rate): concurrency is not the client's to keep */
        {10, 700, 48, 0, 3.1, 16, 48, 5.0, false, ""},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct metric_set m;
        ms_init(&m);
        set(&m, "median_ttft_ms", cases[i].ttft);
        set(&m, "median_e2e_ms", cases[i].e2e);
        set(&m, "successful_requests", cases[i].ok);
        if (cases[i].failed >= 0)
            set(&m, "failed_requests", cases[i].failed);
        if (cases[i].conc >= 0)
            set(&m, "concurrency", cases[i].conc);
        struct buf notes;
        buf_init(&notes, 4096);
        bool bad = check_invariants(&m, cases[i].c, cases[i].p, cases[i].rate, &notes);
        CHECK_MSG(bad == cases[i].bad, "case %zu: bad = %d", i, bad);
        CHECK_MSG(strcmp(notes.data ? notes.data : "", cases[i].note) == 0,
                  "case %zu: notes '%s', want '%s'", i, notes.data ? notes.data : "",
                  cases[i].note);
        buf_release(&notes);
        ms_release(&m);
    }
}

TEST(old_logs_are_kept)
{
    char dir[] = "/tmp/sweep-run-XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    char *log = path_join(dir, "c1-n8.log");
    struct err e;
    err_init(&e);
    keep_old_log(log); /* nothing there: nothing happens */
    CHECK(!path_exists(log));
    file_write_atomic(log, "first", 5, &e, 1);
    keep_old_log(log);
    file_write_atomic(log, "second", 6, &e, 1);
    keep_old_log(log);
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

TEST(last_line_of_a_tail)
{
    char *s = last_line("a\nb\nsweep: unknown option '--x'\n\n");
    CHECK_STR(s, "sweep: unknown option '--x'");
    free(s);
    s = last_line("");
    CHECK_STR(s, "");
    free(s);
}

TEST_MAIN()
