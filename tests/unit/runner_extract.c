/*
 * Unit tests for runner/client/extract.c: every fixture log under
 * tests/fixtures/logs/ (written from the exact blocks in
 * docs/benchmarks.md §2) extracts to exactly the canonical values
 * below; user patterns, limits, require messages and value parsing.
 */
#include <math.h>
#include <stdlib.h>
#include <time.h>

#include "buf.h"
#include "fileio.h"
#include "sweep.h"
#include "test.h"
#include "testtmp.h"
#include "xalloc.h"

#include "client/extract.h"

#define FIX "tests/fixtures/logs/"

struct want {
    const char *name;
    double value;
};

static void load(const char *path, struct buf *b)
{
    struct err e;
    err_init(&e);
    buf_init(b, 1 << 20);
    CHECK_MSG(file_read_all(path, b, &e, 3) == 0, "%s", e.msg);
}

/* Extract path with preset and check that the result is exactly want[]. */
static void check_log(const char *preset, const char *path, const struct want *want, size_t n)
{
    struct err e;
    ext_set *set;
    struct buf b;
    struct metric_set ms;
    err_init(&e);
    load(path, &b);
    mset_init(&ms);
    CHECK_MSG(ext_new(preset, NULL, 0, &set, &e) == 0, "%s", e.msg);
    CHECK_MSG(ext_run(set, b.data, b.len, &ms, NULL, &e) == 0, "%s", e.msg);
    for (size_t i = 0; i < n; i++) {
        double v = NAN;
        CHECK_MSG(mset_get(&ms, want[i].name, &v), "%s: '%s' missing", path, want[i].name);
        CHECK_MSG(v == want[i].value || (isinf(v) && isinf(want[i].value)),
                  "%s: %s = %.17g, want %.17g", path, want[i].name, v, want[i].value);
    }
    for (size_t k = 0; k < ms.n; k++) {
        bool expected = false;
        for (size_t i = 0; i < n && !expected; i++)
            expected = strcmp(ms.m[k].name, want[i].name) == 0;
        CHECK_MSG(expected, "%s: unexpected metric '%s' = %g", path, ms.m[k].name, ms.m[k].value);
        CHECK_MSG(metric_find(ms.m[k].name), "%s: '%s' is not canonical", path, ms.m[k].name);
    }
    mset_release(&ms);
    ext_free(set);
    buf_release(&b);
}

#define CHECK_LOG(preset, file, ...)                                                               \
    do {                                                                                           \
        static const struct want w_[] = {__VA_ARGS__};                                             \
        check_log(preset, FIX file, w_, sizeof(w_) / sizeof(w_[0]));                               \
    } while (0)

TEST(sglang_newest_label_set)
{
    CHECK_LOG("sglang", "sglang_newest.log", {"successful_requests", 48}, {"duration_s", 25.41},
              {"total_input_tokens", 12288}, {"total_output_tokens", 6144},
              {"request_throughput", 1.89}, {"input_throughput", 483.60},
              {"output_throughput", 241.80}, {"total_throughput", 725.40},
              {"achieved_concurrency", 15.87}, {"mean_e2e_ms", 8401.12}, {"median_e2e_ms", 8395.50},
              {"p90_e2e_ms", 8650.33}, {"p95_e2e_ms", 8702.91}, {"p99_e2e_ms", 8790.04},
              {"mean_ttft_ms", 412.77}, {"median_ttft_ms", 398.10}, {"p90_ttft_ms", 601.52},
              {"p95_ttft_ms", 640.00}, {"p99_ttft_ms", 702.18}, {"mean_tpot_ms", 62.90},
              {"median_tpot_ms", 62.75}, {"p90_tpot_ms", 64.10}, {"p95_tpot_ms", 64.88},
              {"p99_tpot_ms", 65.93}, {"mean_itl_ms", 62.41}, {"median_itl_ms", 61.02},
              {"p90_itl_ms", 70.33}, {"p95_itl_ms", 75.12}, {"p99_itl_ms", 98.40},
              {"max_itl_ms", 250.71});
}

TEST(sglang_captured_intermediate_run)
{
    CHECK_LOG("sglang", "sglang_captured.log", {"successful_requests", 64}, {"duration_s", 5.19},
              {"total_input_tokens", 22980}, {"total_output_tokens", 2048},
              {"request_throughput", 12.34}, {"input_throughput", 4430.91},
              {"output_throughput", 394.89}, {"total_throughput", 4825.80},
              {"achieved_concurrency", 63.51}, {"mean_e2e_ms", 5146.47}, {"median_e2e_ms", 5152.07},
              {"p90_e2e_ms", 5168.12}, {"p99_e2e_ms", 5172.89}, {"mean_ttft_ms", 3789.22},
              {"median_ttft_ms", 4291.60}, {"p99_ttft_ms", 4743.64}, {"mean_tpot_ms", 43.78},
              {"median_tpot_ms", 27.53}, {"p99_tpot_ms", 113.93}, {"mean_itl_ms", 43.78},
              {"median_itl_ms", 12.60}, {"p95_itl_ms", 16.44}, {"p99_itl_ms", 1790.03},
              {"max_itl_ms", 3988.73});
}

TEST(sglang_mid2025_has_no_tpot)
{
    CHECK_LOG("sglang", "sglang_mid2025.log", {"successful_requests", 24}, {"duration_s", 40.12},
              {"total_input_tokens", 6144}, {"total_output_tokens", 3072},
              {"request_throughput", 0.60}, {"input_throughput", 153.14},
              {"output_throughput", 76.57}, {"total_throughput", 229.71},
              {"achieved_concurrency", 7.94}, {"mean_e2e_ms", 13270.51},
              {"median_e2e_ms", 13301.00}, {"mean_ttft_ms", 230.40}, {"median_ttft_ms", 221.90},
              {"p99_ttft_ms", 390.02}, {"mean_itl_ms", 102.68}, {"median_itl_ms", 101.75},
              {"p95_itl_ms", 118.20}, {"p99_itl_ms", 140.66}, {"max_itl_ms", 301.12});
}

TEST(sglang_old_total_throughput_label)
{
    CHECK_LOG("sglang", "sglang_old_total_throughput.log", {"successful_requests", 8},
              {"duration_s", 12.50}, {"total_input_tokens", 2048}, {"total_output_tokens", 1024},
              {"request_throughput", 0.64}, {"input_throughput", 163.84},
              {"output_throughput", 81.92}, {"total_throughput", 245.76}, {"mean_e2e_ms", 5120.00},
              {"median_e2e_ms", 5100.25}, {"mean_ttft_ms", 80.10}, {"median_ttft_ms", 78.00},
              {"p99_ttft_ms", 120.40}, {"mean_tpot_ms", 39.70}, {"median_tpot_ms", 39.55},
              {"p99_tpot_ms", 41.02}, {"mean_itl_ms", 39.68}, {"median_itl_ms", 39.50},
              {"p99_itl_ms", 44.80});
}

TEST(vllm_new_label_set)
{
    CHECK_LOG("vllm", "vllm_new.log", {"successful_requests", 47}, {"failed_requests", 1},
              {"duration_s", 31.37}, {"total_input_tokens", 12032}, {"total_output_tokens", 6016},
              {"request_throughput", 1.50}, {"output_throughput", 191.78},
              {"total_throughput", 575.33}, {"mean_ttft_ms", 301.45}, {"median_ttft_ms", 288.02},
              {"p99_ttft_ms", 512.77}, {"mean_tpot_ms", 80.12}, {"median_tpot_ms", 79.94},
              {"p99_tpot_ms", 85.30}, {"mean_itl_ms", 80.05}, {"median_itl_ms", 78.61},
              {"p99_itl_ms", 120.93}, {"mean_e2e_ms", 10476.30}, {"median_e2e_ms", 10450.00},
              {"p99_e2e_ms", 11020.55});
}

TEST(vllm_old_total_token_capital_t)
{
    CHECK_LOG("vllm", "vllm_old.log", {"successful_requests", 32}, {"duration_s", 9.88},
              {"total_input_tokens", 32768}, {"total_output_tokens", 4096},
              {"request_throughput", 3.24}, {"output_throughput", 414.57},
              {"total_throughput", 3731.17}, {"mean_ttft_ms", 1204.50}, {"median_ttft_ms", 1190.25},
              {"p90_ttft_ms", 1800.00}, {"p99_ttft_ms", 2203.81}, {"mean_tpot_ms", 66.30},
              {"median_tpot_ms", 65.12}, {"p90_tpot_ms", 70.01}, {"p99_tpot_ms", 74.44},
              {"mean_itl_ms", 66.21}, {"median_itl_ms", 64.90}, {"p90_itl_ms", 72.50},
              {"p99_itl_ms", 150.18});
}

TEST(inf_not_set_negative_zero_crlf)
{
    CHECK_LOG("sglang", "sglang_inf_notset.log", {"successful_requests", 1}, {"duration_s", 0},
              {"total_input_tokens", 8}, {"total_output_tokens", 1},
              {"request_throughput", INFINITY}, {"input_throughput", INFINITY},
              {"output_throughput", INFINITY}, {"total_throughput", INFINITY},
              {"mean_e2e_ms", 3.10}, {"median_e2e_ms", 3.10}, {"mean_ttft_ms", 3.05},
              {"median_ttft_ms", 3.05}, {"p99_ttft_ms", 3.05}, {"mean_tpot_ms", 0},
              {"median_tpot_ms", 0}, {"p99_tpot_ms", 0}, {"mean_itl_ms", 0}, {"median_itl_ms", 0},
              {"p95_itl_ms", 0}, {"p99_itl_ms", 0}, {"max_itl_ms", 0});
    /* "-0.00" must read as +0, so it prints as 0, not -0 */
    struct buf b;
    struct metric_set ms;
    struct err e;
    ext_set *set;
    err_init(&e);
    load(FIX "sglang_inf_notset.log", &b);
    mset_init(&ms);
    ext_new("sglang", NULL, 0, &set, &e);
    ext_run(set, b.data, b.len, &ms, NULL, &e);
    double v = 1;
    CHECK(mset_get(&ms, "mean_itl_ms", &v) && v == 0 && !signbit(v));
    CHECK(!mset_get(&ms, "achieved_concurrency", NULL)); /* "not set" */
    mset_release(&ms);
    ext_free(set);
    buf_release(&b);
}

TEST(builtin_client_block_with_failed_requests)
{
    CHECK_LOG("sglang", "builtin.log", {"successful_requests", 23}, {"failed_requests", 1},
              {"duration_s", 12.04}, {"total_input_tokens", 5888}, {"total_output_tokens", 736},
              {"request_throughput", 1.91}, {"input_throughput", 489.04},
              {"output_throughput", 61.13}, {"total_throughput", 550.17},
              {"achieved_concurrency", 7.80}, {"mean_e2e_ms", 4083.00}, {"median_e2e_ms", 4080.50},
              {"p90_e2e_ms", 4190.00}, {"p95_e2e_ms", 4201.70}, {"p99_e2e_ms", 4230.10},
              {"mean_ttft_ms", 150.00}, {"median_ttft_ms", 140.20}, {"p90_ttft_ms", 210.00},
              {"p95_ttft_ms", 230.50}, {"p99_ttft_ms", 260.90}, {"mean_tpot_ms", 126.87},
              {"median_tpot_ms", 126.50}, {"p90_tpot_ms", 130.00}, {"p95_tpot_ms", 131.20},
              {"p99_tpot_ms", 133.00}, {"mean_itl_ms", 126.80}, {"median_itl_ms", 126.00},
              {"p90_itl_ms", 131.00}, {"p95_itl_ms", 133.00}, {"p99_itl_ms", 140.00},
              {"max_itl_ms", 180.25});
}

/* Free-form lines outside the block never count, and the last block wins. */
TEST(only_the_last_result_block_counts)
{
    const char *text = "Successful requests: 1\n"
                       "Output token throughput (tok/s):         999.00\n"
                       "============ Serving Benchmark Result ============\n"
                       "Successful requests:                     5         \n"
                       "==================================================\n"
                       "Traffic request rate: inf\n"
                       "============ Serving Benchmark Result ============\n"
                       "Successful requests:                     48        \n"
                       "Output token throughput (tok/s):         28.05     \n"
                       "==================================================\n"
                       "Mean TTFT (ms):                          5.00\n";
    struct err e;
    ext_set *set;
    struct metric_set ms;
    double v;
    err_init(&e);
    mset_init(&ms);
    CHECK(ext_new("sglang", NULL, 0, &set, &e) == 0);
    CHECK(ext_run(set, text, strlen(text), &ms, NULL, &e) == 0);
    CHECK(mset_get(&ms, "successful_requests", &v) && v == 48);
    CHECK(mset_get(&ms, "output_throughput", &v) && v == 28.05);
    CHECK(!mset_get(&ms, "mean_ttft_ms", NULL));
    mset_release(&ms);
    ext_free(set);
}

/* W3-N14: a user pattern that finds a value on two lines fails the log
 * naming both lines (a preset's repeat does too), never keeps the last one
 * silently; matches that carry no value, or one value, are fine. */
TEST(user_pattern_matching_two_values_is_refused)
{
    struct ext_pattern user[] = {{"tput", "tput=(\\S+)"}};
    const char *two = "step 1 tput=10\nnoise\nstep 2 tput=9000\n";
    const char *twice_on_one_line = "tput=1 tput=2\n";
    const char *one = "tput=n/a\nstep 2 tput=12.5\n";
    struct err e;
    ext_set *set;
    struct metric_set ms;
    double v;
    err_init(&e);
    mset_init(&ms);
    CHECK(ext_new(NULL, user, 1, &set, &e) == 0);
    CHECK(ext_run(set, two, strlen(two), &ms, NULL, &e) != 0);
    CHECK_STR(e.msg,
              "pattern 'tput' matched a value twice: lines 1 and 3 (make it match one line)");
    CHECK_INT(e.code, RN_ERR_POINTS);
    err_init(&e);
    CHECK(ext_run(set, twice_on_one_line, strlen(twice_on_one_line), &ms, NULL, &e) != 0);
    CHECK(strstr(e.msg, "lines 1 and 1"));
    err_init(&e);
    CHECK_MSG(ext_run(set, one, strlen(one), &ms, NULL, &e) == 0, "%s", e.msg);
    CHECK(mset_get(&ms, "tput", &v) && v == 12.5);
    mset_release(&ms);
    ext_free(set);
}

TEST(user_patterns_override_and_add)
{
    struct ext_pattern user[] = {
        {"median_tpot_ms", "Median ITL \\(ms\\):\\s+([0-9.]+)"}, /* replaces the preset row */
        {"input_count", "^#Input tokens: (\\d+)"},               /* new name, outside the block */
    };
    struct err e;
    ext_set *set;
    struct buf b;
    struct metric_set ms;
    double v;
    err_init(&e);
    load(FIX "sglang_newest.log", &b);
    mset_init(&ms);
    CHECK_MSG(ext_new("sglang", user, 2, &set, &e) == 0, "%s", e.msg);
    CHECK(ext_run(set, b.data, b.len, &ms, NULL, &e) == 0);
    CHECK(mset_get(&ms, "median_tpot_ms", &v) && v == 61.02);
    CHECK(mset_get(&ms, "input_count", &v) && v == 12288);
    CHECK(mset_get(&ms, "p99_tpot_ms", &v) && v == 65.93);
    const char *re[4];
    CHECK_INT(ext_patterns(set, "median_tpot_ms", re, 4), 1);
    CHECK_STR(re[0], user[0].regex);
    CHECK_INT(ext_patterns(set, "total_throughput", re, 4), 2);
    mset_release(&ms);
    ext_free(set);
    buf_release(&b);
}

TEST(require_names_missing_metric_and_regexes_tried)
{
    struct err e;
    ext_set *set;
    struct buf b;
    struct metric_set ms;
    struct strvec req = STRVEC_INIT, miss = STRVEC_INIT;
    err_init(&e);
    load(FIX "sglang_mid2025.log", &b);
    mset_init(&ms);
    ext_new("sglang", NULL, 0, &set, &e);
    ext_run(set, b.data, b.len, &ms, NULL, &e);
    strvec_push(&req, "output_throughput");
    strvec_push(&req, "median_tpot_ms");
    strvec_push(&req, "goodput");
    CHECK(ext_require(set, &ms, NULL, &req, &e) == -1);
    CHECK_INT(e.code, RN_ERR_POINTS);
    CHECK_MSG(strstr(e.msg, "missing required metric 'median_tpot_ms' (tried /^Median TPOT"), "%s",
              e.msg);
    CHECK_MSG(strstr(e.msg, "missing required metric 'goodput' (no pattern defines it"), "%s",
              e.msg);
    CHECK(!strstr(e.msg, "'output_throughput'"));
    ext_missing(&ms, &req, &miss);
    CHECK_INT(miss.n, 2);
    CHECK_STR(miss.v[0], "median_tpot_ms");
    err_init(&e);
    strvec_release(&req);
    strvec_push(&req, "output_throughput");
    CHECK(ext_require(set, &ms, NULL, &req, &e) == 0);
    strvec_release(&req);
    strvec_release(&miss);
    mset_release(&ms);
    ext_free(set);
    buf_release(&b);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* A catastrophic regex fails with a message naming it, on one long line
 * (match limit) and on thousands of short ones (the per-log budget). */
TEST(runaway_regex_fails_fast_naming_the_pattern)
{
    struct ext_pattern user[] = {{"evil", "^(a+)+$"}};
    struct err e;
    ext_set *set;
    struct metric_set ms;
    err_init(&e);
    mset_init(&ms);
    CHECK_MSG(ext_new(NULL, user, 1, &set, &e) == 0, "%s", e.msg);
    const char *one = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaab\n";
    double t0 = now_s();
    CHECK(ext_run(set, one, strlen(one), &ms, NULL, &e) == -1);
    CHECK_MSG(strstr(e.msg, "pattern 'evil' (^(a+)+$): match limit exceeded"), "%s", e.msg);
    CHECK_MSG(now_s() - t0 < 2.0, "took %.2f s", now_s() - t0);

    struct buf many;
    buf_init(&many, 1 << 20);
    for (int i = 0; i < 4000; i++)
        buf_puts(&many, "aaaaaaaaaaaaaaaaaX\n");
    err_init(&e);
    t0 = now_s();
    CHECK(ext_run(set, many.data, many.len, &ms, NULL, &e) == -1);
    CHECK_MSG(strstr(e.msg, "pattern 'evil'") && strstr(e.msg, "exceeded"), "%s", e.msg);
    CHECK_MSG(now_s() - t0 < 5.0, "took %.2f s", now_s() - t0);
    buf_release(&many);
    mset_release(&ms);
    ext_free(set);
}

TEST(bad_patterns_and_presets_are_named)
{
    struct err e;
    ext_set *set = (ext_set *)1;
    struct ext_pattern bad[] = {{"p99_itl_ms", "P99 ITL \\(ms\\):\\s+([0-9.]+"}};
    err_init(&e);
    CHECK(ext_new("sglang", bad, 1, &set, &e) == -1 && set == NULL);
    CHECK_MSG(strstr(e.msg, "pattern 'p99_itl_ms': bad regex: missing closing parenthesis at "
                            "offset 26"),
              "%s", e.msg);
    struct ext_pattern nogroup[] = {{"x", "Mean TTFT"}};
    err_init(&e);
    CHECK(ext_new(NULL, nogroup, 1, &set, &e) == -1);
    CHECK_MSG(strstr(e.msg, "exactly one capture group, it has 0"), "%s", e.msg);
    err_init(&e);
    CHECK(ext_new("sglan", NULL, 0, &set, &e) == -1);
    CHECK_STR(e.msg,
              "unknown preset 'sglan' (did you mean 'sglang'?) (known: sglang, vllm, aiperf, "
              "aiperf-json, aiperf-csv, guidellm-json, vllm-json, sglang-jsonl)");
    CHECK_INT(e.code, RN_ERR_USAGE);
    struct ext_pattern badname[] = {{"a b", "(x)"}};
    err_init(&e);
    CHECK(ext_new(NULL, badname, 1, &set, &e) == -1);
    CHECK(strstr(e.msg, "pattern name 'a b' is not valid") != NULL);
}

TEST(value_parsing)
{
    double v;
    CHECK(ext_parse_value(" 12.50  ", 8, &v) == 1 && v == 12.5);
    CHECK(ext_parse_value("inf", 3, &v) == 1 && isinf(v) && v > 0);
    CHECK(ext_parse_value("-inf", 4, &v) == 1 && isinf(v) && v < 0);
    CHECK(ext_parse_value("Infinity", 8, &v) == 1 && isinf(v));
    CHECK(ext_parse_value("-0.00", 5, &v) == 1 && v == 0 && !signbit(v));
    CHECK(ext_parse_value("10,944.03", 9, &v) == 1 && v == 10944.03);
    CHECK(ext_parse_value("not set", 7, &v) == 0);
    CHECK(ext_parse_value("N/A", 3, &v) == 0);
    CHECK(ext_parse_value("None", 4, &v) == 0);
    CHECK(ext_parse_value("nan", 3, &v) == 0);
    CHECK(ext_parse_value("   ", 3, &v) == 0);
    CHECK(ext_parse_value("sglang-oai-chat", 15, &v) == -1);
    CHECK(ext_parse_value("12 ms", 5, &v) == -1);
    CHECK(ext_parse_value("1,2", 3, &v) == 1 && v == 12); /* digits around a comma: separator */
    CHECK(ext_parse_value(",5", 2, &v) == -1);
}

TEST(shape_reads_concurrency_and_prompts)
{
    static const struct {
        const char *file;
        long c, p;
    } cases[] = {
        {"sglang_newest.log", 16, 48},
        {"sglang_captured.log", -1, 64},
        {"vllm_new.log", 16, 48},
        {"vllm_old.log", -1, 32},
        {"builtin.log", 8, 24},
        {"sglang_inf_notset.log", -1, 1},
        {"scaling-a/sweep_16:48.log", -1, 48},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct buf b;
        struct err e;
        struct ext_shape s;
        char *path = xasprintf(FIX "%s", cases[i].file);
        err_init(&e);
        load(path, &b);
        CHECK(ext_shape(b.data, b.len, &s, &e) == 0);
        CHECK_MSG(s.concurrency == cases[i].c && s.prompts == cases[i].p, "%s: c=%ld p=%ld",
                  cases[i].file, s.concurrency, s.prompts);
        buf_release(&b);
        free(path);
    }
    /* vLLM's free-form line alone (no block) still names the concurrency */
    const char *free_form = "Maximum request concurrency: 4\nSuccessful requests: 3\n";
    struct ext_shape s;
    struct err e;
    err_init(&e);
    CHECK(ext_shape(free_form, strlen(free_form), &s, &e) == 0);
    CHECK_INT(s.concurrency, 4);
    CHECK_INT(s.prompts, 3);
}

TEST(tags_in_file_names)
{
    static const struct {
        const char *path;
        long c, p;
    } cases[] = {
        {"logs/sweep_c16-n48.log", 16, 48},
        {"measure_16_48.log", 16, 48},
        {"a/b/sweep_16:48.log", 16, 48},
        {"run_16x48.log", 16, 48},
        {"sweep_c8.log", 8, -1},
        {"c1_n8", 1, 8},
        {"notag.log", -1, -1},
        {"v1.5_16-48.log", 16, 48},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        long c, p;
        struct err e;
        err_init(&e);
        CHECK(ext_tag(NULL, cases[i].path, &c, &p, &e) == 0);
        CHECK_MSG(c == cases[i].c && p == cases[i].p, "%s: c=%ld p=%ld", cases[i].path, c, p);
    }
    long c, p;
    struct err e;
    err_init(&e);
    CHECK(ext_tag("conc(?<c>\\d+)-np(?<p>\\d+)", "x_conc4-np12.log", &c, &p, &e) == 0);
    CHECK(c == 4 && p == 12);
    CHECK(ext_tag("_(\\d+)$", "bench_32.log", &c, &p, &e) == 0);
    CHECK(c == 32 && p == -1);
    CHECK(ext_tag("(\\d+", "x.log", &c, &p, &e) == -1);
    CHECK_MSG(strstr(e.msg, "--tag-regex: bad regex: missing closing parenthesis"), "%s", e.msg);
    err_init(&e);
    CHECK(ext_tag("\\d+", "x1.log", &c, &p, &e) == -1);
    CHECK_STR(e.msg, "--tag-regex '\\d+' has no capture group");
}

TEST(preset_names_listed)
{
    const char *const *names = ext_preset_names();
    CHECK_STR(names[0], "sglang");
    CHECK_STR(names[1], "vllm");
    CHECK_STR(names[2], "aiperf");
    CHECK_STR(names[7], "sglang-jsonl");
    CHECK(names[8] == NULL);
}

/* ---- logs that lie (issue 12) ---- */

#define OPEN  "============ Serving Benchmark Result ============\n"
#define CLOSE "==================================================\n"

/* ext_run of text with preset and user patterns; info and ms are the caller's. */
static int run_text(const char *preset, const struct ext_pattern *user, size_t n_user,
                    const char *text, size_t len, struct metric_set *ms, struct ext_info *info,
                    struct err *e)
{
    ext_set *set = NULL;
    err_init(e);
    CHECK_MSG(ext_new(preset, user, n_user, &set, e) == 0, "%s", e->msg);
    int rc = ext_run(set, text, len, ms, info, e);
    ext_free(set);
    return rc;
}

/* One block gives each metric once: a second line for it (another value,
 * the same line again, or another spelling) is an error naming both lines;
 * a warm-up block's trouble does not matter once a later block is used. */
TEST(metric_twice_in_a_block_is_an_error_naming_both_lines)
{
    static const struct {
        const char *text, *want;
    } cases[] = {
        {"header\n" OPEN "Successful requests: 48\nMedian TTFT (ms): 10.00\n"
         "Mean TTFT (ms): 11.00\nMedian TTFT (ms): 99.00\n" CLOSE,
         "'median_ttft_ms' is printed twice in the result block opened at line 2: lines 4 and 6"},
        {OPEN "Median TTFT (ms): 10.00\nMedian TTFT (ms): 10.00\n" CLOSE,
         "'median_ttft_ms' is printed twice in the result block opened at line 1: lines 2 and 3"},
        {OPEN "Total token throughput (tok/s): 5\nTotal throughput (tok/s): 6\n" CLOSE,
         "'total_throughput' is printed twice in the result block opened at line 1: lines 2 and 3"},
        {"Successful requests: 1\nx\nSuccessful requests: 2\n",
         "'successful_requests' is printed twice in a log without a result block: lines 1 and 3"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct metric_set ms;
        struct err e;
        mset_init(&ms);
        CHECK_MSG(
            run_text("sglang", NULL, 0, cases[i].text, strlen(cases[i].text), &ms, NULL, &e) == -1,
            "case %zu extracted", i);
        CHECK_INT(e.code, RN_ERR_POINTS);
        CHECK_MSG(strstr(e.msg, cases[i].want), "case %zu: %s", i, e.msg);
        CHECK_INT(ms.n, 0); /* nothing half-extracted */
        mset_release(&ms);
    }
    const char *warmup_dup =
        OPEN "Median TTFT (ms): 1\nMedian TTFT (ms): 2\n" CLOSE OPEN "Median TTFT (ms): 3\n" CLOSE;
    struct metric_set ms;
    struct err e;
    double v;
    mset_init(&ms);
    CHECK_MSG(run_text("sglang", NULL, 0, warmup_dup, strlen(warmup_dup), &ms, NULL, &e) == 0, "%s",
              e.msg);
    CHECK(mset_get(&ms, "median_ttft_ms", &v) && v == 3);
    mset_release(&ms);
}

/* Warm-up then the real run: the last block is used, and the notes say so. */
TEST(several_blocks_use_the_last_and_say_so)
{
    const char *text =
        "warm-up\n" OPEN "Successful requests: 1\nMedian TPOT (ms): 9.00\n" CLOSE OPEN
        "Successful requests: 2\n" CLOSE "real run\n" OPEN
        "Successful requests: 48\nMedian TPOT (ms): 20.50\n" CLOSE;
    struct metric_set ms;
    struct ext_info info;
    struct err e;
    struct buf notes;
    double v;
    mset_init(&ms);
    ext_info_init(&info);
    CHECK_MSG(run_text("sglang", NULL, 0, text, strlen(text), &ms, &info, &e) == 0, "%s", e.msg);
    CHECK(mset_get(&ms, "successful_requests", &v) && v == 48);
    CHECK(mset_get(&ms, "median_tpot_ms", &v) && v == 20.5);
    CHECK_INT(info.blocks, 3);
    CHECK_INT(info.block_line, 10);
    buf_init(&notes, 1024);
    ext_info_notes(&info, &notes);
    CHECK_STR(notes.data, "3 result blocks, last used (line 10)");
    buf_release(&notes);
    ext_info_release(&info);
    mset_release(&ms);

    /* one block says nothing */
    mset_init(&ms);
    ext_info_init(&info);
    buf_init(&notes, 1024);
    const char *one = OPEN "Successful requests: 2\n" CLOSE;
    CHECK(run_text("sglang", NULL, 0, one, strlen(one), &ms, &info, &e) == 0);
    ext_info_notes(&info, &notes);
    CHECK_INT(info.blocks, 1);
    CHECK_INT(notes.len, 0);
    buf_release(&notes);
    ext_info_release(&info);
    mset_release(&ms);
}

/* A log that ends inside a result block was cut short: an error, even when
 * an earlier block was complete (its numbers are not this run's). */
TEST(block_without_an_end_is_an_error)
{
    static const char *const texts[] = {
        "x\n" OPEN "Successful requests: 48\nMedian TPOT (ms): 20.5",
        OPEN "Successful requests: 1\n" CLOSE "x\n" OPEN "Successful requests: 48\n",
    };
    static const long open_line[] = {2, 5};
    for (size_t i = 0; i < 2; i++) {
        struct metric_set ms;
        struct err e;
        char want[128];
        mset_init(&ms);
        CHECK(run_text("sglang", NULL, 0, texts[i], strlen(texts[i]), &ms, NULL, &e) == -1);
        snprintf(want, sizeof(want), "the result block opened at line %ld is not closed",
                 open_line[i]);
        CHECK_MSG(strstr(e.msg, want) && e.code == RN_ERR_POINTS, "%s", e.msg);
        CHECK_INT(ms.n, 0);
        mset_release(&ms);
    }
    /* a block opened again before it closed: only the later one counts */
    const char *reopened = OPEN "Successful requests: 1\n" OPEN "Successful requests: 48\n" CLOSE;
    struct metric_set ms;
    struct err e;
    double v;
    mset_init(&ms);
    CHECK_MSG(run_text("sglang", NULL, 0, reopened, strlen(reopened), &ms, NULL, &e) == 0, "%s",
              e.msg);
    CHECK(mset_get(&ms, "successful_requests", &v) && v == 48);
    mset_release(&ms);
}

/* A progress bar redraws with '\r': the metric after it on the same "line"
 * is a line of its own. CRLF ends a line once; a last line without '\n'
 * counts; line numbers count '\n' only. */
TEST(carriage_returns_end_lines)
{
    const char *text =
        OPEN " 10%|#   | 5/48\r 100%|####| 48/48\rSuccessful requests: 48\r\n"
             "Median TPOT (ms): 20.50\r\r\n"
             "\rMean TPOT (ms): 21.00\n" CLOSE "\r\n" OPEN "progress\rSuccessful requests: 7\r\n"
             "bar\rMedian TPOT (ms): 1.00\rMedian TPOT (ms): 2.00\r\n"
             "==================================================";
    struct metric_set ms;
    struct err e;
    double v;
    /* the first block alone */
    size_t first = (size_t)(strstr(text, CLOSE) - text) + strlen(CLOSE);
    mset_init(&ms);
    CHECK_MSG(run_text("sglang", NULL, 0, text, first, &ms, NULL, &e) == 0, "%s", e.msg);
    CHECK(mset_get(&ms, "successful_requests", &v) && v == 48);
    CHECK(mset_get(&ms, "median_tpot_ms", &v) && v == 20.5);
    CHECK(mset_get(&ms, "mean_tpot_ms", &v) && v == 21);
    mset_release(&ms);
    /* the whole log: the second block repeats Median TPOT on line 9 */
    mset_init(&ms);
    CHECK(run_text("sglang", NULL, 0, text, strlen(text), &ms, NULL, &e) == -1);
    CHECK_MSG(strstr(e.msg, "'median_tpot_ms' is printed twice in the result block opened at "
                            "line 7: lines 9 and 9"),
              "%s", e.msg);
    mset_release(&ms);
    /* the closing rule without a final '\n' closes the block */
    const char *noeol =
        OPEN "Successful requests: 3\n==================================================";
    mset_init(&ms);
    CHECK_MSG(run_text("sglang", NULL, 0, noeol, strlen(noeol), &ms, NULL, &e) == 0, "%s", e.msg);
    CHECK(mset_get(&ms, "successful_requests", &v) && v == 3);
    mset_release(&ms);
}

/* A pattern that matches text which is not a number says what it matched,
 * instead of calling the metric missing; so does a preset row with a unit
 * after its value, and a value with a NUL byte in it. */
TEST(non_number_match_is_quoted)
{
    struct ext_pattern user[] = {{"goodput", "^Goodput: (.*)$"}};
    const char *text = OPEN "Successful requests: 48\nMedian TPOT (ms): 12 ms\n"
                            "P99 TPOT (ms): 0x1p3\nMean TPOT (ms): 1e999\n"
                            "Median TTFT (ms): N/A\n" CLOSE
                            "Goodput: abc\x01 and a very long tail that goes on and on\n";
    struct metric_set ms;
    struct ext_info info;
    struct err e;
    mset_init(&ms);
    ext_info_init(&info);
    CHECK_MSG(run_text("sglang", user, 1, text, strlen(text), &ms, &info, &e) == 0, "%s", e.msg);
    CHECK(!mset_get(&ms, "median_tpot_ms", NULL));
    CHECK(!mset_get(&ms, "p99_tpot_ms", NULL)); /* hex is not read as 8 */
    CHECK(!mset_get(&ms, "mean_tpot_ms", NULL));
    CHECK(!mset_get(&ms, "goodput", NULL));
    ext_set *set;
    ext_new("sglang", user, 1, &set, &e);
    struct strvec req = STRVEC_INIT;
    strvec_push(&req, "goodput");
    strvec_push(&req, "median_tpot_ms");
    strvec_push(&req, "p99_tpot_ms");
    strvec_push(&req, "mean_tpot_ms");
    strvec_push(&req, "median_ttft_ms");
    err_init(&e);
    CHECK(ext_require(set, &ms, &info, &req, &e) == -1);
    CHECK_MSG(strstr(e.msg, "missing required metric 'goodput': matched 'abc? and a very long "
                            "tail that goes on a...', not a number (line 8)"),
              "%s", e.msg);
    CHECK_MSG(strstr(e.msg, "missing required metric 'median_tpot_ms': matched '12 ms', not a "
                            "number (line 3)"),
              "%s", e.msg);
    CHECK_MSG(strstr(e.msg, "'p99_tpot_ms': matched '0x1p3', not a number (line 4)"), "%s", e.msg);
    CHECK_MSG(strstr(e.msg, "'mean_tpot_ms': matched '1e999', out of range (line 5)"), "%s", e.msg);
    CHECK_MSG(strstr(e.msg, "'median_ttft_ms': matched 'N/A', not measured (line 6)"), "%s", e.msg);
    struct buf notes;
    buf_init(&notes, 4096);
    ext_info_notes(&info, &notes);
    CHECK_MSG(strstr(notes.data, "'median_tpot_ms' matched '12 ms', not a number (line 3)") &&
                  !strstr(notes.data, "N/A"),
              "%s", notes.data);
    buf_release(&notes);
    strvec_release(&req);
    ext_free(set);
    ext_info_release(&info);
    mset_release(&ms);

    const char nul[] = OPEN "Median TPOT (ms): 1\0"
                            "2\nMean TPOT (ms): 3\n" CLOSE;
    double v;
    mset_init(&ms);
    CHECK(run_text("sglang", NULL, 0, nul, sizeof(nul) - 1, &ms, NULL, &e) == 0);
    CHECK(!mset_get(&ms, "median_tpot_ms", NULL)); /* "1\0" "2" is not 1 */
    CHECK(mset_get(&ms, "mean_tpot_ms", &v) && v == 3);
    mset_release(&ms);
}

TEST(values_are_decimal_only)
{
    double v = 0;
    CHECK_INT(ext_parse_value("0x1p3", 5, &v), -1);
    CHECK_INT(ext_parse_value("0X10", 4, &v), -1);
    CHECK_INT(ext_parse_value("1e999", 5, &v), -2);
    CHECK_INT(ext_parse_value("12abc", 5, &v), -1);
    CHECK_INT(ext_parse_value("1\0002", 3, &v), -1);
    CHECK(ext_parse_value("  12", 4, &v) == 1 && v == 12); /* a captured value's spaces */
    CHECK(ext_parse_value("1.5e3", 5, &v) == 1 && v == 1500);
}

/* A file is read in chunks: lines and "\r\n" split across chunk ends read
 * as in memory; a line over EXT_LINE_MAX_BYTES is skipped and noted. */
TEST(files_stream_in_chunks)
{
    struct buf b;
    buf_init(&b, 1 << 20);
    for (size_t k = 65536 - 30 - strlen(OPEN) - 1; k--;)
        buf_putc(&b, k % 61 ? 'x' : '\n');
    buf_puts(&b, "\n" OPEN);
    buf_puts(&b, "Median TPOT (ms):                    20.50\r\n"); /* crosses 64 KiB */
    for (size_t k = 0; k < EXT_LINE_MAX_BYTES + 10; k++)
        buf_putc(&b, 'y');
    buf_puts(&b, "\r\nSuccessful requests: 48\n" CLOSE);
    char *path = test_tmp_path("chunks.log");
    struct err e;
    err_init(&e);
    CHECK(file_write_atomic(path, b.data, b.len, &e, 3) == 0);
    ext_set *set;
    ext_new("sglang", NULL, 0, &set, &e);
    struct metric_set a, m;
    struct ext_info ia, im;
    mset_init(&a);
    mset_init(&m);
    ext_info_init(&ia);
    ext_info_init(&im);
    CHECK_MSG(ext_run_file(set, path, &a, &ia, &e) == 0, "%s", e.msg);
    CHECK_MSG(ext_run(set, b.data, b.len, &m, &im, &e) == 0, "%s", e.msg);
    double v;
    CHECK(mset_get(&a, "median_tpot_ms", &v) && v == 20.5);
    CHECK(mset_get(&a, "successful_requests", &v) && v == 48);
    CHECK_INT(a.n, m.n);
    CHECK_INT(ia.long_lines, 1);
    CHECK_INT(im.long_lines, 1);
    CHECK_INT(ia.first_long, im.first_long);
    struct buf notes;
    buf_init(&notes, 1024);
    ext_info_notes(&ia, &notes);
    CHECK_MSG(strstr(notes.data, "1 line(s) over 65536 bytes not read"), "%s", notes.data);
    buf_release(&notes);
    struct ext_shape sh;
    CHECK(ext_shape_file(path, &sh, &e) == 0 && sh.prompts == 48);
    err_init(&e);
    CHECK(ext_run_file(set, "/nonexistent/x.log", &a, NULL, &e) == -1 && e.code == RN_ERR_ENV);
    CHECK_MSG(strstr(e.msg, "/nonexistent/x.log: No such file"), "%s", e.msg);
    ext_info_release(&ia);
    ext_info_release(&im);
    mset_release(&a);
    mset_release(&m);
    ext_free(set);
    free(path);
    buf_release(&b);
}

/* The fixtures of issue 12: a warm-up block before the real one, and a
 * progress bar redrawn with '\r' in front of the rule and of rows, read
 * exactly like the plain log they come from (scaling-a/sweep_c1-n8.log). */
#define C1N8                                                                                       \
    {"successful_requests", 8}, {"duration_s", 72.90}, {"total_input_tokens", 2048},               \
        {"total_output_tokens", 1024}, {"request_throughput", 0.11}, {"input_throughput", 28.09},  \
        {"output_throughput", 14.05}, {"total_throughput", 42.14}, {"achieved_concurrency", 0.99}, \
        {"mean_e2e_ms", 9112.00}, {"median_e2e_ms", 9112.00}, {"p99_e2e_ms", 9203.12},             \
        {"mean_ttft_ms", 99.75}, {"median_ttft_ms", 95.00}, {"p99_ttft_ms", 152.00},               \
        {"mean_tpot_ms", 71.14}, {"median_tpot_ms", 71.00}, {"p99_tpot_ms", 73.13},                \
        {"mean_itl_ms", 71.07}, {"median_itl_ms", 71.00}, {"p95_itl_ms", 72.42},                   \
        {"p99_itl_ms", 74.55},                                                                     \
    {                                                                                              \
        "max_itl_ms", 99.40                                                                        \
    }

TEST(fixture_warmup_blocks_and_progress_bar)
{
    CHECK_LOG("sglang", "scaling-a/sweep_c1-n8.log", C1N8);
    CHECK_LOG("sglang", "sglang_warmup_blocks.log", C1N8);
    CHECK_LOG("sglang", "sglang_progress_cr.log", C1N8);
}

/* The fixtures that must not yield numbers: a row twice, a block cut short,
 * values that are not decimal numbers. */
TEST(fixture_logs_that_lie)
{
    static const struct {
        const char *file, *want; /* want: the error, or (for ok) a note */
        int rc;
    } cases[] = {
        {"sglang_duplicate_row.log",
         "'median_tpot_ms' is printed twice in the result block opened at line 5: lines 29 and 31",
         -1},
        {"sglang_cut_short.log", "the result block opened at line 14 is not closed", -1},
        {"sglang_odd_numbers.log", "'median_tpot_ms' matched '0x1p3', not a number (line 29)", 0},
    };
    ext_set *set;
    struct err e;
    err_init(&e);
    ext_new("sglang", NULL, 0, &set, &e);
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char *path = xasprintf(FIX "%s", cases[i].file);
        struct metric_set ms;
        struct ext_info info;
        struct buf notes;
        mset_init(&ms);
        ext_info_init(&info);
        buf_init(&notes, 4096);
        err_init(&e);
        CHECK_INT(ext_run_file(set, path, &ms, &info, &e), cases[i].rc);
        ext_info_notes(&info, &notes);
        const char *got = cases[i].rc ? e.msg : notes.data ? notes.data : "";
        CHECK_MSG(strstr(got, cases[i].want), "%s: %s", cases[i].file, got);
        if (cases[i].rc == 0) {
            double v;
            CHECK(mset_get(&ms, "successful_requests", &v) && v == 8);
            CHECK(!mset_get(&ms, "median_tpot_ms", NULL) && !mset_get(&ms, "mean_tpot_ms", NULL) &&
                  !mset_get(&ms, "p99_tpot_ms", NULL) && !mset_get(&ms, "median_itl_ms", NULL));
            CHECK_MSG(strstr(got, "'median_itl_ms' matched '7? 1', not a number") &&
                          strstr(got, "'mean_tpot_ms' matched '71.14 ms', not a number") &&
                          strstr(got, "'p99_tpot_ms' matched '1e999', out of range"),
                      "%s", got);
        }
        buf_release(&notes);
        ext_info_release(&info);
        mset_release(&ms);
        free(path);
    }
    ext_free(set);
}

TEST_MAIN()
