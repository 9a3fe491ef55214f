/*
 * ready: wait until a started server answers its ready path, noticing an
 * early exit within one probe interval.
 */
#ifndef RUNNER_READY_H
#define RUNNER_READY_H

#include "err.h"

#include "exec/proc.h"

/* How the readiness wait ended. */
enum ready_result {
    READY_OK = 0,          /* the ready path answered 200 */
    READY_EXITED = 1,      /* the process exited first (err says how, with the log tail's cause) */
    READY_TIMEOUT = 2,     /* timeout_s passed (err says what the last probe saw) */
    READY_INTERRUPTED = 3, /* *stop became nonzero */
};

/*
 * Poll url (e.g. "http://127.0.0.1:8000/health") with libcurl until it
 * answers 200. Backoff 50 ms doubling to 1 s between probes; each probe is
 * capped at 500 ms to connect and 1.5 s in all; 503 means "still loading".
 * Between probes the process is checked every 50 ms, so an exit is noticed
 * well within 2 s. On failure err holds one line (the caller prints the log
 * tail with proc_log_tail). Code in err: RN_ERR_ENV.
 */
enum ready_result ready_wait(struct proc *p, const char *url, double timeout_s,
                             const proc_stop_flag *stop, struct err *err);

#endif
