/*
 * engine_api: request parsing (every field, every refusal with its status
 * and field name), response bodies (checked by parsing them back with
 * jansson), the ChatML renderer, the stop-string filter and the /metrics
 * text. No model, no sockets.
 */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "test.h"
#include "xalloc.h"

#include "serve/api.h"
#include "serve/prom.h"
#include "text/chat.h"
#include "text/stop.h"

static const char *const ids[] = {"tiny", "models/tiny.gguf", NULL};
static const struct api_limits lim = {.n_vocab = 512, .model_ids = ids};

static int parse(const char *body, enum api_kind kind, struct api_request *r, struct api_error *e)
{
    return api_parse(body, strlen(body), kind, &lim, r, e);
}

TEST(completion_fields)
{
    struct api_request r;
    struct api_error e;
    int rc = parse("{\"model\":\"tiny\",\"prompt\":\"hi there\",\"max_tokens\":7,"
                   "\"temperature\":0.5,\"top_p\":0.9,\"top_k\":40,\"seed\":-3,"
                   "\"stop\":[\"\\n\",\"end\"],\"ignore_eos\":true,\"stream\":true,"
                   "\"stream_options\":{\"include_usage\":true},\"user\":\"x\",\"n\":1,"
                   "\"logprobs\":null,\"echo\":false,\"presence_penalty\":0,\"min_tokens\":0,"
                   "\"include_stop_str_in_output\":false,\"stop_token_ids\":[],"
                   "\"prompt_logprobs\":null}",
                   API_COMPLETION, &r, &e);
    CHECK_INT(rc, 0);
    CHECK_STR(r.model, "tiny");
    CHECK_STR(r.prompts[0].text, "hi there");
    CHECK_INT(r.prompts[0].len, 8);
    CHECK(r.prompts[0].ids == NULL);
    CHECK_INT(r.max_tokens, 7);
    CHECK_NEAR(r.temperature, 0.5, 0);
    CHECK_NEAR(r.top_p, 0.9, 1e-12);
    CHECK_INT(r.top_k, 40);
    CHECK(r.has_seed);
    CHECK(r.seed == (uint64_t)-3);
    CHECK_INT(r.n_stop, 2);
    CHECK_STR(r.stop[0], "\n");
    CHECK_INT(r.stop_len[1], 3);
    CHECK(r.ignore_eos && r.stream && r.include_usage);
    api_request_release(&r);
}

/* max_tokens is kept as sent, whatever its size, with the name it came
 * under, so that the context error can quote both (server.c). */
TEST(max_tokens_kept_as_sent)
{
    struct api_request r;
    struct api_error e;
    CHECK_INT(parse("{\"prompt\":\"x\",\"max_tokens\":1099511627777}", API_COMPLETION, &r, &e), 0);
    CHECK_INT(r.max_tokens, 1099511627777LL);
    CHECK_STR(r.max_tokens_field, "max_tokens");
    api_request_release(&r);
    CHECK_INT(parse("{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],"
                    "\"max_completion_tokens\":9223372036854775807}",
                    API_CHAT, &r, &e),
              0);
    CHECK_INT(r.max_tokens, 9223372036854775807LL);
    CHECK_STR(r.max_tokens_field, "max_completion_tokens");
    api_request_release(&r);
}

TEST(defaults)
{
    struct api_request r;
    struct api_error e;
    CHECK_INT(parse("{\"prompt\":\"x\",\"max_tokens\":null,\"stop\":null}", API_COMPLETION, &r, &e),
              0);
    CHECK_INT(r.max_tokens, -1); /* the rest of the context */
    CHECK_NEAR(r.temperature, 1.0, 0);
    CHECK_NEAR(r.top_p, 1.0, 0);
    CHECK_INT(r.top_k, 0);
    CHECK(!r.has_seed && !r.stream && !r.include_usage && !r.ignore_eos);
    CHECK(r.model == NULL);
    CHECK_INT(r.n_stop, 0);
    api_request_release(&r);
}

TEST(prompt_forms)
{
    struct api_request r;
    struct api_error e;
    CHECK_INT(parse("{\"prompt\":[1,2,511]}", API_COMPLETION, &r, &e), 0);
    CHECK_INT(r.prompts[0].n_ids, 3);
    CHECK_INT(r.prompts[0].ids[2], 511);
    api_request_release(&r);
    CHECK_INT(parse("{\"prompt\":[\"one\"]}", API_COMPLETION, &r, &e), 0);
    CHECK_STR(r.prompts[0].text, "one");
    api_request_release(&r);
    CHECK_INT(parse("{\"prompt\":[[5,6]]}", API_COMPLETION, &r, &e), 0);
    CHECK_INT(r.prompts[0].n_ids, 2);
    api_request_release(&r);
    CHECK_INT(parse("{\"prompt\":\"\"}", API_COMPLETION, &r, &e), 0); /* empty: refused later */
    CHECK_INT(r.prompts[0].len, 0);
    api_request_release(&r);
}

TEST(chat_messages)
{
    struct api_request r;
    struct api_error e;
    int rc =
        parse("{\"messages\":[{\"role\":\"system\",\"content\":\"be brief\"},"
              "{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"a\"},"
              "{\"type\":\"text\",\"text\":\"b\"}]},{\"role\":\"assistant\",\"content\":null}],"
              "\"max_tokens\":3,\"max_completion_tokens\":5}",
              API_CHAT, &r, &e);
    CHECK_INT(rc, 0);
    CHECK_INT(r.n_messages, 3);
    CHECK_STR(r.messages[0].role, "system");
    CHECK_STR(r.messages[1].content, "ab");
    CHECK_INT(r.messages[1].content_len, 2);
    CHECK_STR(r.messages[2].content, "");
    CHECK_INT(r.max_tokens, 5); /* max_completion_tokens wins */
    api_request_release(&r);
}

/* "\u0000" is valid JSON: a prompt, a message, a stop string may hold it,
 * and each keeps its full length (a byte-level vocabulary can emit NUL, and
 * a client may send such text back). */
TEST(nul_in_strings_is_kept)
{
    struct api_request r;
    struct api_error e;
    CHECK_INT(parse("{\"prompt\":\"a\\u0000b\",\"stop\":\"\\u0000z\"}", API_COMPLETION, &r, &e), 0);
    CHECK_INT(r.prompts[0].len, 3);
    CHECK(r.prompts[0].text && memcmp(r.prompts[0].text, "a\0b", 4) == 0);
    CHECK_INT(r.n_stop, 1);
    CHECK_INT(r.stop_len[0], 2);
    CHECK(r.stop && memcmp(r.stop[0], "\0z", 3) == 0);
    api_request_release(&r);
    CHECK_INT(
        parse(
            "{\"model\":\"tiny\",\"messages\":[{\"role\":\"user\",\"content\":\"\\u0000\\u0000\"},"
            "{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"x\\u0000\"}]}]}",
            API_CHAT, &r, &e),
        0);
    CHECK_INT(r.messages[0].content_len, 2);
    CHECK_INT(r.messages[1].content_len, 2);
    api_request_release(&r);
}

/* Refusals: body, endpoint, then the status, field and a piece of the message. */
struct bad {
    const char *body;
    enum api_kind kind;
    int status;
    const char *param;
    const char *msg;
};

static const struct bad bad_cases[] = {
    {"", API_COMPLETION, 400, "", "body is empty"},
    {"{:", API_COMPLETION, 400, "", "malformed JSON at line 1, column 2"},
    {"{\"prompt\":\"x\"", API_COMPLETION, 400, "", "malformed JSON"},
    {"[1,2]", API_COMPLETION, 400, "", "must be a JSON object (got an array)"},
    {"{\"prompt\":\"\xff\"}", API_COMPLETION, 400, "", "not valid UTF-8 (byte 11 of 14)"},
    {"{\"prompt\":\"x\",\"prompt\":\"y\"}", API_COMPLETION, 400, "prompt",
     "duplicate key 'prompt' at line 1, column 22"},
    {"{\"prompt\":\"x\",\"a\\u0000b\":1}", API_COMPLETION, 400, "", "an object key holds \\u0000"},
    /* a lone surrogate is no character: jansson refuses it, and so do we */
    {"{\"prompt\":\"\\ud800\"}", API_COMPLETION, 400, "", "malformed JSON at line 1, column 18"},
    /* numbers past 64 bits or a double: quoted as sent, under their key */
    {"{\"prompt\":\"x\",\"max_tokens\":12345678901234567890}", API_COMPLETION, 400, "max_tokens",
     "'max_tokens' is 12345678901234567890, out of range (an integer must be in [-2^63, 2^63 - 1]) "
     "at line 1, column 47"},
    {"{\"prompt\":\"x\", \"seed\" :  -99999999999999999999}", API_COMPLETION, 400, "seed",
     "'seed' is -99999999999999999999, out of range"},
    {"{\"prompt\":\"x\",\"temperature\":1e999}", API_COMPLETION, 400, "temperature",
     "'temperature' is 1e999, out of range (a number must fit in a double)"},
    {"{\"prompt\":\"x\",\"stop\":[1e999]}", API_COMPLETION, 400, "",
     "the number 1e999 at line 1, column 27 is out of range"},
    /* a value just past a limit is quoted as sent, not rounded onto it */
    {"{\"prompt\":\"x\",\"temperature\":2.0000001}", API_COMPLETION, 400, "temperature",
     "'temperature' is 2.0000001; it must be in [0, 2]"},
    {"{\"prompt\":\"x\",\"top_p\":1.0000000000000002}", API_COMPLETION, 400, "top_p",
     "'top_p' is 1.0000000000000002; it must be in (0, 1]"},
    {"{\"prompt\":\"x\",\"top_k\":2147483648}", API_COMPLETION, 400, "top_k",
     "'top_k' is 2147483648; it must be at most 2147483647 (-1 or 0 = off)"},
    /* NUL-safe comparisons: "\u0000" does not end a string early */
    {"{\"prompt\":\"x\",\"model\":\"tiny\\u0000x\"}", API_COMPLETION, 404, "model",
     "does not exist"},
    {"{\"messages\":[{\"role\":\"user\\u0000x\",\"content\":\"x\"}]}", API_CHAT, 400,
     "messages[0].role", "expected system, user"},
    {"{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"text\\u0000x\",\"text\":\"a\"}]}]"
     "}",
     API_CHAT, 400, "messages[0].content", "is not supported (text only)"},
    {"{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"response_format\":{\"type\":"
     "\"text\\u0000\"}}",
     API_CHAT, 400, "response_format", "not supported"},
    {"{}", API_COMPLETION, 400, "prompt", "'prompt' is missing"},
    {"{\"prompt\":5}", API_COMPLETION, 400, "prompt", "must be a string or an array"},
    {"{\"prompt\":[]}", API_COMPLETION, 400, "prompt", "empty array"},
    {"{\"prompt\":[1,\"a\"]}", API_COMPLETION, 400, "prompt", "'prompt[1]' must be a token id"},
    {"{\"prompt\":[1,512]}", API_COMPLETION, 400, "prompt", "token id 512, outside [0, 512)"},
    {"{\"prompt\":[-1]}", API_COMPLETION, 400, "prompt", "token id -1"},
    {"{\"prompt\":\"x\",\"model\":\"gpt-4\"}", API_COMPLETION, 404, "model",
     "model 'gpt-4' does not exist"},
    {"{\"prompt\":\"x\",\"model\":7}", API_COMPLETION, 400, "model", "must be a string"},
    {"{\"prompt\":\"x\",\"max_tokens\":\"x\"}", API_COMPLETION, 400, "max_tokens",
     "'max_tokens' must be an integer (got a string)"},
    {"{\"prompt\":\"x\",\"max_tokens\":0}", API_COMPLETION, 400, "max_tokens",
     "is 0; it must be at least 1"},
    {"{\"prompt\":\"x\",\"max_tokens\":-5}", API_COMPLETION, 400, "max_tokens", "is -5"},
    {"{\"prompt\":\"x\",\"max_tokens\":2.5}", API_COMPLETION, 400, "max_tokens",
     "must be an integer (got a number)"},
    {"{\"prompt\":\"x\",\"temperature\":-1}", API_COMPLETION, 400, "temperature",
     "must be in [0, 2]"},
    {"{\"prompt\":\"x\",\"temperature\":\"hot\"}", API_COMPLETION, 400, "temperature",
     "must be a number"},
    {"{\"prompt\":\"x\",\"top_p\":0}", API_COMPLETION, 400, "top_p", "must be in (0, 1]"},
    {"{\"prompt\":\"x\",\"top_k\":-2}", API_COMPLETION, 400, "top_k", "is -2"},
    {"{\"prompt\":\"x\",\"seed\":1.5}", API_COMPLETION, 400, "seed", "must be an integer"},
    {"{\"prompt\":\"x\",\"stop\":3}", API_COMPLETION, 400, "stop", "string or an array"},
    {"{\"prompt\":\"x\",\"stop\":[\"a\",4]}", API_COMPLETION, 400, "stop", "'stop[1]'"},
    {"{\"prompt\":\"x\",\"stop\":\"\"}", API_COMPLETION, 400, "stop", "empty string"},
    {"{\"prompt\":\"x\",\"stop\":[\"1\",\"2\",\"3\",\"4\",\"5\",\"6\",\"7\",\"8\",\"9\",\"10\","
     "\"11\",\"12\",\"13\",\"14\",\"15\",\"16\",\"17\"]}",
     API_COMPLETION, 400, "stop", "holds 17 strings (at most 16)"},
    {"{\"prompt\":\"x\",\"stream\":\"yes\"}", API_COMPLETION, 400, "stream", "must be a boolean"},
    {"{\"prompt\":\"x\",\"ignore_eos\":1}", API_COMPLETION, 400, "ignore_eos", "must be a boolean"},
    {"{\"prompt\":\"x\",\"stream_options\":[]}", API_COMPLETION, 400, "stream_options",
     "must be an object"},
    {"{\"prompt\":\"x\",\"stream_options\":{\"include_usage\":\"y\"}}", API_COMPLETION, 400,
     "stream_options.include_usage", "must be a boolean"},
    /* n, logprobs, echo, min_p and the penalties are read: out of range is refused */
    {"{\"prompt\":\"x\",\"n\":0}", API_COMPLETION, 400, "n", "'n' is 0; it must be in [1, 128]"},
    {"{\"prompt\":\"x\",\"n\":1.5}", API_COMPLETION, 400, "n", "must be an integer"},
    {"{\"prompt\":[\"a\",\"b\",\"c\",\"d\",\"e\",\"f\",\"g\",\"h\",\"i\"],\"n\":128}",
     API_COMPLETION, 400, "n", "make 1152 choices (at most 1024)"},
    {"{\"prompt\":\"x\",\"logprobs\":21}", API_COMPLETION, 400, "logprobs", "in [0, 20]"},
    {"{\"prompt\":\"x\",\"logprobs\":true}", API_COMPLETION, 400, "logprobs", "must be an integer"},
    {"{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"logprobs\":1}", API_CHAT, 400,
     "logprobs", "must be a boolean"},
    {"{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"top_logprobs\":3}", API_CHAT, 400,
     "top_logprobs", "needs 'logprobs': true"},
    {"{\"prompt\":\"x\",\"top_logprobs\":3}", API_COMPLETION, 400, "top_logprobs",
     "give the count in 'logprobs'"},
    {"{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"echo\":true}", API_CHAT, 400, "echo",
     "not supported on chat"},
    {"{\"prompt\":\"x\",\"echo\":1}", API_COMPLETION, 400, "echo", "must be a boolean"},
    {"{\"prompt\":\"x\",\"max_tokens\":0}", API_COMPLETION, 400, "max_tokens", "0 only with echo"},
    {"{\"prompt\":\"x\",\"frequency_penalty\":2.5}", API_COMPLETION, 400, "frequency_penalty",
     "must be in [-2, 2]"},
    {"{\"prompt\":\"x\",\"presence_penalty\":-3}", API_COMPLETION, 400, "presence_penalty",
     "must be in [-2, 2]"},
    {"{\"prompt\":\"x\",\"repetition_penalty\":0}", API_COMPLETION, 400, "repetition_penalty",
     "must be in (0, 100]"},
    {"{\"prompt\":\"x\",\"min_p\":1.5}", API_COMPLETION, 400, "min_p", "must be in [0, 1]"},
    {"{\"prompt\":[\"a\",3]}", API_COMPLETION, 400, "prompt", "'prompt[1]' must be a string"},
    {"{\"prompt\":[[1,2],[]]}", API_COMPLETION, 400, "prompt", "'prompt[1]' is an empty array"},
    {"{\"prompt\":\"x\",\"best_of\":3}", API_COMPLETION, 400, "best_of", "not supported"},
    /* vLLM's sampling extensions change the answer as much as OpenAI's fields do */
    {"{\"prompt\":\"x\",\"min_tokens\":16}", API_COMPLETION, 400, "min_tokens", "not supported"},
    {"{\"prompt\":\"x\",\"include_stop_str_in_output\":true}", API_COMPLETION, 400,
     "include_stop_str_in_output", "not supported"},
    {"{\"prompt\":\"x\",\"stop_token_ids\":[13]}", API_COMPLETION, 400, "stop_token_ids",
     "not supported"},
    {"{\"prompt\":\"x\",\"prompt_logprobs\":0}", API_COMPLETION, 400, "prompt_logprobs",
     "not supported"},
    {"{\"messages\":{}}", API_CHAT, 400, "messages",
     "must be an array of messages (got an object)"},
    {"{\"messages\":[]}", API_CHAT, 400, "messages", "is empty"},
    {"{\"prompt\":\"x\"}", API_CHAT, 400, "messages", "'messages' is missing"},
    {"{\"messages\":[3]}", API_CHAT, 400, "messages[0]", "must be an object"},
    {"{\"messages\":[{\"content\":\"x\"}]}", API_CHAT, 400, "messages[0].role", "must be a string"},
    {"{\"messages\":[{\"role\":\"robot\",\"content\":\"x\"}]}", API_CHAT, 400, "messages[0].role",
     "'robot'"},
    {"{\"messages\":[{\"role\":\"user\",\"content\":5}]}", API_CHAT, 400, "messages[0].content",
     "must be a string or an array of text parts"},
    {"{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"image_url\"}]}]}", API_CHAT, 400,
     "messages[0].content", "'image_url' is not supported"},
    {"{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"max_completion_tokens\":0}", API_CHAT,
     400, "max_completion_tokens", "at least 1"},
    {"{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"tools\":[{}]}", API_CHAT, 400,
     "tools", "not supported"},
};

TEST(refusals)
{
    for (size_t i = 0; i < sizeof(bad_cases) / sizeof(bad_cases[0]); i++) {
        const struct bad *b = &bad_cases[i];
        struct api_request r;
        struct api_error e;
        int rc = parse(b->body, b->kind, &r, &e);
        CHECK_MSG(rc == -1, "case %zu (%s): accepted", i, b->body);
        CHECK_MSG(e.status == b->status, "case %zu: status %d, want %d", i, e.status, b->status);
        CHECK_MSG(strcmp(e.param, b->param) == 0, "case %zu: param '%s', want '%s'", i, e.param,
                  b->param);
        CHECK_MSG(strstr(e.msg, b->msg) != NULL, "case %zu: message '%s' lacks '%s'", i, e.msg,
                  b->msg);
        CHECK_MSG(strcmp(e.type, b->status == 404 ? "not_found_error" : "invalid_request_error") ==
                      0,
                  "case %zu: type %s", i, e.type);
        CHECK_MSG(r.prompts == NULL && r.messages == NULL && r.stop == NULL,
                  "case %zu: refused request still holds memory", i);
    }
}

/* Every field the server refuses is refused by name when given anything
 * but its default (a string is no field's default), on both endpoints. */
TEST(every_refused_field_is_named)
{
    const char *what, *name;
    size_t n = 0;
    for (size_t i = 0; (name = api_field(i, &what)) != NULL; i++) {
        if (strncmp(what, "refused", 7) != 0)
            continue;
        n++;
        char body[256], msg[128];
        snprintf(body, sizeof(body),
                 "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"%s\":\"x\"}", name);
        snprintf(msg, sizeof(msg), "'%s' is not supported by this server (only ", name);
        struct api_request r;
        struct api_error e;
        CHECK_MSG(parse(body, API_CHAT, &r, &e) == -1, "%s: accepted", name);
        CHECK_MSG(strcmp(e.param, name) == 0, "%s: param '%s'", name, e.param);
        CHECK_MSG(strstr(e.msg, msg) != NULL, "%s: message '%s'", name, e.msg);
        snprintf(body, sizeof(body), "{\"prompt\":\"x\",\"%s\":\"x\"}", name);
        CHECK_MSG(parse(body, API_COMPLETION, &r, &e) == -1, "%s: accepted by completions", name);
    }
    CHECK_MSG(n >= 60, "only %zu refused fields", n);
}

/* The values that change the answer, and their defaults, which pass. */
TEST(refused_values_and_defaults)
{
    static const char *const bad[] = {
        "\"typical_p\":0.5",
        "\"tool_choice\":\"required\"",
        "\"tool_choice\":{\"type\":\"function\",\"function\":{\"name\":\"f\"}}",
        "\"use_beam_search\":true",
        "\"guided_choice\":[\"a\"]",
        "\"skip_special_tokens\":true",
        "\"reasoning_effort\":\"low\"",
        "\"top_n_sigma\":1",
        "\"modalities\":[\"text\",\"audio\"]",
        "\"return_tokens_as_token_ids\":true"};
    static const char *const good[] = {"\"typical_p\":1",
                                       "\"tool_choice\":\"none\"",
                                       "\"tool_choice\":\"auto\"",
                                       "\"function_call\":null",
                                       "\"skip_special_tokens\":false",
                                       "\"add_generation_prompt\":true",
                                       "\"top_n_sigma\":-1",
                                       "\"modalities\":[\"text\"]",
                                       "\"length_penalty\":1.0",
                                       "\"guided_json\":null",
                                       "\"bad_words\":[]",
                                       "\"use_beam_search\":false",
                                       "\"return_tokens_as_token_ids\":false"};
    char body[256];
    struct api_request r;
    struct api_error e;
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        snprintf(body, sizeof(body), "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],%s}",
                 bad[i]);
        CHECK_MSG(parse(body, API_CHAT, &r, &e) == -1 && strstr(e.msg, "is not supported"),
                  "%s: accepted (%s)", bad[i], e.msg);
    }
    for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
        snprintf(body, sizeof(body), "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],%s}",
                 good[i]);
        CHECK_MSG(parse(body, API_CHAT, &r, &e) == 0, "%s: refused: %s", good[i], e.msg);
        CHECK_MSG(r.ignored[0] == '\0', "%s: listed as ignored: %s", good[i], r.ignored);
        api_request_release(&r);
    }
}

/* vLLM's continuous_usage_stats (GuideLLM sends it on every request) is
 * read as a boolean beside include_usage; the scheduler applies it only
 * with include_usage, as vLLM. */
TEST(continuous_usage_stats_is_read)
{
    struct api_request r;
    struct api_error e;
    CHECK_INT(parse("{\"prompt\":\"x\",\"stream\":true,\"stream_options\":{\"include_usage\":true,"
                    "\"continuous_usage_stats\":true}}",
                    API_COMPLETION, &r, &e),
              0);
    CHECK(r.include_usage && r.cont_usage);
    api_request_release(&r);
    CHECK_INT(parse("{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"stream_options\":{"
                    "\"continuous_usage_stats\":false,\"include_usage\":null}}",
                    API_CHAT, &r, &e),
              0);
    CHECK(!r.include_usage && !r.cont_usage);
    api_request_release(&r);
    CHECK_INT(parse("{\"prompt\":\"x\",\"stream_options\":{\"continuous_usage_stats\":1}}",
                    API_COMPLETION, &r, &e),
              -1);
    CHECK_STR(e.param, "stream_options.continuous_usage_stats");
}

/* Harmless fields pass quietly; unknown ones pass too, but are named. */
TEST(unknown_fields_are_ignored_and_named)
{
    struct api_request r;
    struct api_error e;
    CHECK_INT(parse("{\"prompt\":\"x\",\"user\":\"u\",\"metadata\":{\"a\":\"b\"},\"store\":false,"
                    "\"priority\":3,\"frobnicate\":1,\"zz\":null}",
                    API_COMPLETION, &r, &e),
              0);
    CHECK_STR(r.ignored, "'frobnicate', 'zz'");
    api_request_release(&r);
    char body[4096];
    size_t n = (size_t)snprintf(body, sizeof(body), "{\"prompt\":\"x\"");
    for (int i = 0; i < 60; i++)
        n += (size_t)snprintf(body + n, sizeof(body) - n, ",\"unknown_field_%02d\":1", i);
    snprintf(body + n, sizeof(body) - n, "}");
    CHECK_INT(parse(body, API_COMPLETION, &r, &e), 0);
    size_t len = strlen(r.ignored);
    CHECK_MSG(len < sizeof(r.ignored) && len > 3 && strcmp(r.ignored + len - 3, "...") == 0,
              "ignored list not cut with '...': %s", r.ignored);
    api_request_release(&r);
}

/* response_format: text and json_object; json_schema only for a schema of
 * any object; every other keyword and type refused naming it. */
TEST(response_format_json_mode)
{
    const char *ok[][2] = {
        {"{\"type\":\"text\"}", "0"},
        {"{\"type\":\"json_object\"}", "1"},
        {"{\"type\":\"json_schema\",\"json_schema\":{\"name\":\"n\",\"strict\":true,"
         "\"schema\":{\"type\":\"object\",\"title\":\"t\",\"additionalProperties\":true}}}",
         "1"},
    };
    const char *bad[][2] = {
        {"{\"type\":\"regex\"}", "response_format"},
        {"\"json_object\"", "response_format"},
        {"{\"type\":\"json_schema\"}", "response_format.json_schema.schema"},
        {"{\"type\":\"json_schema\",\"json_schema\":{\"schema\":{\"type\":\"object\","
         "\"properties\":{\"a\":{}}}}}",
         "response_format.json_schema.schema.properties"},
        {"{\"type\":\"json_schema\",\"json_schema\":{\"schema\":{\"type\":\"array\"}}}",
         "response_format.json_schema.schema.type"},
        {"{\"type\":\"json_schema\",\"json_schema\":{\"schema\":{\"type\":\"object\","
         "\"additionalProperties\":false}}}",
         "response_format.json_schema.schema.additionalProperties"},
        {"{\"type\":\"json_schema\",\"json_schema\":{\"schema\":{}}}",
         "response_format.json_schema.schema.type"},
    };
    struct api_limits lim = {.n_vocab = 100};
    for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
        char *body = xasprintf("{\"prompt\":\"x\",\"response_format\":%s}", ok[i][0]);
        struct api_request r;
        struct api_error e;
        CHECK_MSG(api_parse(body, strlen(body), API_COMPLETION, &lim, &r, &e) == 0, "%s: %s",
                  ok[i][0], e.msg);
        if (!e.status) {
            CHECK_INT(r.json, ok[i][1][0] == '1');
            api_request_release(&r);
        }
        free(body);
    }
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char *body = xasprintf("{\"prompt\":\"x\",\"response_format\":%s}", bad[i][0]);
        struct api_request r;
        struct api_error e;
        CHECK_MSG(api_parse(body, strlen(body), API_COMPLETION, &lim, &r, &e) != 0, "accepted: %s",
                  bad[i][0]);
        CHECK_INT(e.status, 400);
        CHECK_STR(e.param, bad[i][1]);
        free(body);
    }
}

/* engine/README.md's field table is this server's: one row per field,
 * "| `name` | what |", in the parser's order. */
TEST(readme_field_table_matches)
{
    FILE *f = fopen("engine/README.md", "r");
    CHECK_MSG(f != NULL, "engine/README.md: cannot open (run from the repository root)");
    if (!f)
        return;
    static char text[1 << 17];
    size_t len = fread(text, 1, sizeof(text) - 1, f);
    text[len] = '\0';
    fclose(f);
    const char *what, *name, *at = text;
    for (size_t i = 0; (name = api_field(i, &what)) != NULL; i++) {
        char row[192];
        snprintf(row, sizeof(row), "| `%s` | %s |\n", name, what);
        const char *p = strstr(at, row);
        CHECK_MSG(p != NULL, "engine/README.md lacks (in order) the row: %.*s",
                  (int)strlen(row) - 1, row);
        if (p)
            at = p + strlen(row);
    }
}

/* ---- responses parse back as the JSON they claim to be ---- */

static json_t *load_event(const char *s, size_t n, const char **rest)
{
    CHECK_MSG(n > 8 && strncmp(s, "data: ", 6) == 0, "event does not start with 'data: '");
    const char *end = strstr(s, "\n\n");
    CHECK_MSG(end != NULL, "event not terminated by a blank line");
    if (!end)
        return NULL;
    *rest = end + 2;
    json_error_t je;
    json_t *j = json_loadb(s + 6, (size_t)(end - s - 6), 0, &je);
    CHECK_MSG(j != NULL, "event is not JSON: %s", je.text);
    return j;
}

TEST(stream_chunks)
{
    struct buf b;
    buf_init(&b, 1 << 16);
    struct api_resp rp = {.kind = API_COMPLETION, .id = "cmpl-1", .created = 5, .model = "m"};
    CHECK_INT(api_sse_chunk(&b, &rp, "he\"llo\n", 7, false, NULL), 0);
    CHECK_INT(api_sse_chunk(&b, &rp, "", 0, false, "length"), 0);
    CHECK_INT(api_sse_usage(&b, &rp, 3, 2, 1), 0);
    CHECK_INT(api_sse_done(&b), 0);
    const char *p = b.data, *rest;
    json_t *j = load_event(p, b.len, &rest);
    CHECK_STR(json_string_value(json_object_get(j, "object")), "text_completion");
    json_t *c0 = json_array_get(json_object_get(j, "choices"), 0);
    CHECK_STR(json_string_value(json_object_get(c0, "text")), "he\"llo\n");
    CHECK(json_is_null(json_object_get(c0, "finish_reason")));
    json_decref(j);
    j = load_event(rest, strlen(rest), &rest);
    c0 = json_array_get(json_object_get(j, "choices"), 0);
    CHECK_STR(json_string_value(json_object_get(c0, "finish_reason")), "length");
    json_decref(j);
    j = load_event(rest, strlen(rest), &rest);
    CHECK_INT(json_array_size(json_object_get(j, "choices")), 0);
    CHECK(json_is_array(json_object_get(j, "choices")));
    json_t *u = json_object_get(j, "usage");
    CHECK_INT(json_integer_value(json_object_get(u, "prompt_tokens")), 3);
    CHECK_INT(json_integer_value(json_object_get(u, "completion_tokens")), 2);
    CHECK_INT(json_integer_value(
                  json_object_get(json_object_get(u, "prompt_tokens_details"), "cached_tokens")),
              1);
    CHECK_INT(json_integer_value(json_object_get(u, "total_tokens")), 5);
    json_decref(j);
    CHECK_STR(rest, "data: [DONE]\n\n");
    buf_release(&b);
}

/* Text holding NUL bytes leaves escaped, and parses back to the same bytes. */
TEST(nul_text_is_streamed_escaped)
{
    struct buf b;
    buf_init(&b, 1 << 16);
    struct api_resp rp = {.kind = API_CHAT, .id = "chatcmpl-1", .created = 5, .model = "m"};
    CHECK_INT(api_sse_chunk(&b, &rp, "a\0b", 3, true, NULL), 0);
    CHECK(strstr(b.data, "\"content\":\"a\\u0000b\"") != NULL);
    json_error_t je;
    json_t *j = json_loadb(b.data + 6, b.len - 8, JSON_ALLOW_NUL, &je);
    json_t *c = json_object_get(
        json_object_get(json_array_get(json_object_get(j, "choices"), 0), "delta"), "content");
    CHECK(json_is_string(c) && json_string_length(c) == 3 &&
          memcmp(json_string_value(c), "a\0b", 3) == 0);
    json_decref(j);
    buf_release(&b);
}

TEST(chat_chunks_and_final)
{
    struct buf b;
    buf_init(&b, 1 << 16);
    struct api_resp rp = {.kind = API_CHAT, .id = "chatcmpl-1", .created = 5, .model = "m"};
    api_sse_chunk(&b, &rp, "Hi", 2, true, NULL);
    const char *rest;
    json_t *j = load_event(b.data, b.len, &rest);
    CHECK_STR(json_string_value(json_object_get(j, "object")), "chat.completion.chunk");
    json_t *d = json_object_get(json_array_get(json_object_get(j, "choices"), 0), "delta");
    CHECK_STR(json_string_value(json_object_get(d, "role")), "assistant");
    CHECK_STR(json_string_value(json_object_get(d, "content")), "Hi");
    json_decref(j);
    buf_reset(&b);
    api_sse_chunk(&b, &rp, "", 0, false, "stop"); /* the end: an empty delta */
    j = load_event(b.data, b.len, &rest);
    d = json_object_get(json_array_get(json_object_get(j, "choices"), 0), "delta");
    CHECK_INT(json_object_size(d), 0);
    json_decref(j);
    buf_reset(&b);
    CHECK_INT(api_final_json(&b, &rp, "ok", 2, "stop", 10, 1), 0);
    json_error_t je;
    j = json_loadb(b.data, b.len, 0, &je);
    CHECK(j != NULL);
    CHECK_STR(json_string_value(json_object_get(j, "object")), "chat.completion");
    json_t *m = json_object_get(json_array_get(json_object_get(j, "choices"), 0), "message");
    CHECK_STR(json_string_value(json_object_get(m, "content")), "ok");
    CHECK_INT(json_integer_value(json_object_get(json_object_get(j, "usage"), "total_tokens")), 11);
    json_decref(j);
    buf_release(&b);
}

TEST(error_body_and_cap)
{
    struct api_error e = {0};
    api_error_set(&e, 400, "invalid_request_error", "max_tokens", "bad %s", "\"thing\"");
    api_error_set(&e, 500, "server_error", NULL, "later errors lose");
    struct buf b;
    buf_init(&b, 4096);
    api_error_json(&b, &e);
    json_t *j = json_loadb(b.data, b.len, 0, NULL);
    json_t *o = json_object_get(j, "error");
    CHECK(json_is_null(json_object_get(o, "code"))); /* OpenAI's codes are strings or null */
    CHECK_STR(json_string_value(json_object_get(o, "type")), "invalid_request_error");
    CHECK_STR(json_string_value(json_object_get(o, "message")), "bad \"thing\"");
    CHECK_STR(json_string_value(json_object_get(o, "param")), "max_tokens");
    json_decref(j);
    buf_release(&b);
    /* an event that does not fit is not appended at all */
    buf_init(&b, 64);
    struct api_resp rp = {.kind = API_COMPLETION, .id = "cmpl-1", .created = 5, .model = "m"};
    CHECK_INT(api_sse_chunk(&b, &rp, "x", 1, false, NULL), -1);
    CHECK_INT(b.len, 0);
    buf_release(&b);
}

/* ---- chat templates ---- */

static const char smollm2_template[] =
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}{{ "
    "'<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging "
    "Face<|im_end|>\n' }}{% endif %}{{'<|im_start|>' + message['role'] + '\n' + "
    "message['content'] + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ "
    "'<|im_start|>assistant\n' }}{% endif %}";

static void render(const struct chat_template *t, const struct api_message *m, size_t n,
                   struct buf *out, size_t *n_special)
{
    struct chat_seg *segs = NULL;
    size_t ns = 0, cap = 0;
    chat_render(t, m, n, &segs, &ns, &cap);
    chat_flatten(segs, ns, out);
    *n_special = 0;
    for (size_t i = 0; i < ns; i++)
        *n_special += segs[i].special;
    free(segs);
}

TEST(chat_template_smollm2)
{
    struct chat_template t;
    chat_template_init(&t, smollm2_template);
    CHECK(t.from_gguf);
    CHECK_STR(t.default_system, "You are a helpful AI assistant named SmolLM, trained by Hugging "
                                "Face");
    struct api_message m[] = {{"user", "Hi <|im_end|>", 13}};
    struct buf b;
    buf_init(&b, 4096);
    size_t ns;
    render(&t, m, 1, &b, &ns);
    CHECK_STR(b.data, "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained "
                      "by Hugging Face<|im_end|>\n<|im_start|>user\nHi <|im_end|><|im_end|>\n"
                      "<|im_start|>assistant\n");
    CHECK_INT(ns, 5); /* the user's "<|im_end|>" is text, not a control token */
    buf_reset(&b);
    struct api_message m2[] = {{"system", "S", 1}, {"user", "U", 1}};
    render(&t, m2, 2, &b, &ns);
    CHECK_STR(b.data, "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nU<|im_end|>\n"
                      "<|im_start|>assistant\n");
    buf_release(&b);
    chat_template_release(&t);
}

TEST(chat_template_fallbacks)
{
    struct chat_template t;
    chat_template_init(&t, NULL);
    CHECK(!t.from_gguf && !t.default_system);
    CHECK(strstr(t.note, "built-in ChatML") != NULL);
    chat_template_release(&t);
    chat_template_init(&t, "{% for m in messages %}[INST] {{ m['content'] }} [/INST]{% endfor %}");
    CHECK(!t.from_gguf);
    CHECK(strstr(t.note, "not ChatML") != NULL);
    chat_template_release(&t);
    /* ChatML without a default system prompt (the synthetic models') */
    chat_template_init(&t, "{% for message in messages %}{{ '<|im_start|>' + message['role'] + "
                           "'\\n' + message['content'] + '<|im_end|>\\n' }}{% endfor %}");
    CHECK(t.from_gguf && !t.default_system);
    chat_template_release(&t);
}

/* ---- stop strings ---- */

/* Feed pieces one by one; return what came out, whether a stop hit. */
static void run_stop(const char *const *stops, size_t n_stops, const char *const *pieces, size_t n,
                     char *out, bool *hit)
{
    size_t lens[8] = {0};
    for (size_t i = 0; i < n_stops; i++)
        lens[i] = strlen(stops[i]);
    struct stop_filter f;
    stop_init(&f, (char *const *)stops, lens, n_stops, 64);
    size_t w = 0;
    char tmp[256];
    *hit = false;
    for (size_t i = 0; i < n && !*hit; i++) {
        size_t k = stop_push(&f, pieces[i], strlen(pieces[i]), tmp, sizeof(tmp), hit);
        memcpy(out + w, tmp, k);
        w += k;
    }
    if (!*hit)
        w += stop_flush(&f, out + w, 256);
    out[w] = '\0';
    stop_release(&f);
}

TEST(stop_strings)
{
    char space[512], *out = space;
    bool hit;
    const char *s1[] = {"END"};
    const char *p1[] = {"hello E", "N", "D world"};
    run_stop(s1, 1, p1, 3, out, &hit);
    CHECK(hit);
    CHECK_STR(out, "hello "); /* split across three pieces; the stop string is not sent */
    const char *p2[] = {"hello E", "N", "d"};
    run_stop(s1, 1, p2, 3, out, &hit);
    CHECK(!hit);
    CHECK_STR(out, "hello ENd"); /* held back, then released at the end */
    const char *s3[] = {"ab", "b"};
    const char *p3[] = {"xa", "b"};
    run_stop(s3, 2, p3, 2, out, &hit);
    CHECK(hit);
    CHECK_STR(out, "x"); /* the earliest match wins */
    const char *s4[] = {"\xc3\xa9t\xc3\xa9"};
    const char *p4[] = {"caf\xc3\xa9", " \xc3\xa9t\xc3\xa9!"};
    run_stop(s4, 1, p4, 2, out, &hit);
    CHECK(hit);
    CHECK_STR(out, "caf\xc3\xa9 ");
    const char *p5[] = {"a", "b", "c"};
    run_stop(NULL, 0, p5, 3, out, &hit);
    CHECK(!hit);
    CHECK_STR(out, "abc");
}

TEST(stop_holds_only_prefixes)
{
    const char *stops[] = {"###"};
    size_t lens[] = {3};
    struct stop_filter f;
    stop_init(&f, (char *const *)stops, lens, 1, 16);
    char out[64];
    bool hit;
    CHECK_INT(stop_push(&f, "a#", 2, out, sizeof(out), &hit), 1); /* "#" may start "###" */
    CHECK_INT(stop_push(&f, "#b", 2, out, sizeof(out), &hit), 3); /* "##b" cannot */
    CHECK(!hit);
    CHECK(memcmp(out, "##b", 3) == 0);
    stop_release(&f);
}

/* ---- metrics ---- */

TEST(metrics_text)
{
    struct prom m;
    prom_init(&m);
    prom_set_model(&m, "m", 256);
    prom_response(&m, PROM_COMPLETIONS, 200);
    prom_response(&m, PROM_COMPLETIONS, 400);
    prom_response(&m, PROM_OTHER, 418); /* counted as "other" */
    atomic_store(&m.steps, 4);
    atomic_store(&m.step_seqs, 10);
    atomic_store(&m.attn_ns, 1500000000);
    struct prom_gauges g = {
        .queued = 2, .running = 3, .slots = 8, .kv_positions = 40, .kv_capacity = 800, .ready = 1};
    struct buf b;
    buf_init(&b, 1 << 20);
    prom_render(&m, &g, &b);
    const char *want[] = {
        "fp4serve_requests_total{model_name=\"m\",route=\"completions\",status=\"200\"} 1\n",
        "fp4serve_requests_total{model_name=\"m\",route=\"completions\",status=\"400\"} 1\n",
        "fp4serve_requests_total{model_name=\"m\",route=\"other\",status=\"other\"} 1\n",
        "fp4serve_steps_total{model_name=\"m\"} 4\n",
        "fp4serve_step_sequences_total{model_name=\"m\"} 10\n",
        "fp4serve_step_phase_seconds_total{model_name=\"m\",phase=\"attention\"} 1.500000\n",
        "fp4serve_queue_length{model_name=\"m\"} 2\n",
        "fp4serve_running_sequences{model_name=\"m\"} 3\n",
        "fp4serve_num_requests_waiting{model_name=\"m\"} 2\n",
        "fp4serve_num_requests_running{model_name=\"m\"} 3\n",
        "fp4serve_kv_slots_free{model_name=\"m\"} 5\n",
        "fp4serve_kv_positions_used{model_name=\"m\"} 40\n",
        "# TYPE fp4serve_open_connections gauge\n",
    };
    for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++)
        CHECK_MSG(strstr(b.data, want[i]) != NULL, "metrics lack '%s'", want[i]);
    buf_release(&b);
}

/* ---- n, logprobs, echo, prompt lists, penalties; /generate ---- */

TEST(choices_logprobs_echo_and_penalties_are_read)
{
    struct api_request r;
    struct api_error e;
    CHECK_INT(parse("{\"prompt\":[[1,2],\"two\",[3]],\"n\":4,\"logprobs\":5,\"echo\":true,"
                    "\"max_tokens\":0,\"min_p\":0.1,\"repetition_penalty\":1.3,"
                    "\"frequency_penalty\":-0.5,\"presence_penalty\":2}",
                    API_COMPLETION, &r, &e),
              0);
    CHECK_INT(r.n_prompts, 3);
    CHECK(r.batch);
    CHECK(r.prompts[0].ids && r.prompts[0].n_ids == 2 && r.prompts[0].ids[1] == 2);
    CHECK_STR(r.prompts[1].text, "two");
    CHECK(r.prompts[2].ids && r.prompts[2].ids[0] == 3);
    CHECK_INT(r.n, 4);
    CHECK_INT(r.logprobs, 5);
    CHECK(r.echo);
    CHECK_INT(r.max_tokens, 0);
    CHECK(r.min_p == 0.1 && r.repetition_penalty == 1.3 && r.frequency_penalty == -0.5 &&
          r.presence_penalty == 2);
    api_request_release(&r);
    /* defaults: one choice, no logprobs (chat's false too), penalties off */
    CHECK_INT(parse("{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"logprobs\":false}",
                    API_CHAT, &r, &e),
              0);
    CHECK(r.n == 1 && r.logprobs == -1 && !r.echo && r.repetition_penalty == 1 && r.min_p == 0);
    api_request_release(&r);
    CHECK_INT(parse("{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"logprobs\":true,"
                    "\"top_logprobs\":20}",
                    API_CHAT, &r, &e),
              0);
    CHECK_INT(r.logprobs, 20);
    api_request_release(&r);
    /* completions: 0 asks for the chosen tokens' own logprobs; false for none */
    CHECK_INT(parse("{\"prompt\":\"x\",\"logprobs\":0}", API_COMPLETION, &r, &e), 0);
    CHECK_INT(r.logprobs, 0);
    CHECK(!r.batch);
    api_request_release(&r);
    CHECK_INT(parse("{\"prompt\":\"x\",\"logprobs\":false}", API_COMPLETION, &r, &e), 0);
    CHECK_INT(r.logprobs, -1);
    api_request_release(&r);
}

static int gen(const char *body, struct api_request *r, struct api_error *e)
{
    return api_parse_generate(body, strlen(body), &lim, r, e);
}

TEST(generate_reads_sglang_bodies)
{
    struct api_request r;
    struct api_error e;
    /* what bench_serving --backend sglang posts */
    CHECK_INT(gen("{\"text\":\"hi\",\"sampling_params\":{\"temperature\":0.0,\"max_new_tokens\":"
                  "64,\"ignore_eos\":true},\"stream\":true,\"lora_path\":null,\"return_logprob\":"
                  "false,\"logprob_start_len\":-1}",
                  &r, &e),
              0);
    CHECK(r.kind == API_GENERATE);
    CHECK_STR(r.prompts[0].text, "hi");
    CHECK_INT(r.max_tokens, 64);
    CHECK(r.temperature == 0 && r.ignore_eos && r.stream);
    CHECK_STR(r.ignored, "");
    api_request_release(&r);
    CHECK_INT(gen("{\"input_ids\":[[1,2],[3]],\"sampling_params\":{\"sampling_seed\":9,\"n\":2}}",
                  &r, &e),
              0);
    CHECK(r.n_prompts == 2 && r.batch && r.has_seed && r.seed == 9 && r.n == 2);
    CHECK_INT(r.max_tokens, -1);
    api_request_release(&r);
    /* refusals name the field as the client sent it */
    CHECK_INT(gen("{\"text\":\"hi\",\"sampling_params\":{\"max_new_tokens\":-1}}", &r, &e), -1);
    CHECK_STR(e.param, "sampling_params.max_new_tokens");
    CHECK_INT(gen("{\"text\":\"hi\",\"sampling_params\":{\"top_p\":0}}", &r, &e), -1);
    CHECK_STR(e.param, "sampling_params.top_p");
    CHECK_INT(gen("{\"input_ids\":[1,512]}", &r, &e), -1);
    CHECK_STR(e.param, "input_ids");
    CHECK_INT(gen("{\"text\":\"a\",\"input_ids\":[1]}", &r, &e), -1);
    CHECK(strstr(e.msg, "not both") != NULL);
    CHECK_INT(gen("{\"sampling_params\":{}}", &r, &e), -1);
    CHECK(strstr(e.msg, "'text' or 'input_ids' is missing") != NULL);
    CHECK_INT(gen("{\"text\":\"a\",\"return_logprob\":true}", &r, &e), -1);
    CHECK_STR(e.param, "return_logprob");
    CHECK_STR(e.code, "unsupported_parameter");
    CHECK_INT(gen("{\"text\":\"a\",\"sampling_params\":{\"regex\":\"a+\"}}", &r, &e), -1);
    CHECK_STR(e.param, "sampling_params.regex");
    CHECK_INT(gen("{\"text\":\"a\",\"sampling_params\":[]}", &r, &e), -1);
    CHECK_STR(e.param, "sampling_params");
    CHECK_INT(
        gen("{\"text\":\"a\",\"sampling_params\":{\"max_tokens\":3,\"max_new_tokens\":4}}", &r, &e),
        -1);
    CHECK(strstr(e.msg, "given twice") != NULL);
}

/* /generate's refusals quote the fields as the client sent them, in the
 * message as in param (docs/reliability.md W3-N20) */
TEST(generate_errors_quote_the_fields_sent)
{
    struct api_request r;
    struct api_error e;
    CHECK_INT(gen("{\"input_ids\":[[1,2],[3,512]]}", &r, &e), -1);
    CHECK_STR(e.param, "input_ids");
    CHECK_STR(e.msg, "'input_ids[1][1]' is token id 512, outside [0, 512)");
    CHECK_INT(gen("{\"text\":[\"a\",5]}", &r, &e), -1);
    CHECK_STR(e.param, "text");
    CHECK_MSG(strncmp(e.msg, "'text[1]' must be a string", 26) == 0, "message '%s'", e.msg);
    CHECK_INT(gen("{\"text\":\"hi\",\"sampling_params\":{\"max_new_tokens\":0}}", &r, &e), -1);
    CHECK_STR(e.msg,
              "'sampling_params.max_new_tokens' is 0; it must be at least 1 (0 only with echo)");
    CHECK_INT(gen("{\"text\":\"hi\",\"sampling_params\":{\"top_p\":\"x\"}}", &r, &e), -1);
    CHECK_STR(e.msg, "'sampling_params.top_p' must be a number (got a string)");
    /* the context check in server.c names max_tokens by this field */
    CHECK_INT(gen("{\"text\":\"hi\",\"sampling_params\":{\"max_new_tokens\":9}}", &r, &e), 0);
    CHECK_STR(r.max_tokens_field, "sampling_params.max_new_tokens");
    api_request_release(&r);
    /* a field merely starting like 'prompt' is not the prompt */
    CHECK_INT(gen("{\"text\":\"hi\",\"sampling_params\":{\"prompt_logprobs\":1}}", &r, &e), -1);
    CHECK_STR(e.param, "sampling_params.prompt_logprobs");
    CHECK_STR(e.msg, "field 'sampling_params.prompt_logprobs' is not supported by this server "
                     "(only null)");
}

TEST(choices_and_generate_bodies)
{
    struct buf b;
    buf_init(&b, 1 << 16);
    struct api_resp rp = {.kind = API_COMPLETION, .id = "cmpl-1", .created = 5, .model = "m"};
    size_t start = api_final_begin(&b, &rp);
    for (int i = 0; i < 3; i++) {
        struct api_choice c = {.index = i, .text = "ab", .n = (size_t)i, .finish = "length"};
        api_final_choice(&b, &rp, &c, i == 0);
    }
    CHECK_INT(api_final_end(&b, start, 7, 3, 0), 0);
    json_t *j = json_loadb(b.data, b.len, 0, NULL);
    json_t *ch = json_object_get(j, "choices");
    CHECK_INT(json_array_size(ch), 3);
    CHECK_INT(json_integer_value(json_object_get(json_array_get(ch, 2), "index")), 2);
    CHECK_STR(json_string_value(json_object_get(json_array_get(ch, 1), "text")), "a");
    CHECK(json_is_null(json_object_get(json_array_get(ch, 0), "logprobs")));
    json_decref(j);
    buf_reset(&b);
    struct api_choice c = {.index = 3, .text = "x", .n = 1};
    CHECK_INT(api_sse_choice(&b, &rp, &c), 0);
    j = json_loadb(b.data + 6, b.len - 8, 0, NULL);
    CHECK_INT(json_integer_value(
                  json_object_get(json_array_get(json_object_get(j, "choices"), 0), "index")),
              3);
    json_decref(j);
    buf_reset(&b);
    api_gen_json(&b, "id1", -1, "hello", 5, "length", 4, 16, 0);
    j = json_loadb(b.data, b.len, 0, NULL);
    CHECK_STR(json_string_value(json_object_get(j, "text")), "hello");
    CHECK(json_object_get(j, "index") == NULL);
    json_t *mi = json_object_get(j, "meta_info");
    CHECK_STR(json_string_value(json_object_get(json_object_get(mi, "finish_reason"), "type")),
              "length");
    CHECK_INT(json_integer_value(json_object_get(json_object_get(mi, "finish_reason"), "length")),
              16);
    CHECK_INT(json_integer_value(json_object_get(mi, "completion_tokens")), 16);
    CHECK_INT(json_integer_value(json_object_get(mi, "prompt_tokens")), 4);
    json_decref(j);
    buf_reset(&b);
    api_gen_json(&b, "id1", 2, "", 0, NULL, 4, 0, 0);
    j = json_loadb(b.data, b.len, 0, NULL);
    CHECK(json_is_null(json_object_get(json_object_get(j, "meta_info"), "finish_reason")));
    CHECK_INT(json_integer_value(json_object_get(j, "index")), 2);
    json_decref(j);
    buf_release(&b);
}

/* OpenAI's error codes are strings, set where they mean something */
TEST(error_codes_are_strings)
{
    struct api_request r;
    struct api_error e;
    CHECK_INT(parse("{\"prompt\":\"x\",\"model\":\"gpt-4\"}", API_COMPLETION, &r, &e), -1);
    CHECK_STR(e.code, "model_not_found");
    CHECK_INT(parse("{\"prompt\":\"x\",\"typical_p\":0.5}", API_COMPLETION, &r, &e), -1);
    CHECK_STR(e.code, "unsupported_parameter");
    struct buf b;
    buf_init(&b, 4096);
    api_error_json(&b, &e);
    CHECK(strstr(b.data, "\"code\":\"unsupported_parameter\"}}") != NULL);
    buf_release(&b);
}

TEST_MAIN()
