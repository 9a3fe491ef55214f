/*
 * html: page shell, Markdown subset to HTML, and SVG charts for the HTML
 * reports (the contract is in html.h).
 *
 * Why the charts are drawn here and not taken from gnuplot's SVGs: a
 * gnuplot SVG carries no per-point tooltip with the values, no hook to
 * hide a series from the legend, fixed pixel sizes and fonts, and it does
 * not exist when gnuplot is missing; drawing from the plot_chart the .dat
 * files are written from gives the same data, the same colours (gnuplot's
 * default line colours), markers and log2 axes, a <title> per point, and
 * charts in every report, gnuplot or not.
 */
#include "analysis/html.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "xalloc.h"

#include "analysis/fit.h"

/* ---- text ---- */

void html_escape(struct buf *b, const char *s, size_t n)
{
    for (size_t i = 0; i < n && s[i]; i++) {
        switch (s[i]) {
        case '&':
            buf_puts(b, "&amp;");
            break;
        case '<':
            buf_puts(b, "&lt;");
            break;
        case '>':
            buf_puts(b, "&gt;");
            break;
        case '"':
            buf_puts(b, "&quot;");
            break;
        case '\'':
            buf_puts(b, "&#39;");
            break;
        default:
            buf_putc(b, s[i]);
        }
    }
}

static void esc(struct buf *b, const char *s)
{
    html_escape(b, s, strlen(s));
}

/* ---- the page ---- */

/* No fetch of any kind; inline style and script only. */
static const char policy[] = "default-src 'none'; style-src 'unsafe-inline'; "
                             "script-src 'unsafe-inline'; img-src data:";

static const char style[] =
    "body{font-family:system-ui,sans-serif;margin:0;color:#222;background:#fff}"
    "main{max-width:1280px;margin:0 auto;padding:8px 24px 48px}"
    "h1{font-size:1.6em}h2{margin-top:1.6em;border-bottom:1px solid #ddd}"
    "code{background:#f3f3f3;padding:0 3px;border-radius:3px;font-size:.92em;"
    "overflow-wrap:anywhere}"
    "table{border-collapse:collapse;margin:8px 0 16px;font-size:.92em}"
    "th,td{border:1px solid #ccc;padding:3px 8px;vertical-align:top}"
    "th{background:#f4f4f4;cursor:pointer;user-select:none}"
    "th[aria-sort=ascending]::after{content:' \\25B2'}"
    "th[aria-sort=descending]::after{content:' \\25BC'}"
    "td.r,th.r{text-align:right}tbody tr:nth-child(even){background:#fafafa}"
    ".charts{display:grid;grid-template-columns:repeat(auto-fill,minmax(560px,1fr));gap:20px}"
    "figure{margin:0;border:1px solid #ddd;border-radius:4px;padding:8px}"
    "figcaption{font-weight:600;margin-bottom:4px}"
    "svg.chart{width:100%;height:auto;display:block}"
    "svg text{font-size:12px;fill:#333}.grid{stroke:#e4e4e4}.axis{stroke:#444}"
    ".s.off,.pt.off{display:none}"
    ".legend{list-style:none;padding:0;margin:6px 0 0;display:flex;flex-wrap:wrap;gap:4px 14px}"
    ".legend li{cursor:pointer;font-size:.9em}.legend li.off{opacity:.35;"
    "text-decoration:line-through}"
    ".note{color:#555;font-size:.92em}";

/* Sorting (numbers as numbers, empty cells last) and series toggling. */
static const char script[] =
    "(function(){\n"
    "function key(c){var s=c?c.textContent.trim():'';if(s==='')return null;"
    "var n=parseFloat(s.replace(/[,%\\u00d7]/g,''));"
    "return /^[-+]?[0-9.]/.test(s)&&!isNaN(n)?n:s.toLowerCase();}\n"
    "document.querySelectorAll('table').forEach(function(t){"
    "if(!t.tHead||!t.tBodies.length)return;var hs=t.tHead.rows[0].cells;"
    "Array.prototype.forEach.call(hs,function(th,i){th.addEventListener('click',function(){"
    "var asc=th.getAttribute('aria-sort')!=='ascending';"
    "Array.prototype.forEach.call(hs,function(h){h.removeAttribute('aria-sort');});"
    "th.setAttribute('aria-sort',asc?'ascending':'descending');var b=t.tBodies[0];"
    "var rs=Array.prototype.slice.call(b.rows);rs.sort(function(x,y){"
    "var p=key(x.cells[i]),q=key(y.cells[i]);if(p===null||q===null)return (p===null)-(q===null);"
    "var r=typeof p===typeof q?(p<q?-1:p>q?1:0):(typeof p==='number'?-1:1);return asc?r:-r;});"
    "rs.forEach(function(r){b.appendChild(r);});});});});\n"
    "function toggle(v,off){document.querySelectorAll('[data-v]').forEach(function(e){"
    "if(e.getAttribute('data-v')===v)e.classList.toggle('off',off);});}\n"
    "document.querySelectorAll('.legend li').forEach(function(li){"
    "function go(){toggle(li.getAttribute('data-v'),!li.classList.contains('off'));}"
    "li.addEventListener('click',go);li.addEventListener('keydown',function(e){"
    "if(e.key==='Enter'||e.key===' '){e.preventDefault();go();}});});\n"
    "document.documentElement.setAttribute('data-js','ready');\n"
    "})();\n";

void html_begin(struct buf *b, const char *title)
{
    buf_printf(b,
               "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
               "<meta http-equiv=\"Content-Security-Policy\" content=\"%s\">\n"
               "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
               "<title>",
               policy);
    esc(b, title);
    buf_printf(b, "</title>\n<style>%s</style>\n</head>\n<body>\n<main>\n", style);
}

void html_end(struct buf *b)
{
    buf_printf(b, "</main>\n<script>\n%s</script>\n</body>\n</html>\n", script);
}

/* ---- Markdown ---- */

/* An href we link: relative, no scheme (a ':' before any '/'). */
static bool safe_href(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (s[i] == '/')
            return true;
        if (s[i] == ':')
            return false;
    }
    return n > 0;
}

/* [text](href) at s (after a '[' or "!["): lengths of text and href and
 * the bytes it spans; false when s is no link. */
static bool link_at(const char *s, size_t n, size_t *tlen, size_t *h, size_t *hlen, size_t *used)
{
    const char *close = memchr(s, ']', n);
    if (!close || (size_t)(close - s) + 1 >= n || close[1] != '(')
        return false;
    size_t t = (size_t)(close - s);
    const char *end = memchr(close + 2, ')', n - t - 2);
    if (!end)
        return false;
    *tlen = t;
    *h = t + 2;
    *hlen = (size_t)(end - close - 2);
    *used = (size_t)(end - s) + 1;
    return true;
}

/* Inline Markdown of s[0..n): `code`, **bold**, links. */
static void inline_md(struct buf *b, const char *s, size_t n)
{
    bool bold = false;
    for (size_t i = 0; i < n;) {
        if (s[i] == '`') {
            const char *end = memchr(s + i + 1, '`', n - i - 1);
            if (end) {
                buf_puts(b, "<code>");
                html_escape(b, s + i + 1, (size_t)(end - s - i - 1));
                buf_puts(b, "</code>");
                i = (size_t)(end - s) + 1;
                continue;
            }
        }
        if (s[i] == '*' && i + 1 < n && s[i + 1] == '*') {
            /* opens only when a closing ** follows */
            bool closes = bold;
            for (size_t j = i + 2; !closes && j + 1 < n; j++)
                closes = s[j] == '*' && s[j + 1] == '*';
            if (closes) {
                buf_puts(b, bold ? "</strong>" : "<strong>");
                bold = !bold;
                i += 2;
                continue;
            }
        }
        bool img = s[i] == '!' && i + 1 < n && s[i + 1] == '[';
        if (s[i] == '[' || img) {
            size_t o = i + (img ? 2 : 1), tl, h, hl, used;
            if (link_at(s + o, n - o, &tl, &h, &hl, &used)) {
                if (safe_href(s + o + h, hl)) {
                    buf_puts(b, "<a href=\"");
                    html_escape(b, s + o + h, hl);
                    buf_puts(b, "\">");
                    inline_md(b, s + o, tl);
                    buf_puts(b, "</a>");
                } else {
                    inline_md(b, s + o, tl);
                }
                i = o + used;
                continue;
            }
        }
        html_escape(b, s + i, 1);
        i++;
    }
    if (bold)
        buf_puts(b, "</strong>");
}

/* A table row's cells: split on '|' not escaped, "\|" unescaped, trimmed. */
static size_t table_cells(const char *s, size_t n, char ***out)
{
    size_t cap = 8, k = 0;
    char **cells = xcalloc(cap, sizeof(char *));
    size_t i = 0;
    if (i < n && s[i] == '|')
        i++;
    struct buf c;
    buf_init(&c, n + 1);
    for (; i <= n; i++) {
        if (i == n || (s[i] == '|' && (i == 0 || s[i - 1] != '\\'))) {
            if (i == n && c.len == 0)
                break; /* the trailing '|' */
            size_t a = 0, z = c.len;
            while (a < z && c.data[a] == ' ')
                a++;
            while (z > a && c.data[z - 1] == ' ')
                z--;
            XGROW(cells, cap, k + 1);
            cells[k++] = xasprintf("%.*s", (int)(z - a), c.data ? c.data + a : "");
            buf_reset(&c);
            if (i + 1 == n)
                break;
            continue;
        }
        if (s[i] == '\\' && i + 1 < n && s[i + 1] == '|')
            continue; /* "\|" is a '|' in the cell */
        buf_putc(&c, s[i]);
    }
    buf_release(&c);
    *out = cells;
    return k;
}

static void free_cells(char **cells, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(cells[i]);
    free(cells);
}

/* "## What ran" → "sec-what-ran": letters and digits, '-' between words. */
static void section_id(struct buf *b, const char *s, size_t n)
{
    buf_puts(b, "sec-");
    bool dash = false, any = false;
    for (size_t i = 0; i < n; i++) {
        char ch = s[i];
        if ((ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || (ch >= 'A' && ch <= 'Z')) {
            if (dash && any)
                buf_putc(b, '-');
            buf_putc(b, ch >= 'A' && ch <= 'Z' ? (char)(ch - 'A' + 'a') : ch);
            dash = false, any = true;
        } else {
            dash = true;
        }
    }
}

struct md_state {
    bool para;     /* a <p> is open */
    int list;      /* open <ul> levels: 0, 1, 2 */
    bool table;    /* a <table> is open */
    size_t n_cols; /* its columns */
    bool *right;   /* owned; per column: right-aligned */
    size_t rows;   /* rows seen: the header, the alignment row, the body */
};

static void close_blocks(struct buf *b, struct md_state *st)
{
    if (st->para)
        buf_puts(b, "</p>\n");
    while (st->list > 0) {
        buf_puts(b, "</li></ul>\n");
        st->list--;
    }
    if (st->table)
        buf_puts(b, st->rows > 1 ? "</tbody></table>\n" : "</thead></table>\n");
    free(st->right);
    memset(st, 0, sizeof(*st));
}

static void table_line(struct buf *b, struct md_state *st, const char *s, size_t n)
{
    char **cells;
    size_t k = table_cells(s, n, &cells);
    if (!st->table) {
        st->table = true;
        st->n_cols = k;
        st->right = xcalloc(k + 1, sizeof(bool));
        buf_puts(b, "<table class=\"sortable\">\n<thead><tr>");
        for (size_t i = 0; i < k; i++) {
            buf_puts(b, "<th>");
            inline_md(b, cells[i], strlen(cells[i]));
            buf_puts(b, "</th>");
        }
        buf_puts(b, "</tr></thead>\n");
    } else if (st->rows == 1) { /* the alignment row */
        for (size_t i = 0; i < k && i < st->n_cols; i++) {
            size_t l = strlen(cells[i]);
            st->right[i] = l > 1 && cells[i][l - 1] == ':';
        }
        buf_puts(b, "<tbody>\n");
    } else {
        buf_puts(b, "<tr>");
        for (size_t i = 0; i < k; i++) {
            buf_puts(b, i < st->n_cols && st->right[i] ? "<td class=\"r\">" : "<td>");
            inline_md(b, cells[i], strlen(cells[i]));
            buf_puts(b, "</td>");
        }
        buf_puts(b, "</tr>\n");
    }
    st->rows++;
    free_cells(cells, k);
}

void html_md(struct buf *b, const char *md, size_t n)
{
    struct md_state st;
    memset(&st, 0, sizeof(st));
    for (size_t at = 0; at < n;) {
        const char *s = md + at;
        const char *nl = memchr(s, '\n', n - at);
        size_t len = nl ? (size_t)(nl - s) : n - at;
        at += len + (nl != NULL);
        while (len && s[len - 1] == '\r')
            len--;
        size_t ind = 0;
        while (ind < len && s[ind] == ' ')
            ind++;
        if (ind == len) {
            close_blocks(b, &st);
            continue;
        }
        bool is_table = s[ind] == '|';
        if (st.table && !is_table)
            close_blocks(b, &st);
        if (is_table) {
            if (!st.table)
                close_blocks(b, &st);
            table_line(b, &st, s + ind, len - ind);
            continue;
        }
        if (s[0] == '#') {
            size_t lvl = 0;
            while (lvl < len && s[lvl] == '#')
                lvl++;
            if (lvl <= 3 && lvl < len && s[lvl] == ' ') {
                close_blocks(b, &st);
                buf_printf(b, "<h%zu", lvl);
                if (lvl == 2) {
                    buf_puts(b, " id=\"");
                    section_id(b, s + 3, len - 3);
                    buf_putc(b, '"');
                }
                buf_putc(b, '>');
                inline_md(b, s + lvl + 1, len - lvl - 1);
                buf_printf(b, "</h%zu>\n", lvl);
                continue;
            }
        }
        if (len == 3 && memcmp(s, "---", 3) == 0) {
            close_blocks(b, &st);
            buf_puts(b, "<hr>\n");
            continue;
        }
        if (len - ind >= 2 && s[ind] == '-' && s[ind + 1] == ' ') {
            int want = ind >= 2 ? 2 : 1;
            if (st.para)
                close_blocks(b, &st);
            if (st.list == 0 && want == 2)
                want = 1;
            if (st.list < want) {
                buf_puts(b, "\n<ul>\n");
                st.list++;
            } else {
                while (st.list > want) {
                    buf_puts(b, "</li></ul>\n");
                    st.list--;
                }
                buf_puts(b, "</li>\n");
            }
            buf_puts(b, "<li>");
            inline_md(b, s + ind + 2, len - ind - 2);
            continue;
        }
        if (st.list) { /* a line after a list item continues it */
            buf_putc(b, ' ');
            inline_md(b, s + ind, len - ind);
            continue;
        }
        if (!st.para) {
            buf_puts(b, "<p>");
            st.para = true;
        } else {
            buf_putc(b, '\n');
        }
        inline_md(b, s + ind, len - ind);
    }
    close_blocks(b, &st);
}

int html_md_section(const char *md, const char *name, size_t *start, size_t *end)
{
    size_t nl = strlen(name);
    for (const char *p = md; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL) {
        if (strncmp(p, "## ", 3) != 0 || strncmp(p + 3, name, nl) != 0 ||
            (p[3 + nl] != '\n' && p[3 + nl] != '\0'))
            continue;
        *start = (size_t)(p - md);
        const char *q = strchr(p, '\n');
        while (q) {
            q++;
            if (strncmp(q, "## ", 3) == 0 || strncmp(q, "---\n", 4) == 0)
                break;
            q = strchr(q, '\n');
        }
        *end = q ? (size_t)(q - md) : strlen(md);
        return 0;
    }
    return -1;
}

void html_md_page(struct buf *b, const char *md, void (*charts)(struct buf *b, const void *ctx),
                  const void *ctx)
{
    size_t len = strlen(md), first = len, start, end;
    const char *h = strstr(md, "\n## ");
    if (h)
        first = (size_t)(h - md) + 1;
    html_md(b, md, first);
    buf_puts(b, "<nav class=\"note\">Sections:");
    for (const char *p = h; p; p = strstr(p + 1, "\n## ")) {
        const char *t = p + 4, *nl = strchr(t, '\n');
        size_t n = nl ? (size_t)(nl - t) : strlen(t);
        buf_puts(b, p == h ? " <a href=\"#" : " · <a href=\"#");
        section_id(b, t, n);
        buf_puts(b, "\">");
        html_escape(b, t, n);
        buf_puts(b, "</a>");
    }
    buf_puts(b, "</nav>\n");
    if (html_md_section(md, "Charts", &start, &end) == 0 && start >= first) {
        html_md(b, md + first, start - first);
        charts(b, ctx);
        html_md(b, md + end, len - end);
    } else {
        html_md(b, md + first, len - first);
        charts(b, ctx);
    }
}

/* ---- charts ---- */

#define W      640.0 /* the SVG's coordinate box */
#define H      400.0
#define LEFT   64.0 /* margins around the plot area */
#define RIGHT  16.0
#define TOP    14.0
#define BOTTOM 46.0

/* gnuplot's default line colours (lc 1, 2, ...), so both drawings agree. */
static const char *const colors[] = {"#9400d3", "#009e73", "#56b4e9", "#e69f00",
                                     "#f0e442", "#0072b2", "#e51e10", "#000000"};
#define N_COLORS (sizeof(colors) / sizeof(colors[0]))
#define GREY     "#9a9a9a"

struct axes {
    bool logx;
    double x0, x1, y0, y1; /* data ranges shown */
};

static double px(const struct axes *a, double x)
{
    double f = a->logx ? (log2(x) - log2(a->x0)) / (log2(a->x1) - log2(a->x0))
                       : (x - a->x0) / (a->x1 - a->x0);
    return LEFT + f * (W - LEFT - RIGHT);
}

static double py(const struct axes *a, double y)
{
    return H - BOTTOM - (y - a->y0) / (a->y1 - a->y0) * (H - TOP - BOTTOM);
}

/* 1, 2, 2.5 or 5 times a power of ten, at least x. */
static double nice_step(double x)
{
    double e = pow(10, floor(log10(x))), f = x / e;
    return (f <= 1 ? 1 : f <= 2 ? 2 : f <= 2.5 ? 2.5 : f <= 5 ? 5 : 10) * e;
}

/* A number for a tick or a tooltip: up to 4 significant digits. */
static void num(struct buf *b, double v)
{
    if (fabs(v) >= 1e4 && fabs(v) < 1e9)
        buf_printf(b, "%.0f", v);
    else
        buf_printf(b, "%.4g", v);
}

/* The line colour and marker of series k on c (the owner's for a role). */
struct look {
    const char *color;
    size_t mark; /* 0 circle, 1 square, 2 diamond, 3 triangle, 4 triangle down */
    size_t owner;
};

static void looks(const struct plot_chart *c, struct look *lk)
{
    size_t pos = 0, owner = 0;
    for (size_t k = 0; k < c->n_s; k++) {
        const struct plot_series *s = &c->s[k];
        if (s->role == PLOT_ROLE_SERIES) {
            size_t col = s->color > 0 ? (size_t)s->color - 1 : pos;
            lk[k].color = colors[col % N_COLORS];
            lk[k].mark = (s->mark > 0 ? (size_t)s->mark - 1 : pos) % 5;
            owner = k;
            pos++;
        } else {
            lk[k] = lk[owner];
        }
        lk[k].owner = owner;
    }
}

/* Marker m at (x, y), radius r, filled with fill: the opening tag, left
 * open for a <title>; returns the element's name to close it with. */
static const char *marker(struct buf *b, size_t m, double x, double y, double r, const char *fill)
{
    switch (m) {
    case 1:
        buf_printf(b, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"%s\"",
                   x - r * 0.9, y - r * 0.9, 1.8 * r, 1.8 * r, fill);
        return "rect";
    case 2:
        buf_printf(b, "<path d=\"M%.1f %.1fL%.1f %.1fL%.1f %.1fL%.1f %.1fZ\" fill=\"%s\"", x,
                   y - 1.3 * r, x + 1.3 * r, y, x, y + 1.3 * r, x - 1.3 * r, y, fill);
        return "path";
    case 3:
    case 4: {
        double d = m == 3 ? 1 : -1;
        buf_printf(b, "<path d=\"M%.1f %.1fL%.1f %.1fL%.1f %.1fZ\" fill=\"%s\"", x, y - d * 1.3 * r,
                   x + 1.2 * r, y + d * 0.8 * r, x - 1.2 * r, y + d * 0.8 * r, fill);
        return "path";
    }
    default:
        buf_printf(b, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"%.1f\" fill=\"%s\"", x, y, r, fill);
        return "circle";
    }
}

/* The fitted curve of s at x (NAN where it has none). */
static double fit_at(const struct plot_chart *c, const struct plot_series *s, double x)
{
    if (c->fit == PLOT_FIT_LINE)
        return s->a + s->b * x;
    double d = s->a + s->b * x;
    return d > 0 ? x * 1000 / d : NAN;
}

/* Ranges: x over the points (log2: /1.4 .. ·1.4, as gnuplot's xrange), y
 * from 0 (or below, for a negative value) to the top of the spreads, the
 * ratio chart's line at 1 and a ceiling, rounded out to a tick. */
static void ranges(const struct plot_chart *c, struct axes *a)
{
    double xlo = INFINITY, xhi = -INFINITY, ylo = 0, yhi = -INFINITY;
    for (size_t k = 0; k < c->n_s; k++) {
        const struct plot_series *s = &c->s[k];
        for (size_t i = 0; i < s->n; i++) {
            xlo = fmin(xlo, s->x[i]), xhi = fmax(xhi, s->x[i]);
            ylo = fmin(ylo, s->lo[i]), yhi = fmax(yhi, s->hi[i]);
        }
        if (s->fit && c->fit == PLOT_FIT_THROUGHPUT && isfinite(s->ceiling) && s->ceiling > 0)
            yhi = fmax(yhi, s->ceiling);
    }
    if (strcmp(c->tmpl, "ratio") == 0)
        yhi = fmax(yhi, 1);
    if (!(yhi > ylo))
        yhi = ylo + 1;
    a->logx = c->xlabel && strstr(c->xlabel, "log2 scale");
    if (a->logx) {
        a->x0 = xlo / 1.4, a->x1 = xhi * 1.4;
    } else {
        double st = nice_step(fmax(xhi, 1e-9) * 1.05 / 5);
        a->x0 = 0, a->x1 = ceil(xhi * 1.05 / st) * st;
    }
    double st = nice_step((yhi * 1.08 - ylo) / 5);
    a->y0 = ylo < 0 ? floor(ylo / st) * st : 0;
    a->y1 = ceil(yhi * 1.08 / st) * st;
}

static void grid_and_axes(struct buf *b, const struct plot_chart *c, const struct axes *a)
{
    double st = nice_step((a->y1 - a->y0) / 5);
    for (double y = a->y0; y <= a->y1 + st / 1e6; y += st) {
        double yy = py(a, y);
        buf_printf(b, "<line class=\"grid\" x1=\"%.1f\" x2=\"%.1f\" y1=\"%.1f\" y2=\"%.1f\"/>",
                   LEFT, W - RIGHT, yy, yy);
        buf_printf(b, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">", LEFT - 6, yy + 4);
        num(b, fabs(y) < st / 1e6 ? 0 : y);
        buf_puts(b, "</text>\n");
    }
    /* x ticks: the measured x values on a log2 axis (as gnuplot's xtics),
     * else round steps from 0 */
    double *xs = NULL;
    size_t nx = 0;
    if (a->logx) {
        for (size_t k = 0; k < c->n_s; k++)
            nx += c->s[k].n;
        xs = xcalloc(nx + 1, sizeof(double));
        nx = 0;
        for (size_t k = 0; k < c->n_s; k++)
            for (size_t i = 0; i < c->s[k].n; i++) {
                size_t j = nx++;
                for (; j > 0 && xs[j - 1] > c->s[k].x[i]; j--)
                    xs[j] = xs[j - 1];
                xs[j] = c->s[k].x[i];
            }
    } else {
        double sx = nice_step((a->x1 - a->x0) / 6);
        xs = xcalloc((size_t)((a->x1 - a->x0) / sx) + 3, sizeof(double));
        for (double x = a->x0; x <= a->x1 + sx / 1e6; x += sx)
            xs[nx++] = x;
    }
    double last = -INFINITY;
    for (size_t i = 0; i < nx; i++) {
        double xx = px(a, xs[i]);
        if (xx - last < 28) /* no labels on top of each other */
            continue;
        last = xx;
        buf_printf(b, "<line class=\"grid\" x1=\"%.1f\" x2=\"%.1f\" y1=\"%.1f\" y2=\"%.1f\"/>", xx,
                   xx, TOP, H - BOTTOM);
        buf_printf(b, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">", xx, H - BOTTOM + 16);
        num(b, xs[i]);
        buf_puts(b, "</text>\n");
    }
    free(xs);
    buf_printf(b,
               "<path class=\"axis\" fill=\"none\" d=\"M%.1f %.1fV%.1fH%.1f\"/>\n"
               "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">",
               LEFT, TOP, H - BOTTOM, W - RIGHT, (LEFT + W - RIGHT) / 2, H - 8);
    esc(b, c->xlabel);
    buf_printf(b,
               "</text>\n<text transform=\"translate(14 %.1f) rotate(-90)\" "
               "text-anchor=\"middle\">",
               (TOP + H - BOTTOM) / 2);
    esc(b, c->ylabel);
    buf_puts(b, "</text>\n");
}

/* The fitted curve (and ceiling) of s, sampled across the x range. */
static void fit_curve(struct buf *b, const struct plot_chart *c, const struct plot_series *s,
                      const struct axes *a, const char *color)
{
    if (!s->fit || c->fit == PLOT_FIT_NONE)
        return;
    buf_printf(b,
               "<path fill=\"none\" stroke=\"%s\" stroke-width=\"1.5\" stroke-dasharray=\"6 4\" "
               "d=\"",
               color);
    bool pen = false;
    for (int i = 0; i <= 120; i++) {
        double f = i / 120.0;
        double x = a->logx ? exp2(log2(a->x0) + f * (log2(a->x1) - log2(a->x0)))
                           : a->x0 + f * (a->x1 - a->x0);
        double y = fit_at(c, s, x);
        if (!isfinite(y) || x <= 0) {
            pen = false;
            continue;
        }
        buf_printf(b, "%c%.1f %.1f", pen ? 'L' : 'M', px(a, x), py(a, y));
        pen = true;
    }
    buf_puts(b, "\"><title>");
    char fml[128];
    esc(b, s->title);
    if (c->fit == PLOT_FIT_LINE) {
        buf_printf(b, " fit: %s (R² %.3f)", fit_formula(s->a, s->b, 1, 2, "N", fml, sizeof(fml)),
                   s->r2);
    } else {
        fit_formula(s->a * s->out_tokens, s->b * s->out_tokens, 0, 1, "N", fml, sizeof(fml));
        buf_printf(b, ": N·%.0f·1000/E2E(N) tok/s, E2E = %s ms (TTFT included)", s->out_tokens,
                   fml);
    }
    buf_puts(b, "</title></path>\n");
    if (c->fit == PLOT_FIT_THROUGHPUT && isfinite(s->ceiling) && s->ceiling > 0) {
        buf_printf(b,
                   "<line stroke=\"%s\" stroke-width=\"1.5\" stroke-dasharray=\"2 3\" "
                   "x1=\"%.1f\" x2=\"%.1f\" y1=\"%.1f\" y2=\"%.1f\"><title>",
                   color, LEFT, W - RIGHT, py(a, s->ceiling), py(a, s->ceiling));
        esc(b, s->title);
        buf_printf(b, " decode-only ceiling 1000/b = %.1f tok/s (no TTFT)</title></line>\n",
                   s->ceiling);
    }
}

/* A point's tooltip: "mxfp4 (C=16): concurrency 16, median TPOT (ms) 19.7
 * (min 19.1, max 20.3)". */
static void tooltip(struct buf *b, const struct plot_chart *c, const struct plot_series *owner,
                    const struct plot_series *s, size_t i)
{
    buf_puts(b, "<title>");
    esc(b, owner->title);
    if (s->note && s->note[i]) {
        buf_puts(b, " (");
        esc(b, s->note[i]);
        buf_putc(b, ')');
    }
    const char *xl = c->xlabel, *cut = strstr(xl, " (");
    buf_puts(b, ": ");
    html_escape(b, xl, cut ? (size_t)(cut - xl) : strlen(xl));
    buf_putc(b, ' ');
    num(b, s->x[i]);
    buf_puts(b, ", ");
    esc(b, c->ylabel);
    buf_putc(b, ' ');
    num(b, s->y[i]);
    if (s->lo[i] != s->y[i] || s->hi[i] != s->y[i]) {
        buf_puts(b, " (min ");
        num(b, s->lo[i]);
        buf_puts(b, ", max ");
        num(b, s->hi[i]);
        buf_puts(b, " over repeats)");
    }
    buf_puts(b, "</title>");
}

/* Indices of s's points in ascending x. */
static size_t *by_x(const struct plot_series *s)
{
    size_t *o = xcalloc(s->n + 1, sizeof(size_t));
    for (size_t i = 0; i < s->n; i++) {
        size_t j = i;
        for (; j > 0 && s->x[o[j - 1]] > s->x[i]; j--)
            o[j] = o[j - 1];
        o[j] = i;
    }
    return o;
}

static void series_svg(struct buf *b, const struct plot_chart *c, size_t k, const struct look *lk,
                       const struct axes *a)
{
    const struct plot_series *s = &c->s[k], *owner = &c->s[lk[k].owner];
    const char *color = lk[k].color;
    buf_puts(b, "<g class=\"s\" data-v=\"");
    esc(b, owner->title);
    buf_puts(b, "\">\n");
    size_t *o = by_x(s);
    bool fitted = s->fit && c->fit != PLOT_FIT_NONE;
    if (s->role == PLOT_ROLE_SERIES && !fitted && s->n > 1) {
        buf_printf(b, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"1.8\" points=\"",
                   color);
        for (size_t i = 0; i < s->n; i++)
            buf_printf(b, "%s%.1f,%.1f", i ? " " : "", px(a, s->x[o[i]]), py(a, s->y[o[i]]));
        buf_puts(b, "\"/>\n");
    }
    fit_curve(b, c, s, a, color);
    for (size_t n = 0; n < s->n; n++) {
        size_t i = o[n];
        double x = px(a, s->x[i]), y = py(a, s->y[i]);
        if (s->lo[i] != s->y[i] || s->hi[i] != s->y[i])
            buf_printf(b, "<path stroke=\"%s\" d=\"M%.1f %.1fV%.1fM%.1f %.1fh8M%.1f %.1fh8\"/>",
                       color, x, py(a, s->lo[i]), py(a, s->hi[i]), x - 4, py(a, s->lo[i]), x - 4,
                       py(a, s->hi[i]));
        buf_puts(b, "<g class=\"pt\">");
        const char *tag = "circle";
        if (s->role == PLOT_ROLE_KNEE)
            buf_printf(b,
                       "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"10\" fill=\"none\" stroke=\"%s\" "
                       "stroke-width=\"2.5\"",
                       x, y, color);
        else
            tag = marker(b, lk[k].mark, x, y, 4.5, s->role == PLOT_ROLE_DOMINATED ? GREY : color);
        buf_putc(b, '>');
        tooltip(b, c, owner, s, i);
        buf_printf(b, "</%s>", tag);
        buf_puts(b, "</g>\n");
    }
    free(o);
    buf_puts(b, "</g>\n");
}

void html_chart(struct buf *b, const struct plot_chart *c)
{
    struct look *lk = xcalloc(c->n_s + 1, sizeof(*lk));
    looks(c, lk);
    struct axes a;
    ranges(c, &a);
    buf_printf(b, "<figure id=\"chart-%s\" class=\"chart\">\n<figcaption>", c->name);
    esc(b, c->title);
    buf_printf(b,
               "</figcaption>\n<svg class=\"chart\" xmlns=\"http://www.w3.org/2000/svg\" "
               "viewBox=\"0 0 %.0f %.0f\" role=\"img\" data-points=\"%zu\" aria-label=\"",
               W, H, plot_chart_points(c));
    esc(b, c->title);
    buf_printf(b,
               "\">\n<defs><clipPath id=\"clip-%s\"><rect x=\"%.0f\" y=\"%.0f\" width=\"%.0f\" "
               "height=\"%.0f\"/></clipPath></defs>\n",
               c->name, LEFT, TOP, W - LEFT - RIGHT, H - TOP - BOTTOM);
    grid_and_axes(b, c, &a);
    buf_printf(b, "<g clip-path=\"url(#clip-%s)\">\n", c->name);
    if (strcmp(c->tmpl, "ratio") == 0)
        buf_printf(b,
                   "<line stroke=\"#666\" stroke-dasharray=\"6 4\" x1=\"%.1f\" x2=\"%.1f\" "
                   "y1=\"%.1f\" y2=\"%.1f\"><title>equal (1.0)</title></line>\n",
                   LEFT, W - RIGHT, py(&a, 1), py(&a, 1));
    /* dominated points first, so the frontiers are drawn over them */
    for (int pass = 0; pass < 2; pass++)
        for (size_t k = 0; k < c->n_s; k++)
            if ((c->s[k].role == PLOT_ROLE_DOMINATED) == (pass == 0) && c->s[k].n)
                series_svg(b, c, k, lk, &a);
    buf_puts(b, "</g>\n</svg>\n<ul class=\"legend\">\n");
    for (size_t k = 0; k < c->n_s; k++) {
        const struct plot_series *s = &c->s[k];
        if (s->role != PLOT_ROLE_SERIES)
            continue;
        buf_puts(b, "<li tabindex=\"0\" role=\"button\" data-v=\"");
        esc(b, s->title);
        buf_puts(b, "\"><svg width=\"14\" height=\"14\" viewBox=\"0 0 14 14\">");
        marker(b, lk[k].mark, 7, 7, 4.5, lk[k].color);
        buf_puts(b, "/></svg> ");
        esc(b, s->title);
        buf_puts(b, "</li>\n");
    }
    buf_puts(b, "</ul>\n</figure>\n");
    free(lk);
}
