/*
 * cause: the wait status in words and a table of failure signatures looked
 * for in the log tail, so that "exited with code 1" becomes "out of memory
 * ('torch.OutOfMemoryError: CUDA out of memory...')".
 */
#include "exec/cause.h"

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

const char *cause_from_log(const char *text, char **line_out)
{
    if (line_out)
        *line_out = NULL;
    if (!text)
        return NULL;
    size_t end = strlen(text);
    while (end > 0) {
        size_t start = end;
        while (start > 0 && text[start - 1] != '\n')
            start--;
        char *line = xstrndup(text + start, end - start);
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
        end = start ? start - 1 : 0;
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
