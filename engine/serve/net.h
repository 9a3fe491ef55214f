/*
 * net: the listening socket of the HTTP server (server.c hands it to
 * libmicrohttpd).
 */
#ifndef ENGINE_NET_H
#define ENGINE_NET_H

#include "err.h"

/* socket + SO_REUSEADDR (never SO_REUSEPORT, so a second server on a busy
 * port fails instead of sharing it) + bind + listen on host:port (0 = any
 * free port). Returns the socket (close-on-exec) with the port bound in
 * *bound, or -1 with err (FP_ERR_ADDR) saying what to do: a name that does
 * not resolve, an address in use ("pick another --port"), no permission. */
int net_listen(const char *host, int port, int *bound, struct err *err);

#endif
