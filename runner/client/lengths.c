/*
 * lengths: parse, print and draw request lengths (lengths.h). Normal draws
 * use Box-Muller from two uniform draws, so every machine gives the same
 * sequence for a seed.
 */
#include "client/lengths.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "rng.h"
#include "strutil.h"

/* The fields of "kind:a:b:c:d" after the kind, at most 4; returns the count or -1. */
static int split_nums(const char *s, double *v, int max)
{
    int n = 0;
    while (*s) {
        const char *colon = strchr(s, ':');
        size_t len = colon ? (size_t)(colon - s) : strlen(s);
        if (n == max || len == 0 || str_to_double_n(s, len, &v[n]) != 0 || !isfinite(v[n]))
            return -1;
        n++;
        s += len + (colon ? 1 : 0);
        if (colon && !*s)
            return -1; /* a trailing ':' */
    }
    return n;
}

static bool whole(double x)
{
    return x == floor(x);
}

/* text for a one-line message: control bytes as '?', cut after 60 bytes */
static const char *shown(const char *text, char *out, size_t size)
{
    size_t o = 0;
    for (; text[o] && o + 4 < size && o < 60; o++)
        out[o] = (unsigned char)text[o] < 0x20 || text[o] == 0x7f ? '?' : text[o];
    snprintf(out + o, size - o, "%s", text[o] ? "..." : "");
    return out;
}

int len_parse(const char *text, const char *what, struct len_dist *d, struct err *err, int code)
{
    double v[4];
    long n;
    char q[72];
    memset(d, 0, sizeof(*d));
    if (str_to_long(text, &n) == 0) {
        if (n < 1 || n > LEN_MAX)
            return err_set(err, code, "%s must be from 1 to %ld, got %ld", what, LEN_MAX, n), -1;
        d->kind = LEN_FIXED;
        d->min = d->max = n;
        d->mean = (double)n;
        return 0;
    }
    if (strncmp(text, "uniform:", 8) == 0) {
        if (split_nums(text + 8, v, 4) != 2 || !whole(v[0]) || !whole(v[1]))
            return err_set(err, code, "%s: '%s' wants uniform:MIN:MAX (integers)", what,
                           shown(text, q, sizeof(q))),
                   -1;
        d->kind = LEN_UNIFORM;
        d->min = (long)fmax(-1, fmin(v[0], (double)LEN_MAX + 1));
        d->max = (long)fmax(-1, fmin(v[1], (double)LEN_MAX + 1));
        d->mean = ((double)d->min + (double)d->max) / 2;
    } else if (strncmp(text, "normal:", 7) == 0) {
        int k = split_nums(text + 7, v, 4);
        if (k < 2 || (k > 2 && !whole(v[2])) || (k > 3 && !whole(v[3])))
            return err_set(err, code,
                           "%s: '%s' wants normal:MEAN:SD[:MIN[:MAX]] (MIN, MAX integers)", what,
                           shown(text, q, sizeof(q))),
                   -1;
        d->kind = LEN_NORMAL;
        d->mean = v[0];
        d->sd = v[1];
        d->min = k > 2 ? (long)fmax(-1, fmin(v[2], (double)LEN_MAX + 1)) : 1;
        d->max = k > 3 ? (long)fmax(-1, fmin(v[3], (double)LEN_MAX + 1)) : LEN_MAX;
        if (d->sd < 0)
            return err_set(err, code, "%s: the sd of '%s' is negative", what,
                           shown(text, q, sizeof(q))),
                   -1;
        if (d->mean < (double)d->min || d->mean > (double)d->max)
            return err_set(err, code, "%s: the mean of '%s' is outside [%ld, %ld]", what,
                           shown(text, q, sizeof(q)), d->min, d->max),
                   -1;
    } else {
        return err_set(err, code,
                       "%s wants a length (256), uniform:MIN:MAX or normal:MEAN:SD[:MIN[:MAX]], "
                       "got '%s'",
                       what, shown(text, q, sizeof(q))),
               -1;
    }
    if (d->min < 1 || d->max > LEN_MAX || d->min > d->max)
        return err_set(err, code, "%s: '%s' needs 1 <= MIN <= MAX <= %ld", what,
                       shown(text, q, sizeof(q)), LEN_MAX),
               -1;
    return 0;
}

void len_format(const struct len_dist *d, char *out, size_t size)
{
    switch (d->kind) {
    case LEN_FIXED:
        snprintf(out, size, "%ld", d->min);
        break;
    case LEN_UNIFORM:
        snprintf(out, size, "uniform:%ld:%ld", d->min, d->max);
        break;
    case LEN_NORMAL:
        /* %.17g: the text parses back to the very same doubles */
        snprintf(out, size, "normal:%.17g:%.17g:%ld:%ld", d->mean, d->sd, d->min, d->max);
        break;
    }
}

long len_sample(const struct len_dist *d, uint64_t *state)
{
    if (d->kind == LEN_FIXED)
        return d->min;
    if (d->kind == LEN_UNIFORM) {
        uint64_t span = (uint64_t)(d->max - d->min) + 1;
        return d->min + (long)(((unsigned __int128)rng_next(state) * span) >> 64);
    }
    double u1 = 1.0 - rng_unit(state); /* (0, 1]: log is finite */
    double u2 = rng_unit(state);
    double x = d->mean + d->sd * sqrt(-2.0 * log(u1)) * cos(2.0 * M_PI * u2);
    x = round(x);
    if (isnan(x) || x < (double)d->min) /* NaN: an sd so large that inf * 0 happened */
        return d->min;
    if (x > (double)d->max)
        return d->max;
    return (long)x;
}

long len_mean(const struct len_dist *d)
{
    return d->kind == LEN_FIXED ? d->min : lround(d->mean);
}
