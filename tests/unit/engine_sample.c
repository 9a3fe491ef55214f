/* Unit tests for engine/sample: greedy, ties, seeded draws, top-k, top-p. */
#include <math.h>
#include <stdlib.h>
#include <time.h>

#include "sample.h"
#include "test.h"
#include "xalloc.h"

TEST(argmax_takes_lowest_index_on_ties)
{
    float l[5] = {1, 3, 2, 3, -1};
    CHECK_INT(sample_argmax(l, 5), 1);
    struct sampler s;
    sampler_init(&s, 5, &(struct sample_params){0});
    CHECK_INT(sampler_sample(&s, l), 1);
    sampler_release(&s);
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

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* OpenAI's defaults (temperature 1, top_p 1, no top_k) filter nothing, so
 * a draw must cost about one softmax pass over the vocabulary, not a sort
 * of it: the sampler runs on the scheduler thread for every sequence of
 * every step. Measured against a plain exp() pass over the same logits,
 * with a wide margin for a busy machine (a full sort costs ~50 passes). */
TEST(unfiltered_draw_costs_about_one_pass)
{
    enum { V = 49152, N = 40 };
    float *l = xmalloc(V * sizeof(*l));
    for (int i = 0; i < V; i++)
        l[i] = sinf((float)i * 0.37f) * 3.0f;
    double t0 = now_s(), sink = 0;
    for (int r = 0; r < N; r++) {
        float mx = l[sample_argmax(l, V)];
        for (int i = 0; i < V; i++)
            sink += exp((double)(l[i] - mx));
    }
    double pass = now_s() - t0;
    struct sampler s;
    sampler_init(&s, V, &(struct sample_params){.temperature = 1, .top_p = 1, .seed = 11});
    t0 = now_s();
    for (int r = 0; r < N; r++)
        sink += sampler_sample(&s, l);
    double draw = now_s() - t0;
    CHECK_MSG(draw < 8 * pass, "%d draws took %.1f ms, %d softmax passes %.1f ms (sink %g)", N,
              draw * 1e3, N, pass * 1e3, sink);
    sampler_release(&s);
    free(l);
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

TEST_MAIN()
