/*
 * cuda/backend: the CUDA backend's life cycle and its forward pass, for
 * the llama, qwen3, qwen3moe and gpt-oss architectures. cu_prepare checks what the
 * kernels support, lays out one device arena (weights in their GGUF
 * layout, each expert tensor as its experts at a fixed stride, the MoE
 * router in f32, norms, the RoPE table, the f16 KV cache, activations,
 * split partials, the MoE routing buffers, logits, the plan), uploads and
 * allocates the pinned host buffers; cu_forward enqueues one step's kernels on one
 * stream and waits for its logits; cu_kv_copy copies a prefix of one
 * slot's K/V into another on that stream; cu_release frees it all.
 * Nothing is allocated after prepare.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda/common.cuh"
#include "cuda/quant.cuh"

extern "C" {
#include "fp4.h"
#include "log.h"
#include "timeutil.h"
#include "xalloc.h"

#include "model/backend.h"
}

#define ARENA_ALIGN 256

void cu_fatal(cudaError_t e, const char *what, const char *file, int line)
{
    log_error("cuda: %s failed: %s (%s) at %s:%d; the device is in an unknown state, exiting", what,
              cudaGetErrorString(e), cudaGetErrorName(e), file, line);
    exit(FP_ERR_DEVICE);
}

extern "C" int cu_device_count(char *why, size_t why_size)
{
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess) {
        int driver = 0;
        /* The runtime calls a missing driver an insufficient one; say which. */
        if (e == cudaErrorInsufficientDriver && cudaDriverGetVersion(&driver) == cudaSuccess &&
            driver == 0)
            snprintf(why, why_size, "no NVIDIA driver is installed");
        else
            snprintf(why, why_size, "%s", cudaGetErrorString(e));
        cudaGetLastError(); /* clear it: the process may go on without CUDA */
        return 0;
    }
    if (n == 0)
        snprintf(why, why_size, "no CUDA device is visible");
    return n;
}

/* ---- prepare ---- */

/* Record a failed CUDA call of prepare in err: out of memory is
 * FP_ERR_RESOURCE, anything else FP_ERR_DEVICE. Returns -1. */
static int cuda_err(struct err *err, cudaError_t e, const char *what)
{
    cudaGetLastError();
    return err_set(err, e == cudaErrorMemoryAllocation ? FP_ERR_RESOURCE : FP_ERR_DEVICE,
                   "cuda: %s: %s", what, cudaGetErrorString(e)),
           -1;
}
#define TRY(call, what)                                                                            \
    do {                                                                                           \
        cudaError_t e_ = (call);                                                                   \
        if (e_ != cudaSuccess)                                                                     \
            return cuda_err(err, e_, what);                                                        \
    } while (0)

static bool type_supported(uint32_t t)
{
    switch (t) {
    case Q_F32:
    case Q_F16:
    case Q_BF16:
    case Q_Q4_0:
    case Q_Q4_1:
    case Q_Q5_0:
    case Q_Q5_1:
    case Q_Q8_0:
    case Q_Q4_K:
    case Q_Q6_K:
    case Q_MXFP4:
    case Q_NVFP4:
        return true;
    default:
        return false;
    }
}

static const struct q_matrix *layer_mat(const struct model_layer *L, int i)
{
    const struct q_matrix *all[7] = {&L->wq,     &L->wk,   &L->wv,    &L->wo,
                                     &L->w_gate, &L->w_up, &L->w_down};
    return all[i];
}
static cu_mat *cu_layer_mat(cu_layer *L, int i)
{
    cu_mat *all[7] = {&L->wq, &L->wk, &L->wv, &L->wo, &L->gate, &L->up, &L->down};
    return all[i];
}

static int check_type(const struct q_matrix *q, struct err *err)
{
    if (q->rows > 0 && !type_supported(q->type))
        return err_set(err, FP_ERR_UNSUPPORTED, "cuda: weight type %s has no kernel",
                       q_info(q->type) ? q_info(q->type)->name : "unknown"),
               -1;
    return 0;
}

/* Each expert tensor of a MoE layer: a supported type, one type and row
 * size for all its experts (they sit at a fixed stride on the device). */
static int check_experts(const struct model *m, struct err *err)
{
    const struct model_config *c = &m->cfg;
    int E = c->n_expert;
    if (c->n_embd > CU_MOE_EMBD_MAX)
        return err_set(err, FP_ERR_UNSUPPORTED,
                       "cuda: a mixture-of-experts model of width %d is not supported (at most %d)",
                       c->n_embd, CU_MOE_EMBD_MAX),
               -1;
    for (int l = 0; l < c->n_layer; l++)
        for (int t = 0; t < 3; t++) {
            const struct q_matrix *x = m->w.layers[l].exps + (size_t)t * E;
            for (int e = 0; e < E; e++) {
                if (check_type(&x[e], err))
                    return -1;
                if (x[e].type != x[0].type || x[e].row_bytes != x[0].row_bytes)
                    return err_set(err, FP_ERR_UNSUPPORTED,
                                   "cuda: layer %d: experts of one tensor in different types (%s "
                                   "and %s) are not supported",
                                   l, q_info(x[0].type)->name, q_info(x[e].type)->name),
                           -1;
            }
        }
    return 0;
}

/* What the kernels cannot run: FP_ERR_UNSUPPORTED naming it. */
static int check_model(const struct model *m, struct err *err)
{
    const struct model_config *c = &m->cfg;
    int g = c->n_head / c->n_head_kv;
    if (m->opts.kv_f32)
        return err_set(err, FP_ERR_UNSUPPORTED,
                       "--kv f32 is not supported by the cuda backend (its cache is f16)"),
               -1;
    if (c->head_dim % 8 != 0 || c->head_dim > CU_HD_MAX)
        return err_set(err, FP_ERR_UNSUPPORTED,
                       "cuda: head dimension %d is not supported (a multiple of 8 up to %d)",
                       c->head_dim, CU_HD_MAX),
               -1;
    if (g > CU_GMAX)
        return err_set(err, FP_ERR_UNSUPPORTED,
                       "cuda: %d query heads per KV head is not supported (at most %d)", g,
                       CU_GMAX),
               -1;
    if (c->qk_norm && c->n_head + c->n_head_kv > CU_NORM_HEADS)
        return err_set(err, FP_ERR_UNSUPPORTED,
                       "cuda: per-head Q/K norms over %d heads are not supported (at most %d)",
                       c->n_head + c->n_head_kv, CU_NORM_HEADS),
               -1;
    const struct q_matrix *heads[2] = {&m->w.tok_embd, &m->w.output};
    for (int i = 0; i < 2 + 7 * c->n_layer; i++)
        if (check_type(i < 2 ? heads[i] : layer_mat(&m->w.layers[(i - 2) / 7], (i - 2) % 7), err))
            return -1;
    return c->n_expert > 0 ? check_experts(m, err) : 0;
}

/* Bump allocation inside the arena: offsets first, pointers once it exists. */
struct arena_plan {
    size_t off = 0;
    size_t take(size_t bytes)
    {
        size_t o = off;
        off += (bytes + ARENA_ALIGN - 1) / ARENA_ALIGN * ARENA_ALIGN;
        return o;
    }
};

/* Byte offsets of every device buffer, computed before allocating. */
struct arena_offsets {
    size_t tok_embd, output, norms, rope, k_cache, v_cache, x, q, k, v, att, hb, hb2, y, part,
        logits;
    size_t act_q, act_d, act_s, act_f, act_h, plan;
    size_t moe_exp, moe_w, moe_pos, moe_grow, moe_gexp, moe_tiles, moe_y, moe_hit;
    size_t *mats;    /* (n_layer * 7) */
    size_t *routers; /* (n_layer) MoE: f32 (n_expert, n_embd) */
    size_t *exps;    /* (n_layer * 3) MoE: gate, up, down experts */
    size_t weights_end, kv_bytes, total;
};

static size_t mat_bytes(const struct q_matrix *q)
{
    return q->row_bytes * (size_t)q->rows;
}

/* Bytes from one expert's matrix to the next on the device. */
static size_t expert_stride(const struct q_matrix *q)
{
    return (mat_bytes(q) + ARENA_ALIGN - 1) / ARENA_ALIGN * ARENA_ALIGN;
}

/* Floats of gpt-oss's vectors per layer: bq, bk, bv, bo, the sinks, the
 * router bias, the experts' gate, up and down biases (0 for the others). */
static size_t oai_floats(const struct model_config *c)
{
    if (!c->oai)
        return 0;
    size_t E = (size_t)c->n_expert;
    return (size_t)c->q_dim + 2 * (size_t)c->kv_dim + (size_t)c->n_embd + (size_t)c->n_head + E +
           2 * E * (size_t)c->n_ff_exp + E * (size_t)c->n_embd;
}

/* Floats of the norm area: per layer attn_norm and ffn_norm (n_embd),
 * q_norm and k_norm (head_dim, qwen3), the experts' scales (3 x
 * n_expert), gpt-oss's biases and sinks (oai_floats), then output_norm. */
static size_t layer_floats(const struct model_config *c)
{
    return 2 * (size_t)c->n_embd + (c->qk_norm ? 2 * (size_t)c->head_dim : 0) +
           3 * (size_t)c->n_expert + oai_floats(c);
}

/* Gathered rows (one per row and chosen expert) of max_rows rows. */
static size_t moe_rows(const struct model *m)
{
    return (size_t)m->max_rows * (size_t)(m->cfg.n_expert ? m->cfg.n_expert_used : 1);
}

/* The arena, in order: weights (the tied head shares the embedding) and
 * norms, then the RoPE table, the caches, the activations of max_rows rows
 * (the GEMV formats only for CU_GEMV_MAX_ROWS rows), the split partials of
 * up to max_batch decode rows, the logits and the plan. One allocation
 * means one size check with a useful message, one free, and no allocation
 * on the step path. */
static void plan_arena(const struct model *m, cu_state *S, arena_offsets *o)
{
    const struct model_config *c = &m->cfg;
    arena_plan a;
    size_t rows = (size_t)m->max_rows, lrows = (size_t)m->max_logit_rows, grows = moe_rows(m);
    size_t hrows = grows > lrows ? grows : lrows;
    int g = c->n_head / c->n_head_kv, E = c->n_expert;
    o->tok_embd = a.take(mat_bytes(&m->w.tok_embd));
    o->output = m->w.tied ? o->tok_embd : a.take(mat_bytes(&m->w.output));
    for (int l = 0; l < c->n_layer; l++) {
        for (int i = 0; i < 7; i++)
            o->mats[l * 7 + i] = a.take(mat_bytes(layer_mat(&m->w.layers[l], i)));
        if (E == 0)
            continue;
        o->routers[l] = a.take(sizeof(float) * (size_t)E * (size_t)c->n_embd);
        for (int t = 0; t < 3; t++)
            o->exps[l * 3 + t] =
                a.take(expert_stride(&m->w.layers[l].exps[(size_t)t * E]) * (size_t)E);
    }
    o->norms = a.take(sizeof(float) * (layer_floats(c) * (size_t)c->n_layer + (size_t)c->n_embd));
    o->weights_end = a.off;
    o->rope = a.take(sizeof(float2) * (size_t)m->ctx * (size_t)(c->n_rot / 2));
    size_t cache = sizeof(__half) * (size_t)c->n_layer * (size_t)m->max_batch *
                   (size_t)c->n_head_kv * (size_t)m->ctx * (size_t)c->head_dim;
    o->k_cache = a.take(cache);
    o->v_cache = a.take(cache);
    o->kv_bytes = 2 * cache;
    o->x = a.take(sizeof(float) * rows * c->n_embd);
    o->q = a.take(sizeof(float) * rows * c->q_dim);
    o->k = a.take(sizeof(float) * rows * c->kv_dim);
    o->v = a.take(sizeof(float) * rows * c->kv_dim);
    o->att = a.take(sizeof(float) * rows * c->q_dim);
    size_t ff =
        (size_t)c->n_ff > grows / rows * c->n_ff_exp ? (size_t)c->n_ff : grows / rows * c->n_ff_exp;
    o->hb = a.take(sizeof(float) * rows * ff);
    o->hb2 = a.take(sizeof(float) * rows * ff);
    o->y = c->oai ? a.take(sizeof(float) * rows * c->n_embd) : 0;
    o->part = a.take(sizeof(float) * (size_t)m->max_batch * c->n_head_kv * S->n_chunks * g *
                     (c->head_dim + 2));
    if (E > 0) {
        o->moe_exp = a.take(sizeof(int32_t) * grows);
        o->moe_w = a.take(sizeof(float) * grows);
        o->moe_pos = a.take(sizeof(int32_t) * grows);
        o->moe_grow = a.take(sizeof(int32_t) * grows);
        o->moe_gexp = a.take(sizeof(int32_t) * grows);
        o->moe_tiles = a.take(sizeof(int32_t) * (1 + 3 * (size_t)S->moe_max_tiles));
        o->moe_y = a.take(sizeof(float) * grows * c->n_embd);
        o->moe_hit = a.take((size_t)c->n_layer * E);
    }
    o->logits = a.take(sizeof(float) * lrows * c->n_vocab);
    /* GEMV formats for the gathered rows of a GEMV step too (k per row). */
    size_t ld = (size_t)S->act.ld, gr = CU_GEMV_MAX_ROWS * (grows / rows);
    o->act_q = a.take(gr * ld);
    o->act_d = a.take(sizeof(float) * gr * (ld / 32));
    o->act_s = a.take(sizeof(float) * gr * (ld / 16));
    o->act_f = a.take(sizeof(float) * gr * ld);
    o->act_h = a.take(sizeof(__half) * hrows * ld);
    o->plan = a.take(S->plan_bytes);
    o->total = a.off;
}

/* Point the host plan (and its device twin) at the arrays of a buffer:
 * tok, pos, slot, dec (max_rows each), out (max_logit_rows), then items. */
static void bind_plan(struct cu_plan *p, void *buf, const struct model *m, size_t off_items)
{
    int32_t *i32 = (int32_t *)buf;
    size_t rows = (size_t)m->max_rows;
    p->tok = i32;
    p->pos = i32 + rows;
    p->slot = i32 + 2 * rows;
    p->dec = i32 + 3 * rows;
    p->out = i32 + 4 * rows;
    p->items = (struct cu_item *)((char *)buf + off_items);
}

/* Copy weights (bytes as loaded or requantized, no conversion), norms and
 * the RoPE table into the arena and fill the device views in S. */
static int upload(cu_state *S, const struct model *m, const arena_offsets *o, struct err *err)
{
    const struct model_config *c = &m->cfg;
    char *base = (char *)S->arena;
    auto put_mat = [&](const struct q_matrix *q, size_t off, cu_mat *d) -> int {
        if (q->rows > 0) /* the dense FFN of a MoE layer is empty */
            TRY(cudaMemcpy(base + off, q->data, mat_bytes(q), cudaMemcpyHostToDevice),
                "weight upload");
        d->type = q->type;
        d->rows = (int)q->rows;
        d->cols = (int)q->cols;
        d->row_bytes = q->row_bytes;
        d->scale = q->scale == 0.0f ? 1.0f : q->scale;
        d->w = (const uint8_t *)(base + off);
        return 0;
    };
    if (put_mat(&m->w.tok_embd, o->tok_embd, &S->tok_embd))
        return -1;
    if (m->w.tied)
        S->output = S->tok_embd;
    else if (put_mat(&m->w.output, o->output, &S->output))
        return -1;
    /* A 3-D expert tensor: expert e's bytes at e * stride, its scale in
     * the norm area at scales[e]. */
    int E = c->n_expert;
    auto put_experts = [&](const struct q_matrix *x, size_t off, float *scales, cu_mat *d) -> int {
        size_t stride = expert_stride(&x[0]);
        float *sc = (float *)xmalloc(sizeof(float) * (size_t)E);
        for (int e = 0; e < E; e++) {
            sc[e] = x[e].scale == 0.0f ? 1.0f : x[e].scale;
            cudaError_t ce = cudaMemcpy(base + off + (size_t)e * stride, x[e].data,
                                        mat_bytes(&x[e]), cudaMemcpyHostToDevice);
            if (ce == cudaSuccess && e == E - 1)
                ce = cudaMemcpy(scales, sc, sizeof(float) * (size_t)E, cudaMemcpyHostToDevice);
            if (ce != cudaSuccess) {
                free(sc);
                return cuda_err(err, ce, "expert upload");
            }
        }
        free(sc);
        *d = cu_mat{x[0].type,      (int)x[0].rows, (int)x[0].cols,
                    x[0].row_bytes, 1.0f,           (const uint8_t *)(base + off),
                    stride,         scales};
        return 0;
    };
    /* The router in f32 whatever its type (llama.cpp keeps it F32): the
     * routing is then the same computation in both regimes. */
    auto put_router = [&](const struct q_matrix *q, size_t off) -> int {
        float *f = (float *)xmalloc(sizeof(float) * (size_t)q->rows * (size_t)q->cols);
        for (int64_t r = 0; r < q->rows; r++) {
            float *row = f + (size_t)r * (size_t)q->cols;
            q_dequant_row(q->type, (const uint8_t *)q->data + (size_t)r * q->row_bytes, row,
                          q->cols);
            for (int64_t i = 0; q->scale != 0.0f && q->scale != 1.0f && i < q->cols; i++)
                row[i] *= q->scale;
        }
        cudaError_t ce = cudaMemcpy(base + off, f, sizeof(float) * (size_t)(q->rows * q->cols),
                                    cudaMemcpyHostToDevice);
        free(f);
        TRY(ce, "router upload");
        return 0;
    };
    float *norms = (float *)(base + o->norms);
    size_t nb = sizeof(float) * (size_t)c->n_embd, hb = sizeof(float) * (size_t)c->head_dim;
    for (int l = 0; l < c->n_layer; l++) {
        const struct model_layer *L = &m->w.layers[l];
        cu_layer *D = &S->layers[l];
        for (int i = 0; i < 7; i++)
            if (put_mat(layer_mat(L, i), o->mats[l * 7 + i], cu_layer_mat(D, i)))
                return -1;
        float *an = norms + (size_t)l * layer_floats(c), *fn = an + c->n_embd;
        float *next = fn + c->n_embd;
        TRY(cudaMemcpy(an, L->attn_norm, nb, cudaMemcpyHostToDevice), "norm upload");
        TRY(cudaMemcpy(fn, L->ffn_norm, nb, cudaMemcpyHostToDevice), "norm upload");
        D->attn_norm = an;
        D->ffn_norm = fn;
        if (c->qk_norm) {
            TRY(cudaMemcpy(next, L->q_norm, hb, cudaMemcpyHostToDevice), "norm upload");
            TRY(cudaMemcpy(next + c->head_dim, L->k_norm, hb, cudaMemcpyHostToDevice),
                "norm upload");
            D->q_norm = next;
            D->k_norm = next + c->head_dim;
            next += 2 * c->head_dim;
        }
        D->window = L->swa ? c->n_swa : 0;
        if (c->oai) {
            /* gpt-oss's vectors, each F32 as model.c bound it. */
            size_t Ex = (size_t)E, FFx = (size_t)c->n_ff_exp;
            const float *src[9] = {L->bq,       L->bk,     L->bv,   L->bo,    L->sinks,
                                   L->router_b, L->gate_b, L->up_b, L->down_b};
            const float **dst[9] = {&D->bq,       &D->bk,     &D->bv,   &D->bo,    &D->sinks,
                                    &D->router_b, &D->gate_b, &D->up_b, &D->down_b};
            const size_t len[9] = {(size_t)c->q_dim,  (size_t)c->kv_dim, (size_t)c->kv_dim,
                                   (size_t)c->n_embd, (size_t)c->n_head, Ex,
                                   Ex * FFx,          Ex * FFx,          Ex * (size_t)c->n_embd};
            for (int i = 0; i < 9; i++) {
                TRY(cudaMemcpy(next, src[i], sizeof(float) * len[i], cudaMemcpyHostToDevice),
                    "bias upload");
                *dst[i] = next;
                next += len[i];
            }
        }
        if (E == 0)
            continue;
        if (put_router(&L->router, o->routers[l]))
            return -1;
        D->router = (const float *)(base + o->routers[l]);
        cu_mat *dx[3] = {&D->gate_exps, &D->up_exps, &D->down_exps};
        for (int t = 0; t < 3; t++)
            if (put_experts(L->exps + (size_t)t * E, o->exps[l * 3 + t], next + (size_t)t * E,
                            dx[t]))
                return -1;
    }
    float *on = norms + (size_t)c->n_layer * layer_floats(c);
    TRY(cudaMemcpy(on, m->w.output_norm, nb, cudaMemcpyHostToDevice), "norm upload");
    S->output_norm = on;

    /* The CPU backend's RoPE tables (backend_rope_tables, YaRN included),
     * so both rotate by the same numbers; here as (cos, sin) pairs. */
    size_t half = (size_t)(c->n_rot / 2), n = (size_t)m->ctx * half;
    float *cs = (float *)xmalloc(sizeof(float) * 2 * n), *sn = cs + n;
    backend_rope_tables(c, m->ctx, cs, sn);
    float2 *rope = (float2 *)xmalloc(sizeof(float2) * n);
    for (size_t i = 0; i < n; i++)
        rope[i] = make_float2(cs[i], sn[i]);
    cudaError_t e = cudaMemcpy(base + o->rope, rope, sizeof(float2) * n, cudaMemcpyHostToDevice);
    free(rope);
    free(cs);
    TRY(e, "rope table upload");
    S->rope = (float2 *)(base + o->rope);
    return 0;
}

/* Fail early, with a message that names the knob, when the arena cannot fit. */
static int check_fits(const struct model *m, const arena_offsets *o, struct err *err)
{
    size_t free_b = 0, total_b = 0;
    TRY(cudaMemGetInfo(&free_b, &total_b), "cudaMemGetInfo");
    if (o->total + ((size_t)256 << 20) > free_b)
        return err_set(err, FP_ERR_RESOURCE,
                       "cuda: %.2f GB needed (weights %.2f GB, kv cache %.2f GB for %d slots x %d "
                       "positions) but %.2f GB of %.2f GB is free (lower --max-batch or --ctx)",
                       o->total / 1e9, o->weights_end / 1e9, o->kv_bytes / 1e9, m->max_batch,
                       m->ctx, free_b / 1e9, total_b / 1e9),
               -1;
    return 0;
}

/* An empty kernel: launching it tells whether this build has code for the GPU. */
__global__ void probe_kernel(int *p)
{
    if (p)
        *p = 1;
}

/* cu_prepare's body: refuse what the kernels cannot run, pick device 0,
 * size everything, check it fits, allocate and upload. Every failure
 * returns -1 with err set and leaves the rest to cu_release. */
static int prepare(struct model *m, cu_state *S, struct err *err)
{
    const struct model_config *c = &m->cfg;
    if (check_model(m, err))
        return -1;
    char why[160];
    if (cu_device_count(why, sizeof(why)) < 1)
        return err_set(err, FP_ERR_DEVICE, "device 'cuda': no usable CUDA device (%s)", why), -1;
    S->dev = 0;
    TRY(cudaSetDevice(S->dev), "cudaSetDevice");
    cudaDeviceProp prop;
    TRY(cudaGetDeviceProperties(&prop, S->dev), "cudaGetDeviceProperties");
    /* A build for another architecture fails here, not in the first step. */
    CU_LAUNCH(probe_kernel, 1, 1, 0, 0, nullptr);
    cudaError_t pe = cudaGetLastError();
    if (pe == cudaSuccess)
        pe = cudaDeviceSynchronize();
    if (pe != cudaSuccess)
        return err_set(err, FP_ERR_DEVICE,
                       "cuda: cannot run kernels on %s (sm_%d%d): %s (rebuild with "
                       "CUDA_ARCHS=sm_%d%d)",
                       prop.name, prop.major, prop.minor, cudaGetErrorString(pe), prop.major,
                       prop.minor),
               -1;
    TRY(cudaStreamCreateWithFlags(&S->stream, cudaStreamNonBlocking), "cudaStreamCreate");

    /* Sizes: attention chunks per slot, the activation row stride (the
     * widest matmul input), and the plan (4 row arrays, the logits rows,
     * then at most one walk item per row plus one item per chunk of each
     * split decode row). */
    S->n_chunks = (m->ctx + CU_CHUNK - 1) / CU_CHUNK;
    int max_cols = c->n_embd > c->q_dim ? c->n_embd : c->q_dim;
    max_cols = max_cols > c->n_ff ? max_cols : c->n_ff;
    max_cols = max_cols > c->n_ff_exp ? max_cols : c->n_ff_exp;
    /* Tiles of a step's gathered rows: at most one partial tile per
     * touched expert plus the full ones, the smallest tile height bounding
     * them (moe.cu). */
    size_t grows = moe_rows(m);
    S->moe_max_tiles = c->n_expert
                           ? (int)((size_t)c->n_expert < grows ? (size_t)c->n_expert : grows) +
                                 (int)(grows / CU_GEMV_MAX_ROWS)
                           : 0;
    S->act.ld = (max_cols + CU_ACT_ALIGN - 1) / CU_ACT_ALIGN * CU_ACT_ALIGN;
    S->max_items = (size_t)m->max_rows + (size_t)m->max_batch * (size_t)S->n_chunks;
    S->off_items = ((size_t)4 * m->max_rows + (size_t)m->max_logit_rows) * sizeof(int32_t);
    S->off_items = (S->off_items + 15) & ~(size_t)15;
    /* A model with a sliding window has a second list for its windowed layers. */
    S->plan_bytes = S->off_items + (c->n_swa > 0 ? 2 : 1) * S->max_items * sizeof(struct cu_item);

    arena_offsets o;
    memset(&o, 0, sizeof(o));
    o.mats = (size_t *)xcalloc((size_t)c->n_layer * 7, sizeof(size_t));
    o.routers = (size_t *)xcalloc((size_t)c->n_layer, sizeof(size_t));
    o.exps = (size_t *)xcalloc((size_t)c->n_layer * 3, sizeof(size_t));
    plan_arena(m, S, &o);
    int rc = check_fits(m, &o, err);
    if (rc == 0) {
        cudaError_t e = cudaMalloc(&S->arena, o.total);
        if (e != cudaSuccess)
            rc = cuda_err(err, e, "cudaMalloc of the arena");
    }
    if (rc == 0) {
        S->arena_bytes = o.total;
        S->weight_bytes = o.weights_end;
        S->layers = (cu_layer *)xcalloc((size_t)c->n_layer, sizeof(cu_layer));
        rc = upload(S, m, &o, err);
    }
    free(o.mats);
    free(o.routers);
    free(o.exps);
    if (rc != 0)
        return -1;

    /* Device views of the run buffers. */
    char *base = (char *)S->arena;
    S->k_cache = (__half *)(base + o.k_cache);
    S->v_cache = (__half *)(base + o.v_cache);
    S->x = (float *)(base + o.x);
    S->q = (float *)(base + o.q);
    S->k = (float *)(base + o.k);
    S->v = (float *)(base + o.v);
    S->att = (float *)(base + o.att);
    S->hb = (float *)(base + o.hb);
    S->hb2 = (float *)(base + o.hb2);
    S->y = c->oai ? (float *)(base + o.y) : NULL;
    S->part = (float *)(base + o.part);
    S->logits = (float *)(base + o.logits);
    S->act.q = (int8_t *)(base + o.act_q);
    S->act.d = (float *)(base + o.act_d);
    S->act.s = (float *)(base + o.act_s);
    S->act.f = (float *)(base + o.act_f);
    S->act.h = (__half *)(base + o.act_h);
    if (c->n_expert) {
        S->moe_exp = (int32_t *)(base + o.moe_exp);
        S->moe_w = (float *)(base + o.moe_w);
        S->moe_pos = (int32_t *)(base + o.moe_pos);
        S->moe_grow = (int32_t *)(base + o.moe_grow);
        S->moe_gexp = (int32_t *)(base + o.moe_gexp);
        S->moe_tiles = (int32_t *)(base + o.moe_tiles);
        S->moe_y = (float *)(base + o.moe_y);
        S->moe_hit = (uint8_t *)(base + o.moe_hit);
        TRY(cudaHostAlloc((void **)&S->moe_hit_host, (size_t)c->n_layer * c->n_expert,
                          cudaHostAllocDefault),
            "cudaHostAlloc (experts)");
    }
    /* Zero the activations once: padding columns are then zero for every row. */
    TRY(cudaMemset(base + o.x, 0, o.plan - o.x), "cudaMemset");
    S->plan_dev = base + o.plan;
    bind_plan(&S->dplan, S->plan_dev, m, S->off_items);

    /* Pinned host buffers: the plan cuda.c fills, and the logits rows that
     * model_step hands out (m->rs.logits, as the CPU backend's). */
    TRY(cudaHostAlloc(&S->plan_host, S->plan_bytes, cudaHostAllocDefault), "cudaHostAlloc (plan)");
    bind_plan(&S->plan, S->plan_host, m, S->off_items);
    float *logits = NULL;
    TRY(cudaHostAlloc((void **)&logits,
                      sizeof(float) * (size_t)m->max_logit_rows * (size_t)c->n_vocab,
                      cudaHostAllocDefault),
        "cudaHostAlloc (logits)");
    m->rs.logits = logits;

    /* Phase events: at most 7 phase changes per layer plus embedding, head
     * and the end mark (see cu_forward). */
    S->max_ev = 8 * c->n_layer + 16;
    S->ev = (cudaEvent_t *)xcalloc((size_t)S->max_ev, sizeof(cudaEvent_t));
    S->ev_phase = (uint8_t *)xcalloc((size_t)S->max_ev, 1);
    for (int i = 0; i < S->max_ev; i++)
        TRY(cudaEventCreate(&S->ev[i]), "cudaEventCreate");
    TRY(cudaDeviceSynchronize(), "upload");

    m->rs.kv_elem = 2;
    m->rs.kv_bytes = o.kv_bytes;
    m->rs.n_chunks = S->n_chunks;
    m->kv_bytes = o.kv_bytes;
    log_info("cuda: %s (sm_%d%d, %d SMs, %.1f GB); weights %.1f MB, kv cache %d slots x %d "
             "positions f16 %.1f MB, device total %.1f MB",
             prop.name, prop.major, prop.minor, prop.multiProcessorCount, prop.totalGlobalMem / 1e9,
             S->weight_bytes / 1e6, m->max_batch, m->ctx, o.kv_bytes / 1e6, S->arena_bytes / 1e6);
    return 0;
}

extern "C" int cu_prepare(struct model *m, struct err *err)
{
    cu_state *S = (cu_state *)xcalloc(1, sizeof(cu_state));
    m->be_state = S;
    return prepare(m, S, err);
}

extern "C" struct cu_plan *cu_plan_of(struct model *m)
{
    return &((cu_state *)m->be_state)->plan;
}

extern "C" size_t cu_max_items(struct model *m)
{
    return ((cu_state *)m->be_state)->max_items;
}

/* ---- forward ---- */

void cu_mark(cu_state *S, enum cu_phase ph)
{
    if (S->n_ev > 0 && S->ev_phase[S->n_ev - 1] == ph)
        return;
    if (S->n_ev >= S->max_ev - 1)
        return; /* cannot happen with max_ev = 8 per layer; the phase merges */
    S->ev_phase[S->n_ev] = (uint8_t)ph;
    CU_CHECK(cudaEventRecord(S->ev[S->n_ev++], S->stream));
}

/* Add the step's phase times to m->last: GPU time between phase events
 * for attention and matmul, the rest of the wall time since t0 (host
 * planning, launch gaps, RMSNorm, RoPE, copies) to other. */
static void charge(struct model *m, cu_state *S, uint64_t t0)
{
    uint64_t ns[3] = {0, 0, 0};
    for (int i = 0; i + 1 < S->n_ev; i++) {
        float ms = 0;
        CU_CHECK(cudaEventElapsedTime(&ms, S->ev[i], S->ev[i + 1]));
        ns[S->ev_phase[i]] += (uint64_t)((double)ms * 1e6);
    }
    uint64_t wall = clock_ns() - t0, gpu = ns[PH_ATTN] + ns[PH_MATMUL];
    m->last.attn_ns += ns[PH_ATTN];
    m->last.matmul_ns += ns[PH_MATMUL];
    m->last.other_ns += wall > gpu ? wall - gpu : 0;
}

/*
 * One step on S->stream, R = plan rows:
 *   plan -> device; x = embed(tok)                                (R, n_embd)
 *   per layer: act = rmsnorm(x)         q, k, v = Wq/Wk/Wv act   (R, q_dim | kv_dim)
 *              RoPE q, k; k, v -> cache; attention items; att -> act (combine)
 *              x += Wo act; act = rmsnorm(x); hb, hb2 = Wgate/Wup act (R, n_ff)
 *              act = silu(hb) * hb2; x += Wdown act
 *   head: act = rmsnorm(x[out rows]); logits = Wout act -> pinned host rows
 * then wait for the stream and charge the phases. The matmul regime (and
 * so the activation formats the row kernels write) is chosen once for the
 * layers by R and once for the head by n_out.
 */
extern "C" void cu_forward(struct model *m, const struct cu_plan *p, uint64_t t0)
{
    cu_state *S = (cu_state *)m->be_state;
    const struct model_config *c = &m->cfg;
    const struct cu_plan &D = S->dplan;
    const int R = p->rows, E = c->n_embd, V = c->n_vocab;
    CU_CHECK(cudaSetDevice(S->dev));
    S->n_ev = 0;
    cu_mark(S, PH_OTHER);
    size_t bytes = S->off_items + (size_t)(p->n_items + p->n_swa_items) * sizeof(struct cu_item);
    CU_CHECK(cudaMemcpyAsync(S->plan_dev, S->plan_host, bytes, cudaMemcpyHostToDevice, S->stream));
    op_embed(S, &S->tok_embd, D.tok, S->x, R, E);

    /* One regime for every matmul of the layers: see CU_GEMV_MAX_ROWS. */
    int flags = R <= CU_GEMV_MAX_ROWS ? PREP_Q8 | PREP_F32 : PREP_F16;
    for (int l = 0; l < c->n_layer; l++) {
        cu_layer *L = &S->layers[l];
        cu_mark(S, PH_OTHER);
        op_norm(S, S->x, NULL, L->attn_norm, R, E, c->rms_eps, flags);
        cu_mark(S, PH_MATMUL);
        {
            const cu_mat *w[3] = {&L->wq, &L->wk, &L->wv};
            const mm_out o[3] = {
                {S->q, c->q_dim, false}, {S->k, c->kv_dim, false}, {S->v, c->kv_dim, false}};
            mm_run(S, w, o, 3, R);
        }
        cu_mark(S, PH_OTHER);
        op_rope_kv(S, m, l, D.pos, D.slot, R);
        cu_mark(S, PH_ATTN);
        if (L->window)
            op_attention(S, m, l, &D, D.items + p->n_items, p->n_swa_items);
        else
            op_attention(S, m, l, &D, D.items, p->n_items);
        op_attn_out(S, m, l, D.pos, D.dec, R, flags);
        cu_mark(S, PH_MATMUL);
        {
            /* gpt-oss: y = Wo act, then x += y + bo (the CPU's order). */
            const cu_mat *w[1] = {&L->wo};
            mm_out o[1] = {{S->x, E, true}};
            if (L->bo)
                o[0] = {S->y, E, false};
            mm_run(S, w, o, 1, R);
            if (L->bo)
                op_add_bias(S, S->x, S->y, L->bo, R, E);
        }
        if (c->n_expert) {
            moe_ffn(S, m, l, R, flags);
            continue;
        }
        cu_mark(S, PH_OTHER);
        op_norm(S, S->x, NULL, L->ffn_norm, R, E, c->rms_eps, flags);
        cu_mark(S, PH_MATMUL);
        {
            const cu_mat *w[2] = {&L->gate, &L->up};
            const mm_out o[2] = {{S->hb, c->n_ff, false}, {S->hb2, c->n_ff, false}};
            mm_run(S, w, o, 2, R);
        }
        op_silu(S, S->hb, S->hb2, R, c->n_ff, flags);
        {
            const cu_mat *w[1] = {&L->down};
            const mm_out o[1] = {{S->x, E, true}};
            mm_run(S, w, o, 1, R);
        }
    }
    if (p->n_out > 0) {
        /* Final norm of the rows whose logits are wanted, the head, and
         * the copy into the pinned logits rows. */
        int hflags = p->n_out <= CU_GEMV_MAX_ROWS ? PREP_Q8 | PREP_F32 : PREP_F16;
        cu_mark(S, PH_OTHER);
        op_norm(S, S->x, D.out, S->output_norm, p->n_out, E, c->rms_eps, hflags);
        cu_mark(S, PH_MATMUL);
        {
            const cu_mat *w[1] = {&S->output};
            const mm_out o[1] = {{S->logits, V, false}};
            mm_run(S, w, o, 1, p->n_out);
        }
        cu_mark(S, PH_OTHER);
        CU_CHECK(cudaMemcpyAsync(m->rs.logits + (size_t)p->logit_row0 * V, S->logits,
                                 sizeof(float) * (size_t)p->n_out * V, cudaMemcpyDeviceToHost,
                                 S->stream));
    }
    if (c->n_expert)
        CU_CHECK(cudaMemcpyAsync(S->moe_hit_host, S->moe_hit, (size_t)c->n_layer * c->n_expert,
                                 cudaMemcpyDeviceToHost, S->stream));
    S->ev_phase[S->n_ev] = PH_OTHER; /* the end mark */
    CU_CHECK(cudaEventRecord(S->ev[S->n_ev++], S->stream));
    CU_CHECK(cudaStreamSynchronize(S->stream));
    if (c->n_expert)
        moe_count(S, m);
    charge(m, S, t0);
}

/* ---- prefix copy ---- */

/* 16-byte words of one (layer, KV head, K or V) run a block copies. */
#define KV_COPY_THREADS 256
#define KV_COPY_WORDS   (4 * KV_COPY_THREADS)

struct kv_copy_args {
    __half *kc, *vc;
    size_t words; /* n * head_dim / 8: positions [0, n) of one head */
    int max_batch, n_kv, ctx, hd, src, dst;
};

/* grid (ceil(words / KV_COPY_WORDS), n_layer * n_kv, 2: K then V), block
 * KV_COPY_THREADS. In the cache layout (layer, slot, KV head, pos,
 * head_dim) the positions [0, n) of one (layer, slot, head) are one run
 * of n * head_dim halves starting on a 16-byte boundary (head_dim % 8 ==
 * 0), so each block copies one piece of the run of src into dst. */
__global__ void __launch_bounds__(KV_COPY_THREADS) kv_copy_kernel(kv_copy_args A)
{
    int l = (int)blockIdx.y / A.n_kv, h = (int)blockIdx.y % A.n_kv;
    __half *cache = blockIdx.z == 0 ? A.kc : A.vc;
    size_t plane = (size_t)A.ctx * A.hd;
    const uint4 *from =
        (const uint4 *)(cache + (((size_t)l * A.max_batch + A.src) * A.n_kv + h) * plane);
    uint4 *to = (uint4 *)(cache + (((size_t)l * A.max_batch + A.dst) * A.n_kv + h) * plane);
    size_t w0 = (size_t)blockIdx.x * KV_COPY_WORDS;
    size_t end = w0 + KV_COPY_WORDS < A.words ? w0 + KV_COPY_WORDS : A.words;
    for (size_t w = w0 + threadIdx.x; w < end; w += KV_COPY_THREADS)
        to[w] = from[w];
}

/* Enqueued on the forward stream, so the next step (same stream) reads
 * the copy; nothing waits here. model.c checked the slots and n. */
extern "C" void cu_kv_copy(struct model *m, int src, int dst, int n)
{
    cu_state *S = (cu_state *)m->be_state;
    const struct model_config *c = &m->cfg;
    kv_copy_args A = {S->k_cache,   S->v_cache,   (size_t)n * c->head_dim / 8,
                      m->max_batch, c->n_head_kv, m->ctx,
                      c->head_dim,  src,          dst};
    dim3 grid((unsigned)((A.words + KV_COPY_WORDS - 1) / KV_COPY_WORDS),
              (unsigned)(c->n_layer * c->n_head_kv), 2);
    CU_CHECK(cudaSetDevice(S->dev));
    CU_LAUNCH(kv_copy_kernel, grid, KV_COPY_THREADS, 0, S->stream, A);
    CU_CHECK_LAUNCH();
}

/* ---- release ---- */

/* Release-time calls: a failure is logged and the freeing goes on. */
static void warn_on(cudaError_t e, const char *what)
{
    if (e != cudaSuccess) {
        log_warn("cuda: %s: %s", what, cudaGetErrorString(e));
        cudaGetLastError();
    }
}

extern "C" void cu_release(struct model *m)
{
    cu_state *S = (cu_state *)m->be_state;
    if (!S)
        return;
    warn_on(cudaSetDevice(S->dev), "cudaSetDevice");
    if (S->stream)
        warn_on(cudaStreamSynchronize(S->stream), "cudaStreamSynchronize");
    for (int i = 0; S->ev && i < S->max_ev; i++)
        if (S->ev[i])
            warn_on(cudaEventDestroy(S->ev[i]), "cudaEventDestroy");
    if (S->arena)
        warn_on(cudaFree(S->arena), "cudaFree");
    if (S->plan_host)
        warn_on(cudaFreeHost(S->plan_host), "cudaFreeHost");
    if (m->rs.logits)
        warn_on(cudaFreeHost(m->rs.logits), "cudaFreeHost");
    if (S->moe_hit_host)
        warn_on(cudaFreeHost(S->moe_hit_host), "cudaFreeHost");
    if (S->stream)
        warn_on(cudaStreamDestroy(S->stream), "cudaStreamDestroy");
    free(S->layers);
    free(S->ev);
    free(S->ev_phase);
    free(S);
    memset(&m->rs, 0, sizeof(m->rs));
    m->be_state = NULL;
}
