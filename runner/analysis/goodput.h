/*
 * goodput: what the builtin client's per-request records (X.jsonl beside
 * the point's log X.log) say beyond the result block: the requests that
 * met every latency target of analysis.slo (vLLM's goodput: a request
 * counts when its TTFT, TPOT and E2E are each within their target), the
 * lengths asked for beside those served, and the achieved arrival rate of
 * an open-loop point. Points of clients that write no such file get none
 * of these columns.
 */
#ifndef RUNNER_GOODPUT_H
#define RUNNER_GOODPUT_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "err.h"

#include "store/metric.h"

/* Latency targets, ms; 0 = no target on that latency. */
struct gp_slo {
    double ttft_ms, tpot_ms, e2e_ms;
};

/* The measured requests of one point, as the records give them. */
struct gp_count {
    size_t n_sent;       /* measured requests sent (ok or failed) */
    size_t n_ok;         /* of them, successful */
    size_t n_met;        /* successful and within every target */
    long out_met;        /* output tokens of the n_met requests */
    long req_input;      /* requested prompt lengths of the successful ones; -1 unknown */
    long req_output;     /* requested max_tokens of the successful ones */
    double end_s;        /* end of the last measured request, s from the measured start */
    double first_sent_s; /* first and last send, s from the measured start */
    double last_sent_s;
    bool from_export; /* counted from a tool's export: no requested lengths, no sends */
};

/* true when some target is set. */
bool gp_slo_any(const struct gp_slo *slo);

/*
 * Count the measured (non-warmup) records of the JSONL file at path against
 * slo (NULL: no targets, so n_met counts every success). Returns 0, or -1
 * with err set (RN_ERR_ENV) when the file cannot be read, or a line is not
 * a record ("path:LINE: ...").
 */
int gp_count_jsonl(const char *path, const struct gp_slo *slo, struct gp_count *c, struct err *err);

/*
 * Add the columns of one point to ms: requested_input_tokens,
 * requested_output_tokens; with offered_rate > 0, offered_rate and
 * achieved_rate ((sent - 1) / (last send - first send)); with targets,
 * slo_attainment (met / sent), goodput_req_s and goodput_tok_s over the
 * point's duration (the records' span: measured start to the last end, the
 * block's duration_s unrounded).
 */
void gp_metrics(const struct gp_count *c, const struct gp_slo *slo, double offered_rate,
                struct metric_set *ms);

/*
 * Count vLLM's detailed export (`bench serve --save-result --save-detailed`:
 * per-request "ttfts", "itls", "output_lens", "errors" and, in newer
 * versions, "latencies", seconds) against slo. Returns 1 when j is not such
 * an export (no per-request arrays), 0 when counted, -1 with err set when
 * its arrays disagree in length or hold something else than numbers.
 */
int gp_count_vllm(const char *path, json_t *j, const struct gp_slo *slo, struct gp_count *c,
                  struct err *err);

/*
 * For the point whose log is log_path ("DIR/c16-n48.log"): read DIR/c16-n48.jsonl
 * (the builtin client's records) when it exists, else a detailed vLLM
 * export DIR/c16-n48.json, and add gp_metrics to ms. Returns 0 (also when there is no
 * such file), or -1 with err set when it exists but cannot be read.
 */
int gp_point(const char *log_path, const struct gp_slo *slo, double offered_rate,
             struct metric_set *ms, struct err *err);

#endif
