/*
 * engine_guard: serve/guard.c without a socket: --allowed-origins in both
 * spellings (JSON list, comma-separated) and its refusals, the CORS answer
 * for listed, unlisted and absent origins, which routes need the key, and
 * the bearer-token check (missing, wrong scheme, wrong key, prefix of the
 * key, the key).
 */
#include <string.h>

#include "fp4.h"
#include "test.h"

#include "serve/guard.h"

TEST(origins_both_spellings)
{
    struct guard g;
    struct err err;
    err_init(&err);
    const char *lists[] = {"[\"https://a.example\", \"http://b.example:8080\"]",
                           "https://a.example, http://b.example:8080"};
    for (int i = 0; i < 2; i++) {
        CHECK_INT(guard_init(&g, NULL, false, lists[i], &err), 0);
        CHECK_INT(g.n_origins, 2);
        CHECK(!g.any_origin);
        bool vary;
        CHECK_STR(guard_cors_origin(&g, "https://a.example", &vary), "https://a.example");
        CHECK(vary);
        CHECK_STR(guard_cors_origin(&g, "http://b.example:8080", &vary), "http://b.example:8080");
        CHECK(guard_cors_origin(&g, "https://c.example", &vary) == NULL);
        CHECK(vary); /* the answer still depends on the origin */
        CHECK(guard_cors_origin(&g, NULL, &vary) == NULL);
        CHECK(!vary);
        guard_release(&g);
    }
}

TEST(origins_default_any_and_none)
{
    struct guard g;
    struct err err;
    err_init(&err);
    bool vary;
    CHECK_INT(guard_init(&g, NULL, false, NULL, &err), 0); /* vLLM's default: "*" */
    CHECK_STR(guard_cors_origin(&g, "https://anything.example", &vary), "*");
    CHECK(!vary);
    guard_release(&g);
    CHECK_INT(guard_init(&g, NULL, false, "[\"*\"]", &err), 0);
    CHECK_STR(guard_cors_origin(&g, "https://x.example", &vary), "*");
    guard_release(&g);
    const char *none[] = {"", "[]"};
    for (int i = 0; i < 2; i++) {
        CHECK_INT(guard_init(&g, NULL, false, none[i], &err), 0);
        CHECK(guard_cors_origin(&g, "https://x.example", &vary) == NULL);
        guard_release(&g);
    }
}

TEST(origins_refused_with_a_reason)
{
    const char *bad[][2] = {
        {"[\"http://a\", 3]", "item 1 is not a string"},
        {"[\"a\"", "is not a JSON list of strings"},
        {"{\"a\": 1}", "not a list"},
        {"x{a:1}", "is not an origin"},
        {"https://a.example/", "is not an origin"},
        {"a.example", "is not an origin"},
        {"https://a.example,,https://b.example", "an empty origin"},
        {"https://a .example", "holds a space"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        struct guard g;
        struct err err;
        err_init(&err);
        CHECK_INT(guard_init(&g, NULL, false, bad[i][0], &err), -1);
        CHECK_INT(err.code, FP_ERR_USAGE);
        CHECK_MSG(strstr(err.msg, "--allowed-origins") && strstr(err.msg, bad[i][1]), "%s: %s",
                  bad[i][0], err.msg);
        guard_release(&g);
    }
}

TEST(which_routes_need_the_key)
{
    struct guard g;
    struct err err;
    err_init(&err);
    CHECK_INT(guard_init(&g, NULL, false, NULL, &err), 0);
    CHECK(!guard_needs_key(&g, "/v1/completions")); /* no key: all open */
    guard_release(&g);
    CHECK_INT(guard_init(&g, "", false, NULL, &err), 0);
    CHECK(!guard_needs_key(&g, "/v1/completions")); /* an empty key is none */
    guard_release(&g);
    CHECK_INT(guard_init(&g, "k", false, NULL, &err), 0);
    CHECK(guard_needs_key(&g, "/v1/completions"));
    CHECK(guard_needs_key(&g, "/v1/models"));
    CHECK(guard_needs_key(&g, "/no/such/route"));
    CHECK(!guard_needs_key(&g, "/health"));
    CHECK(!guard_needs_key(&g, "/v1/health"));
    CHECK(!guard_needs_key(&g, "/metrics"));
    guard_release(&g);
    CHECK_INT(guard_init(&g, "k", true, NULL, &err), 0);
    CHECK(guard_needs_key(&g, "/health"));
    CHECK(guard_needs_key(&g, "/metrics"));
    guard_release(&g);
}

TEST(bearer_token_check)
{
    struct guard g;
    struct err err;
    err_init(&err);
    CHECK_INT(guard_init(&g, "sk-secret", false, NULL, &err), 0);
    CHECK(guard_auth_refusal(&g, "Bearer sk-secret") == NULL);
    CHECK(guard_auth_refusal(&g, "bearer   sk-secret") == NULL); /* scheme in any case */
    CHECK(strstr(guard_auth_refusal(&g, NULL), "no API key"));
    CHECK(strstr(guard_auth_refusal(&g, ""), "no API key"));
    CHECK(strstr(guard_auth_refusal(&g, "Basic c2stc2VjcmV0"), "not a bearer token"));
    CHECK(strstr(guard_auth_refusal(&g, "Bearer sk-secreT"), "incorrect"));
    CHECK(strstr(guard_auth_refusal(&g, "Bearer sk-secre"), "incorrect"));
    CHECK(strstr(guard_auth_refusal(&g, "Bearer sk-secret2"), "incorrect"));
    CHECK(strstr(guard_auth_refusal(&g, "Bearer "), "incorrect"));
    guard_release(&g);
    CHECK_INT(guard_init(&g, NULL, false, NULL, &err), 0);
    CHECK(guard_auth_refusal(&g, NULL) == NULL);
    guard_release(&g);
}

TEST_MAIN()
