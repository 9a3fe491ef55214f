/*
 * plot: chart data and scripts from templates, and gnuplot runs. Each
 * chart is self-contained in its folder (.dat + .gp), so the scripts can
 * be rerun by hand; gnuplot is started from an argv vector with
 * posix_spawnp in that folder, its output captured through a pipe.
 */
#include "analysis/plot.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "buf.h"
#include "capture.h"
#include "fileio.h"
#include "log.h"
#include "strutil.h"
#include "sweep.h"
#include "timeutil.h"
#include "xalloc.h"

#include "analysis/fit.h"

#define GNUPLOT_TIMEOUT_MS 60000.0
#define GNUPLOT_OUT_MAX    ((size_t)4 << 20)
#define SCRIPT_MAX         ((size_t)4 << 20)

struct plot_template {
    const char *name;
    const char *text;
};

static const struct plot_template templates[] = {
#include "plot_templates.h"
};

/* Point types cycled over series: filled circle, square, diamond, triangles. */
static const int point_types[] = {7, 5, 13, 9, 11, 15};

/* ---- chart building ---- */

void plot_chart_init(struct plot_chart *c, const char *name, const char *tmpl, const char *title,
                     const char *ylabel, enum plot_fit fit)
{
    memset(c, 0, sizeof(*c));
    c->name = xstrdup(name);
    c->tmpl = xstrdup(tmpl);
    c->title = xstrdup(title);
    c->xlabel = xstrdup("concurrency (requests in flight, log2 scale)");
    c->ylabel = xstrdup(ylabel);
    c->fit = fit;
}

void plot_chart_release(struct plot_chart *c)
{
    for (size_t i = 0; i < c->n_s; i++) {
        struct plot_series *s = &c->s[i];
        free(s->title);
        free(s->x);
        free(s->y);
        free(s->lo);
        free(s->hi);
        for (size_t j = 0; s->note && j < s->n; j++)
            free(s->note[j]);
        free(s->note);
    }
    free(c->s);
    free(c->name);
    free(c->tmpl);
    free(c->title);
    free(c->xlabel);
    free(c->ylabel);
    memset(c, 0, sizeof(*c));
}

struct plot_series *plot_chart_series(struct plot_chart *c, const char *title)
{
    XGROW(c->s, c->cap_s, c->n_s + 1);
    struct plot_series *s = &c->s[c->n_s++];
    memset(s, 0, sizeof(*s));
    s->title = xstrdup(title);
    return s;
}

bool plot_series_add(struct plot_series *s, double x, double y, double lo, double hi)
{
    if (!isfinite(x) || x <= 0 || !isfinite(y))
        return false;
    if (s->n == s->cap) {
        size_t cap = s->cap ? 2 * s->cap : 8;
        s->x = xrealloc(s->x, cap * sizeof(double));
        s->y = xrealloc(s->y, cap * sizeof(double));
        s->lo = xrealloc(s->lo, cap * sizeof(double));
        s->hi = xrealloc(s->hi, cap * sizeof(double));
        s->note = xrealloc(s->note, cap * sizeof(char *));
        s->cap = cap;
    }
    s->note[s->n] = NULL;
    s->x[s->n] = x;
    s->y[s->n] = y;
    s->lo[s->n] = isfinite(lo) ? lo : y;
    s->hi[s->n] = isfinite(hi) ? hi : y;
    s->n++;
    return true;
}

void plot_series_note(struct plot_series *s, const char *note)
{
    if (!s->n)
        return;
    free(s->note[s->n - 1]);
    s->note[s->n - 1] = xstrdup(note);
}

size_t plot_chart_points(const struct plot_chart *c)
{
    size_t n = 0;
    for (size_t i = 0; i < c->n_s; i++)
        n += c->s[i].n;
    return n;
}

/* ---- templates ---- */

char *plot_template(const char *name)
{
    const char *dir = getenv("SWEEP_PLOT_TEMPLATES");
    if (dir && *dir) {
        char *path = xasprintf("%s/%s.gp", dir, name);
        struct buf b;
        struct err e;
        buf_init(&b, SCRIPT_MAX);
        err_init(&e);
        int rc = file_read_all(path, &b, &e, RN_ERR_ENV);
        free(path);
        if (rc == 0)
            return buf_detach(&b, NULL);
        buf_release(&b);
        return NULL;
    }
    for (size_t i = 0; i < sizeof(templates) / sizeof(templates[0]); i++)
        if (strcmp(templates[i].name, name) == 0)
            return xstrdup(templates[i].text);
    return NULL;
}

char *plot_quote(const char *s)
{
    struct buf b;
    buf_init(&b, SCRIPT_MAX);
    buf_putc(&b, '"');
    for (; *s; s++) {
        if (*s == '"' || *s == '\\')
            buf_putc(&b, '\\');
        if (*s == '\n' || *s == '\r')
            buf_putc(&b, ' ');
        else
            buf_putc(&b, *s);
    }
    buf_putc(&b, '"');
    return buf_detach(&b, NULL);
}

struct subst {
    const char *key;   /* placeholder name, without the @ signs */
    const char *value; /* replacement text */
};

/* Replace every @KEY@ in tmpl; an @UPPERCASE@ word not in subs is an error. */
static int fill(const char *tmpl_name, const char *tmpl, const struct subst *subs, size_t n,
                struct buf *out, struct err *err)
{
    for (const char *p = tmpl; *p;) {
        if (*p == '@') {
            const char *q = p + 1;
            while (*q >= 'A' && *q <= 'Z')
                q++;
            if (*q == '@' && q > p + 1) {
                size_t len = (size_t)(q - p - 1);
                size_t i = 0;
                while (i < n && !(strlen(subs[i].key) == len && !strncmp(subs[i].key, p + 1, len)))
                    i++;
                if (i == n)
                    return err_set(err, RN_ERR_USAGE, "template '%s': unknown placeholder %.*s",
                                   tmpl_name, (int)(len + 2), p),
                           -1;
                buf_puts(out, subs[i].value);
                p = q + 1;
                continue;
            }
        }
        buf_putc(out, *p++);
    }
    if (out->toobig)
        return err_set(err, RN_ERR_USAGE, "template '%s': script too large", tmpl_name), -1;
    return 0;
}

/* ---- script generation ---- */

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Indices of s's points in ascending x. */
static size_t *sorted_order(const struct plot_series *s)
{
    size_t *ord = xcalloc(s->n + 1, sizeof(size_t));
    for (size_t i = 0; i < s->n; i++)
        ord[i] = i;
    for (size_t i = 1; i < s->n; i++) /* insertion sort: a handful of points */
        for (size_t j = i; j > 0 && s->x[ord[j - 1]] > s->x[ord[j]]; j--) {
            size_t t = ord[j];
            ord[j] = ord[j - 1];
            ord[j - 1] = t;
        }
    return ord;
}

static void write_dat(const struct plot_chart *c, struct buf *b)
{
    buf_printf(b, "# %s.dat: data of %s.gp, written by sweep. One block per series\n", c->name,
               c->name);
    buf_printf(b, "# (gnuplot index 0, 1, ...); columns: concurrency, value, low, high.\n");
    size_t idx = 0;
    for (size_t k = 0; k < c->n_s; k++) {
        const struct plot_series *s = &c->s[k];
        if (!s->n)
            continue;
        buf_printf(b, "%s# index %zu: %s\n", idx ? "\n\n" : "", idx, s->title);
        size_t *ord = sorted_order(s);
        for (size_t i = 0; i < s->n; i++) {
            size_t j = ord[i];
            buf_printf(b, "%.10g %.10g %.10g %.10g\n", s->x[j], s->y[j], s->lo[j], s->hi[j]);
        }
        free(ord);
        idx++;
    }
}

static bool has_spread(const struct plot_series *s)
{
    for (size_t i = 0; i < s->n; i++)
        if (s->lo[i] != s->y[i] || s->hi[i] != s->y[i])
            return true;
    return false;
}

/* The plot command's clauses, the fit parameters, x tics and range. */
static void build_plot(const struct plot_chart *c, struct buf *plot, struct buf *defs,
                       struct buf *xtics, struct buf *xrange)
{
    double *xs = xcalloc(plot_chart_points(c) + 1, sizeof(double));
    size_t nx = 0, idx = 0, pos = 0; /* pos: the owner's place among PLOT_ROLE_SERIES */
    int lc = 1, pt = point_types[0];
    for (size_t k = 0; k < c->n_s; k++) {
        const struct plot_series *s = &c->s[k];
        if (s->role == PLOT_ROLE_SERIES) {
            size_t m = s->mark > 0 ? (size_t)s->mark - 1 : pos;
            lc = s->color > 0 ? s->color : (int)pos + 1;
            pt = point_types[m % (sizeof(point_types) / sizeof(int))];
            pos++;
        }
        if (!s->n)
            continue;
        char *t = plot_quote(s->title); /* title "": no key entry */
        if (plot->len)
            buf_puts(plot, ", \\\n         ");
        if (s->role != PLOT_ROLE_SERIES) { /* a frontier's dominated points, its knee */
            if (s->role == PLOT_ROLE_DOMINATED)
                buf_printf(plot,
                           "\"%s.dat\" index %zu using 1:2 with points lc rgb \"gray60\" pt %d "
                           "ps 1.0 title %s",
                           c->name, idx, pt, t);
            else
                buf_printf(plot,
                           "\"%s.dat\" index %zu using 1:2 with points lc %d pt 6 ps 3 lw 2 "
                           "title %s",
                           c->name, idx, lc, t);
            free(t);
            for (size_t i = 0; i < s->n; i++)
                xs[nx++] = s->x[i];
            idx++;
            continue;
        }
        /* measured points; joined by lines only where no fitted line is drawn */
        bool fitted = s->fit && c->fit != PLOT_FIT_NONE;
        if (has_spread(s))
            buf_printf(plot,
                       "\"%s.dat\" index %zu using 1:2:3:4 with %s lc %d pt %d ps 1.2 title %s",
                       c->name, idx, fitted ? "yerrorbars" : "yerrorlines", lc, pt, t);
        else
            buf_printf(plot, "\"%s.dat\" index %zu using 1:2 with %s lc %d pt %d ps 1.2 title %s",
                       c->name, idx, fitted ? "points" : "linespoints", lc, pt, t);
        free(t);
        if (s->fit && c->fit != PLOT_FIT_NONE) {
            buf_printf(defs, "a%zu = %.10g; b%zu = %.10g  # %s\n", k + 1, s->a, k + 1, s->b,
                       s->title);
            char *label, fml[128];
            fit_formula(s->a, s->b, 1, 2, "N", fml, sizeof(fml));
            if (c->fit == PLOT_FIT_LINE) {
                label = xasprintf("%s fit: %s ms (R² %.3f)", s->title, fml, s->r2);
            } else {
                fit_formula(s->a * s->out_tokens, s->b * s->out_tokens, 0, 1, "N", fml,
                            sizeof(fml));
                label = xasprintf("%s: N·%.0f·1000/E2E(N) tok/s, E2E = %s ms (TTFT included)",
                                  s->title, s->out_tokens, fml);
            }
            t = plot_quote(label);
            if (c->fit == PLOT_FIT_LINE)
                buf_printf(plot,
                           ", \\\n         a%zu + b%zu*x with lines lc %d dt 2 lw 1.5 title %s",
                           k + 1, k + 1, lc, t);
            else
                buf_printf(plot,
                           ", \\\n         x*1000/(a%zu + b%zu*x) with lines lc %d dt 2 lw 1.5 "
                           "title %s",
                           k + 1, k + 1, lc, t);
            free(t);
            free(label);
            if (c->fit == PLOT_FIT_THROUGHPUT && isfinite(s->ceiling) && s->ceiling > 0) {
                label = xasprintf("%s decode-only ceiling 1000/b = %.1f tok/s (no TTFT)", s->title,
                                  s->ceiling);
                t = plot_quote(label);
                buf_printf(defs, "ceil%zu = %.10g  # %s decode-only ceiling\n", k + 1, s->ceiling,
                           s->title);
                buf_printf(plot, ", \\\n         ceil%zu with lines lc %d dt 3 lw 1.5 title %s",
                           k + 1, lc, t);
                free(t);
                free(label);
            }
        }
        for (size_t i = 0; i < s->n; i++)
            xs[nx++] = s->x[i];
        idx++;
    }
    if (strcmp(c->tmpl, "ratio") == 0)
        buf_puts(plot,
                 ", \\\n         1 with lines lc rgb \"gray40\" dt 2 lw 1.5 title \"equal (1.0)\"");
    if (!defs->len)
        buf_puts(defs, "# (no fitted lines on this chart)\n");
    qsort(xs, nx, sizeof(double), cmp_double);
    for (size_t i = 0; i < nx; i++)
        if (i == 0 || xs[i] != xs[i - 1])
            buf_printf(xtics, "%s%.10g", xtics->len ? ", " : "", xs[i]);
    double lo = nx ? xs[0] : 1, hi = nx ? xs[nx - 1] : 1;
    buf_printf(xrange, "%.6g:%.6g", lo / 1.4, hi * 1.4);
    free(xs);
}

int plot_write(const struct plot_chart *c, const char *dir, struct err *err)
{
    struct buf dat, gp, plot, defs, xtics, xrange;
    char *tmpl = NULL, *path = NULL, *title = NULL, *xl = NULL, *yl = NULL;
    int rc = -1;
    buf_init(&dat, SCRIPT_MAX);
    buf_init(&gp, SCRIPT_MAX);
    buf_init(&plot, SCRIPT_MAX);
    buf_init(&defs, SCRIPT_MAX);
    buf_init(&xtics, SCRIPT_MAX);
    buf_init(&xrange, 256);
    if (plot_chart_points(c) == 0) {
        err_set(err, RN_ERR_USAGE, "chart '%s' has no points to draw", c->name);
        goto out;
    }
    tmpl = plot_template(c->tmpl);
    if (!tmpl) {
        err_set(err, RN_ERR_USAGE, "no chart template '%s'%s", c->tmpl,
                getenv("SWEEP_PLOT_TEMPLATES") ? " in $SWEEP_PLOT_TEMPLATES" : "");
        goto out;
    }
    build_plot(c, &plot, &defs, &xtics, &xrange);
    /* values go inside "..." in the templates: strip the quotes plot_quote adds */
    title = plot_quote(c->title);
    xl = plot_quote(c->xlabel);
    yl = plot_quote(c->ylabel);
    title[strlen(title) - 1] = xl[strlen(xl) - 1] = yl[strlen(yl) - 1] = '\0';
    if (defs.len && defs.data[defs.len - 1] == '\n')
        defs.data[--defs.len] = '\0';
    const struct subst subs[] = {
        {"NAME", c->name},   {"TITLE", title + 1},  {"XLABEL", xl + 1},      {"YLABEL", yl + 1},
        {"DEFS", defs.data}, {"XTICS", xtics.data}, {"XRANGE", xrange.data}, {"PLOT", plot.data},
    };
    if (fill(c->tmpl, tmpl, subs, sizeof(subs) / sizeof(subs[0]), &gp, err) != 0)
        goto out;
    write_dat(c, &dat);
    path = xasprintf("%s/%s.dat", dir, c->name);
    if (file_write_atomic(path, dat.data, dat.len, err, RN_ERR_ENV) != 0)
        goto out;
    free(path);
    path = xasprintf("%s/%s.gp", dir, c->name);
    if (file_write_atomic(path, gp.data, gp.len, err, RN_ERR_ENV) != 0)
        goto out;
    rc = 0;
out:
    free(tmpl);
    free(path);
    free(title);
    free(xl);
    free(yl);
    buf_release(&dat);
    buf_release(&gp);
    buf_release(&plot);
    buf_release(&defs);
    buf_release(&xtics);
    buf_release(&xrange);
    return rc;
}

/* ---- running gnuplot ---- */

/*
 * Run gnuplot with args (NULL-terminated) in dir, stdin from /dev/null,
 * stdout and stderr into out; messages name the script as in folder shown.
 * Returns 0 on exit status 0, else -1 with err.
 */
static int run_gnuplot(const char *dir, const char *shown, const char *const *args, struct buf *out,
                       struct err *err)
{
    const char *bin = getenv("SWEEP_GNUPLOT");
    if (!bin || !*bin)
        bin = "gnuplot";
    const char *argv[8];
    size_t n = 0;
    argv[n++] = bin;
    for (size_t i = 0; args[i] && n < 7; i++)
        argv[n++] = args[i];
    argv[n] = NULL;

    struct capture_opts opts = {.dir = dir, .with_stderr = true, .timeout_ms = GNUPLOT_TIMEOUT_MS};
    struct capture_result res;
    int sp = capture_run(argv, &opts, out, &res);
    if (sp == ENOENT)
        return err_set(err, RN_ERR_ENV,
                       "gnuplot not found ('%s'): charts skipped; install gnuplot-nox (or set "
                       "SWEEP_GNUPLOT), then run 'sweep plot RUN_DIR'",
                       bin),
               -1;
    if (sp != 0)
        return err_set(err, RN_ERR_ENV, "cannot start '%s': %s", bin, strerror(sp)), -1;
    if (res.timed_out)
        return err_set(err, RN_ERR_ENV, "gnuplot %s/%s: no answer in %.0f s (killed)", shown,
                       argv[n - 1], GNUPLOT_TIMEOUT_MS / 1000),
               -1;
    int status = res.wstatus;
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        char line[300];
        const char *at;
        size_t len = str_last_line(out->data ? out->data : "", out->len, &at);
        snprintf(line, sizeof(line), "%.*s", (int)len, at);
        if (WIFEXITED(status))
            return err_set(err, RN_ERR_ENV, "gnuplot %s/%s failed (exit %d): %s", shown,
                           argv[n - 1], WEXITSTATUS(status), line),
                   -1;
        return err_set(err, RN_ERR_ENV, "gnuplot %s/%s killed by signal %d", shown, argv[n - 1],
                       WTERMSIG(status)),
               -1;
    }
    return 0;
}

/* The last bytes of every PNG: the IEND chunk (length 0, type, CRC). */
static const unsigned char png_end[12] = {0, 0, 0, 0, 'I', 'E', 'N', 'D', 0xae, 0x42, 0x60, 0x82};

/*
 * Whether the image at path is whole: a PNG ends with its IEND chunk, an
 * SVG with its closing tag. gnuplot exits 0 after a short write (a full
 * disk), so its status alone does not say. NULL when whole, else why.
 */
static const char *image_problem(const char *path, bool png)
{
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0) {
        if (fd >= 0)
            close(fd);
        return "not written";
    }
    unsigned char tail[64];
    size_t want = st.st_size < (off_t)sizeof(tail) ? (size_t)st.st_size : sizeof(tail);
    ssize_t n = want ? pread(fd, tail, want, st.st_size - (off_t)want) : 0;
    close(fd);
    if (n != (ssize_t)want || !S_ISREG(st.st_mode) || st.st_size == 0)
        return "empty or unreadable";
    if (png)
        return n >= 12 && memcmp(tail + n - 12, png_end, 12) == 0 ? NULL
                                                                  : "cut short (no IEND chunk)";
    while (n > 0 && (tail[n - 1] == '\n' || tail[n - 1] == '\r' || tail[n - 1] == ' '))
        n--;
    return n >= 6 && memcmp(tail + n - 6, "</svg>", 6) == 0 ? NULL : "cut short (no </svg>)";
}

/* Hard-link (else copy) dir/NAME.ext to work/NAME.ext. */
static int stage(const char *dir, const char *work, const char *name, const char *ext,
                 struct err *err)
{
    char *from = xasprintf("%s/%s.%s", dir, name, ext),
         *to = xasprintf("%s/%s.%s", work, name, ext);
    int rc = 0;
    if (link(from, to) != 0 && file_copy_atomic(from, to, err, RN_ERR_ENV) != 0)
        rc = -1;
    free(from);
    free(to);
    return rc;
}

int plot_render(const char *dir, const char *name, struct err *err)
{
    static const char *const ext[] = {"png", "svg", "gp", "dat"}; /* images first */
    /* gnuplot runs in a scratch folder beside the chart; the images move
     * into dir only when both are whole, so a chart is the new one or none
     * (never a cut PNG, an empty SVG, or an old image of other data) */
    char *work = xasprintf("%s/.render-%s.%ld", dir, name, (long)getpid());
    char *gp = xasprintf("%s.gp", name);
    const char *args[] = {gp, NULL};
    struct buf out;
    int rc = -1;
    buf_init(&out, GNUPLOT_OUT_MAX);
    for (size_t i = 0; i < 2; i++) { /* the old images go first: they show older data */
        char *img = xasprintf("%s/%s.%s", dir, name, ext[i]);
        if (unlink(img) != 0 && errno != ENOENT) {
            err_set(err, RN_ERR_ENV, "%s: cannot replace: %s", img, strerror(errno));
            free(img);
            goto out;
        }
        free(img);
    }
    if (mkdir(work, 0755) != 0) {
        err_set(err, RN_ERR_ENV, "%s: %s", work, strerror(errno));
        goto out;
    }
    if (stage(dir, work, name, "gp", err) != 0 || stage(dir, work, name, "dat", err) != 0 ||
        run_gnuplot(work, dir, args, &out, err) != 0)
        goto out;
    if (out.len)
        log_debug("gnuplot %s: %s", gp, out.data);
    for (size_t i = 0; i < 2; i++) {
        char *img = xasprintf("%s/%s.%s", work, name, ext[i]);
        const char *why = image_problem(img, i == 0);
        free(img);
        if (why) {
            err_set(err, RN_ERR_ENV, "gnuplot %s/%s: %s.%s %s (a full disk?)", dir, gp, name,
                    ext[i], why);
            goto out;
        }
    }
    for (size_t i = 0; i < 2; i++) {
        char *from = xasprintf("%s/%s.%s", work, name, ext[i]);
        char *to = xasprintf("%s/%s.%s", dir, name, ext[i]);
        int r = rename(from, to);
        if (r != 0)
            err_set(err, RN_ERR_ENV, "%s: rename: %s", to, strerror(errno));
        free(from);
        free(to);
        if (r != 0)
            goto out;
    }
    char *png = xasprintf("%s/%s.png", dir, name);
    file_fsync_dir(png); /* the folder holding it: the renames are durable */
    free(png);
    rc = 0;
out:
    for (size_t i = 0; i < sizeof(ext) / sizeof(ext[0]); i++) {
        char *f = xasprintf("%s/%s.%s", work, name, ext[i]);
        unlink(f);
        free(f);
    }
    rmdir(work);
    if (rc != 0) /* an image renamed before a later failure goes too */
        for (size_t i = 0; i < 2; i++) {
            char *img = xasprintf("%s/%s.%s", dir, name, ext[i]);
            unlink(img);
            free(img);
        }
    buf_release(&out);
    free(gp);
    free(work);
    return rc;
}

void plot_note_failure(struct buf *names, struct buf *whys, const char *name, const char *why)
{
    buf_printf(names, "%s%s", names->len ? ", " : "", name);
    buf_printf(whys, "%s%s: %s", whys->len ? "; " : "", name, why);
}

int plot_preview(const char *dir, const char *name, FILE *f, struct err *err)
{
    char *gp = xasprintf("%s.gp", name);
    const char *args[] = {"-e", "outputs=\"dumb\"", gp, NULL};
    struct buf out;
    buf_init(&out, GNUPLOT_OUT_MAX);
    int rc = run_gnuplot(dir, dir, args, &out, err);
    if (rc == 0 && out.len)
        fwrite(out.data, 1, out.len, f);
    buf_release(&out);
    free(gp);
    return rc;
}
