/*
 * CPU parity of the CUDA backend (engine/cuda/) on the qwen3 and qwen3moe
 * architectures, on the synthetic models `fp4serve synth --arch qwen3 |
 * qwen3moe` writes (presets qwen3-tiny, qwen3moe-tiny): logits against the
 * CPU backend within TOL in both matmul regimes, greedy tokens equal,
 * rows of a batch equal to the same rows alone (bit for bit within a
 * regime, as tests/unit/engine_cuda.c checks for llama), --decode
 * per-request equal to batched, and the expert counters equal to the
 * CPU's. The weight types are those tests/unit/engine_moe.c runs the CPU
 * side in: f32 and q8_0 for qwen3; f32, q8_0, mxfp4 and nvfp4 for
 * qwen3moe (synth writes the experts, attention and router that way; the
 * embedding is Q8_0 but in f32, the router F32).
 *
 * Built twice: build/tests/engine_cuda_qwen3 (a GPU; without one it prints
 * "skipped: no GPU") and build/tests/cudahost_qwen3 (the kernels on the
 * CPU through tests/cudahost/, docs/cudahost.md).
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

/*
 * Tolerance on max |cuda - cpu| / max |cpu| per logits row, as in
 * engine_cuda.c: the CPU quantizes activations to int8 for quantized
 * weights (and keeps f32 for float weights), the CUDA backend does the
 * same in the GEMV regime but multiplies f16 activations on the tensor
 * cores (every prefill and the 16-row decode here). The worst measured
 * through the host harness is printed per model (at most 0.5% at the
 * time of writing, on 4 layers with sharp attention); 2% is engine_cuda.c's
 * tolerance. The routing is the same computation on both backends (f32
 * router, same top-k order), so it adds no error unless two experts tie
 * to within rounding.
 */
#define TOL   0.02
#define N_GEN 6

static int n_files;
static char *files[8];

/* The synthetic model of a preset in a type, written once per run. */
static const char *model_file(const char *preset, uint32_t type)
{
    static struct {
        const char *preset;
        uint32_t type;
    } made[8];
    for (int i = 0; i < n_files; i++)
        if (strcmp(made[i].preset, preset) == 0 && made[i].type == type)
            return files[i];
    char *path =
        xasprintf("%s/fp4-cuda-qwen3-%ld-%s-%u.gguf", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp",
                  (long)getpid(), preset, type);
    struct synth_opts o = {.preset = synth_preset_find(preset), .type = type, .seed = 5};
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

static struct model *load(const char *path, const char *device, enum model_decode decode)
{
    struct model_opts o = {.threads = 2,
                           .max_batch = 16,
                           .ctx = 128,
                           .max_step_tokens = 256,
                           .decode = decode,
                           .device = device};
    struct err err;
    err_init(&err);
    struct model *m = model_new(path, &o, &err);
    CHECK_MSG(m != NULL, "load %s on %s: %s", path, device, err.msg);
    return m;
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

/*
 * The same steps on both backends: 4 prompts of 12 to 70 tokens prefilled
 * together (tensor cores; the first asks for every row), N_GEN decode
 * steps of the 4 (GEMV; keys over two attention chunks), 12 more prompts,
 * and one decode step of all 16 (tensor cores). Decode tokens are the
 * CPU's greedy choices, fed to both. A MoE model's expert counters must
 * equal the CPU's at every step (the same experts touched).
 */
static void parity(const char *preset, uint32_t type)
{
    const char *path = model_file(preset, type);
    struct model *cpu = load(path, "cpu", MODEL_DECODE_BATCHED);
    struct model *gpu = cpu ? load(path, "cuda", MODEL_DECODE_BATCHED) : NULL;
    if (!cpu || !gpu) {
        model_free(cpu);
        model_free(gpu);
        return;
    }
    int V = cpu->cfg.n_vocab;
    const int lens[16] = {12, 40, 70, 9, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20};
    int32_t prompts[16][70], next[16];
    struct model_seq a[16], b[16];
    double worst[3] = {0, 0, 0}; /* prefill, decode (gemv), decode of 16 */
    int counters_differ = 0;
    for (int i = 0; i < 16; i++)
        prompt(prompts[i], i, lens[i], V);

    for (int i = 0; i < 4; i++)
        a[i] = b[i] = (struct model_seq){
            i, 0, lens[i], prompts[i], i == 0 ? MODEL_LOGITS_ALL : MODEL_LOGITS_LAST, NULL};
    if (!step(cpu, a, 4) || !step(gpu, b, 4))
        goto out;
    counters_differ += cpu->last_experts != gpu->last_experts;
    for (int i = 0; i < 4; i++) {
        int rows = i == 0 ? lens[0] : 1;
        for (int r = 0; r < rows; r++)
            worst[0] =
                fmax(worst[0], rel_err(b[i].out + (size_t)r * V, a[i].out + (size_t)r * V, V));
        next[i] = sample_argmax(a[i].out + (size_t)(rows - 1) * V, V);
    }
    for (int g = 0; g < N_GEN; g++) {
        for (int i = 0; i < 4; i++)
            a[i] = b[i] = (struct model_seq){i, lens[i] + g, 1, &next[i], MODEL_LOGITS_LAST, NULL};
        if (!step(cpu, a, 4) || !step(gpu, b, 4))
            goto out;
        counters_differ += cpu->last_experts != gpu->last_experts;
        for (int i = 0; i < 4; i++) {
            worst[1] = fmax(worst[1], rel_err(b[i].out, a[i].out, V));
            next[i] = sample_argmax(a[i].out, V);
        }
    }
    for (int i = 4; i < 16; i++)
        a[i - 4] = b[i - 4] =
            (struct model_seq){i, 0, lens[i], prompts[i], MODEL_LOGITS_LAST, NULL};
    if (!step(cpu, a, 12) || !step(gpu, b, 12))
        goto out;
    for (int i = 4; i < 16; i++) {
        worst[0] = fmax(worst[0], rel_err(b[i - 4].out, a[i - 4].out, V));
        next[i] = sample_argmax(a[i - 4].out, V);
    }
    for (int i = 0; i < 16; i++) {
        int pos = i < 4 ? lens[i] + N_GEN : lens[i];
        a[i] = b[i] = (struct model_seq){i, pos, 1, &next[i], MODEL_LOGITS_LAST, NULL};
    }
    if (!step(cpu, a, 16) || !step(gpu, b, 16))
        goto out;
    counters_differ += cpu->last_experts != gpu->last_experts;
    for (int i = 0; i < 16; i++)
        worst[2] = fmax(worst[2], rel_err(b[i].out, a[i].out, V));
    printf("parity %-14s %-6s prefill %.2e  decode(gemv) %.2e  decode(16 rows) %.2e  experts "
           "%llu\n",
           preset, q_info(type)->name, worst[0], worst[1], worst[2],
           (unsigned long long)gpu->last_experts);
    CHECK_MSG(worst[0] <= TOL && worst[1] <= TOL && worst[2] <= TOL,
              "%s %s: cuda vs cpu logits differ by %.3g / %.3g / %.3g of the largest (tolerance "
              "%g)",
              preset, q_info(type)->name, worst[0], worst[1], worst[2], TOL);
    CHECK_MSG(counters_differ == 0, "%s %s: expert counters differ from the cpu's in %d steps",
              preset, q_info(type)->name, counters_differ);
    CHECK(gpu->last.matmul_ns > 0 && gpu->last.attn_ns > 0 && gpu->last.other_ns > 0);
out:
    model_free(cpu);
    model_free(gpu);
}

TEST(qwen3_parity_f32)
{
    parity("qwen3-tiny", Q_F32);
}
TEST(qwen3_parity_q8_0)
{
    parity("qwen3-tiny", Q_Q8_0);
}
TEST(qwen3moe_parity_f32)
{
    parity("qwen3moe-tiny", Q_F32);
}
TEST(qwen3moe_parity_q8_0)
{
    parity("qwen3moe-tiny", Q_Q8_0);
}
TEST(qwen3moe_parity_mxfp4)
{
    parity("qwen3moe-tiny", Q_MXFP4);
}
TEST(qwen3moe_parity_nvfp4)
{
    parity("qwen3moe-tiny", Q_NVFP4);
}

/* ---- greedy tokens and batch invariance ---- */

/* Greedy generation of n prompts of lens[i] (all > CU_GEMV_MAX_ROWS: every
 * prefill on the tensor cores, every decode of <= 8 rows in the GEMV
 * regime), each alone in slot 0 or all together; the tokens (n x (N_GEN +
 * 1)) and every step's logits are kept. */
static void generate(struct model *m, int n, const int *lens, bool together, int32_t *tokens,
                     float *logits)
{
    int V = m->cfg.n_vocab;
    int32_t prompts[8][64], next[8];
    struct model_seq s[8];
    for (int i = 0; i < n; i++)
        prompt(prompts[i], 40 + i, lens[i], V);
    for (int first = 0; first < n; first = together ? n : first + 1) {
        int cnt = together ? n : 1;
        for (int j = 0; j < cnt; j++) {
            model_slot_free(m, j);
            s[j] = (struct model_seq){
                j, 0, lens[first + j], prompts[first + j], MODEL_LOGITS_LAST, NULL};
        }
        for (int g = 0; g <= N_GEN; g++) {
            if (!step(m, s, cnt))
                return;
            for (int j = 0; j < cnt; j++) {
                int i = first + j;
                memcpy(logits + ((size_t)i * (N_GEN + 1) + g) * V, s[j].out, sizeof(float) * V);
                next[j] = sample_argmax(s[j].out, V);
                tokens[i * (N_GEN + 1) + g] = next[j];
                s[j] = (struct model_seq){j, lens[i] + g, 1, &next[j], MODEL_LOGITS_LAST, NULL};
            }
        }
    }
}

/* Greedy tokens of the two backends agree, except after a step where the
 * CPU's top two logits are within the tolerance (a tie either may break). */
static void greedy(const char *preset, uint32_t type)
{
    const char *path = model_file(preset, type);
    struct model *cpu = load(path, "cpu", MODEL_DECODE_BATCHED);
    struct model *gpu = cpu ? load(path, "cuda", MODEL_DECODE_BATCHED) : NULL;
    if (!cpu || !gpu) {
        model_free(cpu);
        model_free(gpu);
        return;
    }
    int V = cpu->cfg.n_vocab;
    const int lens[4] = {9, 17, 33, 50};
    size_t nl = (size_t)4 * (N_GEN + 1) * V;
    int32_t tc[4 * (N_GEN + 1)], tg[4 * (N_GEN + 1)];
    float *lc = xmalloc(sizeof(float) * nl), *lg = xmalloc(sizeof(float) * nl);
    generate(cpu, 4, lens, true, tc, lc);
    generate(gpu, 4, lens, true, tg, lg);
    int exact = 0;
    for (int i = 0; i < 4; i++) {
        int g = 0;
        while (g <= N_GEN && tc[i * (N_GEN + 1) + g] == tg[i * (N_GEN + 1) + g])
            g++;
        exact += g > N_GEN;
        if (g > N_GEN)
            continue;
        const float *row = lc + ((size_t)i * (N_GEN + 1) + g) * V;
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
        CHECK_MSG(top - second <= 2 * TOL * amax,
                  "%s prompt %d step %d: cpu %d, cuda %d with a margin of %g (max |logit| %g)",
                  preset, i, g, tc[i * (N_GEN + 1) + g], tg[i * (N_GEN + 1) + g], top - second,
                  amax);
    }
    printf("greedy %-14s %-6s %d of 4 prompts identical for %d tokens\n", preset,
           q_info(type)->name, exact, N_GEN + 1);
    free(lc);
    free(lg);
    model_free(cpu);
    model_free(gpu);
}

TEST(qwen3_greedy_matches_cpu)
{
    greedy("qwen3-tiny", Q_Q8_0);
}
TEST(qwen3moe_greedy_matches_cpu)
{
    greedy("qwen3moe-tiny", Q_MXFP4);
    greedy("qwen3moe-tiny", Q_NVFP4);
}

/* On CUDA, 4 prompts generated together (decode steps of 4 rows) give the
 * tokens and logits bits of each generated alone (steps of 1 row): same
 * regimes, and a row's routing, expert grouping and sums never depend on
 * the other rows. Then --decode per-request gives the bits of batched. */
static void alone_and_per_request(const char *preset, uint32_t type)
{
    const char *path = model_file(preset, type);
    struct model *m = load(path, "cuda", MODEL_DECODE_BATCHED);
    struct model *pr = m ? load(path, "cuda", MODEL_DECODE_PER_REQUEST) : NULL;
    if (!m || !pr) {
        model_free(m);
        model_free(pr);
        return;
    }
    const int lens[4] = {9, 23, 31, 64};
    size_t nl = (size_t)4 * (N_GEN + 1) * m->cfg.n_vocab;
    int32_t ta[4 * (N_GEN + 1)], tb[4 * (N_GEN + 1)], tp[4 * (N_GEN + 1)];
    float *la = xmalloc(sizeof(float) * nl), *lb = xmalloc(sizeof(float) * nl);
    float *lp = xmalloc(sizeof(float) * nl);
    generate(m, 4, lens, false, ta, la);
    generate(m, 4, lens, true, tb, lb);
    generate(pr, 4, lens, true, tp, lp);
    CHECK_MSG(memcmp(ta, tb, sizeof(ta)) == 0, "%s %s: tokens alone != together", preset,
              q_info(type)->name);
    CHECK_MSG(memcmp(la, lb, sizeof(float) * nl) == 0, "%s %s: logits alone != together", preset,
              q_info(type)->name);
    CHECK_MSG(memcmp(lp, lb, sizeof(float) * nl) == 0, "%s %s: per-request logits != batched",
              preset, q_info(type)->name);
    free(la);
    free(lb);
    free(lp);
    model_free(m);
    model_free(pr);
}

TEST(qwen3_alone_equals_together)
{
    alone_and_per_request("qwen3-tiny", Q_Q8_0);
}
TEST(qwen3moe_alone_equals_together)
{
    alone_and_per_request("qwen3moe-tiny", Q_F32);
    alone_and_per_request("qwen3moe-tiny", Q_MXFP4);
}

/* The tensor-core regime: 16 decode rows, the same 16 in reverse order,
 * and the first 12 (each step rewinds to the same positions) give the
 * same bits, though the experts' gathered blocks differ in each. */
TEST(qwen3moe_wide_rows_are_independent)
{
    struct model *m = load(model_file("qwen3moe-tiny", Q_NVFP4), "cuda", MODEL_DECODE_BATCHED);
    if (!m)
        return;
    int V = m->cfg.n_vocab;
    int32_t prompts[16][12], tok[16];
    int plen[16];
    struct model_seq q[16];
    float *ref = xmalloc(sizeof(float) * 16 * (size_t)V);
    for (int i = 0; i < 16; i++) {
        plen[i] = 9 + i % 4;
        prompt(prompts[i], 90 + i, plen[i], V);
        tok[i] = (int32_t)(3 + i * 101 % (V - 3));
        q[i] = (struct model_seq){i, 0, plen[i], prompts[i], MODEL_LOGITS_NONE, NULL};
    }
    if (!step(m, q, 16))
        goto out;
    for (int i = 0; i < 16; i++)
        q[i] = (struct model_seq){i, plen[i], 1, &tok[i], MODEL_LOGITS_LAST, NULL};
    if (!step(m, q, 16))
        goto out;
    for (int i = 0; i < 16; i++)
        memcpy(ref + (size_t)i * V, q[i].out, sizeof(float) * V);
    for (int i = 0; i < 16; i++)
        q[i] = (struct model_seq){15 - i, plen[15 - i], 1, &tok[15 - i], MODEL_LOGITS_LAST, NULL};
    if (!step(m, q, 16))
        goto out;
    for (int i = 0; i < 16; i++)
        CHECK_MSG(memcmp(q[i].out, ref + (size_t)(15 - i) * V, sizeof(float) * V) == 0,
                  "reversed: sequence %d", 15 - i);
    for (int i = 0; i < 12; i++)
        q[i] = (struct model_seq){i, plen[i], 1, &tok[i], MODEL_LOGITS_LAST, NULL};
    if (!step(m, q, 12))
        goto out;
    for (int i = 0; i < 12; i++)
        CHECK_MSG(memcmp(q[i].out, ref + (size_t)i * V, sizeof(float) * V) == 0,
                  "12 rows: sequence %d", i);
out:
    free(ref);
    model_free(m);
}

/* ---- expert counters ---- */

/* A decode step of 16 sequences: batched, each touched expert counted
 * once per layer (as many as the CPU counts); per-request, k per layer
 * for each sequence; one sequence alone, exactly k per layer. Bytes are
 * the experts' bytes (all the same size here). */
TEST(qwen3moe_expert_counters)
{
    const char *path = model_file("qwen3moe-tiny", Q_MXFP4);
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
