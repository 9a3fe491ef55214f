/*
 * freeport: print a TCP port on 127.0.0.1 that is free right now (bind to
 * port 0 and report what the kernel chose). For tests and scripts.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <sys/socket.h>
#include <unistd.h>

int main(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = 0};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(a);
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof(a)) != 0 ||
        getsockname(fd, (struct sockaddr *)&a, &len) != 0) {
        perror("freeport");
        return 1;
    }
    printf("%d\n", ntohs(a.sin_port));
    close(fd);
    return 0;
}
