/*
 * Unit tests for runner/analysis/extract.c: every fixture log under
 * tests/fixtures/logs/ (written from the exact blocks in
 * docs/benchmarks.md §2) extracts to exactly the canonical values
 * below; user patterns, limits, require messages and value parsing.
 */
#include "test.h"

#include <math.h>
#include <stdlib.h>
#include <time.h>

#include "buf.h"
#include "sweep.h"
#include "analysis/extract.h"
#include "fileio.h"
#include "xalloc.h"

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
    CHECK_STR(e.msg, "unknown preset 'sglan' (did you mean 'sglang'?) (known: sglang, vllm)");
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
    CHECK(names[2] == NULL);
}

TEST_MAIN()
