/*
 * strvec: a NULL-terminated vector of owned strings, the shape execvp and
 * posix_spawn want. Used for every child argv and environment.
 */
#ifndef COMMON_STRVEC_H
#define COMMON_STRVEC_H

#include <stddef.h>
#include <stdio.h>

struct strvec {
    char **v;   /* owned strings, v[n] == NULL once anything was pushed */
    size_t n;   /* number of strings */
    size_t cap; /* slots allocated, including the NULL terminator */
};

#define STRVEC_INIT                                                                                \
    {                                                                                              \
        NULL, 0, 0                                                                                 \
    }

void strvec_init(struct strvec *sv);
void strvec_release(struct strvec *sv);
/* Push a copy of s. */
void strvec_push(struct strvec *sv, const char *s);
/* Push a string the caller already allocated (the vector takes ownership). */
void strvec_push_owned(struct strvec *sv, char *s);
void strvec_pushf(struct strvec *sv, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Append copies of every string of src. */
void strvec_extend(struct strvec *sv, const struct strvec *src);
/* Deep copy. */
void strvec_copy(struct strvec *dst, const struct strvec *src);
/* Index of s in the vector, or -1. */
long strvec_find(const struct strvec *sv, const char *s);
/* The argv for exec: never NULL, always NULL-terminated. */
char **strvec_argv(struct strvec *sv);
/*
 * Print the vector as one line a POSIX shell would parse back into the same
 * words: plain words as they are, others in single quotes ('\'' for quotes).
 * Used by --dry-run and in manifests; nothing is ever run through a shell.
 */
void strvec_print_quoted(FILE *f, const struct strvec *sv);

#endif
