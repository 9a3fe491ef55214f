/*
 * test.h: the whole unit-test harness. A test file defines TEST(name)
 * functions and ends with TEST_MAIN(); the binary runs every test, prints
 * each failure with file:line, and ends with "N passed, N failed".
 * A test may #include the .c under test to reach its statics.
 */
#ifndef TESTS_TEST_H
#define TESTS_TEST_H

#include <math.h>
#include <stdio.h>
#include <string.h>

struct test_case {
    const char *name;
    void (*fn)(void);
};
static struct test_case test_cases[512];
static int test_n, test_pass, test_fail, test_cur_failed;

#define TEST(name)                                                                                 \
    static void test_##name(void);                                                                 \
    __attribute__((constructor)) static void reg_##name(void)                                      \
    {                                                                                              \
        test_cases[test_n++] = (struct test_case){#name, test_##name};                             \
    }                                                                                              \
    static void test_##name(void)

#define CHECK_MSG(cond, ...)                                                                       \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            test_cur_failed = 1;                                                                   \
            fprintf(stderr, "%s:%d: check failed: ", __FILE__, __LINE__);                          \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fputc('\n', stderr);                                                                   \
        }                                                                                          \
    } while (0)
#define CHECK(cond) CHECK_MSG(cond, "%s", #cond)
#define CHECK_INT(a, b)                                                                            \
    CHECK_MSG((long long)(a) == (long long)(b), "%s == %lld, want %lld", #a, (long long)(a),       \
              (long long)(b))
static inline int test_str_eq(const char *a, const char *b)
{
    return a && b && strcmp(a, b) == 0;
}
static inline const char *test_str_show(const char *a)
{
    return a ? a : "(null)";
}
#define CHECK_STR(a, b)                                                                            \
    CHECK_MSG(test_str_eq((a), (b)), "%s == \"%s\", want \"%s\"", #a, test_str_show(a),            \
              test_str_show(b))
#define CHECK_NEAR(a, b, tol)                                                                      \
    CHECK_MSG(fabs((double)(a) - (double)(b)) <= (tol), "%s == %.9g, want %.9g +- %g", #a,         \
              (double)(a), (double)(b), (double)(tol))

/* Run every test whose name contains filter (every test when filter is
 * NULL), naming each that fails on stderr. */
static inline void test_run_each(const char *filter)
{
    for (int i = 0; i < test_n; i++) {
        if (filter && !strstr(test_cases[i].name, filter))
            continue;
        test_cur_failed = 0;
        test_cases[i].fn();
        if (test_cur_failed)
            fprintf(stderr, "FAIL %s\n", test_cases[i].name);
        test_cur_failed ? test_fail++ : test_pass++;
    }
}
/* "N passed, N failed"; the exit status, 1 when a test failed. */
static inline int test_report(void)
{
    printf("%d passed, %d failed\n", test_pass, test_fail);
    return test_fail != 0;
}

/* argv[1], when given, runs only the tests whose names contain it. */
#define TEST_MAIN()                                                                                \
    int main(int argc, char **argv)                                                                \
    {                                                                                              \
        test_run_each(argc > 1 ? argv[1] : NULL);                                                  \
        return test_report();                                                                      \
    }

#endif
