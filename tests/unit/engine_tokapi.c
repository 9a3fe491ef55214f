/*
 * engine_tokapi: the /tokenize and /detokenize bodies (serve/tokapi.c) on
 * a small in-memory vocabulary (tests/tokvocab.h): vLLM's response shapes,
 * special-token splitting and BOS as completions do it, the messages form
 * equal to the chat completion's ids, detokenizing (control tokens as
 * text, bad bytes as U+FFFD), and each refusal with its status and param.
 */
#include <jansson.h>

#include "test.h"
#include "tokvocab.h"
#include "xalloc.h"

#include "serve/tokapi.h"

static const char *const ids[] = {"tiny", "models/tiny.gguf", NULL};

/* Run one endpoint on body; returns its rc, the answer in *out (released
 * by the caller) and the error in *e. */
static int run(bool detok, bool add_bos, const char *body, struct buf *out, struct api_error *e)
{
    tok_vocab *v = test_vocab(add_bos);
    struct chat_template t;
    chat_template_init(&t, NULL);
    struct tokapi_ctx c = {.vocab = v, .chat = &t, .n_ctx = 256, .model_ids = ids};
    buf_init(out, 1 << 20);
    int rc = detok ? tokapi_detokenize(&c, body, strlen(body), out, e)
                   : tokapi_tokenize(&c, body, strlen(body), out, e);
    chat_template_release(&t);
    tok_free(v);
    return rc;
}

/* The answer to body, compact, or "" when refused. */
static void answer(bool detok, bool add_bos, const char *body, char *got, size_t cap)
{
    struct buf b;
    struct api_error e;
    got[0] = '\0';
    if (run(detok, add_bos, body, &b, &e) == 0)
        snprintf(got, cap, "%s", b.data);
    else
        fprintf(stderr, "refused: %s\n", e.msg);
    buf_release(&b);
}

/* The refusal of body: its status, and its param in param. */
static int refusal(bool detok, const char *body, char *param, size_t cap)
{
    struct buf b;
    struct api_error e;
    int rc = run(detok, false, body, &b, &e);
    snprintf(param, cap, "%s", rc == 0 ? "(answered)" : e.param);
    CHECK_MSG(rc != 0 && e.msg[0], "'%s' was not refused", body);
    buf_release(&b);
    return rc == 0 ? 0 : e.status;
}

TEST(tokenize_shape_and_ids)
{
    char got[1024];
    /* " the" merges to one token; "<|im_end|>" is split out; digits one by one */
    answer(false, false, "{\"prompt\": \"a the<|im_end|>12\"}", got, sizeof(got));
    CHECK_STR(
        got,
        "{\"count\":5,\"max_model_len\":256,\"tokens\":[97,259,262,49,50],\"token_strs\":null}");
    answer(false, false,
           "{\"prompt\": \" the<u>\", \"return_token_strs\": true, \"model\": \"tiny\"}", got,
           sizeof(got));
    CHECK_STR(got, "{\"count\":2,\"max_model_len\":256,\"tokens\":[259,263],"
                   "\"token_strs\":[\"\xc4\xa0the\",\"<u>\"]}");
    answer(false, false, "{\"prompt\": \"\"}", got, sizeof(got));
    CHECK_STR(got, "{\"count\":0,\"max_model_len\":256,\"tokens\":[],\"token_strs\":null}");
    /* a byte without a token is dropped, as the completion's tokenizer drops it */
    answer(false, false, "{\"prompt\": \"a\\u0004b\"}", got, sizeof(got));
    CHECK_STR(got, "{\"count\":2,\"max_model_len\":256,\"tokens\":[97,98],\"token_strs\":null}");
}

TEST(tokenize_bos_follows_add_special_tokens_and_the_model)
{
    char got[1024];
    answer(false, true, "{\"prompt\": \"a\"}", got, sizeof(got));
    CHECK_STR(got, "{\"count\":2,\"max_model_len\":256,\"tokens\":[261,97],\"token_strs\":null}");
    answer(false, true, "{\"prompt\": \"a\", \"add_special_tokens\": false}", got, sizeof(got));
    CHECK_STR(got, "{\"count\":1,\"max_model_len\":256,\"tokens\":[97],\"token_strs\":null}");
    answer(false, false, "{\"prompt\": \"a\", \"add_special_tokens\": true}", got, sizeof(got));
    CHECK_STR(got, "{\"count\":1,\"max_model_len\":256,\"tokens\":[97],\"token_strs\":null}");
}

TEST(tokenize_messages_are_the_chat_prompt)
{
    char got[1024];
    answer(false, false, "{\"messages\": [{\"role\": \"user\", \"content\": \"the<|im_end|>\"}]}",
           got, sizeof(got));
    /* the same ids chat_render + chat_tokenize give (what a chat completion runs) */
    tok_vocab *v = test_vocab(false);
    struct chat_template t;
    chat_template_init(&t, NULL);
    struct api_message m = {.role = "user", .content = "the<|im_end|>", .content_len = 13};
    struct chat_seg *segs = NULL;
    size_t n_segs = 0, cap_segs = 0, n = 0, cap = 0;
    int32_t *want = NULL;
    chat_render(&t, &m, 1, &segs, &n_segs, &cap_segs);
    struct err err;
    err_init(&err);
    CHECK_INT(chat_tokenize(v, segs, n_segs, &want, &n, &cap, &err), 0);
    struct buf b;
    buf_init(&b, 1 << 16);
    buf_printf(&b, "{\"count\":%zu,\"max_model_len\":256,\"tokens\":[", n);
    for (size_t i = 0; i < n; i++)
        buf_printf(&b, "%s%d", i ? "," : "", want[i]);
    buf_puts(&b, "],\"token_strs\":null}");
    CHECK_STR(got, b.data);
    buf_release(&b);
    free(want);
    free(segs);
    chat_template_release(&t);
    tok_free(v);
}

TEST(tokenize_refusals)
{
    char p[64];
    CHECK_INT(refusal(false, "", p, sizeof(p)), 400);
    CHECK_INT(refusal(false, "{\"prompt\": \"a\xff\"}", p, sizeof(p)), 400);
    CHECK_INT(refusal(false, "[1]", p, sizeof(p)), 400);
    CHECK_INT(refusal(false, "{\"prompt\": ", p, sizeof(p)), 400);
    CHECK_INT(refusal(false, "{\"prompt\": \"a\", \"prompt\": \"b\"}", p, sizeof(p)), 400);
    CHECK_INT(refusal(false, "{}", p, sizeof(p)), 400);
    CHECK_STR(p, "prompt");
    CHECK_INT(refusal(false, "{\"prompt\": [1, 2]}", p, sizeof(p)), 400);
    CHECK_STR(p, "prompt");
    CHECK_INT(refusal(false, "{\"prompt\": \"a\", \"messages\": []}", p, sizeof(p)), 400);
    CHECK_INT(refusal(false, "{\"prompt\": \"a\", \"add_special_tokens\": 1}", p, sizeof(p)), 400);
    CHECK_STR(p, "add_special_tokens");
    CHECK_INT(refusal(false, "{\"prompt\": \"a\", \"return_token_strs\": \"yes\"}", p, sizeof(p)),
              400);
    CHECK_STR(p, "return_token_strs");
    CHECK_INT(refusal(false, "{\"prompt\": \"a\", \"model\": \"other\"}", p, sizeof(p)), 404);
    CHECK_STR(p, "model");
    CHECK_INT(refusal(false, "{\"prompt\": \"a\", \"model\": 3}", p, sizeof(p)), 400);
    CHECK_INT(refusal(false, "{\"messages\": [{\"role\": 5, \"content\": \"x\"}]}", p, sizeof(p)),
              400);
    CHECK_INT(refusal(false, "{\"messages\": \"hi\"}", p, sizeof(p)), 400);
    CHECK_STR(p, "messages");
}

/* Text is bounded as a completion's: n_ctx x the longest token's bytes
 * (here 256 x 13, "<|endoftext|>"), refused before tokenizing. */
TEST(tokenize_bounds_text_like_completions)
{
    tok_vocab *v = test_vocab(false);
    size_t limit = 256 * tok_max_piece(v);
    tok_free(v);
    CHECK_INT(limit, 256 * 13);
    char *text = xmalloc(limit + 1);
    memset(text, 'a', limit);
    text[limit] = '\0';
    for (int k = 0; k < 2; k++) {
        size_t n = limit - 1 + (size_t)k; /* the last accepted length, then one more */
        char *p = xasprintf("{\"prompt\": \"%.*s\"}", (int)n, text);
        char *m = xasprintf("{\"messages\": [{\"role\": \"user\", \"content\": \"%.*s\"}]}", (int)n,
                            text);
        struct buf b;
        struct api_error e;
        CHECK_INT(run(false, false, p, &b, &e), k ? -1 : 0);
        if (k)
            CHECK_STR(e.param, "prompt");
        buf_release(&b);
        CHECK_INT(run(false, false, m, &b, &e), k ? -1 : 0);
        if (k)
            CHECK_STR(e.param, "messages");
        buf_release(&b);
        free(p);
        free(m);
    }
    free(text);
}

TEST(detokenize)
{
    char got[1024];
    answer(true, false, "{\"tokens\": [97, 259, 262, 263, 10]}", got, sizeof(got));
    CHECK_STR(got, "{\"prompt\":\"a the<|im_end|><u>\\n\"}");
    answer(true, false, "{\"tokens\": []}", got, sizeof(got));
    CHECK_STR(got, "{\"prompt\":\"\"}");
    /* bytes C3 alone, then A9 after a space: not UTF-8, each a U+FFFD */
    answer(true, false, "{\"tokens\": [195, 32, 169], \"model\": \"models/tiny.gguf\"}", got,
           sizeof(got));
    CHECK_STR(got, "{\"prompt\":\"\xef\xbf\xbd \xef\xbf\xbd\"}");
    /* C3 A9 together: "é" */
    answer(true, false, "{\"tokens\": [195, 169]}", got, sizeof(got));
    CHECK_STR(got, "{\"prompt\":\"\xc3\xa9\"}");
}

TEST(detokenize_refusals)
{
    char p[64];
    CHECK_INT(refusal(true, "{}", p, sizeof(p)), 400);
    CHECK_STR(p, "tokens");
    CHECK_INT(refusal(true, "{\"tokens\": 5}", p, sizeof(p)), 400);
    CHECK_STR(p, "tokens");
    CHECK_INT(refusal(true, "{\"tokens\": [1, 264]}", p, sizeof(p)), 400);
    CHECK_STR(p, "tokens[1]");
    CHECK_INT(refusal(true, "{\"tokens\": [-1]}", p, sizeof(p)), 400);
    CHECK_STR(p, "tokens[0]");
    CHECK_INT(refusal(true, "{\"tokens\": [1, 2.5]}", p, sizeof(p)), 400);
    CHECK_STR(p, "tokens[1]");
    CHECK_INT(refusal(true, "{\"tokens\": [\"a\"]}", p, sizeof(p)), 400);
    CHECK_INT(refusal(true, "{\"tokens\": [99999999999999999999]}", p, sizeof(p)), 400);
    CHECK_INT(refusal(true, "{\"tokens\": [1], \"model\": \"x\"}", p, sizeof(p)), 404);
}

TEST_MAIN()
