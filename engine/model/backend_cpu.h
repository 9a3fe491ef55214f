/*
 * model/backend_cpu.h: what the CPU backend's forward pass shares with its
 * mixture-of-experts FFN (model/moe.c): the step context, the section
 * barrier with its phase timers, and the row-sharing helpers. Private to
 * engine/model/; the engine API is model.h.
 */
#ifndef ENGINE_BACKEND_CPU_H
#define ENGINE_BACKEND_CPU_H

#include <stdint.h>

#include "model/model.h"

/* Indices into run_state.act. */
enum { ACT_Q, ACT_K, ACT_V, ACT_O, ACT_GATE, ACT_UP, ACT_DOWN };

/* One step's shared context (lives on the caller's stack during tp_run). */
struct fwd {
    struct model *m;
    const struct model_seq *seqs; /* the pass's sequences (hidden states are written to theirs) */
    bool hidden;                  /* some sequence asks for hidden states */
    int rows;                     /* tokens in the step */
    int n_out;                    /* logits rows */
    int logit_row0;               /* first logits row of this pass */
    int n_items;                  /* attention items */
    double cost;                  /* total attention work estimate */
    int n_swa_items;              /* sliding-window layers' items (from run_state.max_items on) */
    double swa_cost;              /* their work estimate */
    uint64_t t;                   /* thread 0: time the current section started */
};

enum phase { PH_OTHER, PH_MATMUL, PH_ATTN };

/* End a section: wait for everyone, and on thread 0 charge the section's
 * wall time (barrier included) to its phase. */
void cpu_section_end(struct fwd *F, int ith, enum phase ph);
/* [*lo, *hi): thread ith's share of n items, cut at multiples of align. */
void cpu_share(int64_t n, int ith, int nth, int64_t align, int64_t *lo, int64_t *hi);
/* This thread's weight rows of w (a share starting at a multiple of 16)
 * times the prepared activations a into y (row stride ldy). */
void cpu_matmul_share(struct model *m, const struct q_matrix *w, const struct q_act *a, float *y,
                      int64_t ldy, int ith, int nth, int64_t *lo, int64_t *hi);
/* Activation buffers feeding mats[0..n): one per distinct weight type,
 * from run_state.act[first] on (later matrices of a type share the
 * first's). Shape (thread 0), prepare rows [r0, r1) of x, and find the
 * buffer matrix i reads. */
void cpu_shape_group(struct run_state *rs, int first, const struct q_matrix *const *mats, int n,
                     int rows);
void cpu_prep_group(struct run_state *rs, int first, const struct q_matrix *const *mats, int n,
                    const float *x, int64_t ldx, int64_t r0, int64_t r1);
const struct q_act *cpu_act_for(const struct run_state *rs, int first,
                                const struct q_matrix *const *mats, int i);
/* out = x / sqrt(mean(x^2) + eps) * w (out may be x). */
void cpu_rmsnorm(float *out, const float *x, const float *w, int n, float eps);

/* Thread 0, before the section that prepares the FFN input: shape the
 * activation buffers that layer L's MoE router reads (R rows). */
void moe_shape_router(struct run_state *rs, const struct model_layer *L, int R);
/* Every thread, with xb holding the FFN-normed rows [r0, r1) of this
 * thread and the router's activations prepared: the MoE FFN of layer L,
 * its weighted expert sum added to x (this thread's rows; the caller ends
 * the section before anyone reads x). Counts the experts it touched into
 * m->last_experts and m->last_expert_bytes (thread 0). */
void moe_ffn(struct fwd *F, const struct model_layer *L, int layer, int ith, int nth);

#endif
