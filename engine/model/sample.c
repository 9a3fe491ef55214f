/*
 * sample: greedy, temperature, min-p, top-k and top-p, penalties and
 * log-probabilities (see sample.h). Top-k and
 * top-p work on a candidate list that grows only as far as needed: the k
 * best are found with a bounded min-heap, so a peaked distribution costs
 * O(n log k) rather than a full sort of the vocabulary.
 */
#include "model/sample.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "rng.h"
#include "xalloc.h"

/* Uniform in [0, 1) with 24 bits. */
static float rand_unit(uint64_t *state)
{
    return (float)(rng_next(state) >> 40) / 16777216.0f;
}

int32_t sample_argmax(const float *logits, int n)
{
    /* The maximum over 8 independent lanes (one compare chain per lane, not
     * one load-compare dependency through the whole vocabulary), then the
     * first id holding it: the lowest id among equals. NaN never wins a
     * comparison, so it is never chosen unless nothing else is there (0). */
    float lane[8];
    int i = 0;
    for (int k = 0; k < 8; k++)
        lane[k] = -INFINITY;
    for (; i + 8 <= n; i += 8)
        for (int k = 0; k < 8; k++)
            if (logits[i + k] > lane[k])
                lane[k] = logits[i + k];
    float mx = lane[0];
    for (int k = 1; k < 8; k++)
        if (lane[k] > mx)
            mx = lane[k];
    for (; i < n; i++)
        if (logits[i] > mx)
            mx = logits[i];
    for (int32_t j = 0; j < n; j++)
        if (logits[j] == mx)
            return j;
    return 0;
}

void sampler_init(struct sampler *s, int n_vocab, const struct sample_params *p)
{
    s->p = *p;
    /* greedy also when 1/t overflows: inf * 0 would make the best
     * token's weight NaN */
    if (!(s->p.temperature > 0) || !isfinite(1.0f / s->p.temperature))
        s->p.temperature = 0;
    if (!(s->p.top_p > 0 && s->p.top_p <= 1))
        s->p.top_p = 1;
    if (s->p.top_k < 0 || s->p.top_k > n_vocab)
        s->p.top_k = 0;
    if (!(s->p.min_p >= 0 && s->p.min_p <= 1))
        s->p.min_p = 0;
    /* 0 is the zero-initialised "unset", read as off like 1 */
    if (!(s->p.repetition_penalty > 0) || !isfinite(s->p.repetition_penalty))
        s->p.repetition_penalty = 1;
    if (!isfinite(s->p.frequency_penalty))
        s->p.frequency_penalty = 0;
    if (!isfinite(s->p.presence_penalty))
        s->p.presence_penalty = 0;
    s->rng = p->seed;
    s->n_vocab = n_vocab;
    s->prob = xmalloc(sizeof(float) * (size_t)n_vocab);
    s->idx = xmalloc(sizeof(int32_t) * (size_t)n_vocab);
    s->work = NULL;
    s->count = NULL;
    s->seen = NULL;
    if (s->p.repetition_penalty != 1 || s->p.frequency_penalty != 0 || s->p.presence_penalty != 0) {
        s->work = xmalloc(sizeof(float) * (size_t)n_vocab);
        s->count = xcalloc((size_t)n_vocab, sizeof(int32_t));
        s->seen = xcalloc((size_t)n_vocab, 1);
    }
}

void sampler_release(struct sampler *s)
{
    free(s->prob);
    free(s->idx);
    free(s->work);
    free(s->count);
    free(s->seen);
    s->prob = s->work = NULL;
    s->idx = s->count = NULL;
    s->seen = NULL;
}

/* vLLM's apply_penalties, token by token instead of with masks: the
 * repetition penalty on the union of prompt and output, then the two
 * subtractions in vLLM's order (so the floats round the same way). The
 * marks and counts are cleared on the way out, by the same walk. */
const float *sampler_penalize(struct sampler *s, const float *logits, const int32_t *tokens,
                              int n_prompt, int n)
{
    if (!s->work)
        return logits;
    float *w = s->work;
    memcpy(w, logits, sizeof(float) * (size_t)s->n_vocab);
    float rp = s->p.repetition_penalty, fp = s->p.frequency_penalty, pp = s->p.presence_penalty;
    if (rp != 1) {
        for (int i = 0; i < n; i++) {
            int32_t t = tokens[i];
            if (t < 0 || t >= s->n_vocab || s->seen[t])
                continue;
            s->seen[t] = 1;
            w[t] = w[t] > 0 ? w[t] / rp : w[t] * rp;
        }
        for (int i = 0; i < n; i++)
            if (tokens[i] >= 0 && tokens[i] < s->n_vocab)
                s->seen[tokens[i]] = 0;
    }
    if (fp != 0 || pp != 0) {
        for (int i = n_prompt; i < n; i++)
            if (tokens[i] >= 0 && tokens[i] < s->n_vocab)
                s->count[tokens[i]]++;
        for (int i = n_prompt; i < n; i++) {
            int32_t t = tokens[i];
            if (t < 0 || t >= s->n_vocab || s->count[t] == 0)
                continue;
            w[t] -= fp * (float)s->count[t];
            w[t] -= pp;
            s->count[t] = 0;
        }
    }
    return w;
}

double sample_log_sum_exp(const float *x, int n, float mx, double *keep)
{
    double s = 0;
    for (int i = 0; i < n; i++) {
        double e = exp((double)x[i] - (double)mx);
        if (keep)
            keep[i] = e;
        s += e;
    }
    return (double)mx + log(s);
}

float sample_logprobs(const float *logits, int n, int32_t tok, int k, int32_t *top_ids,
                      float *top_lp)
{
    float mx = logits[sample_argmax(logits, n)];
    double lse = sample_log_sum_exp(logits, n, mx, NULL);
    if (k > n)
        k = n;
    if (k > SAMPLE_MAX_TOP)
        k = SAMPLE_MAX_TOP;
    /* the k best by insertion into a sorted list (k is small; a new entry
     * usually fails the first comparison, against the worst kept) */
    int m = 0;
    for (int32_t i = 0; i < n && k > 0; i++) {
        if (m == k && !(logits[i] > logits[top_ids[m - 1]]))
            continue;
        int j = m < k ? m++ : m - 1;
        while (j > 0 && logits[i] > logits[top_ids[j - 1]]) {
            top_ids[j] = top_ids[j - 1];
            j--;
        }
        top_ids[j] = i;
    }
    for (int j = 0; j < m; j++)
        top_lp[j] = (float)((double)logits[top_ids[j]] - lse);
    return (float)((double)logits[tok] - lse);
}

/* "a ranks below b": smaller logit, or equal logit and larger id. */
static int below(const float *l, int32_t a, int32_t b)
{
    return l[a] < l[b] || (l[a] == l[b] && a > b);
}

static void sift_down(int32_t *h, int n, int i, const float *l)
{
    for (;;) {
        int c = 2 * i + 1;
        if (c >= n)
            return;
        if (c + 1 < n && below(l, h[c + 1], h[c]))
            c++;
        if (!below(l, h[c], h[i]))
            return;
        int32_t t = h[i];
        h[i] = h[c];
        h[c] = t;
        i = c;
    }
}

/* The k best ids of logits in s->idx[0..k), best first. */
static void top_k(struct sampler *s, const float *l, int k)
{
    int32_t *h = s->idx;
    int n = 0;
    for (int32_t i = 0; i < s->n_vocab; i++) {
        if (n < k) {
            h[n++] = i;
            for (int j = n - 1; j > 0 && below(l, h[j], h[(j - 1) / 2]); j = (j - 1) / 2) {
                int32_t t = h[j];
                h[j] = h[(j - 1) / 2];
                h[(j - 1) / 2] = t;
            }
        } else if (below(l, h[0], i)) {
            h[0] = i;
            sift_down(h, n, 0, l);
        }
    }
    /* Heap sort: repeatedly move the worst to the end -> best first. */
    for (int end = n - 1; end > 0; end--) {
        int32_t t = h[0];
        h[0] = h[end];
        h[end] = t;
        sift_down(h, end, 0, l);
    }
}

/*
 * How many of the best tokens to rank for top-p: enough to hold `need` of
 * the mass, from one pass over s->prob (weights in (0, 1], the best is 1).
 * Weights are binned by their binary exponent; the bins from the top down
 * to the one where the mass reaches `need` hold every token the ranked
 * prefix can need (all weights above that bin rank before it), at most
 * twice as light as the lightest one needed. Ranking only those replaces
 * rankings of ever larger candidate sets.
 */
static int candidates_for_top_p(const struct sampler *s, double need)
{
    double mass[256] = {0};
    int count[256] = {0};
    for (int i = 0; i < s->n_vocab; i++) {
        uint32_t bits;
        memcpy(&bits, &s->prob[i], sizeof(bits));
        unsigned e = (bits >> 23) & 0xff; /* weights are >= 0: no sign bit */
        mass[e] += s->prob[i];
        count[e]++;
    }
    double acc = 0;
    int n = 0;
    for (int e = 255; e >= 0; e--) {
        acc += mass[e];
        n += count[e];
        if (acc >= need)
            break;
    }
    return n < 1 ? 1 : n;
}

int32_t sampler_sample(struct sampler *s, const float *logits)
{
    if (s->p.temperature == 0)
        return sample_argmax(logits, s->n_vocab);
    float inv_t = 1.0f / s->p.temperature;
    float mx = logits[sample_argmax(logits, s->n_vocab)];
    int k = s->p.top_k ? s->p.top_k : s->n_vocab;
    /* Top-p's threshold is a share of the mass that top-k left: the whole
     * vocabulary's without top-k, else the k best tokens' (top-p applies
     * to the renormalised top-k distribution, as in vLLM, Hugging Face and
     * llama.cpp). With top-k the k best are taken at once; without it as
     * many as the weights' exponents say top-p can need (and, should the
     * ranked sum fall short by a rounding, eight times more). */
    /* min-p keeps the tokens whose weight (probability over the best
     * one's, which weighs 1) is at least min_p: a prefix of the ranked
     * candidates, so it only shortens what top-k keeps, and top-p's share
     * is taken of what is left (vLLM applies min-p before both). */
    float min_p = s->p.min_p;
    double total = 0;
    int n;
    if (k < s->n_vocab) {
        top_k(s, logits, k);
        int kept = 0;
        for (int i = 0; i < k; i++) {
            double w = exp((double)(logits[s->idx[i]] - mx) * inv_t);
            if ((float)w < min_p)
                break;
            total += w;
            kept++;
        }
        k = n = kept;
    } else {
        for (int i = 0; i < s->n_vocab; i++) {
            s->prob[i] = (float)exp((double)(logits[i] - mx) * inv_t);
            if (s->prob[i] < min_p)
                s->prob[i] = 0;
            total += s->prob[i];
        }
        if (!(s->p.top_p < 1)) {
            /* No filter (OpenAI's defaults): draw in id order from the
             * whole distribution; ranking the vocabulary would cost a
             * sort of it per token for the same distribution. */
            double u = rand_unit(&s->rng) * total, acc = 0;
            int32_t last = 0;
            for (int i = 0; i < s->n_vocab; i++) {
                if (s->prob[i] > 0)
                    last = i;
                acc += s->prob[i];
                if (u < acc)
                    return i;
            }
            return last;
        }
        n = candidates_for_top_p(s, s->p.top_p * total);
    }
    for (;;) {
        if (k == s->n_vocab) /* with top-k, idx already holds the k best */
            top_k(s, logits, n);
        double mass = 0;
        int keep = n;
        for (int i = 0; i < n; i++) {
            s->prob[i] = (float)exp((double)(logits[s->idx[i]] - mx) * inv_t);
            if (s->prob[i] < min_p) { /* ranked: the rest are lighter still */
                keep = i;
                break;
            }
            mass += s->prob[i];
            if (s->p.top_p < 1 && mass >= s->p.top_p * total) {
                keep = i + 1;
                break;
            }
        }
        /* Done when top-p was reached inside the candidates, or when the
         * candidates are all top-k allows. */
        if (keep < n || n == k || (s->p.top_p < 1 && mass >= s->p.top_p * total)) {
            double sum = 0;
            for (int i = 0; i < keep; i++)
                sum += s->prob[i];
            double u = rand_unit(&s->rng) * sum, acc = 0;
            for (int i = 0; i < keep; i++) {
                acc += s->prob[i];
                if (u < acc)
                    return s->idx[i];
            }
            return s->idx[keep - 1];
        }
        n = n * 8 < k ? n * 8 : k;
    }
}
