/*
 * runner_experiment: the experiment loader (defaults, grid forms, prompts
 * expressions, variant merging, templates, limits, error positions), the
 * resolved dump (it must load back to an equal experiment) and the schema.
 */
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "sweep.h"
#include "test.h"
#include "xalloc.h"

#include "config/experiment.h"
#include "config/expr.h"
#include "config/schema.h"
#include "config/tmpl.h"

#define BASE "name: t\nserver: {model: models/m.gguf}\n"

/* Load text; on failure the message goes to stderr and the test fails. */
static int load(const char *text, struct experiment *e)
{
    struct err err;
    err_init(&err);
    int rc = exp_load_string("t.yaml", text, strlen(text), e, &err);
    CHECK_MSG(rc == 0, "unexpected load error: %s", err.msg);
    return rc;
}

/* Load text that must fail; returns the message (static buffer). */
static const char *load_err(const char *text)
{
    static struct err err;
    struct experiment e;
    err_init(&err);
    if (exp_load_string("t.yaml", text, strlen(text), &e, &err) == 0) {
        exp_release(&e);
        return "(loaded without error)";
    }
    CHECK_INT(err.code, RN_ERR_USAGE);
    CHECK(strchr(err.msg, '\n') == NULL);
    return err.msg;
}

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* ---- defaults and basic fields ---- */

TEST(defaults_are_filled_in)
{
    struct experiment e;
    if (load(BASE "bench: {grid: [\"1:8\"]}\n", &e) != 0)
        return;
    CHECK_STR(e.name, "t");
    CHECK_STR(e.description, "");
    CHECK_STR(e.path, "t.yaml");
    CHECK_INT(e.n_variants, 1);
    const struct exp_variant *v = &e.variants[0];
    CHECK_STR(v->name, "default");
    CHECK_INT(v->server.engine, EXP_ENGINE_BUNDLED);
    CHECK_STR(v->server.model, "models/m.gguf");
    CHECK_STR(v->server.host, "127.0.0.1");
    CHECK_INT(v->server.port, 0);
    CHECK_INT(v->server.n_flags, 0);
    CHECK_INT(v->server.args.n, 0);
    CHECK_INT(v->server.n_env, 0);
    CHECK_STR(v->server.ready_path, "/health");
    CHECK_NEAR(v->server.ready_timeout_s, 600, 0);
    CHECK_NEAR(v->server.stop_grace_s, 20, 0);
    CHECK_INT(v->bench.tool, EXP_TOOL_BUILTIN);
    CHECK_INT(v->bench.input_len, 256);
    CHECK_INT(v->bench.output_len, 128);
    CHECK_INT(v->bench.warmup, 2);
    CHECK_NEAR(v->bench.request_rate, 0, 0);
    CHECK_NEAR(v->bench.timeout_s, 1800, 0);
    CHECK_INT(v->bench.repeat, 1);
    CHECK_STR(v->metrics.preset, "sglang");
    CHECK_INT(v->metrics.n_patterns, 0);
    CHECK_INT(v->metrics.require.n, 2);
    CHECK_STR(v->metrics.require.v[0], "output_throughput");
    CHECK_STR(v->metrics.require.v[1], "median_tpot_ms");
    CHECK_STR(e.fit_x, "concurrency");
    CHECK_STR(e.fit_y, "median_tpot_ms");
    CHECK_INT(e.plots.n, 3);
    CHECK_STR(e.plots.v[2], "ttft");
    CHECK(exp_find_variant(&e, "default") == v);
    CHECK(exp_find_variant(&e, "nope") == NULL);
    exp_release(&e);
}

TEST(every_key_is_read)
{
    struct experiment e;
    const char *text = "name: full.run_1\n"
                       "description: |\n  two\n  lines\n"
                       "server:\n"
                       "  engine: command\n"
                       "  command: [python3, -m, sglang.launch_server, --port, \"${port}\"]\n"
                       "  model: /models/llama\n"
                       "  host: 0.0.0.0\n"
                       "  port: 30000\n"
                       "  flags: {tp: 2, enable-x: true, disable-y: false, seed: -1}\n"
                       "  args: [--verbose]\n"
                       "  env: {CUDA_VISIBLE_DEVICES: '0,1', OMP_NUM_THREADS: 2}\n"
                       "  ready: {path: /v1/models, timeout_s: 1.5}\n"
                       "  stop: {grace_s: 0}\n"
                       "bench:\n"
                       "  tool: command\n"
                       "  command: [client, -c, \"${concurrency}\", -n, \"${prompts}\"]\n"
                       "  input_len: 1024\n"
                       "  output_len: 1\n"
                       "  warmup: 0\n"
                       "  timeout_s: 60\n"
                       "  repeat: 3\n"
                       "  grid: [\"4:16\"]\n"
                       "metrics:\n"
                       "  preset: vllm\n"
                       "  patterns: {my_metric: 'X: ([0-9]+)'}\n"
                       "  require: [my_metric, p99_e2e_ms]\n"
                       "analysis: {fit: {x: concurrency, y: my_metric}}\n"
                       "plots: [tpot]\n";
    if (load(text, &e) != 0)
        return;
    const struct exp_variant *v = &e.variants[0];
    CHECK_STR(e.name, "full.run_1");
    CHECK_STR(e.description, "two\nlines\n");
    CHECK_INT(v->server.engine, EXP_ENGINE_COMMAND);
    CHECK_INT(v->server.command.n, 5);
    CHECK_STR(v->server.command.v[4], "${port}"); /* kept as written; plan expands */
    CHECK_STR(v->server.host, "0.0.0.0");
    CHECK_INT(v->server.port, 30000);
    CHECK_INT(v->server.n_flags, 4);
    CHECK_STR(v->server.flags[0].key, "tp");
    CHECK_STR(v->server.flags[0].value, "2");
    CHECK_INT(v->server.flags[0].line, 11);
    CHECK_INT(v->server.flags[0].col, 15);
    CHECK_STR(v->server.flags[3].value, "-1"); /* a negative number is a value */
    CHECK_STR(v->server.env[0].value, "0,1");
    CHECK_STR(v->server.env[1].value, "2");
    CHECK_STR(v->server.ready_path, "/v1/models");
    CHECK_NEAR(v->server.ready_timeout_s, 1.5, 0);
    CHECK_NEAR(v->server.stop_grace_s, 0, 0);
    CHECK_INT(v->bench.tool, EXP_TOOL_COMMAND);
    CHECK_INT(v->bench.command.n, 5);
    CHECK_INT(v->bench.input_len, 1024);
    CHECK_INT(v->bench.repeat, 3);
    CHECK_STR(v->metrics.preset, "vllm");
    CHECK_STR(v->metrics.patterns[0].name, "my_metric");
    CHECK_STR(v->metrics.patterns[0].regex, "X: ([0-9]+)");
    CHECK_STR(e.fit_y, "my_metric");
    CHECK_INT(e.plots.n, 1);
    exp_release(&e);
}

/* ---- grid forms ---- */

static void check_grid(const struct experiment *e, const long *pairs, size_t n)
{
    const struct exp_bench *b = &e->variants[0].bench;
    CHECK_INT(b->n_grid, n);
    for (size_t i = 0; i < n && i < b->n_grid; i++) {
        CHECK_INT(b->grid[i].concurrency, pairs[2 * i]);
        CHECK_INT(b->grid[i].prompts, pairs[2 * i + 1]);
    }
}

TEST(grid_strings_maps_and_duplicates)
{
    struct experiment e;
    if (load(BASE "bench:\n  grid: [\"1:8\", {concurrency: 16, prompts: 48}, \"1:8\", \"64:96\"]\n",
             &e) != 0)
        return;
    const long want[] = {1, 8, 16, 48, 64, 96};
    check_grid(&e, want, 3);
    exp_release(&e);
}

TEST(grid_concurrency_list_with_integer_prompts)
{
    struct experiment e;
    if (load(BASE "bench: {concurrency: [1, 2, 4], prompts: 32}\n", &e) != 0)
        return;
    const long want[] = {1, 32, 2, 32, 4, 32};
    check_grid(&e, want, 3);
    exp_release(&e);
}

TEST(grid_concurrency_list_with_expression)
{
    struct experiment e;
    if (load(BASE "bench:\n  concurrency: [1, 2, 4, 8, 16, 30, 64]\n  prompts: \"max(8, 1.5*c)\"\n",
             &e) != 0)
        return;
    const long want[] = {1, 8, 2, 8, 4, 8, 8, 12, 16, 24, 30, 45, 64, 96};
    check_grid(&e, want, 7);
    exp_release(&e);
    /* rounded up, without binary noise turning 3.0000000000000004 into 4 */
    if (load(BASE "bench: {concurrency: [3, 30], prompts: \"0.1*c + 0.5\"}\n", &e) != 0)
        return;
    const long want2[] = {3, 1, 30, 4};
    check_grid(&e, want2, 2);
    exp_release(&e);
    if (load(BASE "bench: {concurrency: [30], prompts: \"0.1*c\"}\n", &e) != 0)
        return;
    const long want3[] = {30, 3};
    check_grid(&e, want3, 1);
    exp_release(&e);
}

TEST(grid_errors)
{
    CHECK_STR(load_err(BASE "bench: {grid: [\"16:x\"]}\n"),
              "t.yaml:3:16: bad grid entry '16:x': prompts must be a whole number from 1 to "
              "10000000");
    CHECK_STR(load_err(BASE "bench: {grid: [\"0:8\"]}\n"),
              "t.yaml:3:16: bad grid entry '0:8': concurrency must be a whole number from 1 to "
              "65536");
    CHECK_STR(load_err(BASE "bench: {grid: [16]}\n"),
              "t.yaml:3:16: bad grid entry '16': want 'CONCURRENCY:PROMPTS', e.g. '16:48'");
    CHECK_STR(load_err(BASE "bench: {grid: [\" 1:8\"]}\n"),
              "t.yaml:3:16: bad grid entry ' 1:8': concurrency must be a whole number from 1 to "
              "65536");
    CHECK_STR(load_err(BASE "bench: {grid: [\"1:8:9\"]}\n"),
              "t.yaml:3:16: bad grid entry '1:8:9': prompts must be a whole number from 1 to "
              "10000000");
    CHECK_STR(load_err(BASE "bench: {grid: []}\n"),
              "t.yaml:3:15: 'bench.grid' is empty; list at least one point");
    CHECK_STR(load_err(BASE "bench: {grid: [[1, 8]]}\n"),
              "t.yaml:3:16: bad grid entry: want 'CONCURRENCY:PROMPTS' or {concurrency: C, "
              "prompts: P}, got a list");
    CHECK_STR(load_err(BASE "bench: {prompts: 8}\n"),
              "t.yaml:3:18: 'bench.prompts' needs 'bench.concurrency' (the list of "
              "concurrencies)");
    CHECK_STR(load_err(BASE "bench: {concurrency: [1, -2], prompts: 8}\n"),
              "t.yaml:3:26: 'bench.concurrency' entries must be whole numbers from 1 to 65536, "
              "got '-2'");
    CHECK_STR(load_err(BASE "bench: {concurrency: [1], prompts: 0}\n"),
              "t.yaml:3:36: 'bench.prompts' must be from 1 to 10000000, got 0");
    CHECK_STR(load_err(BASE "bench: {concurrency: [1], prompts: \"c*\"}\n"),
              "t.yaml:3:36: bad prompts expression 'c*': expected a number, c, a function or "
              "'(', got end of expression");
    CHECK_STR(load_err(BASE "bench: {input_len: 8}\n"),
              "t.yaml:3:8: missing the grid: give 'bench.grid' (e.g. [\"1:8\", \"16:48\"]) or "
              "'bench.concurrency' with 'bench.prompts'");
    CHECK_STR(load_err(BASE),
              "t.yaml:1:1: missing the grid: give 'bench.grid' (e.g. [\"1:8\", \"16:48\"]) or "
              "'bench.concurrency' with 'bench.prompts'");
}

/* ---- the prompts expression language ---- */

static double ev(const char *text, double c)
{
    struct err err;
    double v = -12345;
    err_init(&err);
    if (expr_eval(text, c, &v, &err, 2) != EXPR_OK)
        fprintf(stderr, "expr '%s': %s\n", text, err.msg);
    return v;
}

static enum expr_status ev_status(const char *text, double c, char *msg, size_t size)
{
    struct err err;
    double v;
    err_init(&err);
    enum expr_status st = expr_eval(text, c, &v, &err, 2);
    snprintf(msg, size, "%s", err.msg);
    return st;
}

TEST(expression_values)
{
    CHECK_NEAR(ev("8", 4), 8, 0);
    CHECK_NEAR(ev("c", 4), 4, 0);
    CHECK_NEAR(ev("1 + 2 * 3", 0), 7, 0);
    CHECK_NEAR(ev("(1 + 2) * 3", 0), 9, 0);
    CHECK_NEAR(ev("10 - 4 - 3", 0), 3, 0); /* left-associative */
    CHECK_NEAR(ev("64 / 4 / 2", 0), 8, 0);
    CHECK_NEAR(ev("-c + 10", 3), 7, 0);
    CHECK_NEAR(ev("--c", 3), 3, 0);
    CHECK_NEAR(ev("2.5e1", 0), 25, 0);
    CHECK_NEAR(ev(".5*c", 8), 4, 0);
    CHECK_NEAR(ev("max(8, 1.5*c)", 4), 8, 0);
    CHECK_NEAR(ev("max(8, 1.5*c)", 64), 96, 0);
    CHECK_NEAR(ev("min(c, 3, 7)", 5), 3, 0);
    CHECK_NEAR(ev("max(c)", 5), 5, 0);
    CHECK_NEAR(ev("ceil(c / 3)", 4), 2, 0);
    CHECK_NEAR(ev("floor(c / 3)", 4), 1, 0);
    CHECK_NEAR(ev("  max ( 2 , min(c*4, 100) )  ", 50), 100, 0);
}

TEST(expression_errors)
{
    char buf[1024];
    const char *msg = buf;
    CHECK_INT(ev_status("", 1, buf, sizeof(buf)), EXPR_SYNTAX);
    CHECK_STR(msg, "expected a number, c, a function or '(', got end of expression");
    CHECK_INT(ev_status("2 +", 1, buf, sizeof(buf)), EXPR_SYNTAX);
    CHECK_INT(ev_status("(c", 1, buf, sizeof(buf)), EXPR_SYNTAX);
    CHECK_STR(msg, "expected ')', got end of expression");
    CHECK_INT(ev_status("c)", 1, buf, sizeof(buf)), EXPR_SYNTAX);
    CHECK_STR(msg, "unexpected ')' at character 2");
    CHECK_INT(ev_status("2 ** c", 1, buf, sizeof(buf)), EXPR_SYNTAX);
    CHECK_INT(ev_status("x * 2", 1, buf, sizeof(buf)), EXPR_SYNTAX);
    CHECK_STR(msg, "unknown name 'x' at character 1 (use c, min, max, ceil, floor)");
    CHECK_INT(ev_status("ceil(1, 2)", 1, buf, sizeof(buf)), EXPR_SYNTAX);
    CHECK_STR(msg, "ceil() takes one argument, got 2");
    CHECK_INT(ev_status("max 3", 1, buf, sizeof(buf)), EXPR_SYNTAX);
    CHECK_INT(ev_status("1.2.3", 1, buf, sizeof(buf)), EXPR_SYNTAX);
    CHECK_INT(ev_status("c\n", 1, buf, sizeof(buf)), EXPR_SYNTAX);
    CHECK_STR(msg, "unexpected byte 0x0a at character 2");
    CHECK_INT(ev_status("8 / (c - 4)", 4, buf, sizeof(buf)), EXPR_VALUE);
    CHECK_STR(msg, "division by zero at character 3");
    CHECK_INT(ev_status("8 / (c - 4)", 2, buf, sizeof(buf)), EXPR_OK);
    CHECK_INT(ev_status("1e308 * 10", 1, buf, sizeof(buf)), EXPR_VALUE);
}

TEST(expression_nesting_is_capped)
{
    char buf[1024];
    const char *msg = buf;
    size_t n = 10000;
    char *deep = xmalloc(2 * n + 2);
    memset(deep, '(', n);
    deep[n] = 'c';
    memset(deep + n + 1, ')', n);
    deep[2 * n + 1] = '\0';
    CHECK_INT(ev_status(deep, 1, buf, sizeof(buf)), EXPR_SYNTAX);
    CHECK(strstr(msg, "nesting too deep") != NULL);
    memset(deep, '-', n);
    deep[n] = '\0';
    CHECK_INT(ev_status(deep, 1, buf, sizeof(buf)), EXPR_SYNTAX);
    free(deep);
    CHECK_NEAR(ev("((((((((((c))))))))))", 7), 7, 0);
}

/* ---- variants ---- */

TEST(variants_merge_maps_and_replace_the_rest)
{
    struct experiment e;
    const char *text = "name: v\n"
                       "server:\n"
                       "  model: models/m.gguf\n"
                       "  flags: {quant: nvfp4, max-batch: 64}\n"
                       "  args: [--a, --b]\n"
                       "  env: {A: '1'}\n"
                       "bench: {grid: [\"1:8\", \"4:16\"], output_len: 64}\n"
                       "variants:\n"
                       "  - {name: mx, server: {flags: {quant: mxfp4}, args: [--c]}}\n"
                       "  - name: nv\n"
                       "    server: {env: {B: '2'}, ready: {timeout_s: 5}}\n"
                       "    bench: {concurrency: [2, 8], prompts: \"4*c\"}\n"
                       "  - {name: more, bench: {grid: [\"64:96\"], output_len: 8}}\n";
    if (load(text, &e) != 0)
        return;
    CHECK_INT(e.n_variants, 3);
    const struct exp_variant *mx = exp_find_variant(&e, "mx"), *nv = exp_find_variant(&e, "nv"),
                             *more = exp_find_variant(&e, "more");
    if (!mx || !nv || !more)
        return;
    /* maps merge: the variant's quant replaces, max-batch stays */
    CHECK_INT(mx->server.n_flags, 2);
    CHECK_STR(mx->server.flags[0].key, "quant");
    CHECK_STR(mx->server.flags[0].value, "mxfp4");
    CHECK_STR(mx->server.flags[1].value, "64");
    /* lists replace */
    CHECK_INT(mx->server.args.n, 1);
    CHECK_STR(mx->server.args.v[0], "--c");
    CHECK_INT(nv->server.args.n, 2);
    CHECK_INT(nv->server.n_env, 2);
    CHECK_STR(nv->server.env[1].key, "B");
    CHECK_NEAR(nv->server.ready_timeout_s, 5, 0);
    CHECK_NEAR(mx->server.ready_timeout_s, 600, 0);
    /* a grid form in a variant replaces the base's other form */
    CHECK_INT(nv->bench.n_grid, 2);
    CHECK_INT(nv->bench.grid[1].concurrency, 8);
    CHECK_INT(nv->bench.grid[1].prompts, 32);
    CHECK_INT(mx->bench.n_grid, 2);
    CHECK_INT(more->bench.n_grid, 1);
    CHECK_INT(more->bench.output_len, 8);
    CHECK_INT(mx->bench.output_len, 64);
    /* the base's flags are untouched by the variants */
    CHECK_STR(nv->server.flags[0].value, "nvfp4");
    exp_release(&e);
}

TEST(variant_may_complete_the_base)
{
    struct experiment e;
    /* no model in the base: every variant gives one */
    const char *text = "name: v\nbench: {grid: [\"1:8\"]}\n"
                       "variants:\n"
                       "  - {name: a, server: {model: a.gguf}}\n"
                       "  - {name: b, server: {model: b.gguf}}\n";
    if (load(text, &e) != 0)
        return;
    CHECK_STR(e.variants[1].server.model, "b.gguf");
    exp_release(&e);
    CHECK_STR(load_err("name: v\nbench: {grid: [\"1:8\"]}\n"
                       "variants:\n"
                       "  - {name: a, server: {model: a.gguf}}\n"
                       "  - {name: b, server: {host: localhost}}\n"),
              "t.yaml:5:23: missing required key 'server.model' (needed when engine is bundled) "
              "(variant 'b')");
    /* the base is checked as written even where every variant overrides it */
    CHECK_STR(load_err(BASE "bench: {grid: [\"1:8\"], repeat: 0}\n"
                            "variants: [{name: a, bench: {repeat: 2}}]\n"),
              "t.yaml:3:32: 'bench.repeat' must be from 1 to 100, got 0");
}

TEST(variant_errors)
{
    CHECK_STR(load_err(BASE "bench: {grid: [\"1:8\"]}\nvariants: [{name: a}, {name: a}]\n"),
              "t.yaml:4:30: duplicate variant name 'a' (first at 4:19)");
    CHECK_STR(load_err(BASE "bench: {grid: [\"1:8\"]}\nvariants: [{name: a, plots: []}]\n"),
              "t.yaml:4:22: unknown key 'plots' in a variant (a variant may set name, server, "
              "bench, metrics)");
    CHECK_STR(load_err(BASE "bench: {grid: [\"1:8\"]}\nvariants: [a, b]\n"),
              "t.yaml:4:12: a variant must be a map with a name, got a string");
    CHECK_STR(load_err(BASE "bench: {grid: [\"1:8\"]}\n"
                            "variants: [{name: a, bench: {grid: [\"2:x\"]}}]\n"),
              "t.yaml:4:37: bad grid entry '2:x': prompts must be a whole number from 1 to "
              "10000000");
    CHECK_STR(load_err(BASE "bench: {grid: [\"1:8\"]}\n"
                            "variants: [{name: a, metrics: {require: [nope_ms]}}]\n"),
              "t.yaml:4:42: unknown metric 'nope_ms' in 'metrics.require' (use a canonical "
              "name, see `sweep extract --help`, or define it in metrics.patterns)");
}

/* ---- templates ---- */

TEST(template_checks_at_load_time)
{
    CHECK_STR(load_err(BASE "bench: {tool: command, command: [c, \"${concurency}\"], grid: "
                            "[\"1:8\"]}\n"),
              "t.yaml:3:37: unknown variable '${concurency}' (did you mean '${concurrency}'?)");
    CHECK_STR(load_err("name: t\nserver: {model: m.gguf, args: [\"--x=${prompts}\"]}\n"
                       "bench: {grid: [\"1:8\"]}\n"),
              "t.yaml:2:32: '${prompts}' cannot be used in 'server.args': it changes per point, "
              "so only bench.command may use it");
    CHECK_STR(load_err("name: t\nserver: {model: m.gguf, env: {X: \"${env:A-B}\"}}\n"
                       "bench: {grid: [\"1:8\"]}\n"),
              "t.yaml:2:34: bad environment variable name in '${env:A-B}' (want ${env:NAME} "
              "with NAME made of letters, digits and '_')");
    struct experiment e;
    /* every server variable, env with and without default, $$, and shell text */
    const char *ok = "name: t\nserver:\n"
                     "  model: \"${env:MODELS:-models}/m-${name}.gguf\"\n"
                     "  args: [\"${model}\", \"${port}\", \"${host}\", \"${url}\", \"${variant}\","
                     " \"${run_dir}\", \"$$HOME\", \"$(id); touch x\", \"${env:HOME}\"]\n"
                     "bench:\n  tool: command\n"
                     "  command: [\"${concurrency}\", \"${prompts}\", \"${input_len}\", "
                     "\"${output_len}\", \"${url}\"]\n"
                     "  grid: [\"1:8\"]\n";
    if (load(ok, &e) == 0)
        exp_release(&e);
}

TEST(tmpl_expand_is_verbatim)
{
    const char *vals[TMPL_N_VARS] = {0};
    struct buf b;
    struct err err;
    vals[TMPL_PORT] = "8000";
    vals[TMPL_MODEL] = "m.gguf";
    buf_init(&b, 1 << 16);
    err_init(&err);
    CHECK_INT(tmpl_expand("$(id); touch x ${port} $$ $5 $${port} `id` $", vals, &b, &err, 2), 0);
    CHECK_STR(b.data, "$(id); touch x 8000 $ $5 ${port} `id` $");
    buf_reset(&b);
    setenv("SWEEP_T_SET", "v1", 1);
    setenv("SWEEP_T_EMPTY", "", 1);
    unsetenv("SWEEP_T_UNSET");
    CHECK_INT(tmpl_expand("${env:SWEEP_T_SET}|${env:SWEEP_T_UNSET:-d f}|${env:SWEEP_T_EMPTY:-e}|"
                          "${env:SWEEP_T_EMPTY}|${env:SWEEP_T_SET:-x}",
                          vals, &b, &err, 2),
              0);
    CHECK_STR(b.data, "v1|d f|e||v1");
    buf_reset(&b);
    CHECK_INT(tmpl_expand("${env:SWEEP_T_UNSET}", vals, &b, &err, 2), -1);
    CHECK_STR(err.msg, "environment variable 'SWEEP_T_UNSET' is not set (set it, or write "
                       "'${env:SWEEP_T_UNSET:-DEFAULT}')");
    err_init(&err);
    CHECK_INT(tmpl_expand("${url}", vals, &b, &err, 2), -1);
    CHECK_STR(err.msg, "'${url}' has no value here");
    err_init(&err);
    CHECK_INT(tmpl_expand("${port", vals, &b, &err, 2), -1);
    CHECK_STR(err.msg, "unterminated '${' in '${port' (write '$$' for a literal '$')");
    buf_release(&b);
}

TEST(tmpl_defaults_nest)
{
    const char *vals[TMPL_N_VARS] = {0};
    struct buf b;
    struct err err;
    vals[TMPL_PORT] = "8000";
    buf_init(&b, 1 << 16);
    err_init(&err);
    setenv("SWEEP_T_SET", "v1", 1);
    unsetenv("SWEEP_T_UNSET");
    /* the default is a template: its own ${...} and $$ are expanded, and the
     * '}' that closes is the one that balances */
    CHECK_INT(tmpl_expand("${env:SWEEP_T_UNSET:-${env:SWEEP_T_SET}}|"
                          "${env:SWEEP_T_UNSET:-${env:SWEEP_T_UNSET:-${port}}}|"
                          "${env:SWEEP_T_UNSET:-$${x}}|${env:SWEEP_T_UNSET:-}|"
                          "${env:SWEEP_T_UNSET:-a}b}|${env:SWEEP_T_SET:-${env:SWEEP_T_UNSET}}",
                          vals, &b, &err, 2),
              0);
    CHECK_STR(b.data, "v1|8000|${x}||ab}|v1");
    buf_reset(&b);
    CHECK_INT(tmpl_expand("${env:SWEEP_T_UNSET:-${env:SWEEP_T_UNSET}}", vals, &b, &err, 2), -1);
    CHECK_STR(err.msg, "environment variable 'SWEEP_T_UNSET' is not set (set it, or write "
                       "'${env:SWEEP_T_UNSET:-DEFAULT}')");
    err_init(&err);
    CHECK_INT(tmpl_expand("${env:SWEEP_T_UNSET:-${env:SWEEP_T_SET}", vals, &b, &err, 2), -1);
    CHECK_STR(err.msg, "unterminated '${' in '${env:SWEEP_T_UNSET:-${env:SWEEP_T_SET}' (write "
                       "'$$' for a literal '$')");
    /* TMPL_MAX_NEST defaults inside each other are fine, one more is not */
    char deep[512] = "x";
    for (int i = 0; i < TMPL_MAX_NEST; i++) {
        char t[512];
        snprintf(t, sizeof(t), "${env:SWEEP_T_UNSET:-%s}", deep);
        snprintf(deep, sizeof(deep), "%s", t);
    }
    buf_reset(&b);
    err_init(&err);
    CHECK_INT(tmpl_expand(deep, vals, &b, &err, 2), 0);
    CHECK_STR(b.data, "x");
    CHECK_INT(tmpl_check(deep, TMPL_ALL, "here", &err, 2), 0);
    char deeper[600];
    snprintf(deeper, sizeof(deeper), "${env:SWEEP_T_UNSET:-%s}", deep);
    CHECK_INT(tmpl_expand(deeper, vals, &b, &err, 2), -1);
    CHECK(strstr(err.msg, "defaults nested deeper than 8 levels in '${env:SWEEP_T_UNSET:-"));
    err_init(&err);
    CHECK_INT(tmpl_check(deeper, TMPL_ALL, "here", &err, 2), -1);
    CHECK(strstr(err.msg, "defaults nested deeper than 8 levels"));
    /* a default is checked like the rest: variables allowed here, names */
    err_init(&err);
    CHECK_INT(tmpl_check("${env:A:-${prompts}}", TMPL_SERVER_SET, "'server.args'", &err, 2), -1);
    CHECK_STR(err.msg, "'${prompts}' cannot be used in 'server.args': it changes per point, so "
                       "only bench.command may use it");
    err_init(&err);
    CHECK_INT(tmpl_check("${env:A:-${env:}}", TMPL_ALL, "here", &err, 2), -1);
    CHECK_STR(err.msg, "bad environment variable name in '${env:}' (want ${env:NAME} with NAME "
                       "made of letters, digits and '_')");
    buf_release(&b);
}

TEST(yaml_byte_order_mark_and_tabs)
{
    struct experiment e;
    /* a BOM at the very start is skipped, and positions count without it */
    if (load("\xef\xbb\xbf" BASE "bench: {grid: [\"1:8\"]}\n", &e) == 0) {
        CHECK_STR(e.name, "t");
        exp_release(&e);
    }
    CHECK_STR(load_err("\xef\xbb\xbfname: t\nserver: {model: m.gguf, port: 0}\n"),
              "t.yaml:2:31: 'server.port' must be auto or a port from 1 to 65535, got '0'");
    CHECK_STR(load_err("\xef\xbb\xbf\xef\xbb\xbf" BASE),
              "t.yaml:1:1: byte order mark (U+FEFF) inside the file; only the very start may "
              "hold one");
    CHECK_STR(load_err("name: \"\xc3\xa9\xef\xbb\xbf\"\n"),
              "t.yaml:1:9: byte order mark (U+FEFF) inside the file; only the very start may "
              "hold one");
    /* a tab in indentation says so, at the tab */
    CHECK_STR(load_err("name: t\nserver:\n\tmodel: m.gguf\n"),
              "t.yaml:3:1: tab character used for indentation; YAML indents with spaces");
    CHECK_STR(load_err("name: t\nserver:\n  model: m.gguf\n \thost: h\n"),
              "t.yaml:4:2: tab character used for indentation; YAML indents with spaces");
    CHECK_STR(load_err("\xef\xbb\xbf\tname: t\n"),
              "t.yaml:1:1: tab character used for indentation; YAML indents with spaces");
    /* a tab after the key is only a separator, and other errors keep their words */
    if (load("name:\tt\nserver: {model: m.gguf}\nbench: {grid: [\"1:8\"]}\n", &e) == 0)
        exp_release(&e);
    CHECK_STR(load_err("name: [t\n"), "t.yaml:2:1: YAML syntax error: did not find expected ',' "
                                      "or ']' (while parsing a flow sequence at 1:7)");
}

/* ---- YAML-level safety ---- */

TEST(billion_laughs_is_refused_fast)
{
    const char *bomb = "a: &a [\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\"]\n"
                       "b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]\n"
                       "c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]\n"
                       "d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]\n"
                       "e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]\n"
                       "f: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]\n"
                       "g: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f]\n"
                       "h: &h [*g,*g,*g,*g,*g,*g,*g,*g,*g]\n"
                       "i: &i [*h,*h,*h,*h,*h,*h,*h,*h,*h]\n";
    double t0 = now_ms();
    const char *msg = load_err(bomb);
    double took = now_ms() - t0;
    CHECK_STR(msg, "t.yaml:1:4: anchors and aliases are not allowed (anchor '&a')");
    /* expanding it would take seconds and gigabytes; refusing takes microseconds */
    CHECK_MSG(took < 10, "billion laughs took %.3f ms", took);
    CHECK_STR(load_err("name: x\nlist: [*nope]\n"),
              "t.yaml:2:8: anchors and aliases are not allowed (alias '*nope')");
}

TEST(deep_nesting_is_refused_without_recursion)
{
    size_t n = 10000;
    char *deep = xmalloc(n + 8);
    memcpy(deep, "x: ", 3);
    memset(deep + 3, '[', n);
    deep[n + 3] = '\0';
    CHECK_STR(load_err(deep), "t.yaml:1:67: nesting deeper than 64 levels");
    free(deep);
    /* 64 levels in all (the top-level map is one) load as far as the schema */
    char ok[256];
    snprintf(ok, sizeof(ok), "x: %.63s%.63s\n",
             "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[",
             "]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]");
    CHECK_STR(load_err(ok), "t.yaml:1:1: unknown key 'x' (did you mean 'analysis.fit.x'?)");
}

TEST(file_limits)
{
    struct experiment e;
    struct err err;
    size_t n = EXP_MAX_FILE_BYTES + 1;
    char *big = xmalloc(n);
    memset(big, '#', n);
    err_init(&err);
    CHECK_INT(exp_load_string("big.yaml", big, n, &e, &err), -1);
    CHECK_STR(err.msg,
              "big.yaml: the file is 1048577 bytes; experiment files are limited to 1 MiB");
    free(big);
    CHECK_STR(load_err(""), "t.yaml:1:1: the file is empty (no YAML content, only blanks or "
                            "comments)");
    err_init(&err);
    CHECK_INT(exp_load_string("nul.yaml", "name: a\0b\n", 10, &e, &err), -1);
    CHECK_STR(err.msg, "nul.yaml:1:8: not valid UTF-8 YAML text: control characters are not "
                       "allowed (byte 0x00)");
    CHECK_STR(load_err("name: \"a\\0b\"\n"), "t.yaml:1:7: NUL character in a string");
    CHECK_STR(load_err("\xff\xfe"
                       "n\0a\0"),
              "t.yaml:1:1: the file is UTF-16 (it starts with a UTF-16 byte order mark); save it "
              "as UTF-8");
    CHECK_STR(load_err("\xfe\xff"
                       "\0n\0a"),
              "t.yaml:1:1: the file is UTF-16 (it starts with a UTF-16 byte order mark); save it "
              "as UTF-8");
    CHECK_STR(load_err("name: \xff\n"),
              "t.yaml:1:7: not valid UTF-8 YAML text: invalid leading UTF-8 octet (byte 0xff)");
    CHECK_STR(load_err("name: x\n[a]: 1\n"), "t.yaml:2:1: map keys must be strings, not a list");
    CHECK_STR(load_err("name: !custom x\n"),
              "t.yaml:1:7: YAML tag '!custom' is not allowed (only core tags such as !!str)");
}

/* ---- messages for common mistakes ---- */

TEST(error_messages)
{
    CHECK_STR(load_err(BASE "bench: {grid: [\"1:8\"], concurency: [1]}\n"),
              "t.yaml:3:24: unknown key 'concurency' in 'bench' (did you mean 'concurrency'?)");
    CHECK_STR(load_err(BASE "bench: {grid: [\"1:8\"], host: x}\n"),
              "t.yaml:3:24: unknown key 'host' in 'bench' (did you mean 'server.host'?)");
    CHECK_STR(load_err(BASE "bench: {grid: [\"1:8\"], input_len: 8, input_len: 9}\n"),
              "t.yaml:3:38: duplicate key 'input_len' (first at 3:24)");
    CHECK_STR(load_err(BASE "bench: {grid: [\"1:8\"], input_len: \"abc\"}\n"),
              "t.yaml:3:35: 'bench.input_len' wants a length (256), uniform:MIN:MAX or "
              "normal:MEAN:SD[:MIN[:MAX]], got 'abc'");
    CHECK_STR(load_err(BASE "bench: {grid: [\"1:8\"], input_len: [1]}\n"),
              "t.yaml:3:35: 'bench.input_len' wants a length or a distribution, got a list");
    CHECK_STR(load_err(BASE "bench: {grid: [\"1:8\"], timeout_s: -1}\n"),
              "t.yaml:3:35: 'bench.timeout_s' must be greater than 0 and at most 604800, got -1");
    CHECK_STR(load_err("name: t\nserver: {model: m.gguf, port: 0}\nbench: {grid: [\"1:8\"]}\n"),
              "t.yaml:2:31: 'server.port' must be auto or a port from 1 to 65535, got '0'");
    CHECK_STR(load_err("name: t\nserver: {model: -m.gguf}\nbench: {grid: [\"1:8\"]}\n"),
              "t.yaml:2:17: 'server.model' value '-m.gguf' starts with '-' and would be read as "
              "an option (write './-...')");
    CHECK_STR(load_err(BASE "bench: {grid: [\"1:8\"]}\nmetrics: {patterns: {x: '(a'}}\n"),
              "t.yaml:4:25: 'metrics.patterns' pattern 'x': bad regex: missing closing "
              "parenthesis at offset 2");
    /* a metric named like a fixed points.csv column would make a second
     * column of that name (pandas renames it, lookups by name get the first) */
    CHECK_STR(load_err(BASE "bench: {grid: [\"1:8\"]}\nmetrics: {patterns: {status: 'x (1)'}}\n"),
              "t.yaml:4:22: 'metrics.patterns' key 'status' is a column of points.csv already "
              "(variant, concurrency, prompts, repeat, status, key, cause, log, started, wall_s); "
              "give the metric another name");
    CHECK_STR(load_err(BASE "bench: {grid: [\"1:8\"]}\nmetrics: {patterns: {wall_s: 'x (1)'}}\n"),
              "t.yaml:4:22: 'metrics.patterns' key 'wall_s' is a column of points.csv already "
              "(variant, concurrency, prompts, repeat, status, key, cause, log, started, wall_s); "
              "give the metric another name");
    CHECK_STR(load_err("name: t\nserver:\n  model: m\n   host: h\n"),
              "t.yaml:4:8: YAML syntax error: mapping values are not allowed in this context");
    CHECK_STR(load_err("name: [a\n"),
              "t.yaml:2:1: YAML syntax error: did not find expected ',' or ']' (while parsing a "
              "flow sequence at 1:7)");
    CHECK_STR(load_err("nam: x\n"), "t.yaml:1:1: unknown key 'nam' (did you mean 'name'?)");
    /* user text in messages stays on one line */
    CHECK_STR(load_err(BASE "bench: {grid: [\"1:8\"], \"a\\nb\": 1}\n"),
              "t.yaml:3:24: unknown key 'a\\nb' in 'bench' (known keys here: tool, command, "
              "input_len, output_len, warmup, request_rate, timeout_s, repeat, grid, concurrency, "
              "prompts, endpoint, rates, rate_kind, find_max, dataset, reset_cache)");
}

/* ---- the dump loads back to an equal experiment ---- */

static bool kv_equal(const struct exp_kv *a, size_t na, const struct exp_kv *b, size_t nb)
{
    if (na != nb)
        return false;
    for (size_t i = 0; i < na; i++)
        if (strcmp(a[i].key, b[i].key) || strcmp(a[i].value, b[i].value))
            return false;
    return true;
}

static bool sv_equal(const struct strvec *a, const struct strvec *b)
{
    if (a->n != b->n)
        return false;
    for (size_t i = 0; i < a->n; i++)
        if (strcmp(a->v[i], b->v[i]))
            return false;
    return true;
}

static bool str_eq(const char *a, const char *b)
{
    return (!a && !b) || (a && b && strcmp(a, b) == 0);
}

static bool exp_equal(const struct experiment *a, const struct experiment *b)
{
    if (!str_eq(a->name, b->name) || !str_eq(a->description, b->description) ||
        !str_eq(a->fit_x, b->fit_x) || !str_eq(a->fit_y, b->fit_y) ||
        !sv_equal(&a->plots, &b->plots) || a->n_variants != b->n_variants ||
        a->slo_ttft_ms != b->slo_ttft_ms || a->slo_tpot_ms != b->slo_tpot_ms ||
        a->slo_e2e_ms != b->slo_e2e_ms)
        return false;
    for (size_t i = 0; i < a->n_variants; i++) {
        const struct exp_variant *x = &a->variants[i], *y = &b->variants[i];
        const struct exp_server *s = &x->server, *t = &y->server;
        const struct exp_bench *p = &x->bench, *q = &y->bench;
        if (!str_eq(x->name, y->name) || s->engine != t->engine ||
            !sv_equal(&s->command, &t->command) || !str_eq(s->model, t->model) ||
            !str_eq(s->host, t->host) || s->port != t->port ||
            !kv_equal(s->flags, s->n_flags, t->flags, t->n_flags) ||
            !sv_equal(&s->args, &t->args) || !kv_equal(s->env, s->n_env, t->env, t->n_env) ||
            !str_eq(s->ready_path, t->ready_path) || s->ready_timeout_s != t->ready_timeout_s ||
            s->stop_grace_s != t->stop_grace_s)
            return false;
        if (p->tool != q->tool || !sv_equal(&p->command, &q->command) ||
            p->input_len != q->input_len || p->output_len != q->output_len ||
            p->warmup != q->warmup || p->request_rate != q->request_rate ||
            p->timeout_s != q->timeout_s || p->repeat != q->repeat || p->n_grid != q->n_grid ||
            !str_eq(p->input_dist, q->input_dist) || !str_eq(p->output_dist, q->output_dist) ||
            p->endpoint != q->endpoint || p->dataset_kind != q->dataset_kind ||
            !str_eq(p->dataset_path, q->dataset_path) || p->seed != q->seed ||
            p->rate_kind != q->rate_kind)
            return false;
        for (size_t g = 0; g < p->n_grid; g++)
            if (p->grid[g].concurrency != q->grid[g].concurrency ||
                p->grid[g].prompts != q->grid[g].prompts || p->grid[g].rate != q->grid[g].rate)
                return false;
        if (!str_eq(x->metrics.preset, y->metrics.preset) ||
            x->metrics.n_patterns != y->metrics.n_patterns ||
            !sv_equal(&x->metrics.require, &y->metrics.require))
            return false;
        for (size_t k = 0; k < x->metrics.n_patterns; k++)
            if (!str_eq(x->metrics.patterns[k].name, y->metrics.patterns[k].name) ||
                !str_eq(x->metrics.patterns[k].regex, y->metrics.patterns[k].regex))
                return false;
    }
    return true;
}

static void round_trip(const char *text)
{
    struct experiment a, b;
    struct buf d1, d2;
    struct err err;
    if (load(text, &a) != 0)
        return;
    buf_init(&d1, 1 << 20);
    buf_init(&d2, 1 << 20);
    exp_dump_yaml(&a, &d1);
    err_init(&err);
    if (exp_load_string("t.yaml", d1.data, d1.len, &b, &err) != 0) {
        CHECK_MSG(0, "the dump does not load: %s\n%s", err.msg, d1.data);
    } else {
        CHECK_MSG(exp_equal(&a, &b), "the dump loads to a different experiment:\n%s", d1.data);
        exp_dump_yaml(&b, &d2);
        CHECK_STR(d2.data, d1.data); /* and dumping again changes nothing */
        exp_release(&b);
    }
    buf_release(&d1);
    buf_release(&d2);
    exp_release(&a);
}

TEST(dump_round_trip)
{
    round_trip(BASE "bench: {grid: [\"1:8\"]}\n");
    round_trip("name: rt\n"
               "description: \"null\"\n"
               "server:\n"
               "  engine: command\n"
               "  command: [python3, -m, x, \"--port=${port}\", \"\", \"~\", \"yes\", \"#x\", "
               "\"a: b\", \"- x\", \"${env:HOME:-/}\", \"$$\", \"tab\\tand\\nnewline\", "
               "\"caf\u00e9 \u2713\"]\n"
               "  host: \"::1\"\n"
               "  port: 30001\n"
               "  flags: {on: true, off: false, n: 1.50, neg: -3, s: \"null\", e: \"\"}\n"
               "  env: {A: \"0\", B: \"true\", C: \"\", D: \"0x10\", E: \".inf\", F: \"1_000\"}\n"
               "  ready: {path: /v1/models, timeout_s: 0.1}\n"
               "  stop: {grace_s: 2.5}\n"
               "bench:\n"
               "  tool: command\n"
               "  command: [c, \"${concurrency}\", \"${url}\"]\n"
               "  repeat: 2\n"
               "  concurrency: [1, 3, 9]\n"
               "  prompts: \"max(2, c/2)\"\n"
               "metrics:\n"
               "  preset: vllm\n"
               "  patterns: {'a_b': '\"quoted\" ([0-9.]+) ''single''', c: 'x: (\\d+)'}\n"
               "  require: [a_b, c]\n"
               "analysis: {fit: {x: concurrency, y: c}}\n"
               "plots: []\n");
    round_trip("name: vars\n"
               "server: {model: m.gguf, flags: {quant: nvfp4}}\n"
               "bench: {grid: [\"1:8\", \"2:4\"], request_rate: 2.5, warmup: 0}\n"
               "variants:\n"
               "  - {name: a, server: {flags: {quant: mxfp4, extra: x}}}\n"
               "  - {name: b, server: {engine: command, command: [s]}, bench: {grid: [\"7:7\"]}}\n"
               "  - {name: default}\n");
    round_trip(BASE "bench:\n"
                    "  grid: [\"1:8\"]\n"
                    "  input_len: {dist: normal, mean: 480.5, sd: 240, min: 2}\n"
                    "  output_len: uniform:1:64\n"
                    "  endpoint: chat\n"
                    "  dataset: {kind: sharegpt, path: experiments/data/sharegpt.json, seed: 3}\n"
                    "analysis: {slo: {ttft_ms: 500, tpot_ms: 50.5, e2e_ms: 9000}}\n"
                    "variants:\n"
                    "  - {name: a}\n"
                    "  - {name: b, bench: {input_len: 7, dataset: {kind: random, path: \"\"}}}\n");
}

/* ---- rate points ---- */

TEST(grid_rates)
{
    struct experiment e;
    if (load(BASE "bench: {grid: [\"r2:64\", \"4:8\", \"r0.25:5000\", \"r2:64\", \"r3:64\"], "
                  "rate_kind: constant}\n",
             &e) != 0)
        return;
    const struct exp_bench *b = &e.variants[0].bench;
    CHECK_INT(b->n_grid, 4); /* the second r2:64 is a duplicate */
    CHECK(b->grid[0].rate == 2 && b->grid[0].prompts == 64 && b->grid[0].concurrency == 64);
    CHECK(b->grid[1].rate == 0 && b->grid[1].concurrency == 4);
    CHECK(b->grid[2].rate == 0.25 && b->grid[2].concurrency == 1024); /* the cap */
    CHECK(b->grid[3].rate == 3);
    CHECK_INT(b->rate_kind, 1);
    exp_release(&e);
    /* the list form: prompts is an expression in the rate */
    if (load(BASE "bench: {rates: [1, 2.5], concurrency: [4], prompts: \"max(4, 10*c)\"}\n", &e) !=
        0)
        return;
    b = &e.variants[0].bench;
    CHECK_INT(b->n_grid, 3);
    CHECK(b->grid[0].rate == 0 && b->grid[0].prompts == 40);
    CHECK(b->grid[1].rate == 1 && b->grid[1].prompts == 10);
    CHECK(b->grid[2].rate == 2.5 && b->grid[2].prompts == 25);
    exp_release(&e);
    round_trip(BASE "bench: {grid: [\"r0.1:8\", \"2:4\"], rate_kind: constant}\n");
    round_trip(BASE "bench: {rates: [0.3, 7], prompts: 9}\n");

    CHECK_STR(load_err(BASE "bench: {grid: [\"r0:5\"]}\n"),
              "t.yaml:3:16: bad grid entry 'r0:5': want 'rRATE:PROMPTS' with RATE from 1e-06 to "
              "1e+06 req/s, e.g. 'r2:64'");
    CHECK_STR(load_err(BASE "bench: {grid: [\"r2\"]}\n"),
              "t.yaml:3:16: bad grid entry 'r2': want 'rRATE:PROMPTS' with RATE from 1e-06 to "
              "1e+06 req/s, e.g. 'r2:64'");
    CHECK_STR(load_err(BASE "bench: {grid: [\"r2:0\"]}\n"),
              "t.yaml:3:16: bad grid entry 'r2:0': prompts must be a whole number from 1 to "
              "10000000");
    CHECK_STR(load_err(BASE "bench: {rates: [1, -2], prompts: 4}\n"),
              "t.yaml:3:20: 'bench.rates' entries must be numbers from 1e-06 to 1e+06 "
              "(req/s), got '-2'");
    /* W3-N11: below the client's lowest rate, refused at check with the limit */
    CHECK_STR(load_err(BASE "bench: {grid: [\"r1e-9:8\"]}\n"),
              "t.yaml:3:16: bad grid entry 'r1e-9:8': want 'rRATE:PROMPTS' with RATE from 1e-06 "
              "to 1e+06 req/s, e.g. 'r2:64'");
    CHECK_STR(load_err(BASE "bench: {rates: [1, 0.0000009], prompts: 4}\n"),
              "t.yaml:3:20: 'bench.rates' entries must be numbers from 1e-06 to 1e+06 "
              "(req/s), got '0.0000009'");
    CHECK_STR(load_err(BASE "bench: {grid: [\"1:8\"], request_rate: 1e-9}\n"),
              "t.yaml:3:38: 'bench.request_rate' must be 0 or at least 1e-06 req/s, got 1e-9");
    CHECK_STR(load_err(BASE "analysis: {slo: {ttft_ms: 100}}\nbench: {grid: [\"1:8\"], "
                            "find_max: {start: 1e-7}}\n"),
              "t.yaml:4:42: 'bench.find_max.start' must be 0 or at least 1e-06 req/s, got 1e-7");
    round_trip(BASE "bench: {grid: [\"r0.000001:8\"], request_rate: 0}\n");
    CHECK_STR(load_err(BASE "bench: {rates: [1]}\n"),
              "t.yaml:3:16: 'bench.rates' needs 'bench.prompts' (an integer, or an expression in "
              "c, the rate, such as \"max(16, 10*c)\")");
    CHECK_STR(load_err(BASE "bench: {grid: [\"1:8\"], rates: [1]}\n"),
              "t.yaml:3:31: 'bench.grid' and 'bench.rates' are two ways to give the points; use "
              "one");
    CHECK_STR(load_err(BASE "bench: {rates: [0.5], prompts: \"c - 1\"}\n"),
              "t.yaml:3:32: prompts expression 'c - 1' gives -0.5 for c=0.5; it must give 1 to "
              "10000000");
}

/* ---- matrix ---- */

TEST(matrix_expands_into_named_variants)
{
    struct experiment e;
    if (load(BASE "bench: {grid: [\"1:8\"], output_len: 16}\n"
                  "matrix:\n  flags.max-batch: [8, 16]\n  flags.quant: [mxfp4, nvfp4]\n"
                  "  bench.output_len: [32]\n",
             &e) != 0)
        return;
    CHECK_INT(e.n_variants, 4);
    const char *want[] = {
        "max-batch=8,quant=mxfp4,output_len=32", "max-batch=8,quant=nvfp4,output_len=32",
        "max-batch=16,quant=mxfp4,output_len=32", "max-batch=16,quant=nvfp4,output_len=32"};
    for (size_t i = 0; i < 4 && i < e.n_variants; i++) {
        const struct exp_variant *v = &e.variants[i];
        CHECK_STR(v->name, want[i]);
        CHECK_INT(v->server.n_flags, 2);
        CHECK_STR(v->server.flags[0].value, i < 2 ? "8" : "16");
        CHECK_STR(v->server.flags[1].value, i % 2 ? "nvfp4" : "mxfp4");
        CHECK_INT(v->bench.output_len, 32);
    }
    exp_release(&e);
    /* crossed with variants: the variant's own settings stay, its name leads */
    if (load("name: t\nserver: {model: m.gguf, flags: {ctx: 512}}\nbench: {grid: [\"1:8\"]}\n"
             "matrix: {flags.quant: [a, b]}\n"
             "variants: [{name: x, server: {flags: {t: 2}}}, {name: y}]\n",
             &e) == 0) {
        CHECK_INT(e.n_variants, 4);
        CHECK_STR(e.variants[0].name, "x,quant=a");
        CHECK_STR(e.variants[3].name, "y,quant=b");
        CHECK_INT(e.variants[0].server.n_flags, 3); /* ctx, t, quant */
        CHECK_INT(e.variants[3].server.n_flags, 2); /* ctx, quant */
        exp_release(&e);
    }
    /* the dump lists the variants it made, and loads back to the same */
    round_trip(BASE "bench: {grid: [\"1:8\"]}\nmatrix: {flags.q: [a, b], env.X: ['1']}\n");

    CHECK_STR(load_err(BASE "bench: {grid: [\"1:8\"]}\nmatrix: {flags.q: [a, a]}\n"),
              "t.yaml:4:23: 'matrix' key 'flags.q' lists 'a' twice");
    CHECK_STR(load_err(BASE "bench: {grid: [\"1:8\"]}\nmatrix: {plots: [tpot]}\n"),
              "t.yaml:4:10: 'matrix' key 'plots' names no setting a variant may change (e.g. "
              "flags.max-batch, server.env.X, bench.output_len)");
    /* a value is decoded where it stands, like any setting */
    CHECK_STR(load_err(BASE "bench: {grid: [\"1:8\"]}\nmatrix: {bench.warmup: [x]}\n"),
              "t.yaml:4:25: 'bench.warmup' wants an integer, got 'x'");
    CHECK_STR(load_err(BASE "bench: {grid: [\"1:8\"]}\nmatrix: {flags.a: [1, 2, 3, 4, 5, 6, 7, "
                            "8], flags.b: [1, 2, 3, 4, 5, 6, 7, 8, 9]}\n"),
              "t.yaml:4:9: 'matrix' makes more than 64 variants");
}

/* ---- workloads: lengths, endpoint, dataset, SLO ---- */

TEST(workload_keys)
{
    struct experiment e;
    if (load(BASE "bench:\n"
                  "  grid: [\"1:8\"]\n"
                  "  input_len: {dist: uniform, min: 64, max: 512}\n"
                  "  output_len: {dist: normal, mean: 100, sd: 30}\n"
                  "  endpoint: chat\n"
                  "  dataset: {kind: jsonl, path: experiments/data/prompts.jsonl}\n"
                  "analysis: {slo: {ttft_ms: 500, tpot_ms: 50}}\n"
                  "variants:\n"
                  "  - name: a\n"
                  "  - {name: b, bench: {input_len: {dist: normal, mean: 9, sd: 1}}}\n",
             &e) != 0)
        return;
    const struct exp_bench *a = &e.variants[0].bench, *b = &e.variants[1].bench;
    CHECK_STR(a->input_dist, "uniform:64:512");
    CHECK_INT(a->input_len, 288);
    CHECK_STR(a->output_dist, "normal:100:30:1:1048576");
    CHECK_INT(a->output_len, 100);
    CHECK_INT(a->endpoint, 1);
    CHECK_INT(a->dataset_kind, 1);
    CHECK_STR(a->dataset_path, "experiments/data/prompts.jsonl");
    CHECK_INT(a->seed, 42);
    /* a variant's distribution replaces the base's whole (no min/max inherited) */
    CHECK_STR(b->input_dist, "normal:9:1:1:1048576");
    CHECK(e.slo_ttft_ms == 500 && e.slo_tpot_ms == 50 && e.slo_e2e_ms == 0);
    exp_release(&e);
    if (load(BASE "bench: {grid: [\"1:8\"], input_len: 33}\n", &e) != 0)
        return;
    CHECK(e.variants[0].bench.input_dist == NULL);
    CHECK_INT(e.variants[0].bench.input_len, 33);
    CHECK_INT(e.variants[0].bench.dataset_kind, 0);
    exp_release(&e);

#define B BASE "bench:\n  grid: [\"1:8\"]\n  "
    CHECK_STR(load_err(B "input_len: {dist: zipf, min: 1, max: 2}\n"),
              "t.yaml:5:21: 'bench.input_len.dist' must be uniform or normal, got 'zipf'");
    CHECK_STR(load_err(B "input_len: {dist: uniform, min: 9}\n"),
              "t.yaml:5:14: 'bench.input_len' with dist: uniform wants min and max (only)");
    CHECK_STR(load_err(B "output_len: {dist: normal, mean: 9}\n"),
              "t.yaml:5:15: 'bench.output_len' with dist: normal wants mean and sd (min and max "
              "optional)");
    CHECK_STR(load_err(B "input_len: {dist: uniform, min: 0, max: 2}\n"),
              "t.yaml:5:14: 'bench.input_len': 'uniform:0:2' needs 1 <= MIN <= MAX <= 1048576");
    CHECK_STR(load_err(B "input_len: {dist: normal, mean: 9, sd: 1, mode: 2}\n"),
              "t.yaml:5:45: unknown key 'mode' in 'bench.input_len' (known keys here: dist, "
              "min, max, mean, sd)");
    CHECK_STR(load_err(B "input_len: {dist: uniform, min: [1], max: 2}\n"),
              "t.yaml:5:35: 'bench.input_len' wants numbers in its distribution, got a list");
    /* the value is quoted in the message: a newline in it stays out */
    CHECK_STR(load_err(B "input_len: \"uniform:1:\\n2\"\n"),
              "t.yaml:5:14: 'bench.input_len': 'uniform:1:?2' wants uniform:MIN:MAX (integers)");
    CHECK_STR(load_err(B "endpoint: grpc\n"),
              "t.yaml:5:13: 'bench.endpoint' must be one of completions, chat, got 'grpc'");
    CHECK_STR(load_err(B "dataset: {kind: jsonl}\n"),
              "t.yaml:5:12: missing required key 'bench.dataset.path' (needed when "
              "bench.dataset.kind is jsonl)");
    CHECK_STR(load_err(B "dataset: {path: experiments/data/prompts.jsonl}\n"),
              "t.yaml:5:19: 'bench.dataset.path' needs 'bench.dataset.kind' jsonl or sharegpt (it "
              "is random)");
    CHECK_STR(load_err(B "tool: command\n  command: [x]\n  dataset: {kind: jsonl, path: "
                         "experiments/data/prompts.jsonl}\n"),
              "t.yaml:7:32: 'bench.dataset' only applies when tool is builtin (give a command "
              "client its file in bench.command)");
    /* the file is read by the plan, not here: a saved experiment.yaml loads without it */
    if (load(B "dataset: {kind: jsonl, path: /nonexistent/x.jsonl}\n", &e) == 0)
        exp_release(&e);
    CHECK_STR(load_err(B "endpoint: chat\n  tool: command\n  command: [x]\n"),
              "t.yaml:5:13: 'bench.endpoint' only applies when tool is builtin, but tool is "
              "command");
    CHECK_STR(load_err(BASE "bench: {grid: [\"1:8\"]}\nanalysis: {slo: {ttft_ms: -1}}\n"),
              "t.yaml:4:27: 'analysis.slo.ttft_ms' must be at least 0 and at most 1e+09, got -1");
    CHECK_STR(load_err(BASE "bench: {grid: [\"1:8\"]}\nanalysis: {slo: {ttft: 5}}\n"),
              "t.yaml:4:18: unknown key 'ttft' in 'analysis.slo' (known keys here: ttft_ms, "
              "tpot_ms, e2e_ms)");
#undef B
}

/* strings another YAML reader would take for numbers are dumped quoted */
TEST(dump_quotes_number_like_strings)
{
    struct experiment e;
    if (load("name: t\nbench: {grid: [\"1:8\"]}\n"
             "server: {model: models/m.gguf, env: {A: \"0x10\", B: \".inf\", C: \"1_000\", D: "
             "\"-.5\", E: \"x1\"}}\n",
             &e) != 0)
        return;
    struct buf d;
    buf_init(&d, 1 << 16);
    exp_dump_yaml(&e, &d);
    const char *want[] = {"A: \"0x10\"", "B: \".inf\"", "C: \"1_000\"", "D: \"-.5\"", "E: x1"};
    for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++)
        CHECK_MSG(strstr(d.data, want[i]) != NULL, "dump lacks %s:\n%s", want[i], d.data);
    buf_release(&d);
    exp_release(&e);
}

/* ---- the schema ---- */

TEST(schema_lists_every_key)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    exp_print_schema(f);
    fclose(f);
    for (size_t i = 0; i < schema_n_keys; i++) {
        char cell[96];
        snprintf(cell, sizeof(cell), "| `%s` ", schema_keys[i].path);
        CHECK_MSG(strstr(text, cell) != NULL, "schema lacks %s", schema_keys[i].path);
    }
    CHECK(strstr(text, "| required when engine is bundled ") != NULL);
    CHECK(strstr(text, "| [output_throughput, median_tpot_ms] ") != NULL);
    free(text);
    /* every default in the table loads (a bad one would fail every experiment) */
    struct experiment e;
    if (load(BASE "bench: {grid: [\"1:8\"]}\n", &e) == 0)
        exp_release(&e);
}

TEST(load_file)
{
    struct experiment e;
    struct err err;
    char path[] = "/tmp/sweep-exp-XXXXXX";
    int fd = mkstemp(path);
    const char *text = BASE "bench: {grid: [\"2:4\"]}\n";
    CHECK(write(fd, text, strlen(text)) == (ssize_t)strlen(text));
    close(fd);
    err_init(&err);
    CHECK_INT(exp_load_file(path, &e, &err), 0);
    CHECK_STR(e.path, path);
    CHECK_INT(e.variants[0].bench.grid[0].prompts, 4);
    exp_release(&e);
    unlink(path);
    err_init(&err);
    CHECK_INT(exp_load_file(path, &e, &err), -1);
    CHECK_INT(err.code, RN_ERR_USAGE);
    CHECK(strstr(err.msg, "No such file or directory") != NULL);
}

/* Write text padded with a comment to exactly size bytes; returns the path. */
static char *padded_file(const char *text, size_t size)
{
    static char path[32];
    snprintf(path, sizeof(path), "/tmp/sweep-exp-XXXXXX");
    int fd = mkstemp(path);
    char *data = xmalloc(size);
    size_t n = strlen(text);
    memcpy(data, text, n);
    memset(data + n, '#', size - n - 1);
    data[size - 1] = '\n';
    CHECK(write(fd, data, size) == (ssize_t)size);
    close(fd);
    free(data);
    return path;
}

TEST(load_file_size_limit_is_exactly_1_mib)
{
    struct experiment e;
    struct err err;
    const char *text = BASE "bench: {grid: [\"2:4\"]}\n";
    /* up to the limit, whatever the read chunk size, a file loads */
    const size_t ok_sizes[] = {1000000, EXP_MAX_FILE_BYTES};
    for (size_t i = 0; i < 2; i++) {
        char *path = padded_file(text, ok_sizes[i]);
        err_init(&err);
        int rc = exp_load_file(path, &e, &err);
        CHECK_MSG(rc == 0, "%zu bytes: %s", ok_sizes[i], err.msg);
        if (rc == 0)
            exp_release(&e);
        unlink(path);
    }
    char *path = padded_file(text, EXP_MAX_FILE_BYTES + 1);
    err_init(&err);
    CHECK_INT(exp_load_file(path, &e, &err), -1);
    CHECK(strstr(err.msg, "1048577 bytes; experiment files are limited to 1 MiB") != NULL);
    unlink(path);
    /* a stream without a size (a pipe) is cut off by the read itself */
    for (size_t extra = 0; extra < 2; extra++) {
        int fds[2];
        CHECK(pipe(fds) == 0);
        pid_t pid = fork();
        if (pid == 0) {
            close(fds[0]);
            char *data = xmalloc(EXP_MAX_FILE_BYTES + 1);
            memset(data, '#', EXP_MAX_FILE_BYTES + 1);
            memcpy(data, text, strlen(text));
            size_t n = EXP_MAX_FILE_BYTES + extra, done = 0;
            data[n - 1] = '\n';
            while (done < n) {
                ssize_t w = write(fds[1], data + done, n - done);
                if (w <= 0)
                    _exit(1);
                done += (size_t)w;
            }
            _exit(0);
        }
        close(fds[1]);
        char fdpath[64];
        snprintf(fdpath, sizeof(fdpath), "/proc/self/fd/%d", fds[0]);
        err_init(&err);
        int rc = exp_load_file(fdpath, &e, &err);
        close(fds[0]);
        waitpid(pid, NULL, 0);
        if (extra == 0) {
            CHECK_MSG(rc == 0, "a 1 MiB pipe: %s", err.msg);
            if (rc == 0)
                exp_release(&e);
        } else {
            CHECK_INT(rc, -1);
            CHECK(strstr(err.msg, "the file is over 1 MiB") != NULL);
        }
    }
}

TEST_MAIN()
