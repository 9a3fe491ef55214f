/*
 * prom: fp4serve's counters and histograms and the Prometheus text
 * exposition of GET /metrics. Counters and histogram buckets are C11
 * atomics: the scheduler and the HTTP thread add to them without locks,
 * and a scrape reads them as they are. Gauges that belong to the scheduler
 * (queue, running, KV) are passed in as a snapshot when rendering.
 * Histograms follow vLLM's (names with our prefix, its buckets, base units:
 * seconds and tokens). Every series carries a model_name label, as vLLM's
 * do, and vLLM's scheduler and request series are there under our prefix
 * (num_requests_running/waiting, request_success_total{finished_reason},
 * prefill/decode/inference time), so its dashboards' queries work with the
 * prefix renamed (docs/formats.md §5 maps each series to vLLM's and
 * SGLang's names).
 */
#ifndef ENGINE_PROM_H
#define ENGINE_PROM_H

#include <stdatomic.h>
#include <stdint.h>

#include "buf.h"

/* Routes whose responses are counted by status. */
enum prom_route {
    PROM_COMPLETIONS = 0,
    PROM_CHAT,
    PROM_HEALTH,
    PROM_MODELS,
    PROM_METRICS,
    PROM_TOKENIZE, /* POST /tokenize and /detokenize */
    PROM_OTHER,    /* unknown routes and refusals before routing (413, 431, ...) */
    PROM_N_ROUTES,
};

/* Why a generation ended. */
enum prom_finish {
    PROM_FIN_STOP = 0,  /* end-of-generation token or stop string */
    PROM_FIN_LENGTH,    /* max_tokens reached */
    PROM_FIN_CANCELLED, /* the client went away */
    PROM_FIN_ABORTED,   /* server shutdown or an internal error */
    PROM_N_FINISH,
};

/* HTTP statuses kept apart; others are counted under "other". */
#define PROM_N_STATUS 12

/* The per-request histograms (vLLM's vllm:NAME as fp4serve_NAME). */
enum prom_hist_id {
    PROM_H_TTFT = 0, /* time_to_first_token_seconds: submit to first token */
    PROM_H_ITL,      /* inter_token_latency_seconds: between tokens of one request */
    PROM_H_E2E,      /* e2e_request_latency_seconds: submit to finish */
    PROM_H_QUEUE,    /* request_queue_time_seconds: submit to admission (a KV slot) */
    PROM_H_PROMPT,   /* request_prompt_tokens */
    PROM_H_GEN,      /* request_generation_tokens */
    PROM_H_PREFILL,  /* request_prefill_time_seconds: admission to first token */
    PROM_H_DECODE,   /* request_decode_time_seconds: first token to finish */
    PROM_H_INFER,    /* request_inference_time_seconds: admission to finish */
    PROM_N_HIST,
};

#define PROM_MAX_LE 24 /* upper bounds per histogram, +Inf not counted */

/* One histogram. Observations are integers in the histogram's unit
 * (nanoseconds or tokens); bounds are kept in that unit too, so a value on
 * a bound lands in that bound's bucket without rounding doubt. */
struct prom_hist {
    int n_le;                                      /* bounds in use */
    double scale;                                  /* unit to base unit: 1e-9 (ns) or 1 */
    double le[PROM_MAX_LE];                        /* (n_le) ascending bounds, base unit */
    uint64_t le_units[PROM_MAX_LE];                /* (n_le) the same in the unit */
    atomic_uint_least64_t bucket[PROM_MAX_LE + 1]; /* per bucket, not cumulative; [n_le] = +Inf */
    atomic_uint_least64_t sum;                     /* in the unit */
};

struct prom {
    atomic_uint_least64_t responses[PROM_N_ROUTES][PROM_N_STATUS]; /* by route and status */
    atomic_uint_least64_t finished[PROM_N_FINISH];                 /* generations by reason */
    atomic_uint_least64_t prompt_tokens;    /* prompt tokens of admitted requests */
    atomic_uint_least64_t generated_tokens; /* sampled tokens (EOG included) */
    atomic_uint_least64_t steps;            /* model steps */
    atomic_uint_least64_t step_seqs;        /* sum over steps of the sequences in it */
    atomic_uint_least64_t weight_passes;    /* forward passes over the weights (model.h) */
    atomic_uint_least64_t
        weight_bytes_read;              /* weight bytes the steps read (model_last_weight_bytes) */
    atomic_uint_least64_t expert_acts;  /* MoE: (layer, expert) weight reads over steps */
    atomic_uint_least64_t expert_bytes; /* MoE: expert weight bytes read over steps */
    atomic_uint_least64_t last_weight_bytes; /* the last step's weight bytes (a gauge) */
    atomic_uint_least64_t last_experts;      /* the last step's expert reads (a gauge) */
    atomic_uint_least64_t decode_rows;       /* decode tokens over all steps */
    atomic_uint_least64_t prefill_rows;      /* prompt tokens run through the model */
    atomic_uint_least64_t step_ns;           /* wall time of model_step calls */
    atomic_uint_least64_t do_steps;          /* the same three over steps that ran no */
    atomic_uint_least64_t do_step_seqs;      /*   prompt token (decode-only): their mean */
    atomic_uint_least64_t do_step_ns;        /*   is the decode step law, prefill left out */
    atomic_uint_least64_t do_expert_acts;    /* expert_acts and weight_bytes_read over the */
    atomic_uint_least64_t do_weight_bytes;   /*   decode-only steps (per decode step) */
    atomic_uint_least64_t attn_ns;           /* phase timers of the model (model_timers) */
    atomic_uint_least64_t matmul_ns;
    atomic_uint_least64_t other_ns;
    atomic_uint_least64_t prefix_queries;  /* prompt tokens looked up in the prefix cache */
    atomic_uint_least64_t prefix_hits;     /* of those, tokens whose KV was reused */
    atomic_uint_least64_t connections;     /* accepted connections */
    atomic_int_least64_t open_connections; /* connections now open */
    struct prom_hist hist[PROM_N_HIST];    /* per request (ITL: per token) */
    char model_name[256]; /* label value, escaped for the exposition; "" until prom_set_model */
    /* the model's roofline constants (prom_set_roofline), 0 = not known */
    double weight_bytes;         /* weights read per batched decode step, bytes */
    double flops_per_token;      /* matmul FLOPs per token */
    double attn_flops_per_pos;   /* attention FLOPs per token per position attended to */
    double mem_read_bytes_per_s; /* measured streaming-read bandwidth (--probe-bandwidth) */
    double model_experts; /* (layer, expert) pairs of the MoE layers, the most a step can read;
                             0 = a dense model (prom_set_experts) */
};

/* The scheduler's gauges at the time of a scrape. */
struct prom_gauges {
    long queued;       /* requests waiting for a slot */
    long running;      /* sequences holding a slot */
    long slots;        /* KV slots (max_batch) */
    long kv_positions; /* KV positions held over all slots */
    long kv_capacity;  /* slots x ctx */
    int ready;         /* 1 once the model is loaded */
};

/* Zero everything and set the histograms' bounds (token lengths up to
 * 2048 until prom_set_model says otherwise). */
void prom_init(struct prom *m);
/* The served model: its id (the model_name label) and context, which sets
 * the token-length buckets (1, 2, 5, 10, ... up to max_model_len, as vLLM's
 * build_1_2_5_buckets). Call before the first request is served. */
void prom_set_model(struct prom *m, const char *model_name, int max_model_len);
/* The roofline constants rendered as gauges once the model is ready (0 =
 * not known, left out). Call before the first scrape can see ready. */
void prom_set_roofline(struct prom *m, double weight_bytes, double flops_per_token,
                       double attn_flops_per_pos, double mem_read_bytes_per_s);
/* The model's (layer, expert) pairs, n_layer x n_expert (0 for a dense
 * model: the gauge is left out), rendered as fp4serve_model_experts beside
 * the roofline constants: experts per decode step
 * (fp4serve_decode_only_expert_activations_total / decode-only steps) reach
 * it when a step touches every expert. */
void prom_set_experts(struct prom *m, double pairs);
/* Add one observation v (in h's unit: ns or tokens). */
void prom_observe(struct prom_hist *h, uint64_t v);
/* Count one model step: n sequences, n_dec decode rows, n_pre prompt
 * tokens (0: a decode-only step), passes over the weights, its wall time
 * and the model's phase times (all ns). */
void prom_step(struct prom *m, int n, int n_dec, int n_pre, int passes, uint64_t step_ns,
               uint64_t attn_ns, uint64_t matmul_ns, uint64_t other_ns);
/* The weights a step read (after prom_step): n_pre its prompt tokens (0:
 * a decode-only step, counted in the decode-only series too), experts =
 * (layer, expert) pairs whose weights it read (0 for a dense model), their
 * bytes, and all weight bytes it read (dense matrices and head once per
 * pass, plus the experts). */
void prom_step_weights(struct prom *m, int n_pre, uint64_t experts, uint64_t expert_bytes,
                       uint64_t weight_bytes);
/* A request was served (ended by a stop or its length): its times
 * (clock_ns at submit, admission, first token and end) and token counts go
 * into every per-request histogram, so their counts equal requests served
 * (TTFT's, prefill's and decode's: those that generated a token; t_first
 * 0 = none). */
void prom_request_done(struct prom *m, uint64_t t_submit, uint64_t t_admit, uint64_t t_first,
                       uint64_t t_end, long n_prompt, long n_gen);
/* Count one response of route with HTTP status. */
void prom_response(struct prom *m, enum prom_route route, int status);
/* Append the Prometheus text (format 0.0.4) to out. */
void prom_render(const struct prom *m, const struct prom_gauges *g, struct buf *out);

#endif
