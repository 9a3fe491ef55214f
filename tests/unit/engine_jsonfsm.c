/*
 * engine_jsonfsm: the JSON object recognizer of constrained decoding
 * (text/jsonfsm.c): whole objects accepted and complete, every proper
 * prefix of them accepted and not complete, texts that are not a JSON
 * object refused, and the two bounds (whitespace runs, nesting).
 */
#include <string.h>

#include "test.h"

#include "text/jsonfsm.h"

static const char *const good[] = {
    "{}",
    "{\"a\":1}",
    " { \"a\" : [ 1 , -2.5e+3 , 0 , 0.25 , 1E9 , -0 ] } ",
    "{\"name\":\"Ada\",\"age\":36,\"ok\":true,\"no\":false,\"x\":null}",
    "{\"s\":\"quote \\\" slash \\\\ \\/ \\b\\f\\n\\r\\t \\u00e9 \\uD83D\\uDE00\"}",
    "{\"nested\":{\"deeper\":[{\"k\":[[],{}]}]}}",
    "{\"utf8\":\"caf\xc3\xa9\"}",
    "{\n  \"a\": 1,\n  \"b\": [true]\n}",
};

static const char *const bad[] = {
    "[1]",                 /* not an object at the top */
    "\"x\"",               /* a string at the top */
    "{a:1}",               /* unquoted key */
    "{\"a\" 1}",           /* no colon */
    "{\"a\":1,}",          /* trailing comma */
    "{\"a\":01}",          /* leading zero */
    "{\"a\":1.}",          /* no fraction digits */
    "{\"a\":-}",           /* no digits */
    "{\"a\":1e}",          /* no exponent digits */
    "{\"a\":tru}",         /* cut literal */
    "{\"a\":nul1}",        /* wrong literal */
    "{\"a\":\"\\x\"}",     /* bad escape */
    "{\"a\":\"\\u12G4\"}", /* bad hex */
    "{\"a\":\"tab\there\"}",
    "{\"a\":[1}", /* mismatched close */
    "{\"a\":1]}",
    "{}}", /* something after the end */
    "{} x",
    "{\"a\":1}{}",
    "{\"a\":      1}", /* a run of 6 blanks (at most 4) */
};

TEST(whole_objects_are_accepted_and_complete)
{
    for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
        struct jfsm f;
        jfsm_init(&f);
        CHECK_MSG(jfsm_feed(&f, good[i], strlen(good[i])), "refused: %s", good[i]);
        CHECK_MSG(jfsm_done(&f), "not complete: %s", good[i]);
    }
}

TEST(every_prefix_is_accepted_and_incomplete)
{
    for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
        size_t n = strlen(good[i]);
        size_t end = n; /* the end: the last '}' (trailing blanks may follow it) */
        while (end > 0 && good[i][end - 1] != '}')
            end--;
        for (size_t k = 0; k + 1 < end; k++) {
            struct jfsm f;
            jfsm_init(&f);
            CHECK_MSG(jfsm_feed(&f, good[i], k), "prefix %zu refused: %s", k, good[i]);
            CHECK_MSG(!jfsm_done(&f), "prefix %zu complete: %s", k, good[i]);
        }
    }
}

TEST(texts_that_are_not_an_object_are_refused)
{
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        struct jfsm f;
        jfsm_init(&f);
        CHECK_MSG(!jfsm_feed(&f, bad[i], strlen(bad[i])), "accepted: %s", bad[i]);
    }
}

TEST(byte_by_byte_equals_at_once)
{
    /* a token is tried on a copy: feeding in pieces must agree */
    const char *t = "{\"k\":[12.5e-3,\"a\\u0041\",{\"z\":null}]}";
    struct jfsm f, g;
    jfsm_init(&f);
    for (size_t i = 0; t[i]; i++) {
        g = f;
        CHECK(jfsm_feed(&g, t + i, 1));
        f = g;
    }
    CHECK(jfsm_done(&f));
}

TEST(nesting_is_bounded)
{
    char t[2 * JFSM_MAX_DEPTH + 8];
    size_t n = 0;
    t[n++] = '{';
    t[n++] = '"';
    t[n++] = 'a';
    t[n++] = '"';
    t[n++] = ':';
    for (int i = 1; i < JFSM_MAX_DEPTH; i++)
        t[n++] = '[';
    struct jfsm f;
    jfsm_init(&f);
    CHECK(jfsm_feed(&f, t, n)); /* JFSM_MAX_DEPTH containers open */
    CHECK(!jfsm_feed(&f, "[", 1));
}

TEST_MAIN()
