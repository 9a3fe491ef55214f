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

#include "buf.h"
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

/* libmicrohttpd takes no response during an upload callback
 * (MHD_queue_response fails there), and waiting for the end of an
 * over-long chunked body would leave the client without an answer until
 * it gives up or the idle timeout. So the answer is written to the socket
 * here and the write side shut (the client sees the whole answer, then end
 * of file). The socket is non-blocking; a short answer on a connection
 * with nothing else in flight fits its send buffer, and if it does not,
 * the connection is still closed at once. */
void net_answer_now(struct MHD_Connection *conn, bool tls, int status, const char *reason,
                    const struct api_error *e)
{
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
    if (!ci || tls) /* under TLS plain bytes would garble the stream: just close */
        return;
    struct buf body, out;
    buf_init(&body, 4096);
    buf_init(&out, 8192);
    api_error_json(&body, e);
    buf_printf(&out,
               "HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nContent-Length: %zu\r\n"
               "Connection: close\r\n\r\n",
               status, reason, body.len);
    buf_append(&out, body.data, body.len);
    size_t off = 0;
    while (off < out.len) {
        ssize_t n = send(ci->connect_fd, out.data + off, out.len - off, MSG_NOSIGNAL);
        if (n <= 0)
            break;
        off += (size_t)n;
    }
    shutdown(ci->connect_fd, SHUT_WR);
    buf_release(&body);
    buf_release(&out);
}
