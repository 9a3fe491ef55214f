/*
 * miniclient: a scripted benchmark client for the run tests. It sends P
 * streaming completions to a fakeserver with at most C in flight, then reads
 * the server-side latencies from the fakeserver's /stats and prints them as
 * an SGLang bench_serving result block. Deliberately independent of
 * `sweep bench`, so the supervision tests do not rest on the load generator.
 *
 *   miniclient --url URL -c C -n P [--input-len N] [--output-len N]
 */
#include <curl/curl.h>
#include <jansson.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "opts.h"
#include "timeutil.h"
#include "xalloc.h"

struct job {
    const char *url; /* base url */
    long prompts, input_len, output_len;
    atomic_long next;   /* next request index to send */
    atomic_long ok;     /* requests answered 200 with a full stream */
    atomic_long failed; /* everything else */
    atomic_long tokens; /* token events received */
};

static size_t sink(char *data, size_t size, size_t nmemb, void *user)
{
    buf_append(user, data, size * nmemb);
    return size * nmemb;
}

static long count(const char *hay, const char *needle)
{
    long n = 0;
    for (const char *s = hay; s && (s = strstr(s, needle)); s += strlen(needle))
        n++;
    return n;
}

/* One request: a streaming completion; the stream must end with [DONE]. */
static void one_request(struct job *j, CURL *c, struct buf *body, const char *payload)
{
    char *url = xasprintf("%s/v1/completions", j->url);
    struct curl_slist *h = curl_slist_append(NULL, "Content-Type: application/json");
    buf_reset(body);
    curl_easy_reset(c);
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_NOPROXY, "*");
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
    curl_easy_setopt(c, CURLOPT_POSTFIELDS, payload);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, sink);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, body);
    long code = 0;
    if (curl_easy_perform(c) == CURLE_OK)
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code);
    if (code == 200 && body->data && strstr(body->data, "data: [DONE]")) {
        atomic_fetch_add(&j->ok, 1);
        atomic_fetch_add(&j->tokens, count(body->data, "\"text\""));
    } else {
        atomic_fetch_add(&j->failed, 1);
    }
    curl_slist_free_all(h);
    free(url);
}

static void *worker(void *arg)
{
    struct job *j = arg;
    CURL *c = curl_easy_init();
    struct buf body, payload;
    buf_init(&body, 1 << 20);
    buf_init(&payload, 1 << 20);
    buf_printf(&payload, "{\"prompt\":[");
    for (long i = 0; i < j->input_len; i++)
        buf_printf(&payload, "%s%ld", i ? "," : "", 1 + i % 1000);
    buf_printf(&payload, "],\"max_tokens\":%ld,\"stream\":true}", j->output_len);
    while (atomic_fetch_add(&j->next, 1) < j->prompts)
        one_request(j, c, &body, payload.data);
    buf_release(&body);
    buf_release(&payload);
    curl_easy_cleanup(c);
    return NULL;
}

static json_t *http_json(const char *base, const char *path, int post)
{
    char *url = xasprintf("%s%s", base, path);
    CURL *c = curl_easy_init();
    struct buf body;
    buf_init(&body, 16 << 20);
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_NOPROXY, "*");
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, sink);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &body);
    if (post)
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, "");
    json_t *j = NULL;
    if (curl_easy_perform(c) == CURLE_OK && body.data)
        j = json_loads(body.data, 0, NULL);
    buf_release(&body);
    curl_easy_cleanup(c);
    free(url);
    return j;
}

static double num(json_t *o, const char *k)
{
    return json_number_value(json_object_get(o, k));
}

int main(int argc, char **argv)
{
    const char *url = NULL;
    long conc = 1, prompts = 1, input_len = 8, output_len = 16;
    const struct opt opts[] = {
        {"url", 0, OPT_STR, &url, "URL", "server base url"},
        {"concurrency", 'c', OPT_LONG, &conc, "C", "requests in flight", 1, 1024},
        {"prompts", 'n', OPT_LONG, &prompts, "P", "requests to send", 1, 1000000},
        {"input-len", 0, OPT_LONG, &input_len, "N", "prompt tokens", 1, 100000},
        {"output-len", 0, OPT_LONG, &output_len, "N", "max_tokens", 1, 100000},
    };
    struct err err;
    err_init(&err);
    int rc = opt_parse(argc - 1, argv + 1, opts, 5, NULL, &err, 2);
    if (rc != 0 || !url) {
        fprintf(stderr, "miniclient: %s\n", rc < 0 ? err.msg : "usage: --url URL -c C -n P");
        return 2;
    }
    curl_global_init(CURL_GLOBAL_DEFAULT);
    json_decref(http_json(url, "/stats/reset", 1));
    struct job j = {
        .url = url, .prompts = prompts, .input_len = input_len, .output_len = output_len};
    pthread_t *t = xcalloc((size_t)conc, sizeof(*t));
    double t0 = clock_ms();
    for (long i = 0; i < conc; i++)
        pthread_create(&t[i], NULL, worker, &j);
    for (long i = 0; i < conc; i++)
        pthread_join(t[i], NULL);
    double dur_s = (clock_ms() - t0) / 1000.0;
    free(t);
    json_t *st = http_json(url, "/stats", 0);
    if (!st) {
        fprintf(stderr, "miniclient: no /stats from %s\n", url);
        return 1;
    }
    long ok = atomic_load(&j.ok), tokens = atomic_load(&j.tokens);
    /* achieved concurrency: sum of latencies over the duration */
    double conc_got = num(st, "mean_e2e_ms") * (double)ok / 1000.0 / dur_s;
    const char *f = "%-40s %-10.2f\n";
    printf("============ Serving Benchmark Result ============\n");
    printf("%-40s %-10ld\n", "Successful requests:", ok);
    printf("%-40s %-10ld\n", "Failed requests:", atomic_load(&j.failed));
    printf(f, "Benchmark duration (s):", dur_s);
    printf("%-40s %-10ld\n", "Total input tokens:", ok * input_len);
    printf("%-40s %-10ld\n", "Total generated tokens:", tokens);
    printf(f, "Request throughput (req/s):", (double)ok / dur_s);
    printf(f, "Input token throughput (tok/s):", (double)(ok * input_len) / dur_s);
    printf(f, "Output token throughput (tok/s):", (double)tokens / dur_s);
    printf(f, "Total token throughput (tok/s):", (double)(ok * input_len + tokens) / dur_s);
    printf(f, "Concurrency:", conc_got);
    printf("----------------End-to-End Latency----------------\n");
    printf(f, "Mean E2E Latency (ms):", num(st, "mean_e2e_ms"));
    printf(f, "Median E2E Latency (ms):", num(st, "median_e2e_ms"));
    printf(f, "P90 E2E Latency (ms):", num(st, "p90_e2e_ms"));
    printf(f, "P99 E2E Latency (ms):", num(st, "p99_e2e_ms"));
    printf("---------------Time to First Token----------------\n");
    printf(f, "Mean TTFT (ms):", num(st, "mean_ttft_ms"));
    printf(f, "Median TTFT (ms):", num(st, "median_ttft_ms"));
    printf(f, "P99 TTFT (ms):", num(st, "p99_ttft_ms"));
    printf("-----Time per Output Token (excl. 1st token)------\n");
    printf(f, "Mean TPOT (ms):", num(st, "mean_tpot_ms"));
    printf(f, "Median TPOT (ms):", num(st, "median_tpot_ms"));
    printf(f, "P99 TPOT (ms):", num(st, "p99_tpot_ms"));
    printf("==================================================\n");
    json_decref(st);
    curl_global_cleanup();
    return ok > 0 ? 0 : 1;
}
