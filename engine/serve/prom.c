/*
 * prom: counters and the /metrics exposition (see prom.h). One table
 * lists every counter with its name, help and unit conversion, so the text
 * and the struct cannot drift; labelled families are written by hand below.
 */
#include "serve/prom.h"

#include <stddef.h>
#include <stdio.h>
#include <string.h>

/* The statuses fp4serve sends, each its own label value; anything else
 * (a status MHD sent itself, say) lands in the last one, "other". */
static const int statuses[PROM_N_STATUS] = {200, 400, 404, 405, 413, 414,
                                            431, 500, 503, 408, 429, 0 /* other */};
static const char *const route_names[PROM_N_ROUTES] = {"completions", "chat_completions", "health",
                                                       "models",      "metrics",          "other"};
static const char *const finish_names[PROM_N_FINISH] = {"stop", "length", "cancelled", "aborted"};

void prom_init(struct prom *m)
{
    memset(m, 0, sizeof(*m));
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
    {"fp4serve_decode_tokens_total", "Decode rows summed over steps.",
     offsetof(struct prom, decode_rows), 1},
    {"fp4serve_prefill_tokens_total", "Prompt tokens run through the model.",
     offsetof(struct prom, prefill_rows), 1},
    {"fp4serve_step_seconds_total", "Wall time of model steps.", offsetof(struct prom, step_ns),
     1e-9},
    {"fp4serve_connections_total", "Connections accepted.", offsetof(struct prom, connections), 1},
};

/* The exposition is rebuilt on every scrape from the atomics; counters a
 * reader can divide (steps, sequences, seconds) are exported raw, and the
 * two means (batch size, step time) are also given as gauges for people
 * reading /metrics by eye. */
void prom_render(const struct prom *m, const struct prom_gauges *g, struct buf *out)
{
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
            buf_printf(out, "fp4serve_requests_total{route=\"%s\",status=\"%s\"} %llu\n",
                       route_names[r], st, (unsigned long long)v);
        }
    buf_puts(out, "# HELP fp4serve_requests_finished_total Generations by how they ended.\n"
                  "# TYPE fp4serve_requests_finished_total counter\n");
    for (int f = 0; f < PROM_N_FINISH; f++)
        buf_printf(out, "fp4serve_requests_finished_total{reason=\"%s\"} %llu\n", finish_names[f],
                   (unsigned long long)get(&m->finished[f]));
    for (size_t i = 0; i < sizeof(counters) / sizeof(counters[0]); i++) {
        const struct counter *c = &counters[i];
        uint64_t v = get((const atomic_uint_least64_t *)((const char *)m + c->offset));
        buf_printf(out, "# HELP %s %s\n# TYPE %s counter\n", c->name, c->help, c->name);
        if (c->scale == 1)
            buf_printf(out, "%s %llu\n", c->name, (unsigned long long)v);
        else
            buf_printf(out, "%s %.6f\n", c->name, (double)v * c->scale);
    }
    buf_puts(out, "# HELP fp4serve_step_phase_seconds_total Step time by phase (model timers).\n"
                  "# TYPE fp4serve_step_phase_seconds_total counter\n");
    buf_printf(out, "fp4serve_step_phase_seconds_total{phase=\"attention\"} %.6f\n",
               (double)get(&m->attn_ns) * 1e-9);
    buf_printf(out, "fp4serve_step_phase_seconds_total{phase=\"matmul\"} %.6f\n",
               (double)get(&m->matmul_ns) * 1e-9);
    buf_printf(out, "fp4serve_step_phase_seconds_total{phase=\"other\"} %.6f\n",
               (double)get(&m->other_ns) * 1e-9);
    uint64_t steps = get(&m->steps);
    double mean_batch = steps ? (double)get(&m->step_seqs) / (double)steps : 0;
    double mean_step_ms = steps ? (double)get(&m->step_ns) * 1e-6 / (double)steps : 0;
    struct {
        const char *name, *help;
        double v;
    } gauges[] = {
        {"fp4serve_batch_size_mean", "Mean sequences per step since start.", mean_batch},
        {"fp4serve_step_ms_mean", "Mean step wall time since start, in milliseconds.",
         mean_step_ms},
        {"fp4serve_queue_length", "Requests waiting for a slot.", (double)g->queued},
        {"fp4serve_running_sequences", "Sequences holding a KV slot.", (double)g->running},
        {"fp4serve_kv_slots", "KV slots (--max-batch).", (double)g->slots},
        {"fp4serve_kv_slots_free", "KV slots free.", (double)(g->slots - g->running)},
        {"fp4serve_kv_positions_used", "KV cache positions held over all slots.",
         (double)g->kv_positions},
        {"fp4serve_kv_positions_capacity", "KV cache positions (slots x context).",
         (double)g->kv_capacity},
        {"fp4serve_open_connections", "HTTP connections open now.",
         (double)atomic_load_explicit(&m->open_connections, memory_order_relaxed)},
        {"fp4serve_ready", "1 once the model is loaded.", (double)g->ready},
    };
    for (size_t i = 0; i < sizeof(gauges) / sizeof(gauges[0]); i++) {
        buf_printf(out, "# HELP %s %s\n# TYPE %s gauge\n", gauges[i].name, gauges[i].help,
                   gauges[i].name);
        if (gauges[i].v == (double)(long long)gauges[i].v)
            buf_printf(out, "%s %lld\n", gauges[i].name, (long long)gauges[i].v);
        else
            buf_printf(out, "%s %.6f\n", gauges[i].name, gauges[i].v);
    }
}
