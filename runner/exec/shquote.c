/*
 * shquote: single-quoting of words for a POSIX shell (see shquote.h). Inside
 * single quotes a shell gives no character a meaning except the closing
 * quote, so the only case to handle is ' itself.
 */
#include "exec/shquote.h"

#include <string.h>

int shq_word(struct buf *out, const char *s)
{
    int rc = buf_putc(out, '\'');
    for (const char *q; rc == 0 && (q = strchr(s, '\'')); s = q + 1) {
        rc = buf_append(out, s, (size_t)(q - s));
        if (rc == 0)
            rc = buf_puts(out, "'\\''"); /* end the quote, a quoted ', quote again */
    }
    if (rc == 0)
        rc = buf_puts(out, s);
    if (rc == 0)
        rc = buf_putc(out, '\'');
    return rc == 0 ? 0 : -1;
}

int shq_words(struct buf *out, const struct strvec *sv)
{
    for (size_t i = 0; i < sv->n; i++) {
        if (out->len && buf_putc(out, ' ') != 0)
            return -1;
        if (shq_word(out, sv->v[i]) != 0)
            return -1;
    }
    return 0;
}
