/*
 * backend: where a model's forward pass runs, as a table of function
 * pointers (zeux/calm's `forward`, curl's vtls). The CPU backend lives in
 * engine/cpu/; a CUDA one goes behind the same table in engine/cuda/ (host
 * C never includes CUDA headers). model.c validates a step before calling
 * forward, so backends can trust their input.
 */
#ifndef ENGINE_BACKEND_H
#define ENGINE_BACKEND_H

#include <stdbool.h>
#include <stddef.h>

#include "err.h"

struct model;
struct model_config;
struct model_seq;

struct backend {
    const char *name; /* "cpu", "cuda" */
    /* Allocate the run state and KV cache for m->max_batch, m->ctx and
     * m->max_rows (weights are loaded). 0, or -1 with err set
     * (FP_ERR_RESOURCE, FP_ERR_DEVICE). */
    int (*prepare)(struct model *m, struct err *err);
    /* One forward pass over validated sequences: write K/V for every
     * token, set seqs[i].out for those asking for logits, placing them from
     * logits row logit_row0 on. Adds its phase times to m->last. Never
     * fails. */
    void (*forward)(struct model *m, struct model_seq *seqs, int n, int logit_row0);
    /* Free what prepare allocated; safe after a failed prepare. */
    void (*release)(struct model *m);
    /* Whether this build and machine can run the backend: 0, or -1 with
     * why (why_size bytes) saying why in a few words. NULL: always. */
    int (*usable)(char *why, size_t why_size);
    /* Copy the K/V of positions [0, n) of slot src into slot dst (the
     * prefix cache's copy of a busy slot's prefix); model.c checks the
     * slots and n first. NULL = not supported: the caller recomputes the
     * prefix instead. A device backend copies within device memory, every
     * layer and KV head, in its own cache layout; positions of dst past n
     * may be overwritten. */
    void (*kv_copy)(struct model *m, int src, int dst, int n);
    /* Whether forward fills model_seq.hidden (the final hidden states for
     * embeddings); false: model_step refuses a step that asks for them. */
    bool hidden_out;
};

/* The backends, defined in model/backend_cpu.c and cuda/cuda.c (cuda/stub.c in
 * a build without nvcc, whose usable() always says so). This table is the
 * only way model/ reaches engine/cpu/ and engine/cuda/ (docs/style.md
 * "Layers"); reach them through backend_find. */
extern const struct backend backend_cpu;
extern const struct backend backend_cuda;

/* RoPE's cos and sin of every (position, pair) of positions [0, ctx):
 * cs and sn are (ctx, n_rot / 2), row-major; YaRN scaling included
 * (model/backend_cpu.c). Both backends rotate by these numbers. */
void backend_rope_tables(const struct model_config *c, int ctx, float *cs, float *sn);

/* The backend called name ("cpu" or "cuda"), or NULL with err set:
 * FP_ERR_DEVICE when the build or the machine lacks it, FP_ERR_USAGE for
 * an unknown name. */
const struct backend *backend_find(const char *name, struct err *err);

#endif
