/*
 * log: one-line diagnostics on stderr, "prog: level: message". The level
 * and program name are process-wide settings made once in main().
 */
#ifndef COMMON_LOG_H
#define COMMON_LOG_H

enum log_level { LOG_ERROR = 0, LOG_WARN = 1, LOG_INFO = 2, LOG_DEBUG = 3 };

/* Set the program name shown on each line and the most verbose level shown.
 * with_time adds a wall-clock timestamp (useful in server logs). */
void log_setup(const char *prog, enum log_level level, int with_time);
enum log_level log_get_level(void);
void log_msg(enum log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define log_error(...) log_msg(LOG_ERROR, __VA_ARGS__)
#define log_warn(...)  log_msg(LOG_WARN, __VA_ARGS__)
#define log_info(...)  log_msg(LOG_INFO, __VA_ARGS__)
#define log_debug(...) log_msg(LOG_DEBUG, __VA_ARGS__)

#endif
