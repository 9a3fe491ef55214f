/*
 * runner_scrape fuzz target: the Prometheus text parser and the column
 * expressions over it. Any input parses without a memory error; every
 * sample has a name that starts like a metric name; the input split at a
 * line boundary gives the same samples as the whole; and the known-server
 * columns of the input against itself are all zero deltas or absent.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client/scrape.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > (1u << 16))
        return 0;
    const char *text = (const char *)data;
    struct scrape_set whole, split;
    scrape_set_init(&whole);
    scrape_set_init(&split);
    scrape_parse(text, size, &whole);
    for (size_t i = 0; i < whole.n; i++) {
        char c = whole.s[i].name[0];
        if (!(c == '_' || c == ':' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')))
            abort();
    }
    const char *nl = memchr(text, '\n', size);
    size_t cut = nl ? (size_t)(nl - text) + 1 : size;
    scrape_parse(text, cut, &split);
    scrape_parse(text + cut, size - cut, &split);
    if (split.n != whole.n || split.n_bad != whole.n_bad)
        abort();
    for (size_t i = 0; i < whole.n; i++)
        if (strcmp(split.s[i].name, whole.s[i].name) != 0 ||
            strcmp(split.s[i].labels, whole.s[i].labels) != 0 ||
            (split.s[i].value != whole.s[i].value &&
             !(isnan(split.s[i].value) && isnan(whole.s[i].value))))
            abort();
    struct metric_set m;
    mset_init(&m);
    scrape_columns_from(&whole, &whole, NULL, 0, &m, NULL);
    for (size_t i = 0; i < m.n; i++) /* a ratio of zero deltas is no column */
        if (!(m.m[i].value == 0))
            abort();
    mset_release(&m);
    /* the input as an expression: checked or refused, never a crash */
    char *expr = malloc(size + 1); /* allow: fuzz harness */
    memcpy(expr, data, size);
    expr[size] = '\0';
    struct err e;
    err_init(&e);
    scrape_expr_check(expr, &e);
    free(expr);
    scrape_set_release(&whole);
    scrape_set_release(&split);
    return 0;
}
