/*
 * fp4_generate: `fp4serve generate --model PATH --prompt TEXT [-n N]`:
 * greedy generation on the CPU. The text goes to stdout as it is made,
 * then one machine-readable line "ids: 1 2 3" with the generated ids (and
 * "prompt ids:" with the prompt's), which the golden tests read. --logits
 * FILE saves the first step's logits (n_vocab little-endian f32).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fileio.h"
#include "fp4.h"
#include "log.h"
#include "opts.h"
#include "xalloc.h"

#include "model/model.h"
#include "model/sample.h"
#include "text/chat.h"
#include "text/tokenizer.h"

static void print_ids(const char *label, const int32_t *ids, size_t n)
{
    printf("%s:", label);
    for (size_t i = 0; i < n; i++)
        printf(" %d", ids[i]);
    printf("\n");
}

static const struct opt_cmd usage = {
    "fp4serve", "generate", "--model PATH --prompt TEXT [-n N] [options]",
    "Greedy generation; prints the text, then the prompt and generated ids.", FP_ERR_USAGE};

int fp4_generate(int argc, char **argv)
{
    const char *model_path = NULL, *prompt = NULL, *quant = NULL, *head = NULL, *logits_path = NULL;
    const char *device = NULL, *isa = NULL, *attention = NULL, *kv = "f16";
    long n_gen = 32, threads = 0, ctx = 0;
    bool chat = false, ignore_eos = false, no_special = false;
    const struct opt opts[] = {
        {"model", 'm', OPT_STR, &model_path, "PATH", "GGUF model (required)"},
        {"prompt", 'p', OPT_STR, &prompt, "TEXT", "prompt text (required)"},
        {"n", 'n', OPT_LONG, &n_gen, "N", "tokens to generate (default 32)", 0, 1 << 20},
        {"quant", 0, OPT_STR, &quant, "Q",
         "requantize at load: native|q8_0|mxfp4|nvfp4 (default native)"},
        {"head", 0, OPT_STR, &head, "H", "head type when requantizing: q8_0|same (default q8_0)"},
        {"threads", 't', OPT_LONG, &threads, "N", "threads (default: online cores)", 0, 1024},
        {"ctx", 0, OPT_LONG, &ctx, "N", "context positions (default: prompt + n)", 0, 1 << 20},
        {"chat", 0, OPT_BOOL, &chat, NULL, "wrap the prompt in the ChatML template"},
        {"ignore-eos", 0, OPT_BOOL, &ignore_eos, NULL, "do not stop at end-of-generation tokens"},
        {"no-special", 0, OPT_BOOL, &no_special, NULL,
         "tokenize special-token texts as plain text"},
        {"attention", 0, OPT_STR, &attention, "MODE", "split|serial (default split)"},
        {"kv", 0, OPT_STR, &kv, "TYPE", "K/V cache type: f16|f32 (default f16)"},
        {"device", 0, OPT_STR, &device, "DEV", "cpu|cuda (default cpu)"},
        {"isa", 0, OPT_STR, &isa, "ISA",
         "CPU kernels: auto|avx512|avx2|neon|portable (default auto: the best the CPU has)"},
        {"logits", 0, OPT_STR, &logits_path, "FILE", "save the first step's logits (f32 LE)"},
    };
    struct err err;
    int rc = opt_cmd_parse(&usage, opts, OPT_N(opts), argc, argv, NULL, &err);
    if (rc == 1)
        return FP_OK;
    struct model *m = NULL;
    tok_vocab *vocab = NULL;
    int32_t *ids = NULL;
    size_t n_ids = 0, cap_ids = 0;
    if (rc == 0 && (!model_path || !prompt))
        err_set(&err, FP_ERR_USAGE, "generate needs --model PATH and --prompt TEXT (see --help)");
    if (err.code)
        goto out;
    /* Tokenize first (from the file's metadata) so ctx can fit the prompt. */
    struct gguf_file f;
    if (gguf_open(model_path, &f, &err) != 0)
        goto out;
    if (tok_load(&f, &vocab, &err) != 0) {
        gguf_close(&f);
        goto out;
    }
    const char *tmpl = tok_chat_template(vocab);
    if (chat && (!tmpl || !strstr(tmpl, "<|im_start|>"))) {
        gguf_close(&f);
        err_set(&err, FP_ERR_UNSUPPORTED,
                "--chat: the model's chat template is not ChatML (only ChatML is built in)");
        goto out;
    }
    if (chat) {
        /* As the server renders a one-message chat: the template's own
         * default system prompt (if any), the prompt as literal text. */
        struct chat_template ct;
        struct api_message msg = {(char *)"user", (char *)prompt, strlen(prompt)};
        struct chat_seg *segs = NULL;
        size_t n_segs = 0, cap_segs = 0;
        chat_template_init(&ct, tmpl);
        chat_render(&ct, &msg, 1, &segs, &n_segs, &cap_segs);
        rc = chat_tokenize(vocab, segs, n_segs, &ids, &n_ids, &cap_ids, &err);
        free(segs);
        chat_template_release(&ct);
    } else {
        rc = tok_encode(vocab, prompt, strlen(prompt), !no_special, tok_add_bos(vocab), &ids,
                        &n_ids, &cap_ids, &err);
    }
    if (rc != 0) {
        gguf_close(&f);
        goto out;
    }
    if (n_ids == 0) {
        gguf_close(&f);
        err_set(&err, FP_ERR_USAGE, "the prompt has no tokens");
        goto out;
    }
    if (ctx && n_ids > (size_t)ctx) {
        gguf_close(&f);
        err_set(&err, FP_ERR_USAGE, "the prompt has %zu tokens, more than --ctx %ld", n_ids, ctx);
        goto out;
    }
    if (ctx && (long)n_ids + n_gen > ctx) {
        /* the loop below stops once prompt + generated tokens fill ctx */
        long room = ctx - (long)n_ids > 1 ? ctx - (long)n_ids : 1;
        if (room < n_gen)
            log_warn("--ctx %ld leaves room for %ld of the %ld tokens asked (-n)", ctx, room,
                     n_gen);
    }
    struct model_opts mo = {.threads = (int)threads, .max_batch = 1, .device = device, .isa = isa};
    mo.ctx = ctx ? (int)ctx : (int)(n_ids + (size_t)n_gen + 1);
    mo.max_step_tokens = (int)(n_ids < 512 ? n_ids : 512);
    if (strcmp(kv, "f16") != 0 && strcmp(kv, "f32") != 0)
        err_set(&err, FP_ERR_USAGE, "--kv: unknown type '%s' (expected f16 or f32)", kv);
    mo.kv_f32 = strcmp(kv, "f32") == 0;
    if (err.code || model_opts_parse(&mo, quant, head, NULL, attention, &err) != 0) {
        gguf_close(&f);
        goto out;
    }
    m = model_from_gguf(&f, &mo, &err);
    if (!m) {
        err_prefix(&err, "%s", model_path);
        goto out;
    }
    size_t n_prompt = n_ids;
    /* Prefill in chunks of the step's row budget; logits on the last. */
    struct model_seq s = {0};
    for (size_t done = 0; done < n_prompt;) {
        size_t k = n_prompt - done;
        if (k > (size_t)m->max_rows)
            k = (size_t)m->max_rows;
        s = (struct model_seq){.slot = 0,
                               .pos = (int)done,
                               .n_tokens = (int)k,
                               .tokens = ids + done,
                               .logits =
                                   done + k == n_prompt ? MODEL_LOGITS_LAST : MODEL_LOGITS_NONE};
        if (model_step(m, &s, 1, &err) != 0)
            goto out;
        done += k;
    }
    if (logits_path && file_write_atomic(logits_path, s.out, sizeof(float) * (size_t)m->cfg.n_vocab,
                                         &err, FP_ERR_IO) != 0)
        goto out;
    struct tok_stream ts;
    tok_stream_init(&ts);
    char piece[1024];
    for (long i = 0; i < n_gen; i++) {
        int32_t next = sample_argmax(s.out, m->cfg.n_vocab);
        XGROW(ids, cap_ids, n_ids + 1);
        ids[n_ids++] = next;
        if (!ignore_eos && tok_is_eog(vocab, next))
            break;
        size_t len = tok_stream_push(vocab, &ts, next, piece, sizeof(piece));
        fwrite(piece, 1, len, stdout);
        fflush(stdout);
        if (i + 1 == n_gen || (int)n_ids >= m->ctx)
            break;
        s = (struct model_seq){.slot = 0,
                               .pos = (int)n_ids - 1,
                               .n_tokens = 1,
                               .tokens = &ids[n_ids - 1],
                               .logits = MODEL_LOGITS_LAST};
        if (model_step(m, &s, 1, &err) != 0)
            goto out;
    }
    size_t len = tok_stream_flush(&ts, piece, sizeof(piece));
    fwrite(piece, 1, len, stdout);
    printf("\n");
    print_ids("prompt ids", ids, n_prompt);
    print_ids("ids", ids + n_prompt, n_ids - n_prompt);
out:
    if (err.code)
        log_error("%s", err.msg);
    model_free(m);
    tok_free(vocab);
    free(ids);
    return err.code;
}
