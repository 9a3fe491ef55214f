/*
 * fp4_bench: `fp4serve bench --model PATH --batch 1,4,16,64`: offline
 * prefill and decode throughput per batch size, no HTTP. For each B it
 * prefills B random prompts of --prompt-len tokens, then runs --gen decode
 * steps of B tokens, and prints llama.cpp batched-bench's table. After the
 * table: step time split by phase, weight bytes read per token, and at B=1
 * the achieved read bandwidth against this machine's measured memcpy and
 * read bandwidth (a probe run before the model loads).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fp4.h"
#include "log.h"
#include "opts.h"
#include "rng.h"
#include "strutil.h"
#include "timeutil.h"
#include "xalloc.h"

#include "cpu/matmul.h"
#include "model/membw.h"
#include "model/model.h"
#include "model/sample.h"
#include "model/threadpool.h"

#define MAX_BATCHES 32
static int parse_batches(const char *s, int *out, int *n, struct err *err)
{
    *n = 0;
    const char *p = s;
    while (*p) {
        char tmp[32];
        size_t len = strcspn(p, ",");
        if (len == 0 || len >= sizeof(tmp) || *n == MAX_BATCHES)
            return err_set(err, FP_ERR_USAGE, "--batch: bad list '%s' (e.g. 1,4,16,64)", s), -1;
        memcpy(tmp, p, len);
        tmp[len] = 0;
        long v;
        if (str_to_long(tmp, &v) != 0 || v < 1 || v > 4096)
            return err_set(err, FP_ERR_USAGE, "--batch: '%s' is not a batch size in [1, 4096]",
                           tmp),
                   -1;
        out[(*n)++] = (int)v;
        p += len;
        if (*p == ',')
            p++;
    }
    if (*n == 0)
        return err_set(err, FP_ERR_USAGE, "--batch: empty list"), -1;
    return 0;
}

struct bench_row {
    int pp, tg, b;
    double t_pp, t_tg;             /* seconds */
    struct model_timers tg_timers; /* summed over the decode steps */
    double tg_wbytes;  /* weight bytes the decode steps read (model_last_weight_bytes) */
    double tg_experts; /* (layer, expert) reads of the decode steps (MoE) */
};

/* One batch size: prefill B prompts (packed into steps of max_rows rows),
 * then tg decode steps. Next tokens are the argmax of each row's logits. */
static int run_one(struct model *m, int B, int pp, int tg, uint64_t seed, int32_t *prompts,
                   int32_t *next, struct model_seq *seqs, struct bench_row *row, struct err *err)
{
    int V = m->cfg.n_vocab;
    uint64_t rng = seed;
    for (int i = 0; i < B * pp; i++)
        prompts[i] =
            (int32_t)(rng_next(&rng) % (uint64_t)(V > 200 ? V - 100 : V)) + (V > 200 ? 100 : 0);
    for (int i = 0; i < m->max_batch; i++)
        model_slot_free(m, i);
    int *done = xcalloc((size_t)B, sizeof(int));
    uint64_t t0 = clock_ns();
    for (int first = 0; first < B;) {
        int n = 0, budget = m->max_rows;
        for (int i = first; i < B && budget > 0; i++) {
            int k = pp - done[i] < budget ? pp - done[i] : budget;
            seqs[n++] =
                (struct model_seq){i,
                                   done[i],
                                   k,
                                   prompts + (size_t)i * pp + done[i],
                                   done[i] + k == pp ? MODEL_LOGITS_LAST : MODEL_LOGITS_NONE,
                                   NULL};
            budget -= k;
        }
        if (model_step(m, seqs, n, err) != 0) {
            free(done);
            return -1;
        }
        for (int j = 0; j < n; j++) {
            done[seqs[j].slot] += seqs[j].n_tokens;
            if (seqs[j].out)
                next[seqs[j].slot] = sample_argmax(seqs[j].out, V);
        }
        while (first < B && done[first] == pp)
            first++;
    }
    uint64_t t1 = clock_ns();
    free(done);
    struct model_timers before = m->total;
    row->tg_wbytes = row->tg_experts = 0;
    for (int step = 0; step < tg; step++) {
        for (int i = 0; i < B; i++)
            seqs[i] = (struct model_seq){i, pp + step, 1, &next[i], MODEL_LOGITS_LAST, NULL};
        if (model_step(m, seqs, B, err) != 0)
            return -1;
        row->tg_wbytes += (double)model_last_weight_bytes(m);
        row->tg_experts += (double)m->last_experts;
        for (int i = 0; i < B; i++)
            next[i] = sample_argmax(seqs[i].out, V);
    }
    uint64_t t2 = clock_ns();
    row->pp = pp;
    row->tg = tg;
    row->b = B;
    row->t_pp = (double)(t1 - t0) / 1e9;
    row->t_tg = (double)(t2 - t1) / 1e9;
    row->tg_timers.attn_ns = m->total.attn_ns - before.attn_ns;
    row->tg_timers.matmul_ns = m->total.matmul_ns - before.matmul_ns;
    row->tg_timers.other_ns = m->total.other_ns - before.other_ns;
    return 0;
}

/* Comma-separated items of s into out[0..*n) (pointers into a copy). */
static char *split_list(const char *s, const char **out, int max, int *n)
{
    char *copy = xstrdup(s), *p = copy;
    *n = 0;
    while (p && *n < max) {
        out[(*n)++] = p;
        p = strchr(p, ',');
        if (p)
            *p++ = 0;
    }
    return copy;
}

/* Everything measured for one --quant value, for the closing summary. */
struct bench_quant {
    const char *name;
    size_t wbytes;
    double s_tg[MAX_BATCHES];
};

/* Load the model with mo, run every batch size, print the table and the
 * phase split. Returns 0, or -1 with err set. */
static int bench_model(const char *path, const struct model_opts *mo, const int *batches, int n_b,
                       long pp, long tg, long seed, double copy_gbs, double read_gbs,
                       struct bench_quant *bq, struct err *err)
{
    struct model *m = model_new(path, mo, err);
    if (!m)
        return -1;
    int max_b = m->max_batch, rc = -1;
    struct bench_row rows[MAX_BATCHES];
    int32_t *prompts = xmalloc(sizeof(int32_t) * (size_t)max_b * (size_t)pp);
    int32_t *next = xcalloc((size_t)max_b, sizeof(int32_t));
    struct model_seq *seqs = xcalloc((size_t)max_b, sizeof(*seqs));
    double bar_ns, run_ns;
    tp_measure(m->pool, 20000, &bar_ns, &run_ns);
    size_t wbytes = model_weight_bytes_per_step(m);
    bool per_req = m->opts.decode == MODEL_DECODE_PER_REQUEST;
    bq->wbytes = wbytes;
    printf("model %s: %s, %d layers, n_embd %d, vocab %d; weights read per step %.2f MB%s\n", path,
           model_arch_name(m->cfg.arch), m->cfg.n_layer, m->cfg.n_embd, m->cfg.n_vocab,
           wbytes / 1e6, m->cfg.n_expert ? " (every expert)" : "");
    if (m->cfg.n_expert)
        printf("experts: %d per layer, %d per token, %.2f MB each\n", m->cfg.n_expert,
               m->cfg.n_expert_used, model_expert_bytes(m, 0, 0) / 1e6);
    printf("roofline: %zu weight bytes per step, %.0f matmul FLOPs per token, %.0f attention "
           "FLOPs per position\n",
           wbytes, model_flops_per_token(m), model_attn_flops_per_position(m));
    if (m->quant_note[0])
        printf("%s\n", m->quant_note);
    printf("n_kv_max = %d, n_threads = %d, decode = %s, attention = %s, kernels = %s\n",
           m->ctx * m->max_batch, tp_threads(m->pool), per_req ? "per-request" : "batched",
           m->opts.attention == MODEL_ATTN_SERIAL ? "serial" : "split", q_kernels_name(m->kern));
    printf("thread pool: %.0f ns per barrier, %.1f us per empty run\n", bar_ns, run_ns / 1e3);
    printf("\n|    PP |     TG |    B |   N_KV |   T_PP s | S_PP t/s |   T_TG s | S_TG t/s |      "
           "T s |    S t/s |\n");
    printf("|-------|--------|------|--------|----------|----------|----------|----------|------"
           "----|----------|\n");
    fflush(stdout);
    for (int i = 0; i < n_b; i++) {
        struct bench_row *r = &rows[i];
        if (run_one(m, batches[i], (int)pp, (int)tg, (uint64_t)seed, prompts, next, seqs, r, err) !=
            0)
            goto out;
        double n_kv = (double)r->b * (r->pp + r->tg), t = r->t_pp + r->t_tg;
        bq->s_tg[i] = r->b * r->tg / r->t_tg;
        printf("| %5d | %6d | %4d | %6.0f | %8.3f | %8.2f | %8.3f | %8.2f | %8.3f | %8.2f |\n",
               r->pp, r->tg, r->b, n_kv, r->t_pp, r->b * r->pp / r->t_pp, r->t_tg, bq->s_tg[i], t,
               n_kv / t);
        fflush(stdout);
    }
    bool moe = m->cfg.n_expert > 0;
    printf("\n%5s %10s %9s %9s %9s %12s %10s%s\n", "B", "step ms", "attn ms", "matmul ms",
           "other ms", "weights/tok", "weight GB/s", moe ? "  experts/step" : "");
    for (int i = 0; i < n_b; i++) {
        struct bench_row *r = &rows[i];
        double steps = r->tg, step_s = r->t_tg / steps;
        double read = r->tg_wbytes / steps; /* bytes a decode step read (per-request: B passes) */
        printf("%5d %10.3f %9.3f %9.3f %9.3f %9.2f MB %10.1f", r->b, step_s * 1e3,
               r->tg_timers.attn_ns / steps / 1e6, r->tg_timers.matmul_ns / steps / 1e6,
               r->tg_timers.other_ns / steps / 1e6, read / r->b / 1e6, read / step_s / 1e9);
        if (moe)
            printf("  %12.1f", r->tg_experts / steps);
        printf("\n");
    }
    for (int i = 0; i < n_b; i++)
        if (rows[i].b == 1 && copy_gbs > 0) {
            double gbs = rows[i].tg_wbytes / rows[i].t_tg / 1e9;
            printf("\nB=1: %.1f tok/s reads %.1f GB/s of weights = %.0f%% of memcpy (%.1f GB/s), "
                   "%.0f%% of read (%.1f GB/s)\n",
                   rows[i].tg / rows[i].t_tg, gbs, 100 * gbs / copy_gbs, copy_gbs,
                   100 * gbs / read_gbs, read_gbs);
            break;
        }
    rc = 0;
out:
    model_free(m);
    free(prompts);
    free(next);
    free(seqs);
    return rc;
}

#define MAX_QUANTS 8

static const struct opt_cmd usage = {
    "fp4serve", "bench", "--model PATH [--batch 1,4,16,64] [options]",
    "Offline prefill and decode throughput per batch size, as llama.cpp's "
    "batched-bench table.",
    FP_ERR_USAGE};

int fp4_bench(int argc, char **argv)
{
    const char *model_path = NULL, *batch_list = "1,4,16,64", *quant = "native", *head = NULL;
    const char *decode = NULL, *attention = NULL, *device = NULL, *isa = NULL;
    long pp = 128, tg = 128, threads = 0, seed = 1234;
    bool no_probe = false;
    const struct opt opts[] = {
        {"model", 'm', OPT_STR, &model_path, "PATH", "GGUF model (required)"},
        {"batch", 'b', OPT_STR, &batch_list, "LIST", "batch sizes (default 1,4,16,64)"},
        {"prompt-len", 0, OPT_LONG, &pp, "N", "prompt tokens per sequence (default 128)", 1,
         1 << 20},
        {"gen", 0, OPT_LONG, &tg, "N", "decode steps (default 128)", 1, 1 << 20},
        {"decode", 0, OPT_STR, &decode, "MODE", "batched|per-request (default batched)"},
        {"attention", 0, OPT_STR, &attention, "MODE", "split|serial (default split)"},
        {"threads", 't', OPT_LONG, &threads, "N", "threads (default: online cores)", 0, 1024},
        {"quant", 0, OPT_STR, &quant, "LIST",
         "requantize at load: native|q8_0|mxfp4|nvfp4; a list (native,mxfp4,nvfp4) runs each "
         "and compares them"},
        {"head", 0, OPT_STR, &head, "H", "head type when requantizing: q8_0|same (default q8_0)"},
        {"device", 0, OPT_STR, &device, "DEV", "cpu|cuda (default cpu)"},
        {"isa", 0, OPT_STR, &isa, "ISA",
         "CPU kernels: auto|avx512|avx2|neon|portable (default auto: the best the CPU has)"},
        {"seed", 0, OPT_LONG, &seed, "N", "seed of the random prompts (default 1234)", 0,
         2147483647},
        {"no-probe", 0, OPT_BOOL, &no_probe, NULL, "skip the memory bandwidth probe"},
    };
    struct err err;
    int rc = opt_cmd_parse(&usage, opts, OPT_N(opts), argc, argv, NULL, &err);
    if (rc == 1)
        return FP_OK;
    int batches[MAX_BATCHES], n_b = 0, max_b = 0, n_q = 0;
    const char *quants[MAX_QUANTS];
    char *qcopy = NULL;
    struct bench_quant bq[MAX_QUANTS];
    memset(bq, 0, sizeof(bq));
    if (rc == 0 && !model_path)
        err_set(&err, FP_ERR_USAGE, "bench needs --model PATH (see --help)");
    if (err.code || parse_batches(batch_list, batches, &n_b, &err) != 0)
        goto out;
    for (int i = 0; i < n_b; i++)
        max_b = batches[i] > max_b ? batches[i] : max_b;
    qcopy = split_list(quant, quants, MAX_QUANTS, &n_q);
    struct model_opts mo[MAX_QUANTS];
    for (int q = 0; q < n_q; q++) {
        mo[q] = (struct model_opts){
            .threads = (int)threads, .max_batch = max_b, .device = device, .isa = isa};
        mo[q].ctx = (int)(pp + tg + 1);
        mo[q].max_step_tokens = max_b > 512 ? max_b : 512;
        if (model_opts_parse(&mo[q], quants[q], head, decode, attention, &err) != 0)
            goto out;
        bq[q].name = quants[q];
    }
    double copy_gbs = 0, read_gbs = 0;
    if (!no_probe) {
        tp_pool *pool = tp_new(mo[0].threads);
        membw_probe(pool, &copy_gbs, &read_gbs);
        printf("memory: memcpy %.1f GB/s (read + write), read %.1f GB/s (%d threads)\n", copy_gbs,
               read_gbs, tp_threads(pool));
        tp_free(pool);
    }
    for (int q = 0; q < n_q; q++) {
        if (n_q > 1)
            printf("\n== --quant %s\n", quants[q]);
        if (bench_model(model_path, &mo[q], batches, n_b, pp, tg, seed, copy_gbs, read_gbs, &bq[q],
                        &err) != 0)
            goto out;
    }
    if (n_q > 1) {
        printf("\n== side by side: decode tok/s (S_TG) and weight bytes per step\n%-8s %12s",
               "quant", "MB/step");
        for (int i = 0; i < n_b; i++)
            printf("   B=%-5d", batches[i]);
        printf("\n");
        for (int q = 0; q < n_q; q++) {
            printf("%-8s %12.2f", bq[q].name, bq[q].wbytes / 1e6);
            for (int i = 0; i < n_b; i++)
                printf(" %9.1f", bq[q].s_tg[i]);
            printf("\n");
        }
    }
out:
    if (err.code)
        log_error("%s", err.msg);
    free(qcopy);
    return err.code;
}
