/*
 * ports: connect() probes and the kernel's pick of a free port, over
 * getaddrinfo so IPv4 and IPv6 hosts both work.
 */
#include "exec/ports.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <sys/socket.h>
#include <unistd.h>

#define PROBE_CONNECT_MS 500 /* a filtered address costs at most this */

/* connect(), not bind(): a server with SO_REUSEPORT would let a second
 * bind succeed silently (docs/reliability.md §3.1 rule 8). Non-blocking, so a
 * filtered address costs at most PROBE_CONNECT_MS. */
int port_in_use(const char *host, long port)
{
    char port_s[16];
    snprintf(port_s, sizeof(port_s), "%ld", port);
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM};
    struct addrinfo *res = NULL;
    if (getaddrinfo(host && *host ? host : "127.0.0.1", port_s, &hints, &res) != 0)
        return 0;
    int in_use = 0;
    for (struct addrinfo *ai = res; ai && !in_use; ai = ai->ai_next) {
        int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (fd < 0)
            continue;
        if (connect(fd, ai->ai_addr, ai->ai_addrlen) == 0) {
            in_use = 1;
        } else if (errno == EINPROGRESS) {
            struct pollfd pfd = {.fd = fd, .events = POLLOUT};
            int soerr = 0;
            socklen_t len = sizeof(soerr);
            if (poll(&pfd, 1, PROBE_CONNECT_MS) == 1 &&
                getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &len) == 0 && soerr == 0)
                in_use = 1;
        }
        close(fd);
    }
    freeaddrinfo(res);
    return in_use;
}

long port_free(const char *host)
{
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM};
    struct addrinfo *res = NULL;
    if (getaddrinfo(host && *host ? host : "127.0.0.1", "0", &hints, &res) != 0)
        return -1;
    long port = -1;
    for (struct addrinfo *ai = res; ai && port < 0; ai = ai->ai_next) {
        int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, 0);
        if (fd < 0)
            continue;
        struct sockaddr_storage ss;
        socklen_t len = sizeof(ss);
        if (bind(fd, ai->ai_addr, ai->ai_addrlen) == 0 &&
            getsockname(fd, (struct sockaddr *)&ss, &len) == 0)
            port = ss.ss_family == AF_INET6 ? ntohs(((struct sockaddr_in6 *)&ss)->sin6_port)
                                            : ntohs(((struct sockaddr_in *)&ss)->sin_port);
        close(fd);
    }
    freeaddrinfo(res);
    return port;
}
