/* strutil: strict parsing, typo suggestions and small string helpers. */
#include "strutil.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "xalloc.h"

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

/* Digits at s[*i..n), skipped; returns how many. */
static size_t skip_digits(const char *s, size_t n, size_t *i)
{
    size_t start = *i;
    while (*i < n && s[*i] >= '0' && s[*i] <= '9')
        (*i)++;
    return *i - start;
}

int str_to_double_n(const char *s, size_t n, double *out)
{
    /* [+-] (digits [. digits] | . digits) [(e|E) [+-] digits], all of s */
    size_t i = 0;
    if (!s)
        return errno = EINVAL, -1;
    if (i < n && (s[i] == '+' || s[i] == '-'))
        i++;
    size_t digits = skip_digits(s, n, &i);
    if (i < n && s[i] == '.') {
        i++;
        digits += skip_digits(s, n, &i);
    }
    if (!digits)
        return errno = EINVAL, -1;
    if (i < n && (s[i] == 'e' || s[i] == 'E')) {
        i++;
        if (i < n && (s[i] == '+' || s[i] == '-'))
            i++;
        if (!skip_digits(s, n, &i))
            return errno = EINVAL, -1;
    }
    if (i != n)
        return errno = EINVAL, -1;
    char small[64], *tmp = n < sizeof(small) ? small : xmalloc(n + 1);
    memcpy(tmp, s, n);
    tmp[n] = '\0';
    char *end;
    errno = 0;
    double v = strtod(tmp, &end);
    int e = errno;
    bool whole = end == tmp + n;
    if (tmp != small)
        free(tmp);
    if (!whole) /* a locale whose decimal point is not '.' */
        return errno = EINVAL, -1;
    if (e == ERANGE || !isfinite(v))
        return errno = ERANGE, -1;
    *out = v;
    return 0;
}

int str_to_double(const char *s, double *out)
{
    return str_to_double_n(s, s ? strlen(s) : 0, out);
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

size_t str_last_line(const char *text, size_t len, const char **line)
{
    while (len && (text[len - 1] == '\n' || text[len - 1] == '\r' || text[len - 1] == ' '))
        len--;
    size_t start = len;
    while (start && text[start - 1] != '\n')
        start--;
    *line = text + start;
    return len - start;
}

/* Optimal string alignment distance: insertions, deletions, substitutions
 * and swaps of two adjacent letters each cost 1 ("nmae" -> "name" is 1). */
unsigned str_distance(const char *a, const char *b)
{
    size_t n = strlen(a), m = strlen(b);
    if (n > 64 || m > 64)
        return 255;
    unsigned d[65][65];
    for (size_t i = 0; i <= n; i++)
        d[i][0] = (unsigned)i;
    for (size_t j = 0; j <= m; j++)
        d[0][j] = (unsigned)j;
    for (size_t i = 1; i <= n; i++)
        for (size_t j = 1; j <= m; j++) {
            unsigned best = d[i - 1][j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1);
            if (d[i - 1][j] + 1 < best)
                best = d[i - 1][j] + 1;
            if (d[i][j - 1] + 1 < best)
                best = d[i][j - 1] + 1;
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] &&
                d[i - 2][j - 2] + 1 < best)
                best = d[i - 2][j - 2] + 1;
            d[i][j] = best;
        }
    return d[n][m] > 255 ? 255 : d[n][m];
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

/* Columns of code point u: 0 combining, 2 wide, else 1 (a short table,
 * enough for labels and numbers; not a full wcwidth). */
static size_t cp_width(unsigned long u)
{
    if ((u >= 0x300 && u <= 0x36f) || (u >= 0x200b && u <= 0x200f) || u == 0xfeff)
        return 0;
    if ((u >= 0x1100 && u <= 0x115f) || (u >= 0x2e80 && u <= 0xa4cf && u != 0x303f) ||
        (u >= 0xac00 && u <= 0xd7a3) || (u >= 0xf900 && u <= 0xfaff) ||
        (u >= 0xfe30 && u <= 0xfe4f) || (u >= 0xff00 && u <= 0xff60) ||
        (u >= 0xffe0 && u <= 0xffe6) || (u >= 0x1f300 && u <= 0x1f64f) ||
        (u >= 0x1f900 && u <= 0x1f9ff) || (u >= 0x20000 && u <= 0x3fffd))
        return 2;
    return 1;
}

size_t str_display_width(const char *s)
{
    size_t w = 0;
    const unsigned char *p = (const unsigned char *)s;
    while (*p) {
        unsigned long u = *p;
        int more = u >= 0xf0 ? 3 : u >= 0xe0 ? 2 : u >= 0xc0 ? 1 : 0;
        if (more)
            u &= 0x3fu >> more;
        p++;
        for (; more > 0 && (*p & 0xc0) == 0x80; more--, p++)
            u = u << 6 | (*p & 0x3fu);
        w += more ? 1 : cp_width(u); /* a cut-short sequence: one column, as terminals show */
    }
    return w;
}
