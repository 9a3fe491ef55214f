/*
 * engine_prom: the /metrics histograms (serve/prom.c): bounds as vLLM's,
 * an observation on a bound counted in that bound's bucket, cumulative
 * buckets ending in +Inf = _count, sums in base units, one observation per
 * request served in every per-request histogram, the model_name label
 * escaped, the KV usage ratio, no since-start mean gauges, and the
 * roofline constants as gauges only when known.
 */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "test.h"

#include "serve/prom.h"

/* The sample line that starts with `prefix` (a name with its labels and
 * the space), its value parsed; -1 when absent. */
static double sample(const char *text, const char *prefix)
{
    size_t n = strlen(prefix);
    for (const char *p = text; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL)
        if (strncmp(p, prefix, n) == 0)
            return strtod(p + n, NULL);
    return -1;
}

static void render(const struct prom *m, struct buf *b)
{
    struct prom_gauges g = {.slots = 4, .kv_positions = 100, .kv_capacity = 400, .ready = 1};
    buf_init(b, 1 << 20);
    prom_render(m, &g, b);
}

TEST(token_bounds_are_1_2_5_up_to_the_context)
{
    struct prom m;
    prom_init(&m);
    prom_set_model(&m, "m", 2048);
    const struct prom_hist *h = &m.hist[PROM_H_PROMPT];
    const double want[] = {1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000};
    CHECK_INT(h->n_le, 11);
    for (int i = 0; i < 11 && i < h->n_le; i++)
        CHECK_MSG(h->le[i] == want[i], "le[%d] = %g, want %g", i, h->le[i], want[i]);
    prom_set_model(&m, "m", 100);
    CHECK_INT(m.hist[PROM_H_GEN].n_le, 7); /* ... 50, 100 */
    CHECK_INT(m.hist[PROM_H_TTFT].n_le, 22);
    CHECK(m.hist[PROM_H_TTFT].le[0] == 0.001 && m.hist[PROM_H_TTFT].le[21] == 2560.0);
}

TEST(observation_on_a_bound_is_in_that_bucket)
{
    struct prom m;
    prom_init(&m);
    prom_set_model(&m, "m", 2048);
    struct prom_hist *h = &m.hist[PROM_H_TTFT];
    prom_observe(h, 1000000);                     /* 0.001 s exactly: le="0.001" */
    prom_observe(h, 1000001);                     /* just above: le="0.005" */
    prom_observe(h, 10000000000);                 /* 10 s: le="10" */
    prom_observe(h, (uint64_t)3000 * 1000000000); /* past 2560 s: +Inf only */
    struct buf b;
    render(&m, &b);
    const char *n = "fp4serve_time_to_first_token_seconds";
    char key[160];
    snprintf(key, sizeof(key), "%s_bucket{model_name=\"m\",le=\"0.001\"} ", n);
    CHECK(sample(b.data, key) == 1);
    snprintf(key, sizeof(key), "%s_bucket{model_name=\"m\",le=\"0.005\"} ", n);
    CHECK(sample(b.data, key) == 2);
    snprintf(key, sizeof(key), "%s_bucket{model_name=\"m\",le=\"7.5\"} ", n);
    CHECK(sample(b.data, key) == 2);
    snprintf(key, sizeof(key), "%s_bucket{model_name=\"m\",le=\"10\"} ", n);
    CHECK(sample(b.data, key) == 3);
    snprintf(key, sizeof(key), "%s_bucket{model_name=\"m\",le=\"2560\"} ", n);
    CHECK(sample(b.data, key) == 3);
    snprintf(key, sizeof(key), "%s_bucket{model_name=\"m\",le=\"+Inf\"} ", n);
    CHECK(sample(b.data, key) == 4);
    snprintf(key, sizeof(key), "%s_count{model_name=\"m\"} ", n);
    CHECK(sample(b.data, key) == 4);
    snprintf(key, sizeof(key), "%s_sum{model_name=\"m\"} ", n);
    double sum = sample(b.data, key);
    CHECK_MSG(fabs(sum - 3010.002001) < 1e-6, "sum %.9f", sum);
    snprintf(key, sizeof(key), "# TYPE %s histogram\n", n);
    CHECK(strstr(b.data, key) != NULL);
    buf_release(&b);
}

TEST(every_request_histogram_counts_each_request_served)
{
    struct prom m;
    prom_init(&m);
    prom_set_model(&m, "m", 256);
    /* submit at 1 s, admitted 0.5 s later, first token at 1.7 s, end at 3 s */
    prom_request_done(&m, 1000000000, 1500000000, 1700000000, 3000000000, 12, 7);
    prom_request_done(&m, 5000000000, 5000000000, 5100000000, 5200000000, 300, 1);
    struct buf b;
    render(&m, &b);
    const char *names[] = {"fp4serve_time_to_first_token_seconds",
                           "fp4serve_e2e_request_latency_seconds",
                           "fp4serve_request_queue_time_seconds", "fp4serve_request_prompt_tokens",
                           "fp4serve_request_generation_tokens"};
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        char key[160];
        snprintf(key, sizeof(key), "%s_count{model_name=\"m\"} ", names[i]);
        CHECK_MSG(sample(b.data, key) == 2, "%s: count %g", names[i], sample(b.data, key));
    }
    CHECK(fabs(sample(b.data, "fp4serve_time_to_first_token_seconds_sum{model_name=\"m\"} ") -
               0.8) < 1e-9);
    CHECK(fabs(sample(b.data, "fp4serve_e2e_request_latency_seconds_sum{model_name=\"m\"} ") -
               2.2) < 1e-9);
    CHECK(fabs(sample(b.data, "fp4serve_request_queue_time_seconds_sum{model_name=\"m\"} ") - 0.5) <
          1e-9);
    CHECK(sample(b.data, "fp4serve_request_prompt_tokens_sum{model_name=\"m\"} ") == 312);
    CHECK(sample(b.data, "fp4serve_request_generation_tokens_sum{model_name=\"m\"} ") == 8);
    /* 300 prompt tokens: above the 256 context's last bound (200), so +Inf only */
    CHECK(sample(b.data, "fp4serve_request_prompt_tokens_bucket{model_name=\"m\",le=\"200\"} ") ==
          1);
    CHECK(sample(b.data, "fp4serve_request_prompt_tokens_bucket{model_name=\"m\",le=\"+Inf\"} ") ==
          2);
    /* no token generated (t_first 0): no first-token time, the rest counted */
    prom_request_done(&m, 6000000000, 6000000000, 0, 6100000000, 5, 0);
    buf_release(&b);
    render(&m, &b);
    CHECK(sample(b.data, "fp4serve_time_to_first_token_seconds_count{model_name=\"m\"} ") == 2);
    CHECK(sample(b.data, "fp4serve_e2e_request_latency_seconds_count{model_name=\"m\"} ") == 3);
    CHECK(sample(b.data, "fp4serve_request_generation_tokens_bucket{model_name=\"m\",le=\"1\"} ") ==
          2);
    /* the per-token histogram is not per request */
    CHECK(sample(b.data, "fp4serve_inter_token_latency_seconds_count{model_name=\"m\"} ") == 0);
    buf_release(&b);
}

TEST(model_name_label_is_escaped)
{
    struct prom m;
    prom_init(&m);
    prom_set_model(&m, "a\"b\\c\nd", 64);
    CHECK_STR(m.model_name, "a\\\"b\\\\c\\nd");
    /* a name cut inside a UTF-8 character loses the whole character */
    char longname[400];
    memset(longname, 'x', sizeof(longname));
    memcpy(longname + 250, "\xc3\xa9\xc3\xa9", 4);
    longname[sizeof(longname) - 1] = '\0';
    prom_set_model(&m, longname, 64);
    size_t n = strlen(m.model_name);
    CHECK(n < sizeof(m.model_name));
    CHECK(n == 250 || n == 252); /* never 251: half of "é" */
}

TEST(kv_usage_ratio_and_no_mean_gauges)
{
    struct prom m;
    prom_init(&m);
    prom_set_model(&m, "tiny", 256);
    atomic_store(&m.steps, 4);
    atomic_store(&m.step_seqs, 10);
    atomic_store(&m.step_ns, 2000000000);
    struct buf b;
    render(&m, &b);
    CHECK(sample(b.data, "fp4serve_kv_cache_usage_perc{model_name=\"tiny\"} ") == 0.25);
    CHECK(strstr(b.data, "# TYPE fp4serve_kv_cache_usage_perc gauge\n") != NULL);
    CHECK(strstr(b.data, "_mean") == NULL); /* means since start: ratios of counters instead */
    CHECK(sample(b.data, "fp4serve_step_sequences_total{model_name=\"tiny\"} ") == 10);
    CHECK(sample(b.data, "fp4serve_step_seconds_total{model_name=\"tiny\"} ") == 2);
    CHECK(
        sample(b.data,
               "fp4serve_requests_total{model_name=\"tiny\",route=\"tokenize\",status=\"200\"} ") ==
        -1);
    prom_response(&m, PROM_TOKENIZE, 200);
    buf_release(&b);
    render(&m, &b);
    CHECK(
        sample(b.data,
               "fp4serve_requests_total{model_name=\"tiny\",route=\"tokenize\",status=\"200\"} ") ==
        1);
    buf_release(&b);
    /* before the model is loaded: no histogram (their label is not known yet) */
    struct prom_gauges g = {0};
    buf_init(&b, 1 << 20);
    prom_render(&m, &g, &b);
    CHECK(strstr(b.data, "histogram") == NULL);
    CHECK(sample(b.data, "fp4serve_ready{model_name=\"tiny\"} ") == 0);
    buf_release(&b);
}

TEST(roofline_constants_are_gauges_when_known)
{
    struct prom m;
    prom_init(&m);
    prom_set_model(&m, "tiny", 256);
    struct buf b;
    render(&m, &b); /* nothing set: none shown, never a 0 that reads as a value */
    CHECK(strstr(b.data, "fp4serve_model_weight_bytes") == NULL);
    CHECK(strstr(b.data, "fp4serve_memory_read_bytes_per_second") == NULL);
    buf_release(&b);
    prom_set_roofline(&m, 80896, 212992, 512, 0);
    render(&m, &b);
    CHECK(strstr(b.data, "# TYPE fp4serve_model_weight_bytes gauge\n") != NULL);
    CHECK(sample(b.data, "fp4serve_model_weight_bytes{model_name=\"tiny\"} ") == 80896);
    CHECK(sample(b.data, "fp4serve_model_flops_per_token{model_name=\"tiny\"} ") == 212992);
    CHECK(sample(b.data, "fp4serve_model_attention_flops_per_position{model_name=\"tiny\"} ") ==
          512);
    CHECK(strstr(b.data, "fp4serve_memory_read_bytes_per_second") == NULL); /* not probed */
    buf_release(&b);
    prom_set_roofline(&m, 80896, 212992, 512, 9.5e9);
    render(&m, &b);
    CHECK(sample(b.data, "fp4serve_memory_read_bytes_per_second{model_name=\"tiny\"} ") == 9.5e9);
    CHECK(strstr(b.data, "fp4serve_model_experts") == NULL); /* dense: no expert count */
    buf_release(&b);
    prom_set_experts(&m, 8 * 32); /* 8 MoE layers of 32 experts */
    render(&m, &b);
    CHECK(strstr(b.data, "# TYPE fp4serve_model_experts gauge\n") != NULL);
    CHECK(sample(b.data, "fp4serve_model_experts{model_name=\"tiny\"} ") == 256);
    buf_release(&b);
}

/* Expert reads and weight bytes of every step, and of the decode-only
 * steps apart (the steps fp4serve_decode_only_steps_total counts): a step
 * with prompt tokens adds to the first only. */
TEST(expert_reads_of_decode_only_steps_apart)
{
    struct prom m;
    prom_init(&m);
    prom_set_model(&m, "tiny", 256);
    prom_step(&m, 4, 0, 32, 1, 1000, 0, 0, 0); /* a prompt step */
    prom_step_weights(&m, 32, 250, 250000, 300000);
    prom_step(&m, 4, 4, 0, 1, 1000, 0, 0, 0); /* two decode-only steps */
    prom_step_weights(&m, 0, 12, 12000, 60000);
    prom_step(&m, 4, 4, 0, 1, 1000, 0, 0, 0);
    prom_step_weights(&m, 0, 14, 14000, 62000);
    struct buf b;
    render(&m, &b);
    CHECK(sample(b.data, "fp4serve_steps_total{model_name=\"tiny\"} ") == 3);
    CHECK(sample(b.data, "fp4serve_expert_activations_total{model_name=\"tiny\"} ") == 276);
    CHECK(sample(b.data, "fp4serve_weight_bytes_read_total{model_name=\"tiny\"} ") == 422000);
    CHECK(sample(b.data, "fp4serve_decode_only_steps_total{model_name=\"tiny\"} ") == 2);
    CHECK(sample(b.data, "fp4serve_decode_only_expert_activations_total{model_name=\"tiny\"} ") ==
          26);
    CHECK(sample(b.data, "fp4serve_decode_only_weight_bytes_read_total{model_name=\"tiny\"} ") ==
          122000);
    CHECK(strstr(b.data, "# TYPE fp4serve_decode_only_expert_activations_total counter\n") != NULL);
    CHECK(sample(b.data, "fp4serve_last_step_experts{model_name=\"tiny\"} ") == 14);
    buf_release(&b);
}

/* Issue 29: every sample carries model_name (vLLM's dashboards select on
 * it), vLLM's scheduler and finish series are there under our prefix, and
 * the prefill, decode and inference times split a request at its first
 * token. */
TEST(every_series_has_model_name_and_vllm_names)
{
    struct prom m;
    prom_init(&m);
    prom_set_model(&m, "tiny", 256);
    atomic_store(&m.finished[PROM_FIN_STOP], 3);
    atomic_store(&m.finished[PROM_FIN_CANCELLED], 2);
    atomic_store(&m.finished[PROM_FIN_ABORTED], 1);
    prom_response(&m, PROM_COMPLETIONS, 400);
    prom_set_roofline(&m, 80896, 212992, 512, 9.5e9);
    /* submit 0, admitted at 1 s, first token at 1.25 s, end at 3 s */
    prom_request_done(&m, 0, 1000000000, 1250000000, 3000000000, 10, 5);
    /* no token generated: inference time only */
    prom_request_done(&m, 0, 0, 0, 500000000, 10, 0);
    struct prom_gauges g = {.queued = 2, .running = 3, .slots = 4, .ready = 1};
    struct buf b;
    buf_init(&b, 1 << 20);
    prom_render(&m, &g, &b);
    long samples = 0, bad = 0;
    for (const char *p = b.data; p && *p;) {
        const char *nl = strchr(p, '\n');
        size_t n = nl ? (size_t)(nl - p) : strlen(p);
        if (*p != '#') {
            samples++;
            const char *brace = memchr(p, '{', n);
            if (!brace || strncmp(brace, "{model_name=\"tiny\"", 18) != 0) {
                bad++;
                fprintf(stderr, "no model_name: %.*s\n", (int)n, p);
            }
        }
        p = nl ? nl + 1 : NULL;
    }
    CHECK(samples > 100);
    CHECK_INT(bad, 0);
    CHECK(sample(b.data, "fp4serve_num_requests_waiting{model_name=\"tiny\"} ") == 2);
    CHECK(sample(b.data, "fp4serve_num_requests_running{model_name=\"tiny\"} ") == 3);
    CHECK(sample(b.data, "fp4serve_request_success_total{model_name=\"tiny\",finished_reason="
                         "\"stop\"} ") == 3);
    CHECK(sample(b.data, "fp4serve_request_success_total{model_name=\"tiny\",finished_reason="
                         "\"length\"} ") == 0);
    CHECK(sample(b.data, "fp4serve_request_success_total{model_name=\"tiny\",finished_reason="
                         "\"abort\"} ") == 3); /* cancelled + aborted */
    CHECK(strstr(b.data, "finished_reason=\"cancelled\"") == NULL);
    CHECK(sample(b.data, "fp4serve_num_preemptions_total{model_name=\"tiny\"} ") == 0);
    CHECK(fabs(sample(b.data, "fp4serve_request_prefill_time_seconds_sum{model_name=\"tiny\"} ") -
               0.25) < 1e-9);
    CHECK(fabs(sample(b.data, "fp4serve_request_decode_time_seconds_sum{model_name=\"tiny\"} ") -
               1.75) < 1e-9);
    CHECK(fabs(sample(b.data, "fp4serve_request_inference_time_seconds_sum{model_name=\"tiny\"} ") -
               2.5) < 1e-9);
    CHECK(sample(b.data, "fp4serve_request_prefill_time_seconds_count{model_name=\"tiny\"} ") == 1);
    CHECK(sample(b.data, "fp4serve_request_inference_time_seconds_count{model_name=\"tiny\"} ") ==
          2);
    CHECK(sample(b.data, "fp4serve_requests_total{model_name=\"tiny\",route=\"completions\","
                         "status=\"400\"} ") == 1);
    buf_release(&b);
}

TEST_MAIN()
