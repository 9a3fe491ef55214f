/*
 * gpu: the pids holding a GPU context, asked of nvidia-smi with a deadline
 * (it can take seconds on a busy GPU). No GPU or no nvidia-smi: -1.
 */
#include "exec/gpu.h"

#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "capture.h"
#include "strutil.h"
#include "xalloc.h"

#define GPU_QUERY_MS 5000 /* nvidia-smi may take a while on a busy GPU */

int gpu_pids(const char *nvsmi, pid_t *out, size_t max)
{
    const char *argv[] = {nvsmi, "--query-compute-apps=pid", "--format=csv,noheader,nounits", NULL};
    struct capture_opts opts = {.timeout_ms = GPU_QUERY_MS};
    struct capture_result res;
    struct buf text;
    buf_init(&text, 1 << 20);
    int n = -1;
    if (capture_run(argv, &opts, &text, &res) == 0 && capture_exit_code(&res) == 0) {
        n = 0;
        /* one pid per line; anything else (a "No running processes" line
         * from old drivers, blanks) is skipped */
        for (char *line = text.data, *next; line && *line && (size_t)n < max; line = next) {
            next = strchr(line, '\n');
            if (next)
                *next++ = '\0';
            long pid;
            while (*line == ' ' || *line == '\t')
                line++;
            size_t len = strlen(line);
            while (len && (line[len - 1] == ' ' || line[len - 1] == '\r'))
                line[--len] = '\0';
            if (str_to_long(line, &pid) == 0 && pid > 0)
                out[n++] = (pid_t)pid;
        }
    }
    buf_release(&text);
    return n;
}

int gpu_describe(struct strvec *out)
{
    const char *argv[] = {"nvidia-smi", "--query-gpu=name,driver_version,memory.total",
                          "--format=csv,noheader", NULL};
    struct capture_opts opts = {.timeout_ms = GPU_QUERY_MS * 2};
    struct capture_result res;
    struct buf text;
    buf_init(&text, 64 << 10);
    int n = -1;
    if (capture_run(argv, &opts, &text, &res) == 0 && capture_exit_code(&res) == 0) {
        n = 0;
        for (char *line = text.data; line && *line;) {
            char *nl = strchr(line, '\n');
            size_t len = nl ? (size_t)(nl - line) : strlen(line);
            if (len) {
                strvec_push_owned(out, xstrndup(line, len));
                n++;
            }
            if (!nl)
                break;
            line = nl + 1;
        }
    }
    buf_release(&text);
    return n;
}
