/*
 * runner_dataset: prompt datasets (JSONL, ShareGPT), length distributions
 * and the request bodies built from them: the same seed gives the same
 * prompts and lengths, a bad entry is named by line or index, skipped
 * ShareGPT entries are counted.
 */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sha256.h"
#include "test.h"

#include "client/dataset.h"
#include "client/lengths.h"
#include "client/loadgen.h"

static char dir[] = "/tmp/sweep-dataset-XXXXXX";

/* Write text to dir/name; returns the path (static buffer per call site). */
static const char *put(const char *name, const char *text)
{
    static char path[4][256];
    static int k;
    char *p = path[k++ % 4];
    if (dir[sizeof(dir) - 2] == 'X')
        CHECK(mkdtemp(dir) != NULL);
    snprintf(p, 256, "%s/%s", dir, name);
    FILE *f = fopen(p, "w");
    fputs(text, f);
    fclose(f);
    return p;
}

/* ---- lengths ---- */

TEST(lengths_parse_and_format_round_trip)
{
    const char *good[] = {"256", "uniform:64:512", "normal:480:240", "normal:100:0.5:1:300"};
    for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
        struct len_dist d, e;
        struct err err;
        err_init(&err);
        char text[96];
        CHECK_MSG(len_parse(good[i], "x", &d, &err, 2) == 0, "%s: %s", good[i], err.msg);
        len_format(&d, text, sizeof(text));
        CHECK_MSG(len_parse(text, "x", &e, &err, 2) == 0, "%s: %s", text, err.msg);
        CHECK(d.kind == e.kind && d.min == e.min && d.max == e.max && d.mean == e.mean &&
              d.sd == e.sd);
    }
    const char *bad[] = {"0",
                         "-3",
                         "uniform:5",
                         "uniform:9:2",
                         "uniform:0:4",
                         "uniform:1.5:4",
                         "normal:10",
                         "normal:10:-1",
                         "normal:10:2:20",
                         "zipf:1:2",
                         "uniform:1:2:",
                         "2000000",
                         "uniform:1:99999999999",
                         ""};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        struct len_dist d;
        struct err err;
        err_init(&err);
        CHECK_MSG(len_parse(bad[i], "option '--input-len'", &d, &err, 2) != 0, "'%s' accepted",
                  bad[i]);
        CHECK_MSG(strstr(err.msg, "--input-len") != NULL, "%s", err.msg);
        CHECK_INT(err.code, 2);
    }
}

TEST(lengths_are_seeded_and_in_range)
{
    struct len_dist u, n;
    struct err err;
    err_init(&err);
    CHECK(len_parse("uniform:64:512", "x", &u, &err, 2) == 0);
    CHECK(len_parse("normal:480:240:1:2048", "x", &n, &err, 2) == 0);
    uint64_t s1 = 7, s2 = 7;
    double sum = 0;
    long lo = LEN_MAX, hi = 0;
    for (int i = 0; i < 20000; i++) {
        long a = len_sample(&u, &s1), b = len_sample(&u, &s2);
        CHECK_INT(a, b);
        lo = a < lo ? a : lo;
        hi = a > hi ? a : hi;
        long x = len_sample(&n, &s1);
        CHECK_INT(x, len_sample(&n, &s2));
        CHECK(x >= 1 && x <= 2048);
        sum += (double)x;
    }
    CHECK_INT(lo, 64);
    CHECK_INT(hi, 512);
    CHECK_NEAR(sum / 20000, 480, 10); /* the clamp at 1 lifts the mean a little */
}

/* ---- datasets ---- */

TEST(jsonl_loads_prompts_messages_and_lengths)
{
    const char *p = put("ok.jsonl", "{\"prompt\": \"one two three\", \"output_len\": 5}\n"
                                    "\n"
                                    "{\"messages\": [{\"role\": \"system\", \"content\": \"be "
                                    "brief\"}, {\"role\": \"user\", \"content\": \"hi\"}], "
                                    "\"id\": 7}\n");
    struct ds_set ds;
    struct err err;
    err_init(&err);
    CHECK_MSG(ds_load(p, DS_JSONL, 1, &ds, &err, 3, 2) == 0, "%s", err.msg);
    CHECK_INT(ds.n, 2);
    CHECK_STR(ds.e[0].prompt, "one two three");
    CHECK_INT(ds.e[0].prompt_words, 3);
    CHECK_INT(ds.e[0].output_len, 5);
    CHECK(ds.e[0].messages == NULL);
    CHECK_INT(ds.e[1].output_len, -1);
    CHECK_INT(ds.e[1].prompt_words, 3);
    CHECK(ds.e[1].messages && strstr(ds.e[1].messages, "\"system\""));
    ds_release(&ds);
}

TEST(jsonl_bad_entry_is_named_by_line)
{
    static const struct {
        const char *text, *want;
    } cases[] = {
        {"{\"prompt\": \"a\"}\n{\"prompt\": 3}\n", ":2: \"prompt\" wants"},
        {"{\"prompt\": \"a\"}\n\n{\"prompt\": \"b\"\n", ":3:"},
        {"[1]\n", ":1: not a JSON object"},
        {"{\"prompt\": \"a\"}\n{\"text\": \"b\"}\n", ":2: wants \"prompt\""},
        {"{\"prompt\": \"   \"}\n", ":1: \"prompt\" wants a non-empty"},
        {"{\"prompt\": \"a\", \"output_len\": 0}\n", ":1: \"output_len\""},
        {"{\"prompt\": \"a\", \"output_len\": \"9\"}\n", ":1: \"output_len\""},
        {"{\"messages\": []}\n", ":1: \"messages\""},
        {"{\"messages\": [{\"role\": \"user\"}]}\n", ":1: each message"},
        {"{\"prompt\": \"a\", \"messages\": [{\"role\": \"user\", \"content\": \"b\"}]}\n",
         ":1: has both"},
        {"\n\n", "no usable entries"},
        {"{\"messages\": [{\"role\": \"user\", \"content\": \" \"}]}\n",
         ":1: \"messages\" carry no text"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        const char *p = put("bad.jsonl", cases[i].text);
        struct ds_set ds;
        struct err err;
        err_init(&err);
        CHECK_MSG(ds_load(p, DS_JSONL, 1, &ds, &err, 3, 2) != 0, "case %zu accepted", i);
        CHECK_INT(err.code, 2);
        CHECK_MSG(strstr(err.msg, p) && strstr(err.msg, cases[i].want), "case %zu: %s", i, err.msg);
    }
    struct ds_set ds;
    struct err err;
    err_init(&err);
    CHECK(ds_load("/nonexistent/x.jsonl", DS_JSONL, 1, &ds, &err, 3, 2) != 0);
    CHECK_INT(err.code, 3);
}

TEST(jsonl_byte_order_mark_and_crlf)
{
    const char *p =
        put("bom.jsonl", "\xef\xbb\xbf{\"prompt\": \"a b\"}\r\n{\"prompt\": \"c\"}\r\n");
    struct ds_set ds;
    struct err err;
    err_init(&err);
    CHECK_MSG(ds_load(p, DS_JSONL, 1, &ds, &err, 3, 2) == 0, "%s", err.msg);
    CHECK_INT(ds.n, 2);
    ds_release(&ds);
}

TEST(sharegpt_takes_first_human_turn_and_counts_skips)
{
    const char *p =
        put("s.json", "[{\"id\": \"a\", \"conversations\": [{\"from\": \"system\", \"value\": "
                      "\"x\"}, {\"from\": \"human\", \"value\": \"why is the sky blue\"}, "
                      "{\"from\": \"gpt\", \"value\": \"because of light\"}]},"
                      " {\"conversations\": [{\"from\": \"human\", \"value\": \"alone\"}]},"
                      " {\"conversations\": [{\"from\": \"gpt\", \"value\": \"no question\"}]},"
                      " {\"conversations\": [{\"from\": \"human\", \"value\": \"q\"}, "
                      "{\"from\": \"gpt\", \"value\": \"one two\"}]}]");
    struct ds_set ds;
    struct err err;
    err_init(&err);
    CHECK_MSG(ds_load(p, DS_SHAREGPT, 1, &ds, &err, 3, 2) == 0, "%s", err.msg);
    CHECK_INT(ds.n, 2);
    CHECK_STR(ds.e[0].prompt, "why is the sky blue");
    CHECK_INT(ds.e[0].output_len, 3);
    CHECK_INT(ds.e[1].output_len, 2);
    CHECK_INT(ds.n_skipped, 2);
    CHECK_INT(ds.first_skipped, 1);
    ds_release(&ds);

    static const struct {
        const char *text, *want;
    } bad[] = {
        {"{\"conversations\": []}", "a JSON list"},
        {"[{\"conversations\": []}, 3]", ": entry 1: wants an object"},
        {"[{\"conversations\": [{\"from\": \"human\", \"value\": 5}]}]", ": entry 0: turn 0"},
        {"[{\"conversations\": [{\"from\": \"human\", \"value\": \"q\"}]", ":1:"},
        /* jansson quotes the input near the error; a newline there stays out */
        {"[{\"conversations\": [{\"from\": \"human\", \"value\": \"caf\\u\n\n9\"}]}]", "not JSON"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        const char *q = put("bad.json", bad[i].text);
        err_init(&err);
        CHECK_MSG(ds_load(q, DS_SHAREGPT, 1, &ds, &err, 3, 2) != 0, "case %zu accepted", i);
        CHECK_MSG(strstr(err.msg, q) && strstr(err.msg, bad[i].want), "case %zu: %s", i, err.msg);
        CHECK_MSG(strchr(err.msg, '\n') == NULL, "case %zu: two lines: %s", i, err.msg);
    }
}

/* W3-N10: a "\u0000", a key given twice and an unknown chat role are
 * refused at load (so by `sweep check`), in our words, naming the line or
 * entry; jansson's flag names stay out of the message. */
TEST(nul_twice_keys_and_bad_roles_are_refused)
{
    static const struct {
        enum ds_kind kind;
        const char *text, *want;
    } cases[] = {
        {DS_JSONL, "{\"prompt\": \"a\"}\n{\"prompt\": \"a\\u0000b\"}\n",
         ":2:21: a string holds \"\\u0000\" (NUL), which a prompt cannot carry"},
        {DS_JSONL, "{\"prompt\": \"a\", \"prompt\": \"b\"}\n",
         ":1:24: key \"prompt\" given twice in one object"},
        {DS_JSONL,
         "{\"messages\": [{\"role\": \"user\", \"content\": \"a\", \"role\": \"tool\"}]}\n",
         ":1:53: key \"role\" given twice"},
        {DS_JSONL,
         "{\"messages\": [{\"role\": \"user\", \"content\": \"a\"}, {\"role\": \"robot\", "
         "\"content\": \"b\"}]}\n",
         ":1: message 2: role 'robot' is not system, developer, user, assistant or tool"},
        {DS_SHAREGPT,
         "[{\"conversations\": [{\"from\": \"human\", \"from\": \"gpt\", \"value\": \"q\"}]}]",
         ":1:44: key \"from\" given twice"},
        {DS_SHAREGPT, "[{\"conversations\": [{\"from\": \"human\", \"value\": \"\\u0000\"}]}]",
         "(NUL), which a prompt cannot carry"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        const char *p = put("w3.json", cases[i].text);
        struct ds_set ds;
        struct err err;
        err_init(&err);
        CHECK_MSG(ds_load(p, cases[i].kind, 1, &ds, &err, 3, 2) != 0, "case %zu accepted", i);
        CHECK_INT(err.code, 2);
        CHECK_MSG(strstr(err.msg, p) && strstr(err.msg, cases[i].want), "case %zu: %s", i, err.msg);
        CHECK_MSG(!strstr(err.msg, "JSON_"), "case %zu: %s", i, err.msg);
    }
    /* every role fp4serve and OpenAI take still loads */
    const char *ok = put("roles.jsonl", "{\"messages\": [{\"role\": \"system\", \"content\": "
                                        "\"a\"}, {\"role\": \"developer\", \"content\": \"b\"}, "
                                        "{\"role\": \"user\", \"content\": \"c\"}, {\"role\": "
                                        "\"assistant\", \"content\": \"d\"}, {\"role\": \"tool\", "
                                        "\"content\": \"e\"}]}\n");
    struct ds_set ds;
    struct err err;
    err_init(&err);
    CHECK_MSG(ds_load(ok, DS_JSONL, 1, &ds, &err, 3, 2) == 0, "%s", err.msg);
    ds_release(&ds);
}

/* W3-FIFO: a FIFO (or socket, device) is refused before any read, so
 * `sweep check` cannot block on one; an over-limit file is refused by its
 * size with the limit named, before it is read. */
TEST(fifo_and_oversize_files_are_refused_up_front)
{
    char fifo[300], big[300];
    put("x", "");
    snprintf(fifo, sizeof(fifo), "%s/fifo.jsonl", dir);
    snprintf(big, sizeof(big), "%s/big.jsonl", dir);
    unlink(fifo);
    CHECK(mkfifo(fifo, 0600) == 0);
    alarm(20); /* before the fix, open() waited for a writer forever */
    struct ds_set ds;
    struct err err;
    err_init(&err);
    CHECK(ds_load(fifo, DS_JSONL, 1, &ds, &err, 3, 2) != 0);
    CHECK_INT(err.code, 2);
    CHECK_MSG(strstr(err.msg, "not a regular file"), "%s", err.msg);
    err_init(&err);
    CHECK(ds_load(dir, DS_SHAREGPT, 1, &ds, &err, 3, 2) != 0);
    CHECK_MSG(strstr(err.msg, "is a directory"), "%s", err.msg);
    alarm(0);
    unlink(fifo);

    FILE *f = fopen(big, "w"); /* sparse: 1 GiB + 1 byte, nothing written */
    CHECK(f && ftruncate(fileno(f), (off_t)(1 << 30) + 1) == 0);
    fclose(f);
    err_init(&err);
    CHECK(ds_load(big, DS_JSONL, 1, &ds, &err, 3, 2) != 0);
    CHECK_INT(err.code, 2);
    CHECK_MSG(strstr(err.msg, "the file is 1073741825 bytes; dataset files are limited to 1 GiB"),
              "%s", err.msg);
    unlink(big);
}

/* The file is read in 64 KiB chunks: lines and JSON split across chunk
 * ends load the same, and ds.sha256 is the digest of every byte (the run
 * keys use it); a JSONL line over 64 MiB is refused with the limit. */
TEST(streamed_reading_keeps_entries_and_digest)
{
    struct buf text;
    buf_init(&text, 8 << 20);
    for (int i = 0; i < 3000; i++)
        buf_printf(&text, "{\"prompt\": \"entry %d %s\"}\n", i, i == 7 ? "" : "x y z");
    buf_puts(&text, "{\"prompt\": \"");
    for (int i = 0; i < 100000; i++)
        buf_puts(&text, "w ");
    buf_puts(&text, "\"}"); /* the last line: no '\n', longer than a chunk */
    const char *p = put("stream.jsonl", text.data);
    struct ds_set ds;
    struct err err;
    err_init(&err);
    CHECK_MSG(ds_load(p, DS_JSONL, 1, &ds, &err, 3, 2) == 0, "%s", err.msg);
    CHECK_INT(ds.n, 3001);
    CHECK_STR(ds.e[2999].prompt, "entry 2999 x y z");
    CHECK_INT(ds.e[3000].prompt_words, 100000);
    char want[65];
    sha256_hex(text.data, text.len, want);
    CHECK_STR(ds.sha256, want);
    ds_release(&ds);

    /* ShareGPT through jansson's callback: the same digest rule */
    buf_reset(&text);
    buf_puts(&text, "[");
    for (int i = 0; i < 2000; i++)
        buf_printf(&text,
                   "%s{\"conversations\": [{\"from\": \"human\", \"value\": \"q %d\"}, "
                   "{\"from\": \"gpt\", \"value\": \"a b\"}]}",
                   i ? ", " : "", i);
    buf_puts(&text, "]\n");
    p = put("stream.json", text.data);
    CHECK_MSG(ds_load(p, DS_SHAREGPT, 1, &ds, &err, 3, 2) == 0, "%s", err.msg);
    CHECK_INT(ds.n, 2000);
    CHECK_STR(ds.e[1999].prompt, "q 1999");
    sha256_hex(text.data, text.len, want);
    CHECK_STR(ds.sha256, want);
    ds_release(&ds);
    buf_release(&text);

    char longp[300];
    snprintf(longp, sizeof(longp), "%s/long.jsonl", dir);
    FILE *f = fopen(longp, "w");
    CHECK(f != NULL);
    fputs("{\"prompt\": \"a\"}\n{\"prompt\": \"", f);
    static char block[1 << 20];
    memset(block, 'w', sizeof(block));
    for (int i = 0; i < 65; i++)
        fwrite(block, 1, sizeof(block), f);
    fputs("\"}\n", f);
    fclose(f);
    err_init(&err);
    CHECK(ds_load(longp, DS_JSONL, 1, &ds, &err, 3, 2) != 0);
    CHECK_MSG(strstr(err.msg, ":2: the line is longer than 64 MiB"), "%s", err.msg);
    unlink(longp);
}

TEST(shipped_datasets_load)
{
    struct ds_set ds;
    struct err err;
    err_init(&err);
    CHECK_MSG(ds_load("experiments/data/prompts.jsonl", DS_JSONL, 1, &ds, &err, 3, 2) == 0, "%s",
              err.msg);
    CHECK_INT(ds.n, 200);
    ds_release(&ds);
    CHECK_MSG(ds_load("experiments/data/sharegpt.json", DS_SHAREGPT, 1, &ds, &err, 3, 2) == 0, "%s",
              err.msg);
    CHECK_INT(ds.n_skipped, 0);
    CHECK(ds.n >= 50);
    ds_release(&ds);
}

/* The prompt and max_tokens of request i as one string. */
static char *body_of(const struct lg_config *cfg, size_t i, bool warm, long *in, long *out)
{
    struct buf b;
    buf_init(&b, 1 << 20);
    lg_build_body_len(cfg, i, warm, &b, in, out);
    char *s = strdup(b.data);
    buf_release(&b);
    return s;
}

TEST(same_seed_same_prompts_and_lengths)
{
    const char *p = put("many.jsonl", "{\"prompt\": \"a\"}\n{\"prompt\": \"b b\"}\n"
                                      "{\"prompt\": \"c c c\"}\n{\"prompt\": \"d d d d\"}\n"
                                      "{\"prompt\": \"e e e e e\", \"output_len\": 77}\n");
    struct ds_set d1, d2, d3;
    struct err err;
    err_init(&err);
    CHECK(ds_load(p, DS_JSONL, 5, &d1, &err, 3, 2) == 0);
    CHECK(ds_load(p, DS_JSONL, 5, &d2, &err, 3, 2) == 0);
    CHECK(ds_load(p, DS_JSONL, 6, &d3, &err, 3, 2) == 0);
    struct lg_config a = {.endpoint = "/v1/completions", .output_len = 9, .seed = 5};
    CHECK(len_parse("uniform:1:1000", "x", &a.out_dist, &err, 2) == 0);
    struct lg_config b = a, c = a;
    a.dataset = &d1;
    b.dataset = &d2;
    c.dataset = &d3;
    bool differs = false, seen[5] = {false};
    for (size_t i = 0; i < 10; i++) {
        long in1, out1, in2, out2, in3, out3;
        char *x = body_of(&a, i, false, &in1, &out1), *y = body_of(&b, i, false, &in2, &out2),
             *z = body_of(&c, i, false, &in3, &out3);
        CHECK_STR(x, y);
        CHECK_INT(in1, in2);
        CHECK_INT(out1, out2);
        differs = differs || strcmp(x, z) != 0;
        json_t *j = json_loads(x, 0, NULL);
        const char *prompt = json_string_value(json_object_get(j, "prompt"));
        CHECK(prompt != NULL);
        if (prompt) {
            seen[prompt[0] - 'a'] = true;
            CHECK_INT(in1, (long)(strlen(prompt) + 1) / 2); /* words */
            if (prompt[0] == 'e')
                CHECK_INT(out1, 77); /* the entry's own length wins */
        }
        CHECK_INT(json_integer_value(json_object_get(j, "max_tokens")), out1);
        json_decref(j);
        free(x), free(y), free(z);
    }
    CHECK(differs); /* another seed, another order */
    for (int k = 0; k < 5; k++)
        CHECK(seen[k]); /* ten requests over five entries: each is used */
    ds_release(&d1);
    ds_release(&d2);
    ds_release(&d3);

    /* random prompts with a length distribution: seeded, and the ids of a
     * fixed-length prompt are what they were before distributions existed */
    struct lg_config r = {.endpoint = "/v1/completions",
                          .output_len = 4,
                          .seed = 3,
                          .vocab_size = 100,
                          .input_len = 8};
    long in, out;
    char *fixed = body_of(&r, 2, false, &in, &out);
    CHECK(len_parse("8", "x", &r.in_dist, &err, 2) == 0);
    char *fixed2 = body_of(&r, 2, false, &in, &out);
    CHECK_STR(fixed, fixed2);
    CHECK(len_parse("normal:50:20:1:200", "x", &r.in_dist, &err, 2) == 0);
    long lens[6];
    for (size_t i = 0; i < 6; i++) {
        char *s1 = body_of(&r, i, false, &lens[i], &out), *s2 = body_of(&r, i, false, &in, &out);
        CHECK_STR(s1, s2);
        json_t *j = json_loads(s1, 0, NULL);
        CHECK_INT(json_array_size(json_object_get(j, "prompt")), lens[i]);
        json_decref(j);
        free(s1), free(s2);
    }
    CHECK(lens[0] != lens[1] || lens[1] != lens[2] || lens[2] != lens[3]);
    free(fixed), free(fixed2);
}

TEST(chat_bodies_from_dataset)
{
    const char *p = put("chat.jsonl", "{\"messages\": [{\"role\": \"system\", \"content\": "
                                      "\"s\"}, {\"role\": \"user\", \"content\": \"u v\"}]}\n");
    struct ds_set ds;
    struct err err;
    err_init(&err);
    CHECK(ds_load(p, DS_JSONL, 5, &ds, &err, 3, 2) == 0);
    struct lg_config cfg = {.endpoint = "/v1/chat/completions", .output_len = 3, .dataset = &ds};
    long in, out;
    char *s = body_of(&cfg, 0, false, &in, &out);
    json_t *j = json_loads(s, 0, NULL);
    json_t *m = json_object_get(j, "messages");
    CHECK_INT(json_array_size(m), 2);
    CHECK_STR(json_string_value(json_object_get(json_array_get(m, 1), "content")), "u v");
    CHECK_INT(in, 3);
    json_decref(j);
    free(s);
    /* the completions endpoint gets the contents as one prompt */
    cfg.endpoint = "/v1/completions";
    s = body_of(&cfg, 0, false, &in, &out);
    j = json_loads(s, 0, NULL);
    CHECK_STR(json_string_value(json_object_get(j, "prompt")), "s\nu v");
    json_decref(j);
    free(s);
    ds_release(&ds);
}

TEST_MAIN()
