/*
 * cause: the wait status in words and a table of failure signatures looked
 * for in the log tail, so that "exited with code 1" becomes "out of memory
 * ('torch.OutOfMemoryError: CUDA out of memory...')"; and the server's own
 * error message, when a client printed it, quoted into a point's cause.
 */
#include "exec/cause.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "xalloc.h"

/* Known failure signatures, checked case-insensitively on each log line
 * from the last one up; on one line, earlier rows win (an out-of-memory
 * line that also says CUDA is "out of memory"). */
static const struct {
    const char *needle;
    const char *label;
} causes[] = {
    {"out of memory", "out of memory"},
    {"OutOfMemoryError", "out of memory"},
    {"std::bad_alloc", "out of memory"},
    {"Cannot allocate memory", "out of memory"},
    {"CUDA error", "CUDA error"},
    {"CUDA_ERROR_", "CUDA error"},
    {"cudaError", "CUDA error"},
    {"illegal memory access", "CUDA error"},
    {"CUBLAS_STATUS_", "CUDA error"},
    {"NCCL error", "NCCL error"},
    {"no CUDA-capable device", "no GPU"},
    {"Address already in use", "port in use"},
    {"EADDRINUSE", "port in use"},
    {"error while loading shared libraries", "missing shared library"},
    {"sweep: cannot execute", "cannot execute"},
    {"Segmentation fault", "segmentation fault"},
};

/* Walk text's lines from the last one up: the line that ends at *end (a
 * copy to free; "" for an empty line), *end moved before it; NULL when
 * none is left. */
static char *prev_line(const char *text, size_t *end)
{
    if (*end == 0)
        return NULL;
    size_t start = *end;
    while (start > 0 && text[start - 1] != '\n')
        start--;
    char *line = xstrndup(text + start, *end - start);
    *end = start ? start - 1 : 0;
    return line;
}

const char *cause_from_log(const char *text, char **line_out)
{
    if (line_out)
        *line_out = NULL;
    if (!text)
        return NULL;
    size_t end = strlen(text);
    char *line;
    while ((line = prev_line(text, &end)) != NULL) {
        for (size_t i = 0; i < sizeof(causes) / sizeof(causes[0]); i++) {
            if (strcasestr(line, causes[i].needle)) {
                if (line_out)
                    *line_out = line;
                else
                    free(line);
                return causes[i].label;
            }
        }
        free(line);
    }
    return NULL;
}

char *cause_of_exit(const struct proc *p, const char *who)
{
    char how[96];
    proc_describe_status(p->reaped ? p->wstatus : -1, how, sizeof(how));
    char *tail = proc_log_tail(p, 30);
    char *line = NULL;
    const char *label = cause_from_log(tail, &line);
    char *out;
    if (label) {
        /* trim the line to something a CSV cell and a terminal can show */
        char *s = line;
        while (*s == ' ' || *s == '\t')
            s++;
        out = xasprintf("%s %s: %s ('%.160s%s')", who, how, label, s, strlen(s) > 160 ? "..." : "");
    } else {
        out = xasprintf("%s %s", who, how);
    }
    free(line);
    free(tail);
    return out;
}

/* The keys whose string value is a server's error message, quoted either
 * way (JSON or Python's repr). */
static const char *const msg_keys[] = {"\"message\"", "'message'", "\"detail\"", "'detail'"};

/* The quoted value after a key at p (key_len bytes) on the line ending at
 * end: spaces, ':', spaces, then a string in ' or ". Unescaped into out
 * (at most max bytes kept, *cut set when more followed). Returns false
 * when no string value follows. */
static bool value_after(const char *p, size_t key_len, const char *end, struct buf *out, size_t max,
                        bool *cut)
{
    p += key_len;
    while (p < end && (*p == ' ' || *p == '\t'))
        p++;
    if (p >= end || *p != ':')
        return false;
    p++;
    while (p < end && (*p == ' ' || *p == '\t'))
        p++;
    if (p >= end || (*p != '"' && *p != '\''))
        return false;
    char q = *p++;
    *cut = false;
    for (; p < end && *p != q; p++) {
        char c = *p;
        if (c == '\\' && p + 1 < end) {
            c = *++p;
            if (c == 'n' || c == 't' || c == 'r')
                c = ' ';
        }
        if (out->len >= max) {
            *cut = true;
            break;
        }
        buf_putc(out, c);
    }
    return true;
}

char *cause_server_message(const char *text, size_t max_bytes)
{
    if (!text)
        return NULL;
    size_t end = strlen(text);
    char *line;
    /* lines from the last one up; on a line, its last key wins */
    while ((line = prev_line(text, &end)) != NULL) {
        const char *line_end = line + strlen(line);
        const char *best = NULL;
        size_t best_len = 0;
        if (strcasestr(line, "error"))
            for (size_t k = 0; k < sizeof(msg_keys) / sizeof(msg_keys[0]); k++)
                for (const char *p = strstr(line, msg_keys[k]); p; p = strstr(p + 1, msg_keys[k]))
                    if (!best || p > best) {
                        best = p;
                        best_len = strlen(msg_keys[k]);
                    }
        char *msg = NULL;
        if (best) {
            struct buf v;
            bool cut = false;
            buf_init(&v, max_bytes + 1);
            if (value_after(best, best_len, line_end, &v, max_bytes, &cut) && v.len > 0)
                msg = xasprintf("%.*s%s", (int)v.len, v.data, cut ? "..." : "");
            buf_release(&v);
        }
        free(line);
        if (msg)
            return msg;
    }
    return NULL;
}

void cause_quote_server(struct buf *cause, const struct proc *p)
{
    char *tail = proc_log_tail(p, 400);
    char *msg = cause_server_message(tail, 300);
    if (msg && !(cause->data && strstr(cause->data, msg)))
        buf_printf(cause, "%sthe server said: '%s'", cause->len ? "; " : "", msg);
    free(msg);
    free(tail);
}
