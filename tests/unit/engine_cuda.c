/*
 * CPU-parity tests for the CUDA backend (engine/cuda/), on synthetic
 * models written at test time with synth_write (what `fp4serve synth`
 * runs): every weight type through --quant, logits against the CPU
 * backend within a stated tolerance in both matmul regimes (GEMV for
 * steps of <= CU_GEMV_MAX_ROWS rows, tensor cores above), greedy tokens,
 * and the bit-for-bit invariances the backend promises (batched = alone
 * within a regime, --decode per-request = batched, --attention serial =
 * split). Without a usable GPU the binary prints "skipped: no GPU" and
 * reports 0 passed, 0 failed: nothing here runs on a CPU, except as
 * build/tests/cudahost_parity (built with CUDAHOST_SHAPES, the kernels
 * through tests/cudahost/, docs/cudahost.md). The model files, rel_err(),
 * step() and main() are cuda_parity.h's.
 */
#include "cuda_parity.h"
#include "rng.h"

/*
 * Tolerance on max |cuda - cpu| / max |cpu| per logits row. The CPU
 * quantizes activations to int8 per 32-block before every matmul on
 * quantized weights (relative noise about 0.5% per matmul output, from
 * amax/127 steps); the CUDA backend does the same in the GEMV regime, but
 * in the tensor-core regime (every prefill here) multiplies f16
 * activations, so K/V and everything after differ by that noise. Estimated
 * (not yet measured on a GPU) at <= 0.5% of the largest logit for these
 * 2-layer models; 2% leaves a 4x margin. The tests print the measured
 * worst case per model so that a GPU run can tighten it.
 */
#define TOL   0.02
#define N_GEN 8

/* A wider model for the K-quants (their 256-element blocks need columns
 * that are multiples of 256) with a GQA group of 3 and head_dim 64, as
 * SmolLM2 has. Through the host harness (tests/cudahost/, built with
 * CUDAHOST_SHAPES), where every GPU thread is a fiber, smaller shapes of
 * the same kinds keep the suite within its time: the K-quants on 256
 * columns (group 2, head_dim 64) and the group of 3 with head_dim 64 on
 * 192 columns. */
#ifdef CUDAHOST_SHAPES
static const struct synth_preset k768 = {.name = "k256",
                                         .n_layer = 2,
                                         .n_embd = 256,
                                         .n_head = 4,
                                         .n_head_kv = 2,
                                         .n_ff = 512,
                                         .n_vocab = 512,
                                         .n_ctx = 256,
                                         .rope_base = 10000.0f,
                                         .rms_eps = 1e-5f};
static const struct synth_preset wide = {.name = "g3",
                                         .n_layer = 2,
                                         .n_embd = 192,
                                         .n_head = 3,
                                         .n_head_kv = 1,
                                         .n_ff = 256,
                                         .n_vocab = 512,
                                         .n_ctx = 256,
                                         .rope_base = 10000.0f,
                                         .rms_eps = 1e-5f};
#else
static const struct synth_preset k768 = {.name = "k768",
                                         .n_layer = 2,
                                         .n_embd = 768,
                                         .n_head = 12,
                                         .n_head_kv = 4,
                                         .n_ff = 1024,
                                         .n_vocab = 512,
                                         .n_ctx = 256,
                                         .rope_base = 10000.0f,
                                         .rms_eps = 1e-5f};
#define wide k768
#endif

/* Write a synthetic model once per (preset, type); the path is kept for
 * the whole run and removed at exit. */
static const char *model_file(const struct synth_preset *p, uint32_t type)
{
    return parity_model_file("cuda-test", p, type, 7);
}

struct setup {
    const char *device;
    int quant; /* -1: native */
    bool head_same;
    enum model_decode decode;
    enum model_attention attention;
};

static struct model *load(const char *path, const struct setup *s)
{
    struct model_opts o = {.threads = 2,
                           .max_batch = 16,
                           .ctx = 256,
                           .max_step_tokens = 256,
                           .quant = s->quant,
                           .quant_set = s->quant >= 0,
                           .head_same = s->head_same,
                           .decode = s->decode,
                           .attention = s->attention,
                           .device = s->device};
    struct err err;
    err_init(&err);
    struct model *m = model_new(path, &o, &err);
    CHECK_MSG(m != NULL, "load %s on %s: %s", path, s->device, err.msg);
    return m;
}

static int32_t *prompt_tokens(int len, uint64_t seed, int n_vocab)
{
    int32_t *t = xmalloc(sizeof(int32_t) * (size_t)len);
    for (int i = 0; i < len; i++)
        t[i] = (int32_t)(rng_next(&seed) % (uint64_t)n_vocab);
    return t;
}

/* Run the same steps on both models and compare logits rows (see TOL):
 * one prefill step of 4 prompts up to 130 tokens (tensor cores; the first
 * asks for every row's logits), N_GEN decode steps of the 4 (GEMV; keys
 * span three attention chunks, so split partials are combined), 12 more
 * prompts, and one decode step of all 16 (tensor cores). Decode tokens are
 * the CPU's greedy choices, fed to both. */
static void parity(const char *path, const struct setup *s, const char *label)
{
    struct setup sc = *s, sg = *s;
    sc.device = "cpu";
    sg.device = "cuda";
    struct model *cpu = load(path, &sc), *gpu = load(path, &sg);
    if (!cpu || !gpu) {
        model_free(cpu);
        model_free(gpu);
        return;
    }
    int V = cpu->cfg.n_vocab;
    const int lens[16] = {12, 40, 70, 130, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20};
    int32_t *prompts[16];
    for (int i = 0; i < 16; i++)
        prompts[i] = prompt_tokens(lens[i], 100 + (uint64_t)i, V);
    double worst[3] = {0, 0, 0}; /* prefill, decode (gemv), decode of 16 */
    int differ = 0;
    if (!both_regimes(cpu, gpu, prompts, lens, 0, N_GEN, 1, worst, &differ))
        goto out;
    printf("parity %-14s prefill %.2e  decode(gemv) %.2e  decode(16 rows) %.2e\n", label, worst[0],
           worst[1], worst[2]);
    CHECK_MSG(worst[0] <= TOL && worst[1] <= TOL && worst[2] <= TOL,
              "%s: cuda vs cpu logits differ by %.3g / %.3g / %.3g of the largest (tolerance %g)",
              label, worst[0], worst[1], worst[2], TOL);
    /* The phase timers were filled. */
    CHECK(gpu->last.matmul_ns > 0 && gpu->last.attn_ns > 0 && gpu->last.other_ns > 0);
out:
    for (int i = 0; i < 16; i++)
        free(prompts[i]);
    model_free(cpu);
    model_free(gpu);
}

static const struct synth_preset *tiny(void)
{
    return synth_preset_find("tiny");
}

/* Every linear weight, the embedding and the head in type t. */
static void parity_quant(uint32_t t)
{
    struct setup s = {.quant = (int)t, .head_same = true};
    const struct synth_preset *p = t == Q_Q4_K || t == Q_Q6_K ? &k768 : tiny();
    parity(model_file(p, Q_F16), &s, q_info(t)->name);
}

TEST(parity_f32)
{
    parity_quant(Q_F32);
}
TEST(parity_f16)
{
    parity_quant(Q_F16);
}
TEST(parity_bf16)
{
    parity_quant(Q_BF16);
}
TEST(parity_q4_0)
{
    parity_quant(Q_Q4_0);
}
TEST(parity_q4_1)
{
    parity_quant(Q_Q4_1);
}
TEST(parity_q5_0)
{
    parity_quant(Q_Q5_0);
}
TEST(parity_q5_1)
{
    parity_quant(Q_Q5_1);
}
TEST(parity_q8_0)
{
    parity_quant(Q_Q8_0);
}
TEST(parity_q4_k)
{
    parity_quant(Q_Q4_K);
}
TEST(parity_q6_k)
{
    parity_quant(Q_Q6_K);
}
TEST(parity_mxfp4)
{
    parity_quant(Q_MXFP4);
}
TEST(parity_nvfp4)
{
    parity_quant(Q_NVFP4);
}

/* Files as synth writes them: Q4_1 layers with a Q8_0 embedding (the
 * SmolLM2 file's layout), NVFP4 with llama.cpp's per-tensor .scale
 * tensors, and the wide model natively (Q4_1, group of 3, head_dim 64). */
TEST(parity_native_q4_1)
{
    struct setup s = {.quant = -1};
    parity(model_file(tiny(), Q_Q4_1), &s, "native q4_1");
}
TEST(parity_native_nvfp4)
{
    struct setup s = {.quant = -1};
    parity(model_file(tiny(), Q_NVFP4), &s, "native nvfp4");
}
TEST(parity_wide_q4_1)
{
    struct setup s = {.quant = -1};
    parity(model_file(&wide, Q_Q4_1), &s, "wide q4_1");
}
TEST(parity_serial_attention)
{
    struct setup s = {.quant = -1, .attention = MODEL_ATTN_SERIAL};
    parity(model_file(tiny(), Q_Q4_1), &s, "serial attn");
}

/* A step of exactly max_step_tokens rows (two prompts of 125; 250 is not
 * a multiple of the 64-row tiles): every run buffer is full, so a kernel
 * that reads or writes one row past the step lands in the next buffer of
 * the arena, where the host harness sees it. */
TEST(parity_full_step)
{
    const char *path = model_file(tiny(), Q_Q4_1);
    struct model_opts o = {.threads = 2, .max_batch = 2, .ctx = 256, .max_step_tokens = 250};
    struct err err;
    err_init(&err);
    o.device = "cpu";
    struct model *cpu = model_new(path, &o, &err);
    o.device = "cuda";
    struct model *gpu = cpu ? model_new(path, &o, &err) : NULL;
    CHECK_MSG(cpu && gpu, "load: %s", err.msg);
    if (cpu && gpu) {
        int V = cpu->cfg.n_vocab;
        int32_t *p0 = prompt_tokens(125, 71, V), *p1 = prompt_tokens(125, 72, V);
        struct model_seq a[2] = {{0, 0, 125, p0, MODEL_LOGITS_LAST, NULL},
                                 {1, 0, 125, p1, MODEL_LOGITS_LAST, NULL}};
        struct model_seq b[2] = {a[0], a[1]};
        if (step(cpu, a, 2) && step(gpu, b, 2)) {
            double worst = fmax(rel_err(b[0].out, a[0].out, V), rel_err(b[1].out, a[1].out, V));
            printf("parity full step    %.2e\n", worst);
            CHECK_MSG(worst <= TOL, "250-row step: %.3g of the largest logit (tolerance %g)", worst,
                      TOL);
        }
        free(p0);
        free(p1);
    }
    model_free(cpu);
    model_free(gpu);
}
/* ---- bit-for-bit invariances of the CUDA backend ---- */

/* Greedy generation for prompts of lens[i] (all > CU_GEMV_MAX_ROWS, so
 * every prefill is in the tensor-core regime and every decode of <= 8 rows
 * in the GEMV one), either each alone in slot 0 or all together; tokens
 * and the logits of every step are kept. */
static void generate(struct model *m, int n, const int *lens, bool together, int32_t *tokens,
                     float *logits)
{
    int V = m->cfg.n_vocab;
    int32_t *prompts[8], next[8];
    struct model_seq s[8];
    for (int i = 0; i < n; i++)
        prompts[i] = prompt_tokens(lens[i], 500 + (uint64_t)i, V);
    for (int first = 0; first < n; first = together ? n : first + 1) {
        int cnt = together ? n : 1;
        for (int j = 0; j < cnt; j++) {
            int i = first + j;
            model_slot_free(m, j);
            s[j] = (struct model_seq){j, 0, lens[i], prompts[i], MODEL_LOGITS_LAST, NULL};
        }
        for (int g = 0; g <= N_GEN; g++) {
            if (!step(m, s, cnt))
                goto out;
            for (int j = 0; j < cnt; j++) {
                int i = first + j;
                memcpy(logits + ((size_t)i * (N_GEN + 1) + g) * V, s[j].out, sizeof(float) * V);
                next[j] = sample_argmax(s[j].out, V);
                tokens[i * (N_GEN + 1) + g] = next[j];
                s[j] = (struct model_seq){j, lens[i] + g, 1, &next[j], MODEL_LOGITS_LAST, NULL};
            }
        }
    }
out:
    for (int i = 0; i < n; i++)
        free(prompts[i]);
}

TEST(batched_equals_alone)
{
    struct setup s = {.device = "cuda", .quant = -1};
    struct model *m = load(model_file(tiny(), Q_Q4_1), &s);
    if (!m)
        return;
    const int lens[4] = {9, 23, 31, 64};
    size_t nl = (size_t)4 * (N_GEN + 1) * m->cfg.n_vocab;
    int32_t ta[4 * (N_GEN + 1)], tb[4 * (N_GEN + 1)];
    float *la = xmalloc(sizeof(float) * nl), *lb = xmalloc(sizeof(float) * nl);
    generate(m, 4, lens, false, ta, la);
    generate(m, 4, lens, true, tb, lb);
    CHECK(memcmp(ta, tb, sizeof(ta)) == 0);
    CHECK(memcmp(la, lb, sizeof(float) * nl) == 0);
    free(la);
    free(lb);
    model_free(m);
}

/* Greedy tokens of the two backends agree, except after a step where the
 * CPU's top two logits are within the tolerance (a tie either may break). */
TEST(greedy_matches_cpu)
{
    const char *path = model_file(tiny(), Q_Q4_1);
    struct setup sc = {.device = "cpu", .quant = -1}, sg = {.device = "cuda", .quant = -1};
    struct model *cpu = load(path, &sc), *gpu = load(path, &sg);
    if (!cpu || !gpu)
        goto out;
    int V = cpu->cfg.n_vocab;
    const int lens[4] = {9, 17, 33, 50};
    size_t nl = (size_t)4 * (N_GEN + 1) * V;
    int32_t tc[4 * (N_GEN + 1)], tg[4 * (N_GEN + 1)];
    float *lc = xmalloc(sizeof(float) * nl), *lg = xmalloc(sizeof(float) * nl);
    generate(cpu, 4, lens, true, tc, lc);
    generate(gpu, 4, lens, true, tg, lg);
    /* The first difference must be a near-tie on the CPU side. */
    int exact = greedy_agree("tiny", Q_Q4_1, 4, N_GEN + 1, tc, tg, lc, V, 2 * TOL);
    printf("greedy: %d of 4 prompts identical for %d tokens\n", exact, N_GEN + 1);
    free(lc);
    free(lg);
out:
    model_free(cpu);
    model_free(gpu);
}

/* Within the tensor-core regime a row's logits do not depend on the other
 * rows: 16 decode rows, the same 16 in reverse order, and the first 12
 * alone (each step rewinds to the same positions) give the same bits. */
TEST(wide_rows_are_independent)
{
    struct setup s = {.device = "cuda", .quant = -1};
    struct model *m = load(model_file(tiny(), Q_NVFP4), &s);
    if (!m)
        return;
    int V = m->cfg.n_vocab;
    int32_t *prompts[16], tok[16];
    int plen[16];
    struct model_seq q[16];
    float *ref = xmalloc(sizeof(float) * 16 * (size_t)V);
    for (int i = 0; i < 16; i++) {
        plen[i] = 9 + i % 4;
        prompts[i] = prompt_tokens(plen[i], 900 + (uint64_t)i, V);
        tok[i] = (int32_t)(i * 7 % V);
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
    for (int i = 0; i < 16; i++)
        free(prompts[i]);
    free(ref);
    model_free(m);
}

/* Two CUDA models that differ in one option give the same bits for the
 * same steps (4 prompts prefilled together, then N_GEN decode steps). */
static void same_bits(const struct setup *x, const struct setup *y, const char *what)
{
    const char *path = model_file(tiny(), Q_Q4_1);
    struct model *a = load(path, x), *b = load(path, y);
    if (a && b) {
        const int lens[4] = {9, 40, 70, 130}; /* decode keys span up to 3 chunks */
        size_t nl = (size_t)4 * (N_GEN + 1) * a->cfg.n_vocab;
        int32_t ta[4 * (N_GEN + 1)], tb[4 * (N_GEN + 1)];
        float *la = xmalloc(sizeof(float) * nl), *lb = xmalloc(sizeof(float) * nl);
        generate(a, 4, lens, true, ta, la);
        generate(b, 4, lens, true, tb, lb);
        CHECK_MSG(memcmp(la, lb, sizeof(float) * nl) == 0, "%s: logits differ", what);
        free(la);
        free(lb);
    }
    model_free(a);
    model_free(b);
}

TEST(per_request_equals_batched)
{
    struct setup x = {.device = "cuda", .quant = -1, .decode = MODEL_DECODE_BATCHED};
    struct setup y = {.device = "cuda", .quant = -1, .decode = MODEL_DECODE_PER_REQUEST};
    same_bits(&x, &y, "--decode per-request");
}

TEST(serial_equals_split)
{
    struct setup x = {.device = "cuda", .quant = -1, .attention = MODEL_ATTN_SPLIT};
    struct setup y = {.device = "cuda", .quant = -1, .attention = MODEL_ATTN_SERIAL};
    same_bits(&x, &y, "--attention serial");
}

/* ---- prefix copy: the backend's kv_copy through model_slot_copy ---- */

/* Positions copied: a multiple of nothing, past a chunk (64) and, at
 * head_dim 64, over two blocks of cu_kv_copy's kernel (1,024 words). */
#define PFX_LEN 180 /* the prompt */
#define PFX_N   150

/* Copy a prefix, then compute the rest, on m (slots 3 and 1): slot 1
 * first holds another prompt, so a K or V the copy misses is stale rather
 * than unwritten; slot 3 prefills the prompt; model_slot_copy(3 -> 1,
 * PFX_N); slot 1 computes positions PFX_N.. (every row's logits into
 * copied) and decodes one token (copied_dec). Then slot 1 computes the
 * whole prompt from scratch (every row into scratch) and decodes the same
 * token (scratch_dec). Every step here has more than CU_GEMV_MAX_ROWS rows
 * but the decodes, so both paths run the same regimes. */
static bool prefix_run(struct model *m, const int32_t *prompt, const int32_t *other, float *copied,
                       float *copied_dec, float *scratch, float *scratch_dec)
{
    int V = m->cfg.n_vocab, rest = PFX_LEN - PFX_N;
    int32_t tok = 7;
    struct err err;
    err_init(&err);
    struct model_seq s[2] = {{1, 0, PFX_LEN, other, MODEL_LOGITS_NONE, NULL},
                             {3, 0, PFX_LEN, prompt, MODEL_LOGITS_NONE, NULL}};
    if (!step(m, s, 2))
        return false;
    int rc = model_slot_copy(m, 3, 1, PFX_N, &err);
    CHECK_MSG(rc == 0, "model_slot_copy on %s: %s", m->be->name, err.msg);
    CHECK_INT(model_slot_len(m, 1), PFX_N);
    if (rc != 0)
        return false;
    s[0] = (struct model_seq){1, PFX_N, rest, prompt + PFX_N, MODEL_LOGITS_ALL, NULL};
    if (!step(m, s, 1))
        return false;
    memcpy(copied, s[0].out, sizeof(float) * (size_t)rest * V);
    s[0] = (struct model_seq){1, PFX_LEN, 1, &tok, MODEL_LOGITS_LAST, NULL};
    if (!step(m, s, 1))
        return false;
    memcpy(copied_dec, s[0].out, sizeof(float) * V);
    model_slot_free(m, 1);
    s[0] = (struct model_seq){1, 0, PFX_LEN, prompt, MODEL_LOGITS_ALL, NULL};
    if (!step(m, s, 1))
        return false;
    memcpy(scratch, s[0].out, sizeof(float) * (size_t)PFX_LEN * V);
    s[0] = (struct model_seq){1, PFX_LEN, 1, &tok, MODEL_LOGITS_LAST, NULL};
    if (!step(m, s, 1))
        return false;
    memcpy(scratch_dec, s[0].out, sizeof(float) * V);
    return true;
}

/* The prefix cache's copy of a busy slot's prefix (cu_kv_copy): the rows
 * after a copied prefix, and a decode after them, are bit for bit those of
 * computing the whole prompt in that slot (rows do not depend on their
 * step, see wide_rows_are_independent), and the CPU backend's copy within
 * TOL. On the tiny model (2 KV heads, head_dim 16) and the wide one
 * (head_dim 64). */
static void prefix_copy(const struct synth_preset *p, const char *label)
{
    const char *path = model_file(p, Q_Q4_1);
    struct model_opts o = {.threads = 2,
                           .max_batch = 4,
                           .ctx = 256,
                           .max_step_tokens = 2 * PFX_LEN,
                           .max_logit_rows = PFX_LEN,
                           .quant = -1};
    struct err err;
    err_init(&err);
    o.device = "cpu";
    struct model *cpu = model_new(path, &o, &err);
    o.device = "cuda";
    struct model *gpu = cpu ? model_new(path, &o, &err) : NULL;
    CHECK_MSG(cpu && gpu, "load %s: %s", path, err.msg);
    if (!cpu || !gpu) {
        model_free(cpu);
        model_free(gpu);
        return;
    }
    CHECK(model_can_copy_kv(gpu));
    int V = cpu->cfg.n_vocab, rest = PFX_LEN - PFX_N;
    int32_t *prompt = prompt_tokens(PFX_LEN, 41, V), *other = prompt_tokens(PFX_LEN, 42, V);
    size_t nr = (size_t)rest * V, ns = (size_t)PFX_LEN * V;
    float *cc = xmalloc(sizeof(float) * nr), *cs = xmalloc(sizeof(float) * ns);
    float *gc = xmalloc(sizeof(float) * nr), *gs = xmalloc(sizeof(float) * ns);
    float *cd = xmalloc(sizeof(float) * V), *cds = xmalloc(sizeof(float) * V);
    float *gd = xmalloc(sizeof(float) * V), *gds = xmalloc(sizeof(float) * V);
    if (prefix_run(cpu, prompt, other, cc, cd, cs, cds) &&
        prefix_run(gpu, prompt, other, gc, gd, gs, gds)) {
        int bad = -1;
        for (int r = 0; r < rest && bad < 0; r++)
            if (memcmp(gc + (size_t)r * V, gs + (size_t)(PFX_N + r) * V, sizeof(float) * V) != 0)
                bad = r;
        CHECK_MSG(bad < 0, "%s: position %d after a copied prefix differs from the recomputed one",
                  label, PFX_N + bad);
        CHECK_MSG(memcmp(gd, gds, sizeof(float) * V) == 0,
                  "%s: decode after a copied prefix differs from the recomputed one", label);
        double worst = rel_err(gd, cd, V);
        for (int r = 0; r < rest; r++)
            worst = fmax(worst, rel_err(gc + (size_t)r * V, cc + (size_t)r * V, V));
        printf("prefix copy %-10s cuda vs cpu %.2e\n", label, worst);
        CHECK_MSG(worst <= TOL, "%s: rows after a copied prefix: cuda vs cpu %.3g (tolerance %g)",
                  label, worst, TOL);
    }
    free(prompt);
    free(other);
    free(cc);
    free(cs);
    free(gc);
    free(gs);
    free(cd);
    free(cds);
    free(gd);
    free(gds);
    model_free(cpu);
    model_free(gpu);
}

TEST(prefix_copy_equals_recompute)
{
    prefix_copy(tiny(), "tiny");
    prefix_copy(&wide, "wide");
}

/* ---- refusals ---- */

TEST(refuses_f32_cache)
{
    struct model_opts o = {.threads = 1, .kv_f32 = true, .device = "cuda"};
    struct err err;
    err_init(&err);
    struct model *m = model_new(model_file(tiny(), Q_Q4_1), &o, &err);
    CHECK(m == NULL);
    CHECK_INT(err.code, FP_ERR_UNSUPPORTED);
    CHECK(strstr(err.msg, "--kv f32") != NULL);
    model_free(m);
}

TEST(cache_too_large_is_a_resource_error)
{
    struct model_opts o = {.threads = 1, .max_batch = 4096, .ctx = 1 << 20, .device = "cuda"};
    struct err err;
    err_init(&err);
    struct model *m = model_new(model_file(tiny(), Q_Q4_1), &o, &err);
    CHECK(m == NULL);
    CHECK_INT(err.code, FP_ERR_RESOURCE);
    CHECK_MSG(strstr(err.msg, "--max-batch") != NULL, "message: %s", err.msg);
    model_free(m);
}

int main(int argc, char **argv)
{
    return cuda_parity_main(argc, argv);
}
