/*
 * cuda/backend: the CUDA backend's life cycle and its forward pass.
 * cu_prepare checks what the kernels support, lays out one device arena
 * (weights in their GGUF layout, norms, the RoPE table, the f16 KV cache,
 * activations, split partials, logits, the plan), uploads and allocates
 * the pinned host buffers; cu_forward enqueues one step's kernels on one
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
    const struct q_matrix *heads[2] = {&m->w.tok_embd, &m->w.output};
    for (int i = 0; i < 2 + 7 * c->n_layer; i++) {
        const struct q_matrix *q =
            i < 2 ? heads[i] : layer_mat(&m->w.layers[(i - 2) / 7], (i - 2) % 7);
        if (!type_supported(q->type))
            return err_set(err, FP_ERR_UNSUPPORTED, "cuda: weight type %s has no kernel",
                           q_info(q->type) ? q_info(q->type)->name : "unknown"),
                   -1;
    }
    return 0;
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
    size_t tok_embd, output, norms, rope, k_cache, v_cache, x, q, k, v, att, hb, hb2, part, logits;
    size_t act_q, act_d, act_s, act_f, act_h, plan;
    size_t *mats; /* (n_layer * 7) */
    size_t weights_end, kv_bytes, total;
};

static size_t mat_bytes(const struct q_matrix *q)
{
    return q->row_bytes * (size_t)q->rows;
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
    size_t rows = (size_t)m->max_rows, lrows = (size_t)m->max_logit_rows;
    size_t hrows = rows > lrows ? rows : lrows;
    int g = c->n_head / c->n_head_kv;
    o->tok_embd = a.take(mat_bytes(&m->w.tok_embd));
    o->output = m->w.tied ? o->tok_embd : a.take(mat_bytes(&m->w.output));
    for (int l = 0; l < c->n_layer; l++)
        for (int i = 0; i < 7; i++)
            o->mats[l * 7 + i] = a.take(mat_bytes(layer_mat(&m->w.layers[l], i)));
    o->norms = a.take(sizeof(float) * (size_t)c->n_embd * (2 * (size_t)c->n_layer + 1));
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
    o->hb = a.take(sizeof(float) * rows * c->n_ff);
    o->hb2 = a.take(sizeof(float) * rows * c->n_ff);
    o->part = a.take(sizeof(float) * (size_t)m->max_batch * c->n_head_kv * S->n_chunks * g *
                     (c->head_dim + 2));
    o->logits = a.take(sizeof(float) * lrows * c->n_vocab);
    size_t ld = (size_t)S->act.ld, gr = CU_GEMV_MAX_ROWS;
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
        TRY(cudaMemcpy(base + off, q->data, mat_bytes(q), cudaMemcpyHostToDevice), "weight upload");
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
    float *norms = (float *)(base + o->norms);
    size_t nb = sizeof(float) * (size_t)c->n_embd;
    for (int l = 0; l < c->n_layer; l++) {
        const struct model_layer *L = &m->w.layers[l];
        for (int i = 0; i < 7; i++)
            if (put_mat(layer_mat(L, i), o->mats[l * 7 + i], cu_layer_mat(&S->layers[l], i)))
                return -1;
        float *an = norms + (size_t)(2 * l) * c->n_embd, *fn = an + c->n_embd;
        TRY(cudaMemcpy(an, L->attn_norm, nb, cudaMemcpyHostToDevice), "norm upload");
        TRY(cudaMemcpy(fn, L->ffn_norm, nb, cudaMemcpyHostToDevice), "norm upload");
        S->layers[l].attn_norm = an;
        S->layers[l].ffn_norm = fn;
    }
    float *on = norms + (size_t)(2 * c->n_layer) * c->n_embd;
    TRY(cudaMemcpy(on, m->w.output_norm, nb, cudaMemcpyHostToDevice), "norm upload");
    S->output_norm = on;

    /* The CPU backend's RoPE table, built the same way (theta by repeated
     * multiplication in float), so both rotate by the same numbers. */
    int half = c->n_rot / 2;
    float2 *rope = (float2 *)xmalloc(sizeof(float2) * (size_t)m->ctx * (size_t)half);
    float theta_scale = powf(c->rope_base, -2.0f / (float)c->n_rot);
    for (int p = 0; p < m->ctx; p++) {
        float theta = (float)p;
        for (int i = 0; i < half; i++) {
            rope[(size_t)p * half + i] = make_float2(cosf(theta), sinf(theta));
            theta *= theta_scale;
        }
    }
    cudaError_t e = cudaMemcpy(base + o->rope, rope, sizeof(float2) * (size_t)m->ctx * half,
                               cudaMemcpyHostToDevice);
    free(rope);
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
    S->act.ld = (max_cols + CU_ACT_ALIGN - 1) / CU_ACT_ALIGN * CU_ACT_ALIGN;
    size_t max_items = (size_t)m->max_rows + (size_t)m->max_batch * (size_t)S->n_chunks;
    S->off_items = ((size_t)4 * m->max_rows + (size_t)m->max_logit_rows) * sizeof(int32_t);
    S->off_items = (S->off_items + 15) & ~(size_t)15;
    S->plan_bytes = S->off_items + max_items * sizeof(struct cu_item);

    arena_offsets o;
    memset(&o, 0, sizeof(o));
    o.mats = (size_t *)xcalloc((size_t)c->n_layer * 7, sizeof(size_t));
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
    S->part = (float *)(base + o.part);
    S->logits = (float *)(base + o.logits);
    S->act.q = (int8_t *)(base + o.act_q);
    S->act.d = (float *)(base + o.act_d);
    S->act.s = (float *)(base + o.act_s);
    S->act.f = (float *)(base + o.act_f);
    S->act.h = (__half *)(base + o.act_h);
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

/* ---- forward ---- */

/* Start phase ph at this point of the stream (nothing when it goes on). */
static void mark(cu_state *S, enum cu_phase ph)
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
    mark(S, PH_OTHER);
    size_t bytes = S->off_items + (size_t)p->n_items * sizeof(struct cu_item);
    CU_CHECK(cudaMemcpyAsync(S->plan_dev, S->plan_host, bytes, cudaMemcpyHostToDevice, S->stream));
    op_embed(S, &S->tok_embd, D.tok, S->x, R, E);

    /* One regime for every matmul of the layers: see CU_GEMV_MAX_ROWS. */
    int flags = R <= CU_GEMV_MAX_ROWS ? PREP_Q8 | PREP_F32 : PREP_F16;
    for (int l = 0; l < c->n_layer; l++) {
        cu_layer *L = &S->layers[l];
        mark(S, PH_OTHER);
        op_norm(S, S->x, NULL, L->attn_norm, R, E, c->rms_eps, flags);
        mark(S, PH_MATMUL);
        {
            const cu_mat *w[3] = {&L->wq, &L->wk, &L->wv};
            const mm_out o[3] = {
                {S->q, c->q_dim, false}, {S->k, c->kv_dim, false}, {S->v, c->kv_dim, false}};
            mm_run(S, w, o, 3, R);
        }
        mark(S, PH_OTHER);
        op_rope_kv(S, m, l, D.pos, D.slot, R);
        mark(S, PH_ATTN);
        op_attention(S, m, l, &D, p->n_items);
        op_attn_out(S, m, D.pos, D.dec, R, flags);
        mark(S, PH_MATMUL);
        {
            const cu_mat *w[1] = {&L->wo};
            const mm_out o[1] = {{S->x, E, true}};
            mm_run(S, w, o, 1, R);
        }
        mark(S, PH_OTHER);
        op_norm(S, S->x, NULL, L->ffn_norm, R, E, c->rms_eps, flags);
        mark(S, PH_MATMUL);
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
        mark(S, PH_OTHER);
        op_norm(S, S->x, D.out, S->output_norm, p->n_out, E, c->rms_eps, hflags);
        mark(S, PH_MATMUL);
        {
            const cu_mat *w[1] = {&S->output};
            const mm_out o[1] = {{S->logits, V, false}};
            mm_run(S, w, o, 1, p->n_out);
        }
        mark(S, PH_OTHER);
        CU_CHECK(cudaMemcpyAsync(m->rs.logits + (size_t)p->logit_row0 * V, S->logits,
                                 sizeof(float) * (size_t)p->n_out * V, cudaMemcpyDeviceToHost,
                                 S->stream));
    }
    S->ev_phase[S->n_ev] = PH_OTHER; /* the end mark */
    CU_CHECK(cudaEventRecord(S->ev[S->n_ev++], S->stream));
    CU_CHECK(cudaStreamSynchronize(S->stream));
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
    if (S->stream)
        warn_on(cudaStreamDestroy(S->stream), "cudaStreamDestroy");
    free(S->layers);
    free(S->ev);
    free(S->ev_phase);
    free(S);
    memset(&m->rs, 0, sizeof(m->rs));
    m->be_state = NULL;
}
