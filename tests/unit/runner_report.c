/*
 * Unit tests for the run-folder side of analysis: log names (rundir),
 * metric labels and grouping (summary), and report_build on a points.csv
 * with repeats: bootstrap intervals and spreads in fit.json, the fit in
 * words in REPORT.md, failures listed, and fit + report still written when
 * gnuplot is missing.
 */
#include <dirent.h>
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <unistd.h>

#include "buf.h"
#include "fileio.h"
#include "sweep.h"
#include "test.h"
#include "xalloc.h"

#include "analysis/judge.h"
#include "analysis/report.h"
#include "analysis/rundir.h"
#include "analysis/summary.h"
#include "store/results.h"

TEST(log_names)
{
    long c, p, r;
    CHECK(rundir_parse_log_name("c16-n48.log", &c, &p, &r) && c == 16 && p == 48 && r == 1);
    CHECK(rundir_parse_log_name("c1-n8-r3.log", &c, &p, &r) && c == 1 && p == 8 && r == 3);
    CHECK(!rundir_parse_log_name("c16-n48.jsonl", &c, &p, &r));
    CHECK(!rundir_parse_log_name("c16-n48.log.bak", &c, &p, &r));
    CHECK(!rundir_parse_log_name("c0-n8.log", &c, &p, &r));
    CHECK(!rundir_parse_log_name("c-n8.log", &c, &p, &r));
    CHECK(!rundir_parse_log_name("server.log", &c, &p, &r));
    CHECK(!rundir_parse_log_name("c99999999999999999999-n1.log", &c, &p, &r));
}

TEST(labels)
{
    static const char *const cases[][2] = {
        {"median_tpot_ms", "median TPOT (ms)"},
        {"p99_ttft_ms", "p99 TTFT (ms)"},
        {"mean_e2e_ms", "mean E2E (ms)"},
        {"output_throughput", "output throughput (tok/s)"},
        {"achieved_concurrency", "achieved concurrency"},
        {"max_itl_ms", "max ITL (ms)"},
        {"my_metric", "my_metric"},
        {"server_step_ms", "server decode step (ms)"},
        {"server_batch", "server running batch"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char *l = sum_label(cases[i][0]);
        CHECK_STR(l, cases[i][1]);
        free(l);
    }
    CHECK(sum_is_step_metric("median_tpot_ms") && sum_is_step_metric("p99_itl_ms"));
    CHECK(!sum_is_step_metric("median_ttft_ms") && !sum_is_step_metric("tpot_ms"));
    CHECK(sum_is_step_metric("server_step_ms") && !sum_is_step_metric("server_batch"));
}

static void add(struct res_table *t, const char *variant, long c, long r, const char *status,
                double tpot, double thr)
{
    struct res_point p;
    res_point_init(&p);
    p.variant = xstrdup(variant);
    p.concurrency = c;
    p.prompts = 3 * c;
    p.repeat = r;
    p.status = xstrdup(status);
    p.key = xstrdup("");
    p.cause = xstrdup(strcmp(status, RES_OK) ? "server killed by signal 9" : "");
    p.log = xasprintf("%s/c%ld-n%ld-r%ld.log", variant, c, 3 * c, r);
    p.started = xstrdup("");
    if (!isnan(tpot))
        mset_set(&p.metrics, "median_tpot_ms", tpot);
    if (!isnan(thr))
        mset_set(&p.metrics, "output_throughput", thr);
    res_table_add(t, &p);
}

/* Remove a folder's files, then the folder. */
static void rm_dir(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *de;
    while (d && (de = readdir(d)))
        if (de->d_name[0] != '.') {
            char *p = path_join(dir, de->d_name);
            unlink(p);
            free(p);
        }
    if (d)
        closedir(d);
    rmdir(dir);
}

static char *slurp(const char *dir, const char *name)
{
    char *path = path_join(dir, name);
    struct buf b;
    struct err e;
    buf_init(&b, 64 << 20);
    err_init(&e);
    char *text = file_read_all(path, &b, &e, 3) == 0 ? buf_detach(&b, NULL) : NULL;
    buf_release(&b);
    free(path);
    return text;
}

TEST(report_with_repeats_and_failures)
{
    char tmpl[] = "/tmp/sweep-report-test.XXXXXX";
    char *dir = mkdtemp(tmpl);
    if (!dir)
        abort();
    struct res_table t;
    struct err e;
    res_table_init(&t);
    err_init(&e);
    static const double noise[] = {-2, 0.5, 1.5};
    static const long cs[] = {1, 4, 8, 16};
    for (size_t i = 0; i < 4; i++)
        for (long r = 1; r <= 3; r++) {
            double step = 40 + 31 * cs[i] + noise[r - 1] * (double)(i + 1);
            add(&t, "mxfp4", cs[i], r, RES_OK, step, cs[i] * 1000 / step);
        }
    add(&t, "mxfp4", 32, 1, RES_FAILED, NAN, NAN);
    add(&t, "nvfp4", 4, 1, RES_OK, 90, 44); /* one level: no fit */
    char *csv = path_join(dir, "points.csv");
    CHECK(res_table_save(&t, csv, &e) == 0);

    setenv("SWEEP_GNUPLOT", "/nonexistent/gnuplot", 1);
    struct report_opts o = {NULL, NULL, false, true};
    CHECK(report_build(dir, &o, &e) == -1);
    unsetenv("SWEEP_GNUPLOT");
    CHECK_INT(e.code, RN_ERR_ENV);
    CHECK_MSG(strstr(e.msg, "gnuplot not found"), "%s", e.msg);

    char *fit = slurp(dir, "fit.json"), *md = slurp(dir, "REPORT.md");
    CHECK(fit && md);
    json_error_t je;
    json_t *root = fit ? json_loads(fit, 0, &je) : NULL;
    CHECK(root != NULL);
    json_t *mx = json_object_get(json_object_get(root, "variants"), "mxfp4");
    json_t *nv = json_object_get(json_object_get(root, "variants"), "nvfp4");
    CHECK(json_is_true(json_object_get(mx, "ok")));
    CHECK_NEAR(json_real_value(json_object_get(mx, "b")), 31, 0.5);
    CHECK_NEAR(json_real_value(json_object_get(mx, "a")), 40, 3);
    CHECK_INT(json_integer_value(json_object_get(mx, "points_failed")), 1);
    json_t *bci = json_object_get(mx, "b_ci95");
    CHECK(json_array_size(bci) == 2);
    double lo = json_real_value(json_array_get(bci, 0)),
           hi = json_real_value(json_array_get(bci, 1));
    CHECK(lo < json_real_value(json_object_get(mx, "b")) &&
          json_real_value(json_object_get(mx, "b")) < hi);
    json_t *spread = json_object_get(json_object_get(mx, "spread"), "median_tpot_ms");
    CHECK_INT(json_array_size(spread), 4);
    CHECK_INT(json_integer_value(json_object_get(json_array_get(spread, 0), "n")), 3);
    CHECK(json_is_false(json_object_get(nv, "ok")));
    CHECK(strstr(json_string_value(json_object_get(nv, "note")), "a line needs two levels"));
    json_decref(root);

    CHECK(md && strstr(md, "Each added request adds 3"));
    CHECK(md && strstr(md, "per decode step; decode-only ceiling 3"));
    CHECK(md && strstr(md, "95% bootstrap intervals over repeats: a ["));
    CHECK(md && strstr(md, "**nvfp4**: no fit (1 point(s) at 1 concurrency level(s)"));
    CHECK(md && strstr(md, "- mxfp4 C=32 n=96 repeat 1: **failed**: server killed by signal 9 "
                           "(log `mxfp4/c32-n96-r1.log`)"));
    CHECK(md && strstr(md, "Charts missing: gnuplot not found"));
    free(fit);
    free(md);

    /* no points.csv: a usage error pointing at `sweep plot` */
    unlink(csv);
    err_init(&e);
    CHECK(report_build(dir, &o, &e) == -1);
    CHECK_INT(e.code, RN_ERR_USAGE);
    CHECK(strstr(e.msg, "no points.csv (run 'sweep plot") != NULL);
    char *plots = path_join(dir, "plots");
    rm_dir(plots);
    free(plots);
    rm_dir(dir);
    free(csv);
    res_table_release(&t);
}

/* A saved sglang-style block with the given request counts (failed < 0:
 * no "Failed requests:" row, as SGLang prints it). */
static void write_block(const char *dir, const char *name, long ok, long failed)
{
    struct buf b;
    struct err e;
    buf_init(&b, 1 << 16);
    err_init(&e);
    buf_puts(&b, "============ Serving Benchmark Result ============\n");
    buf_printf(&b, "%-40s %-10ld\n", "Max request concurrency:", 16L);
    buf_printf(&b, "%-40s %-10ld\n", "Successful requests:", ok);
    if (failed >= 0)
        buf_printf(&b, "%-40s %-10ld\n", "Failed requests:", failed);
    buf_printf(&b, "%-40s %-10s\n", "Output token throughput (tok/s):", ok ? "812.50" : "0.00");
    buf_printf(&b, "%-40s %-10s\n", "Median TTFT (ms):", ok ? "40.00" : "0.00");
    buf_printf(&b, "%-40s %-10s\n", "Median TPOT (ms):", ok ? "19.70" : "0.00");
    buf_printf(&b, "%-40s %-10s\n", "Median E2E Latency (ms):", ok ? "2540.00" : "nan");
    buf_puts(&b, "==================================================\n");
    char *path = path_join(dir, name);
    CHECK(file_write_atomic(path, b.data, b.len, &e, 3) == 0);
    free(path);
    buf_release(&b);
}

/* Rebuilding a point from its log (sweep plot, sweep import) judges it as
 * the run does: a log whose requests all failed, or too many of them,
 * is a failed point, however well its labels matched; and the verdict on
 * a saved log (judge_saved_point) is the one a live run gives
 * (judge_point, as exec/run.c calls it), cause included. */
TEST(saved_and_live_points_are_judged_alike)
{
    char tmpl[] = "/tmp/sweep-rundir-test.XXXXXX";
    char *dir = mkdtemp(tmpl);
    if (!dir)
        abort();
    static const struct {
        const char *log;
        long ok, failed;
        const char *status, *cause;
    } cases[] = {
        {"c16-n32.log", 32, 0, RES_OK, ""},
        {"c16-n32-r2.log", 0, -1, RES_FAILED, "no request succeeded"},
        {"c16-n32-r3.log", 20, 12, RES_FAILED, "12 of 32 requests failed"},
        {"c16-n32-r4.log", 24, -1, RES_FAILED, "only 24 of 32 requests succeeded"},
    };
    struct rundir rd;
    struct err e;
    err_init(&e);
    CHECK(rundir_open(dir, &rd, &e) == 0);
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        write_block(dir, cases[i].log, cases[i].ok, cases[i].failed);
        struct res_point p;
        res_point_init(&p);
        p.concurrency = 16;
        p.prompts = 32;
        CHECK(judge_saved_point(&rd, "default", cases[i].log, &p, &e) == 0);
        CHECK_MSG(test_str_eq(p.status, cases[i].status), "%s: status %s, want %s", cases[i].log,
                  test_str_show(p.status), cases[i].status);
        CHECK_MSG(p.cause && strstr(p.cause, cases[i].cause), "%s: cause '%s', want '%s'",
                  cases[i].log, test_str_show(p.cause), cases[i].cause);

        const struct rundir_extract *x = rundir_extract_for(&rd, "default");
        ext_set *set = NULL;
        CHECK(ext_new(x->preset, x->patterns, x->n_patterns, &set, &e) == 0);
        struct judge_spec spec = {set, &x->require, 16, 32, 0};
        struct metric_set live;
        struct buf cause;
        bool ok = true;
        mset_init(&live);
        buf_init(&cause, 1024);
        char *path = path_join(dir, cases[i].log);
        CHECK(judge_point(&spec, path, true, &live, &ok, &cause, &e) == 0);
        CHECK_MSG(test_str_eq(ok ? RES_OK : RES_FAILED, p.status), "%s: live %s, saved %s",
                  cases[i].log, ok ? RES_OK : RES_FAILED, p.status);
        CHECK_STR(cause.data ? cause.data : "", p.cause);
        double a = 0, b = -1;
        CHECK(mset_get(&live, "median_tpot_ms", &a) == mset_get(&p.metrics, "median_tpot_ms", &b));
        CHECK(a == b || !cases[i].ok);
        /* a client that already failed keeps its own cause: judged, not overwritten */
        buf_reset(&cause);
        CHECK(judge_point(&spec, path, false, &live, &ok, &cause, &e) == 0);
        CHECK(!ok && cause.len == 0);
        free(path);
        buf_release(&cause);
        mset_release(&live);
        ext_free(set);
        res_point_release(&p);
    }
    rundir_release(&rd);
    rm_dir(dir);
}

/* issue 13: the client's TPOT fit with a negative intercept is named and
 * predicts nothing; the server's step law is set beside it; throughput
 * comes from E2E; fit.csv is one flat row per variant. */
TEST(report_unfit_client_fit_server_law_and_fit_csv)
{
    char tmpl[] = "/tmp/sweep-report-test.XXXXXX";
    char *dir = mkdtemp(tmpl);
    if (!dir)
        abort();
    struct res_table t;
    struct err e;
    res_table_init(&t);
    err_init(&e);
    static const long cs[] = {1, 4, 16};
    static const double batch[] = {1, 3.5, 12};
    for (size_t i = 0; i < 3; i++) {
        double tpot = -43 + 42 * (double)cs[i] + (i == 1 ? 3 : 0);
        double e2e = 500 + 90 * (double)cs[i];
        add(&t, "v", cs[i], 1, RES_OK, tpot, (double)cs[i] * 32 * 1000 / e2e);
        struct res_point *p = &t.rows[t.n - 1];
        mset_set(&p->metrics, "mean_e2e_ms", e2e);
        mset_set(&p->metrics, "total_output_tokens", 32.0 * 3 * (double)cs[i]);
        mset_set(&p->metrics, "successful_requests", 3.0 * (double)cs[i]);
        mset_set(&p->metrics, "server_step_ms", 20 + 2 * batch[i]);
        mset_set(&p->metrics, "server_batch", batch[i]);
    }
    char *csv = path_join(dir, "points.csv");
    CHECK(res_table_save(&t, csv, &e) == 0);
    setenv("SWEEP_GNUPLOT", "/nonexistent/gnuplot", 1);
    struct report_opts o = {NULL, NULL, false, true};
    report_build(dir, &o, &e); /* -1: no gnuplot; fit and report are written anyway */
    unsetenv("SWEEP_GNUPLOT");
    char *md = slurp(dir, "REPORT.md"), *fc = slurp(dir, "fit.csv"), *fj = slurp(dir, "fit.json");
    CHECK(md && fc && fj);
    CHECK(md && strstr(md, "**the linear model does not describe these points: negative "
                           "intercept (a = -"));
    CHECK(md && strstr(md, "likely prefill of arriving requests inside the decode steps"));
    CHECK(md && strstr(md, "Nothing is predicted from this line: no ceiling, no throughput."));
    CHECK(md && !strstr(md, "Predicted at untested"));
    CHECK(md && !strstr(md, "ceiling 2")); /* 1000/42 would be 23.8 */
    CHECK(md && strstr(md, "## Client and server step time"));
    CHECK(md && strstr(md, "| 20.0 + 2.00·B | 1.000 |"));
    CHECK(md && strstr(md, "they differ"));
    CHECK(md && strstr(md, "(it does not count decode-only steps apart)"));
    CHECK(md && strstr(md, "E2E = 500.0 + 90.00·N ms per request (from mean_e2e_ms"));
    CHECK(md && strstr(md, "within 0.0% of every measured point"));
    /* fit.csv: a header and one row, the unfit one without ceiling */
    CHECK(fc && strncmp(fc, "variant,x,y,ok,points,levels,a,b,r2,ceiling_tok_s,", 50) == 0);
    CHECK(fc && strstr(fc, "\nv,concurrency,median_tpot_ms,false,3,3,"));
    CHECK(fc && strstr(fc, ",server_batch,server_step_ms,20,2,1,\"the linear model does not "
                           "describe these points: negative intercept"));
    const char *row = fc ? strstr(fc, "\nv,") : NULL;
    size_t cells = 0;
    for (const char *q = row ? row + 1 : ""; *q && *q != '\n' && *q != '"'; q++)
        cells += *q == ',';
    CHECK_INT(cells, 26); /* 27 columns before the quoted note */
    CHECK(fj && strstr(fj, "\"unfit\": \"the linear model does not describe these points"));
    CHECK(fj && strstr(fj, "\"throughput_law\""));
    CHECK(fj && strstr(fj, "\"server_fit\""));
    /* fit.json carries the same flat rows for pandas.json_normalize */
    CHECK(fj && strstr(fj, "\"table\": [\n    {\n      \"variant\": \"v\",\n      \"x\": "
                           "\"concurrency\","));
    free(md);
    free(fc);
    free(fj);
    unlink(csv);
    free(csv);
    res_table_release(&t);
    rm_dir(dir);
}

/* sum_throughput: E2E source order and the out tokens per request */
TEST(throughput_law_sources)
{
    struct res_table t;
    res_table_init(&t);
    for (long c = 1; c <= 4; c *= 2) {
        add(&t, "v", c, 1, RES_OK, 20 + 2 * (double)c, NAN);
        mset_set(&t.rows[t.n - 1].metrics, "median_ttft_ms", 100 + 10 * (double)c);
    }
    struct sum_thr th;
    sum_throughput(&t, "v", 11, &th); /* no E2E, no token counts: TTFT + 10·TPOT */
    CHECK(th.ok);
    CHECK_STR(th.source, "median_ttft_ms + (out-1)·median_tpot_ms");
    CHECK_NEAR(th.out_tokens, 11, 1e-12);
    CHECK_NEAR(th.e2e.a, 300, 1e-9);
    CHECK_NEAR(th.e2e.b, 30, 1e-9);
    CHECK_NEAR(sum_thr_at(&th, 2), 2 * 11 * 1000 / 360.0, 1e-9);
    sum_throughput(&t, "v", -1, &th); /* nothing tells the output length */
    CHECK(!th.ok);
    CHECK(isnan(sum_thr_at(&th, 2)));
    res_table_release(&t);
}

TEST_MAIN()
