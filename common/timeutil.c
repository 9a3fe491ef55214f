/* timeutil: monotonic time for measurement, wall time for labels. */
#include "timeutil.h"

#include <errno.h>
#include <stdio.h>
#include <time.h>

uint64_t clock_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

double clock_ms(void)
{
    return (double)clock_ns() / 1e6;
}

void sleep_ms(double ms, volatile int *stop)
{
    if (ms <= 0)
        return;
    uint64_t end = clock_ns() + (uint64_t)(ms * 1e6);
    for (;;) {
        if (stop && *stop)
            return;
        uint64_t now = clock_ns();
        if (now >= end)
            return;
        uint64_t left = end - now;
        /* wake at least every 50 ms so a stop flag is seen promptly */
        if (stop && left > 50000000ull)
            left = 50000000ull;
        struct timespec ts = {(time_t)(left / 1000000000ull), (long)(left % 1000000000ull)};
        nanosleep(&ts, NULL);
    }
}

void time_iso8601(char *out, unsigned long size)
{
    time_t t = time(NULL);
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(out, size, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

void time_stamp_dir(char *out, unsigned long size)
{
    time_t t = time(NULL);
    struct tm tm;
    localtime_r(&t, &tm);
    strftime(out, size, "%Y%m%d-%H%M%S", &tm);
}
