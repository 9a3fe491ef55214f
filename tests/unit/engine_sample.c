/* Unit tests for engine/model/sample: greedy, ties, seeded draws, top-k, top-p,
 * min-p, penalties and log-probabilities against reference computations. */
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "test.h"
#include "xalloc.h"

#include "model/sample.h"

TEST(argmax_takes_lowest_index_on_ties)
{
    float l[5] = {1, 3, 2, 3, -1};
    CHECK_INT(sample_argmax(l, 5), 1);
    struct sampler s;
    sampler_init(&s, 5, &(struct sample_params){0});
    CHECK_INT(sampler_sample(&s, l), 1);
    sampler_release(&s);
}

/* The lane-split maximum: any length, the maximum anywhere (the tail past a
 * multiple of 8 included), lowest id among equals, NaN never chosen. */
TEST(argmax_any_length_and_position)
{
    enum { N = 77 };
    float l[N];
    for (int n = 1; n <= N; n++)
        for (int at = 0; at < n; at++) {
            for (int i = 0; i < n; i++)
                l[i] = -(float)((i * 37) % 101) - 1.0f;
            l[at] = 5;
            if (at + 3 < n)
                l[at + 3] = 5; /* a later equal does not win */
            if (at > 0)
                l[at - 1] = NAN;
            int32_t got = sample_argmax(l, n);
            if (got != at) {
                CHECK_MSG(0, "n %d: max at %d, argmax %d", n, at, got);
                return;
            }
        }
    float all_nan_but_last[9] = {NAN, NAN, NAN, NAN, NAN, NAN, NAN, NAN, 1};
    CHECK_INT(sample_argmax(all_nan_but_last + 1, 8), 7);
    float neg[3] = {-INFINITY, -INFINITY, -INFINITY};
    CHECK_INT(sample_argmax(neg, 3), 0);
}

TEST(same_seed_same_tokens)
{
    float l[100];
    for (int i = 0; i < 100; i++)
        l[i] = sinf((float)i);
    struct sample_params p = {.temperature = 1.0f, .top_p = 1.0f, .seed = 42};
    struct sampler a, b, c;
    sampler_init(&a, 100, &p);
    sampler_init(&b, 100, &p);
    p.seed = 43;
    sampler_init(&c, 100, &p);
    int same = 1, differ = 0;
    for (int i = 0; i < 200; i++) {
        int32_t x = sampler_sample(&a, l), y = sampler_sample(&b, l), z = sampler_sample(&c, l);
        same &= x == y;
        differ |= x != z;
        CHECK(x >= 0 && x < 100);
    }
    CHECK(same);
    CHECK(differ);
    sampler_release(&a);
    sampler_release(&b);
    sampler_release(&c);
}

TEST(frequencies_follow_softmax)
{
    float l[3] = {0, logf(3.0f), -INFINITY};
    struct sampler s;
    sampler_init(&s, 3, &(struct sample_params){.temperature = 1, .top_p = 1, .seed = 7});
    int n1 = 0, n2 = 0, N = 20000;
    for (int i = 0; i < N; i++) {
        int32_t t = sampler_sample(&s, l);
        n1 += t == 1;
        n2 += t == 2;
    }
    CHECK_NEAR((double)n1 / N, 0.75, 0.02);
    CHECK_INT(n2, 0);
    sampler_release(&s);
}

TEST(top_k_and_top_p_restrict_candidates)
{
    float l[1000];
    for (int i = 0; i < 1000; i++)
        l[i] = (float)(i % 97) * 0.01f; /* ids 96, 193, ... share the maximum */
    struct sampler s;
    sampler_init(&s, 1000, &(struct sample_params){.temperature = 1, .top_k = 1, .seed = 1});
    for (int i = 0; i < 50; i++)
        CHECK_INT(sampler_sample(&s, l), 96); /* the best, lowest id among equals */
    sampler_release(&s);
    /* Top-p: token 5 holds ~90% of the mass; p = 0.5 keeps only it. */
    float m[10] = {0, 0, 0, 0, 0, 5, 0, 0, 0, 0};
    sampler_init(&s, 10, &(struct sample_params){.temperature = 1, .top_p = 0.5f, .seed = 3});
    for (int i = 0; i < 50; i++)
        CHECK_INT(sampler_sample(&s, m), 5);
    sampler_release(&s);
    /* top_k = 3 over 1000 nearly flat logits: only the 3 best appear. */
    for (int i = 0; i < 1000; i++)
        l[i] = -(float)i * 1e-3f;
    sampler_init(&s, 1000, &(struct sample_params){.temperature = 5, .top_k = 3, .seed = 9});
    int seen[3] = {0};
    for (int i = 0; i < 300; i++) {
        int32_t t = sampler_sample(&s, l);
        CHECK(t >= 0 && t < 3);
        if (t >= 0 && t < 3)
            seen[t] = 1;
    }
    CHECK(seen[0] && seen[1] && seen[2]);
    sampler_release(&s);
}

/* With both filters, top-p applies to the top-k candidates' own
 * distribution (renormalised), as vLLM, Hugging Face and llama.cpp do:
 * A holds 0.3 and B 0.2 of the whole mass, so after top_k = 2 A holds 0.6
 * and top_p = 0.55 keeps A alone. Measured against the whole vocabulary,
 * 0.55 would not be reached and B would be drawn too. */
TEST(top_p_applies_after_top_k)
{
    float l[10];
    l[0] = logf(0.3f);
    l[1] = logf(0.2f);
    for (int i = 2; i < 10; i++)
        l[i] = logf(0.5f / 8);
    struct sampler s;
    sampler_init(&s, 10,
                 &(struct sample_params){.temperature = 1, .top_k = 2, .top_p = 0.55f, .seed = 5});
    int n_a = 0;
    for (int i = 0; i < 400; i++)
        n_a += sampler_sample(&s, l) == 0;
    CHECK_INT(n_a, 400);
    sampler_release(&s);
    /* top_p = 0.7 > 0.6 keeps both, in the ratio 3:2 */
    sampler_init(&s, 10,
                 &(struct sample_params){.temperature = 1, .top_k = 2, .top_p = 0.7f, .seed = 5});
    int n0 = 0, n1 = 0, N = 20000;
    for (int i = 0; i < N; i++) {
        int32_t t = sampler_sample(&s, l);
        n0 += t == 0;
        n1 += t == 1;
    }
    CHECK_INT(n0 + n1, N);
    CHECK_NEAR((double)n0 / N, 0.6, 0.02);
    sampler_release(&s);
}

/* Top-p over many tokens (more than any fixed first batch of candidates):
 * the draws come from exactly the smallest best-first prefix holding
 * top_p of the mass, computed here by brute force, and reach its last one. */
TEST(top_p_keeps_the_smallest_prefix)
{
    enum { V = 3000 };
    float l[V];
    double w[V], total = 0;
    for (int i = 0; i < V; i++) { /* a permuted, slowly falling spread */
        int rank = (i * 1103) % V;
        l[i] = -(float)rank * 2e-3f;
    }
    float mx = l[sample_argmax(l, V)];
    for (int i = 0; i < V; i++)
        total += w[i] = exp((double)(l[i] - mx));
    /* best first by logit: rank r is the id with (id * 1103) % V == r */
    int by_rank[V];
    for (int i = 0; i < V; i++)
        by_rank[(i * 1103) % V] = i;
    double acc = 0;
    int keep = 0;
    while (acc < 0.8 * total)
        acc += w[by_rank[keep++]];
    CHECK(keep > 500); /* far more than 64 */
    bool allowed[V] = {false};
    for (int r = 0; r < keep; r++)
        allowed[by_rank[r]] = true;
    struct sampler s;
    sampler_init(&s, V, &(struct sample_params){.temperature = 1, .top_p = 0.8f, .seed = 21});
    int outside = 0, lowest_rank_seen = 0;
    for (int d = 0; d < 20000; d++) {
        int32_t t = sampler_sample(&s, l);
        outside += !allowed[t];
        int r = (t * 1103) % V;
        if (allowed[t] && r > lowest_rank_seen)
            lowest_rank_seen = r;
    }
    CHECK_INT(outside, 0);
    CHECK_MSG(lowest_rank_seen > keep - 50, "deepest rank drawn %d of %d kept", lowest_rank_seen,
              keep);
    sampler_release(&s);
}

/* A temperature so small that 1/t overflows float (a client's "nearly
 * greedy", 1e-39 as a float is subnormal) is greedy, not NaN weights. */
TEST(tiny_temperature_is_greedy)
{
    float l[1000];
    for (int i = 0; i < 1000; i++)
        l[i] = sinf((float)i);
    int32_t best = sample_argmax(l, 1000);
    struct sampler s;
    sampler_init(&s, 1000, &(struct sample_params){.temperature = 1e-39f, .top_p = 1, .seed = 2});
    for (int i = 0; i < 50; i++)
        CHECK_INT(sampler_sample(&s, l), best);
    sampler_release(&s);
    sampler_init(&s, 1000,
                 &(struct sample_params){.temperature = 1e-39f, .top_p = 0.9f, .seed = 2});
    for (int i = 0; i < 50; i++)
        CHECK_INT(sampler_sample(&s, l), best);
    sampler_release(&s);
}

/* ---- penalties, min-p and logprobs against reference computations ---- */

/* vLLM's apply_penalties written as it is, with masks and counts over the
 * whole vocabulary: repetition over prompt | output, then frequency x
 * count, then presence. */
static void ref_penalties(float *x, int V, const int32_t *toks, int n_prompt, int n, float rp,
                          float fp, float pp)
{
    int count[64] = {0};
    bool any[64] = {false};
    for (int i = 0; i < n; i++)
        any[toks[i]] = true;
    for (int i = n_prompt; i < n; i++)
        count[toks[i]]++;
    for (int t = 0; t < V; t++) {
        if (any[t])
            x[t] = x[t] > 0 ? x[t] / rp : x[t] * rp;
        x[t] -= fp * (float)count[t];
        x[t] -= pp * (float)(count[t] > 0);
    }
}

TEST(penalties_match_vllm_reference)
{
    enum { V = 12 };
    float l[V] = {2.5f, -1.0f, 0.0f, 3.25f, -0.5f, 1.0f, 4.0f, -2.0f, 0.75f, 0.1f, -3.0f, 2.0f};
    float keep[V];
    memcpy(keep, l, sizeof(l));
    /* prompt 1 2 2 6, output 2 3 3 5 3 10 (repeats in both parts) */
    int32_t toks[] = {1, 2, 2, 6, 2, 3, 3, 5, 3, 10};
    struct {
        float rp, fp, pp;
    } cases[] = {
        {1.3f, 0, 0}, {1, 0.4f, 0}, {1, 0, 0.25f}, {1.3f, 0.4f, 0.25f}, {0.8f, -0.5f, 1.5f}};
    for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
        struct sampler s;
        sampler_init(&s, V,
                     &(struct sample_params){.temperature = 0,
                                             .repetition_penalty = cases[c].rp,
                                             .frequency_penalty = cases[c].fp,
                                             .presence_penalty = cases[c].pp});
        float want[V];
        memcpy(want, l, sizeof(l));
        ref_penalties(want, V, toks, 4, 10, cases[c].rp, cases[c].fp, cases[c].pp);
        for (int rep = 0; rep < 2; rep++) { /* marks and counts are cleared between calls */
            const float *got = sampler_penalize(&s, l, toks, 4, 10);
            CHECK(got != l);
            for (int t = 0; t < V; t++)
                CHECK_MSG(got[t] == want[t], "case %zu token %d: %g, want %g", c, t, (double)got[t],
                          (double)want[t]);
        }
        CHECK(memcmp(keep, l, sizeof(l)) == 0); /* the model's row is not touched */
        /* greedy picks the penalised argmax */
        CHECK_INT(sampler_sample(&s, sampler_penalize(&s, l, toks, 4, 10)), sample_argmax(want, V));
        sampler_release(&s);
    }
    /* no penalty: the row itself, nothing allocated */
    struct sampler s;
    sampler_init(&s, V, &(struct sample_params){.temperature = 1, .repetition_penalty = 1});
    CHECK(sampler_penalize(&s, l, toks, 4, 10) == l);
    CHECK(s.work == NULL);
    sampler_release(&s);
}

/* The distribution min-p, top-k and top-p leave, as vLLM computes it:
 * softmax(l / t); min-p drops p < min_p x max p; top-k keeps the k best;
 * top-p keeps the smallest best-first prefix whose mass reaches top_p of
 * what is left. want[] is the renormalised result. */
static void ref_dist(const float *l, int V, float t, float min_p, int top_k, float top_p,
                     double *want)
{
    double p[64], mx = -1e300, z = 0;
    int order[64];
    for (int i = 0; i < V; i++)
        mx = l[i] / t > mx ? l[i] / t : mx;
    for (int i = 0; i < V; i++) {
        p[i] = exp(l[i] / t - mx);
        z += p[i];
        order[i] = i;
    }
    for (int i = 0; i < V; i++)
        for (int j = i + 1; j < V; j++)
            if (p[order[j]] > p[order[i]]) {
                int x = order[i];
                order[i] = order[j];
                order[j] = x;
            }
    int keep = V;
    for (int i = 0; i < V; i++)
        if (p[order[i]] / z < min_p * p[order[0]] / z) {
            keep = i;
            break;
        }
    if (top_k && top_k < keep)
        keep = top_k;
    double mass = 0, acc = 0;
    for (int i = 0; i < keep; i++)
        mass += p[order[i]];
    for (int i = 0; i < keep; i++) {
        acc += p[order[i]];
        if (acc >= top_p * mass) {
            keep = i + 1;
            break;
        }
    }
    double kept = 0;
    for (int i = 0; i < V; i++)
        want[i] = 0;
    for (int i = 0; i < keep; i++)
        kept += p[order[i]];
    for (int i = 0; i < keep; i++)
        want[order[i]] = p[order[i]] / kept;
}

TEST(min_p_matches_reference_distribution)
{
    enum { V = 10, N = 40000 };
    float l[V] = {1.0f, 2.2f, 0.3f, 2.0f, -1.0f, 1.6f, 0.9f, 2.1f, -0.2f, 1.2f};
    struct {
        float t, min_p;
        int top_k;
        float top_p;
    } cases[] = {{1, 0.3f, 0, 1},       {0.7f, 0.2f, 0, 1}, {1, 0.25f, 3, 1},
                 {1.5f, 0.1f, 0, 0.8f}, {1, 0.5f, 0, 0.9f}, {1, 1, 0, 1}};
    for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
        double want[V];
        ref_dist(l, V, cases[c].t, cases[c].min_p, cases[c].top_k, cases[c].top_p, want);
        struct sampler s;
        sampler_init(&s, V,
                     &(struct sample_params){.temperature = cases[c].t,
                                             .top_k = cases[c].top_k,
                                             .top_p = cases[c].top_p,
                                             .min_p = cases[c].min_p,
                                             .seed = 11 + c});
        int got[V] = {0};
        for (int i = 0; i < N; i++)
            got[sampler_sample(&s, l)]++;
        for (int t = 0; t < V; t++) {
            double f = (double)got[t] / N;
            if (want[t] == 0)
                CHECK_MSG(got[t] == 0, "case %zu: token %d drawn %d times, min-p drops it", c, t,
                          got[t]);
            else
                CHECK_MSG(fabs(f - want[t]) < 0.015, "case %zu: token %d at %.4f, want %.4f", c, t,
                          f, want[t]);
        }
        sampler_release(&s);
    }
}

TEST(logprobs_match_reference)
{
    enum { V = 300 };
    float l[V];
    for (int i = 0; i < V; i++)
        l[i] = 3 * sinf((float)i * 1.7f) + 0.01f * (float)(i % 7);
    l[17] = l[250] = 5; /* a tie at the top: the lower id ranks first */
    l[3] = -INFINITY;   /* a token the model rules out */
    double mx = 5, z = 0;
    for (int i = 0; i < V; i++)
        z += exp((double)l[i] - mx);
    double lse = mx + log(z);
    int32_t ids[SAMPLE_MAX_TOP];
    float lps[SAMPLE_MAX_TOP];
    for (int k = 0; k <= SAMPLE_MAX_TOP; k += 5) {
        float lp = sample_logprobs(l, V, 42, k, ids, lps);
        CHECK_MSG(fabs(lp - ((double)l[42] - lse)) < 1e-6, "k %d: logprob %g, want %g", k,
                  (double)lp, (double)l[42] - lse);
        for (int j = 0; j < k; j++) {
            /* the reference rank j: count the tokens that rank above */
            int above = 0;
            for (int i = 0; i < V; i++)
                above += l[i] > l[ids[j]] || (l[i] == l[ids[j]] && i < ids[j]);
            CHECK_MSG(above == j, "k %d: entry %d (id %d) ranks %d", k, j, ids[j], above);
            CHECK(fabs(lps[j] - ((double)l[ids[j]] - lse)) < 1e-6);
        }
        if (k > 1)
            CHECK(ids[0] == 17 && ids[1] == 250);
    }
    CHECK(isinf(sample_logprobs(l, V, 3, 0, ids, lps)));
    /* the chosen token's value and its entry in the list are the same
     * number, so a client's "is greedy" test (lm-evaluation-harness
     * compares them with ==) holds */
    float lp = sample_logprobs(l, V, 17, 1, ids, lps);
    CHECK(ids[0] == 17 && lp == lps[0]);
}

TEST_MAIN()
