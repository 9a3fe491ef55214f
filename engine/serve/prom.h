/*
 * prom: fp4serve's counters and the Prometheus text exposition of
 * GET /metrics. Counters are C11 atomics: the scheduler and the HTTP
 * thread add to them without locks, and a scrape reads them as they are.
 * Gauges that belong to the scheduler (queue, running, KV) are passed in
 * as a snapshot when rendering.
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
    PROM_OTHER, /* unknown routes and refusals before routing (413, 431, ...) */
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

struct prom {
    atomic_uint_least64_t responses[PROM_N_ROUTES][PROM_N_STATUS]; /* by route and status */
    atomic_uint_least64_t finished[PROM_N_FINISH];                 /* generations by reason */
    atomic_uint_least64_t prompt_tokens;    /* prompt tokens of admitted requests */
    atomic_uint_least64_t generated_tokens; /* sampled tokens (EOG included) */
    atomic_uint_least64_t steps;            /* model steps */
    atomic_uint_least64_t step_seqs;        /* sum over steps of the sequences in it */
    atomic_uint_least64_t decode_rows;      /* decode tokens over all steps */
    atomic_uint_least64_t prefill_rows;     /* prompt tokens run through the model */
    atomic_uint_least64_t step_ns;          /* wall time of model_step calls */
    atomic_uint_least64_t attn_ns;          /* phase timers of the model (model_timers) */
    atomic_uint_least64_t matmul_ns;
    atomic_uint_least64_t other_ns;
    atomic_uint_least64_t connections;     /* accepted connections */
    atomic_int_least64_t open_connections; /* connections now open */
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

void prom_init(struct prom *m);
/* Count one response of route with HTTP status. */
void prom_response(struct prom *m, enum prom_route route, int status);
/* Append the Prometheus text (format 0.0.4) to out. */
void prom_render(const struct prom *m, const struct prom_gauges *g, struct buf *out);

#endif
