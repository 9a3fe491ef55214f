/*
 * lgreport: statistics and output of `sweep bench`. Definitions follow
 * DESIGN.md "Metrics": TTFT = first text chunk - send; E2E = last byte -
 * send; TPOT = (E2E - TTFT) / (output_tokens - 1) per request; ITL = the
 * gaps between text chunks, pooled; Concurrency = sum(E2E) / duration.
 * Only successful measured requests enter latencies and throughputs.
 */
#include "client/lgreport.h"

#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "fileio.h"
#include "sweep.h"
#include "xalloc.h"

static double ms_between(uint64_t from, uint64_t to)
{
    return ((double)to - (double)from) / 1e6;
}

struct edge {
    uint64_t t;
    int delta; /* +1 sent, -1 ended */
};

/* Sort by time; at equal times an end (-1) comes first, so a request that
 * starts the instant another ends does not count as overlapping it. */
static int cmp_edge(const void *a, const void *b)
{
    const struct edge *x = a, *y = b;
    if (x->t != y->t)
        return x->t < y->t ? -1 : 1;
    return x->delta - y->delta; /* an end before a start at the same instant */
}

/* Most requests in flight at once, from send and end times. */
static long peak_in_flight(const struct lg_result *res)
{
    size_t n = 0;
    struct edge *e = xcalloc(2 * (res->n_total + 1), sizeof(*e));
    for (size_t i = res->n_warmup; i < res->n_total; i++) {
        const struct lg_record *r = &res->rec[i];
        if (!r->sent)
            continue;
        e[n++] = (struct edge){r->t_sent_ns, +1};
        e[n++] = (struct edge){r->t_last_ns, -1};
    }
    qsort(e, n, sizeof(*e), cmp_edge);
    long cur = 0, peak = 0;
    for (size_t i = 0; i < n; i++) {
        cur += e[i].delta;
        if (cur > peak)
            peak = cur;
    }
    free(e);
    return peak;
}

void lgr_compute(const struct lg_config *cfg, const struct lg_result *res, struct lgr_summary *sum)
{
    memset(sum, 0, sizeof(*sum));
    sum->cpu_s = -1;
    sum->open_loop = res->open_loop;
    sum->n_measured = res->n_total - res->n_warmup;
    sum->duration_s =
        res->t_end_ns > res->t_start_ns ? ms_between(res->t_start_ns, res->t_end_ns) / 1e3 : 0;

    /* one sample vector per statistic; ITL pools the gaps of every request,
     * so a long request weighs more (SGLang's and vLLM's convention) */
    struct stats_vec e2e = {0}, ttft = {0}, tpot = {0}, itl = {0}, queue = {0}, ttft_s = {0},
                     e2e_s = {0};
    /* Peak output throughput: text chunks per 1-s bucket from the start of
     * the measured phase (one token per chunk, as the other clients count) */
    size_t n_buckets = (size_t)sum->duration_s + 2;
    long *bucket = xcalloc(n_buckets, sizeof(*bucket)); /* text chunks per second */
    double e2e_total_ms = 0;
    struct stats_vec by_turn[LGR_MAX_TURNS] = {{0}}, later = {0};
    long cached = 0, cached_of = 0;
    bool any_cached = false;
    uint64_t first_sent = UINT64_MAX, last_sent = 0;
    size_t n_sent = 0;

    for (size_t i = res->n_warmup; i < res->n_total; i++) {
        const struct lg_record *r = &res->rec[i];
        if (!r->sent) {
            sum->n_unsent++;
            continue;
        }
        n_sent++;
        first_sent = r->t_sent_ns < first_sent ? r->t_sent_ns : first_sent;
        last_sent = r->t_sent_ns > last_sent ? r->t_sent_ns : last_sent;
        /* queue delay is the client's own lateness: every sent request has it,
         * failed or not */
        if (res->open_loop)
            stats_vec_push(&queue, ms_between(r->t_intended_ns, r->t_sent_ns));
        /* a failed request counts only as a failure: its tokens and times
         * would flatter the server (short E2E of an aborted stream) */
        if (r->fail != LG_OK) {
            sum->n_failed++;
            sum->n_kind[r->fail]++;
            continue;
        }
        sum->n_ok++;
        double e = ms_between(r->t_sent_ns, r->t_last_ns);
        double t = ms_between(r->t_sent_ns, r->t_first_ns);
        stats_vec_push(&e2e, e);
        stats_vec_push(&ttft, t);
        e2e_total_ms += e;
        /* TPOT needs two tokens; output_tokens is the server's usage count,
         * or the chunks counted when it sent none, never the requested length */
        if (r->output_tokens > 1)
            stats_vec_push(&tpot, (e - t) / (double)(r->output_tokens - 1));
        for (size_t k = 1; k < r->n_chunk_times; k++)
            stats_vec_push(&itl, ms_between(r->chunk_ns[k - 1], r->chunk_ns[k]));
        for (size_t k = 0; k < r->n_chunk_times; k++) {
            if (r->chunk_ns[k] < res->t_start_ns)
                continue;
            size_t b = (size_t)((r->chunk_ns[k] - res->t_start_ns) / 1000000000ull);
            if (b < n_buckets)
                bucket[b]++;
        }
        if (r->turn >= 0) {
            if (r->turn < LGR_MAX_TURNS) {
                stats_vec_push(&by_turn[r->turn], t);
                if (r->turn + 1 > sum->n_turns)
                    sum->n_turns = (int)r->turn + 1;
            }
            if (r->turn > 0)
                stats_vec_push(&later, t);
        }
        if (r->cached_tokens >= 0 && r->prompt_tokens > 0) {
            any_cached = true;
            cached += r->cached_tokens;
            cached_of += r->prompt_tokens;
        }
        if (r->usage_missing)
            sum->n_usage_missing++;
        sum->total_input += r->prompt_tokens > 0 ? r->prompt_tokens : 0;
        sum->total_output += r->output_tokens;
        if (sum->req_input >= 0)
            sum->req_input = r->req_input >= 0 ? sum->req_input + r->req_input : -1;
        sum->req_output += r->req_output;
        /* from the schedule: what a user arriving at that instant saw, the
         * client's queueing included (no coordinated omission) */
        if (res->open_loop) {
            stats_vec_push(&ttft_s, ms_between(r->t_intended_ns, r->t_first_ns));
            stats_vec_push(&e2e_s, ms_between(r->t_intended_ns, r->t_last_ns));
        }
    }
    /* throughputs count successes only, over the whole measured phase
     * (ramp-up and drain included, as SGLang and vLLM do) */
    size_t sent = sum->n_ok + sum->n_failed;
    if (n_sent > 1 && last_sent > first_sent)
        sum->achieved_rate = (double)(n_sent - 1) / (ms_between(first_sent, last_sent) / 1e3);
    sum->error_rate = sent ? (double)sum->n_failed / (double)sent : 0;
    if (sum->duration_s > 0) {
        double d = sum->duration_s;
        sum->request_throughput = (double)sum->n_ok / d;
        sum->input_throughput = (double)sum->total_input / d;
        sum->output_throughput = (double)sum->total_output / d;
        sum->total_throughput = (double)(sum->total_input + sum->total_output) / d;
        sum->concurrency = e2e_total_ms / (d * 1e3);
    }
    for (size_t b = 0; b < n_buckets; b++)
        if (bucket[b] > sum->peak_output_throughput)
            sum->peak_output_throughput = (double)bucket[b];
    sum->peak_concurrent = peak_in_flight(res);

    stats_summarize(e2e.v, e2e.n, &sum->e2e);
    stats_summarize(ttft.v, ttft.n, &sum->ttft);
    stats_summarize(tpot.v, tpot.n, &sum->tpot);
    stats_summarize(itl.v, itl.n, &sum->itl);
    stats_summarize(queue.v, queue.n, &sum->queue);
    stats_summarize(ttft_s.v, ttft_s.n, &sum->ttft_sched);
    stats_summarize(e2e_s.v, e2e_s.n, &sum->e2e_sched);
    stats_vec_release(&e2e);
    stats_vec_release(&ttft);
    stats_vec_release(&tpot);
    stats_vec_release(&itl);
    stats_vec_release(&queue);
    stats_vec_release(&ttft_s);
    stats_vec_release(&e2e_s);
    for (int k = 0; k < LGR_MAX_TURNS; k++) {
        stats_summarize(by_turn[k].v, by_turn[k].n, &sum->ttft_turn[k]);
        stats_vec_release(&by_turn[k]);
    }
    stats_summarize(later.v, later.n, &sum->ttft_later);
    stats_vec_release(&later);
    sum->cached_frac = !any_cached ? -1 : cached_of > 0 ? (double)cached / (double)cached_of : 0;
    free(bucket);
    (void)cfg;
}

/* ---- the block: Python's "{:<40} {:<10}" rows and "{:-^50}" rules ---- */

static void row_str(FILE *f, const char *label, const char *value)
{
    fprintf(f, "%-40s %-10s\n", label, value);
}

static void row_int(FILE *f, const char *label, long v)
{
    fprintf(f, "%-40s %-10ld\n", label, v);
}

static void row_num(FILE *f, const char *label, double v)
{
    fprintf(f, "%-40s %-10.2f\n", label, v);
}

/* A statistic row: "n/a" when there were no samples. */
static void row_stat(FILE *f, const char *label, const struct stats_summary *s, double v)
{
    if (s->n == 0)
        row_str(f, label, "n/a");
    else
        row_num(f, label, v);
}

/* Python's "{:-^50}": centred, the odd padding character on the right. */
static void rule(FILE *f, const char *title, char fill)
{
    int pad = 50 - (int)strlen(title);
    int left = pad > 0 ? pad / 2 : 0, right = pad > 0 ? pad - left : 0;
    for (int i = 0; i < left; i++)
        fputc(fill, f);
    fputs(title, f);
    for (int i = 0; i < right; i++)
        fputc(fill, f);
    fputc('\n', f);
}

/* One section: a rule, then "<Stat> <name> (ms):" for each statistic asked. */
static void section(FILE *f, const char *title, const char *name, const struct stats_summary *s,
                    const char *which)
{
    static const struct {
        char key;
        const char *word;
        size_t off;
    } stat[] = {
        {'m', "Mean", offsetof(struct stats_summary, mean)},
        {'d', "Median", offsetof(struct stats_summary, median)},
        {'9', "P90", offsetof(struct stats_summary, p90)},
        {'5', "P95", offsetof(struct stats_summary, p95)},
        {'1', "P99", offsetof(struct stats_summary, p99)},
        {'x', "Max", offsetof(struct stats_summary, max)},
    };
    if (title)
        rule(f, title, '-');
    for (const char *w = which; *w; w++)
        for (size_t i = 0; i < sizeof(stat) / sizeof(stat[0]); i++)
            if (stat[i].key == *w) {
                char label[96];
                snprintf(label, sizeof(label), "%s %s (ms):", stat[i].word, name);
                row_stat(f, label, s, *(const double *)((const char *)s + stat[i].off));
            }
}

/*
 * Row order and spelling follow SGLang's newest block (docs/benchmarks.md
 * §2.5), with vLLM's "Failed requests:" after "Successful requests:". Rows of
 * our own use labels that no SGLang or vLLM pattern can match by accident
 * ("Failed (kind):", "Scheduled TTFT", "Queue Delay"). SGLang's
 * "(retokenized)" and "text tokens" rows are left out: we have no tokenizer
 * and print no number we did not measure.
 */
void lgr_print(FILE *f, const struct lg_config *cfg, const struct lgr_summary *s)
{
    fputc('\n', f);
    rule(f, " Serving Benchmark Result ", '=');
    row_str(f, "Backend:", "sweep-bench");
    if (s->open_loop && cfg->request_rate <= 0)
        row_str(f, "Traffic request rate:", "trace"); /* the trace's own times */
    else if (s->open_loop)
        row_num(f, "Traffic request rate:", cfg->request_rate);
    else
        row_str(f, "Traffic request rate:", "inf");
    row_int(f, "Max request concurrency:", cfg->concurrency);
    row_int(f, "Successful requests:", (long)s->n_ok);
    row_int(f, "Failed requests:", (long)s->n_failed);
    row_num(f, "Error rate:", s->error_rate);
    for (int k = 1; k < LG_FAIL_KINDS; k++)
        if (s->n_kind[k]) {
            char label[64];
            snprintf(label, sizeof(label), "Failed (%s):", lg_fail_label((enum lg_fail)k));
            row_int(f, label, (long)s->n_kind[k]);
        }
    if (s->n_unsent)
        row_int(f, "Unsent requests:", (long)s->n_unsent);
    if (s->n_usage_missing)
        row_int(f, "Requests without usage:", (long)s->n_usage_missing);
    row_num(f, "Benchmark duration (s):", s->duration_s);
    row_int(f, "Total input tokens:", s->total_input);
    row_int(f, "Total generated tokens:", s->total_output);
    /* what was asked for beside what the server counted (usage) */
    if (s->req_input >= 0)
        row_int(f, "Requested input tokens:", s->req_input);
    row_int(f, "Requested output tokens:", s->req_output);
    if (s->open_loop)
        row_num(f, "Achieved request rate (req/s):", s->achieved_rate);
    row_num(f, "Request throughput (req/s):", s->request_throughput);
    row_num(f, "Input token throughput (tok/s):", s->input_throughput);
    row_num(f, "Output token throughput (tok/s):", s->output_throughput);
    row_num(f, "Peak output token throughput (tok/s):", s->peak_output_throughput);
    row_int(f, "Peak concurrent requests:", s->peak_concurrent);
    row_num(f, "Total token throughput (tok/s):", s->total_throughput);
    row_num(f, "Concurrency:", s->concurrency);
    if (s->cpu_s >= 0) {
        row_num(f, "Client CPU time (s):", s->cpu_s);
        if (s->total_output > 0)
            row_num(f,
                    "Client CPU per output token (us):", s->cpu_s * 1e6 / (double)s->total_output);
        if (s->n_ok + s->n_failed > 0)
            row_num(f, "Client CPU per request (us):",
                    s->cpu_s * 1e6 / (double)(s->n_ok + s->n_failed));
    }
    if (s->cached_frac >= 0) /* %.4f: a fraction, not a throughput */
        fprintf(f, "%-40s %-10.4f\n", "Cached prompt token fraction:", s->cached_frac);
    section(f, "End-to-End Latency", "E2E Latency", &s->e2e, "md951");
    section(f, "Time to First Token", "TTFT", &s->ttft, "md951");
    section(f, "Time per Output Token (excl. 1st token)", "TPOT", &s->tpot, "md951");
    section(f, "Inter-Token Latency", "ITL", &s->itl, "md951x");
    if (s->n_turns > 0) { /* multi-turn: does a resent history come back faster? */
        rule(f, "TTFT by Turn", '-');
        for (int k = 0; k < s->n_turns; k++) {
            char name[32];
            snprintf(name, sizeof(name), "TTFT turn %d", k);
            section(f, NULL, name, &s->ttft_turn[k], "d1");
        }
        section(f, NULL, "TTFT later turns", &s->ttft_later, "d1");
    }
    if (s->open_loop) {
        section(f, "Client Queue Delay", "Queue Delay", &s->queue, "md1x");
        section(f, "Latency from Intended Send", "Scheduled TTFT", &s->ttft_sched, "md951");
        section(f, NULL, "Scheduled E2E", &s->e2e_sched, "md951");
    }
    rule(f, "", '=');
}

/* ---- JSONL ---- */

static void json_ms(struct buf *b, const char *key, bool have, uint64_t from, uint64_t to)
{
    if (have)
        buf_printf(b, ",\"%s\":%.3f", key, ms_between(from, to));
    else
        buf_printf(b, ",\"%s\":null", key);
}

/* One request as a JSON line: enough to recompute every statistic of the
 * report (ITLs included) or to find the failed requests and why. */
static void record_json(struct buf *b, const struct lg_result *res, size_t i)
{
    const struct lg_record *r = &res->rec[i];
    uint64_t t0 = res->t_start_ns;
    const char *status = !r->sent ? "unsent" : r->fail == LG_OK ? "ok" : "failed";
    buf_printf(b, "{\"index\":%zu,\"warmup\":%s,\"status\":\"%s\"", i, r->warmup ? "true" : "false",
               status);
    if (r->fail != LG_OK)
        buf_printf(b, ",\"fail\":\"%s\"", lg_fail_name(r->fail));
    else
        buf_puts(b, ",\"fail\":null");
    if (!r->sent) {
        buf_puts(b, "}\n");
        return;
    }
    buf_printf(b, ",\"http_status\":%ld", r->http_status);
    buf_puts(b, ",\"error\":");
    if (r->error)
        buf_json_str(b, r->error, strlen(r->error));
    else
        buf_puts(b, "null");
    bool first = r->t_first_ns != 0;
    json_ms(b, "intended_ms", r->t_intended_ns != 0, t0, r->t_intended_ns);
    json_ms(b, "sent_ms", true, t0, r->t_sent_ns);
    json_ms(b, "queue_ms", r->t_intended_ns != 0, r->t_intended_ns, r->t_sent_ns);
    json_ms(b, "ttft_ms", first, r->t_sent_ns, r->t_first_ns);
    json_ms(b, "e2e_ms", true, r->t_sent_ns, r->t_last_ns);
    if (first && r->output_tokens > 1)
        buf_printf(b, ",\"tpot_ms\":%.4f",
                   ms_between(r->t_first_ns, r->t_last_ns) / (double)(r->output_tokens - 1));
    else
        buf_puts(b, ",\"tpot_ms\":null");
    buf_printf(
        b, ",\"prompt_tokens\":%ld,\"output_tokens\":%ld,\"chunks\":%ld,\"usage_missing\":%s",
        r->prompt_tokens, r->output_tokens, r->n_chunks, r->usage_missing ? "true" : "false");
    buf_printf(b, ",\"input_requested\":%ld,\"output_requested\":%ld", r->req_input, r->req_output);
    if (r->cached_tokens >= 0)
        buf_printf(b, ",\"cached_tokens\":%ld", r->cached_tokens);
    if (r->turn >= 0)
        buf_printf(b, ",\"turn\":%ld", r->turn);
    buf_puts(b, ",\"itl_ms\":[");
    for (size_t k = 1; k < r->n_chunk_times; k++)
        buf_printf(b, k > 1 ? ",%.3f" : "%.3f", ms_between(r->chunk_ns[k - 1], r->chunk_ns[k]));
    buf_puts(b, "]}\n");
}

int lgr_write_jsonl(const char *path, const struct lg_result *res, struct err *err)
{
    struct buf b;
    buf_init(&b, (size_t)2 << 30);
    for (size_t i = 0; i < res->n_total; i++)
        record_json(&b, res, i);
    int rc = 0;
    if (b.toobig)
        rc = -1, err_set(err, RN_ERR_ENV, "%s: per-request records passed 2 GiB", path);
    else
        rc = file_write_atomic(path, b.data ? b.data : "", b.len, err, RN_ERR_ENV);
    buf_release(&b);
    return rc;
}
