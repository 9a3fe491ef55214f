/*
 * runner_plan: expansion of experiments into argv vectors, point keys and
 * log names, model preflight and fingerprints, --only, ports, the bundled
 * engine search, and that shell text in a file reaches a child verbatim.
 */
#include <fcntl.h>
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fileio.h"
#include "sha256.h"
#include "sweep.h"
#include "test.h"
#include "xalloc.h"

#include "config/experiment.h"
#include "config/modelfp.h"
#include "config/plan.h"

extern char **environ;

static char tmpdir[64];

/* A scratch folder shared by the tests of this binary. */
static const char *scratch(void)
{
    if (!tmpdir[0]) {
        snprintf(tmpdir, sizeof(tmpdir), "/tmp/sweep-plan-XXXXXX");
        if (!mkdtemp(tmpdir))
            abort();
    }
    return tmpdir;
}

static char *write_file(const char *name, const void *data, size_t len)
{
    char *path = xasprintf("%s/%s", scratch(), name);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0755);
    if (fd < 0 || write(fd, data, len) != (ssize_t)len)
        abort();
    close(fd);
    return path;
}

/* A small GGUF v3 header, enough for the preflight. */
static char *gguf_file(const char *name, unsigned version)
{
    unsigned char head[32] = {'G', 'G', 'U', 'F', (unsigned char)version, 0, 0, 0};
    return write_file(name, head, sizeof(head));
}

static int load(const char *text, struct experiment *e)
{
    struct err err;
    err_init(&err);
    int rc = exp_load_string("p.yaml", text, strlen(text), e, &err);
    CHECK_MSG(rc == 0, "unexpected load error: %s", err.msg);
    return rc;
}

static int build(const struct experiment *e, const char *run_dir, struct plan *p, struct err *err)
{
    struct plan_opts o = {.run_dir = run_dir,
                          .self_exe = "/opt/sweep/bin/sweep",
                          .bundled_engine = "/opt/sweep/bin/fp4serve"};
    err_init(err);
    return plan_build(e, &o, p, err);
}

/* argv joined with '|' for one-line comparisons. */
static const char *joined(const struct strvec *sv)
{
    static char out[4096];
    size_t o = 0;
    out[0] = '\0';
    for (size_t i = 0; i < sv->n && o < sizeof(out); i++)
        o += (size_t)snprintf(out + o, sizeof(out) - o, "%s%s", i ? "|" : "", sv->v[i]);
    return out;
}

TEST(plan_expand_variables)
{
    struct plan_vars v = {.model = "m.gguf",
                          .host = "h",
                          .url = "http://h:1",
                          .name = "n",
                          .variant = "va",
                          .run_dir = "r",
                          .port = 1,
                          .concurrency = 4,
                          .prompts = 16,
                          .input_len = 8,
                          .output_len = 2};
    struct buf b;
    struct err err;
    buf_init(&b, 1 << 16);
    err_init(&err);
    CHECK_INT(plan_expand("${model} ${port} ${host} ${url} ${name} ${variant} ${run_dir} "
                          "${concurrency} ${prompts} ${input_len} ${output_len} $$",
                          &v, &b, &err),
              0);
    CHECK_STR(b.data, "m.gguf 1 h http://h:1 n va r 4 16 8 2 $");
    buf_reset(&b);
    v.concurrency = -1; /* not available: server side */
    CHECK_INT(plan_expand("-c ${concurrency}", &v, &b, &err), -1);
    CHECK_INT(err.code, RN_ERR_USAGE);
    CHECK_STR(err.msg, "'${concurrency}' has no value here");
    err_init(&err);
    v.model = NULL;
    CHECK_INT(plan_expand("${model}", &v, &b, &err), -1);
    err_init(&err);
    CHECK_INT(plan_expand("${bogus}", &v, &b, &err), -1);
    CHECK_STR(err.msg, "unknown variable '${bogus}' (known: model, port, host, url, name, variant, "
                       "run_dir, concurrency, prompts, input_len, output_len, point, env:NAME)");
    buf_release(&b);
}

TEST(bundled_server_and_builtin_client_argv)
{
    struct experiment e;
    struct plan p;
    struct err err;
    char *model = gguf_file("m.gguf", 3);
    char *text = xasprintf("name: argv\n"
                           "server:\n"
                           "  model: %s\n"
                           "  port: 30000\n"
                           "  flags: {quant: nvfp4, verbose: true, quiet: false, seed: -1}\n"
                           "  args: [--extra, \"${variant}-${port}\"]\n"
                           "  env: {OMP_NUM_THREADS: '2', WHERE: \"${run_dir}/x\"}\n"
                           "bench: {grid: [\"1:8\", \"16:48\"], request_rate: 2.5, warmup: 3}\n",
                           model);
    if (load(text, &e) != 0)
        goto out;
    if (build(&e, "results/argv/1", &p, &err) != 0) {
        CHECK_MSG(0, "plan_build: %s", err.msg);
        goto out_exp;
    }
    CHECK_INT(p.n_variants, 1);
    CHECK_INT(p.n_points, 2);
    const struct plan_variant *pv = &p.variants[0];
    char *want = xasprintf("/opt/sweep/bin/fp4serve|serve|--model|%s|--host|127.0.0.1|--port|"
                           "30000|--drain-timeout|15|--quant|nvfp4|--verbose|--seed|-1|--extra|"
                           "default-30000",
                           model);
    CHECK_STR(joined(&pv->server_argv), want);
    free(want);
    CHECK_STR(joined(&pv->server_env), "OMP_NUM_THREADS=2|WHERE=results/argv/1/x");
    CHECK_STR(pv->url, "http://127.0.0.1:30000");
    CHECK_STR(pv->model_path, model);
    CHECK(pv->model_problem == NULL);
    CHECK_INT(pv->model_fp.exists, 1);
    CHECK_INT(pv->model_fp.size, 32);
    CHECK_STR(joined(&p.points[1].client_argv),
              "/opt/sweep/bin/sweep|bench|--url|http://127.0.0.1:30000|-c|16|-n|48|--input-len|"
              "256|--output-len|128|--warmup|3|--request-rate|2.5|--jsonl|"
              "results/argv/1/default/c16-n48.jsonl");
    CHECK_STR(p.points[0].log_name, "c1-n8.log");
    CHECK_STR(p.points[1].log_name, "c16-n48.log");
    CHECK_INT(strlen(p.points[0].key), 16);
    plan_release(&p);
    /* without a run folder (sweep check) the jsonl path shows the placeholder */
    if (build(&e, NULL, &p, &err) == 0)
        CHECK_STR(p.points[0].client_argv.v[p.points[0].client_argv.n - 1],
                  "<run_dir>/default/c1-n8.jsonl");
    plan_release(&p);
out_exp:
    exp_release(&e);
out:
    free(text);
    free(model);
}

/* Repeat r of the builtin client draws its prompts with seed + r - 1, so
 * that a caching server cannot answer a repeat from its prefix cache;
 * repeat 1 keeps the argv (and key) it had (PLAN_KEY_RECIPE 3). */
TEST(repeats_draw_their_own_prompts)
{
    struct experiment e;
    struct plan p;
    struct err err;
    char *model = gguf_file("m.gguf", 3);
    for (int custom = 0; custom < 2; custom++) {
        char *text = xasprintf("name: rep\nserver: {model: %s}\n"
                               "bench: {grid: [\"2:4\"], repeat: 3%s}\n",
                               model, custom ? ", dataset: {seed: 7}" : "");
        if (load(text, &e) == 0) {
            if (build(&e, "/r", &p, &err) == 0) {
                CHECK_INT(p.n_points, 3);
                const char *want[2][3] = {{NULL, "|--seed|43|", "|--seed|44|"},
                                          {"|--seed|7|", "|--seed|8|", "|--seed|9|"}};
                for (int r = 0; r < 3 && p.n_points == 3; r++) {
                    const char *argv = joined(&p.points[r].client_argv);
                    if (want[custom][r])
                        CHECK_MSG(strstr(argv, want[custom][r]) != NULL, "repeat %d: %s", r + 1,
                                  argv);
                    else
                        CHECK_MSG(strstr(argv, "--seed") == NULL, "repeat 1: %s", argv);
                }
                plan_release(&p);
            } else {
                CHECK_MSG(0, "plan_build: %s", err.msg);
            }
            exp_release(&e);
        }
        free(text);
    }
    free(model);
}

TEST(command_server_and_client_argv)
{
    struct experiment e;
    struct plan p;
    struct err err;
    const char *text = "name: cmd\n"
                       "server:\n"
                       "  engine: command\n"
                       "  command: [python3, -m, sglang.launch_server, --model-path, \"${model}\","
                       " --port, \"${port}\", --host, \"${host}\"]\n"
                       "  model: /nonexistent/llama\n"
                       "  host: \"::1\"\n"
                       "  port: 8000\n"
                       "  flags: {tp: 2}\n"
                       "bench:\n"
                       "  tool: command\n"
                       "  command: [bench, --base-url, \"${url}\", -c, \"${concurrency}\", -n,"
                       " \"${prompts}\", \"${input_len}/${output_len}\", \"${name}.${variant}\","
                       " \"${run_dir}\"]\n"
                       "  repeat: 2\n"
                       "  grid: [\"4:16\"]\n";
    if (load(text, &e) != 0)
        return;
    if (build(&e, "/r", &p, &err) != 0) {
        CHECK_MSG(0, "plan_build: %s", err.msg);
        exp_release(&e);
        return;
    }
    const struct plan_variant *pv = &p.variants[0];
    CHECK_STR(joined(&pv->server_argv), "python3|-m|sglang.launch_server|--model-path|"
                                        "/nonexistent/llama|--port|8000|--host|::1|--tp|2");
    CHECK_STR(pv->url, "http://[::1]:8000");
    CHECK_STR(pv->model_problem, "model path '/nonexistent/llama': does not exist");
    CHECK_INT(pv->model_fp.exists, 0);
    CHECK(p.engine == NULL); /* no bundled variant: no engine needed */
    CHECK_INT(p.n_points, 2);
    CHECK_STR(joined(&p.points[0].client_argv),
              "bench|--base-url|http://[::1]:8000|-c|4|-n|16|256/128|cmd.default|/r");
    CHECK_STR(p.points[0].log_name, "c4-n16-r1.log");
    CHECK_STR(p.points[1].log_name, "c4-n16-r2.log");
    CHECK_INT(p.points[1].repeat, 2);
    CHECK(strcmp(p.points[0].key, p.points[1].key) != 0); /* repeats are distinct points */
    plan_release(&p);
    exp_release(&e);
}

/* Keys of every point of text planned with run_dir. */
static int keys_of(const char *text, const char *run_dir, char keys[][17], size_t max, size_t *n)
{
    struct experiment e;
    struct plan p;
    struct err err;
    if (load(text, &e) != 0)
        return -1;
    int rc = build(&e, run_dir, &p, &err);
    if (rc == 0) {
        *n = p.n_points;
        for (size_t i = 0; i < p.n_points && i < max; i++)
            memcpy(keys[i], p.points[i].key, 17);
    } else {
        fprintf(stderr, "plan_build: %s\n", err.msg);
    }
    plan_release(&p);
    exp_release(&e);
    return rc;
}

TEST(keys_are_stable_and_sensitive)
{
    char *model = gguf_file("k.gguf", 3);
    char a[4][17], b[4][17];
    size_t na = 0, nb = 0;
#define EXP(port, in, extra)                                                                       \
    xasprintf("name: k\nserver: {model: %s, port: %s, args: [\"--x=${port}\"]}\n"                  \
              "bench: {grid: [\"1:8\", \"4:16\"], input_len: %d%s}\n",                             \
              model, port, in, extra)
    char *t1 = EXP("30000", 256, ""), *t2 = EXP("30001", 256, ""), *t3 = EXP("auto", 256, "");
    char *t4 = EXP("30000", 512, ""), *t5 = EXP("30000", 256, ", warmup: 5");
    char *t6 = EXP("30000", 256, ", output_len: 64");
    keys_of(t1, "results/k/1", a, 4, &na);
    CHECK_INT(na, 2);
    CHECK(strcmp(a[0], a[1]) != 0);
    /* the port (fixed or auto) and the run folder do not change keys */
    keys_of(t2, "results/k/2", b, 4, &nb);
    CHECK(nb == 2 && strcmp(a[0], b[0]) == 0 && strcmp(a[1], b[1]) == 0);
    keys_of(t3, NULL, b, 4, &nb);
    CHECK(nb == 2 && strcmp(a[0], b[0]) == 0 && strcmp(a[1], b[1]) == 0);
    /* what determines the measurement does */
    keys_of(t4, "results/k/1", b, 4, &nb);
    CHECK(nb == 2 && strcmp(a[0], b[0]) != 0 && strcmp(a[1], b[1]) != 0);
    keys_of(t5, "results/k/1", b, 4, &nb);
    CHECK(nb == 2 && strcmp(a[0], b[0]) != 0);
    keys_of(t6, "results/k/1", b, 4, &nb);
    CHECK(nb == 2 && strcmp(a[0], b[0]) != 0);
    /* ... and so does the model's content */
    free(gguf_file("k.gguf", 2));
    keys_of(t1, "results/k/1", b, 4, &nb);
    CHECK(nb == 2 && strcmp(a[0], b[0]) != 0);
    free(t1);
    free(t2);
    free(t3);
    free(t4);
    free(t5);
    free(t6);
    free(model);
#undef EXP
}

/* The bundled engine drains on SIGTERM for 3/4 of the stop grace, so it
 * ends before sweep's SIGKILL (docs/reliability.md G8); a drain-timeout of
 * the file's own wins, and neither changes the keys. */
TEST(bundled_drain_follows_the_grace)
{
    char *model = gguf_file("d.gguf", 3);
    const char *stops[] = {"stop: {grace_s: 4}, ", "", "flags: {drain-timeout: 9}, "};
    const char *want[] = {"|--port|30000|--drain-timeout|3", "|--port|30000|--drain-timeout|15",
                          "|--port|30000|--drain-timeout|9"};
    char first[17] = "";
    for (int i = 0; i < 3; i++) {
        struct experiment e;
        struct plan p;
        struct err err;
        char *t = xasprintf("name: d\nserver: {%smodel: %s, port: 30000}\n"
                            "bench: {grid: [\"1:8\"]}\n",
                            stops[i], model);
        if (load(t, &e) != 0 || build(&e, "results/d/1", &p, &err) != 0) {
            CHECK_MSG(0, "experiment %d did not load or build", i);
            free(t);
            continue;
        }
        const char *argv = joined(&p.variants[0].server_argv);
        CHECK_MSG(strstr(argv, want[i]) != NULL, "%d: %s", i, argv);
        CHECK_MSG(strstr(strstr(argv, "--drain-timeout") + 1, "--drain-timeout") == NULL,
                  "%d: one --drain-timeout: %s", i, argv);
        if (i < 2 && !first[0])
            memcpy(first, p.points[0].key, 17);
        else if (i < 2)
            CHECK_STR(p.points[0].key, first); /* the grace is not in the key */
        plan_release(&p);
        exp_release(&e);
        free(t);
    }
    free(model);
}

/* Workload keys reach the builtin client's argv only when set, and the
 * dataset's contents are part of the key. */
TEST(workload_argv_and_dataset_key)
{
    char *model = gguf_file("w.gguf", 3);
    char *data = write_file("w.jsonl", "{\"prompt\": \"a b\"}\n", 18);
    char a[4][17], b[4][17];
    size_t na = 0, nb = 0;
    struct experiment e;
    struct plan p;
    struct err err;
    char *t = xasprintf("name: w\nserver: {model: %s}\n"
                        "bench:\n  grid: [\"2:4\"]\n  input_len: {dist: uniform, min: 1, max: 9}\n"
                        "  output_len: {dist: normal, mean: 5, sd: 2}\n  endpoint: chat\n"
                        "  dataset: {kind: jsonl, path: %s, seed: 7}\n",
                        model, data);
    if (load(t, &e) == 0) {
        if (build(&e, "results/w/1", &p, &err) == 0) {
            char *want = xasprintf(
                "/opt/sweep/bin/sweep|bench|--url|http://127.0.0.1:30000|-c|2|-n|4|--input-len|"
                "uniform:1:9|--output-len|normal:5:2:1:1048576|--warmup|2|--endpoint|chat|"
                "--dataset|%s|--dataset-kind|jsonl|--seed|7|--jsonl|"
                "results/w/1/default/c2-n4.jsonl",
                data);
            /* the port is auto: compare from -c on */
            const char *got = strstr(joined(&p.points[0].client_argv), "|-c|");
            CHECK_STR(got, strstr(want, "|-c|"));
            free(want);
            plan_release(&p);
        } else {
            CHECK_MSG(0, "plan_build: %s", err.msg);
        }
        exp_release(&e);
    }
    keys_of(t, "results/w/1", a, 4, &na);
    /* a bad entry stops the plan, named by file and line */
    char *bad = xasprintf("%s", t);
    free(write_file("w.jsonl", "{\"prompt\": \"a c\"}\n{\"prompt\": 1}\n", 33));
    if (load(bad, &e) == 0) {
        CHECK(build(&e, "results/w/1", &p, &err) != 0);
        CHECK_INT(err.code, RN_ERR_USAGE);
        char *want = xasprintf("variant 'default': bench.dataset: %s:2: \"prompt\" wants a "
                               "non-empty string",
                               data);
        CHECK_STR(err.msg, want);
        free(want);
        plan_release(&p);
        exp_release(&e);
    }
    free(bad);
    free(write_file("w.jsonl", "{\"prompt\": \"a c\"}\n", 18)); /* same name, other text */
    keys_of(t, "results/w/1", b, 4, &nb);
    CHECK(na == 1 && nb == 1 && strcmp(a[0], b[0]) != 0);
    free(t);
    free(data);
    free(model);
}

/* Rate points: their own log names, --request-rate and arrivals, and keys
 * apart from each other. */
TEST(rate_points)
{
    char *model = gguf_file("w.gguf", 3);
    struct experiment e;
    struct plan p;
    struct err err;
    char *t = xasprintf("name: r\nserver: {model: %s}\n"
                        "bench: {grid: [\"r2:64\", \"r2.5:64\", \"4:8\"], rate_kind: constant, "
                        "repeat: 2}\n",
                        model);
    if (load(t, &e) == 0) {
        if (build(&e, "results/r/1", &p, &err) == 0) {
            CHECK_INT(p.n_points, 6);
            CHECK_STR(p.points[0].log_name, "rate2-n64-r1.log");
            CHECK_STR(p.points[2].log_name, "rate2.5-n64-r1.log");
            CHECK_STR(p.points[4].log_name, "c4-n8-r1.log");
            CHECK(p.points[2].rate == 2.5);
            const char *a = joined(&p.points[2].client_argv);
            CHECK_MSG(strstr(a, "|-c|64|-n|64|") && strstr(a, "|--request-rate|2.5|--rate-kind|"
                                                              "constant|"),
                      "%s", a);
            CHECK(strstr(joined(&p.points[4].client_argv), "--request-rate") == NULL);
            CHECK(strcmp(p.points[0].key, p.points[2].key) != 0);
            plan_release(&p);
        } else {
            CHECK_MSG(0, "plan_build: %s", err.msg);
        }
        exp_release(&e);
    }
    free(t);
    free(model);
}

/* The key leaves the variant's name out, also with the builtin client (whose
 * --jsonl path names the variant's folder): renaming a variant reruns
 * nothing, and two variants with the same settings have the same keys. */
TEST(keys_leave_the_variant_name_out)
{
    char *model = gguf_file("k.gguf", 3);
    char a[4][17];
    size_t n = 0;
    char *t = xasprintf("name: k\nserver: {model: %s}\nbench: {grid: [\"1:8\"]}\n"
                        "variants: [{name: x}, {name: y}]\n",
                        model);
    CHECK_INT(keys_of(t, "results/k/1", a, 4, &n), 0);
    CHECK_INT(n, 2);
    CHECK_STR(a[0], a[1]);
    free(t);
    free(model);
}

TEST(set_port_rebuilds_argv_and_keeps_keys)
{
    struct experiment e;
    struct plan p;
    struct err err;
    const char *text = "name: sp\n"
                       "server: {engine: command, command: [srv, \"--port=${port}\"]}\n"
                       "bench: {grid: [\"2:4\"]}\n"
                       "variants: [{name: a}, {name: b}]\n";
    if (load(text, &e) != 0)
        return;
    if (build(&e, NULL, &p, &err) != 0) {
        CHECK_MSG(0, "plan_build: %s", err.msg);
        exp_release(&e);
        return;
    }
    CHECK_INT(p.n_variants, 2);
    CHECK(p.variants[0].port > 0 && p.variants[0].port < 65536); /* auto: a real free port */
    char key[17];
    memcpy(key, p.points[1].key, 17);
    err_init(&err);
    CHECK_INT(plan_set_port(&p, 1, 45678, &err), 0);
    CHECK_STR(joined(&p.variants[1].server_argv), "srv|--port=45678");
    CHECK_STR(p.variants[1].url, "http://127.0.0.1:45678");
    CHECK_STR(p.points[1].client_argv.v[3], "http://127.0.0.1:45678");
    CHECK_STR(p.points[1].key, key);
    CHECK(strcmp(p.points[0].client_argv.v[3], "http://127.0.0.1:45678") != 0);
    CHECK_INT(plan_set_port(&p, 5, 1, &err), -1);
    plan_release(&p);
    exp_release(&e);
}

TEST(only_selects_variants)
{
    struct experiment e;
    struct plan p;
    struct err err;
    struct strvec only = STRVEC_INIT;
    const char *text = "name: o\nserver: {engine: command, command: [srv]}\n"
                       "bench: {grid: [\"1:1\", \"2:2\"]}\n"
                       "variants: [{name: mxfp4}, {name: nvfp4}, {name: q8}]\n";
    if (load(text, &e) != 0)
        return;
    struct plan_opts o = {.only = &only, .self_exe = "sweep"};
    strvec_push(&only, "q8");
    strvec_push(&only, "mxfp4");
    err_init(&err);
    CHECK_INT(plan_build(&e, &o, &p, &err), 0);
    CHECK_INT(p.n_variants, 2);
    CHECK_STR(p.variants[0].v->name, "mxfp4"); /* file order, not --only order */
    CHECK_STR(p.variants[1].v->name, "q8");
    CHECK_INT(p.n_points, 4);
    CHECK_INT(p.points[3].variant, 1);
    plan_release(&p);
    strvec_push(&only, "nvfp");
    err_init(&err);
    CHECK_INT(plan_build(&e, &o, &p, &err), -1);
    CHECK_INT(err.code, RN_ERR_USAGE);
    CHECK_STR(err.msg, "--only: no variant 'nvfp' (did you mean 'nvfp4'?)");
    plan_release(&p);
    strvec_release(&only);
    exp_release(&e);
}

TEST(option_injection_after_expansion)
{
    struct experiment e;
    struct plan p;
    struct err err;
    setenv("SWEEP_T_MODEL", "--config=/etc/passwd", 1);
    if (load("name: i\nserver: {model: \"${env:SWEEP_T_MODEL}\"}\nbench: {grid: [\"1:1\"]}\n",
             &e) != 0)
        return;
    CHECK_INT(build(&e, NULL, &p, &err), -1);
    CHECK_INT(err.code, RN_ERR_USAGE);
    CHECK_STR(err.msg, "variant 'default': server.model expands to '--config=/etc/passwd', which "
                       "starts with '-' and would be read as an option");
    plan_release(&p);
    exp_release(&e);
    if (load("name: i\nserver: {model: m, flags: {x: \"${env:SWEEP_T_MODEL}\"}}\n"
             "bench: {grid: [\"1:1\"]}\n",
             &e) != 0)
        return;
    CHECK_INT(build(&e, NULL, &p, &err), -1);
    CHECK(strstr(err.msg, "server.flags 'x' expands to '--config=/etc/passwd'") != NULL);
    plan_release(&p);
    exp_release(&e);
    unsetenv("SWEEP_T_UNSET_VAR");
    if (load("name: i\nserver: {model: m, args: [\"${env:SWEEP_T_UNSET_VAR}\"]}\n"
             "bench: {grid: [\"1:1\"]}\n",
             &e) != 0)
        return;
    CHECK_INT(build(&e, NULL, &p, &err), -1);
    CHECK_STR(err.msg, "variant 'default': server.args: environment variable 'SWEEP_T_UNSET_VAR' "
                       "is not set (set it, or write '${env:SWEEP_T_UNSET_VAR:-DEFAULT}')");
    plan_release(&p);
    exp_release(&e);
}

/* R10: shell text in a file reaches the child as one verbatim argv element. */
TEST(shell_text_reaches_the_child_verbatim)
{
    struct experiment e;
    struct plan p;
    struct err err;
    char *pwned = xasprintf("%s/pwned", scratch());
    char *out = xasprintf("%s/argv.out", scratch());
    char *text = xasprintf("name: r10\n"
                           "server:\n"
                           "  engine: command\n"
                           "  command: [printf, \"[%%s]\\\\n\"]\n"
                           "  model: \"x; touch %s\"\n"
                           "  flags: {evil: \"$(touch %s); touch %s `touch %s`\"}\n"
                           "  args: [\"a b\", \"'q'\", \"${model}\", \"*\"]\n"
                           "bench: {grid: [\"1:1\"]}\n",
                           pwned, pwned, pwned, pwned);
    if (load(text, &e) != 0)
        goto out;
    if (build(&e, NULL, &p, &err) != 0) {
        CHECK_MSG(0, "plan_build: %s", err.msg);
        goto out_exp;
    }
    struct plan_variant *pv = &p.variants[0];
    char *evil = xasprintf("$(touch %s); touch %s `touch %s`", pwned, pwned, pwned);
    char *model = xasprintf("x; touch %s", pwned);
    CHECK_INT(pv->server_argv.n, 8);
    CHECK_STR(pv->server_argv.v[3], evil);
    CHECK_STR(pv->server_argv.v[6], model);
    /* run it: printf prints each argument in brackets; nothing else happens */
    posix_spawn_file_actions_t fa;
    pid_t pid;
    int status = -1;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, out, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    CHECK_INT(
        posix_spawnp(&pid, pv->server_argv.v[0], &fa, NULL, strvec_argv(&pv->server_argv), environ),
        0);
    waitpid(pid, &status, 0);
    posix_spawn_file_actions_destroy(&fa);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    char got[2048] = "";
    FILE *f = fopen(out, "r");
    size_t n = f ? fread(got, 1, sizeof(got) - 1, f) : 0;
    got[n] = '\0';
    if (f)
        fclose(f);
    char *want = xasprintf("[--evil]\n[%s]\n[a b]\n['q']\n[%s]\n[*]\n", evil, model);
    const char *gotp = got;
    CHECK_STR(gotp, want);
    CHECK(access(pwned, F_OK) != 0); /* nothing was executed */
    free(want);
    free(evil);
    free(model);
    plan_release(&p);
out_exp:
    exp_release(&e);
out:
    free(text);
    free(out);
    free(pwned);
}

TEST(check_model)
{
    struct model_fp fp;
    struct err err;
    char *good = gguf_file("good.gguf", 3);
    err_init(&err);
    CHECK_INT(plan_check_model(good, &fp, &err), 0);
    CHECK_INT(fp.exists, 1);
    CHECK_INT(fp.size, 32);
    CHECK(fp.mtime > 0);
    unsigned char head[32] = {'G', 'G', 'U', 'F', 3};
    char hex[65];
    sha256_hex(head, sizeof(head), hex);
    CHECK_STR(fp.sha256, hex);

    char *v1 = gguf_file("old.GGUF", 1);
    err_init(&err);
    CHECK_INT(plan_check_model(v1, &fp, &err), -1);
    CHECK_INT(err.code, RN_ERR_ENV);
    CHECK(strstr(err.msg, "GGUF version 1 is not supported (2 or 3)") != NULL);
    CHECK_INT(fp.exists, 1);

    char *bad = write_file("bad.gguf", "<html>not a model</html>", 24);
    err_init(&err);
    CHECK_INT(plan_check_model(bad, &fp, &err), -1);
    CHECK(strstr(err.msg, "not a GGUF file (it does not start with 'GGUF')") != NULL);

    char *empty = write_file("empty.bin", "", 0);
    err_init(&err);
    CHECK_INT(plan_check_model(empty, &fp, &err), -1);
    CHECK(strstr(err.msg, "the file is empty") != NULL);

    char *other = write_file("weights.safetensors", "abc", 3);
    err_init(&err);
    CHECK_INT(plan_check_model(other, &fp, &err), 0); /* only .gguf files are parsed */

    err_init(&err);
    CHECK_INT(plan_check_model("/nonexistent/m.gguf", &fp, &err), -1);
    CHECK_STR(err.msg, "model path '/nonexistent/m.gguf': does not exist");
    CHECK_INT(fp.exists, 0);

    /* a folder: listable, not empty; its fingerprint follows its listing */
    char *dir = xasprintf("%s/hfmodel", scratch());
    mkdir(dir, 0755);
    err_init(&err);
    CHECK_INT(plan_check_model(dir, &fp, &err), -1);
    CHECK(strstr(err.msg, "the folder is empty") != NULL);
    free(write_file("hfmodel/config.json", "{}", 2));
    err_init(&err);
    CHECK_INT(plan_check_model(dir, &fp, &err), 0);
    char first[65];
    memcpy(first, fp.sha256, sizeof(first));
    free(write_file("hfmodel/model.safetensors", "xyz", 3));
    CHECK_INT(plan_check_model(dir, &fp, &err), 0);
    CHECK(strcmp(first, fp.sha256) != 0);

    if (geteuid() != 0) { /* root reads anything */
        chmod(good, 0);
        err_init(&err);
        CHECK_INT(plan_check_model(good, &fp, &err), -1);
        CHECK(strstr(err.msg, "cannot be read") != NULL);
        chmod(good, 0644);
    }
    free(good);
    free(v1);
    free(bad);
    free(empty);
    free(other);
    free(dir);
}

/* W3-H1: the fingerprint is the whole file's sha256 (two files of one size
 * and one first MiB that differ later fingerprint apart), read once and
 * then taken from the cache while the file's identity holds. */
TEST(model_fingerprint_is_the_whole_file_and_cached)
{
    struct model_fp a, b;
    struct err err;
    size_t len = (3u << 20) / 2; /* 1.5 MiB: the difference lies past the first MiB */
    unsigned char *data = xcalloc(len, 1);
    char *cache_dir = xasprintf("%s/cache", scratch());
    char *saved = getenv("SWEEP_CACHE_DIR") ? xstrdup(getenv("SWEEP_CACHE_DIR")) : NULL;
    setenv("SWEEP_CACHE_DIR", cache_dir, 1);
    memcpy(data, "GGUF\3\0\0\0", 8);
    for (size_t i = 8; i < len; i++)
        data[i] = (unsigned char)(i * 7);
    char *one = write_file("fp1.gguf", data, len);
    data[len - 100] ^= 0xff;
    char *two = write_file("fp2.gguf", data, len);
    err_init(&err);
    CHECK_INT(plan_check_model(one, &a, &err), 0);
    CHECK_INT(plan_check_model(two, &b, &err), 0);
    CHECK_INT(a.size, b.size);
    CHECK(strcmp(a.sha256, b.sha256) != 0);
    char want[65];
    sha256_hex(data, len, want);
    CHECK_STR(b.sha256, want);

    /* the cache holds one line per file, and its entry is what is used:
     * a forged digest there shows as long as size, mtime, inode... hold */
    char *cache = modelfp_cache_path();
    char *cache_want = xasprintf("%s/model-sha256", cache_dir);
    CHECK_STR(cache, cache_want);
    free(cache_want);
    struct buf text;
    buf_init(&text, 1 << 20);
    CHECK_INT(file_read_all(cache, &text, &err, 1), 0);
    CHECK(text.data && strstr(text.data, want) != NULL);
    CHECK(text.data && strstr(text.data, a.sha256) != NULL);
    char *forged = xstrdup(text.data ? text.data : "");
    char *at = strstr(forged, want);
    if (at)
        memset(at, 'e', 64);
    CHECK_INT(file_write_atomic(cache, forged, strlen(forged), &err, 1), 0);
    CHECK_INT(plan_check_model(two, &b, &err), 0);
    CHECK(b.sha256[0] == 'e' && b.sha256[63] == 'e'); /* taken from the cache, not read */
    /* touched (mtime and ctime change): hashed again, the entry replaced */
    struct timespec ts[2] = {{.tv_sec = 1000000000}, {.tv_sec = 1000000000}};
    CHECK_INT(utimensat(AT_FDCWD, two, ts, 0), 0);
    CHECK_INT(plan_check_model(two, &b, &err), 0);
    CHECK_STR(b.sha256, want);
    buf_reset(&text);
    CHECK_INT(file_read_all(cache, &text, &err, 1), 0);
    size_t lines = 0;
    for (size_t i = 0; i < text.len; i++)
        lines += text.data[i] == '\n';
    CHECK_INT(lines, 2);
    /* an unwritable cache folder costs a hash, not an error */
    setenv("SWEEP_CACHE_DIR", "/nonexistent/sweep-cache", 1);
    CHECK_INT(plan_check_model(one, &b, &err), 0);
    CHECK_STR(b.sha256, a.sha256);
    if (saved)
        setenv("SWEEP_CACHE_DIR", saved, 1);
    else
        unsetenv("SWEEP_CACHE_DIR");
    free(saved);
    unlink(cache);
    rmdir(cache_dir);
    buf_release(&text);
    free(forged);
    free(cache);
    free(one);
    free(two);
    free(cache_dir);
    free(data);
}

TEST(find_bundled_engine)
{
    char *bin = xasprintf("%s/bin", scratch());
    mkdir(bin, 0755);
    char *engine = write_file("bin/fp4serve", "#!/bin/sh\n", 10);
    char *self = xasprintf("%s/sweep", bin);
    char *found = plan_find_bundled_engine(self);
    CHECK_STR(found, engine);
    free(found);
    /* not next to self: found on PATH */
    char *old_path = xstrdup(getenv("PATH") ? getenv("PATH") : "");
    char *path = xasprintf("/nonexistent:%s", bin);
    setenv("PATH", path, 1);
    char *cwd = getcwd(NULL, 0);
    if (chdir(scratch()) == 0) { /* so build/bin/fp4serve is not found first */
        found = plan_find_bundled_engine("/elsewhere/sweep");
        CHECK_STR(found, engine);
        free(found);
        setenv("PATH", "/nonexistent", 1);
        CHECK(plan_find_bundled_engine("sweep") == NULL);
        CHECK(chdir(cwd) == 0);
    }
    setenv("PATH", old_path, 1);
    free(cwd);
    free(old_path);
    free(path);
    free(self);
    free(engine);
    free(bin);
}

TEST(print_shows_argv_env_model_and_points)
{
    struct experiment e;
    struct plan p;
    struct err err;
    const char *text = "name: pr\n"
                       "server: {model: /nonexistent/m.gguf, port: 9000, args: [\"a b\"],"
                       " env: {HF_TOKEN: hunter2, N: '1'}}\n"
                       "bench: {grid: [\"1:2\", \"3:4\", \"8:4\"]}\n";
    if (load(text, &e) != 0)
        return;
    if (build(&e, NULL, &p, &err) != 0) {
        exp_release(&e);
        return;
    }
    char *out = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&out, &len);
    plan_print(f, &p);
    fclose(f);
    CHECK(strstr(out, "  server: /opt/sweep/bin/fp4serve serve --model /nonexistent/m.gguf "
                      "--host 127.0.0.1 --port 9000 --drain-timeout 15 'a b'\n") != NULL);
    CHECK(strstr(out, "(warning: model path '/nonexistent/m.gguf': does not exist)") != NULL);
    CHECK(strstr(out, "HF_TOKEN=<hidden>") != NULL);
    CHECK(strstr(out, "hunter2") == NULL);
    CHECK(strstr(out, "  env:    N=1\n") != NULL);
    CHECK(strstr(out, p.points[1].key) != NULL);
    CHECK(strstr(out, "c3-n4.log") != NULL);
    CHECK(strstr(out, "--jsonl '<run_dir>/default/c3-n4.jsonl'") != NULL);
    CHECK(strstr(out, "\n3 points in 1 variant\n") != NULL);
    /* fewer prompts than concurrency: said under that point, and only there */
    const char *warn = "(warning: 4 prompts for concurrency 8: at most 4 requests run at once)";
    CHECK(strstr(out, warn) != NULL && strstr(out, warn) > strstr(out, "c8-n4.log"));
    CHECK(strstr(strstr(out, warn) + strlen(warn), "prompts for concurrency") == NULL);
    free(out);
    plan_release(&p);
    exp_release(&e);
}

TEST(engine_missing_is_an_environment_error)
{
    struct experiment e;
    struct plan p;
    struct err err;
    if (load("name: m\nserver: {model: m}\nbench: {grid: [\"1:1\"]}\n", &e) != 0)
        return;
    char *old_path = xstrdup(getenv("PATH") ? getenv("PATH") : "");
    char *cwd = getcwd(NULL, 0);
    setenv("PATH", "/nonexistent", 1);
    struct plan_opts o = {.self_exe = "/nonexistent/sweep"};
    if (chdir(scratch()) == 0) {
        err_init(&err);
        CHECK_INT(plan_build(&e, &o, &p, &err), -1);
        CHECK_INT(err.code, RN_ERR_ENV);
        CHECK(strstr(err.msg, "the bundled engine 'fp4serve' was not found") != NULL);
        plan_release(&p);
        CHECK(chdir(cwd) == 0);
    }
    setenv("PATH", old_path, 1);
    free(old_path);
    free(cwd);
    exp_release(&e);
}

TEST(cleanup_scratch)
{
    /* last test: remove the scratch folder (files are known by name) */
    const char *names[] = {"m.gguf",
                           "fp1.gguf",
                           "fp2.gguf",
                           "k.gguf",
                           "d.gguf",
                           "good.gguf",
                           "old.GGUF",
                           "bad.gguf",
                           "empty.bin",
                           "weights.safetensors",
                           "w.gguf",
                           "w.jsonl",
                           "argv.out",
                           "hfmodel/config.json",
                           "hfmodel/model.safetensors",
                           "bin/fp4serve",
                           "hfmodel",
                           "bin",
                           NULL};
    for (size_t i = 0; names[i]; i++) {
        char *p = xasprintf("%s/%s", scratch(), names[i]);
        if (unlink(p) != 0)
            rmdir(p);
        free(p);
    }
    CHECK_INT(rmdir(scratch()), 0);
}

TEST_MAIN()
