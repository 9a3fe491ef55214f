/*
 * goodput: count the builtin client's per-request records against latency
 * targets (goodput.h). Streams the file line by line: a point of a million
 * requests is a large file.
 */
#include "analysis/goodput.h"

#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "strutil.h"
#include "sweep.h"
#include "xalloc.h"

#define MAX_LINE            ((size_t)64 << 20) /* one record; ITL arrays of long outputs are big */
#define GP_EXPORT_MAX_BYTES (256LL << 20)      /* a detailed export larger is not read */

bool gp_slo_any(const struct gp_slo *slo)
{
    return slo && (slo->ttft_ms > 0 || slo->tpot_ms > 0 || slo->e2e_ms > 0);
}

/* The number at key, or NAN when absent or null. */
static double num(json_t *j, const char *key)
{
    json_t *v = json_object_get(j, key);
    return json_is_number(v) ? json_number_value(v) : NAN;
}

/* Within target t (0 = none)? A latency that does not exist (the TPOT of a
 * one-token answer) cannot miss its target. */
static bool within(double v, double t)
{
    return t <= 0 || isnan(v) || v <= t;
}

/* One record into c; NULL, or what is wrong with it. */
static const char *count_record(json_t *j, const struct gp_slo *slo, struct gp_count *c)
{
    json_t *st = json_object_get(j, "status");
    if (!json_is_object(j) || !json_is_string(st))
        return "not a request record (no \"status\")";
    if (json_is_true(json_object_get(j, "warmup")) || strcmp(json_string_value(st), "unsent") == 0)
        return NULL;
    double sent = num(j, "sent_ms") / 1e3, e2e = num(j, "e2e_ms");
    if (isnan(sent) || isnan(e2e))
        return "a sent request without \"sent_ms\" and \"e2e_ms\"";
    c->first_sent_s = c->n_sent == 0 || sent < c->first_sent_s ? sent : c->first_sent_s;
    c->last_sent_s = c->n_sent == 0 || sent > c->last_sent_s ? sent : c->last_sent_s;
    c->end_s = fmax(c->end_s, sent + e2e / 1e3);
    c->n_sent++;
    if (strcmp(json_string_value(st), "ok") != 0)
        return NULL;
    c->n_ok++;
    double in = num(j, "input_requested"), out = num(j, "output_requested");
    if (c->req_input >= 0)
        c->req_input = !isnan(in) && in >= 0 ? c->req_input + (long)in : -1;
    c->req_output += isnan(out) ? 0 : (long)out;
    if (slo && (!within(num(j, "ttft_ms"), slo->ttft_ms) ||
                !within(num(j, "tpot_ms"), slo->tpot_ms) || !within(e2e, slo->e2e_ms)))
        return NULL;
    c->n_met++;
    double tok = num(j, "output_tokens");
    c->out_met += isnan(tok) ? 0 : (long)tok;
    return NULL;
}

int gp_count_jsonl(const char *path, const struct gp_slo *slo, struct gp_count *c, struct err *err)
{
    memset(c, 0, sizeof(*c));
    FILE *f = fopen(path, "re");
    if (!f)
        return err_set(err, RN_ERR_ENV, "%s: %s", path, strerror(errno)), -1;
    char *line = NULL;
    size_t cap = 0;
    ssize_t n;
    int rc = 0;
    for (long no = 1; rc == 0 && (n = getline(&line, &cap, f)) >= 0; no++) {
        if ((size_t)n > MAX_LINE) {
            rc = err_set(err, RN_ERR_ENV, "%s:%ld: a record over %zu bytes", path, no, MAX_LINE);
            break;
        }
        if (n == 0 || (n == 1 && line[0] == '\n'))
            continue;
        json_error_t je;
        json_t *j = json_loadb(line, (size_t)n, 0, &je);
        for (char *t = je.text; !j && *t; t++) /* jansson quotes the input: keep one line */
            *t = (unsigned char)*t < 0x20 ? '?' : *t;
        const char *why = j ? count_record(j, slo, c) : je.text;
        json_decref(j);
        if (why)
            rc = err_set(err, RN_ERR_ENV, "%s:%ld: %s", path, no, why);
    }
    if (rc == 0 && ferror(f))
        rc = err_set(err, RN_ERR_ENV, "%s: %s", path, strerror(errno));
    free(line); /* from getline: libc's allocator */
    fclose(f);
    return rc ? -1 : 0;
}

/* Element i of array a as a number (NAN when a is absent or it is not one). */
static double at(json_t *a, size_t i)
{
    json_t *v = json_array_get(a, i);
    return json_is_number(v) ? json_number_value(v) : NAN;
}

int gp_count_vllm(const char *path, json_t *j, const struct gp_slo *slo, struct gp_count *c,
                  struct err *err)
{
    json_t *tt = json_object_get(j, "ttfts"), *itl = json_object_get(j, "itls");
    json_t *ol = json_object_get(j, "output_lens"), *er = json_object_get(j, "errors");
    json_t *lat = json_object_get(j, "latencies");
    memset(c, 0, sizeof(*c));
    c->from_export = true;
    c->req_input = -1;
    if (!json_is_array(tt) || !json_is_array(ol))
        return 1;
    size_t n = json_array_size(ol);
    if (json_array_size(tt) != n || (itl && json_array_size(itl) != n) ||
        (er && json_array_size(er) != n) || (lat && json_array_size(lat) != n))
        return err_set(err, RN_ERR_ENV,
                       "%s: per-request arrays of different lengths (ttfts, itls, output_lens, "
                       "errors, latencies)",
                       path),
               -1;
    for (size_t i = 0; i < n; i++) {
        c->n_sent++;
        const char *e = json_string_value(json_array_get(er, i));
        if (e && *e)
            continue; /* a failed request: vLLM keeps its slot with the error */
        double ttft = at(tt, i) * 1e3, out = at(ol, i), e2e = at(lat, i) * 1e3;
        if (isnan(ttft) || isnan(out))
            return err_set(err, RN_ERR_ENV, "%s: request %zu has no ttft or output_len", path, i),
                   -1;
        if (isnan(e2e)) { /* older exports: E2E = TTFT + the inter-token gaps */
            e2e = ttft;
            json_t *gaps = json_array_get(itl, i);
            for (size_t k = 0; k < json_array_size(gaps); k++)
                e2e += at(gaps, k) * 1e3;
        }
        c->n_ok++;
        double tpot = out > 1 ? (e2e - ttft) / (out - 1) : NAN;
        if (slo && (!within(ttft, slo->ttft_ms) || !within(tpot, slo->tpot_ms) ||
                    !within(e2e, slo->e2e_ms)))
            continue;
        c->n_met++;
        c->out_met += (long)out;
    }
    c->end_s = json_number_value(json_object_get(j, "duration"));
    return 0;
}

void gp_metrics(const struct gp_count *c, const struct gp_slo *slo, double offered_rate,
                struct metric_set *ms)
{
    if (c->req_input >= 0)
        mset_set(ms, "requested_input_tokens", (double)c->req_input);
    if (!c->from_export)
        mset_set(ms, "requested_output_tokens", (double)c->req_output);
    if (offered_rate > 0 && !c->from_export) {
        mset_set(ms, "offered_rate", offered_rate);
        if (c->n_sent > 1 && c->last_sent_s > c->first_sent_s)
            mset_set(ms, "achieved_rate",
                     (double)(c->n_sent - 1) / (c->last_sent_s - c->first_sent_s));
    }
    if (!gp_slo_any(slo) || c->n_sent == 0)
        return;
    /* the records' own span: the block's duration by the same definition
     * (measured start to the end of the last request), but not rounded */
    double d = c->end_s;
    mset_set(ms, "slo_attainment", (double)c->n_met / (double)c->n_sent);
    if (d > 0) {
        mset_set(ms, "goodput_req_s", (double)c->n_met / d);
        mset_set(ms, "goodput_tok_s", (double)c->out_met / d);
    }
}

int gp_point(const char *log_path, const struct gp_slo *slo, double offered_rate,
             struct metric_set *ms, struct err *err)
{
    size_t n = strlen(log_path);
    if (n < 4 || strcmp(log_path + n - 4, ".log") != 0)
        return 0;
    char *path = xasprintf("%.*s.jsonl", (int)(n - 4), log_path);
    struct gp_count c;
    int rc = 0;
    if (access(path, F_OK) == 0) {
        /* the builtin client's records; an SGLang export of the same name
         * carries no per-request status and is left alone */
        FILE *f = fopen(path, "re");
        char head[4096] = "";
        bool records = f && fgets(head, sizeof(head), f) && strstr(head, "\"status\"");
        if (f)
            fclose(f);
        rc = records ? gp_count_jsonl(path, slo, &c, err) : 1;
        if (rc == 0)
            gp_metrics(&c, slo, offered_rate, ms);
    } else if (gp_slo_any(slo)) {      /* a command client's detailed vLLM export */
        path[strlen(path) - 1] = '\0'; /* X.json */
        json_error_t je;
        struct stat st;
        bool small = stat(path, &st) == 0 && st.st_size <= GP_EXPORT_MAX_BYTES;
        json_t *j = small ? json_load_file(path, 0, &je) : NULL;
        rc = j ? gp_count_vllm(path, j, slo, &c, err) : 1;
        if (rc == 0)
            gp_metrics(&c, slo, offered_rate, ms);
        json_decref(j);
    }
    free(path);
    return rc < 0 ? -1 : 0;
}
