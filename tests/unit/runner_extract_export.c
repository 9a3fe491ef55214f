/*
 * Unit tests for the export presets (runner/client/export.c) and the
 * presets of tools captured for real (tests/fixtures/logs/README.md): each
 * captured fixture extracts to exactly the values the tool wrote (read here
 * with Python's json module when the fixture was made), nothing more; JSONL
 * runs, Infinity/NaN, bad files, require messages, user patterns, the path
 * of an export beside a log, and the glossary against every preset's rows.
 */
#include <fcntl.h>
#include <math.h>
#include <stdlib.h>
#include <unistd.h>

#include "buf.h"
#include "fileio.h"
#include "sweep.h"
#include "test.h"
#include "testtmp.h"
#include "xalloc.h"

#include "analysis/glossary.h"
#include "client/export.h"
#include "client/extract.h"

#define FIX "tests/fixtures/logs/"

struct want {
    const char *name;
    double value;
};

/* Extract the file at path with preset (through ext_run_file, as a run
 * does) and check that the result is exactly want[]. */
static void check_file(const char *preset, const char *path, const struct want *want, size_t n)
{
    struct err e;
    ext_set *set = NULL;
    struct metric_set ms;
    err_init(&e);
    mset_init(&ms);
    CHECK_MSG(ext_new(preset, NULL, 0, &set, &e) == 0, "%s", e.msg);
    CHECK_MSG(ext_run_file(set, path, &ms, NULL, &e) == 0, "%s: %s", path, e.msg);
    for (size_t i = 0; i < n; i++) {
        double v = NAN;
        CHECK_MSG(mset_get(&ms, want[i].name, &v), "%s: '%s' missing", path, want[i].name);
        CHECK_MSG(v == want[i].value, "%s: %s = %.17g, want %.17g", path, want[i].name, v,
                  want[i].value);
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
}

#define CHECK_FILE(preset, file, ...)                                                              \
    do {                                                                                           \
        static const struct want w_[] = {__VA_ARGS__};                                             \
        check_file(preset, FIX file, w_, sizeof(w_) / sizeof(w_[0]));                              \
    } while (0)

/* ---- captured fixtures, every value ---- */

TEST(aiperf_json_export_captured)
{
    CHECK_FILE("aiperf-json", "exports/aiperf_profile_export_aiperf.json",
               {"successful_requests", 16.0}, {"duration_s", 1.8099727360000002},
               {"total_input_tokens", 512.0}, {"total_output_tokens", 256.0},
               {"request_throughput", 8.815182785112507}, {"input_throughput", 282.0858491236002},
               {"output_throughput", 141.0429245618001}, {"total_throughput", 423.1287736854003},
               {"achieved_concurrency", 3.8795305979189685}, {"mean_ttft_ms", 12.0978575},
               {"median_ttft_ms", 11.017524}, {"p90_ttft_ms", 13.7036605},
               {"p95_ttft_ms", 15.782907}, {"p99_ttft_ms", 20.186762999999996},
               {"mean_tpot_ms", 28.5111389}, {"median_tpot_ms", 28.235305366666665},
               {"p90_tpot_ms", 29.43402053333333}, {"p95_tpot_ms", 29.49536478333333},
               {"p99_tpot_ms", 29.546183943333332}, {"mean_itl_ms", 28.5111389},
               {"median_itl_ms", 28.023594499999998}, {"p90_itl_ms", 33.6627479},
               {"p95_itl_ms", 38.33276034999998}, {"p99_itl_ms", 50.07718697999999},
               {"max_itl_ms", 52.161724}, {"mean_e2e_ms", 439.76494099999996},
               {"median_e2e_ms", 435.95232599999997}, {"p90_e2e_ms", 452.2776315},
               {"p95_e2e_ms", 453.45078075}, {"p99_e2e_ms", 454.20638414999996});
}

TEST(aiperf_csv_export_captured)
{
    /* the same run as the JSON, at the CSV's two decimals */
    CHECK_FILE("aiperf-csv", "exports/aiperf_profile_export_aiperf.csv",
               {"successful_requests", 16}, {"duration_s", 1.81}, {"total_input_tokens", 512},
               {"total_output_tokens", 256}, {"request_throughput", 8.82},
               {"input_throughput", 282.09}, {"output_throughput", 141.04},
               {"total_throughput", 423.13}, {"achieved_concurrency", 3.88},
               {"mean_ttft_ms", 12.10}, {"median_ttft_ms", 11.02}, {"p90_ttft_ms", 13.70},
               {"p95_ttft_ms", 15.78}, {"p99_ttft_ms", 20.19}, {"mean_tpot_ms", 28.51},
               {"median_tpot_ms", 28.24}, {"p90_tpot_ms", 29.43}, {"p95_tpot_ms", 29.50},
               {"p99_tpot_ms", 29.55}, {"mean_itl_ms", 28.51}, {"median_itl_ms", 28.02},
               {"p90_itl_ms", 33.66}, {"p95_itl_ms", 38.33}, {"p99_itl_ms", 50.08},
               {"max_itl_ms", 52.16}, {"mean_e2e_ms", 439.76}, {"median_e2e_ms", 435.95},
               {"p90_e2e_ms", 452.28}, {"p95_e2e_ms", 453.45}, {"p99_e2e_ms", 454.21});
}

TEST(aiperf_console_captured)
{
    /* rich's table through a pipe: one-line labels only, columns avg min max
     * p99 p90 p50 std; AIPerf's Inter Token Latency is our TPOT */
    CHECK_FILE("aiperf", "aiperf_captured.log", {"successful_requests", 16}, {"duration_s", 1.81},
               {"request_throughput", 8.82}, {"input_throughput", 282.09},
               {"output_throughput", 141.04}, {"mean_ttft_ms", 12.10}, {"median_ttft_ms", 11.02},
               {"p90_ttft_ms", 13.70}, {"p99_ttft_ms", 20.19}, {"mean_tpot_ms", 28.51},
               {"median_tpot_ms", 28.24}, {"p90_tpot_ms", 29.43}, {"p99_tpot_ms", 29.55},
               {"mean_e2e_ms", 439.76}, {"median_e2e_ms", 435.95}, {"p90_e2e_ms", 452.28},
               {"p99_e2e_ms", 454.21});
}

TEST(guidellm_json_report_captured)
{
    CHECK_FILE("guidellm-json", "exports/guidellm_benchmarks.json", {"successful_requests", 16.0},
               {"failed_requests", 0.0}, {"duration_s", 1.7736098766326904},
               {"total_input_tokens", 16.0}, {"total_output_tokens", 256.0},
               {"request_throughput", 9.021149583569642}, {"input_throughput", 9.021149583569642},
               {"output_throughput", 144.33839333711427}, {"total_throughput", 153.35954292068388},
               {"achieved_concurrency", 3.929917345728808}, {"mean_ttft_ms", 12.911513447761536},
               {"median_ttft_ms", 11.193275451660156}, {"p90_ttft_ms", 17.47584342956543},
               {"p95_ttft_ms", 17.96889305114746}, {"p99_ttft_ms", 17.96889305114746},
               {"mean_tpot_ms", 28.13560664653778}, {"median_tpot_ms", 28.118085861206055},
               {"p90_tpot_ms", 28.52487564086914}, {"p95_tpot_ms", 29.10917599995931},
               {"p99_tpot_ms", 29.10917599995931}, {"mean_e2e_ms", 435.6337636709213},
               {"median_e2e_ms", 434.4668388366699}, {"p90_e2e_ms", 440.80185890197754},
               {"p95_e2e_ms", 451.8468379974365}, {"p99_e2e_ms", 451.8468379974365});
}

TEST(vllm_save_result_captured)
{
    CHECK_FILE("vllm-json", "exports/vllm_save_result.json", {"successful_requests", 16.0},
               {"failed_requests", 0.0}, {"duration_s", 1.7734912169999006},
               {"total_input_tokens", 512.0}, {"total_output_tokens", 256.0},
               {"request_throughput", 9.021753164961344}, {"output_throughput", 144.3480506393815},
               {"total_throughput", 433.0441519181445}, {"mean_ttft_ms", 13.480931187473288},
               {"median_ttft_ms", 12.202820500533562}, {"p90_ttft_ms", 17.56158250009321},
               {"p95_ttft_ms", 17.73878199946921}, {"p99_ttft_ms", 17.745391599419236},
               {"mean_tpot_ms", 28.526592929169208}, {"median_tpot_ms", 28.54705939998894},
               {"p90_tpot_ms", 28.987537199979368}, {"p95_tpot_ms", 28.99924530000438},
               {"p99_tpot_ms", 29.02592554001179}, {"mean_itl_ms", 28.526592929169208},
               {"median_itl_ms", 28.011917499952688}, {"p90_itl_ms", 31.344466900554835},
               {"p95_itl_ms", 34.79816954991293}, {"p99_itl_ms", 45.49402517011903},
               {"mean_e2e_ms", 441.3798251250114}, {"median_e2e_ms", 439.69193749990154},
               {"p90_e2e_ms", 452.3746404997837}, {"p95_e2e_ms", 452.7274614995349},
               {"p99_e2e_ms", 453.13427469959606});
}

TEST(sglang_output_file_captured)
{
    CHECK_FILE("sglang-jsonl", "exports/sglang_output.jsonl", {"successful_requests", 16.0},
               {"duration_s", 1.7799820600002931}, {"total_input_tokens", 512.0},
               {"total_output_tokens", 256.0}, {"request_throughput", 8.988854640477312},
               {"input_throughput", 287.643348495274}, {"output_throughput", 143.821674247637},
               {"total_throughput", 431.46502274291095},
               {"achieved_concurrency", 3.9496928412857586}, {"mean_e2e_ms", 439.3989000000147},
               {"median_e2e_ms", 439.2190860003211}, {"p90_e2e_ms", 445.7856089998131},
               {"p95_e2e_ms", 451.5674699994179}, {"p99_e2e_ms", 451.56903959973533},
               {"mean_ttft_ms", 11.314871312606556}, {"median_ttft_ms", 11.369007999746827},
               {"p90_ttft_ms", 11.722922500212007}, {"p95_ttft_ms", 11.879256500151314},
               {"p99_ttft_ms", 12.148232899789946}, {"mean_tpot_ms", 28.53893524582721},
               {"median_tpot_ms", 28.527267166646197}, {"p90_tpot_ms", 28.958833966680686},
               {"p95_tpot_ms", 29.34055551666764}, {"p99_tpot_ms", 29.347863476671893},
               {"mean_itl_ms", 28.527797254169702}, {"median_itl_ms", 28.013719000227866},
               {"p90_itl_ms", 28.479439100192394}, {"p95_itl_ms", 35.32203959994149},
               {"p99_itl_ms", 39.996139530294386});
}

TEST(vllm_console_captured_from_vllm)
{
    /* `vllm bench serve` 0.33.0 itself: "P50 X" rows beside "Median X" are
     * not read (median is), no Max ITL */
    CHECK_FILE("vllm", "vllm_captured.log", {"successful_requests", 16}, {"failed_requests", 0},
               {"duration_s", 1.77}, {"total_input_tokens", 512}, {"total_output_tokens", 256},
               {"request_throughput", 9.02}, {"output_throughput", 144.35},
               {"total_throughput", 433.04}, {"mean_ttft_ms", 13.48}, {"median_ttft_ms", 12.20},
               {"p90_ttft_ms", 17.56}, {"p95_ttft_ms", 17.74}, {"p99_ttft_ms", 17.75},
               {"mean_tpot_ms", 28.53}, {"median_tpot_ms", 28.55}, {"p90_tpot_ms", 28.99},
               {"p95_tpot_ms", 29.00}, {"p99_tpot_ms", 29.03}, {"mean_itl_ms", 28.53},
               {"median_itl_ms", 28.01}, {"p90_itl_ms", 31.34}, {"p95_itl_ms", 34.80},
               {"p99_itl_ms", 45.49}, {"mean_e2e_ms", 441.38}, {"median_e2e_ms", 439.69},
               {"p90_e2e_ms", 452.37}, {"p95_e2e_ms", 452.73}, {"p99_e2e_ms", 453.13});
}

TEST(sglang_console_captured_0_5_23)
{
    CHECK_FILE(
        "sglang", "sglang_0523_captured.log", {"successful_requests", 16}, {"duration_s", 1.78},
        {"total_input_tokens", 512}, {"total_output_tokens", 256}, {"request_throughput", 8.99},
        {"input_throughput", 287.64}, {"output_throughput", 143.82}, {"total_throughput", 431.47},
        {"achieved_concurrency", 3.95}, {"mean_e2e_ms", 439.40}, {"median_e2e_ms", 439.22},
        {"p90_e2e_ms", 445.79}, {"p95_e2e_ms", 451.57}, {"p99_e2e_ms", 451.57},
        {"mean_ttft_ms", 11.31}, {"median_ttft_ms", 11.37}, {"p90_ttft_ms", 11.72},
        {"p95_ttft_ms", 11.88}, {"p99_ttft_ms", 12.15}, {"mean_tpot_ms", 28.54},
        {"median_tpot_ms", 28.53}, {"p90_tpot_ms", 28.96}, {"p95_tpot_ms", 29.34},
        {"p99_tpot_ms", 29.35}, {"mean_itl_ms", 28.53}, {"median_itl_ms", 28.01},
        {"p90_itl_ms", 28.48}, {"p95_itl_ms", 35.32}, {"p99_itl_ms", 40.00}, {"max_itl_ms", 51.82});
}

/* ---- how exports are read ---- */

/* ext_run of text with preset and user patterns; ms and info are the caller's. */
static int run_text(const char *preset, const struct ext_pattern *user, size_t n_user,
                    const char *text, struct metric_set *ms, struct ext_info *info, struct err *e)
{
    ext_set *set = NULL;
    err_init(e);
    CHECK_MSG(ext_new(preset, user, n_user, &set, e) == 0, "%s", e->msg);
    int rc = ext_run(set, text, strlen(text), ms, info, e);
    ext_free(set);
    return rc;
}

TEST(jsonl_uses_the_last_run_and_says_so)
{
    /* bench_serving appends: an older run, a blank line, then the one that counts */
    const char *text = "{\"completed\": 8, \"mean_ttft_ms\": 5.0}\n"
                       "\n"
                       "{\"completed\": 16, \"request_rate\": Infinity, \"mean_ttft_ms\": NaN,"
                       " \"median_ttft_ms\": \"Infinity in a string\", \"duration\": 2.5}\n";
    struct metric_set ms;
    struct ext_info info;
    struct buf notes;
    struct err e;
    double v;
    mset_init(&ms);
    ext_info_init(&info);
    buf_init(&notes, 1024);
    CHECK_MSG(run_text("sglang-jsonl", NULL, 0, text, &ms, &info, &e) == 0, "%s", e.msg);
    CHECK(mset_get(&ms, "successful_requests", &v) && v == 16);
    CHECK(mset_get(&ms, "duration_s", &v) && v == 2.5);
    CHECK(!mset_get(&ms, "mean_ttft_ms", NULL)); /* NaN: not measured, not 5 from the old run */
    CHECK(!mset_get(&ms, "median_ttft_ms", NULL));
    ext_info_notes(&info, &notes);
    CHECK_STR(notes.data, "2 results, last used (line 3); 'median_ttft_ms' matched 'Infinity in a "
                          "string', not a number");
    mset_release(&ms);
    ext_info_release(&info);
    buf_release(&notes);
    /* a user pattern beside the preset changes neither the values nor the note */
    struct ext_pattern user[] = {{"rate", "\"request_rate\": ([^,]+),"}};
    mset_init(&ms);
    ext_info_init(&info);
    buf_init(&notes, 1024);
    CHECK_MSG(run_text("sglang-jsonl", user, 1, text, &ms, &info, &e) == 0, "%s", e.msg);
    CHECK(mset_get(&ms, "successful_requests", &v) && v == 16);
    CHECK(mset_get(&ms, "rate", &v) && isinf(v));
    ext_info_notes(&info, &notes);
    CHECK_MSG(strncmp(notes.data, "2 results, last used (line 3)", 29) == 0, "%s", notes.data);
    mset_release(&ms);
    ext_info_release(&info);
    buf_release(&notes);
}

TEST(json_values_inf_null_strings_and_objects)
{
    const char *text = "{\"completed\": 4, \"failed\": null, \"duration\": \"inf\","
                       " \"mean_ttft_ms\": -Infinity, \"median_ttft_ms\": {\"x\": 1},"
                       " \"p99_ttft_ms\": \"1e999\", \"mean_tpot_ms\": \"12 ms\","
                       " \"median_tpot_ms\": true, \"total_input_tokens\": 100000000000000000000,"
                       " \"total_output_tokens\": -0.0}";
    struct metric_set ms;
    struct ext_info info;
    struct err e;
    double v;
    mset_init(&ms);
    ext_info_init(&info);
    CHECK_MSG(run_text("vllm-json", NULL, 0, text, &ms, &info, &e) == 0, "%s", e.msg);
    CHECK(mset_get(&ms, "successful_requests", &v) && v == 4);
    CHECK(!mset_get(&ms, "failed_requests", NULL)); /* null: the tool did not measure it */
    CHECK(mset_get(&ms, "duration_s", &v) && isinf(v) && v > 0);
    CHECK(mset_get(&ms, "mean_ttft_ms", &v) && isinf(v) && v < 0);
    CHECK(mset_get(&ms, "total_input_tokens", &v) && v == 1e20); /* past a 64-bit integer */
    CHECK(mset_get(&ms, "total_output_tokens", &v) && v == 0 && !signbit(v));
    CHECK_INT(ms.n, 5);
    CHECK_INT(info.n_unread, 4);
    struct buf notes;
    buf_init(&notes, 1024);
    ext_info_notes(&info, &notes);
    CHECK_STR(notes.data, "'median_ttft_ms' matched '{...}/[...]', not a number; 'p99_ttft_ms' "
                          "matched '1e999', out of range; 'mean_tpot_ms' matched '12 ms', not a "
                          "number; 'median_tpot_ms' matched 'true/false', not a number");
    buf_release(&notes);
    mset_release(&ms);
    ext_info_release(&info);
}

TEST(guidellm_several_benchmarks_use_the_last)
{
    const char *text = "{\"benchmarks\": ["
                       "{\"duration\": 1, \"metrics\": {\"request_latency\": {\"successful\":"
                       " {\"median\": 0.5}}}},"
                       "{\"duration\": 2, \"metrics\": {\"request_latency\": {\"successful\":"
                       " {\"median\": 0.25, \"percentiles\": {\"p90\": 0.375}}}}}]}";
    struct metric_set ms;
    struct ext_info info;
    struct buf notes;
    struct err e;
    double v;
    mset_init(&ms);
    ext_info_init(&info);
    buf_init(&notes, 512);
    CHECK_MSG(run_text("guidellm-json", NULL, 0, text, &ms, &info, &e) == 0, "%s", e.msg);
    CHECK(mset_get(&ms, "duration_s", &v) && v == 2);
    CHECK(mset_get(&ms, "median_e2e_ms", &v) && v == 250); /* seconds -> ms */
    CHECK(mset_get(&ms, "p90_e2e_ms", &v) && v == 375);
    CHECK_INT(ms.n, 3);
    ext_info_notes(&info, &notes);
    CHECK_STR(notes.data, "2 benchmarks, last used");
    mset_release(&ms);
    ext_info_release(&info);
    buf_release(&notes);
    /* no benchmark at all is an error, not an empty success */
    mset_init(&ms);
    CHECK(run_text("guidellm-json", NULL, 0, "{\"benchmarks\": []}", &ms, NULL, &e) == -1);
    CHECK_STR(e.msg, "(text): no 'benchmarks' in the report (or it is empty)");
    CHECK_INT(e.code, RN_ERR_POINTS);
    mset_release(&ms);
}

TEST(broken_exports_are_errors_naming_the_place)
{
    static const struct {
        const char *preset, *text, *msg;
    } cases[] = {
        {"vllm-json", "{\"completed\": 4,\n \"failed\": }", "(text):2:12: not JSON: "},
        {"vllm-json", "[1, 2]", "(text): not a JSON object at the top"},
        {"vllm-json", "", "(text):1:0: not JSON: "},
        {"sglang-jsonl", "\n  \n", "(text): no result line (the file is empty)"},
        {"sglang-jsonl", "{\"completed\": 1}\n{\"completed\": \n", "(text):2:"},
        {"sglang-jsonl", "{}\n7\n", "(text):2: not a JSON object"},
        {"aiperf-csv", "Request Count,16\n", "(text): no 'Metric,...' header line"},
        {"aiperf-csv", "Metric,Value\nRequest Count,16\n\nMetric,Value\nRequest Count,8\n",
         "(text): row 'Request Count' appears twice in the CSV export: lines 2 and 5"},
        {"vllm-json", "{\"completed\": 16, \"duration\": 1, \"completed\": 8}",
         "(text):1:44: not JSON: duplicate object key near '\"completed\"'"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct metric_set ms;
        struct err e;
        mset_init(&ms);
        CHECK_MSG(run_text(cases[i].preset, NULL, 0, cases[i].text, &ms, NULL, &e) == -1,
                  "case %zu passed", i);
        CHECK_MSG(strncmp(e.msg, cases[i].msg, strlen(cases[i].msg)) == 0, "case %zu: %s", i,
                  e.msg);
        CHECK_INT(e.code, RN_ERR_POINTS);
        CHECK_INT(ms.n, 0);
        mset_release(&ms);
    }
}

TEST(csv_sections_quotes_and_crlf)
{
    /* a row is read in its own section's columns; quoted cells; CRLF */
    const char *text = "Metric,avg,p50\r\n"
                       "\"Request Latency (ms)\",10.5,\"9.25\"\r\n"
                       "\r\n"
                       "Metric,Value\r\n"
                       "Benchmark Duration (sec),3.5\r\n"
                       "Request Count,N/A\r\n";
    struct metric_set ms;
    struct err e;
    double v;
    mset_init(&ms);
    CHECK_MSG(run_text("aiperf-csv", NULL, 0, text, &ms, NULL, &e) == 0, "%s", e.msg);
    CHECK(mset_get(&ms, "mean_e2e_ms", &v) && v == 10.5);
    CHECK(mset_get(&ms, "median_e2e_ms", &v) && v == 9.25);
    CHECK(mset_get(&ms, "duration_s", &v) && v == 3.5); /* the "Value" column */
    CHECK(!mset_get(&ms, "successful_requests", NULL)); /* N/A */
    CHECK_INT(ms.n, 3);
    mset_release(&ms);
}

TEST(user_patterns_replace_and_add_beside_an_export)
{
    /* a user pattern reads the export's lines; one named like a preset row
     * replaces the row even when it matches nothing */
    const char *text = "{\n  \"completed\": 16,\n  \"duration\": 2.0,\n  \"rtfx\": 0.5\n}\n";
    struct ext_pattern user[] = {{"rtfx", "\"rtfx\": ([0-9.]+)"},
                                 {"duration_s", "\"no_such_key\": ([0-9.]+)"}};
    struct metric_set ms;
    struct err e;
    double v;
    mset_init(&ms);
    CHECK_MSG(run_text("vllm-json", user, 2, text, &ms, NULL, &e) == 0, "%s", e.msg);
    CHECK(mset_get(&ms, "successful_requests", &v) && v == 16);
    CHECK(mset_get(&ms, "rtfx", &v) && v == 0.5);
    CHECK(!mset_get(&ms, "duration_s", NULL));
    CHECK_INT(ms.n, 2);
    mset_release(&ms);
}

TEST(require_names_the_keys_tried)
{
    struct err e;
    ext_set *set = NULL;
    struct metric_set ms;
    struct strvec req = STRVEC_INIT;
    err_init(&e);
    mset_init(&ms);
    strvec_push(&req, "p90_tpot_ms");
    strvec_push(&req, "max_itl_ms");
    CHECK(ext_new("vllm-json", NULL, 0, &set, &e) == 0);
    CHECK(ext_run(set, "{}", 2, &ms, NULL, &e) == 0);
    CHECK(ext_require(set, &ms, NULL, &req, &e) == -1);
    CHECK_STR(e.msg, "missing required metric 'p90_tpot_ms' (tried key 'p90_tpot_ms' in the JSON "
                     "export); missing required metric 'max_itl_ms' (no pattern defines it; add "
                     "one under metrics.patterns)");
    ext_free(set);
    CHECK(ext_new("aiperf-csv", NULL, 0, &set, &e) == 0);
    strvec_release(&req);
    strvec_push(&req, "median_ttft_ms");
    err_init(&e);
    CHECK(ext_require(set, &ms, NULL, &req, &e) == -1);
    CHECK_STR(e.msg, "missing required metric 'median_ttft_ms' (tried row 'Time to First Token "
                     "(ms)' column 'p50' of the CSV export)");
    ext_free(set);
    strvec_release(&req);
    mset_release(&ms);
}

TEST(export_beside_the_log)
{
    struct err e;
    ext_set *set = NULL;
    char *p;
    err_init(&e);
    CHECK(ext_new("vllm-json", NULL, 0, &set, &e) == 0);
    CHECK_STR(p = ext_source_path(set, "run/v/c4-n16.log"), "run/v/c4-n16.json");
    free(p);
    CHECK_STR(p = ext_source_path(set, "x/result.json"), "x/result.json"); /* sweep extract */
    free(p);
    ext_free(set);
    CHECK(ext_new("aiperf-json", NULL, 0, &set, &e) == 0);
    CHECK_STR(p = ext_source_path(set, "run/v/c4-n16-r2.log"),
              "run/v/c4-n16-r2/profile_export_aiperf.json");
    free(p);
    ext_free(set);
    CHECK(ext_new("sglang", NULL, 0, &set, &e) == 0);
    CHECK_STR(p = ext_source_path(set, "run/v/c4-n16.log"), "run/v/c4-n16.log");
    free(p);
    ext_free(set);
}

TEST(files_missing_or_too_large)
{
    struct err e;
    ext_set *set = NULL;
    struct metric_set ms;
    err_init(&e);
    mset_init(&ms);
    CHECK(ext_new("vllm-json", NULL, 0, &set, &e) == 0);
    CHECK(ext_run_file(set, FIX "exports/no_such.json", &ms, NULL, &e) == -1);
    CHECK_STR(e.msg, FIX "exports/no_such.json: No such file or directory");
    CHECK_INT(e.code, RN_ERR_ENV);
    /* one byte over the limit: refused, not parsed (a sparse file: no disk) */
    char *big = test_tmp_path("big.json");
    int fd = open(big, O_CREAT | O_WRONLY | O_TRUNC, 0644);
    CHECK(fd >= 0 && ftruncate(fd, (off_t)XP_FILE_MAX_BYTES + 1) == 0);
    close(fd);
    err_init(&e);
    CHECK(ext_run_file(set, big, &ms, NULL, &e) == -1);
    CHECK_MSG(strstr(e.msg, ": larger than the 67108864-byte limit"), "%s", e.msg);
    CHECK_INT(e.code, RN_ERR_POINTS);
    CHECK_INT(ms.n, 0);
    free(big);
    ext_free(set);
    mset_release(&ms);
}

TEST(unknown_preset_lists_every_preset)
{
    struct err e;
    ext_set *set = NULL;
    err_init(&e);
    CHECK(ext_new("vllm-jsn", NULL, 0, &set, &e) == -1);
    CHECK_STR(e.msg, "unknown preset 'vllm-jsn' (did you mean 'vllm-json'?) (known: sglang, vllm, "
                     "aiperf, aiperf-json, aiperf-csv, guidellm-json, vllm-json, sglang-jsonl)");
    CHECK_INT(e.code, RN_ERR_USAGE);
}

/* ---- AIPerf's console tables ---- */

#define HB "\xe2\x94\x83" /* ┃ */
#define LB "\xe2\x94\x82" /* │ */

TEST(aiperf_table_columns_by_header_wrapped_labels_joined)
{
    /* columns in another order, with p95; a label wrapped onto a row of
     * empty values; a row with a longer label that starts the same */
    /* clang-format off */
    const char *text =
        HB "  Metric " HB " p50 " HB "  avg " HB " p95 " HB "\n"
        LB " Inter Token Latency " LB " 2.5 " LB " 3.0 " LB " 4.0 " LB "\n"
        LB "               (ms) " LB "     " LB "     " LB "     " LB "\n"
        LB " Request Latency (ms) Extra " LB " 9 " LB " 9 " LB " 9 " LB "\n"
        "  " LB " Request Latency (ms) " LB " 100 " LB " 110 " LB " N/A " LB "\n" /* indented */
        "Benchmark Duration: 12.5 sec\n";
    /* clang-format on */
    struct metric_set ms;
    struct err e;
    double v;
    mset_init(&ms);
    CHECK_MSG(run_text("aiperf", NULL, 0, text, &ms, NULL, &e) == 0, "%s", e.msg);
    CHECK(mset_get(&ms, "median_tpot_ms", &v) && v == 2.5);
    CHECK(mset_get(&ms, "mean_tpot_ms", &v) && v == 3.0);
    CHECK(mset_get(&ms, "p95_tpot_ms", &v) && v == 4.0);
    CHECK(mset_get(&ms, "median_e2e_ms", &v) && v == 100);
    CHECK(mset_get(&ms, "mean_e2e_ms", &v) && v == 110);
    CHECK(!mset_get(&ms, "p95_e2e_ms", NULL)); /* N/A */
    CHECK(mset_get(&ms, "duration_s", &v) && v == 12.5);
    CHECK_INT(ms.n, 6);
    mset_release(&ms);
}

TEST(aiperf_table_row_twice_is_an_error)
{
    /* clang-format off */
    const char *text =
        HB " Metric " HB " avg " HB "\n"
        LB " Request Count (requests) " LB " 16 " LB "\n"
        "\n"
        HB " Metric " HB " avg " HB "\n"
        LB " Request Count (requests) " LB " 8 " LB "\n";
    /* clang-format on */
    struct metric_set ms;
    struct err e;
    mset_init(&ms);
    CHECK(run_text("aiperf", NULL, 0, text, &ms, NULL, &e) == -1);
    CHECK_STR(e.msg, "(text): 'Request Count (requests)' appears twice (lines 2 and 5): the "
                     "tables of two runs mixed?");
    CHECK_INT(e.code, RN_ERR_POINTS);
    CHECK_INT(ms.n, 0);
    mset_release(&ms);
}

TEST(aiperf_console_streams_across_chunks)
{
    /* the table lands across the 64 KiB read boundary, after a line too long
     * to read, with CRLF ends: the file reads as the text does */
    char *path = test_tmp_path("aiperf.log");
    FILE *f = fopen(path, "wb");
    CHECK(f != NULL);
    for (int i = 0; i < 65536 - 40; i++)
        fputc(i % 79 == 78 ? '\n' : 'x', f);
    fputs("\r\n", f);
    for (int i = 0; i < 70000; i++)
        fputc('y', f);
    fputs("\r\n" HB " Metric " HB " avg " HB " p50 " HB "\r\n", f);
    fputs(LB " Time to First Token (ms) " LB " 12.10 " LB " 11.02 " LB "\r\n", f);
    fputs(LB " Request Count (requests) " LB " 16.00 " LB " N/A " LB, f); /* no last end */
    fclose(f);
    struct err e;
    ext_set *set = NULL;
    struct metric_set ms;
    struct ext_info info;
    struct buf notes;
    double v;
    err_init(&e);
    mset_init(&ms);
    ext_info_init(&info);
    buf_init(&notes, 512);
    CHECK(ext_new("aiperf", NULL, 0, &set, &e) == 0);
    CHECK_MSG(ext_run_file(set, path, &ms, &info, &e) == 0, "%s", e.msg);
    CHECK(mset_get(&ms, "mean_ttft_ms", &v) && v == 12.10);
    CHECK(mset_get(&ms, "median_ttft_ms", &v) && v == 11.02);
    CHECK(mset_get(&ms, "successful_requests", &v) && v == 16);
    CHECK_INT(ms.n, 3);
    ext_info_notes(&info, &notes);
    CHECK_MSG(strstr(notes.data ? notes.data : "", "1 line(s) over 65536 bytes not read"), "%s",
              notes.data ? notes.data : "");
    ext_free(set);
    mset_release(&ms);
    ext_info_release(&info);
    buf_release(&notes);
    free(path);
}

/* ---- the glossary against the presets ---- */

/* Whether the rows preset reads for name mention term: a regex (its
 * backslashes dropped), a JSON key path or a CSV row label. */
static bool rows_mention(const char *preset, const char *name, const char *term, size_t *rows)
{
    const struct xp_preset *xp = xp_find(preset);
    bool found = false;
    *rows = 0;
    if (xp) {
        for (size_t i = 0; i < xp->n_rows; i++)
            if (strcmp(xp->rows[i].name, name) == 0) {
                (*rows)++;
                found = found || strstr(xp->rows[i].key, term);
            }
        return found;
    }
    ext_set *set = NULL;
    struct err e;
    const char *re[8];
    err_init(&e);
    CHECK_MSG(ext_new(preset, NULL, 0, &set, &e) == 0, "%s", e.msg);
    *rows = ext_patterns(set, name, re, 8);
    for (size_t i = 0; i < *rows && i < 8; i++) {
        char plain[512];
        size_t k = 0;
        for (const char *s = re[i]; *s && k + 1 < sizeof(plain); s++)
            if (*s != '\\' || s[1] == '\\')
                plain[k++] = *s;
        plain[k] = '\0';
        found = found || strstr(plain, term);
    }
    ext_free(set);
    return found;
}

TEST(glossary_agrees_with_every_preset)
{
    size_t n;
    const struct gloss_entry *g = gloss_entries(&n);
    const char *const *presets = ext_preset_names();
    size_t n_presets = 0;
    while (presets[n_presets])
        n_presets++;
    CHECK_INT(n_presets, GLOSS_N_PRESETS);
    for (size_t i = 0; i < n; i++) {
        if (!g[i].check)
            continue;
        CHECK_MSG(metric_find(g[i].check), "'%s' is not canonical", g[i].check);
        const char *stat = strncmp(g[i].check, "median_", 7) == 0 ? "median" : "";
        for (size_t p = 0; p < GLOSS_N_PRESETS; p++) {
            /* "*_tpot_ms" is "median_tpot_ms" for the median row */
            char term[128];
            const char *t = g[i].tool[p], *star = strchr(t, '*');
            if (star)
                snprintf(term, sizeof(term), "%.*s%s%s", (int)(star - t), t, stat, star + 1);
            else
                snprintf(term, sizeof(term), "%s", t);
            size_t rows;
            bool found = rows_mention(presets[p], g[i].check, term, &rows);
            if (!*t)
                CHECK_MSG(rows == 0, "%s reads '%s' but the glossary says it has none", presets[p],
                          g[i].check);
            else
                CHECK_MSG(found, "%s: no row for '%s' mentions '%s'", presets[p], g[i].check, term);
        }
    }
}

TEST_MAIN()
