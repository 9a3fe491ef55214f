/*
 * Unit tests for runner/exec/shquote.c, the quoting of the ssh executor's
 * remote command line: the exact text for the plain cases, then a round
 * trip through the real shells (sh, and bash and dash where installed):
 * every hostile word comes back byte for byte as one argument.
 */
#include <string.h>
#include <unistd.h>

#include "capture.h"
#include "test.h"

#include "exec/shquote.h"

TEST(exact_text)
{
    static const struct {
        const char *in, *want;
    } cases[] = {
        {"abc", "'abc'"},       {"", "''"},       {"a b", "'a b'"},
        {"it's", "'it'\\''s'"}, {"'", "''\\'''"}, {"''", "''\\'''\\'''"},
        {"$HOME", "'$HOME'"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct buf b;
        buf_init(&b, 1024);
        CHECK_INT(shq_word(&b, cases[i].in), 0);
        CHECK_STR(b.data, cases[i].want);
        buf_release(&b);
    }
}

TEST(words_are_separated_by_one_space)
{
    struct strvec sv;
    strvec_init(&sv);
    strvec_push(&sv, "exec");
    strvec_push(&sv, "a b");
    strvec_push(&sv, "");
    struct buf b;
    buf_init(&b, 1024);
    CHECK_INT(shq_words(&b, &sv), 0);
    CHECK_STR(b.data, "'exec' 'a b' ''");
    CHECK_INT(shq_words(&b, &sv), 0); /* a non-empty buffer gets a space first */
    CHECK_STR(b.data, "'exec' 'a b' '' 'exec' 'a b' ''");
    buf_release(&b);
    strvec_release(&sv);
}

TEST(cap_is_refused_not_truncated_silently)
{
    struct buf b;
    buf_init(&b, 8);
    CHECK_INT(shq_word(&b, "0123456789"), -1);
    CHECK(b.toobig);
    buf_release(&b);
}

/* The words that would break a naive join: blanks, every quote, expansions,
 * globs, separators, redirections, a newline, options, tilde, UTF-8. */
static const char *const hostile[] = {
    "plain",   "two words", "",     "'",    "''",    "\"",           "it's \"x\"", "$HOME",
    "${PATH}", "$(id)",     "`id`", "\\",   "\\'",   "a\\nb",        "*",          "?[a]",
    ";true",   "a && b",    "a|b",  "> /x", "<y",    "line1\nline2", "-n",         "--",
    "~",       "~root/x",   "#c",   "!x",   "%s\\0", "é ü 字",       "\t tab",     "x=1",
    "{a,b}",   "'$(id)'\\", NULL,
};

/* Run `SHELL -c "printf '%s\0' WORDS"` and compare what printf got. */
static void round_trip(const char *shell)
{
    struct strvec words;
    strvec_init(&words);
    struct buf want, cmd, out;
    buf_init(&want, 1 << 16);
    buf_init(&cmd, 1 << 16);
    buf_init(&out, 1 << 16);
    for (size_t i = 0; hostile[i]; i++) {
        strvec_push(&words, hostile[i]);
        buf_append(&want, hostile[i], strlen(hostile[i]) + 1);
    }
    buf_puts(&cmd, "printf '%s\\0'");
    CHECK_INT(shq_words(&cmd, &words), 0);
    const char *argv[] = {shell, "-c", cmd.data, NULL};
    struct capture_opts opts = {.timeout_ms = 10000};
    struct capture_result res;
    CHECK_INT(capture_run(argv, &opts, &out, &res), 0);
    CHECK_INT(capture_exit_code(&res), 0);
    CHECK_MSG(out.len == want.len && memcmp(out.data, want.data, want.len) == 0,
              "%s: printf saw other words than were quoted (%zu bytes, want %zu)", shell, out.len,
              want.len);
    buf_release(&want);
    buf_release(&cmd);
    buf_release(&out);
    strvec_release(&words);
}

TEST(round_trip_through_real_shells)
{
    static const char *const shells[] = {"/bin/sh",  "/bin/bash", "/bin/dash",
                                         "/bin/zsh", "/bin/ksh",  NULL};
    int ran = 0;
    for (size_t i = 0; shells[i]; i++)
        if (access(shells[i], X_OK) == 0) {
            round_trip(shells[i]);
            ran++;
        }
    CHECK(ran >= 1);
}

TEST_MAIN()
