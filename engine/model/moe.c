/*
 * model/moe: the mixture-of-experts FFN of the CPU backend (qwen3moe,
 * docs/formats.md §2). Per row: router logits (ffn_gate_inp), a softmax
 * over all experts, the top k, their probabilities renormalised to sum 1
 * (llama.cpp's qwen3moe: norm_w on, no extra scale); gpt-oss adds the
 * router's bias, takes the top k of the raw logits with a softmax over
 * those k, biases every expert matmul and uses the clamped SwiGLU. The
 * step then groups its rows by expert (a counting sort, rows in order
 * within each expert),
 * gathers each expert's rows into one block, and runs every touched
 * expert's gate/up, SwiGLU and down once over its whole block: an expert's
 * weights are read once per step however many rows chose it. Per-request
 * decode (model.c) runs one pass per sequence, so there they are read per
 * sequence.
 *
 * Determinism: a row's expert outputs come from q_matmul (the value for a
 * weight row and an activation row never depends on the other rows) and
 * are summed in rank order (the router's order), so a row's result is the
 * same alone or in any batch.
 */
#include <math.h>
#include <string.h>

#include "model/backend_cpu.h"
#include "model/model.h"

#include "cpu/matmul.h"
#include "cpu/ops.h"

void moe_shape_router(struct run_state *rs, const struct model_layer *L, int R)
{
    q_act_shape(&rs->act[ACT_GATE], L->router.type, R, L->router.cols);
}

/* The indices of the k largest of v[0..n), largest first (ties: the lower
 * index, as a stable sort). */
static void top_k(const float *v, int n, int k, int *idx)
{
    for (int j = 0; j < k; j++) {
        int best = -1;
        for (int e = 0; e < n; e++) {
            bool taken = false;
            for (int i = 0; i < j; i++)
                taken |= idx[i] == e;
            if (!taken && (best < 0 || v[e] > v[best]))
                best = e;
        }
        idx[j] = best;
    }
}

/* Row r's experts: softmax of the router logits, the k largest (ties: the
 * lower index, as a stable sort), weights renormalised over the chosen. */
static void route(const float *logits, int n_expert, int k, int *exp, float *w)
{
    float mx = logits[0];
    for (int e = 1; e < n_expert; e++)
        mx = logits[e] > mx ? logits[e] : mx;
    float p[MODEL_MAX_EXPERTS];
    double sum = 0;
    for (int e = 0; e < n_expert; e++) {
        p[e] = expf(logits[e] - mx);
        sum += p[e];
    }
    for (int e = 0; e < n_expert; e++)
        p[e] = (float)(p[e] / sum);
    top_k(p, n_expert, k, exp);
    float chosen = 0;
    for (int j = 0; j < k; j++) {
        w[j] = p[exp[j]];
        chosen += p[exp[j]];
    }
    if (chosen < 6.103515625e-5f) /* llama.cpp's clamp of the sum */
        chosen = 6.103515625e-5f;
    for (int j = 0; j < k; j++)
        w[j] /= chosen;
}

/* gpt-oss: the k largest raw logits (ties: the lower index), weights a
 * softmax over those k only (ggml_soft_max: sum in double). */
static void route_oai(const float *logits, int n_expert, int k, int *exp, float *w)
{
    top_k(logits, n_expert, k, exp);
    float mx = logits[exp[0]];
    double sum = 0;
    for (int j = 0; j < k; j++) {
        w[j] = expf(logits[exp[j]] - mx);
        sum += w[j];
    }
    for (int j = 0; j < k; j++)
        w[j] *= (float)(1.0 / sum);
}

/* gpt-oss's clamped SwiGLU on n columns: gate capped at limit above, up
 * clamped to [-limit, limit], out = gate * sigmoid(alpha gate) * (up + 1)
 * (alpha 1.702, limit 7, as llama.cpp's swiglu_oai). */
static void swiglu_oai(float *gate, const float *up, int n)
{
    const float alpha = 1.702f, limit = 7.0f;
    for (int i = 0; i < n; i++) {
        float x = gate[i] < limit ? gate[i] : limit;
        float y = up[i] < -limit ? -limit : up[i] > limit ? limit : up[i];
        gate[i] = x / (1.0f + expf(alpha * (-x))) * (y + 1.0f);
    }
}

/* Thread 0: route every row, then lay the gathered block out by expert.
 * moe_off[e] .. moe_off[e + 1] are expert e's gathered rows; moe_pos[r k
 * + j] is where row r's j-th expert reads and writes; moe_grow[g] is the
 * row behind gathered row g. */
static void group(struct model *m, int layer, int R)
{
    const struct model_config *c = &m->cfg;
    struct run_state *rs = &m->rs;
    int E = c->n_expert, k = c->n_expert_used;
    const float *rb = m->w.layers[layer].router_b;
    for (int r = 0; r < R; r++) {
        float *lg = rs->moe_logits + (size_t)r * E;
        if (rb) { /* gpt-oss */
            for (int e = 0; e < E; e++)
                lg[e] += rb[e];
            route_oai(lg, E, k, rs->moe_exp + (size_t)r * k, rs->moe_w + (size_t)r * k);
        } else {
            route(lg, E, k, rs->moe_exp + (size_t)r * k, rs->moe_w + (size_t)r * k);
        }
    }
    int *off = rs->moe_off;
    memset(off, 0, sizeof(int) * (size_t)(E + 1));
    for (int i = 0; i < R * k; i++)
        off[rs->moe_exp[i] + 1]++;
    uint64_t *count = m->expert_rows + (size_t)layer * E;
    for (int e = 0; e < E; e++) {
        count[e] += (uint64_t)off[e + 1];
        off[e + 1] += off[e];
    }
    int *fill = rs->moe_fill;
    memcpy(fill, off, sizeof(int) * (size_t)E);
    for (int r = 0; r < R; r++)
        for (int j = 0; j < k; j++) {
            int g = fill[rs->moe_exp[r * k + j]]++;
            rs->moe_pos[r * k + j] = g;
            rs->moe_grow[g] = r;
        }
}

/* The view of a prepared block's rows [g0, g0 + n). */
static struct q_act act_rows(const struct q_act *a, int g0, int n)
{
    struct q_act v = *a;
    v.data = (uint8_t *)a->data + (size_t)g0 * a->row_bytes;
    v.rows = n;
    return v;
}

void moe_ffn(struct fwd *F, const struct model_layer *L, int layer, int ith, int nth)
{
    struct model *m = F->m;
    const struct model_config *c = &m->cfg;
    struct run_state *rs = &m->rs;
    const int R = F->rows, D = c->n_embd, E = c->n_expert, k = c->n_expert_used, FF = c->n_ff_exp,
              G = R * k;
    const struct q_matrix *gate = L->exps, *up = L->exps + E, *down = L->exps + 2 * E;
    const struct q_matrix *gu[2] = {&gate[0], &up[0]}; /* an expert tensor has one type */
    int64_t r0, r1, g0, g1, lo, hi;
    cpu_share(R, ith, nth, 1, &r0, &r1);
    cpu_share(G, ith, nth, 1, &g0, &g1);

    /* Router logits, then (thread 0) the routes and the grouping. */
    cpu_matmul_share(m, &L->router, &rs->act[ACT_GATE], rs->moe_logits, E, ith, nth, &lo, &hi);
    cpu_section_end(F, ith, PH_MATMUL);
    if (ith == 0) {
        group(m, layer, R);
        for (int e = 0; e < E; e++)
            if (rs->moe_off[e + 1] > rs->moe_off[e]) {
                m->last_experts++;
                m->last_expert_bytes += model_expert_bytes(m, layer, e);
            }
        cpu_shape_group(rs, ACT_GATE, gu, 2, G);
        q_act_shape(&rs->act[ACT_DOWN], down[0].type, G, FF);
    }
    cpu_section_end(F, ith, PH_OTHER);

    /* Gather the rows into expert order and prepare them once. */
    for (int64_t g = g0; g < g1; g++)
        memcpy(rs->moe_xg + (size_t)g * D, rs->xb + (size_t)rs->moe_grow[g] * D,
               sizeof(float) * (size_t)D);
    cpu_prep_group(rs, ACT_GATE, gu, 2, rs->moe_xg, D, g0, g1);
    cpu_section_end(F, ith, PH_OTHER);

    /* Gate and up of each touched expert over its block, SwiGLU on this
     * thread's columns (no barrier between experts: disjoint outputs). */
    for (int e = 0; e < E; e++) {
        int b0 = rs->moe_off[e], n = rs->moe_off[e + 1] - b0;
        if (n == 0)
            continue;
        struct q_act ag = act_rows(cpu_act_for(rs, ACT_GATE, gu, 0), b0, n);
        struct q_act au = act_rows(cpu_act_for(rs, ACT_GATE, gu, 1), b0, n);
        float *hg = rs->hb + (size_t)b0 * FF, *hu = rs->hb2 + (size_t)b0 * FF;
        cpu_matmul_share(m, &gate[e], &ag, hg, FF, ith, nth, &lo, &hi);
        cpu_matmul_share(m, &up[e], &au, hu, FF, ith, nth, &lo, &hi);
        for (int i = 0; i < n && hi > lo; i++) {
            float *g = hg + (size_t)i * FF + lo, *u = hu + (size_t)i * FF + lo;
            if (!L->gate_b) {
                rs->ops->silu_mul(g, u, (int)(hi - lo));
                continue;
            }
            const float *gb = L->gate_b + (size_t)e * FF + lo, *ub = L->up_b + (size_t)e * FF + lo;
            for (int64_t j = 0; j < hi - lo; j++) {
                g[j] += gb[j];
                u[j] += ub[j];
            }
            swiglu_oai(g, u, (int)(hi - lo));
        }
    }
    cpu_section_end(F, ith, PH_MATMUL);

    if (g1 > g0)
        q_act_prepare_rows(&rs->act[ACT_DOWN], rs->hb, FF, g0, g1);
    cpu_section_end(F, ith, PH_MATMUL);

    for (int e = 0; e < E; e++) {
        int b0 = rs->moe_off[e], n = rs->moe_off[e + 1] - b0;
        if (n == 0)
            continue;
        struct q_act ad = act_rows(&rs->act[ACT_DOWN], b0, n);
        cpu_matmul_share(m, &down[e], &ad, rs->moe_y + (size_t)b0 * D, D, ith, nth, &lo, &hi);
    }
    cpu_section_end(F, ith, PH_MATMUL);

    /* Each row: its experts' outputs weighted and summed in rank order,
     * then added to the residual stream. */
    for (int64_t r = r0; r < r1; r++) {
        float *x = rs->x + (size_t)r * D, *acc = rs->xb + (size_t)r * D;
        for (int j = 0; j < k; j++) {
            const float *y = rs->moe_y + (size_t)rs->moe_pos[r * k + j] * D;
            float w = rs->moe_w[r * k + j];
            if (L->down_b) { /* gpt-oss: the expert's down bias, before the weight */
                const float *b = L->down_b + (size_t)rs->moe_exp[r * k + j] * D;
                for (int i = 0; i < D; i++)
                    acc[i] = j == 0 ? (y[i] + b[i]) * w : acc[i] + (y[i] + b[i]) * w;
                continue;
            }
            for (int i = 0; i < D; i++)
                acc[i] = j == 0 ? y[i] * w : acc[i] + y[i] * w;
        }
        for (int i = 0; i < D; i++)
            x[i] += acc[i];
    }
}
