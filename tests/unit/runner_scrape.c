/*
 * Unit tests for runner/client/scrape.c: the Prometheus text parser
 * (comments, escaped label values, +Inf/NaN, timestamps, histograms, bad
 * lines), column expressions, the known-server table (fp4serve's decode-only
 * counters first, vLLM, SGLang), the user map, and reading the saved scrapes
 * beside a log.
 */
#include <math.h>
#include <stdlib.h>
#include <unistd.h>

#include "err.h"
#include "fileio.h"
#include "sweep.h"
#include "test.h"
#include "testtmp.h"
#include "xalloc.h"

#include "client/scrape.h"

static void parse(const char *text, struct scrape_set *set)
{
    scrape_set_init(set);
    scrape_parse(text, strlen(text), set);
}

TEST(parse_comments_labels_and_special_values)
{
    const char *text = "# HELP x_total A counter with \"quotes\" in its help.\n"
                       "# TYPE x_total counter\n"
                       "x_total{model_name=\"a \\\"b\\\" \\\\ c\",engine=\"0\"} 3\n"
                       "x_total{model_name=\"d\\ne\",} 4.5 1712345678000\n"
                       "\n"
                       "   # indented comment\n"
                       "h_seconds_bucket{le=\"+Inf\"} 7\n"
                       "h_seconds_sum 1.25e-1\n"
                       "h_seconds_count 7\n"
                       "g_gauge NaN\n"
                       "up +Inf\r\n"
                       "down -Inf\n"
                       "# EOF\n";
    struct scrape_set s;
    parse(text, &s);
    CHECK_INT(s.n_bad, 0);
    CHECK_INT(s.n, 8);
    CHECK_STR(s.s[0].name, "x_total");
    CHECK_STR(s.s[0].labels, "model_name=\"a \"b\" \\ c\",engine=\"0\"");
    CHECK_STR(s.s[1].labels, "model_name=\"d\ne\"");
    double v;
    CHECK(scrape_sum(&s, "x_total", &v) && v == 7.5); /* summed over label sets */
    CHECK(scrape_sum(&s, "h_seconds_sum", &v) && v == 0.125);
    CHECK(scrape_sum(&s, "h_seconds_count", &v) && v == 7);
    CHECK(scrape_sum(&s, "h_seconds_bucket", &v) && v == 7);
    CHECK(scrape_sum(&s, "g_gauge", &v) && isnan(v));
    CHECK(scrape_sum(&s, "up", &v) && isinf(v) && v > 0);
    CHECK(scrape_sum(&s, "down", &v) && isinf(v) && v < 0);
    CHECK(!scrape_sum(&s, "x", &v)); /* exact names: a prefix is not a match */
    CHECK(!scrape_sum(&s, "x_total_created", &v));
    scrape_set_release(&s);
}

TEST(parse_skips_and_counts_bad_lines)
{
    const char *text = "ok_total 1\n"
                       "no_value\n"
                       "bad{l=\"unterminated} 3\n"
                       "bad2{l=x} 3\n"
                       "1leading_digit 3\n"
                       "val_total abc\n"
                       "ts_total 1 notatime\n"
                       "ok2_total{a=\"1\"} 2\n";
    struct scrape_set s;
    parse(text, &s);
    CHECK_INT(s.n, 2);
    CHECK_INT(s.n_bad, 6);
    CHECK_INT(s.bad_line, 2);
    double v;
    CHECK(scrape_sum(&s, "ok2_total", &v) && v == 2);
    CHECK(!scrape_sum(&s, "bad", &v));
    scrape_set_release(&s);
}

TEST(expression_syntax)
{
    struct err e;
    err_init(&e);
    CHECK(scrape_expr_check("a_total", &e) == 0);
    CHECK(scrape_expr_check("vllm:x_sum / vllm:x_count * 1000", &e) == 0);
    CHECK(scrape_expr_check("a / 1e3", &e) == 0);
    err_init(&e);
    CHECK(scrape_expr_check("a +", &e) == -1);
    CHECK(strstr(e.msg, "expected '*' or '/' before '+'") != NULL);
    err_init(&e);
    CHECK(scrape_expr_check("a /", &e) == -1);
    CHECK(strstr(e.msg, "at the end") != NULL);
    err_init(&e);
    CHECK(scrape_expr_check("", &e) == -1);
    err_init(&e);
    CHECK(scrape_expr_check("a b", &e) == -1);
    err_init(&e);
    CHECK(scrape_expr_check("a / 1x", &e) == -1);
    CHECK(strstr(e.msg, "'1x' is not a number") != NULL);
}

static const char fp4_before[] = "fp4serve_steps_total 100\n"
                                 "fp4serve_step_seconds_total 3.0\n"
                                 "fp4serve_step_sequences_total 400\n"
                                 "fp4serve_prefill_tokens_total 1000\n"
                                 "fp4serve_generation_tokens_total 500\n";
static const char fp4_after[] = "fp4serve_steps_total 200\n"
                                "fp4serve_step_seconds_total 6.5\n"
                                "fp4serve_step_sequences_total 1000\n"
                                "fp4serve_prefill_tokens_total 3048\n"
                                "fp4serve_generation_tokens_total 1100\n";

TEST(fp4serve_all_steps_without_decode_only_counters)
{
    struct scrape_set b, a;
    parse(fp4_before, &b);
    parse(fp4_after, &a);
    struct metric_set m;
    mset_init(&m);
    const char *fam;
    size_t n = scrape_columns_from(&b, &a, NULL, 0, &m, &fam);
    CHECK_STR(fam, "fp4serve");
    CHECK_INT(n, 5);
    double v;
    CHECK(mset_get(&m, "server_step_ms", &v) && fabs(v - 35.0) < 1e-9); /* 3.5 s / 100 */
    CHECK(mset_get(&m, "server_batch", &v) && fabs(v - 6.0) < 1e-9);
    CHECK(mset_get(&m, "server_steps", &v) && v == 100);
    CHECK(mset_get(&m, "server_prefill_tokens", &v) && v == 2048);
    CHECK(mset_get(&m, "server_decode_tokens", &v) && v == 600);
    CHECK(!mset_get(&m, "server_queue_ms", &v));
    mset_release(&m);
    scrape_set_release(&b);
    scrape_set_release(&a);
}

TEST(fp4serve_decode_only_steps_win_and_labels_sum)
{
    struct buf bt, at;
    buf_init(&bt, 1 << 16);
    buf_init(&at, 1 << 16);
    buf_printf(&bt,
               "%sfp4serve_decode_only_steps_total{model_name=\"m\"} 10\n"
               "fp4serve_decode_only_step_seconds_total{model_name=\"m\"} 0.2\n"
               "fp4serve_decode_only_step_sequences_total{model_name=\"m\"} 30\n",
               fp4_before);
    /* a second label set (another model) adds to the first */
    buf_printf(&at,
               "%sfp4serve_decode_only_steps_total{model_name=\"m\"} 50\n"
               "fp4serve_decode_only_steps_total{model_name=\"n\"} 40\n"
               "fp4serve_decode_only_step_seconds_total{model_name=\"m\"} 1.2\n"
               "fp4serve_decode_only_step_seconds_total{model_name=\"n\"} 1.0\n"
               "fp4serve_decode_only_step_sequences_total{model_name=\"m\"} 300\n"
               "fp4serve_decode_only_step_sequences_total{model_name=\"n\"} 90\n",
               fp4_after);
    struct scrape_set b, a;
    parse(bt.data, &b);
    parse(at.data, &a);
    struct metric_set m;
    mset_init(&m);
    scrape_columns_from(&b, &a, NULL, 0, &m, NULL);
    double v;
    CHECK(mset_get(&m, "server_step_ms", &v) && fabs(v - 25.0) < 1e-9); /* 2.0 s / 80 */
    CHECK(mset_get(&m, "server_batch", &v) && fabs(v - 4.5) < 1e-9);    /* 360 / 80 */
    CHECK(mset_get(&m, "server_steps", &v) && v == 100);                /* every step */
    CHECK(mset_get(&m, "server_decode_steps", &v) && v == 80);
    mset_release(&m);
    /* no decode-only step during the point: both fall back to every step */
    scrape_set_release(&a);
    buf_reset(&at);
    buf_printf(&at,
               "%sfp4serve_decode_only_steps_total{model_name=\"m\"} 10\n"
               "fp4serve_decode_only_step_seconds_total{model_name=\"m\"} 0.2\n"
               "fp4serve_decode_only_step_sequences_total{model_name=\"m\"} 30\n",
               fp4_after);
    parse(at.data, &a);
    mset_init(&m);
    scrape_columns_from(&b, &a, NULL, 0, &m, NULL);
    CHECK(mset_get(&m, "server_step_ms", &v) && fabs(v - 35.0) < 1e-9);
    CHECK(mset_get(&m, "server_batch", &v) && fabs(v - 6.0) < 1e-9);
    mset_release(&m);
    scrape_set_release(&b);
    scrape_set_release(&a);
    buf_release(&bt);
    buf_release(&at);
}

TEST(fp4serve_roofline_gauges_from_the_scrape_after)
{
    struct buf at;
    buf_init(&at, 1 << 16);
    buf_printf(&at,
               "%sfp4serve_model_weight_bytes 80896\n"
               "fp4serve_model_flops_per_token 212992\n"
               "fp4serve_memory_read_bytes_per_second 9099035375.5\n",
               fp4_after);
    struct scrape_set b, a;
    parse(fp4_before, &b); /* constants: not in the scrape before, not deltas */
    parse(at.data, &a);
    struct metric_set m;
    mset_init(&m);
    CHECK_INT(scrape_columns_from(&b, &a, NULL, 0, &m, NULL), 8);
    double v;
    CHECK(mset_get(&m, "server_weight_bytes", &v) && v == 80896);
    CHECK(mset_get(&m, "server_flops_per_token", &v) && v == 212992);
    CHECK(mset_get(&m, "server_mem_gbs", &v) && fabs(v - 9.0990353755) < 1e-9);
    mset_release(&m);
    scrape_set_release(&a);
    /* no bandwidth probe, and a gauge at 0: no column, never a made-up value */
    buf_reset(&at);
    buf_printf(&at, "%sfp4serve_model_weight_bytes 0\nfp4serve_model_flops_per_token 2e9\n",
               fp4_after);
    parse(at.data, &a);
    mset_init(&m);
    scrape_columns_from(&b, &a, NULL, 0, &m, NULL);
    CHECK(!mset_get(&m, "server_weight_bytes", &v));
    CHECK(!mset_get(&m, "server_mem_gbs", &v));
    CHECK(mset_get(&m, "server_flops_per_token", &v) && v == 2e9);
    mset_release(&m);
    scrape_set_release(&b);
    scrape_set_release(&a);
    buf_release(&at);
}

/* A mixture of experts: the weight bytes and the (layer, expert) pairs its
 * steps read, per step, and the model's pairs (a gauge, after only). A
 * dense model's activations stay at 0: no experts column, bytes still. */
TEST(fp4serve_expert_reads_per_step)
{
    struct buf bt, at;
    buf_init(&bt, 1 << 16);
    buf_init(&at, 1 << 16);
    buf_printf(&bt,
               "%sfp4serve_weight_bytes_read_total 5000000\n"
               "fp4serve_expert_activations_total 1000\n",
               fp4_before);
    buf_printf(&at,
               "%sfp4serve_weight_bytes_read_total 25000000\n" /* +20 MB over 100 steps */
               "fp4serve_expert_activations_total 4200\n"      /* +3200 pairs */
               "fp4serve_model_experts 256\n",
               fp4_after);
    struct scrape_set b, a;
    parse(bt.data, &b);
    parse(at.data, &a);
    struct metric_set m;
    mset_init(&m);
    CHECK_INT(scrape_columns_from(&b, &a, NULL, 0, &m, NULL), 8);
    double v;
    CHECK(mset_get(&m, "server_weight_bytes_per_step", &v) && fabs(v - 200000.0) < 1e-6);
    CHECK(mset_get(&m, "server_experts_per_step", &v) && fabs(v - 32.0) < 1e-9);
    CHECK(mset_get(&m, "server_model_experts", &v) && v == 256);
    mset_release(&m);
    scrape_set_release(&a);
    /* dense: activations do not move, the gauge is absent */
    buf_reset(&at);
    buf_printf(&at,
               "%sfp4serve_weight_bytes_read_total 25000000\n"
               "fp4serve_expert_activations_total 1000\n",
               fp4_after);
    parse(at.data, &a);
    mset_init(&m);
    scrape_columns_from(&b, &a, NULL, 0, &m, NULL);
    CHECK(mset_get(&m, "server_weight_bytes_per_step", &v) && fabs(v - 200000.0) < 1e-6);
    CHECK(!mset_get(&m, "server_experts_per_step", &v));
    CHECK(!mset_get(&m, "server_model_experts", &v));
    mset_release(&m);
    scrape_set_release(&a);
    /* a server without the counters (older fp4serve): neither column */
    parse(fp4_after, &a);
    mset_init(&m);
    scrape_columns_from(&b, &a, NULL, 0, &m, NULL);
    CHECK(!mset_get(&m, "server_weight_bytes_per_step", &v));
    CHECK(!mset_get(&m, "server_experts_per_step", &v));
    mset_release(&m);
    scrape_set_release(&b);
    scrape_set_release(&a);
    buf_release(&bt);
    buf_release(&at);
}

/* The decode-only expert series win over the all-steps ones (a prompt step
 * touches most experts whatever the batch, so it would lift the mean): per
 * decode-only step when they moved, else the all-steps mean (an older
 * fp4serve without them, or a point without a decode-only step). */
TEST(fp4serve_expert_reads_per_decode_step_first)
{
    static const char before[] = "fp4serve_steps_total 100\n"
                                 "fp4serve_weight_bytes_read_total 5000000\n"
                                 "fp4serve_expert_activations_total 1000\n"
                                 "fp4serve_decode_only_steps_total 90\n"
                                 "fp4serve_decode_only_expert_activations_total 800\n"
                                 "fp4serve_decode_only_weight_bytes_read_total 4000000\n";
    static const char after[] =
        "fp4serve_steps_total 200\n"                               /* +100 steps */
        "fp4serve_weight_bytes_read_total 25000000\n"              /* +20 MB */
        "fp4serve_expert_activations_total 4200\n"                 /* +3200 pairs */
        "fp4serve_decode_only_steps_total 170\n"                   /* +80 of them */
        "fp4serve_decode_only_expert_activations_total 2400\n"     /* +1600 */
        "fp4serve_decode_only_weight_bytes_read_total 12000000\n"; /* +8 MB */
    struct scrape_set b, a;
    parse(before, &b);
    parse(after, &a);
    struct metric_set m;
    mset_init(&m);
    scrape_columns_from(&b, &a, NULL, 0, &m, NULL);
    double v;
    CHECK(mset_get(&m, "server_experts_per_step", &v) && fabs(v - 20.0) < 1e-9); /* not 32 */
    CHECK(mset_get(&m, "server_weight_bytes_per_step", &v) && fabs(v - 100000.0) < 1e-6);
    mset_release(&m);
    scrape_set_release(&a);
    /* no decode-only step in the point: the all-steps means */
    static const char prompt_only[] = "fp4serve_steps_total 200\n"
                                      "fp4serve_weight_bytes_read_total 25000000\n"
                                      "fp4serve_expert_activations_total 4200\n"
                                      "fp4serve_decode_only_steps_total 90\n"
                                      "fp4serve_decode_only_expert_activations_total 800\n"
                                      "fp4serve_decode_only_weight_bytes_read_total 4000000\n";
    parse(prompt_only, &a);
    mset_init(&m);
    scrape_columns_from(&b, &a, NULL, 0, &m, NULL);
    CHECK(mset_get(&m, "server_experts_per_step", &v) && fabs(v - 32.0) < 1e-9);
    CHECK(mset_get(&m, "server_weight_bytes_per_step", &v) && fabs(v - 200000.0) < 1e-6);
    mset_release(&m);
    scrape_set_release(&a);
    scrape_set_release(&b);
}

TEST(vllm_and_sglang_names)
{
    struct scrape_set b, a;
    parse("vllm:inter_token_latency_seconds_sum{engine=\"0\",model_name=\"m\"} 1.0\n"
          "vllm:inter_token_latency_seconds_count{engine=\"0\",model_name=\"m\"} 100\n"
          "vllm:iteration_tokens_total_count{engine=\"0\",model_name=\"m\"} 50\n"
          "vllm:iteration_tokens_total_sum{engine=\"0\",model_name=\"m\"} 900\n"
          "vllm:generation_tokens_total{engine=\"0\",model_name=\"m\"} 200\n"
          "vllm:request_queue_time_seconds_sum{engine=\"0\",model_name=\"m\"} 0\n"
          "vllm:request_queue_time_seconds_count{engine=\"0\",model_name=\"m\"} 0\n",
          &b);
    parse("vllm:inter_token_latency_seconds_sum{engine=\"0\",model_name=\"m\"} 4.0\n"
          "vllm:inter_token_latency_seconds_count{engine=\"0\",model_name=\"m\"} 200\n"
          "vllm:iteration_tokens_total_count{engine=\"0\",model_name=\"m\"} 75\n"
          "vllm:iteration_tokens_total_sum{engine=\"0\",model_name=\"m\"} 1900\n"
          "vllm:generation_tokens_total{engine=\"0\",model_name=\"m\"} 400\n"
          "vllm:request_queue_time_seconds_sum{engine=\"0\",model_name=\"m\"} 0.5\n"
          "vllm:request_queue_time_seconds_count{engine=\"0\",model_name=\"m\"} 10\n",
          &a);
    struct metric_set m;
    mset_init(&m);
    const char *fam;
    scrape_columns_from(&b, &a, NULL, 0, &m, &fam);
    CHECK_STR(fam, "vllm");
    double v;
    CHECK(mset_get(&m, "server_step_ms", &v) && fabs(v - 30.0) < 1e-9);
    CHECK(mset_get(&m, "server_itl_ms", &v) && fabs(v - 30.0) < 1e-9);
    CHECK(mset_get(&m, "server_batch", &v) && fabs(v - 8.0) < 1e-9);
    CHECK(mset_get(&m, "server_queue_ms", &v) && fabs(v - 50.0) < 1e-9);
    mset_release(&m);
    scrape_set_release(&b);
    scrape_set_release(&a);

    parse("sglang:time_per_output_token_seconds_sum{model_name=\"m\"} 0\n"
          "sglang:time_per_output_token_seconds_count{model_name=\"m\"} 0\n"
          "sglang:queue_time_seconds_sum{model_name=\"m\"} 1\n"
          "sglang:queue_time_seconds_count{model_name=\"m\"} 4\n",
          &b);
    parse("sglang:time_per_output_token_seconds_sum{model_name=\"m\"} 2\n"
          "sglang:time_per_output_token_seconds_count{model_name=\"m\"} 100\n"
          "sglang:queue_time_seconds_sum{model_name=\"m\"} 3\n"
          "sglang:queue_time_seconds_count{model_name=\"m\"} 8\n",
          &a);
    mset_init(&m);
    scrape_columns_from(&b, &a, NULL, 0, &m, &fam);
    CHECK_STR(fam, "sglang");
    CHECK(mset_get(&m, "server_step_ms", &v) && fabs(v - 20.0) < 1e-9);
    CHECK(mset_get(&m, "server_queue_ms", &v) && fabs(v - 500.0) < 1e-9);
    CHECK(!mset_get(&m, "server_batch", &v));
    mset_release(&m);
    scrape_set_release(&b);
    scrape_set_release(&a);
}

TEST(reset_counter_and_missing_series_give_no_column)
{
    struct scrape_set b, a;
    parse(fp4_after, &b); /* after < before: the server restarted in between */
    parse(fp4_before, &a);
    struct metric_set m;
    mset_init(&m);
    CHECK_INT(scrape_columns_from(&b, &a, NULL, 0, &m, NULL), 0);
    CHECK_INT(m.n, 0);
    scrape_set_release(&b);
    scrape_set_release(&a);
    /* a series only in one scrape */
    parse("fp4serve_steps_total 1\n", &b);
    parse("other_total 2\n", &a);
    CHECK_INT(scrape_columns_from(&b, &a, NULL, 0, &m, NULL), 0);
    mset_release(&m);
    scrape_set_release(&b);
    scrape_set_release(&a);
}

TEST(user_map_adds_and_replaces)
{
    struct scrape_set b, a;
    parse("my_step_seconds_total 1\nmy_steps_total 10\nfp4serve_steps_total 0\n"
          "fp4serve_step_seconds_total 0\nfp4serve_step_sequences_total 0\n",
          &b);
    parse("my_step_seconds_total 3\nmy_steps_total 110\nfp4serve_steps_total 10\n"
          "fp4serve_step_seconds_total 1\nfp4serve_step_sequences_total 20\n",
          &a);
    const struct scrape_map map[] = {
        {"server_step_ms", "my_step_seconds_total / my_steps_total * 1000"},
        {"server_my_steps", "my_steps_total"},
        {"server_never", "absent_total"},
    };
    struct metric_set m;
    mset_init(&m);
    scrape_columns_from(&b, &a, map, 3, &m, NULL);
    double v;
    CHECK(mset_get(&m, "server_step_ms", &v) && fabs(v - 20.0) < 1e-9); /* the map wins */
    CHECK(mset_get(&m, "server_my_steps", &v) && v == 100);
    CHECK(mset_get(&m, "server_batch", &v) && fabs(v - 2.0) < 1e-9); /* known rows stay */
    CHECK(!mset_get(&m, "server_never", &v));
    mset_release(&m);
    scrape_set_release(&b);
    scrape_set_release(&a);
}

TEST(saved_scrapes_beside_the_log)
{
    char *p = scrape_path("run/v/c16-n48.log", true);
    CHECK_STR(p, "run/v/c16-n48.metrics-before.txt");
    free(p);
    p = scrape_path("run/v/c16-n48-r2.log", false);
    CHECK_STR(p, "run/v/c16-n48-r2.metrics-after.txt");
    free(p);

    char *log = test_tmp_path("c4-n16.log");
    char *bp = scrape_path(log, true), *ap = scrape_path(log, false);
    struct err e;
    err_init(&e);
    struct metric_set m;
    mset_init(&m);
    /* no scrapes: no columns */
    CHECK_INT(scrape_point_columns(log, NULL, 0, &m, NULL), 0);
    CHECK(file_write_atomic(bp, fp4_before, strlen(fp4_before), &e, RN_ERR_ENV) == 0);
    CHECK_INT(scrape_point_columns(log, NULL, 0, &m, NULL), 0); /* only one of the two */
    CHECK(file_write_atomic(ap, fp4_after, strlen(fp4_after), &e, RN_ERR_ENV) == 0);
    CHECK_INT(scrape_point_columns(log, NULL, 0, &m, NULL), 5);
    double v;
    CHECK(mset_get(&m, "server_step_ms", &v) && fabs(v - 35.0) < 1e-9);
    mset_release(&m);
    unlink(bp);
    unlink(ap);
    free(bp);
    free(ap);
    free(log);
}

/* W3-M2: a series printed twice (same name and labels) is not summed or
 * overwritten: the point gets no server column, and the reason names the
 * series, the file, the lines and the values. Other label sets are fine. */
TEST(a_series_printed_twice_refuses_the_columns)
{
    struct scrape_set s;
    size_t a, b;
    parse("x_total{k=\"1\"} 1\nx_total{k=\"2\"} 2\ny 3\n", &s);
    CHECK(!scrape_duplicate(&s, &a, &b));
    scrape_set_release(&s);
    parse("y 3\nx_total{k=\"1\"} 1\n# c\nx_total{k=\"1\"} 1000\n", &s);
    CHECK(scrape_duplicate(&s, &a, &b));
    CHECK_INT(s.s[a].line, 2);
    CHECK_INT(s.s[b].line, 4);
    scrape_set_release(&s);

    char *log = test_tmp_path("c2-n8.log");
    char *bp = scrape_path(log, true), *ap = scrape_path(log, false);
    struct err e;
    err_init(&e);
    char *dup = xasprintf("%sfp4serve_step_seconds_total 6500\n", fp4_after);
    CHECK(file_write_atomic(bp, fp4_before, strlen(fp4_before), &e, RN_ERR_ENV) == 0);
    CHECK(file_write_atomic(ap, dup, strlen(dup), &e, RN_ERR_ENV) == 0);
    struct metric_set m;
    mset_init(&m);
    struct buf why;
    buf_init(&why, 4096);
    CHECK_INT(scrape_point_columns(log, NULL, 0, &m, &why), 0);
    double v;
    CHECK(!mset_get(&m, "server_step_ms", &v));
    CHECK_MSG(why.data && strstr(why.data, "'fp4serve_step_seconds_total' appears twice in "
                                           "c2-n8.metrics-after.txt (lines 2 and 6, values 6.5 "
                                           "and 6500)"),
              "%s", why.data ? why.data : "(nothing)");
    buf_release(&why);
    mset_release(&m);
    unlink(bp);
    unlink(ap);
    free(dup);
    free(bp);
    free(ap);
    free(log);
}

TEST_MAIN()
