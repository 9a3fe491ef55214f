/*
 * Unit tests for runner/analysis/plot.c: template filling, the .dat/.gp pair, and a
 * real gnuplot run producing valid PNG and SVG (skipped, and said so, when
 * gnuplot is not installed); errors for a missing gnuplot and for an
 * unknown template placeholder.
 */
#include <dirent.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "buf.h"
#include "fileio.h"
#include "sweep.h"
#include "test.h"
#include "xalloc.h"

#include "analysis/plot.h"

static char *tmpdir(void)
{
    char tmpl[] = "/tmp/sweep-plot-test.XXXXXX";
    char *d = mkdtemp(tmpl);
    if (!d)
        abort(); /* no scratch folder: nothing here can run */
    return xstrdup(d);
}

/* Remove the files of a test folder, then the folder. */
static void cleanup(char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *de;
    while (d && (de = readdir(d)))
        if (de->d_name[0] != '.') {
            char *p = xasprintf("%s/%s", dir, de->d_name);
            unlink(p);
            free(p);
        }
    if (d)
        closedir(d);
    rmdir(dir);
    free(dir);
}

static char *slurp(const char *dir, const char *name)
{
    char *path = xasprintf("%s/%s", dir, name);
    struct buf b;
    struct err e;
    buf_init(&b, 64 << 20);
    err_init(&e);
    char *text = NULL;
    if (file_read_all(path, &b, &e, 3) == 0)
        text = buf_detach(&b, NULL);
    buf_release(&b);
    free(path);
    return text;
}

static bool have_gnuplot(void)
{
    const char *path = getenv("PATH");
    if (!path)
        return false;
    char *copy = xstrdup(path), *save = NULL;
    bool found = false;
    for (char *d = strtok_r(copy, ":", &save); d && !found; d = strtok_r(NULL, ":", &save)) {
        char *p = xasprintf("%s/gnuplot", d);
        found = access(p, X_OK) == 0;
        free(p);
    }
    free(copy);
    return found;
}

static void make_chart(struct plot_chart *c)
{
    plot_chart_init(c, "throughput", "throughput", "demo: output throughput vs concurrency",
                    "output throughput (tok/s)", PLOT_FIT_THROUGHPUT);
    struct plot_series *s = plot_chart_series(c, "mx\"fp4");
    plot_series_add(s, 16, 30.1, 30.1, 30.1);
    plot_series_add(s, 1, 14.0, 14.0, 14.0);
    plot_series_add(s, 8, 28.0, 27.0, 29.5);
    plot_series_add(s, 0, 5, 5, 5);       /* x <= 0: not drawable, ignored */
    plot_series_add(s, 4, NAN, NAN, NAN); /* ignored */
    s->fit = true;
    s->a = 40;
    s->b = 30.8;
    s->r2 = 0.9995;
    s->out_tokens = 10;               /* E2E(N) = 10·(40 + 30.8·N) ms */
    s->ceiling = 1000.0 / 30.8 * 1.5; /* the decode-only ceiling, its own number */
    s = plot_chart_series(c, "nvfp4");
    plot_series_add(s, 32, 45.8, 45.8, 45.8);
}

TEST(write_fills_the_template)
{
    char *dir = tmpdir();
    struct plot_chart c;
    struct err e;
    err_init(&e);
    make_chart(&c);
    CHECK_INT(plot_chart_points(&c), 4);
    CHECK_MSG(plot_write(&c, dir, &e) == 0, "%s", e.msg);
    char *gp = slurp(dir, "throughput.gp"), *dat = slurp(dir, "throughput.dat");
    CHECK(gp && dat);
    if (gp && dat) {
        CHECK(strstr(gp, "set title \"demo: output throughput vs concurrency\""));
        CHECK(strstr(gp, "set xlabel \"concurrency (requests in flight, log2 scale)\""));
        CHECK(strstr(gp, "set ylabel \"output throughput (tok/s)\""));
        CHECK(strstr(gp, "set logscale x 2"));
        CHECK(strstr(gp, "set xtics (1, 8, 16, 32)"));
        CHECK(strstr(gp, "a1 = 40; b1 = 30.8"));
        CHECK(strstr(gp, "x*1000/(a1 + b1*x)"));
        CHECK(strstr(gp, "title \"mx\\\"fp4: N·10·1000/E2E(N) tok/s, E2E = 400 + 308.0·N ms "
                         "(TTFT included)\""));
        CHECK(strstr(gp, "ceil1 = 48.7012987"));
        CHECK(strstr(gp, "ceil1 with lines"));
        CHECK(strstr(gp, "decode-only ceiling 1000/b = 48.7 tok/s (no TTFT)"));
        CHECK(strstr(gp, "set output \"throughput.png\""));
        CHECK(strstr(gp, "set output \"throughput.svg\""));
        CHECK(!strstr(gp, "@NAME@") && !strstr(gp, "@PLOT@"));
        /* the first series has a spread at 8, so it gets error bars */
        CHECK(strstr(gp, "index 0 using 1:2:3:4 with yerrorbars"));
        CHECK(strstr(gp, "index 1 using 1:2 with linespoints"));
        /* data sorted by concurrency, one block per series */
        CHECK_MSG(strstr(dat, "# index 0: mx\"fp4\n1 14 14 14\n8 28 27 29.5\n16 30.1 30.1 30.1\n"
                              "\n\n# index 1: nvfp4\n32 45.8 45.8 45.8\n"),
                  "%s", dat);
    }
    free(gp);
    free(dat);
    plot_chart_release(&c);
    cleanup(dir);
}

TEST(render_png_and_svg)
{
    if (!have_gnuplot()) {
        printf("skipped: gnuplot not installed\n");
        return;
    }
    char *dir = tmpdir();
    struct plot_chart c;
    struct err e;
    err_init(&e);
    make_chart(&c);
    CHECK(plot_write(&c, dir, &e) == 0);
    CHECK_MSG(plot_render(dir, "throughput", &e) == 0, "%s", e.msg);
    char *png = slurp(dir, "throughput.png"), *svg = slurp(dir, "throughput.svg");
    CHECK(png && memcmp(png, "\x89PNG\r\n\x1a\n", 8) == 0);
    CHECK(svg && strstr(svg, "<svg"));
    CHECK(svg && strstr(svg, "output throughput (tok/s)"));
    CHECK(svg && strstr(svg, "concurrency (requests in flight, log2 scale)"));
    CHECK(svg && strstr(svg, "decode-only ceiling 1000/b = 48.7 tok/s"));
    FILE *f = tmpfile();
    CHECK_MSG(plot_preview(dir, "throughput", f, &e) == 0, "%s", e.msg);
    CHECK(ftell(f) > 1000);
    fclose(f);
    free(png);
    free(svg);
    plot_chart_release(&c);
    cleanup(dir);
}

TEST(missing_gnuplot_is_named)
{
    char *dir = tmpdir();
    struct plot_chart c;
    struct err e;
    err_init(&e);
    make_chart(&c);
    CHECK(plot_write(&c, dir, &e) == 0);
    setenv("SWEEP_GNUPLOT", "/nonexistent/gnuplot", 1);
    CHECK(plot_render(dir, "throughput", &e) == -1);
    unsetenv("SWEEP_GNUPLOT");
    CHECK_INT(e.code, RN_ERR_ENV);
    CHECK_MSG(strstr(e.msg, "gnuplot not found ('/nonexistent/gnuplot'): charts skipped"), "%s",
              e.msg);
    plot_chart_release(&c);
    cleanup(dir);
}

TEST(template_errors)
{
    char *dir = tmpdir();
    char *path = xasprintf("%s/ttft.gp", dir);
    struct err e;
    err_init(&e);
    const char *bad = "set title \"@TITLE@\"\nplot @PLOTS@\n# user@example.com is fine\n";
    CHECK(file_write_atomic(path, bad, strlen(bad), &e, 3) == 0);
    setenv("SWEEP_PLOT_TEMPLATES", dir, 1);
    struct plot_chart c;
    plot_chart_init(&c, "ttft", "ttft", "t", "median TTFT (ms)", PLOT_FIT_NONE);
    plot_series_add(plot_chart_series(&c, "a"), 1, 2, 2, 2);
    CHECK(plot_write(&c, dir, &e) == -1);
    CHECK_STR(e.msg, "template 'ttft': unknown placeholder @PLOTS@");
    err_init(&e);
    free(c.tmpl);
    c.tmpl = xstrdup("nosuch");
    CHECK(plot_write(&c, dir, &e) == -1);
    CHECK_STR(e.msg, "no chart template 'nosuch' in $SWEEP_PLOT_TEMPLATES");
    unsetenv("SWEEP_PLOT_TEMPLATES");
    /* embedded templates exist for every chart kind */
    static const char *const kinds[] = {"throughput", "tpot", "ttft", "ratio"};
    for (size_t i = 0; i < 4; i++) {
        char *t = plot_template(kinds[i]);
        CHECK_MSG(t && strstr(t, "@PLOT@"), "template %s", kinds[i]);
        free(t);
    }
    struct plot_chart empty;
    plot_chart_init(&empty, "x", "ttft", "t", "y", PLOT_FIT_NONE);
    err_init(&e);
    CHECK(plot_write(&empty, dir, &e) == -1);
    CHECK_STR(e.msg, "chart 'x' has no points to draw");
    plot_chart_release(&empty);
    plot_chart_release(&c);
    free(path);
    cleanup(dir);
}

TEST_MAIN()
