/*
 * runner_expdiff: which variant settings make `sweep run --resume` refuse a
 * folder (expdiff_variant): the server and client settings that decide what
 * a point measures differ, named by their schema path; the grid, repeats,
 * waits, port and metrics do not count; env order does not, flag order does.
 * And the extraction rule (expdiff_rules), which --resume refuses to change.
 */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "test.h"

#include "config/expdiff.h"
#include "config/experiment.h"

#define BASE                                                                                       \
    "name: t\n"                                                                                    \
    "server:\n"                                                                                    \
    "  model: models/m.gguf\n"                                                                     \
    "  flags: {a: 1, b: 2}\n"                                                                      \
    "  env: {X: '1', Y: '2'}\n"                                                                    \
    "bench: {input_len: 8, output_len: 8, grid: ['1:2', '2:4']}\n"

/* expdiff_variant of BASE against BASE with `from` replaced by `to`
 * (NULL: equal), or "load error". */
static const char *diff_by(const char *from, const char *to, bool rules)
{
    static char out[64];
    const char *at = strstr(BASE, from);
    if (!at)
        return "no such text";
    char text[1024];
    snprintf(text, sizeof(text), "%.*s%s%s", (int)(at - BASE), BASE, to, at + strlen(from));
    struct experiment a, b;
    struct err e;
    err_init(&e);
    if (exp_load_string("a.yaml", BASE, strlen(BASE), &a, &e) != 0)
        return "load error";
    if (exp_load_string("b.yaml", text, strlen(text), &b, &e) != 0) {
        fprintf(stderr, "%s\n", e.msg);
        exp_release(&a);
        return "load error";
    }
    const char *field = rules ? expdiff_rules(&a.variants[0], &b.variants[0])
                              : expdiff_variant(&a.variants[0], &b.variants[0]);
    snprintf(out, sizeof(out), "%s", field ? field : "equal");
    exp_release(&a);
    exp_release(&b);
    return out;
}

static const char *diff(const char *from, const char *to)
{
    return diff_by(from, to, false);
}

TEST(point_settings_that_differ_are_named)
{
    CHECK_STR(diff("models/m.gguf", "models/other.gguf"), "server.model");
    CHECK_STR(diff("{a: 1, b: 2}", "{a: 1, b: 3}"), "server.flags");
    CHECK_STR(diff("{a: 1, b: 2}", "{b: 2, a: 1}"), "server.flags"); /* argv order changes */
    CHECK_STR(diff("{a: 1, b: 2}", "{a: 1}"), "server.flags");
    CHECK_STR(diff("{X: '1', Y: '2'}", "{X: '1', Y: '3'}"), "server.env");
    CHECK_STR(diff("input_len: 8", "input_len: 9"), "bench.input_len");
    CHECK_STR(diff("output_len: 8", "output_len: 8, warmup: 5"), "bench.warmup");
    CHECK_STR(diff("output_len: 8", "output_len: 8, request_rate: 4"), "bench.request_rate");
    /* the workload keys (issue 14) */
    CHECK_STR(diff("input_len: 8", "input_len: {dist: uniform, min: 1, max: 15}"),
              "bench.input_len"); /* the same mean, another distribution */
    CHECK_STR(diff("output_len: 8", "output_len: 8, endpoint: chat"), "bench.endpoint");
    CHECK_STR(diff("output_len: 8", "output_len: 8, rate_kind: constant"), "bench.rate_kind");
    CHECK_STR(diff("output_len: 8", "output_len: 8, dataset: {kind: jsonl, path: d.jsonl}"),
              "bench.dataset.kind");
    CHECK_STR(diff("output_len: 8", "output_len: 8, dataset: {seed: 7}"), "bench.dataset.seed");
    CHECK_STR(diff("  model:", "  host: 127.0.0.2\n  model:"), "server.host");
    CHECK_STR(diff("  model:", "  args: [--x]\n  model:"), "server.args");
}

TEST(settings_that_do_not_change_a_point_are_equal)
{
    CHECK_STR(diff("{a: 1, b: 2}", "{a: 1, b: 2}"), "equal");
    CHECK_STR(diff("{X: '1', Y: '2'}", "{Y: '2', X: '1'}"), "equal");
    CHECK_STR(diff("['1:2', '2:4']", "['1:2', '2:4', '8:8']"), "equal");
    CHECK_STR(diff("output_len: 8", "output_len: 8, repeat: 3, timeout_s: 5"), "equal");
    CHECK_STR(
        diff("  model:", "  port: 8000\n  ready: {timeout_s: 9}\n  stop: {grace_s: 1}\n  model:"),
        "equal");
    CHECK_STR(diff("bench:", "metrics: {preset: vllm}\nbench:"), "equal");
    CHECK_STR(diff("input_len: 8", "input_len: \"8\""), "equal");
    CHECK_STR(diff("output_len: 8", "output_len: 8, find_max: {start: 2}"), "equal");
}

TEST_MAIN()

/* W3-H2: the extraction rule (expdiff_rules): preset, patterns (a map:
 * order does not count) and server_map; require and the grid do not. */
TEST(extraction_rules_that_differ_are_named)
{
    CHECK_STR(diff_by("bench:", "metrics: {preset: vllm}\nbench:", true), "metrics.preset");
    CHECK_STR(diff_by("bench:", "metrics: {patterns: {x: 'X: ([0-9]+)'}}\nbench:", true),
              "metrics.patterns");
    CHECK_STR(diff_by("bench:", "metrics: {server_map: {server_x: 'a_total'}}\nbench:", true),
              "metrics.server_map");
    CHECK_STR(diff_by("bench:", "metrics: {require: [output_throughput]}\nbench:", true), "equal");
    CHECK_STR(diff_by("{a: 1, b: 2}", "{a: 1, b: 3}", true), "equal");
    /* the same patterns in another order: one rule */
    const char *two = BASE "metrics: {patterns: {x: 'X: ([0-9]+)', y: 'Y: ([0-9]+)'}}\n";
    const char *swapped = BASE "metrics: {patterns: {y: 'Y: ([0-9]+)', x: 'X: ([0-9]+)'}}\n";
    const char *other = BASE "metrics: {patterns: {y: 'Y: ([0-9]+)', x: 'X:([0-9]+)'}}\n";
    struct experiment a, b, c;
    struct err e;
    err_init(&e);
    CHECK_INT(exp_load_string("a.yaml", two, strlen(two), &a, &e), 0);
    CHECK_INT(exp_load_string("b.yaml", swapped, strlen(swapped), &b, &e), 0);
    CHECK_INT(exp_load_string("c.yaml", other, strlen(other), &c, &e), 0);
    CHECK(expdiff_rules(&a.variants[0], &b.variants[0]) == NULL);
    const char *field = expdiff_rules(&a.variants[0], &c.variants[0]);
    CHECK_STR(field ? field : "equal", "metrics.patterns");
    exp_release(&a);
    exp_release(&b);
    exp_release(&c);
}
