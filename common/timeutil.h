/*
 * timeutil: monotonic clocks for every duration (never the wall clock), and
 * wall-clock stamps only for names and manifests.
 */
#ifndef COMMON_TIMEUTIL_H
#define COMMON_TIMEUTIL_H

#include <stdint.h>

/* Nanoseconds on CLOCK_MONOTONIC. */
uint64_t clock_ns(void);
/* Milliseconds on CLOCK_MONOTONIC, as a double. */
double clock_ms(void);
/* Sleep for ms milliseconds, resuming after signals (unless *stop becomes
 * nonzero, when stop is given). */
void sleep_ms(double ms, volatile int *stop);
/* UTC wall time as "2026-11-30T04:05:06Z" (out: at least 32 bytes). */
void time_iso8601(char *out, unsigned long size);
/* Local wall time as "20261130-040506" for folder names (out: >= 16 bytes). */
void time_stamp_dir(char *out, unsigned long size);

#endif
