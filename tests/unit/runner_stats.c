/*
 * runner_stats: percentiles (numpy's linear interpolation), the statistics
 * lgreport derives from hand-made request records with exact times, the
 * result block's layout (40-column labels, 50-column rules, "n/a"), and the
 * JSONL records.
 */
#include <jansson.h>
#include <stdlib.h>
#include <unistd.h>

#include "test.h"
#include "xalloc.h"

#include "client/lgreport.h"
#include "client/stats.h"

TEST(percentiles_match_numpy)
{
    /* values from numpy.percentile(x, p) with the default method */
    double a[] = {1, 2, 3, 4};
    CHECK_NEAR(stats_percentile(a, 4, 50), 2.5, 1e-12);
    CHECK_NEAR(stats_percentile(a, 4, 90), 3.7, 1e-12);
    CHECK_NEAR(stats_percentile(a, 4, 95), 3.85, 1e-12);
    CHECK_NEAR(stats_percentile(a, 4, 99), 3.97, 1e-12);
    CHECK_NEAR(stats_percentile(a, 4, 0), 1, 0);
    CHECK_NEAR(stats_percentile(a, 4, 100), 4, 0);
    double b[] = {15, 20, 35, 40, 50};
    CHECK_NEAR(stats_percentile(b, 5, 40), 29, 1e-12);
    double one[] = {7};
    CHECK_NEAR(stats_percentile(one, 1, 99), 7, 0);
    CHECK_NEAR(stats_percentile(NULL, 0, 50), 0, 0);

    double x[] = {9, 1, 5, 3, 7};
    struct stats_summary s;
    stats_summarize(x, 5, &s);
    CHECK_INT(s.n, 5);
    CHECK_NEAR(s.mean, 5, 1e-12);
    CHECK_NEAR(s.median, 5, 1e-12);
    CHECK_NEAR(s.p90, 8.2, 1e-12);
    CHECK_NEAR(s.min, 1, 0);
    CHECK_NEAR(s.max, 9, 0);
    stats_summarize(NULL, 0, &s);
    CHECK_INT(s.n, 0);
}

#define MS 1000000ull /* ns */

/* A successful request: sent at t0 + sent_ms, first text at +ttft, then
 * n - 1 more chunks gap_ms apart; the last byte 1 ms after the last chunk. */
static void ok_record(struct lg_record *r, uint64_t t0, uint64_t sent_ms, uint64_t ttft_ms,
                      uint64_t gap_ms, long n)
{
    memset(r, 0, sizeof(*r));
    r->sent = true;
    r->t_intended_ns = r->t_sent_ns = t0 + sent_ms * MS;
    r->t_first_ns = r->t_sent_ns + ttft_ms * MS;
    r->chunk_ns = xcalloc((size_t)n, sizeof(*r->chunk_ns));
    for (long k = 0; k < n; k++)
        r->chunk_ns[k] = r->t_first_ns + (uint64_t)k * gap_ms * MS;
    r->n_chunk_times = (size_t)n;
    r->n_chunks = r->output_tokens = n;
    r->t_last_ns = r->chunk_ns[n - 1] + 1 * MS;
    r->prompt_tokens = 10;
    r->http_status = 200;
}

static struct lg_result make_result(void)
{
    struct lg_result res = {0};
    uint64_t t0 = 1000 * MS;
    res.n_total = 5;
    res.n_warmup = 1;
    res.rec = xcalloc(5, sizeof(*res.rec));
    ok_record(&res.rec[0], t0, 0, 500, 500, 3); /* warmup: must not count anywhere */
    res.rec[0].warmup = true;
    res.t_start_ns = t0 + 100 * MS;
    uint64_t s = 100;
    ok_record(&res.rec[1], t0, s, 10, 20, 5);      /* e2e 10 + 80 + 1 = 91 ms */
    ok_record(&res.rec[2], t0, s, 30, 40, 3);      /* e2e 30 + 80 + 1 = 111 ms */
    ok_record(&res.rec[3], t0, s + 91, 10, 20, 1); /* one token: no TPOT */
    res.rec[3].usage_missing = true;
    memset(&res.rec[4], 0, sizeof(res.rec[4])); /* a 503 */
    res.rec[4].sent = true;
    res.rec[4].t_sent_ns = res.rec[4].t_intended_ns = t0 + (s + 5) * MS;
    res.rec[4].t_last_ns = t0 + (s + 6) * MS;
    res.rec[4].http_status = 503;
    res.rec[4].fail = LG_FAIL_HTTP;
    res.rec[4].error = xstrdup("HTTP 503: overloaded");
    res.t_end_ns = res.rec[2].t_last_ns; /* t0 + 211 ms: duration 0.111 s */
    return res;
}

TEST(summary_from_exact_times)
{
    struct lg_result res = make_result();
    struct lg_config cfg = {.concurrency = 2};
    struct lgr_summary s;
    lgr_compute(&cfg, &res, &s);
    CHECK_INT(s.n_measured, 4);
    CHECK_INT(s.n_ok, 3);
    CHECK_INT(s.n_failed, 1);
    CHECK_INT(s.n_kind[LG_FAIL_HTTP], 1);
    CHECK_INT(s.n_usage_missing, 1);
    CHECK_NEAR(s.error_rate, 0.25, 1e-12);
    CHECK_NEAR(s.duration_s, 0.111, 1e-9);
    CHECK_INT(s.total_output, 5 + 3 + 1);
    CHECK_INT(s.total_input, 30);
    /* sum of E2E (91 + 111 + 11 ms) over the duration */
    CHECK_NEAR(s.concurrency, (91 + 111 + 11) / 111.0, 1e-9);
    CHECK_NEAR(s.output_throughput, 9 / 0.111, 1e-6);
    CHECK_NEAR(s.ttft.median, 10, 1e-9);
    CHECK_NEAR(s.ttft.mean, 50 / 3.0, 1e-9);
    /* TPOT per request: (91 - 10) / 4 and (111 - 30) / 2; the 1-token request has none */
    CHECK_INT(s.tpot.n, 2);
    CHECK_NEAR(s.tpot.min, 81 / 4.0, 1e-9);
    CHECK_NEAR(s.tpot.max, 81 / 2.0, 1e-9);
    /* ITL pooled: 4 gaps of 20 ms and 2 of 40 ms */
    CHECK_INT(s.itl.n, 6);
    CHECK_NEAR(s.itl.mean, (4 * 20 + 2 * 40) / 6.0, 1e-9);
    CHECK_NEAR(s.itl.max, 40, 1e-9);
    /* requests 1, 2 and the 503 overlap (the warmup does not count) */
    CHECK_INT(s.peak_concurrent, 3);
    CHECK(!s.open_loop);
    lg_result_release(&res);
}

/* The block printed for res, in a heap string. */
static char *print_block(const struct lg_config *cfg, const struct lgr_summary *s)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    lgr_print(f, cfg, s);
    fclose(f);
    return text;
}

static bool has_line(const char *text, const char *line)
{
    size_t n = strlen(line);
    for (const char *p = text; (p = strstr(p, line)); p++)
        if ((p == text || p[-1] == '\n') && (p[n] == '\n' || p[n] == '\0'))
            return true;
    return false;
}

TEST(block_layout)
{
    struct lg_result res = make_result();
    struct lg_config cfg = {.concurrency = 2};
    struct lgr_summary s;
    lgr_compute(&cfg, &res, &s);
    char *text = print_block(&cfg, &s);
    CHECK(has_line(text, "============ Serving Benchmark Result ============"));
    CHECK(has_line(text, "Backend:                                 sweep-bench"));
    CHECK(has_line(text, "Traffic request rate:                    inf       "));
    CHECK(has_line(text, "Max request concurrency:                 2         "));
    CHECK(has_line(text, "Successful requests:                     3         "));
    CHECK(has_line(text, "Failed requests:                         1         "));
    CHECK(has_line(text, "Failed (HTTP status):                    1         "));
    CHECK(has_line(text, "Error rate:                              0.25      "));
    CHECK(has_line(text, "Requests without usage:                  1         "));
    CHECK(has_line(text, "Benchmark duration (s):                  0.11      "));
    CHECK(has_line(text, "Median TTFT (ms):                        10.00     "));
    CHECK(has_line(text, "Max ITL (ms):                            40.00     "));
    CHECK(has_line(text, "----------------End-to-End Latency----------------"));
    CHECK(has_line(text, "---------------Time to First Token----------------"));
    CHECK(has_line(text, "-----Time per Output Token (excl. 1st token)------"));
    CHECK(has_line(text, "---------------Inter-Token Latency----------------"));
    CHECK(has_line(text, "=================================================="));
    CHECK(!strstr(text, "Queue Delay"));            /* closed loop: no open-loop sections */
    CHECK(!strstr(text, "Failed (connect error)")); /* kinds that did not occur */
    /* every row: a 40-column label, a space, the value */
    for (char *line = text; *line;) {
        char *nl = strchr(line, '\n');
        size_t n = nl ? (size_t)(nl - line) : strlen(line);
        if (n && line[0] != '=' && line[0] != '-')
            CHECK_MSG(n >= 42 && line[40] == ' ' && line[41] != ' ', "row '%.*s'", (int)n, line);
        if (n && (line[0] == '=' || line[0] == '-'))
            CHECK_INT(n, 50);
        line += n + (nl != NULL);
    }
    free(text);

    /* every request failed: statistics say n/a, not 0 */
    for (size_t i = 1; i < res.n_total; i++)
        res.rec[i].fail = LG_FAIL_TRUNCATED;
    lgr_compute(&cfg, &res, &s);
    text = print_block(&cfg, &s);
    CHECK(has_line(text, "Median TTFT (ms):                        n/a       "));
    CHECK(has_line(text, "Failed (truncated stream):               4         "));
    free(text);
    lg_result_release(&res);
}

TEST(open_loop_sections)
{
    struct lg_result res = make_result();
    res.open_loop = true;
    res.rec[2].t_intended_ns -= 7 * MS; /* sent 7 ms late */
    struct lg_config cfg = {.concurrency = 2, .request_rate = 12.5};
    struct lgr_summary s;
    lgr_compute(&cfg, &res, &s);
    CHECK_INT(s.queue.n, 4);
    CHECK_NEAR(s.queue.max, 7, 1e-9);
    CHECK_NEAR(s.e2e_sched.max, 111 + 7, 1e-9);
    char *text = print_block(&cfg, &s);
    CHECK(has_line(text, "Traffic request rate:                    12.50     "));
    CHECK(has_line(text, "----------------Client Queue Delay----------------"));
    CHECK(has_line(text, "Max Queue Delay (ms):                    7.00      "));
    CHECK(has_line(text, "------------Latency from Intended Send------------"));
    CHECK(strstr(text, "P99 Scheduled E2E (ms):") != NULL);
    free(text);
    lg_result_release(&res);
}

TEST(jsonl_records)
{
    struct lg_result res = make_result();
    char path[] = "/tmp/runner_stats_XXXXXX";
    int fd = mkstemp(path);
    close(fd);
    struct err err;
    err_init(&err);
    CHECK_INT(lgr_write_jsonl(path, &res, &err), 0);
    FILE *f = fopen(path, "r");
    char line[8192];
    int n = 0;
    while (f && fgets(line, sizeof(line), f)) {
        json_error_t je;
        json_t *j = json_loads(line, 0, &je);
        CHECK_MSG(j != NULL, "line %d is not JSON: %s", n, je.text);
        if (n == 0)
            CHECK(json_is_true(json_object_get(j, "warmup")));
        if (n == 1) {
            CHECK_STR(json_string_value(json_object_get(j, "status")), "ok");
            CHECK_NEAR(json_real_value(json_object_get(j, "ttft_ms")), 10, 1e-9);
            CHECK_NEAR(json_real_value(json_object_get(j, "e2e_ms")), 91, 1e-9);
            CHECK_NEAR(json_real_value(json_object_get(j, "tpot_ms")), 20.25, 1e-9);
            CHECK_INT(json_array_size(json_object_get(j, "itl_ms")), 4);
        }
        if (n == 4) {
            CHECK_STR(json_string_value(json_object_get(j, "fail")), "http");
            CHECK_INT(json_integer_value(json_object_get(j, "http_status")), 503);
            CHECK_STR(json_string_value(json_object_get(j, "error")), "HTTP 503: overloaded");
            CHECK(json_is_null(json_object_get(j, "ttft_ms")));
        }
        json_decref(j);
        n++;
    }
    if (f)
        fclose(f);
    CHECK_INT(n, 5);
    unlink(path);
    lg_result_release(&res);
}

TEST_MAIN()
