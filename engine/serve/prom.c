/*
 * prom: counters, histograms and the /metrics exposition (see prom.h). One
 * table lists every counter with its name, help and unit conversion, one
 * every histogram with its name, help and bounds, so the text and the
 * struct cannot drift; labelled families are written by hand below.
 */
#include "serve/prom.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "text/utf8.h"

/* The statuses fp4serve sends, each its own label value; anything else
 * (a status MHD sent itself, say) lands in the last one, "other". */
static const int statuses[PROM_N_STATUS] = {200, 400, 404, 405, 413, 414,
                                            431, 500, 503, 408, 429, 0 /* other */};
static const char *const route_names[PROM_N_ROUTES] = {
    "completions", "chat_completions", "health", "models", "metrics", "tokenize", "other"};
static const char *const finish_names[PROM_N_FINISH] = {"stop", "length", "cancelled", "aborted"};
/* vLLM's finished_reason for each (request_success_total): a client gone
 * and a server stop are both its "abort". */
static const char *const vllm_finish[PROM_N_FINISH] = {"stop", "length", "abort", "abort"};

/* vLLM's bounds (vllm/v1/metrics/loggers.py), in seconds. */
static const double ttft_le[] = {0.001, 0.005, 0.01, 0.02,  0.04,  0.06,  0.08, 0.1,
                                 0.25,  0.5,   0.75, 1.0,   2.5,   5.0,   7.5,  10.0,
                                 20.0,  40.0,  80.0, 160.0, 640.0, 2560.0};
static const double itl_le[] = {0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2,  0.3,  0.4, 0.5,
                                0.75, 1.0,   2.5,  5.0,   7.5, 10.0, 20.0, 40.0, 80.0};
static const double request_le[] = {0.3,  0.5,   0.8,   1.0,   1.5,   2.0,    2.5,
                                    5.0,  10.0,  15.0,  20.0,  30.0,  40.0,   50.0,
                                    60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0};

/* The histograms: name, help, bounds (NULL: 1-2-5 token lengths), scale. */
static const struct {
    const char *name, *help;
    const double *le;
    int n_le;
    double scale;
} hists[PROM_N_HIST] = {
    [PROM_H_TTFT] = {"fp4serve_time_to_first_token_seconds",
                     "Time from submission to the first generated token, per request served.",
                     ttft_le, sizeof(ttft_le) / sizeof(ttft_le[0]), 1e-9},
    [PROM_H_ITL] = {"fp4serve_inter_token_latency_seconds",
                    "Time between two generated tokens of one request, per token.", itl_le,
                    sizeof(itl_le) / sizeof(itl_le[0]), 1e-9},
    [PROM_H_E2E] = {"fp4serve_e2e_request_latency_seconds",
                    "Time from submission to the end of generation, per request served.",
                    request_le, sizeof(request_le) / sizeof(request_le[0]), 1e-9},
    [PROM_H_QUEUE] = {"fp4serve_request_queue_time_seconds",
                      "Time waiting for a KV slot, per request served.", request_le,
                      sizeof(request_le) / sizeof(request_le[0]), 1e-9},
    [PROM_H_PROMPT] = {"fp4serve_request_prompt_tokens", "Prompt tokens, per request served.", NULL,
                       0, 1},
    [PROM_H_GEN] = {"fp4serve_request_generation_tokens",
                    "Generated tokens (end-of-generation included), per request served.", NULL, 0,
                    1},
    [PROM_H_PREFILL] = {"fp4serve_request_prefill_time_seconds",
                        "Time from admission (a KV slot) to the first generated token, per "
                        "request served.",
                        request_le, sizeof(request_le) / sizeof(request_le[0]), 1e-9},
    [PROM_H_DECODE] = {"fp4serve_request_decode_time_seconds",
                       "Time from the first generated token to the end of generation, per "
                       "request served.",
                       request_le, sizeof(request_le) / sizeof(request_le[0]), 1e-9},
    [PROM_H_INFER] = {"fp4serve_request_inference_time_seconds",
                      "Time from admission (a KV slot) to the end of generation, per request "
                      "served.",
                      request_le, sizeof(request_le) / sizeof(request_le[0]), 1e-9},
};

static void hist_bounds(struct prom_hist *h, const double *le, int n, double scale)
{
    h->n_le = n < PROM_MAX_LE ? n : PROM_MAX_LE;
    h->scale = scale;
    for (int i = 0; i < h->n_le; i++) {
        h->le[i] = le[i];
        h->le_units[i] = (uint64_t)(le[i] / scale + 0.5);
    }
}

/* 1, 2, 5, 10, 20, 50, ... up to max (vLLM's build_1_2_5_buckets). */
static void token_bounds(struct prom_hist *h, int max)
{
    double le[PROM_MAX_LE];
    int n = 0;
    for (double p = 1; n < PROM_MAX_LE; p *= 10)
        for (int k = 0; k < 3 && n < PROM_MAX_LE; k++) {
            double v = p * (k == 0 ? 1 : k == 1 ? 2 : 5);
            if (v > max)
                goto done;
            le[n++] = v;
        }
done:
    hist_bounds(h, le, n, 1);
}

void prom_init(struct prom *m)
{
    memset(m, 0, sizeof(*m));
    for (int i = 0; i < PROM_N_HIST; i++) {
        if (hists[i].le)
            hist_bounds(&m->hist[i], hists[i].le, hists[i].n_le, hists[i].scale);
        else
            token_bounds(&m->hist[i], 2048);
    }
}

/* The label value escaped as the text format wants: \\, \" and \n. */
void prom_set_model(struct prom *m, const char *model_name, int max_model_len)
{
    size_t w = 0;
    for (const char *p = model_name; *p && w + 3 < sizeof(m->model_name); p++) {
        if (*p == '\\' || *p == '"' || *p == '\n')
            m->model_name[w++] = '\\';
        m->model_name[w++] = *p == '\n' ? 'n' : *p;
    }
    while (w > 0 && utf8_invalid_at((const uint8_t *)m->model_name, w) < w)
        w--; /* cut inside a character: drop its first bytes */
    m->model_name[w] = '\0';
    for (int i = 0; i < PROM_N_HIST; i++)
        if (!hists[i].le)
            token_bounds(&m->hist[i], max_model_len > 0 ? max_model_len : 1);
}

void prom_step(struct prom *m, int n, int n_dec, int n_pre, int passes, uint64_t step_ns,
               uint64_t attn_ns, uint64_t matmul_ns, uint64_t other_ns)
{
    atomic_fetch_add_explicit(&m->step_ns, step_ns, memory_order_relaxed);
    if (n_pre == 0) {
        atomic_fetch_add_explicit(&m->do_step_ns, step_ns, memory_order_relaxed);
        atomic_fetch_add_explicit(&m->do_steps, 1, memory_order_relaxed);
        atomic_fetch_add_explicit(&m->do_step_seqs, (uint64_t)n, memory_order_relaxed);
    }
    atomic_fetch_add_explicit(&m->steps, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&m->step_seqs, (uint64_t)n, memory_order_relaxed);
    atomic_fetch_add_explicit(&m->weight_passes, (uint64_t)passes, memory_order_relaxed);
    atomic_fetch_add_explicit(&m->decode_rows, (uint64_t)n_dec, memory_order_relaxed);
    atomic_fetch_add_explicit(&m->prefill_rows, (uint64_t)n_pre, memory_order_relaxed);
    atomic_fetch_add_explicit(&m->attn_ns, attn_ns, memory_order_relaxed);
    atomic_fetch_add_explicit(&m->matmul_ns, matmul_ns, memory_order_relaxed);
    atomic_fetch_add_explicit(&m->other_ns, other_ns, memory_order_relaxed);
}

void prom_step_weights(struct prom *m, int n_pre, uint64_t experts, uint64_t expert_bytes,
                       uint64_t weight_bytes)
{
    if (n_pre == 0) { /* the steps prom_step counts as decode-only */
        atomic_fetch_add_explicit(&m->do_expert_acts, experts, memory_order_relaxed);
        atomic_fetch_add_explicit(&m->do_weight_bytes, weight_bytes, memory_order_relaxed);
    }
    atomic_fetch_add_explicit(&m->weight_bytes_read, weight_bytes, memory_order_relaxed);
    atomic_fetch_add_explicit(&m->expert_acts, experts, memory_order_relaxed);
    atomic_fetch_add_explicit(&m->expert_bytes, expert_bytes, memory_order_relaxed);
    atomic_store_explicit(&m->last_weight_bytes, weight_bytes, memory_order_relaxed);
    atomic_store_explicit(&m->last_experts, experts, memory_order_relaxed);
}

void prom_observe(struct prom_hist *h, uint64_t v)
{
    int k = 0;
    while (k < h->n_le && v > h->le_units[k])
        k++;
    atomic_fetch_add_explicit(&h->bucket[k], 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&h->sum, v, memory_order_relaxed);
}

void prom_request_done(struct prom *m, uint64_t t_submit, uint64_t t_admit, uint64_t t_first,
                       uint64_t t_end, long n_prompt, long n_gen)
{
    /* a clock read before t_submit cannot happen (one monotonic clock),
     * but a zero or reversed time is clamped rather than wrapped */
    if (t_first) { /* a request served without a generated token has no first-token time */
        prom_observe(&m->hist[PROM_H_TTFT], t_first > t_submit ? t_first - t_submit : 0);
        prom_observe(&m->hist[PROM_H_PREFILL], t_first > t_admit ? t_first - t_admit : 0);
        prom_observe(&m->hist[PROM_H_DECODE], t_end > t_first ? t_end - t_first : 0);
    }
    prom_observe(&m->hist[PROM_H_INFER], t_end > t_admit ? t_end - t_admit : 0);
    prom_observe(&m->hist[PROM_H_E2E], t_end > t_submit ? t_end - t_submit : 0);
    prom_observe(&m->hist[PROM_H_QUEUE], t_admit > t_submit ? t_admit - t_submit : 0);
    prom_observe(&m->hist[PROM_H_PROMPT], n_prompt > 0 ? (uint64_t)n_prompt : 0);
    prom_observe(&m->hist[PROM_H_GEN], n_gen > 0 ? (uint64_t)n_gen : 0);
}

void prom_response(struct prom *m, enum prom_route route, int status)
{
    int k = PROM_N_STATUS - 1;
    for (int i = 0; i < PROM_N_STATUS - 1; i++)
        if (statuses[i] == status)
            k = i;
    if ((unsigned)route >= PROM_N_ROUTES)
        route = PROM_OTHER;
    atomic_fetch_add_explicit(&m->responses[route][k], 1, memory_order_relaxed);
}

static uint64_t get(const atomic_uint_least64_t *a)
{
    return atomic_load_explicit(a, memory_order_relaxed);
}

/* Plain counters: name, help, field, scale (1e-9 turns ns into seconds). */
struct counter {
    const char *name;
    const char *help;
    size_t offset;
    double scale;
};

static const struct counter counters[] = {
    {"fp4serve_prompt_tokens_total", "Prompt tokens of admitted requests.",
     offsetof(struct prom, prompt_tokens), 1},
    {"fp4serve_generation_tokens_total", "Tokens sampled (end-of-generation tokens included).",
     offsetof(struct prom, generated_tokens), 1},
    {"fp4serve_steps_total", "Model steps (one forward pass over the running batch).",
     offsetof(struct prom, steps), 1},
    {"fp4serve_step_sequences_total", "Sequences summed over steps (mean batch = this / steps).",
     offsetof(struct prom, step_seqs), 1},
    {"fp4serve_weight_passes_total",
     "Forward passes over the weights: one per step in batched decode, one per sequence of "
     "a step in per-request decode.",
     offsetof(struct prom, weight_passes), 1},
    {"fp4serve_weight_bytes_read_total",
     "Weight bytes the steps read: the dense matrices and the head once per pass, plus the "
     "experts each step touched (mean per step = this / steps).",
     offsetof(struct prom, weight_bytes_read), 1},
    {"fp4serve_expert_activations_total",
     "Mixture-of-experts layers: (layer, expert) pairs whose weights a step read, summed over "
     "steps (a batched step reads a touched expert once; 0 for a dense model).",
     offsetof(struct prom, expert_acts), 1},
    {"fp4serve_expert_weight_bytes_total", "Expert weight bytes read, summed over steps.",
     offsetof(struct prom, expert_bytes), 1},
    {"fp4serve_decode_tokens_total", "Decode rows summed over steps.",
     offsetof(struct prom, decode_rows), 1},
    {"fp4serve_prefill_tokens_total", "Prompt tokens run through the model.",
     offsetof(struct prom, prefill_rows), 1},
    {"fp4serve_step_seconds_total", "Wall time of model steps.", offsetof(struct prom, step_ns),
     1e-9},
    {"fp4serve_decode_only_steps_total", "Model steps that ran no prompt token.",
     offsetof(struct prom, do_steps), 1},
    {"fp4serve_decode_only_step_sequences_total",
     "Sequences summed over decode-only steps (their mean batch = this / those steps).",
     offsetof(struct prom, do_step_seqs), 1},
    {"fp4serve_decode_only_step_seconds_total", "Wall time of decode-only steps.",
     offsetof(struct prom, do_step_ns), 1e-9},
    {"fp4serve_decode_only_expert_activations_total",
     "fp4serve_expert_activations_total over decode-only steps (experts per decode step = "
     "this / fp4serve_decode_only_steps_total; a prefill step touches most experts).",
     offsetof(struct prom, do_expert_acts), 1},
    {"fp4serve_decode_only_weight_bytes_read_total",
     "fp4serve_weight_bytes_read_total over decode-only steps (per decode step = this / "
     "fp4serve_decode_only_steps_total).",
     offsetof(struct prom, do_weight_bytes), 1},
    {"fp4serve_connections_total", "Connections accepted.", offsetof(struct prom, connections), 1},
    /* vLLM's vllm:prefix_cache_queries / vllm:prefix_cache_hits, in tokens */
    {"fp4serve_prefix_cache_queries_total",
     "Prompt tokens looked up in the prefix cache (every admitted sequence's prompt).",
     offsetof(struct prom, prefix_queries), 1},
    {"fp4serve_prefix_cache_hits_total",
     "Prompt tokens whose KV the prefix cache supplied (not computed).",
     offsetof(struct prom, prefix_hits), 1},
};

/* A bound as a label value: "0.005", "2048", "2560". */
static void put_le(struct buf *out, double v)
{
    if (v == (double)(long long)v)
        buf_printf(out, "%lld", (long long)v);
    else
        buf_printf(out, "%g", v);
}

/* The label set of a sample: {model_name="...",extra} (extra: more pairs
 * or NULL). Every series carries model_name, as vLLM's do. */
static void labels(struct buf *out, const struct prom *m, const char *extra)
{
    buf_printf(out, "{model_name=\"%s\"%s%s}", m->model_name, extra ? "," : "", extra ? extra : "");
}

/* One histogram family: cumulative buckets, +Inf, _sum and _count. The
 * count is the sum of the buckets as read, so it always equals +Inf even
 * while requests finish during the scrape. */
static void render_hist(const struct prom *m, int id, struct buf *out)
{
    const struct prom_hist *h = &m->hist[id];
    const char *name = hists[id].name;
    buf_printf(out, "# HELP %s %s\n# TYPE %s histogram\n", name, hists[id].help, name);
    uint64_t cum = 0;
    for (int k = 0; k <= h->n_le; k++) {
        cum += get(&h->bucket[k]);
        buf_printf(out, "%s_bucket{model_name=\"%s\",le=\"", name, m->model_name);
        if (k < h->n_le)
            put_le(out, h->le[k]);
        else
            buf_puts(out, "+Inf");
        buf_printf(out, "\"} %llu\n", (unsigned long long)cum);
    }
    uint64_t sum = get(&h->sum);
    if (h->scale == 1)
        buf_printf(out, "%s_sum{model_name=\"%s\"} %llu\n", name, m->model_name,
                   (unsigned long long)sum);
    else
        buf_printf(out, "%s_sum{model_name=\"%s\"} %.9f\n", name, m->model_name,
                   (double)sum * h->scale);
    buf_printf(out, "%s_count{model_name=\"%s\"} %llu\n", name, m->model_name,
               (unsigned long long)cum);
}

/* One unlabelled-but-for-model_name sample: "NAME{model_name=..} V". */
static void sample(struct buf *out, const struct prom *m, const char *name, double v)
{
    buf_puts(out, name);
    labels(out, m, NULL);
    if (v == (double)(long long)v)
        buf_printf(out, " %lld\n", (long long)v);
    else
        buf_printf(out, " %.9g\n", v);
}

/* The exposition is rebuilt on every scrape from the atomics. Counters a
 * reader can divide (steps, sequences, seconds) are exported raw: a mean
 * since start (batch size, step time) is a ratio of two of them, taken
 * over whatever window the reader wants, so none is exported as a gauge. */
void prom_render(const struct prom *m, const struct prom_gauges *g, struct buf *out)
{
    char extra[96];
    buf_puts(out, "# HELP fp4serve_requests_total HTTP responses by route and status.\n"
                  "# TYPE fp4serve_requests_total counter\n");
    for (int r = 0; r < PROM_N_ROUTES; r++)
        for (int k = 0; k < PROM_N_STATUS; k++) {
            uint64_t v = get(&m->responses[r][k]);
            if (!v && !(r <= PROM_CHAT && statuses[k] == 200))
                continue; /* keep the scrape short; completions' 200 always shows */
            char st[16] = "other";
            if (statuses[k])
                snprintf(st, sizeof(st), "%d", statuses[k]);
            snprintf(extra, sizeof(extra), "route=\"%s\",status=\"%s\"", route_names[r], st);
            buf_puts(out, "fp4serve_requests_total");
            labels(out, m, extra);
            buf_printf(out, " %llu\n", (unsigned long long)v);
        }
    buf_puts(out, "# HELP fp4serve_requests_finished_total Generations by how they ended.\n"
                  "# TYPE fp4serve_requests_finished_total counter\n");
    for (int f = 0; f < PROM_N_FINISH; f++) {
        snprintf(extra, sizeof(extra), "reason=\"%s\"", finish_names[f]);
        buf_puts(out, "fp4serve_requests_finished_total");
        labels(out, m, extra);
        buf_printf(out, " %llu\n", (unsigned long long)get(&m->finished[f]));
    }
    /* vLLM's request_success_total: the same ends under its reason names */
    buf_puts(out, "# HELP fp4serve_request_success_total Finished requests by vLLM's reason "
                  "(stop, length, abort: the client went away or the server stopped).\n"
                  "# TYPE fp4serve_request_success_total counter\n");
    for (int f = 0; f < PROM_N_FINISH; f++) {
        bool first = true; /* each vLLM name once, summing the ends mapped to it */
        for (int e = 0; e < f; e++)
            first = first && strcmp(vllm_finish[e], vllm_finish[f]) != 0;
        if (!first)
            continue;
        uint64_t v = 0;
        for (int e = f; e < PROM_N_FINISH; e++)
            if (strcmp(vllm_finish[e], vllm_finish[f]) == 0)
                v += get(&m->finished[e]);
        snprintf(extra, sizeof(extra), "finished_reason=\"%s\"", vllm_finish[f]);
        buf_puts(out, "fp4serve_request_success_total");
        labels(out, m, extra);
        buf_printf(out, " %llu\n", (unsigned long long)v);
    }
    for (size_t i = 0; i < sizeof(counters) / sizeof(counters[0]); i++) {
        const struct counter *c = &counters[i];
        uint64_t v = get((const atomic_uint_least64_t *)((const char *)m + c->offset));
        buf_printf(out, "# HELP %s %s\n# TYPE %s counter\n", c->name, c->help, c->name);
        buf_puts(out, c->name);
        labels(out, m, NULL);
        if (c->scale == 1)
            buf_printf(out, " %llu\n", (unsigned long long)v);
        else
            buf_printf(out, " %.6f\n", (double)v * c->scale);
    }
    buf_puts(out, "# HELP fp4serve_num_preemptions_total Sequences preempted: fp4serve never "
                  "preempts (a request waits for a free KV slot instead), so this stays 0.\n"
                  "# TYPE fp4serve_num_preemptions_total counter\n");
    sample(out, m, "fp4serve_num_preemptions_total", 0);
    buf_puts(out, "# HELP fp4serve_step_phase_seconds_total Step time by phase (model timers).\n"
                  "# TYPE fp4serve_step_phase_seconds_total counter\n");
    const struct {
        const char *phase;
        const atomic_uint_least64_t *ns;
    } phases[] = {{"attention", &m->attn_ns}, {"matmul", &m->matmul_ns}, {"other", &m->other_ns}};
    for (size_t i = 0; i < sizeof(phases) / sizeof(phases[0]); i++) {
        snprintf(extra, sizeof(extra), "phase=\"%s\"", phases[i].phase);
        buf_puts(out, "fp4serve_step_phase_seconds_total");
        labels(out, m, extra);
        buf_printf(out, " %.6f\n", (double)get(phases[i].ns) * 1e-9);
    }
    struct {
        const char *name, *help;
        double v;
    } gauges[] = {
        {"fp4serve_queue_length", "Requests waiting for a slot.", (double)g->queued},
        {"fp4serve_running_sequences", "Sequences holding a KV slot.", (double)g->running},
        /* vLLM's scheduler gauges: the same two under its names */
        {"fp4serve_num_requests_waiting",
         "Requests waiting for a KV slot (vLLM's num_requests_waiting).", (double)g->queued},
        {"fp4serve_num_requests_running",
         "Sequences holding a KV slot, each choice of a request its own (vLLM's "
         "num_requests_running).",
         (double)g->running},
        {"fp4serve_kv_slots", "KV slots (--max-batch).", (double)g->slots},
        {"fp4serve_kv_slots_free", "KV slots free.", (double)(g->slots - g->running)},
        {"fp4serve_kv_positions_used", "KV cache positions held over all slots.",
         (double)g->kv_positions},
        {"fp4serve_kv_positions_capacity", "KV cache positions (slots x context).",
         (double)g->kv_capacity},
        {"fp4serve_open_connections", "HTTP connections open now.",
         (double)atomic_load_explicit(&m->open_connections, memory_order_relaxed)},
        {"fp4serve_ready", "1 once the model is loaded.", (double)g->ready},
        {"fp4serve_last_step_weight_bytes", "Weight bytes the last step read.",
         (double)atomic_load_explicit(&m->last_weight_bytes, memory_order_relaxed)},
        {"fp4serve_last_step_experts",
         "(layer, expert) pairs whose weights the last step read (0 for a dense model).",
         (double)atomic_load_explicit(&m->last_experts, memory_order_relaxed)},
    };
    for (size_t i = 0; i < sizeof(gauges) / sizeof(gauges[0]); i++) {
        buf_printf(out, "# HELP %s %s\n# TYPE %s gauge\n", gauges[i].name, gauges[i].help,
                   gauges[i].name);
        sample(out, m, gauges[i].name, gauges[i].v);
    }
    if (!g->ready)
        return; /* the histograms' bounds are set with the model */
    buf_puts(out, "# HELP fp4serve_kv_cache_usage_perc KV cache positions held over all slots, as "
                  "a fraction of the capacity (0 to 1).\n"
                  "# TYPE fp4serve_kv_cache_usage_perc gauge\n");
    buf_printf(out, "fp4serve_kv_cache_usage_perc{model_name=\"%s\"} %.6f\n", m->model_name,
               g->kv_capacity > 0 ? (double)g->kv_positions / (double)g->kv_capacity : 0.0);
    for (int i = 0; i < PROM_N_HIST; i++)
        render_hist(m, i, out);
    const struct {
        const char *name, *help;
        double v;
    } consts[] = {
        {"fp4serve_model_weight_bytes",
         "Bytes of weights one batched decode step reads (a mixture of experts: every expert, "
         "the bound; fp4serve_last_step_weight_bytes is what a step read).",
         m->weight_bytes},
        {"fp4serve_model_flops_per_token", "Matmul FLOPs per token (2 x parameters).",
         m->flops_per_token},
        {"fp4serve_model_attention_flops_per_position",
         "Attention FLOPs per token per position attended to.", m->attn_flops_per_pos},
        {"fp4serve_memory_read_bytes_per_second",
         "Streaming-read memory bandwidth measured at startup (--probe-bandwidth).",
         m->mem_read_bytes_per_s},
        {"fp4serve_model_experts",
         "Mixture of experts: (layer, expert) pairs of the model, the most a step can read "
         "(experts per decode step = fp4serve_decode_only_expert_activations_total / "
         "fp4serve_decode_only_steps_total).",
         m->model_experts},
    };
    for (size_t i = 0; i < sizeof(consts) / sizeof(consts[0]); i++)
        if (consts[i].v > 0) {
            buf_printf(out, "# HELP %s %s\n# TYPE %s gauge\n%s", consts[i].name, consts[i].help,
                       consts[i].name, consts[i].name);
            labels(out, m, NULL);
            buf_printf(out, " %.17g\n", consts[i].v);
        }
}

void prom_set_experts(struct prom *m, double pairs)
{
    m->model_experts = pairs;
}

void prom_set_roofline(struct prom *m, double weight_bytes, double flops_per_token,
                       double attn_flops_per_pos, double mem_read_bytes_per_s)
{
    m->weight_bytes = weight_bytes;
    m->flops_per_token = flops_per_token;
    m->attn_flops_per_pos = attn_flops_per_pos;
    m->mem_read_bytes_per_s = mem_read_bytes_per_s;
}
