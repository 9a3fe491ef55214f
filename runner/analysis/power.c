/*
 * power: power samples -> mean power, energy and energy per token.
 */
#include "analysis/power.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h> /* timegm: _GNU_SOURCE, from the Makefile */

#include "buf.h"
#include "fileio.h"
#include "strutil.h"
#include "sweep.h"
#include "xalloc.h"

#define POWER_MAX_BYTES (256u << 20) /* 5 Hz x 8 GPUs for days; more is not a samples file */
#define MAX_DEVICES     64

char *power_path(const char *log_path)
{
    size_t n = strlen(log_path);
    if (n > 4 && strcmp(log_path + n - 4, ".log") == 0)
        n -= 4;
    return xasprintf("%.*s%s", (int)n, log_path, POWER_SUFFIX);
}

/* "2026/12/02 08:14:11.123" -> seconds (as UTC: only differences are used). */
static int parse_stamp(const char *s, size_t n, double *out)
{
    char tmp[40];
    if (n >= sizeof(tmp))
        return -1;
    memcpy(tmp, s, n);
    tmp[n] = '\0';
    struct tm tm = {0};
    double sec;
    int used = 0;
    if (sscanf(tmp, "%d/%d/%d %d:%d:%lf%n", &tm.tm_year, &tm.tm_mon, &tm.tm_mday, &tm.tm_hour,
               &tm.tm_min, &sec, &used) != 6 ||
        tmp[used] != '\0' || sec < 0 || sec >= 61)
        return -1;
    tm.tm_year -= 1900;
    tm.tm_mon -= 1;
    *out = (double)timegm(&tm) + sec;
    return 0;
}

/* s[0..n) without blanks at either end. */
static void trim(const char **s, size_t *n)
{
    while (*n && (**s == ' ' || **s == '\t'))
        (*s)++, (*n)--;
    while (*n && ((*s)[*n - 1] == ' ' || (*s)[*n - 1] == '\t' || (*s)[*n - 1] == '\r'))
        (*n)--;
}

struct dev {
    char name[32];
    double t0, t_last, p_last; /* first and last sample */
    double integral_j;         /* trapezoids so far */
    double span_s;             /* time they cover */
    size_t n;
};

size_t power_summarise(const char *text, size_t len, double *mean_w, double *span_s,
                       size_t *skipped)
{
    struct dev devs[MAX_DEVICES];
    size_t n_dev = 0;
    *mean_w = 0;
    *span_s = 0;
    *skipped = 0;
    for (const char *line = text, *end = text + len; line < end;) {
        const char *nl = memchr(line, '\n', (size_t)(end - line));
        size_t ll = nl ? (size_t)(nl - line) : (size_t)(end - line);
        const char *next = nl ? nl + 1 : end;
        /* three fields split on ',' */
        const char *f[3];
        size_t fl[3], k = 0;
        const char *p = line, *le = line + ll;
        while (k < 3 && p <= le) {
            const char *comma = memchr(p, ',', (size_t)(le - p));
            f[k] = p;
            fl[k] = comma ? (size_t)(comma - p) : (size_t)(le - p);
            trim(&f[k], &fl[k]);
            k++;
            if (!comma)
                break;
            p = comma + 1;
        }
        double t, w;
        bool blank = ll == 0 || (k == 1 && fl[0] == 0);
        if (blank) {
            line = next;
            continue;
        }
        if (k != 3 || memchr(f[2], ',', fl[2]) || parse_stamp(f[0], fl[0], &t) != 0 || !fl[1] ||
            fl[1] >= sizeof(devs[0].name) || str_to_double_n(f[2], fl[2], &w) != 0 ||
            !isfinite(w) || w < 0) {
            (*skipped)++;
            line = next;
            continue;
        }
        struct dev *d = NULL;
        for (size_t i = 0; i < n_dev && !d; i++)
            if (strlen(devs[i].name) == fl[1] && memcmp(devs[i].name, f[1], fl[1]) == 0)
                d = &devs[i];
        if (!d && n_dev < MAX_DEVICES) {
            d = &devs[n_dev++];
            memset(d, 0, sizeof(*d));
            memcpy(d->name, f[1], fl[1]);
            d->t0 = d->t_last = t;
        } else if (d && t > d->t_last) {
            d->integral_j += (d->p_last + w) / 2 * (t - d->t_last);
            d->span_s += t - d->t_last;
        } else if (!d) {
            (*skipped)++;
            line = next;
            continue;
        }
        /* a stamp that went back (clock step): the sample restarts the
         * trapezoids without adding time */
        d->t_last = t;
        d->p_last = w;
        d->n++;
        line = next;
    }
    for (size_t i = 0; i < n_dev; i++) {
        /* one sample, or all at one instant: that reading is the mean */
        *mean_w += devs[i].span_s > 0 ? devs[i].integral_j / devs[i].span_s : devs[i].p_last;
        if (devs[i].span_s > *span_s)
            *span_s = devs[i].span_s;
    }
    return n_dev;
}

int power_point(const char *log_path, struct metric_set *metrics, struct err *err)
{
    char *path = power_path(log_path);
    struct buf text;
    buf_init(&text, POWER_MAX_BYTES);
    int rc = 0;
    if (!path_exists(path))
        goto out;
    rc = -1;
    if (file_read_all(path, &text, err, RN_ERR_ENV) != 0)
        goto out;
    double mean_w, span_s, dur, tokens;
    size_t skipped;
    if (power_summarise(text.data ? text.data : "", text.len, &mean_w, &span_s, &skipped) == 0) {
        err_set(err, RN_ERR_ENV, "%s: no power sample in %zu line(s) (nvidia-smi said [N/A]?)",
                path, skipped);
        goto out;
    }
    if (!mset_get(metrics, "duration_s", &dur) || !(dur > 0))
        dur = span_s;
    mset_set(metrics, "mean_power_w", mean_w);
    mset_set(metrics, "energy_j", mean_w * dur);
    if (mset_get(metrics, "total_output_tokens", &tokens) && tokens > 0)
        mset_set(metrics, "j_per_token", mean_w * dur / tokens);
    rc = 0;
out:
    buf_release(&text);
    free(path);
    return rc;
}
