/*
 * cuda_parity.h: what the CUDA parity tests share (engine_cuda.c,
 * engine_cuda_qwen3.c, engine_cuda_gptoss.c, each built for a GPU and
 * through the host harness, docs/cudahost.md): the synthetic model files
 * written once per run and removed at the end, loading and stepping a
 * model, logits compared against the CPU backend's, greedy generation
 * and its comparison, the batch-invariance and expert-counter checks of
 * the MoE architectures, and the main() that runs nothing without a GPU.
 * Static functions (inline where not every includer calls them), so each
 * test binary has its own copy and its own file registry.
 */
#ifndef TESTS_UNIT_CUDA_PARITY_H
#define TESTS_UNIT_CUDA_PARITY_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fp4.h"
#include "test.h"
#include "xalloc.h"

#include "format/quant.h"
#include "format/synth.h"
#include "model/backend.h"
#include "model/model.h"
#include "model/sample.h"

/* A logits row "off" (engine_cuda_qwen3.c's top comment): further than
 * this from the CPU's, relative to the CPU's largest logit. */
#define TOL_GEMV 1e-3

/* ---- model files ---- */

static int n_files;
static struct {
    const struct synth_preset *p;
    uint32_t type;
    char *path;
} files[16];

/* The synthetic model of preset p in a type (synth_write with seed),
 * written once per run as $TMPDIR/fp4-TAG-PID-PRESET-TYPE.gguf and
 * removed by cuda_parity_main(). Exits when synth fails. */
static const char *parity_model_file(const char *tag, const struct synth_preset *p, uint32_t type,
                                     uint64_t seed)
{
    for (int i = 0; i < n_files; i++)
        if (files[i].p == p && files[i].type == type)
            return files[i].path;
    if (n_files == (int)(sizeof(files) / sizeof(files[0]))) {
        fprintf(stderr, "synth %s %u: more than %d model files\n", p->name, type, n_files);
        exit(1);
    }
    char *path = xasprintf("%s/fp4-%s-%ld-%s-%u.gguf", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp",
                           tag, (long)getpid(), p->name, type);
    struct synth_opts o = {.preset = p, .type = type, .seed = seed};
    struct err err;
    err_init(&err);
    if (synth_write(&o, path, &err) != 0) {
        fprintf(stderr, "synth %s %u: %s\n", p->name, type, err.msg);
        exit(1);
    }
    files[n_files].p = p;
    files[n_files].type = type;
    files[n_files++].path = path;
    return path;
}

/* The preset called name: one of own (NULL-terminated, the test's own
 * shapes) or synth's. Exits when there is none. */
static inline const struct synth_preset *parity_preset(const char *name,
                                                       const struct synth_preset *const *own)
{
    for (; *own; own++)
        if (strcmp((*own)->name, name) == 0)
            return *own;
    const struct synth_preset *p = synth_preset_find(name);
    if (!p) {
        fprintf(stderr, "synth %s: no preset\n", name);
        exit(1);
    }
    return p;
}

/* ---- loading and stepping ---- */

/* The qwen3 and gpt-oss tests' model: 2 threads, 16 slots of 128
 * positions, steps of up to 256 tokens and 128 logits rows. f32: every
 * matrix dequantized to F32 at load (--quant f32, the head too), so the
 * CPU computes the same weights with f32 activations. */
static inline struct model *load_att(const char *path, const char *device, enum model_decode decode,
                                     enum model_attention att, bool f32)
{
    struct model_opts o = {.threads = 2,
                           .max_batch = 16,
                           .ctx = 128,
                           .max_step_tokens = 256,
                           .max_logit_rows = 128,
                           .decode = decode,
                           .attention = att,
                           .device = device};
    if (f32) {
        o.quant = Q_F32;
        o.quant_set = true;
        o.head_same = true;
    }
    struct err err;
    err_init(&err);
    struct model *m = model_new(path, &o, &err);
    CHECK_MSG(m != NULL, "load %s on %s: %s", path, device, err.msg);
    return m;
}

static inline struct model *load_on(const char *path, const char *device, enum model_decode decode)
{
    return load_att(path, device, decode, MODEL_ATTN_SPLIT, false);
}

/* The CPU reference (its weights dequantized to f32 when cpu_f32) and
 * the CUDA model (with --attention att) of the file at path; false, with
 * neither left loaded, when either fails. */
static inline bool load_pair(const char *path, enum model_attention att, bool cpu_f32,
                             struct model **cpu, struct model **gpu)
{
    *cpu = load_att(path, "cpu", MODEL_DECODE_BATCHED, MODEL_ATTN_SPLIT, cpu_f32);
    *gpu = *cpu ? load_att(path, "cuda", MODEL_DECODE_BATCHED, att, false) : NULL;
    if (*cpu && *gpu)
        return true;
    model_free(*cpu);
    model_free(*gpu);
    return false;
}

static bool step(struct model *m, struct model_seq *s, int n)
{
    struct err err;
    err_init(&err);
    int rc = model_step(m, s, n, &err);
    CHECK_MSG(rc == 0, "step on %s: %s", m->be->name, err.msg);
    return rc == 0;
}

/* Prompt i of length len: ids spread over the vocabulary. */
static inline void prompt(int32_t *t, int i, int len, int V)
{
    for (int j = 0; j < len; j++)
        t[j] = 3 + (int32_t)(((uint64_t)i * 131 + (uint64_t)j * 977 + 17) % (uint64_t)(V - 3));
}

/* ---- logits against the CPU ---- */

/* max |a - b| / max |b| over n values; infinite when a has a NaN or an
 * infinity (fmax would skip a NaN). */
static double rel_err(const float *a, const float *b, int n)
{
    double num = 0, den = 0;
    for (int i = 0; i < n; i++) {
        if (!isfinite(a[i]))
            return INFINITY;
        num = fmax(num, fabs((double)a[i] - b[i]));
        den = fmax(den, fabs((double)b[i]));
    }
    return den > 0 ? num / den : num;
}

/* Logits rows both() compared, and those further apart than TOL_GEMV. */
static int n_rows, n_off;

/* Step both backends over the same n (<= 16) sequences and fold the
 * worst relative difference of every logits row into *worst; count a
 * step whose expert counters differ (the same experts must be touched)
 * into *differ. Sets next[slot] to the CPU's greedy choice for each
 * sequence with logits. */
static inline bool both(struct model *cpu, struct model *gpu, struct model_seq *s, int n,
                        double *worst, int *differ, int32_t *next)
{
    struct model_seq a[16], b[16];
    memcpy(a, s, sizeof(*s) * (size_t)n);
    memcpy(b, s, sizeof(*s) * (size_t)n);
    if (!step(cpu, a, n) || !step(gpu, b, n))
        return false;
    *differ +=
        cpu->last_experts != gpu->last_experts || cpu->last_expert_bytes != gpu->last_expert_bytes;
    int V = cpu->cfg.n_vocab;
    for (int i = 0; i < n; i++) {
        int rows = s[i].logits == MODEL_LOGITS_ALL ? s[i].n_tokens : 1;
        for (int r = 0; r < rows && a[i].out; r++) {
            double e = rel_err(b[i].out + (size_t)r * V, a[i].out + (size_t)r * V, V);
            *worst = fmax(*worst, e);
            n_rows++;
            n_off += e > TOL_GEMV;
        }
        if (a[i].out)
            next[s[i].slot] = sample_argmax(a[i].out + (size_t)(rows - 1) * V, V);
    }
    return true;
}

/* Both regimes, the same steps on both models: 4 prompts prefilled
 * together (tensor cores; prompt all_row asks for every row's logits),
 * gemv_steps decode steps of the 4 (GEMV), 12 more prompts, and
 * wide_steps decode steps of all 16 (tensor cores), each fed the CPU's
 * greedy tokens. prompts: the 16 prompts of lens[i] tokens, or NULL for
 * prompt()'s (lens[i] <= 128). Folds the worst relative difference of a
 * logits row into worst[0] (prefills), worst[1] (decode of 4) and
 * worst[2] (decode of 16), and steps whose expert counters differ into
 * *differ; false when a step failed. */
static inline bool both_regimes(struct model *cpu, struct model *gpu, int32_t *const *prompts,
                                const int *lens, int all_row, int gemv_steps, int wide_steps,
                                double *worst, int *differ)
{
    int V = cpu->cfg.n_vocab, pos[16];
    int32_t(*own)[128] = xmalloc(sizeof(*own) * 16), *p[16], next[16];
    struct model_seq s[16];
    bool ok = false;
    for (int i = 0; i < 16; i++) {
        p[i] = prompts ? prompts[i] : own[i];
        if (!prompts)
            prompt(own[i], i, lens[i], V);
        pos[i] = lens[i];
    }
    for (int i = 0; i < 4; i++)
        s[i] = (struct model_seq){
            i, 0, lens[i], p[i], i == all_row ? MODEL_LOGITS_ALL : MODEL_LOGITS_LAST, NULL};
    if (!both(cpu, gpu, s, 4, &worst[0], differ, next))
        goto out;
    for (int g = 0; g < gemv_steps; g++) {
        for (int i = 0; i < 4; i++)
            s[i] = (struct model_seq){i, pos[i]++, 1, &next[i], MODEL_LOGITS_LAST, NULL};
        if (!both(cpu, gpu, s, 4, &worst[1], differ, next))
            goto out;
    }
    for (int i = 4; i < 16; i++)
        s[i - 4] = (struct model_seq){i, 0, lens[i], p[i], MODEL_LOGITS_LAST, NULL};
    if (!both(cpu, gpu, s, 12, &worst[0], differ, next))
        goto out;
    for (int g = 0; g < wide_steps; g++) {
        for (int i = 0; i < 16; i++)
            s[i] = (struct model_seq){i, pos[i]++, 1, &next[i], MODEL_LOGITS_LAST, NULL};
        if (!both(cpu, gpu, s, 16, &worst[2], differ, next))
            goto out;
    }
    ok = true;
out:
    free(own);
    return ok;
}

/* ---- greedy tokens and batch invariance ---- */

/* Greedy generation of n (<= 8) prompts of lens[i] (<= 64), each alone
 * in slot 0 or all together, n_gen + 1 tokens each; the tokens (n x
 * (n_gen + 1)) and every step's logits are kept. A prompt is prefilled in
 * one step (lens > CU_GEMV_MAX_ROWS: on the tensor cores), or with
 * gemv_only in chunks that keep every step within CU_GEMV_MAX_ROWS rows;
 * decode steps of <= 8 rows are GEMV. */
static inline void generate_prompts(struct model *m, int n, const int *lens, int n_gen,
                                    bool together, bool gemv_only, int32_t *tokens, float *logits)
{
    int V = m->cfg.n_vocab;
    int32_t prompts[8][64], next[8];
    struct model_seq s[8];
    for (int i = 0; i < n; i++)
        prompt(prompts[i], 40 + i, lens[i], V);
    for (int first = 0; first < n; first = together ? n : first + 1) {
        int cnt = together ? n : 1;
        int fed[8] = {0}, chunk = 8 / cnt, busy = gemv_only;
        for (int j = 0; j < cnt; j++)
            model_slot_free(m, j);
        while (busy) { /* all but the last token of each prompt */
            int k = 0;
            for (int j = 0; j < cnt; j++) {
                int left = lens[first + j] - 1 - fed[j], t = left < chunk ? left : chunk;
                if (t > 0)
                    s[k++] = (struct model_seq){
                        j, fed[j], t, prompts[first + j] + fed[j], MODEL_LOGITS_NONE, NULL};
                fed[j] += t;
            }
            busy = k > 0;
            if (busy && !step(m, s, k))
                return;
        }
        for (int j = 0; j < cnt; j++)
            s[j] = (struct model_seq){j,
                                      fed[j],
                                      lens[first + j] - fed[j],
                                      prompts[first + j] + fed[j],
                                      MODEL_LOGITS_LAST,
                                      NULL};
        for (int g = 0; g <= n_gen; g++) {
            if (!step(m, s, cnt))
                return;
            for (int j = 0; j < cnt; j++) {
                int i = first + j;
                memcpy(logits + ((size_t)i * (n_gen + 1) + g) * V, s[j].out, sizeof(float) * V);
                next[j] = sample_argmax(s[j].out, V);
                tokens[i * (n_gen + 1) + g] = next[j];
                s[j] = (struct model_seq){j, lens[i] + g, 1, &next[j], MODEL_LOGITS_LAST, NULL};
            }
        }
    }
}

/* Greedy tokens tc (CPU) and tg (CUDA) of n prompts, G each, agree
 * except after a step where the CPU's top two logits (lc, V a row) are
 * within tol of the largest |logit| (a tie either may break; the margin
 * is printed). Returns how many prompts agree throughout. */
static inline int greedy_agree(const char *preset, uint32_t type, int n, int G, const int32_t *tc,
                               const int32_t *tg, const float *lc, int V, double tol)
{
    int exact = 0;
    for (int i = 0; i < n; i++) {
        int g = 0;
        while (g < G && tc[i * G + g] == tg[i * G + g])
            g++;
        exact += g == G;
        if (g == G)
            continue;
        const float *row = lc + ((size_t)i * G + g) * V;
        float top = -INFINITY, second = -INFINITY, amax = 0;
        for (int v = 0; v < V; v++) {
            amax = fmaxf(amax, fabsf(row[v]));
            if (row[v] > top) {
                second = top;
                top = row[v];
            } else if (row[v] > second) {
                second = row[v];
            }
        }
        printf("greedy %s %s prompt %d diverges at token %d: cpu %d, cuda %d, cpu margin %g (max "
               "|logit| %g)\n",
               preset, q_info(type)->name, i, g, tc[i * G + g], tg[i * G + g], top - second, amax);
        CHECK_MSG(top - second <= tol * amax,
                  "%s %s prompt %d step %d: cpu %d, cuda %d with a margin of %g (max |logit| %g)",
                  preset, q_info(type)->name, i, g, tc[i * G + g], tg[i * G + g], top - second,
                  amax);
    }
    return exact;
}

/* Greedy tokens of the two backends on the file at path (preset, type
 * name it) agree for n_gen + 1 tokens of n prompts of lens[i] generated
 * together (prefills in the GEMV regime), except after a step where the
 * CPU's top two logits are within tol of the largest |logit| (a tie
 * either may break; the margin is printed). */
static inline void greedy(const char *path, const char *preset, uint32_t type, int n,
                          const int *lens, int n_gen, double tol)
{
    struct model *cpu = load_on(path, "cpu", MODEL_DECODE_BATCHED);
    struct model *gpu = cpu ? load_on(path, "cuda", MODEL_DECODE_BATCHED) : NULL;
    if (!cpu || !gpu) {
        model_free(cpu);
        model_free(gpu);
        return;
    }
    int V = cpu->cfg.n_vocab, G = n_gen + 1;
    size_t nl = (size_t)n * G * V;
    int32_t *tc = xmalloc(sizeof(int32_t) * (size_t)n * G);
    int32_t *tg = xmalloc(sizeof(int32_t) * (size_t)n * G);
    float *lc = xmalloc(sizeof(float) * nl), *lg = xmalloc(sizeof(float) * nl);
    generate_prompts(cpu, n, lens, n_gen, true, true, tc, lc);
    generate_prompts(gpu, n, lens, n_gen, true, true, tg, lg);
    int exact = greedy_agree(preset, type, n, G, tc, tg, lc, V, tol);
    printf("greedy %-14s %-6s %d of %d prompts identical for %d tokens\n", preset,
           q_info(type)->name, exact, n, G);
    free(tc);
    free(tg);
    free(lc);
    free(lg);
    model_free(cpu);
    model_free(gpu);
}

/* On CUDA, 4 prompts of lens[i] (<= 64) generated together (decode steps
 * of 4 rows) give the tokens and logits bits of each generated alone
 * (steps of 1 row), n_gen + 1 tokens each: same regimes, and a row's
 * routing, expert grouping and sums never depend on the other rows. Then
 * --decode per-request gives the bits of batched. */
static inline void alone_and_per_request(const char *path, const char *preset, uint32_t type,
                                         const int *lens, int n_gen)
{
    struct model *m = load_on(path, "cuda", MODEL_DECODE_BATCHED);
    struct model *pr = m ? load_on(path, "cuda", MODEL_DECODE_PER_REQUEST) : NULL;
    if (!m || !pr) {
        model_free(m);
        model_free(pr);
        return;
    }
    size_t nt = (size_t)4 * (n_gen + 1), nl = nt * m->cfg.n_vocab;
    int32_t *ta = xmalloc(sizeof(int32_t) * nt), *tb = xmalloc(sizeof(int32_t) * nt);
    int32_t *tp = xmalloc(sizeof(int32_t) * nt);
    float *la = xmalloc(sizeof(float) * nl), *lb = xmalloc(sizeof(float) * nl);
    float *lp = xmalloc(sizeof(float) * nl);
    generate_prompts(m, 4, lens, n_gen, false, false, ta, la);
    generate_prompts(m, 4, lens, n_gen, true, false, tb, lb);
    generate_prompts(pr, 4, lens, n_gen, true, false, tp, lp);
    CHECK_MSG(memcmp(ta, tb, sizeof(int32_t) * nt) == 0, "%s %s: tokens alone != together", preset,
              q_info(type)->name);
    CHECK_MSG(memcmp(la, lb, sizeof(float) * nl) == 0, "%s %s: logits alone != together", preset,
              q_info(type)->name);
    CHECK_MSG(memcmp(tp, tb, sizeof(int32_t) * nt) == 0, "%s %s: per-request tokens != batched",
              preset, q_info(type)->name);
    CHECK_MSG(memcmp(lp, lb, sizeof(float) * nl) == 0, "%s %s: per-request logits != batched",
              preset, q_info(type)->name);
    free(ta);
    free(tb);
    free(tp);
    free(la);
    free(lb);
    free(lp);
    model_free(m);
    model_free(pr);
}

/* ---- expert counters ---- */

/* A decode step of 16 sequences on the MoE model at path, batched and
 * per-request, on both backends: the CUDA counters (experts and their
 * bytes) equal the CPU's; batched, each touched expert counted once per
 * layer; per-request, k per layer for each sequence; then one sequence
 * alone, exactly k per layer. Bytes are the experts' bytes (all the same
 * size in synth's models). */
static inline void expert_counters(const char *path)
{
    for (int mode = 0; mode < 2; mode++) {
        enum model_decode d = mode ? MODEL_DECODE_PER_REQUEST : MODEL_DECODE_BATCHED;
        struct model *cpu = load_on(path, "cpu", d), *gpu = cpu ? load_on(path, "cuda", d) : NULL;
        if (!cpu || !gpu) {
            model_free(cpu);
            model_free(gpu);
            return;
        }
        const struct model_config *c = &gpu->cfg;
        int32_t toks[16];
        struct model_seq a[16], b[16];
        for (int i = 0; i < 16; i++) {
            toks[i] = 10 + 97 * i;
            a[i] = b[i] = (struct model_seq){i, 0, 1, &toks[i], MODEL_LOGITS_LAST, NULL};
        }
        if (!step(cpu, a, 16) || !step(gpu, b, 16))
            goto next;
        size_t one = model_expert_bytes(gpu, 0, 0);
        printf("experts of a 16-row step, %s: cuda %llu, cpu %llu\n",
               mode ? "per-request" : "batched", (unsigned long long)gpu->last_experts,
               (unsigned long long)cpu->last_experts);
        CHECK_INT(gpu->last_experts, cpu->last_experts);
        CHECK_INT(gpu->last_expert_bytes, cpu->last_expert_bytes);
        if (mode == 0)
            CHECK(gpu->last_experts > (uint64_t)c->n_layer * c->n_expert_used &&
                  gpu->last_experts <= (uint64_t)c->n_layer * c->n_expert);
        else
            CHECK_INT(gpu->last_experts, 16 * c->n_layer * c->n_expert_used);
        CHECK_INT(gpu->last_expert_bytes, gpu->last_experts * one);
        if (!step(gpu, b, 1))
            goto next;
        CHECK_INT(gpu->last_experts, c->n_layer * c->n_expert_used);
        CHECK_INT(gpu->last_expert_bytes, gpu->last_experts * one);
    next:
        model_free(cpu);
        model_free(gpu);
    }
}

/* ---- main ---- */

/* TEST_MAIN's run, behind the GPU check: with no device nothing runs and
 * nothing counts as passed ("skipped: no GPU", "0 passed, 0 failed",
 * status 0). The model files are removed at the end. */
static int cuda_parity_main(int argc, char **argv)
{
    struct err err;
    err_init(&err);
    if (!backend_find("cuda", &err)) {
        printf("skipped: no GPU (%s)\n", err.msg);
        printf("0 passed, 0 failed\n");
        return 0;
    }
    test_run_each(argc > 1 ? argv[1] : NULL);
    for (int i = 0; i < n_files; i++) {
        unlink(files[i].path);
        free(files[i].path);
    }
    return test_report();
}

#endif
