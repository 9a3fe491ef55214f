/*
 * ready: readiness polling with libcurl (through common/http.c), backing
 * off from 50 ms to 1 s, and checking the process between probes so that a
 * server that dies while loading is reported with its cause, not a timeout.
 */
#include "exec/ready.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "buf.h"
#include "http.h"
#include "log.h"
#include "strutil.h"
#include "sweep.h"
#include "timeutil.h"

#include "exec/cause.h"
#include "exec/cgroup.h"

#define PROBE_CONNECT_MS 500  /* readiness probe: connect timeout */
#define PROBE_TOTAL_MS   1500 /* readiness probe: whole request */
#define BACKOFF_FIRST_MS 50
#define BACKOFF_MAX_MS   1000

/*
 * A /health body that names a pid ("pid":N, as fakeserver and fp4serve
 * do) lets us notice that someone else's server answered on our port (a
 * SO_REUSEPORT twin). Only a warning: in a container the pid namespace
 * differs and the number means nothing here. A pid in the server's cgroup
 * is ours even outside its group (a launcher that starts the real server
 * with setsid).
 */
static void check_health_pid(const struct proc *p, const struct buf *body)
{
    const char *s = body->data ? strstr(body->data, "\"pid\"") : NULL;
    if (!s)
        return;
    s = strchr(s, ':');
    long pid;
    char num[24];
    size_t k = 0;
    if (!s)
        return;
    for (s++; *s == ' '; s++)
        ;
    while (k + 1 < sizeof(num) && *s >= '0' && *s <= '9')
        num[k++] = *s++;
    num[k] = '\0';
    if (str_to_long(num, &pid) != 0 || pid <= 0)
        return;
    pid_t pg = getpgid((pid_t)pid);
    if (pg >= 0 && pg != p->pid && !(p->cg_dir && cg_has_pid(p->cg_dir, (pid_t)pid)))
        log_warn("the server answering on this port reports pid %ld, which is not in the "
                 "process group %ld that sweep started (another server on the same port?)",
                 pid, (long)p->pid);
}

/* Sleep up to ms, waking early when the process exits or stop is set. */
static void nap(struct proc *p, double ms, const proc_stop_flag *stop)
{
    struct proc *one[1] = {p};
    proc_wait_any(one, 1, ms, stop);
}

enum ready_result ready_wait(struct proc *p, const char *url, double timeout_s,
                             const proc_stop_flag *stop, struct err *err)
{
    double start = clock_ms();
    double deadline = start + timeout_s * 1000.0;
    double delay = BACKOFF_FIRST_MS;
    char last[160] = "no probe yet";
    struct buf body;
    buf_init(&body, 8192);
    enum ready_result result;
    for (;;) {
        if (stop && *stop) {
            result = READY_INTERRUPTED;
            err_set(err, RN_ERR_INTERRUPTED, "interrupted while waiting for the server");
            break;
        }
        if (!proc_alive(p)) {
            char *cause = cause_of_exit(p, "server");
            err_set(err, RN_ERR_ENV, "%s while starting, %.1f s after launch (log: %s)", cause,
                    (clock_ms() - start) / 1000.0, p->log_path);
            free(cause);
            result = READY_EXITED;
            break;
        }
        double left = deadline - clock_ms();
        long probe_ms = left < PROBE_TOTAL_MS ? (long)left : PROBE_TOTAL_MS;
        if (probe_ms < 100)
            probe_ms = 100;
        /* one probe, never past the deadline by more than its own cap */
        buf_reset(&body);
        long code = http_get(url, PROBE_CONNECT_MS, probe_ms, &body, last, sizeof(last));
        if (code == 200) {
            check_health_pid(p, &body);
            result = READY_OK;
            break;
        }
        if (code == 503)
            snprintf(last, sizeof(last), "HTTP 503, still loading");
        if (clock_ms() >= deadline) {
            /* one last look: an exit during the final probe is the better message */
            if (!proc_alive(p))
                continue;
            err_set(err, RN_ERR_ENV, "server not ready at %s after %g s (last probe: %s)", url,
                    timeout_s, last);
            result = READY_TIMEOUT;
            break;
        }
        /* back off (50 ms doubling to 1 s) but wake at once if it exits */
        left = deadline - clock_ms();
        nap(p, delay < left ? delay : left, stop);
        delay = delay * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : delay * 2;
    }
    buf_release(&body);
    return result;
}
