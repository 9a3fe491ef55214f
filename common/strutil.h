/*
 * strutil: strict number parsing (the replacement for atoi/atof, which are
 * banned), edit distance for "did you mean" hints, and small string helpers.
 */
#ifndef COMMON_STRUTIL_H
#define COMMON_STRUTIL_H

#include <stdbool.h>
#include <stddef.h>

/* Parse all of s as a base-10 integer; 0 on success, -1 if s is empty, has
 * trailing junk or overflows. */
int str_to_long(const char *s, long *out);
/* Parse all of s as a decimal number, the one reader of numbers from outside
 * (metrics, points.csv, flags, experiment values): optional sign, digits
 * with an optional '.', optional exponent, as C's strtod reads them, but no
 * hex ("0x1p3"), no "inf"/"nan", no leading spaces and nothing after. 0 with
 * *out set, or -1 with errno EINVAL (not such a number) or ERANGE (beyond a
 * double's range, "1e999", or below its smallest normal, "1e-400"). The
 * grammar is checked here, so a locale with another decimal point can make
 * strtod refuse a number but never read a different value. */
int str_to_double(const char *s, double *out);
/* str_to_double on s[0..n) (need not be NUL-terminated; a NUL byte inside
 * is refused). */
int str_to_double_n(const char *s, size_t n, double *out);
bool str_starts_with(const char *s, const char *prefix);
bool str_ends_with(const char *s, const char *suffix);
/* The last non-empty line of text[0..len), for error messages quoting a
 * log: trailing '\n', '\r' and ' ' are dropped, then *line points at the
 * line's start inside text and its length is returned (0 if text holds
 * nothing but those). text need not be NUL-terminated. */
size_t str_last_line(const char *text, size_t len, const char **line);
/* Levenshtein distance between a and b (bytes), capped at 255. */
unsigned str_distance(const char *a, const char *b);
/* The candidate closest to word if its distance is small enough to be a
 * plausible typo (<= max(1, len/3)), else NULL. candidates ends with NULL. */
const char *str_suggest(const char *word, const char *const *candidates);
/* Terminal columns UTF-8 text takes: one per character ("±", "²" are one
 * column but two bytes), two for East Asian wide ones and emoji, none for
 * combining marks. For padding table cells; printf's widths count bytes. */
size_t str_display_width(const char *s);

#endif
