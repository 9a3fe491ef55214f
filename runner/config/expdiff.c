/*
 * expdiff: comparing two resolved variants key by key through the schema
 * table (schema.c), so a field is compared the way it is loaded and dumped.
 */
#include "config/expdiff.h"

#include <stdbool.h>
#include <string.h>

#include "config/schema.h"

/* The settings that go into what a point measures (its key, plan.h),
 * in the order a difference is reported. */
static const char *const point_keys[] = {
    "server.engine",
    "server.command",
    "server.model",
    "server.host",
    "server.flags",
    "server.args",
    "server.env",
    "bench.tool",
    "bench.command",
    "bench.input_len",
    "bench.output_len",
    "bench.warmup",
    "bench.request_rate",
    /* the workload (lengths above may be distributions) */
    "bench.endpoint",
    "bench.rate_kind",
    "bench.dataset.kind",
    "bench.dataset.path",
    "bench.dataset.seed",
    "bench.dataset.groups",
    "bench.dataset.prefix_len",
    "bench.dataset.questions",
    "bench.dataset.question_len",
    "bench.dataset.sessions",
    "bench.dataset.turns",
    "bench.dataset.turn_len",
    "bench.dataset.think_s",
    "bench.dataset.time_scale",
    "bench.dataset.block_tokens",
    "bench.reset_cache",
};

static bool str_eq(const char *a, const char *b)
{
    return (!a && !b) || (a && b && strcmp(a, b) == 0);
}

static bool vec_eq(const struct strvec *a, const struct strvec *b)
{
    if (a->n != b->n)
        return false;
    for (size_t i = 0; i < a->n; i++)
        if (strcmp(a->v[i], b->v[i]) != 0)
            return false;
    return true;
}

/* key: value maps; flags are compared in order (they become argv in file
 * order), env entries in any order (keys are unique). */
static bool kv_eq(const struct exp_kv *a, size_t na, const struct exp_kv *b, size_t nb,
                  bool ordered)
{
    if (na != nb)
        return false;
    for (size_t i = 0; i < na; i++) {
        size_t j = i;
        if (!ordered)
            for (j = 0; j < nb && strcmp(a[i].key, b[j].key) != 0; j++)
                ;
        if (j == nb || strcmp(a[i].key, b[j].key) != 0 || strcmp(a[i].value, b[j].value) != 0)
            return false;
    }
    return true;
}

/* Whether variant-level key k has the same value in a and b. */
static bool same_value(const struct schema_key *k, const struct exp_variant *a,
                       const struct exp_variant *b)
{
    const char *pa = (const char *)a + k->off, *pb = (const char *)b + k->off;
    switch (k->type) {
    case K_STR:
    case K_TMPL:
    case K_NAME:
    case K_HTTPPATH:
    case K_CHOICE:
    case K_METRIC:
        return str_eq(*(char *const *)pa, *(char *const *)pb);
    case K_ENUM:
        return *(const int *)pa == *(const int *)pb;
    case K_INT:
    case K_PORT:
        return *(const long *)pa == *(const long *)pb;
    case K_NUM:
        return *(const double *)pa == *(const double *)pb;
    case K_TMPLLIST:
    case K_METRICLIST:
    case K_CHOICELIST:
        return vec_eq((const struct strvec *)pa, (const struct strvec *)pb);
    case K_FLAGS:
    case K_ENV:
        return kv_eq(*(struct exp_kv *const *)pa, *(const size_t *)((const char *)a + k->off_n),
                     *(struct exp_kv *const *)pb, *(const size_t *)((const char *)b + k->off_n),
                     k->type == K_FLAGS);
    case K_LEN: /* the mean and, for a distribution, its text form */
        return *(const long *)pa == *(const long *)pb &&
               str_eq(*(char *const *)((const char *)a + k->off_n),
                      *(char *const *)((const char *)b + k->off_n));
    default:
        return false; /* not a point-defining type: a table mistake shows as a difference */
    }
}

const char *expdiff_variant(const struct exp_variant *a, const struct exp_variant *b)
{
    for (size_t i = 0; i < sizeof(point_keys) / sizeof(point_keys[0]); i++) {
        const struct schema_key *k = schema_find(point_keys[i]);
        if (!k || !(k->flags & KF_VAR) || !same_value(k, a, b))
            return point_keys[i];
    }
    return NULL;
}

/* Each pattern of a is in b with the same regex, and as many. */
static bool patterns_eq(const struct exp_metrics *a, const struct exp_metrics *b)
{
    if (a->n_patterns != b->n_patterns)
        return false;
    for (size_t i = 0; i < a->n_patterns; i++) {
        size_t j = 0;
        while (j < b->n_patterns && strcmp(a->patterns[i].name, b->patterns[j].name) != 0)
            j++;
        if (j == b->n_patterns || strcmp(a->patterns[i].regex, b->patterns[j].regex) != 0)
            return false;
    }
    return true;
}

const char *expdiff_rules(const struct exp_variant *a, const struct exp_variant *b)
{
    const struct exp_metrics *ma = &a->metrics, *mb = &b->metrics;
    if (!str_eq(ma->preset, mb->preset))
        return "metrics.preset";
    if (!patterns_eq(ma, mb))
        return "metrics.patterns";
    if (!kv_eq(ma->server_map, ma->n_server_map, mb->server_map, mb->n_server_map, false))
        return "metrics.server_map";
    return NULL;
}
