/*
 * watch: the request deadline (--request-timeout). libmicrohttpd's
 * connection timeout is an idle timeout, reset by every byte, so a client
 * that trickles a header or body byte now and then (slowloris) keeps its
 * connection, and enough of them fill --max-connections. The watch gives
 * each request a total deadline from its first byte until it has been read
 * whole (headers and body); a request still arriving then is answered 408
 * and its connection shut. A thread of its own checks the open
 * connections four times a second. Waiting for the next request on a
 * keep-alive connection and writing an answer are not counted: the idle
 * timeout governs those.
 */
#ifndef ENGINE_WATCH_H
#define ENGINE_WATCH_H

#include <stdbool.h>
#include <stdint.h>

#include "serve/prom.h"

typedef struct watch watch;
struct watch_conn; /* one per open connection */

/* A watch giving requests deadline_s seconds, its thread started; NULL
 * when deadline_s is 0 (no deadline), and every function below takes NULL
 * as "nothing to do". A 408 is counted in met (route "other"). tls: the
 * sockets carry TLS, so a late request is only shut, without the 408 text
 * (plain bytes would garble the TLS stream). Never fails but for a thread
 * that cannot start (then NULL, logged). */
watch *watch_new(unsigned deadline_s, struct prom *met, bool tls);
/* Stop the thread and free every record. Call after the HTTP server has
 * closed its connections. NULL is a no-op. */
void watch_free(watch *w);

/* A connection was accepted on socket fd: its first request's clock starts
 * at its first byte. Returns the record to hand to the calls below. */
struct watch_conn *watch_open(watch *w, int fd);
/* The connection is closing (before its socket is closed); frees c. */
void watch_close(watch *w, struct watch_conn *c);
/* A request's headers are in; its clock runs if it did not yet. */
void watch_reading(watch *w, struct watch_conn *c);
/* The request has been read whole: no deadline while it is answered. */
void watch_answering(watch *w, struct watch_conn *c);
/* The answer is done: the next request's clock starts at its first byte. */
void watch_idle(watch *w, struct watch_conn *c);

#endif
