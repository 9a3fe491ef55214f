/*
 * log: stderr diagnostics. The settings below are the one documented piece
 * of process-wide state in common/: they are written once by main() before
 * any thread starts and only read afterwards.
 */
#include "log.h"

#include <stdarg.h>
#include <stdio.h>
#include <time.h>

static const char *log_prog = "?";
static enum log_level log_level_max = LOG_INFO;
static int log_with_time;

void log_setup(const char *prog, enum log_level level, int with_time)
{
    log_prog = prog;
    log_level_max = level;
    log_with_time = with_time;
}

enum log_level log_get_level(void)
{
    return log_level_max;
}

void log_msg(enum log_level level, const char *fmt, ...)
{
    static const char *names[] = {"error", "warning", "info", "debug"};
    if (level > log_level_max)
        return;
    char line[2048];
    int off = 0;
    if (log_with_time) {
        struct timespec ts;
        struct tm tm;
        clock_gettime(CLOCK_REALTIME, &ts);
        gmtime_r(&ts.tv_sec, &tm);
        off = snprintf(line, sizeof(line), "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ ",
                       tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min,
                       tm.tm_sec, ts.tv_nsec / 1000000);
    }
    off += snprintf(line + off, sizeof(line) - (size_t)off, "%s: %s: ", log_prog, names[level]);
    va_list ap;
    va_start(ap, fmt);
    if (off < (int)sizeof(line))
        vsnprintf(line + off, sizeof(line) - (size_t)off, fmt, ap);
    va_end(ap);
    /* one fputs per line so concurrent threads do not interleave mid-line */
    fprintf(stderr, "%s\n", line);
}
