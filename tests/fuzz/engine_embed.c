/*
 * Fuzz target for engine/serve/embed: the bytes are a /v1/embeddings
 * request body, parsed and tokenized over the small vocabulary of
 * tests/tokvocab.h (no model: the job is not run). An accepted request
 * must hold 1 to EMBED_MAX_INPUTS inputs, at least one token each and no
 * more than the context; a refusal must carry status 400 or 404 and a
 * message. Any violation aborts.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "tokvocab.h"

#include "serve/embed.h"

static void die(const char *what)
{
    fprintf(stderr, "engine_embed fuzz: %s\n", what);
    abort();
}

static void no_wake(void *arg)
{
    (void)arg;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static tok_vocab *v;
    static const char *const ids[] = {"tiny", NULL};
    if (!v)
        v = test_vocab(true);
    struct embed_ctx c = {.vocab = v,
                          .model_ids = ids,
                          .model = "tiny",
                          .n_ctx = 64,
                          .n_embd = 8,
                          .chunk = 16,
                          .pooling = EMBED_LAST};
    struct api_error e;
    embed_req *r = embed_new(&c, (const char *)data, size, no_wake, NULL, &e);
    if (!r) {
        if ((e.status != 400 && e.status != 404) || !e.msg[0])
            die("a refusal without status 400/404 or a message");
        return 0;
    }
    long n = embed_tokens(r);
    if (n < 1 || n > (long)EMBED_MAX_INPUTS * c.n_ctx)
        die("an accepted request with no tokens or more than the inputs can hold");
    embed_unref(r); /* the job's reference: it never runs here */
    embed_unref(r);
    return 0;
}
