/* Unit tests for common/: buffers, string vectors, strict parsing, sha256, opts. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "buf.h"
#include "err.h"
#include "fileio.h"
#include "opts.h"
#include "sha256.h"
#include "strutil.h"
#include "strvec.h"
#include "test.h"
#include "xalloc.h"

TEST(buf_cap_refuses_whole_append)
{
    struct buf b;
    buf_init(&b, 8);
    CHECK_INT(buf_puts(&b, "abcde"), 0);
    CHECK_INT(buf_puts(&b, "fghij"), -1);
    CHECK(b.toobig);
    CHECK_STR(b.data, "abcde");
    CHECK_INT(buf_puts(&b, "fgh"), 0);
    CHECK_STR(b.data, "abcdefgh");
    buf_consume(&b, 3);
    CHECK_STR(b.data, "defgh");
    buf_release(&b);
}

TEST(buf_json_escapes_and_replaces_invalid_utf8)
{
    struct buf b;
    buf_init(&b, 1024);
    buf_json_str(&b, "a\"b\\\n\x01\xc3\xa9\xff", 9);
    CHECK_STR(b.data, "\"a\\\"b\\\\\\n\\u0001\xc3\xa9\xef\xbf\xbd\"");
    buf_reset(&b);
    buf_json_num(&b, 0.1);
    buf_putc(&b, ' ');
    buf_json_num(&b, 42);
    buf_putc(&b, ' ');
    buf_json_num(&b, NAN);
    CHECK_STR(b.data, "0.1 42 null");
    buf_release(&b);
}

TEST(strvec_quotes_for_the_shell)
{
    struct strvec v = STRVEC_INIT;
    strvec_push(&v, "fp4serve");
    strvec_push(&v, "--model");
    strvec_push(&v, "$(id); touch x");
    strvec_push(&v, "it's");
    char *out = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&out, &len);
    strvec_print_quoted(f, &v);
    fclose(f);
    CHECK_STR(out, "fp4serve --model '$(id); touch x' 'it'\\''s'");
    CHECK(v.v[v.n] == NULL);
    free(out);
    strvec_release(&v);
}

TEST(strict_numbers)
{
    long l;
    double d;
    CHECK_INT(str_to_long("42", &l), 0);
    CHECK_INT(l, 42);
    CHECK_INT(str_to_long("42x", &l), -1);
    CHECK_INT(str_to_long("", &l), -1);
    CHECK_INT(str_to_long("99999999999999999999", &l), -1);
    CHECK_INT(str_to_double("1.5e3", &d), 0);
    CHECK_NEAR(d, 1500, 0);
    CHECK_INT(str_to_double("inf", &d), -1);
}

/* Numbers from outside are decimal only: strtod's hex floats, inf/nan,
 * leading spaces, trailing junk and values beyond a double are refused. */
TEST(strict_decimal_numbers)
{
    static const struct {
        const char *s;
        double want;
    } good[] = {{"12", 12},    {"-0.5", -0.5},    {"+3", 3}, {".5", 0.5},     {"5.", 5},
                {"1e3", 1000}, {"1.5E-2", 0.015}, {"0", 0},  {"-0.00", -0.0}, {"0e-999", 0}};
    for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
        double d = -1;
        CHECK_MSG(str_to_double(good[i].s, &d) == 0 && d == good[i].want, "'%s' -> %g", good[i].s,
                  d);
    }
    static const char *const bad[] = {"0x1p3", "0X10",  "0x8",   "nan", "NaN", "-inf", "infinity",
                                      "  12",  "12 ",   "12abc", "1e",  "1e+", ".",    "+",
                                      "",      "1.2.3", "1,5",   "--1", "e5",  "\t7"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        double d = 42;
        errno = 0;
        CHECK_MSG(str_to_double(bad[i], &d) == -1 && d == 42 && errno == EINVAL, "'%s' -> %g",
                  bad[i], d);
    }
    static const char *const range[] = {"1e999", "-1e999", "1e-400"};
    for (size_t i = 0; i < sizeof(range) / sizeof(range[0]); i++) {
        double d = 42;
        errno = 0;
        CHECK_MSG(str_to_double(range[i], &d) == -1 && errno == ERANGE, "'%s' -> %g", range[i], d);
    }
    double d;
    CHECK_INT(str_to_double_n("12\0003", 4, &d), -1); /* a NUL byte inside */
    CHECK_INT(str_to_double_n("12.5xyz", 4, &d), 0);  /* only s[0..n) counts */
    CHECK(d == 12.5);
    char longnum[200];
    memset(longnum, '0', sizeof(longnum) - 2);
    longnum[0] = '.';
    longnum[sizeof(longnum) - 2] = '1';
    longnum[sizeof(longnum) - 1] = '\0';
    CHECK_INT(str_to_double(longnum, &d), 0); /* longer than the stack copy */
    CHECK(d > 0 && d < 1e-190);
}

TEST(suggest_close_names)
{
    const char *names[] = {"concurrency", "prompts", "input_len", NULL};
    CHECK_STR(str_suggest("concurency", names), "concurrency");
    CHECK(str_suggest("zzz", names) == NULL);
    CHECK_INT(str_distance("nmae", "name"), 1);
    CHECK_INT(str_distance("kitten", "sitting"), 3);
}

/* The span str_last_line finds, as a string (at most 127 bytes). */
static const char *last_line_of(const char *text, size_t len)
{
    static char out[128];
    const char *line;
    size_t n = str_last_line(text, len, &line);
    CHECK(line >= text && line + n <= text + len);
    snprintf(out, sizeof(out), "%.*s", (int)n, line);
    return out;
}

TEST(last_non_empty_line)
{
    const char *tail = "a\nb\nsweep: unknown option '--x'\n\n";
    CHECK_STR(last_line_of(tail, strlen(tail)), "sweep: unknown option '--x'");
    CHECK_STR(last_line_of("", 0), "");
    CHECK_STR(last_line_of("\n \r\n", 4), "");
    CHECK_STR(last_line_of("only", 4), "only");
    const char *crlf = "x\r\nerror: bad  \r\n";
    CHECK_STR(last_line_of(crlf, strlen(crlf)), "error: bad");
    CHECK_STR(last_line_of("one\ntwo\nthree", 8), "two"); /* len bounds it, no NUL needed */
}

TEST(path_base_stem_and_dir_name)
{
    CHECK_STR(path_base("models/x.Q4_1.gguf"), "x.Q4_1.gguf");
    CHECK_STR(path_base("plain"), "plain");
    CHECK_STR(path_base("results/run/"), "");
    const char *p = "/sweep";
    CHECK(path_base(p) == p + 1); /* the folder part is "/" */
    char *s = path_stem("models/x.Q4_1.gguf", ".gguf");
    CHECK_STR(s, "x.Q4_1");
    free(s);
    s = path_stem("logs/sweep_c4_p16.log", ".log");
    CHECK_STR(s, "sweep_c4_p16");
    free(s);
    s = path_stem("dir/.log", ".log"); /* nothing before the extension: kept */
    CHECK_STR(s, ".log");
    free(s);
    s = path_stem("a.txt", ".log");
    CHECK_STR(s, "a.txt");
    free(s);
    static const char *const dirs[][2] = {
        {"results/run/", "run"}, {"results/run", "run"}, {"run//", "run"}, {"/", ""}, {"a", "a"}};
    for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++) {
        s = path_dir_name(dirs[i][0]);
        CHECK_STR(s, dirs[i][1]);
        free(s);
    }
}

TEST(sha256_known_vectors)
{
    char hex[65];
    sha256_hex("", 0, hex);
    CHECK_STR(hex, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    sha256_hex("abc", 3, hex);
    CHECK_STR(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    const char *m = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
    sha256_hex(m, strlen(m), hex);
    CHECK_STR(hex, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
}

TEST(opts_parse_and_errors)
{
    long c = 1;
    double rate = 0;
    bool dry = false;
    const char *url = NULL;
    struct strvec pos = STRVEC_INIT, pats = STRVEC_INIT;
    const struct opt opts[] = {
        {"concurrency", 'c', OPT_LONG, &c, "N", "requests in flight", 1, 100000},
        {"request-rate", 0, OPT_DOUBLE, &rate, "R", "req/s", 0, 0},
        {"dry-run", 0, OPT_BOOL, &dry, NULL, "print only", 0, 0},
        {"url", 0, OPT_STR, &url, "URL", "server", 0, 0},
        {"pattern", 0, OPT_LIST, &pats, "NAME=RE", "extra pattern", 0, 0},
    };
    char *argv[] = {"x.yaml",   "-c",        "16",  "--request-rate=2.5", "--dry-run", "--url",
                    "http://h", "--pattern", "a=b", "--pattern",          "c=d",       "--",
                    "--literal"};
    struct err e;
    err_init(&e);
    CHECK_INT(opt_parse(13, argv, opts, 5, &pos, &e, 2), 0);
    CHECK_INT(c, 16);
    CHECK_NEAR(rate, 2.5, 0);
    CHECK(dry);
    CHECK_STR(url, "http://h");
    CHECK_INT(pats.n, 2);
    CHECK_INT(pos.n, 2);
    CHECK_STR(pos.v[1], "--literal");
    char *bad[] = {"--concurency", "3"};
    CHECK_INT(opt_parse(2, bad, opts, 5, NULL, &e, 2), -1);
    CHECK_STR(e.msg, "unknown option '--concurency' (did you mean '--concurrency'?)");
    err_init(&e);
    char *range[] = {"-c", "0"};
    CHECK_INT(opt_parse(2, range, opts, 5, NULL, &e, 2), -1);
    CHECK_INT(e.code, 2);
    char *help[] = {"--help"};
    CHECK_INT(opt_parse(1, help, opts, 5, NULL, &e, 2), 1);
    strvec_release(&pos);
    strvec_release(&pats);
}

/* The subcommands' shared preamble: parse with the command's table, help
 * on stdout from the same description, usage errors with its code. */
TEST(opt_cmd_parses_and_prints_its_help)
{
    long n = 1;
    struct strvec pos = STRVEC_INIT;
    const struct opt opts[] = {{"num", 'n', OPT_LONG, &n, "N", "how many", 1, 9}};
    const struct opt_cmd cmd = {"sweep", "demo", "FILE [-n N]", "A demo command.", 7};
    struct err e;
    err_init(&e);
    char *ok[] = {"-n", "3", "f.yaml"};
    CHECK_INT(opt_cmd_parse(&cmd, opts, OPT_N(opts), 3, ok, &pos, &e), 0);
    CHECK_INT(n, 3);
    CHECK_INT(pos.n, 1);
    char *bad[] = {"-n", "10"};
    CHECK_INT(opt_cmd_parse(&cmd, opts, OPT_N(opts), 2, bad, NULL, &e), -1);
    CHECK_INT(e.code, 7);
    /* --help: the text goes to stdout, caught here in a temporary file; a
     * stale error in e is cleared */
    fflush(stdout);
    int saved = dup(1);
    FILE *tmp = tmpfile();
    CHECK(saved >= 0 && tmp);
    dup2(fileno(tmp), 1);
    char *help[] = {"--help"};
    int rc = opt_cmd_parse(&cmd, opts, OPT_N(opts), 1, help, NULL, &e);
    fflush(stdout);
    dup2(saved, 1);
    close(saved);
    char text[512];
    rewind(tmp);
    size_t len = fread(text, 1, sizeof(text) - 1, tmp);
    text[len] = '\0';
    fclose(tmp);
    CHECK_INT(rc, 1);
    CHECK_INT(e.code, 0);
    CHECK(strncmp(text, "usage: sweep demo FILE [-n N]\n\nA demo command.\n", 46) == 0);
    CHECK(strstr(text, "-n, --num N") != NULL);
    strvec_release(&pos);
}

/* '' is never a value: a path would become "/" once joined. */
TEST(opts_refuse_empty_values)
{
    const char *out = NULL;
    struct strvec pos = STRVEC_INIT, pats = STRVEC_INIT;
    const struct opt opts[] = {
        {"out", 'o', OPT_STR, &out, "DIR", "folder", 0, 0},
        {"pattern", 0, OPT_LIST, &pats, "NAME=RE", "extra pattern", 0, 0},
    };
    struct err e;
    char *a1[] = {"--out", ""}, *a2[] = {"--out="}, *a3[] = {"-o", ""}, *a4[] = {"--pattern", ""};
    char *a5[] = {"run", ""}, *a6[] = {"--", ""};
    char **cases[] = {a1, a2, a3, a4};
    int argc[] = {2, 1, 2, 2};
    const char *want[] = {"option '--out' must not be empty", "option '--out' must not be empty",
                          "option '--out' must not be empty",
                          "option '--pattern' must not be empty"};
    for (int i = 0; i < 4; i++) {
        err_init(&e);
        CHECK_INT(opt_parse(argc[i], cases[i], opts, 2, &pos, &e, 2), -1);
        CHECK_STR(e.msg, want[i]);
        CHECK_INT(e.code, 2);
    }
    err_init(&e);
    CHECK_INT(opt_parse(2, a5, opts, 2, &pos, &e, 2), -1);
    CHECK_STR(e.msg, "empty argument '' (a file or folder name was expected)");
    err_init(&e);
    CHECK_INT(opt_parse(2, a6, opts, 2, &pos, &e, 2), -1);
    strvec_release(&pos);
    strvec_release(&pats);
}

/* An integer option's range is printed as integers, every digit. */
TEST(opts_range_message_is_exact)
{
    long n = 0;
    const struct opt opts[] = {{"ctx", 0, OPT_LONG, &n, "N", "positions", 2, 1 << 20}};
    char *argv[] = {"--ctx", "1"};
    struct err e;
    err_init(&e);
    CHECK_INT(opt_parse(2, argv, opts, 1, NULL, &e, 2), -1);
    CHECK_STR(e.msg, "option '--ctx' must be between 2 and 1048576, got 1");
}

/* Write n bytes of 'x' to a fresh temporary file; returns its path. */
static char *temp_file_of(size_t n)
{
    static char path[32];
    snprintf(path, sizeof(path), "/tmp/sweep-fio-XXXXXX");
    int fd = mkstemp(path);
    char *data = xcalloc(n + 1, 1);
    memset(data, 'x', n);
    CHECK(fd >= 0 && write(fd, data, n) == (ssize_t)n);
    close(fd);
    free(data);
    return path;
}

TEST(file_read_all_honours_the_cap_exactly)
{
    /* a cap below the read chunk, and files right at the cap, still read */
    static const struct {
        size_t cap, size;
        int rc;
    } cases[] = {
        {64, 10, 0},         {64, 64, 0},          {64, 65, -1}, {100000, 99999, 0},
        {100000, 100000, 0}, {100000, 100001, -1}, {0, 0, 0},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char *path = temp_file_of(cases[i].size);
        struct buf b;
        struct err e;
        buf_init(&b, cases[i].cap);
        err_init(&e);
        int rc = file_read_all(path, &b, &e, 3);
        CHECK_MSG(rc == cases[i].rc, "case %zu (cap %zu, %zu bytes): rc %d: %s", i, cases[i].cap,
                  cases[i].size, rc, e.msg);
        if (rc == 0)
            CHECK_MSG(b.len == cases[i].size, "case %zu: read %zu bytes", i, b.len);
        else
            CHECK_MSG(strstr(e.msg, "larger than the") != NULL, "case %zu: %s", i, e.msg);
        buf_release(&b);
        unlink(path);
    }
}

/* W3-M4: neither the temporary file of an atomic write nor an appended log
 * is written through a symlink planted at its name. */
TEST(writes_never_follow_a_planted_symlink)
{
    char dir[] = "/tmp/sweep-unit-links-XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    char *victim = xasprintf("%s/victim", dir), *out = xasprintf("%s/out.txt", dir);
    char *tmp = xasprintf("%s.tmp.%ld", out, (long)getpid()), *log = xasprintf("%s/x.log", dir);
    struct err e;
    err_init(&e);
    CHECK_INT(file_write_atomic(victim, "secret\n", 7, &e, 3), 0);
    CHECK_INT(symlink(victim, tmp), 0);
    CHECK_INT(symlink(victim, log), 0);
    CHECK_INT(file_write_atomic(out, "new\n", 4, &e, 3), 0);
    CHECK_INT(file_append_sync(log, "more\n", 5, &e, 3), -1);
    CHECK_MSG(strstr(e.msg, "x.log") != NULL, "%s", e.msg);
    struct buf b;
    buf_init(&b, 1 << 10);
    CHECK_INT(file_read_all(victim, &b, &e, 3), 0);
    CHECK_MSG(b.len == 7 && memcmp(b.data, "secret\n", 7) == 0, "victim now '%.*s'", (int)b.len,
              b.data);
    buf_reset(&b);
    CHECK_INT(file_read_all(out, &b, &e, 3), 0);
    CHECK_MSG(b.len == 4 && memcmp(b.data, "new\n", 4) == 0, "out '%.*s'", (int)b.len, b.data);
    buf_release(&b);
    CHECK(access(tmp, F_OK) != 0); /* the planted link went, not followed */
    unlink(victim);
    unlink(out);
    unlink(log);
    rmdir(dir);
    free(victim);
    free(out);
    free(tmp);
    free(log);
}

TEST_MAIN()
