/*
 * Unit tests for the HTML report and the Pareto frontier (issue 28): the
 * frontier, dominated points and knee (pareto.c); the Markdown subset as
 * HTML (html.c: tables, escapes, links that load nothing); an SVG chart
 * with one tooltip per point; and report_build writing REPORT.html with
 * REPORT.md's sections and every chart inline even without gnuplot.
 */
#include <dirent.h>
#include <math.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "buf.h"
#include "fileio.h"
#include "test.h"
#include "testtmp.h"
#include "xalloc.h"

#include "analysis/html.h"
#include "analysis/pareto.h"
#include "analysis/report.h"
#include "store/results.h"

/* Occurrences of needle in hay. */
static size_t count(const char *hay, const char *needle)
{
    size_t n = 0;
    for (const char *p = hay; p && (p = strstr(p, needle)); p += strlen(needle))
        n++;
    return n;
}

TEST(pareto_frontier_and_knee)
{
    /* C=8 is beaten on both axes by C=4; the frontier 1, 2, 4, 16 bulges
     * most at C=4 once scaled: (650-100)/(900-100) + (50-10)/(90-10) - 1 */
    struct pareto_pt p[] = {
        {100, 90, 1, false}, {300, 80, 2, false},  {650, 50, 4, false},
        {550, 45, 8, false}, {900, 10, 16, false},
    };
    ptrdiff_t knee = pareto_mark(p, 5);
    CHECK(p[0].front && p[1].front && p[2].front && !p[3].front && p[4].front);
    CHECK_INT(knee, 2);
    /* two frontier points lie on their own chord: no knee */
    struct pareto_pt two[] = {{100, 90, 1, false}, {900, 10, 16, false}, {50, 5, 32, false}};
    CHECK_INT(pareto_mark(two, 3), -1);
    CHECK(two[0].front && two[1].front && !two[2].front);
    /* a straight frontier has no point above its chord: no knee */
    struct pareto_pt line[] = {{100, 30, 1, false}, {200, 20, 2, false}, {300, 10, 4, false}};
    CHECK_INT(pareto_mark(line, 3), -1);
    /* a tie on the distance goes to the lower concurrency */
    struct pareto_pt tie[] = {
        {0, 10, 1, false}, {9, 3, 4, false}, {3, 9, 2, false}, {10, 0, 8, false}};
    CHECK_INT(pareto_mark(tie, 4), 2);
    /* equal points dominate neither */
    struct pareto_pt same[] = {{5, 5, 1, false}, {5, 5, 2, false}};
    pareto_mark(same, 2);
    CHECK(same[0].front && same[1].front);
}

TEST(markdown_subset_as_html)
{
    const char *md = "# Run <x>\n\nSome **bold** and `a|b <c>` text\nnext line.\n\n"
                     "## What ran\n\n- first [svg](plots/t.svg)\n  - nested\n- second "
                     "[bad](javascript:void) ![img](https://example.com/i.png)\n\n"
                     "| variant | C | cause |\n|---|---:|---|\n| a\\|b | 16 | x & y |\n\n"
                     "## Charts\n\nold\n\n## Failures\n\nNone.\n\n---\nfooter\n";
    struct buf b;
    buf_init(&b, 1 << 20);
    html_md(&b, md, strlen(md));
    const char *h = b.data;
    CHECK(strstr(h, "<h1>Run &lt;x&gt;</h1>"));
    CHECK(strstr(h, "<p>Some <strong>bold</strong> and <code>a|b &lt;c&gt;</code> text\nnext "
                    "line.</p>"));
    CHECK(strstr(h, "<h2 id=\"sec-what-ran\">What ran</h2>"));
    CHECK(strstr(h, "<li>first <a href=\"plots/t.svg\">svg</a>\n<ul>\n<li>nested</li></ul>"));
    CHECK_MSG(strstr(h, "<li>second bad img</li>"), "%s", h); /* shown, never linked or loaded */
    CHECK(!strstr(h, "javascript") && !strstr(h, "example.com") && !strstr(h, "<img"));
    CHECK(strstr(h, "<thead><tr><th>variant</th><th>C</th><th>cause</th></tr></thead>"));
    CHECK(strstr(h, "<tr><td>a|b</td><td class=\"r\">16</td><td>x &amp; y</td></tr>"));
    CHECK(strstr(h, "<hr>\n<p>footer</p>"));
    CHECK_INT(count(h, "<table"), 1);
    CHECK_INT(count(h, "</table>"), 1);
    size_t s, e;
    CHECK(html_md_section(md, "Charts", &s, &e) == 0);
    CHECK(strncmp(md + s, "## Charts\n", 10) == 0 && strncmp(md + e, "## Failures", 11) == 0);
    CHECK(html_md_section(md, "Failures", &s, &e) == 0 && strncmp(md + e, "---\n", 4) == 0);
    CHECK(html_md_section(md, "Chart", &s, &e) == -1);
    buf_release(&b);
}

TEST(chart_points_carry_tooltips)
{
    struct plot_chart c;
    plot_chart_init(&c, "tpot", "tpot", "t: TPOT", "median TPOT (ms)", PLOT_FIT_LINE);
    struct plot_series *s = plot_chart_series(&c, "a<b");
    plot_series_add(s, 1, 10, 9, 11);
    plot_series_add(s, 4, 20, 20, 20);
    CHECK(!plot_series_add(s, 0, 5, 5, 5)); /* not drawable: left out */
    s->fit = true, s->a = 7, s->b = 3;
    s = plot_chart_series(&c, "other");
    plot_series_add(s, 2, 12, 12, 12);
    plot_series_note(s, "C=2, knee");
    struct buf b;
    buf_init(&b, 1 << 20);
    html_chart(&b, &c);
    const char *h = b.data;
    CHECK(strstr(h, "<figure id=\"chart-tpot\" class=\"chart\">"));
    CHECK(strstr(h, "data-points=\"3\""));
    CHECK_INT(count(h, "<g class=\"pt\">"), 3);
    CHECK(strstr(h, "<title>a&lt;b: concurrency 1, median TPOT (ms) 10 (min 9, max 11 over "
                    "repeats)</title>"));
    CHECK(strstr(h, "<title>other (C=2, knee): concurrency 2, median TPOT (ms) 12</title>"));
    CHECK(strstr(h, "fit: 7.0 + 3.00·N (R² 0.000)"));
    CHECK_INT(count(h, "data-v=\"a&lt;b\""), 2); /* the series and its legend entry */
    CHECK(strstr(h, "fill=\"#9400d3\"") && strstr(h, "fill=\"#009e73\"")); /* gnuplot's lc 1, 2 */
    CHECK(!strstr(h, "nan") && !strstr(h, "inf"));
    buf_release(&b);
    plot_chart_release(&c);
}

/* The gnuplot script of a Pareto chart: per series its frontier as a
 * line, its dominated levels grey and without a key entry, its knee a ring
 * in its own colour; a series without dominated levels takes no data
 * block. */
TEST(pareto_gnuplot_script)
{
    struct pareto_pt a[] = {
        {100, 90, 1, false}, {300, 80, 2, false},  {650, 50, 4, false},
        {550, 45, 8, false}, {900, 10, 16, false},
    };
    struct pareto_pt b[] = {{50, 30, 1, false}, {130, 20, 4, false}};
    struct plot_chart c;
    plot_chart_init(&c, "pareto", "pareto", "t: Pareto", "per-user output tok/s", PLOT_FIT_NONE);
    ptrdiff_t ka = pareto_mark(a, 5), kb = pareto_mark(b, 2);
    pareto_series(&c, plot_chart_series(&c, "a"), a, 5, ka);
    pareto_series(&c, plot_chart_series(&c, "b"), b, 2, kb);
    CHECK_INT(c.n_s, 5); /* a, its dominated, its knee; b, its (empty) dominated */
    CHECK_INT(plot_chart_points(&c), 5 + 1 + 2); /* a: 5 and its knee; b: 2 */
    CHECK(c.s[0].note && strcmp(c.s[0].note[2], "C=4, knee") == 0);
    char *dir = test_tmp_path("plots");
    struct err e;
    err_init(&e);
    CHECK(mkdir(dir, 0755) == 0);
    CHECK_MSG(plot_write(&c, dir, &e) == 0, "%s", e.msg);
    char *gpp = path_join(dir, "pareto.gp"), *datp = path_join(dir, "pareto.dat");
    struct buf gp;
    buf_init(&gp, 1 << 20);
    CHECK(file_read_all(gpp, &gp, &e, 3) == 0);
    const char *g = gp.data ? gp.data : "";
    CHECK_MSG(strstr(g, "index 0 using 1:2 with linespoints lc 1 pt 7 ps 1.2 title \"a\""), "%s",
              g);
    CHECK(strstr(g, "index 1 using 1:2 with points lc rgb \"gray60\" pt 7 ps 1.0 title \"\""));
    CHECK(strstr(g, "index 2 using 1:2 with points lc 1 pt 6 ps 3 lw 2 title \"a knee (C=4)\""));
    CHECK(strstr(g, "index 3 using 1:2 with linespoints lc 2 pt 5 ps 1.2 title \"b\""));
    CHECK(!strstr(g, "index 4"));
    unlink(gpp);
    unlink(datp);
    rmdir(dir);
    free(gpp);
    free(datp);
    free(dir);
    buf_release(&gp);
    plot_chart_release(&c);
}

static void add(struct res_table *t, const char *variant, long c, const char *status, double tpot,
                double thr)
{
    struct res_point p;
    res_point_init(&p);
    p.variant = xstrdup(variant);
    p.concurrency = c;
    p.prompts = 2 * c;
    p.repeat = 1;
    p.status = xstrdup(status);
    p.key = xstrdup("");
    p.cause = xstrdup(strcmp(status, RES_OK) ? "boom" : "");
    p.log = xasprintf("%s/c%ld-n%ld.log", variant, c, 2 * c);
    p.started = xstrdup("");
    if (!isnan(tpot))
        mset_set(&p.metrics, "median_tpot_ms", tpot);
    if (!isnan(thr))
        mset_set(&p.metrics, "output_throughput", thr);
    mset_set(&p.metrics, "median_ttft_ms", 30 + c);
    res_table_add(t, &p);
}

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

/* report_build: REPORT.html beside REPORT.md, with every "## " section of
 * it, every chart inline though gnuplot is missing, the Pareto section
 * naming the dominated level and the knee, and nothing that loads. */
TEST(report_html_beside_report_md)
{
    char tmpl[] = "/tmp/sweep-html-test.XXXXXX";
    char *dir = mkdtemp(tmpl);
    if (!dir)
        abort();
    struct res_table t;
    struct err e;
    res_table_init(&t);
    err_init(&e);
    /* per-user 1000/tpot, total thr: C=8 is dominated by C=4 */
    add(&t, "v", 1, RES_OK, 1000.0 / 90, 100);
    add(&t, "v", 2, RES_OK, 1000.0 / 80, 300);
    add(&t, "v", 4, RES_OK, 1000.0 / 50, 650);
    add(&t, "v", 8, RES_OK, 1000.0 / 45, 550);
    add(&t, "v", 16, RES_OK, 1000.0 / 10, 900);
    add(&t, "v", 32, RES_FAILED, NAN, NAN);
    add(&t, "w<x>", 1, RES_OK, 20, 50);
    add(&t, "w<x>", 4, RES_OK, 30, 130);
    char *csv = path_join(dir, "points.csv");
    CHECK(res_table_save(&t, csv, &e) == 0);
    setenv("SWEEP_GNUPLOT", "/nonexistent/gnuplot", 1);
    struct report_opts o = {NULL, NULL, false, true, NULL};
    report_build(dir, &o, &e); /* -1: no gnuplot; the reports are written anyway */
    unsetenv("SWEEP_GNUPLOT");
    struct buf mb, hb;
    buf_init(&mb, 64 << 20);
    buf_init(&hb, 64 << 20);
    char *mdp = path_join(dir, "REPORT.md"), *htp = path_join(dir, "REPORT.html");
    CHECK(file_read_all(mdp, &mb, &e, 3) == 0 && file_read_all(htp, &hb, &e, 3) == 0);
    const char *md = mb.data ? mb.data : "", *h = hb.data ? hb.data : "";
    /* every "## " section of REPORT.md is an <h2> of REPORT.html, in order */
    size_t n_sec = 0;
    const char *at = h;
    for (const char *p = strstr(md, "\n## "); p; p = strstr(p + 1, "\n## ")) {
        const char *nl = strchr(p + 4, '\n');
        char *want = xasprintf("\">%.*s</h2>", (int)(nl - p - 4), p + 4);
        const char *hit = strstr(at, want);
        CHECK_MSG(hit, "section '%s' missing or out of order", want);
        at = hit ? hit : at;
        free(want);
        n_sec++;
    }
    CHECK(n_sec >= 5);
    /* a line of links to them under the title, the charts' among them */
    CHECK(strstr(h, "<nav class=\"note\">Sections: <a href=\"#sec-what-ran\">What ran</a> · "));
    CHECK(strstr(h, " · <a href=\"#sec-charts\">Charts</a> · "));
    CHECK(strstr(md, "## Pareto frontier"));
    CHECK_MSG(strstr(md, "| v | 1, 2, 4, 16 | 8 | 4 | 650.0 | 50.0 |"), "%s", md);
    CHECK(strstr(md, "| w<x> | 1, 4 | - | none | | |"));
    /* the charts gnuplot could not draw are inline, the pareto one greyed and ringed */
    CHECK(strstr(h, "id=\"chart-throughput\"") && strstr(h, "id=\"chart-tpot\"") &&
          strstr(h, "id=\"chart-ttft\"") && strstr(h, "id=\"chart-pareto\""));
    CHECK(strstr(h, "(C=8, dominated): total output throughput 550"));
    CHECK(strstr(h, "fill=\"#9a9a9a\""));
    CHECK(strstr(h, "(C=4, knee): total output throughput 650"));
    CHECK(strstr(h, "r=\"10\" fill=\"none\""));
    CHECK(strstr(h, "<td>w&lt;x&gt;</td>") && !strstr(h, "w<x>"));
    CHECK(strstr(h, "<td>failed</td>"));
    /* self-contained: nothing to fetch, a policy that forbids fetching */
    CHECK(!strstr(h, "src=") && !strstr(h, "<link") && !strstr(h, "@import"));
    CHECK(count(h, "http") == count(h, "http://www.w3.org/2000/svg") + count(h, "http-equiv"));
    CHECK(strstr(h, "content=\"default-src 'none';"));
    CHECK(strncmp(h, "<!DOCTYPE html>", 15) == 0 && strstr(h, "</html>\n"));
    buf_release(&mb);
    buf_release(&hb);
    free(mdp);
    free(htp);
    unlink(csv);
    free(csv);
    char *plots = path_join(dir, "plots");
    rm_dir(plots);
    free(plots);
    rm_dir(dir);
    res_table_release(&t);
}

TEST_MAIN()
