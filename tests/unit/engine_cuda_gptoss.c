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
 * on the CPU through tests/cudahost/, docs/cudahost.md). The model
 * files, loading, both(), greedy(), alone_and_per_request(),
 * expert_counters() and main() are cuda_parity.h's, shared with
 * engine_cuda_qwen3.c and engine_cuda.c.
 *
 * Tolerances as tests/unit/engine_cuda_qwen3.c's (its top comment): the
 * calm model's logits within TOL = 2% of the largest logit, and in the
 * GEMV regime at most half the rows more than TOL_GEMV apart (rows after
 * an int8 rounding tip); the sharp preset by greedy tokens (a divergence
 * only at a near-tie, the margin printed) and bit-for-bit invariances.
 */
#include "cuda_parity.h"

#define TOL      0.02
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

/* The synthetic model of a preset (synth's, or calm_oss) in a type,
 * written once per run. */
static const char *model_file(const char *preset, uint32_t type)
{
    static const struct synth_preset *const own[] = {&calm_oss, NULL};
    return parity_model_file("cuda-gptoss", parity_preset(preset, own), type, 5);
}

/* ---- logits against the CPU ---- */

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
    if (!load_pair(model_file(calm_oss.name, type), att, false, &cpu, &gpu))
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
    if (!load_pair(model_file(calm_oss.name, type), MODEL_ATTN_SPLIT, !f32, &cpu, &gpu))
        return;
    int differ = 0;
    const int lens[16] = {12, 40, 90, 9, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20};
    double worst[3] = {0, 0, 0}; /* prefill, decode (gemv), decode of 16 */
    if (!both_regimes(cpu, gpu, NULL, lens, 2, f32 ? N_GEN : 0, N_GEN, worst, &differ))
        goto out;
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

/* Greedy tokens of the two backends agree for N_GREEDY + 1 tokens of 2
 * prompts (9 and 50 tokens, prefills in the GEMV regime; the second runs
 * to position 82, past the first chunk and ever further from its window's
 * start), except after a step where the CPU's top two logits are within
 * 2 TOL (a tie either may break; the margin is printed). */
static void greedy_oss(uint32_t type)
{
    static const int lens[2] = {9, 50};
    greedy(model_file(PRESET, type), PRESET, type, 2, lens, N_GREEDY, 2 * TOL);
}

TEST(gptoss_greedy_matches_cpu)
{
    greedy_oss(Q_F32);
    greedy_oss(Q_MXFP4);
}

/* On CUDA, 4 prompts generated together give the bits of each generated
 * alone, and --decode per-request those of batched (cuda_parity.h's
 * alone_and_per_request): a row's window, routing, expert grouping and
 * sums never depend on the other rows. The prompts (9 to 30 tokens) run
 * past the window. */
TEST(gptoss_alone_equals_together)
{
    static const int lens[4] = {9, 19, 22, 30};
    alone_and_per_request(model_file(PRESET, Q_MXFP4), PRESET, Q_MXFP4, lens, N_GEN);
}

/* ---- expert counters ---- */

/* A decode step of 16 sequences (cuda_parity.h's expert_counters): the
 * counters equal the CPU's, each touched expert counted once per layer
 * batched, k per layer and sequence per-request, k per layer alone. */
TEST(gptoss_expert_counters)
{
    expert_counters(model_file(PRESET, Q_MXFP4));
}

int main(int argc, char **argv)
{
    return cuda_parity_main(argc, argv);
}
