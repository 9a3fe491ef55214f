/*
 * net: the listening socket of the HTTP server (server.c hands it to
 * libmicrohttpd), and what server.c reads of a request's head before
 * routing: header counts, sizes and framing fields, the origin-form path.
 */
#ifndef ENGINE_NET_H
#define ENGINE_NET_H

#include <microhttpd.h>
#include <stdbool.h>
#include <stddef.h>

#include "err.h"

#include "serve/api.h"

/* socket + SO_REUSEADDR (never SO_REUSEPORT, so a second server on a busy
 * port fails instead of sharing it) + bind + listen on host:port (0 = any
 * free port). Returns the socket (close-on-exec) with the port bound in
 * *bound, or -1 with err (FP_ERR_ADDR) saying what to do: a name that does
 * not resolve, an address in use ("pick another --port"), no permission. */
int net_listen(const char *host, int port, int *bound, struct err *err);

/* Header counts and sizes, gathered in one pass over MHD's parsed fields
 * (MHD itself only bounds the whole header block by its connection memory),
 * and the fields that frame the body: libmicrohttpd reads the body by the
 * first Content-Length and lets Transfer-Encoding win over it silently,
 * so a second, different length or both at once (request smuggling through
 * a proxy that picks the other one) is refused here. */
struct net_head {
    unsigned n;        /* header fields */
    size_t longest;    /* bytes of the longest name + value */
    size_t total;      /* bytes of every name + value, plus 2 each ('=', '&' or ': ') */
    const char *which; /* its name */
    unsigned n_cl;     /* Content-Length fields */
    bool cl_differ;    /* two Content-Length fields with different values */
    const char *cl;    /* the first Content-Length value */
    unsigned n_te;     /* Transfer-Encoding fields */
    const char *te;    /* the first Transfer-Encoding value */
};

/* MHD_get_connection_values_n's callback: count one field into cls (a
 * struct net_head, zeroed before the first call). Always MHD_YES. */
enum MHD_Result net_scan_header(void *cls, enum MHD_ValueKind kind, const char *key,
                                size_t key_size, const char *value, size_t value_size);

/* The origin-form path of a request target: an absolute-form target
 * ("http://host:port/path", which RFC 9112 §3.2.2 says a server must
 * accept) loses its scheme and authority; "" becomes "/". A pointer into
 * url. */
const char *net_origin_path(const char *url);

/* Write e as a whole HTTP answer (status, reason phrase, JSON body,
 * "Connection: close") straight to conn's socket and shut its write side,
 * for a refusal while a body is still arriving; under TLS (tls) nothing is
 * written: the caller's MHD_NO closes the connection. */
void net_answer_now(struct MHD_Connection *conn, bool tls, int status, const char *reason,
                    const struct api_error *e);

#endif
