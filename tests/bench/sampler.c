/*
 * sampler: the cost of one draw (engine/model/sample.c) per sampling setting,
 * against one softmax pass (exp over the vocabulary) measured in the same
 * run, on SmolLM2-sized logits (49152). The sampler runs on the scheduler
 * thread for every sequence of every step, so its cost adds to each step.
 * Usage: sampler [--vocab N] [--draws N]
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "strutil.h"
#include "xalloc.h"

#include "model/sample.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
    long vocab = 49152, draws = 200;
    for (int i = 1; i + 1 < argc; i += 2) {
        long *dst = strcmp(argv[i], "--vocab") == 0   ? &vocab
                    : strcmp(argv[i], "--draws") == 0 ? &draws
                                                      : NULL;
        if (!dst || str_to_long(argv[i + 1], dst) != 0 || *dst < 1) {
            fprintf(stderr, "usage: sampler [--vocab N] [--draws N]\n");
            return 2;
        }
    }
    /* logits shaped like a language model's: a few likely tokens over a
     * long tail (a Gumbel-ish spread), fixed seed */
    float *l = xmalloc((size_t)vocab * sizeof(*l));
    uint64_t x = 0x9e3779b97f4a7c15ull;
    for (long i = 0; i < vocab; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        double u = ((double)(x >> 11) + 0.5) / 9007199254740992.0;
        l[i] = (float)(-log(-log(u)) * 2.0);
    }
    double t0 = now_s(), sink = 0;
    for (long r = 0; r < draws; r++) {
        float mx = l[sample_argmax(l, (int)vocab)];
        for (long i = 0; i < vocab; i++)
            sink += exp((double)(l[i] - mx));
    }
    double pass = (now_s() - t0) / (double)draws;
    static const struct {
        const char *name;
        struct sample_params p;
    } cases[] = {
        {"greedy (temperature 0)", {.temperature = 0, .top_p = 1}},
        {"temperature 1, top_p 1 (OpenAI defaults)", {.temperature = 1, .top_p = 1}},
        {"temperature 0.7, top_k 40", {.temperature = 0.7f, .top_k = 40, .top_p = 1}},
        {"temperature 0.7, top_p 0.9", {.temperature = 0.7f, .top_p = 0.9f}},
        {"temperature 1.5, top_p 0.95", {.temperature = 1.5f, .top_p = 0.95f}},
        {"temperature 1, top_k 50, top_p 0.95", {.temperature = 1, .top_k = 50, .top_p = 0.95f}},
    };
    printf("sampler: vocabulary %ld, %ld draws each; one softmax pass %.1f us\n", vocab, draws,
           pass * 1e6);
    printf("%-40s %10s %14s\n", "setting", "us/draw", "softmax passes");
    for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
        struct sample_params p = cases[c].p;
        p.seed = 7;
        struct sampler s;
        sampler_init(&s, (int)vocab, &p);
        t0 = now_s();
        for (long r = 0; r < draws; r++)
            sink += sampler_sample(&s, l);
        double d = (now_s() - t0) / (double)draws;
        printf("%-40s %10.1f %14.2f\n", cases[c].name, d * 1e6, d / pass);
        sampler_release(&s);
    }
    free(l);
    return sink < 0; /* keeps the work */
}
