/*
 * Fuzz target for the model loader: a GGUF that parses is handed to
 * model_from_gguf (hyperparameter checks, tensor binding, requantization
 * is not asked for), and when it loads, one two-sequence step runs on it.
 * Any input must either be refused with a one-line message and a known
 * code or give logits; never a crash or a sanitizer report.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fp4.h"
#include "log.h"

#include "format/gguf.h"
#include "model/model.h"

static volatile float sink;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static int once;
    if (!once) {
        log_setup("fuzz", LOG_ERROR, 0);
        once = 1;
    }
    struct err err;
    err_init(&err);
    struct gguf_file f;
    if (gguf_parse(data, size, &f, &err) != 0)
        return 0;
    struct model_opts o = {.threads = 1, .max_batch = 2, .ctx = 16, .max_step_tokens = 4};
    struct model *m = model_from_gguf(&f, &o, &err);
    if (!m) {
        if (err.code != FP_ERR_FORMAT && err.code != FP_ERR_UNSUPPORTED &&
            err.code != FP_ERR_RESOURCE)
            abort();
        if (strchr(err.msg, '\n'))
            abort();
        return 0;
    }
    int32_t a[2] = {0, m->cfg.n_vocab - 1}, b = m->cfg.n_vocab / 2;
    struct model_seq s[2] = {{0, 0, 2, a, MODEL_LOGITS_LAST, NULL},
                             {1, 0, 1, &b, MODEL_LOGITS_LAST, NULL}};
    if (model_step(m, s, 2, &err) != 0 || !s[0].out || !s[1].out)
        abort();
    sink = s[0].out[0] + s[1].out[m->cfg.n_vocab - 1];
    model_free(m);
    return 0;
}
