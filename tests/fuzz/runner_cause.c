/*
 * runner_cause fuzz target: a client's or server's log text as the point's
 * cause reads it (exec/cause.c). Any input is read without a memory error;
 * a quoted server message is one line, never empty, and within its cap
 * plus "..."; a label always comes with the line it matched.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "exec/cause.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > (1u << 16))
        return 0;
    char *text = malloc(size + 1); /* allow: fuzz harness */
    memcpy(text, data, size);
    text[size] = '\0';
    char *msg = cause_server_message(text, 64);
    if (msg && (msg[0] == '\0' || strchr(msg, '\n') || strlen(msg) > 64 + 3))
        abort();
    free(msg);
    char *line = NULL;
    const char *label = cause_from_log(text, &line);
    if ((label == NULL) != (line == NULL) || (line && strchr(line, '\n')))
        abort();
    free(line);
    free(text);
    return 0;
}
