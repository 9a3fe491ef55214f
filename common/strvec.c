/* strvec: owned, NULL-terminated string vectors for argv and envp. */
#include "strvec.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "xalloc.h"

void strvec_init(struct strvec *sv)
{
    sv->v = NULL;
    sv->n = 0;
    sv->cap = 0;
}

void strvec_release(struct strvec *sv)
{
    for (size_t i = 0; i < sv->n; i++)
        free(sv->v[i]);
    free(sv->v);
    strvec_init(sv);
}

void strvec_push_owned(struct strvec *sv, char *s)
{
    XGROW(sv->v, sv->cap, sv->n + 2);
    sv->v[sv->n++] = s;
    sv->v[sv->n] = NULL;
}

void strvec_push(struct strvec *sv, const char *s)
{
    strvec_push_owned(sv, xstrdup(s));
}

void strvec_pushf(struct strvec *sv, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    char *s = xmalloc((size_t)(n < 0 ? 0 : n) + 1);
    va_start(ap, fmt);
    vsnprintf(s, (size_t)(n < 0 ? 0 : n) + 1, fmt, ap);
    va_end(ap);
    strvec_push_owned(sv, s);
}

void strvec_extend(struct strvec *sv, const struct strvec *src)
{
    for (size_t i = 0; i < src->n; i++)
        strvec_push(sv, src->v[i]);
}

void strvec_copy(struct strvec *dst, const struct strvec *src)
{
    strvec_init(dst);
    strvec_extend(dst, src);
}

long strvec_find(const struct strvec *sv, const char *s)
{
    for (size_t i = 0; i < sv->n; i++)
        if (strcmp(sv->v[i], s) == 0)
            return (long)i;
    return -1;
}

char **strvec_argv(struct strvec *sv)
{
    if (!sv->v) {
        XGROW(sv->v, sv->cap, 1);
        sv->v[0] = NULL;
    }
    return sv->v;
}

static int is_plain(const char *s)
{
    if (!*s)
        return 0;
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              strchr("-_./:=,+@%", c)))
            return 0;
    }
    return 1;
}

void strvec_print_quoted(FILE *f, const struct strvec *sv)
{
    for (size_t i = 0; i < sv->n; i++) {
        const char *s = sv->v[i];
        if (i)
            fputc(' ', f);
        if (is_plain(s)) {
            fputs(s, f);
            continue;
        }
        fputc('\'', f);
        for (; *s; s++) {
            if (*s == '\'')
                fputs("'\\''", f);
            else
                fputc(*s, f);
        }
        fputc('\'', f);
    }
}
