/*
 * net: the listening socket of fp4serve's HTTP server (see net.h), made
 * here rather than by libmicrohttpd so that every way binding can fail is
 * worded for the user; and the request-head helpers server.c routes with.
 */
#include "serve/net.h"

#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include "fp4.h"

int net_listen(const char *host, int port, int *bound, struct err *err)
{
    char ps[16];
    snprintf(ps, sizeof(ps), "%d", port);
    struct addrinfo hints = {.ai_family = AF_UNSPEC,
                             .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_PASSIVE | AI_NUMERICSERV};
    struct addrinfo *res = NULL;
    int gai = getaddrinfo(host, ps, &hints, &res);
    if (gai != 0)
        return err_set(err, FP_ERR_ADDR, "cannot listen on '%s': %s", host, gai_strerror(gai)), -1;
    int fd = socket(res->ai_family, res->ai_socktype | SOCK_CLOEXEC, res->ai_protocol);
    int one = 1;
    if (fd < 0) {
        err_set(err, FP_ERR_ADDR, "cannot listen on %s:%d: socket: %s", host, port,
                strerror(errno));
        goto fail;
    }
    /* SO_REUSEADDR lets a restart bind past TIME_WAIT; SO_REUSEPORT is never
     * set, so a second server on a busy port fails here instead of sharing it */
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(fd, res->ai_addr, res->ai_addrlen) != 0) {
        int e = errno;
        err_set(err, FP_ERR_ADDR, "cannot listen on %s:%d: %s%s", host, port, strerror(e),
                e == EADDRINUSE ? " (another server is running there; pick another --port)" : "");
        goto fail;
    }
    if (listen(fd, 1024) != 0) {
        err_set(err, FP_ERR_ADDR, "cannot listen on %s:%d: %s", host, port, strerror(errno));
        goto fail;
    }
    struct sockaddr_storage ss;
    socklen_t sl = sizeof(ss);
    *bound = port;
    if (getsockname(fd, (struct sockaddr *)&ss, &sl) == 0)
        *bound = ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
                                                : ((struct sockaddr_in *)&ss)->sin_port);
    freeaddrinfo(res);
    return fd;
fail:
    if (fd >= 0)
        close(fd);
    freeaddrinfo(res);
    return -1;
}

enum MHD_Result net_scan_header(void *cls, enum MHD_ValueKind kind, const char *key,
                                size_t key_size, const char *value, size_t value_size)
{
    struct net_head *h = cls;
    h->n++;
    h->total += key_size + value_size + 2;
    if (key_size + value_size > h->longest) {
        h->longest = key_size + value_size;
        h->which = key;
    }
    if (kind == MHD_HEADER_KIND && strcasecmp(key, MHD_HTTP_HEADER_CONTENT_LENGTH) == 0) {
        if (h->n_cl++ == 0)
            h->cl = value;
        else if (strcmp(h->cl, value) != 0)
            h->cl_differ = true;
    }
    if (kind == MHD_HEADER_KIND && strcasecmp(key, MHD_HTTP_HEADER_TRANSFER_ENCODING) == 0 &&
        h->n_te++ == 0)
        h->te = value;
    return MHD_YES;
}

/* The origin-form path of a request target: an absolute-form target
 * ("http://host:port/path", which RFC 9112 §3.2.2 says a server must
 * accept) loses its scheme and authority; "" becomes "/". */
const char *net_origin_path(const char *url)
{
    const char *p = NULL;
    if (strncasecmp(url, "http://", 7) == 0)
        p = url + 7;
    else if (strncasecmp(url, "https://", 8) == 0)
        p = url + 8;
    if (!p)
        return url;
    p = strchr(p, '/');
    return p ? p : "/";
}
