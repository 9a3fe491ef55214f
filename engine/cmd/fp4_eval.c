/*
 * fp4_eval: `fp4serve eval --model PATH --text FILE [--quant Q] [--ctx N]`:
 * perplexity of the model (requantized at load when --quant says so) over
 * a text, and against the same file at native precision (or --ref) the
 * mean KL divergence and top-1 agreement (engine/model/eval.h). Prints one summary line,
 * then one JSON object on a line of its own for scripts.
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fileio.h"
#include "fp4.h"
#include "log.h"
#include "opts.h"
#include "timeutil.h"
#include "xalloc.h"

#include "format/quant.h"
#include "model/eval.h"
#include "model/model.h"
#include "text/tokenizer.h"

#define MAX_TEXT_BYTES ((size_t)256 << 20)

/* "native", or the requantized type's name. */
static const char *quant_name(const struct model *m)
{
    return m->opts.quant_set ? q_info((uint32_t)m->opts.quant)->name : "native";
}

static const char *head_name(const struct model *m)
{
    if (!m->opts.quant_set)
        return "native";
    return m->opts.head_same ? quant_name(m) : "q8_0";
}

static void print_result(const char *path, const char *ref_path, const struct model *m, int ctx,
                         const struct ev_result *r, double secs)
{
    bool own = strcmp(path, ref_path) == 0;
    printf("%s: quant %s (head %s), ctx %d: ppl %.4f (%s %.4f, %+.2f%%), mean KL %.6f nats "
           "(max %.4f), top-1 agreement %.2f%%, %lld predictions in %d windows, %.2f MB "
           "weights/step, %.1f s\n",
           path, quant_name(m), head_name(m), ctx, r->ppl, own ? "native" : "reference", r->ref_ppl,
           100.0 * (r->ppl / r->ref_ppl - 1.0), r->kl, r->kl_max, 100.0 * r->top1,
           (long long)r->n_scored, r->n_windows, model_weight_bytes_per_step(m) / 1e6, secs);
    json_t *j =
        json_pack("{s:s, s:s, s:s, s:s, s:i, s:I, s:I, s:i, s:f, s:f, s:f, s:f, s:f, s:f, "
                  "s:f, s:I, s:f}",
                  "model", path, "ref", ref_path, "quant", quant_name(m), "head", head_name(m),
                  "ctx", ctx, "tokens", (json_int_t)r->n_tokens, "scored", (json_int_t)r->n_scored,
                  "windows", r->n_windows, "ppl", r->ppl, "nll", r->nll, "ref_ppl", r->ref_ppl,
                  "ref_nll", r->ref_nll, "kl", r->kl, "kl_max", r->kl_max, "top1", r->top1,
                  "weight_bytes", (json_int_t)model_weight_bytes_per_step(m), "seconds", secs);
    char *s = j ? json_dumps(j, JSON_COMPACT | JSON_REAL_PRECISION(10)) : NULL;
    if (s)
        printf("%s\n", s);
    free(s);
    json_decref(j);
}

static const struct opt_cmd usage = {
    "fp4serve", "eval", "--model PATH --text FILE [--quant Q] [options]",
    "Perplexity over a text in non-overlapping windows, and against the same file\n"
    "at native precision: mean KL(native || quantized) and top-1 agreement.\n"
    "Prints a summary line, then a JSON line.",
    FP_ERR_USAGE};

int fp4_eval(int argc, char **argv)
{
    const char *model_path = NULL, *text_path = NULL, *quant = NULL, *head = NULL;
    const char *ref_path = NULL, *kv = "f16";
    long ctx = 512, threads = 0, chunk = 0, max_tokens = 0;
    const struct opt opts[] = {
        {"model", 'm', OPT_STR, &model_path, "PATH", "GGUF model (required)"},
        {"text", 0, OPT_STR, &text_path, "FILE", "UTF-8 text to score (required)"},
        {"quant", 0, OPT_STR, &quant, "Q",
         "requantize at load: native|q8_0|mxfp4|nvfp4 (default native)"},
        {"head", 0, OPT_STR, &head, "H", "head type when requantizing: q8_0|same (default q8_0)"},
        {"ref", 0, OPT_STR, &ref_path, "PATH",
         "reference model (default: --model at native precision), e.g. the file an offline "
         "quantized model was made from"},
        {"ctx", 0, OPT_LONG, &ctx, "N",
         "window in tokens; windows do not overlap and each starts empty (default 512)", 2,
         1 << 20},
        {"threads", 't', OPT_LONG, &threads, "N", "threads (default: online cores)", 0, 1024},
        {"kv", 0, OPT_STR, &kv, "TYPE",
         "K/V cache type of both models: f16|f32 (default f16; f32 to compare with a "
         "reference that keeps f32 attention)"},
        {"chunk", 0, OPT_LONG, &chunk, "N", "tokens per forward step (default 128)", 0, 1 << 16},
        {"max-tokens", 0, OPT_LONG, &max_tokens, "N", "score only the first N tokens (0 = all)", 0,
         1e12},
    };
    struct err err;
    int rc = opt_cmd_parse(&usage, opts, OPT_N(opts), argc, argv, NULL, &err);
    if (rc == 1)
        return FP_OK;
    struct model *m = NULL, *ref = NULL;
    tok_vocab *vocab = NULL;
    struct buf text;
    buf_init(&text, MAX_TEXT_BYTES);
    int32_t *ids = NULL;
    size_t n_ids = 0, cap_ids = 0;
    if (rc == 0 && (!model_path || !text_path))
        err_set(&err, FP_ERR_USAGE, "eval needs --model PATH and --text FILE (see --help)");
    if (rc == 0 && !err.code && strcmp(kv, "f16") != 0 && strcmp(kv, "f32") != 0)
        err_set(&err, FP_ERR_USAGE, "--kv: unknown type '%s' (expected f16 or f32)", kv);
    if (err.code || file_read_all(text_path, &text, &err, FP_ERR_IO) != 0)
        goto out;
    /* Both models get eval's sizes; only the evaluated one is requantized. */
    struct ev_opts eo = {.ctx = (int)ctx, .chunk = (int)chunk, .bos = -1};
    struct model_opts mo = {.threads = (int)threads, .kv_f32 = strcmp(kv, "f32") == 0}, ro;
    ev_model_opts(&mo, &eo);
    ro = mo;
    if (model_opts_parse(&mo, quant, head, NULL, NULL, &err) != 0)
        goto out;
    uint64_t t0 = clock_ns(); /* the time printed covers loading, tokenizing and scoring */
    if (!(m = model_new(model_path, &mo, &err)) ||
        !(ref = model_new(ref_path ? ref_path : model_path, &ro, &err)))
        goto out;
    if (ref->cfg.n_vocab != m->cfg.n_vocab) {
        err_set(&err, FP_ERR_USAGE, "%s: vocabulary of %d tokens, the model's has %d",
                ref_path ? ref_path : model_path, ref->cfg.n_vocab, m->cfg.n_vocab);
        goto out;
    }
    if (tok_load(&m->file, &vocab, &err) != 0) {
        err_prefix(&err, "%s", model_path);
        goto out;
    }
    if (tok_encode(vocab, text.data ? text.data : "", text.len, false, false, &ids, &n_ids,
                   &cap_ids, &err) != 0) {
        err_prefix(&err, "%s", text_path);
        goto out;
    }
    /* As llama.cpp's perplexity: a model that wants BOS gets one per window. */
    if (tok_add_bos(vocab))
        eo.bos = tok_bos(vocab);
    if (max_tokens > 0 && n_ids > (size_t)max_tokens)
        n_ids = (size_t)max_tokens;
    struct ev_result r;
    if (ev_run(m, ref, ids, (int64_t)n_ids, &eo, &r, &err) != 0) {
        err_prefix(&err, "%s", text_path);
        goto out;
    }
    print_result(model_path, ref_path ? ref_path : model_path, m, eo.ctx, &r,
                 (double)(clock_ns() - t0) / 1e9);
out:
    if (err.code)
        log_error("%s", err.msg);
    model_free(m);
    model_free(ref);
    tok_free(vocab);
    buf_release(&text);
    free(ids);
    return err.code;
}
