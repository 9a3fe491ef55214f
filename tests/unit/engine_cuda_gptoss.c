/*
 * CPU parity of the CUDA backend (engine/cuda/) on the gpt-oss
 * architecture, on models synth writes (format/synth.c, what `fp4serve
 * synth --arch gpt-oss` runs): Q/K/V and output biases, YaRN RoPE, a
 * sink logit per head, a sliding window of 20 keys on the even layers,
 * the router's bias with a softmax over the chosen 4 of 16 experts,
 * expert biases and the clamped SwiGLU. Logits against the CPU backend
 * within TOL in both matmul regimes on a calm model of gpt-oss-tiny's
 * shape; on gpt-oss-tiny itself, greedy tokens equal to the CPU's for
 * N_GREEDY tokens, rows of a batch equal to the same rows alone (bit for
 * bit), --decode per-request equal to batched, and the expert counters
 * equal to the CPU's. The prompts cross the window and the 64-key
 * attention chunks: a window's first chunk that is not tile aligned, and
 * split decode rows whose windowed layers have fewer chunks than their
 * full ones. Weight types: f32, q8_0, mxfp4 and nvfp4 (synth writes the
 * attention and the experts in the type, the embedding and head in f32
 * or Q8_0, the router and every bias F32).
 *
 * Built twice: build/tests/engine_cuda_gptoss (a GPU; without one it
 * prints "skipped: no GPU") and build/tests/cudahost_gptoss (the kernels
 * on the CPU through tests/cudahost/, docs/cudahost.md).
 *
 * Tolerances as tests/unit/engine_cuda_qwen3.c's (its top comment): the
 * calm model's logits within TOL = 2% of the largest logit, and in the
 * GEMV regime at most half the rows more than TOL_GEMV apart (rows after
 * an int8 rounding tip); the sharp preset by greedy tokens (a divergence
 * only at a near-tie, the margin printed) and bit-for-bit invariances.
 */
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

#define TOL      0.02
#define TOL_GEMV 1e-3
#define TOL_F32  1e-4
#define N_GEN    4
#define N_GREEDY 32
#define PRESET   "gpt-oss-tiny"

/* gpt-oss-tiny's shape (window, YaRN, biases, sinks) with synth's default
 * sigma for the weights. */
static const struct synth_preset calm_oss = {.name = "calm-gpt-oss",
                                             .arch = "gpt-oss",
                                             .n_layer = 4,
                                             .n_embd = 128,
                                             .n_head = 4,
                                             .n_head_kv = 2,
                                             .n_ff = 0,
                                             .n_vocab = 2048,
                                             .n_ctx = 4096,
                                             .rope_base = 150000.0f,
                                             .rms_eps = 1e-5f,
                                             .head_dim = 64,
                                             .n_expert = 16,
                                             .n_expert_used = 4,
                                             .n_ff_exp = 128,
                                             .router_sigma = 0.15f,
                                             .n_swa = 20,
                                             .yarn_factor = 8.0f,
                                             .yarn_orig = 512,
                                             .bias_sigma = 0.1f,
                                             .exp_bias_sigma = 2.0f,
                                             .sink_sigma = 1.0f};

static int n_files;
static char *files[16];

/* The synthetic model of a preset (synth's, or calm_oss) in a type,
 * written once per run. */
static const char *model_file(const char *preset, uint32_t type)
{
    static struct {
        const char *preset;
        uint32_t type;
    } made[16];
    for (int i = 0; i < n_files; i++)
        if (strcmp(made[i].preset, preset) == 0 && made[i].type == type)
            return files[i];
    char *path =
        xasprintf("%s/fp4-cuda-gptoss-%ld-%s-%u.gguf", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp",
                  (long)getpid(), preset, type);
    const struct synth_preset *p =
        strcmp(preset, calm_oss.name) == 0 ? &calm_oss : synth_preset_find(preset);
    struct synth_opts o = {.preset = p, .type = type, .seed = 5};
    struct err err;
    err_init(&err);
    if (!o.preset || synth_write(&o, path, &err) != 0) {
        fprintf(stderr, "synth %s %u: %s\n", preset, type, o.preset ? err.msg : "no preset");
        exit(1);
    }
    made[n_files].preset = preset;
    made[n_files].type = type;
    files[n_files++] = path;
    return path;
}

/* f32: every matrix dequantized to F32 at load (--quant f32, the head
 * too), so the CPU computes the same weights with f32 activations. */
static struct model *load_att(const char *path, const char *device, enum model_decode decode,
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

static struct model *load(const char *path, const char *device, enum model_decode decode)
{
    return load_att(path, device, decode, MODEL_ATTN_SPLIT, false);
}

/* max |a - b| / max |b|; infinite when a has a NaN or an infinity. */
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

/* Prompt i of length len: ids spread over the vocabulary. */
static void prompt(int32_t *t, int i, int len, int V)
{
    for (int j = 0; j < len; j++)
        t[j] = 3 + (int32_t)(((uint64_t)i * 131 + (uint64_t)j * 977 + 17) % (uint64_t)(V - 3));
}

static bool step(struct model *m, struct model_seq *s, int n)
{
    struct err err;
    err_init(&err);
    int rc = model_step(m, s, n, &err);
    CHECK_MSG(rc == 0, "step on %s: %s", m->be->name, err.msg);
    return rc == 0;
}

/* ---- logits against the CPU ---- */

/* Logits rows both() compared, and those further apart than TOL_GEMV. */
static int n_rows, n_off;

/* Step both backends over the same sequences and fold the worst relative
 * difference of every logits row into *worst; count a step whose expert
 * counters differ into *differ. Sets next[slot] to the CPU's greedy
 * choice for each sequence with logits. */
static bool both(struct model *cpu, struct model *gpu, struct model_seq *s, int n, double *worst,
                 int *differ, int32_t *next)
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

/* The CPU reference (its weights dequantized to f32 when cpu_f32) and
 * the CUDA model (with --attention att) of one file. */
static bool load_pair(const char *preset, uint32_t type, enum model_attention att, bool cpu_f32,
                      struct model **cpu, struct model **gpu)
{
    const char *path = model_file(preset, type);
    *cpu = load_att(path, "cpu", MODEL_DECODE_BATCHED, MODEL_ATTN_SPLIT, cpu_f32);
    *gpu = *cpu ? load_att(path, "cuda", MODEL_DECODE_BATCHED, att, false) : NULL;
    if (*cpu && *gpu)
        return true;
    model_free(*cpu);
    model_free(*gpu);
    return false;
}

/*
 * The GEMV regime alone (no step over CU_GEMV_MAX_ROWS rows), on the calm
 * model: prompts of 90 and 70 tokens prefilled together in chunks of 4
 * (the last chunk's rows all asking for logits), then N_GEN decode steps
 * of the two. The 90-token row's window (keys 71 on) lies in the second
 * chunk alone, so a split decode row has one windowed chunk and two full
 * ones; the 70-token row's window starts at key 51, inside the first
 * chunk, and spans two. att: the CUDA side's --attention.
 *
 * Both backends prepare the same activations here. F32 weights (no int8
 * activations) agree everywhere within TOL_F32 (measured 3.5e-6). With
 * quantized weights the rows of the first step (no tip in the K/V yet)
 * agree within TOL_GEMV (measured 1e-7), every row within TOL: over 90
 * positions the int8 tips of engine_cuda_qwen3.c's comment accumulate in
 * each sequence's K/V, and most later rows differ by 1e-3 to 1e-2
 * (mxfp4: 20 of 51 rows; q8_0, not run here: 45, the first at position
 * 7).
 */
static void parity_gemv(uint32_t type, enum model_attention att)
{
    struct model *cpu, *gpu;
    if (!load_pair(calm_oss.name, type, att, false, &cpu, &gpu))
        return;
    int V = cpu->cfg.n_vocab, differ = 0, done[2] = {0}, first_off = 0;
    const int lens[2] = {90, 70};
    int32_t prompts[2][90], next[16];
    struct model_seq s[2];
    double worst = 0;
    n_rows = n_off = 0;
    for (int i = 0; i < 2; i++)
        prompt(prompts[i], i, lens[i], V);
    for (int busy = 1; busy;) {
        int n = 0;
        for (int i = 0; i < 2; i++)
            if (done[i] < lens[i]) {
                int t = lens[i] - done[i] < 4 ? lens[i] - done[i] : 4;
                bool last = done[i] + t == lens[i];
                s[n++] = (struct model_seq){i,
                                            done[i],
                                            t,
                                            prompts[i] + done[i],
                                            last ? MODEL_LOGITS_ALL : MODEL_LOGITS_LAST,
                                            NULL};
                done[i] += t;
            }
        busy = n > 0 && both(cpu, gpu, s, n, &worst, &differ, next);
        if (done[0] == 4)
            first_off = n_off;
    }
    for (int g = 0; g < N_GEN; g++) {
        for (int i = 0; i < 2; i++)
            s[i] = (struct model_seq){i, lens[i] + g, 1, &next[i], MODEL_LOGITS_LAST, NULL};
        if (!both(cpu, gpu, s, 2, &worst, &differ, next))
            goto out;
    }
    printf("parity gemv %-6s %-6s %.2e, %d of %d rows over %g (first step: %d)  experts %llu\n",
           q_info(type)->name, att == MODEL_ATTN_SPLIT ? "split" : "serial", worst, n_off, n_rows,
           TOL_GEMV, first_off, (unsigned long long)gpu->last_experts);
    if (type == Q_F32)
        CHECK_MSG(worst <= TOL_F32, "f32: cuda vs cpu logits differ by %.3g of the largest (%g)",
                  worst, TOL_F32);
    CHECK_MSG(worst <= TOL && first_off == 0,
              "%s: cuda vs cpu logits differ by %.3g of the largest (tolerance %g), %d rows of the "
              "first step by more than %g",
              q_info(type)->name, worst, TOL, first_off, TOL_GEMV);
    CHECK_MSG(differ == 0, "%s: expert counters differ from the cpu's in %d steps",
              q_info(type)->name, differ);
out:
    model_free(cpu);
    model_free(gpu);
}

/*
 * The tensor cores, on the calm model: 4 prompts of 12, 40, 90 and 9
 * tokens prefilled together (the 90-token one asks for every row, whose
 * windows start in the first chunk, then in the second), 12 more prompts,
 * and N_GEN decode steps of all 16. With F32 weights, N_GEN decode steps
 * of the first 4 (GEMV) come between, and the CPU runs the same model:
 * within TOL (measured 1.1e-3; only the activations' f16 rounding
 * differs). With quantized weights the CPU's reference has the same
 * weights dequantized to F32 (--quant f32): the tensor cores multiply
 * the decoded weights by f16 activations, the CPU by f32 ones, so they
 * agree within TOL (measured 2.8e-3 for q8_0, whose f16-decoded
 * weights round, 7e-4 for mxfp4). Against the CPU's native run
 * (int8 activations) this calm model's rows differ by 1 to 3% and, at
 * near-tied routes, by up to 50%: gpt-oss's expert biases make each
 * route, and so each rounding, count for more than qwen3moe's.
 */
static void parity_tc(uint32_t type)
{
    struct model *cpu, *gpu;
    bool f32 = type == Q_F32;
    if (!load_pair(calm_oss.name, type, MODEL_ATTN_SPLIT, !f32, &cpu, &gpu))
        return;
    int V = cpu->cfg.n_vocab, differ = 0, gemv_steps = f32 ? N_GEN : 0;
    const int lens[16] = {12, 40, 90, 9, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20};
    int32_t prompts[16][90], next[16];
    int pos[16];
    struct model_seq s[16];
    double worst[3] = {0, 0, 0}; /* prefill, decode (gemv), decode of 16 */
    for (int i = 0; i < 16; i++) {
        prompt(prompts[i], i, lens[i], V);
        pos[i] = lens[i];
    }
    for (int i = 0; i < 4; i++)
        s[i] = (struct model_seq){
            i, 0, lens[i], prompts[i], i == 2 ? MODEL_LOGITS_ALL : MODEL_LOGITS_LAST, NULL};
    if (!both(cpu, gpu, s, 4, &worst[0], &differ, next))
        goto out;
    for (int g = 0; g < gemv_steps; g++) {
        for (int i = 0; i < 4; i++)
            s[i] = (struct model_seq){i, pos[i]++, 1, &next[i], MODEL_LOGITS_LAST, NULL};
        if (!both(cpu, gpu, s, 4, &worst[1], &differ, next))
            goto out;
    }
    for (int i = 4; i < 16; i++)
        s[i - 4] = (struct model_seq){i, 0, lens[i], prompts[i], MODEL_LOGITS_LAST, NULL};
    if (!both(cpu, gpu, s, 12, &worst[0], &differ, next))
        goto out;
    for (int g = 0; g < N_GEN; g++) {
        for (int i = 0; i < 16; i++)
            s[i] = (struct model_seq){i, pos[i]++, 1, &next[i], MODEL_LOGITS_LAST, NULL};
        if (!both(cpu, gpu, s, 16, &worst[2], &differ, next))
            goto out;
    }
    char gv[16] = "not run";
    if (f32)
        snprintf(gv, sizeof(gv), "%.2e", worst[1]);
    printf("parity tc   %-6s (cpu %s) prefill %.2e  decode(gemv) %s  decode(16 rows) %.2e  "
           "experts %llu\n",
           q_info(type)->name, f32 ? "f32" : "dequantized to f32", worst[0], gv, worst[2],
           (unsigned long long)gpu->last_experts);
    CHECK_MSG(worst[0] <= TOL && worst[1] <= TOL && worst[2] <= TOL,
              "%s: cuda vs cpu logits differ by %.3g / %.3g / %.3g of the largest (tolerance %g)",
              q_info(type)->name, worst[0], worst[1], worst[2], TOL);
    CHECK(gpu->last.matmul_ns > 0 && gpu->last.attn_ns > 0 && gpu->last.other_ns > 0);
out:
    model_free(cpu);
    model_free(gpu);
}

TEST(gptoss_parity_gemv)
{
    parity_gemv(Q_F32, MODEL_ATTN_SPLIT);
    parity_gemv(Q_MXFP4, MODEL_ATTN_SPLIT);
    parity_gemv(Q_NVFP4, MODEL_ATTN_SERIAL);
}
TEST(gptoss_parity_tensor_cores)
{
    parity_tc(Q_F32);
    parity_tc(Q_Q8_0);
    parity_tc(Q_MXFP4);
}

/* ---- greedy tokens and batch invariance ---- */

/* Greedy generation of n (<= 4) prompts of lens[i] (<= 64), each alone
 * in slot 0 or all together, n_gen + 1 tokens each; the tokens (n x
 * (n_gen + 1)) and every step's logits are kept. A prompt is prefilled in
 * one step (lens > CU_GEMV_MAX_ROWS: on the tensor cores), or with
 * gemv_only in chunks that keep every step within CU_GEMV_MAX_ROWS rows;
 * decode steps of <= 8 rows are GEMV. */
static void generate(struct model *m, int n, const int *lens, int n_gen, bool together,
                     bool gemv_only, int32_t *tokens, float *logits)
{
    int V = m->cfg.n_vocab;
    int32_t prompts[4][64], next[4];
    struct model_seq s[4];
    for (int i = 0; i < n; i++)
        prompt(prompts[i], 40 + i, lens[i], V);
    for (int first = 0; first < n; first = together ? n : first + 1) {
        int cnt = together ? n : 1;
        int fed[4] = {0}, chunk = 8 / cnt, busy = gemv_only;
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

/* Greedy tokens of the two backends agree for N_GREEDY + 1 tokens of 2
 * prompts (9 and 50 tokens, prefills in the GEMV regime; the second runs
 * to position 82, past the first chunk and ever further from its window's
 * start), except after a step where the CPU's top two logits are within
 * the tolerance (a tie either may break; the margin is printed). */
static void greedy(uint32_t type)
{
    const char *path = model_file(PRESET, type);
    struct model *cpu = load(path, "cpu", MODEL_DECODE_BATCHED);
    struct model *gpu = cpu ? load(path, "cuda", MODEL_DECODE_BATCHED) : NULL;
    if (!cpu || !gpu) {
        model_free(cpu);
        model_free(gpu);
        return;
    }
    int V = cpu->cfg.n_vocab, G = N_GREEDY + 1;
    const int lens[2] = {9, 50};
    size_t nl = (size_t)2 * G * V;
    int32_t tc[2 * (N_GREEDY + 1)], tg[2 * (N_GREEDY + 1)];
    float *lc = xmalloc(sizeof(float) * nl), *lg = xmalloc(sizeof(float) * nl);
    generate(cpu, 2, lens, N_GREEDY, true, true, tc, lc);
    generate(gpu, 2, lens, N_GREEDY, true, true, tg, lg);
    int exact = 0;
    for (int i = 0; i < 2; i++) {
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
        printf("greedy %s prompt %d diverges at token %d: cpu %d, cuda %d, cpu margin %g (max "
               "|logit| %g)\n",
               q_info(type)->name, i, g, tc[i * G + g], tg[i * G + g], top - second, amax);
        CHECK_MSG(top - second <= 2 * TOL * amax,
                  "%s prompt %d step %d: cpu %d, cuda %d with a margin of %g (max |logit| %g)",
                  q_info(type)->name, i, g, tc[i * G + g], tg[i * G + g], top - second, amax);
    }
    printf("greedy %s %-6s %d of 2 prompts identical for %d tokens\n", PRESET, q_info(type)->name,
           exact, G);
    free(lc);
    free(lg);
    model_free(cpu);
    model_free(gpu);
}

TEST(gptoss_greedy_matches_cpu)
{
    greedy(Q_F32);
    greedy(Q_MXFP4);
}

/* On CUDA, 4 prompts generated together (decode steps of 4 rows) give the
 * tokens and logits bits of each generated alone (steps of 1 row): same
 * regimes, and a row's window, routing, expert grouping and sums never
 * depend on the other rows. Then --decode per-request gives the bits of
 * batched. The prompts (9 to 30 tokens) run past the window. */
static void alone_and_per_request(uint32_t type)
{
    const char *path = model_file(PRESET, type);
    struct model *m = load(path, "cuda", MODEL_DECODE_BATCHED);
    struct model *pr = m ? load(path, "cuda", MODEL_DECODE_PER_REQUEST) : NULL;
    if (!m || !pr) {
        model_free(m);
        model_free(pr);
        return;
    }
    const int lens[4] = {9, 19, 22, 30};
    size_t nl = (size_t)4 * (N_GEN + 1) * m->cfg.n_vocab;
    int32_t ta[4 * (N_GEN + 1)], tb[4 * (N_GEN + 1)], tp[4 * (N_GEN + 1)];
    float *la = xmalloc(sizeof(float) * nl), *lb = xmalloc(sizeof(float) * nl);
    float *lp = xmalloc(sizeof(float) * nl);
    generate(m, 4, lens, N_GEN, false, false, ta, la);
    generate(m, 4, lens, N_GEN, true, false, tb, lb);
    generate(pr, 4, lens, N_GEN, true, false, tp, lp);
    CHECK_MSG(memcmp(ta, tb, sizeof(ta)) == 0, "%s: tokens alone != together", q_info(type)->name);
    CHECK_MSG(memcmp(la, lb, sizeof(float) * nl) == 0, "%s: logits alone != together",
              q_info(type)->name);
    CHECK_MSG(memcmp(lp, lb, sizeof(float) * nl) == 0, "%s: per-request logits != batched",
              q_info(type)->name);
    free(la);
    free(lb);
    free(lp);
    model_free(m);
    model_free(pr);
}

TEST(gptoss_alone_equals_together)
{
    alone_and_per_request(Q_MXFP4);
}

/* ---- expert counters ---- */

/* A decode step of 16 sequences: batched, each touched expert counted
 * once per layer (as many as the CPU counts); per-request, k per layer
 * for each sequence; one sequence alone, exactly k per layer. */
TEST(gptoss_expert_counters)
{
    const char *path = model_file(PRESET, Q_MXFP4);
    for (int mode = 0; mode < 2; mode++) {
        enum model_decode d = mode ? MODEL_DECODE_PER_REQUEST : MODEL_DECODE_BATCHED;
        struct model *cpu = load(path, "cpu", d), *gpu = cpu ? load(path, "cuda", d) : NULL;
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

/* TEST_MAIN's loop, behind the GPU check: with no device nothing runs. */
int main(int argc, char **argv)
{
    struct err err;
    err_init(&err);
    if (!backend_find("cuda", &err)) {
        printf("skipped: no GPU (%s)\n", err.msg);
        printf("0 passed, 0 failed\n");
        return 0;
    }
    for (int i = 0; i < test_n; i++) {
        if (argc > 1 && !strstr(test_cases[i].name, argv[1]))
            continue;
        test_cur_failed = 0;
        test_cases[i].fn();
        if (test_cur_failed)
            fprintf(stderr, "FAIL %s\n", test_cases[i].name);
        test_cur_failed ? test_fail++ : test_pass++;
    }
    for (int i = 0; i < n_files; i++) {
        unlink(files[i]);
        free(files[i]);
    }
    printf("%d passed, %d failed\n", test_pass, test_fail);
    return test_fail != 0;
}
