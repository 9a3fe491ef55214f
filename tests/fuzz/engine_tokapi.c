/*
 * Fuzz target for engine/serve/tokapi: the first byte picks /tokenize or
 * /detokenize, the rest is the request body, answered over the small
 * vocabulary of tests/tokvocab.h. An answer must be a JSON object of the
 * endpoint's shape (count = the number of tokens, every id in the
 * vocabulary); a refusal must carry status 400 or 404 and a message. Any
 * violation aborts.
 */
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "tokvocab.h"

#include "serve/tokapi.h"

static void die(const char *what)
{
    fprintf(stderr, "engine_tokapi fuzz: %s\n", what);
    abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static tok_vocab *v;
    static struct chat_template t;
    static const char *const ids[] = {"tiny", NULL};
    if (!v) {
        v = test_vocab(true);
        chat_template_init(&t, NULL);
    }
    if (size == 0)
        return 0;
    bool detok = data[0] & 1;
    const char *body = (const char *)data + 1;
    size_t len = size - 1;
    struct tokapi_ctx c = {.vocab = v, .chat = &t, .n_ctx = 256, .model_ids = ids};
    struct buf out;
    struct api_error e;
    buf_init(&out, 1 << 24);
    int rc = detok ? tokapi_detokenize(&c, body, len, &out, &e)
                   : tokapi_tokenize(&c, body, len, &out, &e);
    if (rc != 0) {
        if ((e.status != 400 && e.status != 404) || !e.msg[0])
            die("a refusal without status 400/404 or a message");
        buf_release(&out);
        return 0;
    }
    json_error_t je;
    json_t *j = json_loadb(out.data, out.len, JSON_ALLOW_NUL, &je);
    if (!j || !json_is_object(j))
        die("the answer is not a JSON object");
    if (detok) {
        if (!json_is_string(json_object_get(j, "prompt")))
            die("/detokenize: no prompt string");
    } else {
        json_t *toks = json_object_get(j, "tokens");
        if (!json_is_array(toks) ||
            json_integer_value(json_object_get(j, "count")) != (json_int_t)json_array_size(toks))
            die("/tokenize: count is not the number of tokens");
        for (size_t i = 0; i < json_array_size(toks); i++) {
            json_int_t id = json_integer_value(json_array_get(toks, i));
            if (id < 0 || (size_t)id >= tok_n_vocab(v))
                die("/tokenize: an id outside the vocabulary");
        }
    }
    json_decref(j);
    buf_release(&out);
    return 0;
}
