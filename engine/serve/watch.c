/*
 * watch: the request deadline (see watch.h). Records sit in a list under
 * one mutex, touched by the HTTP thread at each change of phase and by the
 * watch thread at each tick. A request that passes its deadline is sent a
 * 408 straight on its socket and the socket is shut both ways: the HTTP
 * thread then reads end of file and closes the connection itself, so the
 * watch never closes a descriptor it does not own. The record is removed
 * (watch_close) before libmicrohttpd closes the socket, and the shutdown
 * runs under the mutex, so the descriptor is never a reused one.
 */
#include "serve/watch.h"

#include <errno.h>
#include <linux/tcp.h> /* struct tcp_info with tcpi_bytes_received */
#include <netinet/in.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "buf.h"
#include "log.h"
#include "timeutil.h"
#include "xalloc.h"

#include "serve/api.h"

#define TICK_MS 250 /* how often the deadlines are checked */

enum phase {
    IDLE,      /* waiting for a request's first byte: no deadline */
    READING,   /* a request is arriving: the deadline runs */
    ANSWERING, /* read whole: no deadline */
    SHUT,      /* timed out: answered 408 and shut */
};

struct watch_conn {
    int fd;                  /* the connection's socket (libmicrohttpd's) */
    enum phase phase;        /* under w->mu */
    uint64_t start_ns;       /* READING: clock_ns at the request's first byte (to a tick) */
    uint64_t idle_bytes;     /* IDLE: bytes the socket had received when it began */
    struct watch_conn *prev; /* list links, under w->mu */
    struct watch_conn *next;
};

struct watch {
    unsigned deadline_s;
    struct prom *met;
    bool tls; /* TLS sockets: shut without the 408 text */
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv; /* signalled to stop */
    bool stop;         /* under mu */
    struct watch_conn *head;
};

/* Bytes the kernel has received on fd, or 0 where it cannot say (Linux
 * before 4.1): then a request's clock starts only with its headers. */
static uint64_t bytes_received(int fd)
{
    struct tcp_info ti;
    socklen_t len = sizeof(ti);
    memset(&ti, 0, sizeof(ti));
    if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &len) != 0)
        return 0;
    return len >= offsetof(struct tcp_info, tcpi_bytes_received) + sizeof(ti.tcpi_bytes_received)
               ? ti.tcpi_bytes_received
               : 0;
}

/* Answer 408 on c's socket and shut it. Nothing else writes to it while
 * a request is still arriving; the answer is short enough for the send
 * buffer, and if it does not go out the connection is shut all the same. */
static void time_out(struct watch *w, struct watch_conn *c)
{
    struct api_error e = {.status = 408};
    snprintf(e.type, sizeof(e.type), "invalid_request_error");
    snprintf(e.msg, sizeof(e.msg),
             "the request did not arrive whole within %u s (--request-timeout)", w->deadline_s);
    struct buf body, out;
    buf_init(&body, 4096);
    buf_init(&out, 8192);
    api_error_json(&body, &e);
    buf_printf(&out,
               "HTTP/1.1 408 Request Timeout\r\nContent-Type: application/json\r\n"
               "Content-Length: %zu\r\nConnection: close\r\n\r\n",
               body.len);
    buf_append(&out, body.data, body.len);
    if (!w->tls && send(c->fd, out.data, out.len, MSG_NOSIGNAL | MSG_DONTWAIT) < 0)
        log_debug("408: %s", strerror(errno));
    shutdown(c->fd, SHUT_RDWR);
    c->phase = SHUT;
    prom_response(w->met, PROM_OTHER, 408);
    log_warn("-: 408 invalid_request_error: %s", e.msg);
    buf_release(&body);
    buf_release(&out);
}

/* One tick: start the clock of idle connections that received a byte,
 * and time out the requests past their deadline. */
static void tick(struct watch *w)
{
    uint64_t now = clock_ns(), limit = (uint64_t)w->deadline_s * 1000000000ull;
    for (struct watch_conn *c = w->head; c; c = c->next) {
        if (c->phase == IDLE && bytes_received(c->fd) > c->idle_bytes) {
            c->phase = READING;
            c->start_ns = now;
        }
        if (c->phase == READING && now - c->start_ns >= limit)
            time_out(w, c);
    }
}

static void *run(void *arg)
{
    struct watch *w = arg;
    pthread_mutex_lock(&w->mu);
    while (!w->stop) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += TICK_MS * 1000000L;
        if (ts.tv_nsec >= 1000000000L) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000L;
        }
        pthread_cond_timedwait(&w->cv, &w->mu, &ts);
        if (!w->stop)
            tick(w);
    }
    pthread_mutex_unlock(&w->mu);
    return NULL;
}

watch *watch_new(unsigned deadline_s, struct prom *met, bool tls)
{
    if (deadline_s == 0)
        return NULL;
    struct watch *w = xcalloc(1, sizeof(*w));
    w->deadline_s = deadline_s;
    w->met = met;
    w->tls = tls;
    pthread_mutex_init(&w->mu, NULL);
    pthread_cond_init(&w->cv, NULL);
    if (pthread_create(&w->thread, NULL, run, w) != 0) {
        log_warn("cannot start the request deadline thread: --request-timeout is off");
        pthread_cond_destroy(&w->cv);
        pthread_mutex_destroy(&w->mu);
        free(w);
        return NULL;
    }
    return w;
}

void watch_free(watch *w)
{
    if (!w)
        return;
    pthread_mutex_lock(&w->mu);
    w->stop = true;
    pthread_cond_signal(&w->cv);
    pthread_mutex_unlock(&w->mu);
    pthread_join(w->thread, NULL);
    while (w->head) {
        struct watch_conn *c = w->head;
        w->head = c->next;
        free(c);
    }
    pthread_cond_destroy(&w->cv);
    pthread_mutex_destroy(&w->mu);
    free(w);
}

struct watch_conn *watch_open(watch *w, int fd)
{
    if (!w)
        return NULL;
    struct watch_conn *c = xcalloc(1, sizeof(*c));
    c->fd = fd;
    c->phase = IDLE; /* idle_bytes 0: any byte since the connection began counts */
    pthread_mutex_lock(&w->mu);
    c->next = w->head;
    if (w->head)
        w->head->prev = c;
    w->head = c;
    pthread_mutex_unlock(&w->mu);
    return c;
}

void watch_close(watch *w, struct watch_conn *c)
{
    if (!w || !c)
        return;
    pthread_mutex_lock(&w->mu);
    if (c->prev)
        c->prev->next = c->next;
    else
        w->head = c->next;
    if (c->next)
        c->next->prev = c->prev;
    pthread_mutex_unlock(&w->mu);
    free(c);
}

void watch_reading(watch *w, struct watch_conn *c)
{
    if (!w || !c)
        return;
    pthread_mutex_lock(&w->mu);
    if (c->phase == IDLE) {
        c->phase = READING;
        c->start_ns = clock_ns();
    }
    pthread_mutex_unlock(&w->mu);
}

void watch_answering(watch *w, struct watch_conn *c)
{
    if (!w || !c)
        return;
    pthread_mutex_lock(&w->mu);
    if (c->phase != SHUT)
        c->phase = ANSWERING;
    pthread_mutex_unlock(&w->mu);
}

void watch_idle(watch *w, struct watch_conn *c)
{
    if (!w || !c)
        return;
    pthread_mutex_lock(&w->mu);
    if (c->phase != SHUT) {
        c->phase = IDLE;
        c->idle_bytes = bytes_received(c->fd);
    }
    pthread_mutex_unlock(&w->mu);
}
