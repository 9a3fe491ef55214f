/*
 * http: one plain GET over libcurl, for probes and small queries (a
 * server's /health, /v1/models, /metrics). Never through a proxy: the
 * servers sweep talks to are the ones it measures, not the network's.
 * The load generator's streaming requests are runner/client/loadgen.c.
 */
#ifndef COMMON_HTTP_H
#define COMMON_HTTP_H

#include <stddef.h>

#include "buf.h"

/*
 * GET url with a fresh connection (each probe sees the server as a new
 * client would), at most connect_ms to connect and timeout_ms in all.
 * Returns the HTTP status (200, 503, ...), or 0 when no HTTP answer came
 * (refused, timeout), with a short reason in why ("HTTP 503", curl's
 * message; may be NULL). The body goes into body (may be NULL), up to its
 * cap; the rest is read and dropped.
 */
long http_get(const char *url, long connect_ms, long timeout_ms, struct buf *body, char *why,
              size_t why_size);

/* base + path with exactly one '/' between them. Heap string. */
char *http_join_url(const char *base, const char *path);

#endif
