/*
 * eval: perplexity, KL divergence and top-1 agreement (eval.h). Windows
 * are fed in chunks of prefill steps; for each step the per-row statistics
 * (NLL, KL, argmax agreement) are computed on the model's thread pool into
 * per-row slots and then summed in row order, so thread count and chunking
 * never change the result.
 */
#include "model/eval.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fp4.h"
#include "xalloc.h"

#include "model/model.h"
#include "model/sample.h"
#include "model/threadpool.h"

void ev_model_opts(struct model_opts *mo, const struct ev_opts *o)
{
    int chunk = o->chunk > 0 ? o->chunk : (o->ctx < EV_DEFAULT_CHUNK ? o->ctx : EV_DEFAULT_CHUNK);
    mo->max_batch = 1;
    mo->ctx = o->ctx;
    mo->max_step_tokens = chunk;
    mo->max_logit_rows = chunk;
}

/* Statistics of one row (one predicted position). */
struct row_stat {
    double nll;     /* -log p_model(target) */
    double ref_nll; /* -log p_ref(target) */
    double kl;      /* KL(ref || model) */
    int agree;      /* argmaxes equal */
};

/* One step's rows, for the thread pool. */
struct rows_job {
    const float *logits;     /* (n_rows, V) of the model */
    const float *ref_logits; /* (n_rows, V) of the reference, or NULL */
    const int32_t *targets;  /* (n_rows) next tokens */
    int n_rows, V;
    double *scratch; /* (threads, V) exp(ref - max) */
    struct row_stat *out;
};

/* max and argmax (lowest index on a tie) of x[0..n). */
static float max_arg(const float *x, int n, int *arg)
{
    float m = x[0];
    *arg = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > m) {
            m = x[i];
            *arg = i;
        }
    return m;
}

/*
 * One scored position: NLL of the target under the model (and the
 * reference), argmaxes, and KL(ref || model) = sum_i p_ref(i) * (log p_ref(i)
 * - log p_model(i)), with both log-softmaxes taken in double from the f32
 * logits. er is this thread's scratch of V doubles: exp(ref - max_ref) is
 * computed once and reused for the KL sum.
 */
static void row_stats(const struct rows_job *j, int r, double *er, struct row_stat *st)
{
    int V = j->V, am, ar;
    const float *x = j->logits + (size_t)r * (size_t)V;
    float mx = max_arg(x, V, &am);
    double lse = sample_log_sum_exp(x, V, mx, NULL);
    int32_t t = j->targets[r];
    st->nll = lse - (double)x[t];
    if (!j->ref_logits)
        return;
    const float *y = j->ref_logits + (size_t)r * (size_t)V;
    float my = max_arg(y, V, &ar);
    double lse_y = sample_log_sum_exp(y, V, my, er);
    st->ref_nll = lse_y - (double)y[t];
    /* KL = sum p_ref * (log p_ref - log p_model); p_ref = er / sum(er). */
    double sum_er = exp(lse_y - (double)my), kl = 0;
    for (int i = 0; i < V; i++)
        kl += er[i] * (((double)y[i] - lse_y) - ((double)x[i] - lse));
    st->kl = kl / sum_er;
    st->agree = am == ar;
}

/* Thread ith takes rows ith, ith + nth, ...; each row's result goes to its
 * own slot, so the caller's ordered sum is independent of nth. */
static void rows_worker(void *varg, int ith, int nth)
{
    struct rows_job *j = varg;
    double *er = j->scratch + (size_t)ith * (size_t)j->V;
    for (int r = ith; r < j->n_rows; r += nth)
        row_stats(j, r, er, &j->out[r]);
}

/* Run one chunk of a window on model m from slot 0; returns its logits. */
static const float *step(struct model *m, const int32_t *toks, int pos, int n, struct err *err)
{
    struct model_seq s = {0, pos, n, toks, MODEL_LOGITS_ALL, NULL};
    if (model_step(m, &s, 1, err) != 0)
        return NULL;
    return s.out;
}

/* The model was loaded big enough for a window and a chunk (ev_model_opts). */
static int check_model(const struct model *m, int ctx, int chunk, const char *what, struct err *err)
{
    if (m->ctx < ctx || m->max_rows < chunk || m->max_logit_rows < chunk)
        return err_set(err, FP_ERR_USAGE,
                       "%s model: context %d / step rows %d / logits rows %d are smaller than "
                       "eval's window %d and chunk %d",
                       what, m->ctx, m->max_rows, m->max_logit_rows, ctx, chunk),
               -1;
    return 0;
}

int ev_run(struct model *m, struct model *ref, const int32_t *tokens, int64_t n,
           const struct ev_opts *o, struct ev_result *r, struct err *err)
{
    memset(r, 0, sizeof(*r));
    int ctx = o->ctx,
        chunk = o->chunk > 0 ? o->chunk : (ctx < EV_DEFAULT_CHUNK ? ctx : EV_DEFAULT_CHUNK);
    bool bos = o->bos >= 0;
    int V = m->cfg.n_vocab;
    if (ctx < 2 + bos || chunk < 1)
        return err_set(err, FP_ERR_USAGE, "--ctx %d is too small (at least %d)", ctx, 2 + bos), -1;
    if (n < 2 - bos)
        return err_set(err, FP_ERR_USAGE, "the text has %lld tokens: nothing to score",
                       (long long)n),
               -1;
    if (ref && ref->cfg.n_vocab != V)
        return err_set(err, FP_ERR_USAGE, "reference vocabulary %d != model vocabulary %d",
                       ref->cfg.n_vocab, V),
               -1;
    if (check_model(m, ctx, chunk, "evaluated", err) ||
        (ref && check_model(ref, ctx, chunk, "reference", err)))
        return -1;
    int nth = tp_threads(m->pool);
    int32_t *win = xmalloc(sizeof(int32_t) * (size_t)ctx);
    struct row_stat *stats = xcalloc((size_t)chunk, sizeof(*stats));
    struct rows_job job = {.V = V, .out = stats};
    job.scratch = ref ? xmalloc(sizeof(double) * (size_t)V * (size_t)nth) : NULL;
    double nll = 0, ref_nll = 0, kl = 0;
    int64_t agree = 0;
    int rc = -1;
    /* A window: [BOS] + per_win text tokens, from an empty cache (slot 0
     * rewound); positions are fed in chunks, the model first, then the
     * reference on the same tokens, and the chunk's rows are scored. */
    int64_t per_win = ctx - bos;
    for (int64_t w0 = 0; w0 < n; w0 += per_win) {
        int64_t take = n - w0 < per_win ? n - w0 : per_win;
        int L = (int)take + bos;
        if (L < 2)
            break;
        if (bos)
            win[0] = o->bos;
        memcpy(win + bos, tokens + w0, sizeof(int32_t) * (size_t)take);
        model_slot_free(m, 0);
        if (ref)
            model_slot_free(ref, 0);
        for (int p = 0; p < L - 1; p += chunk) {
            /* Positions p..p+k-1 predict tokens p+1..p+k. The window's last
             * token predicts nothing in it, so it is never fed. */
            int k = L - 1 - p < chunk ? L - 1 - p : chunk;
            const float *lq = step(m, win + p, p, k, err);
            const float *lr = lq && ref ? step(ref, win + p, p, k, err) : NULL;
            if (!lq || (ref && !lr))
                goto out;
            job.logits = lq;
            job.ref_logits = lr;
            job.targets = win + p + 1;
            job.n_rows = k;
            tp_run(m->pool, rows_worker, &job);
            for (int i = 0; i < k; i++) {
                nll += stats[i].nll;
                ref_nll += stats[i].ref_nll;
                kl += stats[i].kl;
                agree += stats[i].agree;
                r->kl_max = stats[i].kl > r->kl_max ? stats[i].kl : r->kl_max;
            }
            r->n_scored += k;
        }
        r->n_windows++;
        r->n_tokens += take;
    }
    /* Means over the scored positions (n_scored >= 1: the text has >= 2 tokens). */
    double ns = (double)r->n_scored;
    r->nll = nll / ns;
    r->ppl = exp(r->nll);
    if (ref) {
        r->has_ref = true;
        r->ref_nll = ref_nll / ns;
        r->ref_ppl = exp(r->ref_nll);
        r->kl = kl / ns;
        r->top1 = (double)agree / ns;
    }
    rc = 0;
out:
    free(win);
    free(stats);
    free(job.scratch);
    return rc;
}
