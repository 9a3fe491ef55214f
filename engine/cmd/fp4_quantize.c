/*
 * fp4_quantize: `fp4serve quantize IN.gguf OUT.gguf --type mxfp4|nvfp4
 * [--head q8_0|same] [--mxfp4-search] [--threads N]`: offline
 * requantization (engine/model/quantize.h). Prints one summary line on stdout.
 */
#include <stdio.h>
#include <string.h>

#include "fp4.h"
#include "log.h"
#include "opts.h"
#include "strvec.h"
#include "timeutil.h"

#include "format/quant.h"
#include "model/quantize.h"

static const struct opt_cmd usage = {
    "fp4serve", "quantize", "IN.gguf OUT.gguf --type mxfp4|nvfp4 [options]", NULL, FP_ERR_USAGE};

int fp4_quantize(int argc, char **argv)
{
    const char *type = NULL, *head = "q8_0";
    long threads = 0;
    bool search = false;
    const struct opt opts[] = {
        {"type", 't', OPT_STR, &type, "T",
         "target of the linear weights: mxfp4|nvfp4 (also q8_0|q4_0|q4_1|f16|bf16|f32)"},
        {"head", 0, OPT_STR, &head, "H",
         "embedding/output head: q8_0 (default) or same (the --type)"},
        {"mxfp4-search", 0, OPT_BOOL, &search, NULL,
         "MXFP4: per block, keep the best of scale exponents e-1, e, e+1 (lowest MSE)"},
        {"threads", 0, OPT_LONG, &threads, "N", "threads (default: online cores)", 0, 1024},
    };
    struct err err;
    err_init(&err);
    struct strvec pos;
    strvec_init(&pos);
    int rc = opt_cmd_parse(&usage, opts, OPT_N(opts), argc, argv, &pos, &err);
    if (rc == 1) {
        strvec_release(&pos);
        return FP_OK;
    }
    struct qz_opts qo = {.threads = (int)threads, .mxfp4_search = search};
    const struct qz_type *qt = NULL;
    if (rc == 0 && pos.n != 2)
        err_set(&err, FP_ERR_USAGE, "quantize needs IN.gguf and OUT.gguf (got %zu paths)", pos.n);
    if (!err.code && !type)
        err_set(&err, FP_ERR_USAGE, "quantize needs --type (%s)", qz_type_names());
    if (!err.code && !(qt = qz_type_find(type)))
        err_set(&err, FP_ERR_USAGE, "--type: unknown type '%s' (use %s)", type, qz_type_names());
    if (!err.code && strcmp(head, "same") != 0 && strcmp(head, "q8_0") != 0)
        err_set(&err, FP_ERR_USAGE, "--head: unknown value '%s' (use q8_0 or same)", head);
    if (!err.code && search && qt->type != Q_MXFP4)
        err_set(&err, FP_ERR_USAGE, "--mxfp4-search needs --type mxfp4 (got '%s')", type);
    if (err.code)
        goto out;
    qo.type = qt->type;
    qo.head_same = strcmp(head, "same") == 0;
    if (qo.head_same && qt->type == Q_NVFP4)
        log_warn("--head same with nvfp4: llama.cpp does not load an NVFP4 token_embd (it reads "
                 "no 'token_embd.scale': \"wrong number of tensors\"); fp4serve does");
    struct qz_stats st;
    uint64_t t0 = clock_ns();
    if (qz_quantize_file(pos.v[0], pos.v[1], &qo, &st, &err) != 0)
        goto out;
    if (st.kept_first[0])
        log_warn("kept some weights in their type: columns not a multiple of %s's block (first: "
                 "'%s')",
                 type, st.kept_first);
    printf("%s: %zu tensors, %zu requantized to %s (head %s)%s, %zu scale tensors, %zu weights "
           "kept; %.2f -> %.2f MB; general.file_type %lld; %.1f s\n",
           pos.v[1], st.n_tensors, st.n_requant, qt->name, qo.head_same ? qt->name : "q8_0",
           search ? " with exponent search" : "", st.n_scales, st.n_kept, st.bytes_in / 1e6,
           st.bytes_out / 1e6, (long long)st.file_type, (double)(clock_ns() - t0) / 1e9);
out:
    if (err.code)
        log_error("%s", err.msg);
    strvec_release(&pos);
    return err.code;
}
