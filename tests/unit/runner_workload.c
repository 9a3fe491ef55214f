/*
 * runner_workload: the prefix-cache workloads. Shared-prefix prompts of a
 * group share exactly their system prompt; a multi-turn turn carries every
 * earlier user message and answer in order; trace prompts share exactly
 * their common hash blocks and keep their recorded offsets; a malformed
 * trace line, an unknown field or a timestamp that goes back is an error
 * naming path:LINE.
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "test.h"
#include "testtmp.h"

#include "client/workload.h"

/* Write text to a file of the test's scratch folder (testtmp.h, removed at
 * exit); returns its path, valid for the next three calls. */
static const char *put(const char *name, const char *text)
{
    static char *path[4];
    static int k;
    char **p = &path[k++ % 4];
    free(*p);
    *p = test_tmp_path(name);
    FILE *f = fopen(*p, "w");
    CHECK(f != NULL);
    if (f) {
        fputs(text, f);
        fclose(f);
    }
    return *p;
}

/* Request index's prompt member wrapped into an object. */
static json_t *prompt_of(const struct wl *w, size_t index, long *ids, long *in, long *out)
{
    struct buf b;
    buf_init(&b, 1 << 24);
    buf_putc(&b, '{');
    *in = *out = -7;
    *ids = wl_prompt(w, index, &b, in, out);
    buf_putc(&b, '}');
    json_error_t je;
    json_t *j = json_loadb(b.data, b.len, 0, &je);
    CHECK_MSG(j != NULL, "not JSON: %s: %.200s", je.text, b.data);
    buf_release(&b);
    return j;
}

/* Leading elements two id arrays share. */
static size_t common(json_t *a, json_t *b)
{
    size_t k = 0;
    while (k < json_array_size(a) && k < json_array_size(b) &&
           json_integer_value(json_array_get(a, k)) == json_integer_value(json_array_get(b, k)))
        k++;
    return k;
}

TEST(shared_prefix_groups_share_exactly_the_system_prompt)
{
    struct wl w;
    struct err err;
    err_init(&err);
    struct wl_opts o = {
        .kind = WL_SHARED_PREFIX, .groups = 3, .prefix_len = 20, .questions = 4, .question_len = 6};
    CHECK_INT(wl_init(&w, &o, false, 50000, 9, &err, 3, 2), 0);
    CHECK_INT(wl_count(&w), -1);
    long ids, in, out;
    json_t *a = prompt_of(&w, 0, &ids, &in, &out);  /* group 0, question 0 */
    json_t *b = prompt_of(&w, 3, &ids, &in, &out);  /* group 0, question 1 */
    json_t *c = prompt_of(&w, 1, &ids, &in, &out);  /* group 1, question 0 */
    json_t *d = prompt_of(&w, 12, &ids, &in, &out); /* group 0, question 0 again */
    CHECK_INT(ids, 26);
    CHECK_INT(in, 26);
    CHECK_INT(out, -7); /* the request's max_tokens is left alone */
    json_t *pa = json_object_get(a, "prompt"), *pb = json_object_get(b, "prompt");
    CHECK_INT(json_array_size(pa), 26);
    CHECK_INT(common(pa, pb), 20);
    CHECK(common(pa, json_object_get(c, "prompt")) < 3);
    CHECK(json_equal(a, d));
    json_decref(a);
    json_decref(b);
    json_decref(c);
    json_decref(d);
    wl_release(&w);
    /* chat: a system message shared, the question as the user's */
    CHECK_INT(wl_init(&w, &o, true, 0, 9, &err, 3, 2), 0);
    a = prompt_of(&w, 0, &ids, &in, &out);
    b = prompt_of(&w, 3, &ids, &in, &out);
    CHECK_INT(ids, -1);
    json_t *ma = json_object_get(a, "messages"), *mb = json_object_get(b, "messages");
    CHECK_STR(json_string_value(json_object_get(json_array_get(ma, 0), "role")), "system");
    CHECK(json_equal(json_array_get(ma, 0), json_array_get(mb, 0)));
    CHECK(!json_equal(json_array_get(ma, 1), json_array_get(mb, 1)));
    json_decref(a);
    json_decref(b);
    wl_release(&w);
}

TEST(multi_turn_carries_the_exact_history)
{
    struct wl w;
    struct err err;
    err_init(&err);
    struct wl_opts o = {.kind = WL_MULTI_TURN, .sessions = 2, .turns = 3, .turn_len = 5};
    CHECK_INT(wl_init(&w, &o, true, 0, 4, &err, 3, 2), 0);
    CHECK_INT(wl_count(&w), 6);
    CHECK_INT(wl_session(&w, 4), 1);
    CHECK_INT(wl_turn(&w, 4), 1);
    long ids, in, out;
    json_t *t0 = prompt_of(&w, 3, &ids, &in, &out); /* session 1, turn 0 */
    buf_puts(wl_answer(&w, 3), "an \"answer\"\n");
    json_t *t1 = prompt_of(&w, 4, &ids, &in, &out);
    buf_puts(wl_answer(&w, 4), "second");
    json_t *t2 = prompt_of(&w, 5, &ids, &in, &out);
    CHECK_INT(in, 15);
    json_t *m0 = json_object_get(t0, "messages"), *m2 = json_object_get(t2, "messages");
    CHECK_INT(json_array_size(m0), 1);
    CHECK_INT(json_array_size(m2), 5);
    CHECK(json_equal(json_array_get(m0, 0), json_array_get(m2, 0)));
    CHECK(json_equal(json_array_get(json_object_get(t1, "messages"), 2), json_array_get(m2, 2)));
    CHECK_STR(json_string_value(json_object_get(json_array_get(m2, 1), "content")),
              "an \"answer\"\n");
    CHECK_STR(json_string_value(json_object_get(json_array_get(m2, 1), "role")), "assistant");
    CHECK_STR(json_string_value(json_object_get(json_array_get(m2, 3), "content")), "second");
    json_decref(t0);
    json_decref(t1);
    json_decref(t2);
    wl_release(&w);
    /* completions: one text, the turns and answers joined by newlines */
    CHECK_INT(wl_init(&w, &o, false, 0, 4, &err, 3, 2), 0);
    t0 = prompt_of(&w, 0, &ids, &in, &out);
    buf_puts(wl_answer(&w, 0), " it\"s");
    t1 = prompt_of(&w, 1, &ids, &in, &out);
    const char *p0 = json_string_value(json_object_get(t0, "prompt"));
    const char *p1 = json_string_value(json_object_get(t1, "prompt"));
    CHECK(strncmp(p1, p0, strlen(p0)) == 0);
    CHECK(strncmp(p1 + strlen(p0), "\n it\"s\n", 7) == 0);
    json_decref(t0);
    json_decref(t1);
    wl_release(&w);
}

TEST(trace_blocks_and_times)
{
    const char *path =
        put("t.jsonl", "{\"timestamp\": 100, \"input_length\": 10, \"output_length\": "
                       "3, \"hash_ids\": [7, 8, 9]}\n"
                       "\n"
                       "{\"timestamp\": 150.5, \"input_length\": 6, "
                       "\"output_length\": 2, \"hash_ids\": [7, 5]}\n"
                       "{\"timestamp\": 400, \"input_length\": 3, \"output_length\": "
                       "1}\n");
    struct wl w;
    struct err err;
    err_init(&err);
    struct wl_opts o = {.kind = WL_TRACE, .trace_path = path, .time_scale = 2, .block_tokens = 4};
    CHECK_INT(wl_init(&w, &o, false, 1000, 1, &err, 3, 2), 0);
    CHECK_INT(wl_count(&w), 3);
    CHECK(wl_offset_ns(&w, 0) == 0);
    CHECK(wl_offset_ns(&w, 1) == 101000000ull); /* 50.5 ms x 2 */
    CHECK(wl_offset_ns(&w, 2) == 600000000ull);
    long ids, in, out;
    json_t *a = prompt_of(&w, 0, &ids, &in, &out), *b = prompt_of(&w, 1, &ids, &in, &out);
    CHECK_INT(ids, 6);
    CHECK_INT(in, 6);
    CHECK_INT(out, 2);
    json_t *pa = json_object_get(a, "prompt"), *pb = json_object_get(b, "prompt");
    CHECK_INT(json_array_size(pa), 10);
    CHECK_INT(json_array_size(pb), 6);
    CHECK(common(pa, pb) >= 4); /* block 7 */
    CHECK(common(pa, pb) < 6);  /* then blocks 8 and 5 differ */
    json_decref(a);
    json_decref(b);
    wl_release(&w);
}

/* A trace that must be refused with msg in the error. */
static void bad(const char *text, const char *msg)
{
    const char *path = put("bad.jsonl", text);
    struct wl w;
    struct err err;
    err_init(&err);
    struct wl_opts o = {.kind = WL_TRACE, .trace_path = path};
    CHECK_INT(wl_init(&w, &o, false, 100, 1, &err, 3, 2), -1);
    CHECK_INT(err.code, 2);
    CHECK_MSG(strstr(err.msg, path) && strstr(err.msg, msg), "got '%s', want '%s'", err.msg, msg);
    wl_release(&w);
}

TEST(trace_errors_name_the_line)
{
    const char *ok = "{\"timestamp\": 1, \"input_length\": 2, \"output_length\": 3}\n";
    char text[512];
    snprintf(text, sizeof(text), "%s\n%s{\"timestamp\": 1, \"input_len\": 2}\n", ok, ok);
    bad(text, ":4: unknown field 'input_len' (expected timestamp, input_length, output_length, "
              "hash_ids)");
    snprintf(text, sizeof(text), "%s%s{\"timestamp\": 1,\n", ok, ok);
    bad(text, ":3: not JSON:");
    snprintf(text, sizeof(text), "%s[1, 2]\n", ok);
    bad(text, ":2: not a JSON object");
    snprintf(text, sizeof(text),
             "%s{\"timestamp\": 0, \"input_length\": 2, \"output_length\": 3}\n", ok);
    bad(text, ":2: 'timestamp' goes back");
    bad("{\"timestamp\": 1, \"input_length\": 0, \"output_length\": 3}\n",
        ":1: 'input_length' wants an integer in [1, 10000000]");
    bad("{\"timestamp\": 1, \"input_length\": 5, \"output_length\": 3, \"hash_ids\": [1, -2]}\n",
        ":1: 'hash_ids' wants a list of integers >= 0");
    bad("\n\n", ": no requests in the trace");
}

TEST_MAIN()
