/* strutil: strict parsing and typo suggestions. */
#include "strutil.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

int str_to_long(const char *s, long *out)
{
    if (!s || !*s)
        return -1;
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || *end)
        return -1;
    *out = v;
    return 0;
}

int str_to_double(const char *s, double *out)
{
    if (!s || !*s)
        return -1;
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || *end || !isfinite(v))
        return -1;
    *out = v;
    return 0;
}

bool str_starts_with(const char *s, const char *prefix)
{
    return strncmp(s, prefix, strlen(prefix)) == 0;
}

bool str_ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && memcmp(s + n - m, suffix, m) == 0;
}

unsigned str_distance(const char *a, const char *b)
{
    size_t n = strlen(a), m = strlen(b);
    if (n > 64 || m > 64)
        return 255;
    unsigned row[65];
    for (size_t j = 0; j <= m; j++)
        row[j] = (unsigned)j;
    for (size_t i = 1; i <= n; i++) {
        unsigned prev = row[0];
        row[0] = (unsigned)i;
        for (size_t j = 1; j <= m; j++) {
            unsigned cur = row[j];
            unsigned cost = a[i - 1] == b[j - 1] ? 0 : 1;
            unsigned best = prev + cost;
            if (row[j] + 1 < best)
                best = row[j] + 1;
            if (row[j - 1] + 1 < best)
                best = row[j - 1] + 1;
            row[j] = best;
            prev = cur;
        }
    }
    return row[m] > 255 ? 255 : row[m];
}

const char *str_suggest(const char *word, const char *const *candidates)
{
    const char *best = NULL;
    unsigned best_d = 256;
    for (; *candidates; candidates++) {
        unsigned d = str_distance(word, *candidates);
        if (d < best_d) {
            best_d = d;
            best = *candidates;
        }
    }
    size_t len = strlen(word);
    unsigned limit = len / 3 > 1 ? (unsigned)(len / 3) : 1;
    return best && best_d <= limit ? best : NULL;
}
