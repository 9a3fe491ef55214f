/*
 * Unit tests for runner/exec/progress.c (point counter, ETA from the average
 * pace and from a hint, plain and terminal output, the client's progress
 * readings and the plain lines during a long point) and for the secret
 * filter of runner/exec/manifest.c.
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "test.h"
#include "timeutil.h"

#include "config/plan.h"
#include "exec/manifest.h"
#include "exec/progress.h"

/* Output of a progress session into a string. */
struct capture {
    char *text;
    size_t len;
    FILE *f;
};

static void cap_open(struct capture *c)
{
    c->text = NULL;
    c->len = 0;
    c->f = open_memstream(&c->text, &c->len);
}

static void cap_close(struct capture *c)
{
    fclose(c->f);
}

TEST(format_duration)
{
    char s[32];
    const char *p = s;
    prog_format_duration(-1, s, sizeof(s));
    CHECK_STR(p, "?");
    prog_format_duration(12.4, s, sizeof(s));
    CHECK_STR(p, "12s");
    prog_format_duration(65, s, sizeof(s));
    CHECK_STR(p, "1m05s");
    prog_format_duration(3600 + 120 + 5, s, sizeof(s));
    CHECK_STR(p, "1h02m");
}

TEST(eta_unknown_until_a_point_finishes_then_from_the_pace)
{
    struct capture cap;
    cap_open(&cap);
    struct progress pr;
    /* three points of work 100, 100, 200 */
    prog_init(&pr, cap.f, false, 3, 400);
    CHECK(prog_eta_s(&pr) < 0);
    prog_begin(&pr, "v c=1 n=10", 100);
    sleep_ms(200, NULL);
    prog_end(&pr, "ok", "");
    /* 0.2 s per 100 units, 300 units left: 0.6 s */
    CHECK_NEAR(prog_eta_s(&pr), 0.6, 0.15);
    prog_begin(&pr, "v c=2 n=10", 100);
    /* during the point, the time spent on it comes off */
    sleep_ms(100, NULL);
    CHECK_NEAR(prog_eta_s(&pr), 0.5, 0.15);
    prog_end(&pr, "failed", "server killed by SIGKILL during the point");
    /* a failed point teaches nothing about the pace, but its work is done */
    CHECK_NEAR(prog_eta_s(&pr), 0.4, 0.1);
    cap_close(&cap);
    CHECK(strstr(cap.text, "sweep: point 1/3: v c=1 n=10 (ETA ?)\n") != NULL);
    CHECK(strstr(cap.text, "sweep: point 1/3: v c=1 n=10 ok in 0s") != NULL);
    CHECK(strstr(cap.text, "sweep: point 2/3: v c=2 n=10 failed in 0s: server killed by SIGKILL "
                           "during the point (ETA 0s)\n") != NULL);
    CHECK(strchr(cap.text, '\r') == NULL);
    free(cap.text);
}

TEST(eta_hint_counts_down)
{
    struct capture cap;
    cap_open(&cap);
    struct progress pr;
    prog_init(&pr, cap.f, false, 2, 200);
    prog_set_eta(&pr, 10);
    CHECK_NEAR(prog_eta_s(&pr), 10, 0.05);
    sleep_ms(200, NULL);
    CHECK_NEAR(prog_eta_s(&pr), 9.8, 0.1);
    prog_set_eta(&pr, 0.1);
    sleep_ms(200, NULL);
    CHECK_NEAR(prog_eta_s(&pr), 0, 1e-9);
    cap_close(&cap);
    free(cap.text);
}

/* issue 13: an ETA from a model without a slope yet is a lower bound */
TEST(eta_lower_bound_is_shown_as_such)
{
    struct capture cap;
    cap_open(&cap);
    struct progress pr;
    prog_init(&pr, cap.f, false, 2, 200);
    char eta[40];
    prog_format_eta(&pr, eta, sizeof(eta));
    CHECK_STR(eta, "?");
    prog_set_eta_bound(&pr, 46, true);
    prog_format_eta(&pr, eta, sizeof(eta));
    CHECK_STR(eta, ">= 46s");
    prog_begin(&pr, "v c=1 n=8", 100);
    prog_end(&pr, "ok", "");
    prog_set_eta_bound(&pr, 125, false);
    prog_format_eta(&pr, eta, sizeof(eta));
    CHECK_STR(eta, "2m05s");
    cap_close(&cap);
    CHECK(cap.text && strstr(cap.text, "sweep: point 1/2: v c=1 n=8 (ETA >= 46s)\n"));
    free(cap.text);
}

/* issue 14: find_max probes are not points of the total; the counter never
 * passes it, and while a search is to come the ETA is a lower bound */
TEST(find_max_probes_are_counted_apart)
{
    struct capture cap;
    cap_open(&cap);
    struct progress pr;
    prog_init(&pr, cap.f, false, 2, 100); /* the second point has no work */
    pr.searching = true;
    prog_begin(&pr, "v rate=5 n=10", 100);
    sleep_ms(100, NULL);
    prog_end(&pr, "ok", "");
    char eta[40];
    prog_format_eta(&pr, eta, sizeof(eta));
    CHECK_STR(eta, ">= 0s");
    for (size_t k = 1; k <= 3; k++) {
        prog_probe(&pr, k, 12);
        prog_begin(&pr, "v find_max rate=10 n=20", 200);
        prog_end(&pr, k == 2 ? "failed" : "ok", "");
    }
    CHECK_INT((long)pr.n_started, 1);
    CHECK_INT((long)pr.n_total, 2);
    CHECK_NEAR(pr.work_left, 0, 0); /* nothing left of the grid, nothing taken twice */
    pr.searching = false;
    prog_format_eta(&pr, eta, sizeof(eta));
    CHECK_STR(eta, "0s");
    prog_begin(&pr, "w c=1 n=8", 0); /* after the probes: a point again */
    prog_end(&pr, "ok", "");
    cap_close(&cap);
    CHECK(strstr(cap.text, "sweep: point 1/2: v rate=5 n=10 (ETA ?)\n") != NULL);
    CHECK(strstr(cap.text, "sweep: probe 1 (find_max, at most 12): v find_max rate=10 n=20 "
                           "(ETA >= 0s)\n") != NULL);
    CHECK(strstr(cap.text, "sweep: probe 3 (find_max, at most 12): v find_max rate=10 n=20 ok") !=
          NULL);
    CHECK(strstr(cap.text, "sweep: point 2/2: w c=1 n=8 (ETA 0s)\n") != NULL);
    CHECK(strstr(cap.text, "sweep: point 3/") == NULL);
    free(cap.text);
}

TEST(terminal_line_is_redrawn_in_place)
{
    struct capture cap;
    cap_open(&cap);
    struct progress pr;
    prog_init(&pr, cap.f, true, 1, 10);
    prog_begin(&pr, "v c=4 n=16", 10);
    sleep_ms(300, NULL);
    prog_tick(&pr);
    prog_note(&pr, "sweep: a message");
    prog_end(&pr, "ok", "");
    cap_close(&cap);
    /* begin, tick and the redraw after the note each draw the live line */
    const char *s = cap.text;
    int draws = 0;
    while ((s = strstr(s, "\r\033[K[1/1] v c=4 n=16")))
        draws++, s++;
    CHECK_INT(draws, 3);
    CHECK(strstr(cap.text, "\r\033[Ksweep: a message\n") != NULL);
    CHECK(strstr(cap.text, "\r\033[Ksweep: point 1/1: v c=4 n=16 ok in 0s (ETA 0s)\n") != NULL);
    free(cap.text);
}

TEST(client_readings_give_requests_and_the_current_rate)
{
    struct capture cap;
    cap_open(&cap);
    struct progress pr;
    prog_init(&pr, cap.f, true, 1, 10);
    prog_begin(&pr, "v c=4 n=16", 10);
    CHECK(pr.req_total < 0 && pr.tok_s < 0); /* nothing known before a reading */
    prog_client(&pr, 0, 16, 0, 0);
    CHECK(pr.tok_s < 0);
    prog_client(&pr, 2, 16, 200, 2); /* before a whole window: the average so far */
    CHECK_NEAR(pr.tok_s, 100, 1e-9);
    prog_client(&pr, 8, 16, 1200, 6); /* 6 s of client time: the window closes */
    CHECK_NEAR(pr.tok_s, 200, 1e-9);
    prog_client(&pr, 12, 16, 1700, 12); /* the next window: 500 tokens in 6 s */
    CHECK_NEAR(pr.tok_s, 500.0 / 6, 1e-9);
    CHECK_INT(pr.req_done, 12);
    CHECK_INT(pr.req_total, 16);
    pr.last_draw_ms = 0;
    prog_tick(&pr);
    prog_end(&pr, "ok", "");
    cap_close(&cap);
    CHECK(strstr(cap.text, "\r\033[K[1/1] v c=4 n=16  0s 12/16 req, 83 tok/s  ETA") != NULL);
    free(cap.text);
}

TEST(client_file_takes_only_a_whole_line)
{
    char path[] = "/tmp/progress-XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    struct progress pr;
    prog_init(&pr, stderr, false, 1, 10);
    prog_begin(&pr, "v", 10);
    char line[65];
    /* a cut line (no '\n' at byte 64) and a malformed one leave nothing */
    snprintf(line, sizeof(line), "%-63s", "3 16 300 1.5");
    CHECK(pwrite(fd, line, 63, 0) == 63);
    CHECK_INT(prog_client_file(&pr, path, NULL, 0), 0);
    CHECK(pr.req_total < 0);
    snprintf(line, sizeof(line), "%-63s\n", "3 16 lots 1.5");
    CHECK(pwrite(fd, line, 64, 0) == 64);
    pr.last_read_ms = 0;
    CHECK_INT(prog_client_file(&pr, path, NULL, 0), 0);
    snprintf(line, sizeof(line), "%-63s\n", "3 16 300 1.5");
    CHECK(pwrite(fd, line, 64, 0) == 64);
    pr.last_read_ms = 0;
    CHECK_INT(prog_client_file(&pr, path, NULL, 0), 1);
    CHECK_INT(pr.req_done, 3);
    CHECK_INT(pr.req_total, 16);
    CHECK_NEAR(pr.tok_s, 200, 1e-9);
    /* read at most twice a second */
    CHECK_INT(prog_client_file(&pr, path, NULL, 0), 0);
    CHECK_INT(prog_client_file(&pr, "/nonexistent/x.progress", NULL, 0), 0);
    close(fd);
    unlink(path);
    prog_end(&pr, "ok", "");
}

TEST(a_command_clients_tqdm_bar_gives_the_requests)
{
    char path[] = "/tmp/progress-log-XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    /* an earlier run's bar before `from`, then this one's, redrawn with \r */
    const char old[] = "100%|##########| 9/9 [00:09<00:00,  1.0it/s]\n";
    const char bar[] = "Starting benchmark\n  0%|          | 0/8 [00:00<?, ?it/s]"
                       "\r 25%|##5       | 2/8 [00:01<00:03,  1.9it/s]"
                       "\r 50%|#####     | 4/8 [00:02<00:02,  1.9it/s]";
    CHECK(write(fd, old, strlen(old)) == (ssize_t)strlen(old));
    struct progress pr;
    prog_init(&pr, stderr, false, 1, 10);
    prog_begin(&pr, "v", 10);
    CHECK_INT(prog_client_file(&pr, NULL, path, (long long)strlen(old)), 0); /* nothing since */
    CHECK(write(fd, bar, strlen(bar)) == (ssize_t)strlen(bar));
    pr.last_read_ms = 0;
    /* no progress file (a command client): the log's last bar */
    CHECK_INT(prog_client_file(&pr, "/nonexistent/x.progress", path, (long long)strlen(old)), 1);
    CHECK_INT(pr.req_done, 4);
    CHECK_INT(pr.req_total, 8);
    CHECK(pr.tok_s < 0); /* a bar counts requests, not tokens */
    close(fd);
    unlink(path);
    prog_end(&pr, "ok", "");
}

TEST(plain_lines_at_most_every_30_s)
{
    struct capture cap;
    cap_open(&cap);
    struct progress pr;
    unsetenv("SWEEP_PROGRESS_EVERY_S");
    prog_init(&pr, cap.f, false, 2, 20);
    CHECK_NEAR(pr.plain_every_s, 30, 1e-9);
    prog_begin(&pr, "v c=64 n=96", 10);
    prog_client(&pr, 40, 96, 8120, 10);
    prog_tick(&pr); /* just begun: no line */
    pr.last_plain_ms = clock_ms() - 29000;
    prog_tick(&pr); /* 29 s: none yet */
    pr.cur_start_ms = pr.last_plain_ms = clock_ms() - 90200;
    prog_tick(&pr); /* 30 s or more: one */
    prog_tick(&pr); /* and not again at once */
    prog_end(&pr, "ok", "");
    cap_close(&cap);
    const char *s = cap.text;
    int n = 0;
    while ((s = strstr(s, " running ")))
        n++, s++;
    CHECK_INT(n, 1);
    CHECK(strstr(cap.text,
                 "sweep: point 1/2: v c=64 n=96 running 1m30s, 40/96 req, 812 tok/s (ETA") != NULL);
    CHECK(strstr(cap.text, "\r") == NULL);
    free(cap.text);
    setenv("SWEEP_PROGRESS_EVERY_S", "2.5", 1);
    prog_init(&pr, stderr, false, 1, 1);
    CHECK_NEAR(pr.plain_every_s, 2.5, 1e-9);
    unsetenv("SWEEP_PROGRESS_EVERY_S");
}

TEST(secret_names)
{
    static const struct {
        const char *name;
        bool secret;
    } cases[] = {
        {"HF_TOKEN", true},
        {"OPENAI_API_KEY", true},
        {"aws_secret_access_key", true},
        {"DB_PASSWORD", true},
        {"MYSQL_PASSWD", true},
        {"GOOGLE_CREDENTIALS", true},
        {"BASIC_AUTH", true}, /* sweep check hides it: the manifest must drop it too */
        {"PROXY_AUTHORIZATION", true},
        {"PATH", false},
        {"HOME", false},
        {"OMP_NUM_THREADS", false},
        {"CUDA_VISIBLE_DEVICES", false},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
        CHECK_MSG(plan_env_is_secret(cases[i].name, strlen(cases[i].name)) == cases[i].secret, "%s",
                  cases[i].name);
    /* only the name counts, not the value after '=' */
    CHECK(!plan_env_is_secret("LANG=TOKEN", 4));
}

TEST_MAIN()
