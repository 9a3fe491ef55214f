/*
 * metric: the canonical names table and a small ordered name -> value set.
 * Sets hold a few dozen entries, so lookups are linear.
 */
#include "store/metric.h"

#include <stdlib.h>
#include <string.h>

#include "xalloc.h"

#define LAT(stat, what, label)                                                                     \
    {                                                                                              \
        stat "_" what "_ms", "ms", label                                                           \
    }
#define LAT5(what, label)                                                                          \
    LAT("mean", what, "mean " label), LAT("median", what, "median " label),                        \
        LAT("p90", what, "90th percentile " label), LAT("p95", what, "95th percentile " label),    \
        LAT("p99", what, "99th percentile " label)

static const struct metric_def defs[] = {
    {"successful_requests", "requests", "requests that completed with [DONE] or a finish_reason"},
    {"failed_requests", "requests", "requests that errored, stalled, or ended truncated"},
    {"duration_s", "s", "measured wall time, first send to last completion"},
    {"total_input_tokens", "tokens", "prompt tokens over successful requests"},
    {"total_output_tokens", "tokens", "generated tokens over successful requests"},
    {"request_throughput", "req/s", "successful requests / duration"},
    {"input_throughput", "tok/s", "input tokens / duration"},
    {"output_throughput", "tok/s", "output tokens / duration"},
    {"total_throughput", "tok/s", "(input + output tokens) / duration"},
    {"achieved_concurrency", "", "achieved concurrency: sum of E2E latencies / duration"},
    LAT5("ttft", "time to first token (request sent -> first chunk carrying text)"),
    LAT5("tpot", "time per output token, (E2E - TTFT) / (output tokens - 1)"),
    LAT5("itl", "inter-token latency (gaps between content chunks, pooled)"),
    LAT5("e2e", "end-to-end latency (request sent -> last byte)"),
    {"max_itl_ms", "ms", "largest inter-token gap"},
    /* from the builtin client's per-request records (analysis/goodput.c) */
    {"requested_input_tokens", "tokens", "prompt lengths asked for, successful requests"},
    {"requested_output_tokens", "tokens", "max_tokens asked for, successful requests"},
    {"offered_rate", "req/s", "open-loop arrival rate the point asked for"},
    {"achieved_rate", "req/s", "arrival rate sent: (sent - 1) / (last send - first send)"},
    {"slo_attainment", "", "fraction of sent requests meeting every analysis.slo target"},
    {"goodput_req_s", "req/s", "requests meeting every target / duration"},
    {"goodput_tok_s", "tok/s", "output tokens of requests meeting every target / duration"},
    /* prefix caching (builtin client: usage.prompt_tokens_details, multi-turn turns) */
    {"cached_token_frac", "", "prompt tokens the server reported cached / prompt tokens"},
    {"median_ttft_first_turn_ms", "ms", "median TTFT of multi-turn sessions' first turns"},
    {"median_ttft_later_turns_ms", "ms", "median TTFT of every later turn (history resent)"},
    /* energy: power sampled while the point ran (analysis/power.c) */
    {"mean_power_w", "W", "mean power drawn while the point ran (GPUs the server uses, or RAPL)"},
    {"energy_j", "J", "mean power x duration_s"},
    {"j_per_token", "J/token", "energy_j / total_output_tokens"},
};

static const char *names[sizeof(defs) / sizeof(defs[0]) + 1];

const struct metric_def *metric_defs(size_t *n)
{
    *n = sizeof(defs) / sizeof(defs[0]);
    return defs;
}

const struct metric_def *metric_find(const char *name)
{
    for (size_t i = 0; i < sizeof(defs) / sizeof(defs[0]); i++)
        if (strcmp(defs[i].name, name) == 0)
            return &defs[i];
    return NULL;
}

const char *const *metric_names(void)
{
    /* filled on first use; the table is constant, so racing fills agree */
    if (!names[0])
        for (size_t i = 0; i < sizeof(defs) / sizeof(defs[0]); i++)
            names[i] = defs[i].name;
    return names;
}

void mset_init(struct metric_set *s)
{
    *s = (struct metric_set){0};
}

void mset_release(struct metric_set *s)
{
    for (size_t i = 0; i < s->n; i++)
        free(s->m[i].name);
    free(s->m);
    mset_init(s);
}

void mset_set(struct metric_set *s, const char *name, double value)
{
    for (size_t i = 0; i < s->n; i++)
        if (strcmp(s->m[i].name, name) == 0) {
            s->m[i].value = value;
            return;
        }
    XGROW(s->m, s->cap, s->n + 1);
    s->m[s->n].name = xstrdup(name);
    s->m[s->n].value = value;
    s->n++;
}

bool mset_get(const struct metric_set *s, const char *name, double *value)
{
    for (size_t i = 0; i < s->n; i++)
        if (strcmp(s->m[i].name, name) == 0) {
            if (value)
                *value = s->m[i].value;
            return true;
        }
    return false;
}

void mset_copy(struct metric_set *dst, const struct metric_set *src)
{
    mset_init(dst);
    for (size_t i = 0; i < src->n; i++)
        mset_set(dst, src->m[i].name, src->m[i].value);
}
