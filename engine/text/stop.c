/*
 * stop: stop-string matching over streamed text (see stop.h). The held
 * text is always shorter than the longest stop string, so each push scans
 * at most max_len - 1 + n bytes per stop string.
 */
#include "text/stop.h"

#include <stdlib.h>
#include <string.h>

#include "xalloc.h"

void stop_init(struct stop_filter *f, char *const *stops, const size_t *lens, size_t n,
               size_t max_piece)
{
    memset(f, 0, sizeof(*f));
    f->stops = stops;
    f->lens = lens;
    f->n_stops = n;
    for (size_t i = 0; i < n; i++)
        if (lens[i] > f->max_len)
            f->max_len = lens[i];
    f->cap = f->max_len + max_piece + 1;
    f->held = xmalloc(f->cap);
}

void stop_release(struct stop_filter *f)
{
    free(f->held);
    f->held = NULL;
    f->n_held = f->cap = 0;
}

/* Longest k < len(s) such that the last k bytes of t[0..n) are s's first k. */
static size_t partial_suffix(const char *t, size_t n, const char *s, size_t len)
{
    size_t k = len - 1 < n ? len - 1 : n;
    for (; k > 0; k--)
        if (memcmp(t + n - k, s, k) == 0)
            return k;
    return 0;
}

/* Append, look for a complete stop string (earliest start wins among those
 * complete now), else release all but the longest suffix that is a proper
 * prefix of some stop string. Only that suffix can still become a match:
 * any occurrence ending later must start inside it. */
size_t stop_push(struct stop_filter *f, const char *text, size_t n, char *out, size_t cap,
                 bool *hit)
{
    *hit = f->matched;
    if (f->matched || n == 0)
        return 0;
    if (f->n_stops == 0) {
        size_t w = n < cap ? n : cap;
        memcpy(out, text, w);
        return w;
    }
    if (f->n_held + n > f->cap) /* a caller broke the max_piece promise: keep what fits */
        n = f->cap - f->n_held;
    memcpy(f->held + f->n_held, text, n);
    f->n_held += n;
    /* the earliest complete stop string ends the text */
    size_t first = f->n_held;
    for (size_t i = 0; i < f->n_stops; i++) {
        const char *p = memmem(f->held, f->n_held, f->stops[i], f->lens[i]);
        if (p && (size_t)(p - f->held) < first)
            first = (size_t)(p - f->held);
    }
    size_t release;
    if (first < f->n_held) {
        f->matched = *hit = true;
        release = first;
    } else {
        size_t keep = 0;
        for (size_t i = 0; i < f->n_stops; i++) {
            size_t k = partial_suffix(f->held, f->n_held, f->stops[i], f->lens[i]);
            if (k > keep)
                keep = k;
        }
        release = f->n_held - keep;
    }
    if (release > cap)
        release = cap;
    memcpy(out, f->held, release);
    if (f->matched)
        f->n_held = 0;
    else {
        memmove(f->held, f->held + release, f->n_held - release);
        f->n_held -= release;
    }
    return release;
}

size_t stop_flush(struct stop_filter *f, char *out, size_t cap)
{
    size_t w = f->n_held < cap ? f->n_held : cap;
    memcpy(out, f->held, w);
    f->n_held = 0;
    return w;
}
