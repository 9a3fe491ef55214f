/*
 * cuda/cuda.h: the seam between the CUDA backend's host C (cuda.c: the
 * backend table and each step's plan) and its CUDA C++ (*.cu: device
 * memory, kernels, launches). Plain C with no CUDA types; the .cu files
 * include it inside extern "C". Nothing outside engine/cuda/ and
 * engine/model/backend.c includes it.
 */
#ifndef ENGINE_CUDA_CUDA_H
#define ENGINE_CUDA_CUDA_H

#include <stddef.h>
#include <stdint.h>

#include "err.h"

struct model;

/* Steps of at most this many rows run their matmuls as dp4a GEMV (weights
 * read once, up to 8 activation rows per warp, as ggml's MMVQ); larger
 * steps dequantize weight tiles to f16 for the tensor cores. The value a
 * row gets is identical for every step size on the same side of this
 * line (see cu_forward). */
#define CU_GEMV_MAX_ROWS 8

/* One attention work item, run for every KV head (grid.y). */
struct cu_item {
    int32_t row;   /* row of the step */
    int32_t chunk; /* chunk of MODEL_ATTN_CHUNK keys to reduce into a partial
                      (split decode rows), or -1: walk every chunk and fold
                      (prefill rows, and every row with --attention serial) */
};

/* One step laid out for the device. The arrays live in one pinned host
 * buffer, at offsets fixed at prepare (in this order), and travel to the
 * device in one copy of plan_bytes(). */
struct cu_plan {
    int rows;              /* tokens in the step (>= 1) */
    int n_out;             /* logits rows (0 when no sequence asks) */
    int n_items;           /* attention items of the full-attention layers */
    int n_swa_items;       /* those of the sliding-window layers, after them (0: no window) */
    int n_dec;             /* rows with split partials */
    int logit_row0;        /* first row of m->rs.logits this pass fills */
    int32_t *tok;          /* (rows) token ids */
    int32_t *pos;          /* (rows) positions */
    int32_t *slot;         /* (rows) KV slots */
    int32_t *dec;          /* (rows) split-partial index of a decode row, or -1 */
    int32_t *out;          /* (n_out) rows whose logits are wanted, in logits order */
    struct cu_item *items; /* (n_items), then (n_swa_items) */
};

/*
 * Number of usable CUDA devices; when 0, why (why_size bytes) says why in
 * a few words ("no CUDA-capable device is detected", "CUDA driver version
 * is insufficient ..."). Never fails otherwise.
 */
int cu_device_count(char *why, size_t why_size);

/*
 * Upload m's weights (in their quantized layout) to device 0, allocate the
 * f16 KV cache (n_layer, max_batch, n_head_kv, ctx, head_dim), the
 * activation buffers for m->max_rows rows and the pinned host buffers
 * (m->rs.logits is the pinned logits buffer); the state hangs off
 * m->be_state. Returns 0, or -1 with err set: FP_ERR_UNSUPPORTED (shape or
 * option this backend does not run), FP_ERR_RESOURCE (does not fit in
 * device memory), FP_ERR_DEVICE (any other CUDA failure, with CUDA's
 * message). m is left for cu_release in every case.
 */
int cu_prepare(struct model *m, struct err *err);

/* The plan buffer of m's state (pinned, sized at prepare); cuda.c fills
 * it before each cu_forward. */
struct cu_plan *cu_plan_of(struct model *m);
/* Items one list of m's plan holds (a model with a sliding window has
 * room for two: the windowed layers' list is planned from here on). */
size_t cu_max_items(struct model *m);

/*
 * Run one forward pass over the plan: embedding, every layer, and the
 * head for the plan's logits rows, whose values land in m->rs.logits
 * from row logit_row0 on before this returns. Writes K/V for every row.
 * Adds phase times to m->last, counting from t0_ns (clock_ns() when the
 * step's planning began) so that the phases add up to the wall time. A
 * CUDA error here leaves the device in an unknown state: it is logged
 * with CUDA's message and the process exits with FP_ERR_DEVICE (the
 * backend contract has forward never fail).
 */
void cu_forward(struct model *m, const struct cu_plan *p, uint64_t t0_ns);

/*
 * The backend's kv_copy (backend.h): K and V of positions [0, n) of slot
 * src into slot dst, for every layer and KV head, device to device on the
 * forward stream (the next cu_forward sees it; nothing waits). Slots and
 * n are checked by model.c (n >= 1, src != dst). A CUDA error exits as in
 * cu_forward.
 */
void cu_kv_copy(struct model *m, int src, int dst, int n);

/* Free everything cu_prepare allocated (safe after a failed prepare). */
void cu_release(struct model *m);

/*
 * For tests, and runnable without a GPU: the device decoders of a weight
 * type, compiled for the host, against q_dequant_row on 7 rows of 512
 * random bytes' worth of blocks (seeded). Returns the number of values
 * that agree bit for bit (all of them), or -1 with msg (msg_size bytes)
 * naming the first that does not.
 */
long cu_selftest_decode(uint32_t type, uint64_t seed, char *msg, size_t msg_size);

#endif
