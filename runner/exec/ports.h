/*
 * ports: is a TCP port taken, and which one is free. Preflight refuses a
 * fixed port that something already answers on; port: auto picks one.
 */
#ifndef RUNNER_PORTS_H
#define RUNNER_PORTS_H

/*
 * Probe host:port with connect(): 1 when something accepts connections
 * there, 0 when nothing does (refused or unreachable within 500 ms).
 */
int port_in_use(const char *host, long port);

/* A TCP port on host (default 127.0.0.1) that nothing listens on right
 * now (the kernel's pick for a bind to port 0), or -1. */
long port_free(const char *host);

#endif
