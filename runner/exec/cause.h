/*
 * cause: why a child died, in one line for points.csv and messages: the
 * wait status plus a known failure recognised in its log tail.
 */
#ifndef RUNNER_CAUSE_H
#define RUNNER_CAUSE_H

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

#endif
