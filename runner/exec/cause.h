/*
 * cause: why a child died, in one line for points.csv and messages: the
 * wait status plus a known failure recognised in its log tail.
 */
#ifndef RUNNER_CAUSE_H
#define RUNNER_CAUSE_H

#include <stddef.h>

#include "buf.h"

#include "exec/proc.h"

/*
 * Recognise a known failure in log text: returns a short label ("out of
 * memory", "CUDA error", "port in use", ...) and, in *line_out (may be
 * NULL), a heap copy of the last line that matched; NULL if none matched.
 */
const char *cause_from_log(const char *text, char **line_out);

/*
 * Why p stopped, in one line for points.csv and messages: the wait status
 * and, when the log tail matches a known failure, the label and the line,
 * e.g. "server killed by SIGKILL" or "server exited with code 1: out of
 * memory ('RuntimeError: CUDA out of memory. Tried to allocate 20.00 GiB')".
 * p must have been reaped. Heap string.
 */
char *cause_of_exit(const struct proc *p, const char *who);

/*
 * The last error message from a server that a client printed in text: the
 * string value of a "message" (or FastAPI's "detail") key on a line that
 * also says "error", as JSON ({"error": {"message": "..."}}, vLLM's
 * {"object": "error", "message": "..."}) or as Python's repr of it
 * ({'error': {'message': '...'}}, what the openai client's exceptions
 * print). Escapes are undone and newlines become spaces; the value is cut
 * at max_bytes (then "..." ends it). A heap string, or NULL when no line
 * has one.
 */
char *cause_server_message(const char *text, size_t max_bytes);

/*
 * Append to cause "the server said: '...'" with the last server message
 * in the tail of p's log (cause_server_message), preceded by "; " when
 * cause is not empty; nothing when the log has none or cause already
 * quotes it. For a failed point whose client printed the server's refusal
 * (a 400 body), so the reason is in points.csv, not only in the log.
 */
void cause_quote_server(struct buf *cause, const struct proc *p);

#endif
