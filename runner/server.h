/*
 * server: supervision of the child processes sweep starts (the server under
 * test and each point's client). A child runs from an argv vector (never a
 * shell) in its own process group, with stdout+stderr appended to a log
 * file, and is stopped by SIGTERM to the group, a grace period, SIGKILL,
 * and a check that the group is empty. Also: readiness polling over HTTP,
 * the port probe, and reading why a server died from its log tail.
 * reference/reliability.md section 3 has the rules and their sources.
 */
#ifndef RUNNER_SERVER_H
#define RUNNER_SERVER_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "buf.h"
#include "err.h"
#include "strvec.h"

/* One supervised child and its process group. Zeroed (srv_proc_init) = none. */
struct srv_proc {
    pid_t pid;            /* child pid = its process group id; 0 when none started */
    int pidfd;            /* pidfd of the child for poll(), -1 if unavailable */
    bool reaped;          /* the child itself was waited for; wstatus is valid */
    int wstatus;          /* waitpid status once reaped */
    char *log_path;       /* owned: where stdout and stderr go */
    long long log_offset; /* log size in bytes at spawn: its own output starts here */
    uint64_t started_ns;  /* CLOCK_MONOTONIC at spawn */
};

/* What srv_stop did, for logs and tests. */
struct srv_stop_info {
    double elapsed_s;   /* from SIGTERM until the group was empty */
    bool escalated;     /* SIGKILL was needed */
    bool group_emptied; /* killpg(pgid, 0) reported ESRCH before the 1 s deadline */
};

/* A stop request shared with the signal handler: 0 none, 1 stop (Ctrl-C),
 * 2 or more: hurry (second Ctrl-C: no grace period). May be NULL. */
typedef volatile sig_atomic_t srv_stop_flag;

void srv_proc_init(struct srv_proc *p);
/* Free what p owns; the process must have been stopped (or never started). */
void srv_proc_release(struct srv_proc *p);

/*
 * Make this process a child subreaper (PR_SET_CHILD_SUBREAPER), so that
 * descendants orphaned by a dying server are reparented to us, where
 * srv_stop reaps them and srv_kill_strays finds those that left the group.
 * Call once, from the main thread, before spawning. Returns 0 or -1.
 */
int srv_become_subreaper(void);

/*
 * Resolve prog as execvp would (a name without '/' is searched in $PATH) to
 * an executable file. Returns a heap path, or NULL with "program 'P': not
 * found in PATH" / "...: not executable" in err (RN_ERR_ENV). Used before
 * spawning so a missing binary is reported as such, not as exit 127.
 */
char *srv_resolve_program(const char *prog, struct err *err);

/*
 * Start argv (argv->v[0] resolved like execvp) as a new process group:
 * fork, setpgid, PR_SET_PDEATHSIG(SIGTERM) with a getppid check, default
 * signal dispositions and an empty mask, stdin from /dev/null, stdout and
 * stderr appended to log_path (created 0644), environment = ours plus
 * env_add ("NAME=value", overriding). If exec fails, the child writes the
 * reason to the log and exits 127. p must be fresh (srv_proc_init); on
 * success it owns a copy of log_path. Returns 0, or -1 with err set
 * (RN_ERR_ENV: program not found or not executable, log not writable).
 */
int srv_spawn(struct srv_proc *p, const struct strvec *argv, const struct strvec *env_add,
              const char *log_path, struct err *err);

/* Non-blocking: true while the child has not exited (reaps it once it has). */
bool srv_alive(struct srv_proc *p);

/*
 * Wait until one of procs (entries may be NULL or not started) exits, the
 * stop flag is set, or timeout_ms passes; returns early on any of these.
 * Uses pidfds when the kernel has them, else sleeps in short slices.
 */
void srv_wait_any(struct srv_proc *const *procs, size_t n, double timeout_ms,
                  const srv_stop_flag *stop);

/*
 * Stop p's process group: SIGTERM, then poll up to grace_s (cut short when
 * *stop >= 2), then SIGKILL; reap the child and any group members that were
 * reparented to us; finally poll up to 1 s until killpg(pgid, 0) says the
 * group is gone. Safe on a child that already exited or was never started.
 * Fills *info when given. Returns 0 when the group is empty, -1 otherwise.
 */
int srv_stop(struct srv_proc *p, double grace_s, const srv_stop_flag *stop,
             struct srv_stop_info *info);

/*
 * SIGKILL every child of this process that is not one of keep[0..n) (pids)
 * and reap it: descendants that left their process group (setsid) and were
 * reparented to us as subreaper. Returns how many were found.
 */
int srv_kill_strays(const pid_t *keep, size_t n);

/* The members of process group pgid that still run (zombies left out), at
 * most max of them into out. Returns how many. */
size_t srv_group_members(pid_t pgid, pid_t *out, size_t max);

/* True when pid runs (not a zombie) and is still in process group pgid: a
 * pid reused by an unrelated process does not count. */
bool srv_pid_in_group(pid_t pid, pid_t pgid);

/*
 * The processes holding a GPU context, from `nvsmi --query-compute-apps=pid
 * --format=csv,noheader,nounits` (nvsmi: nvidia-smi's path), at most max
 * into out. Returns how many, or -1 when nvidia-smi failed or timed out.
 */
int srv_gpu_pids(const char *nvsmi, pid_t *out, size_t max);

/*
 * Probe host:port with connect(): 1 when something accepts connections
 * there, 0 when nothing does (refused or unreachable within 500 ms).
 */
int srv_port_in_use(const char *host, long port);

/* A TCP port on host (default 127.0.0.1) that nothing listens on right
 * now (the kernel's pick for a bind to port 0), or -1. */
long srv_free_port(const char *host);

/* How the readiness wait ended. */
enum srv_ready {
    SRV_READY = 0,       /* the ready path answered 200 */
    SRV_EXITED = 1,      /* the process exited first (err says how, with the log tail's cause) */
    SRV_TIMEOUT = 2,     /* timeout_s passed (err says what the last probe saw) */
    SRV_INTERRUPTED = 3, /* *stop became nonzero */
};

/*
 * Poll url (e.g. "http://127.0.0.1:8000/health") with libcurl until it
 * answers 200. Backoff 50 ms doubling to 1 s between probes; each probe is
 * capped at 500 ms to connect and 1.5 s in all; 503 means "still loading".
 * Between probes the process is checked every 50 ms, so an exit is noticed
 * well within 2 s. On failure err holds one line (the caller prints the log
 * tail with srv_log_tail). Code in err: RN_ERR_ENV.
 */
enum srv_ready srv_wait_ready(struct srv_proc *p, const char *url, double timeout_s,
                              const srv_stop_flag *stop, struct err *err);

/*
 * One GET of url: returns the HTTP status (200, 503, ...), or 0 when no
 * HTTP answer came (refused, timeout), with a short reason in why (may be
 * NULL) and up to 4 KiB of the body in body (may be NULL).
 */
long srv_http_get(const char *url, long timeout_ms, struct buf *body, char *why, size_t why_size);

/* "exited with code 2", "killed by SIGKILL", "killed by SIGSEGV (core dumped)". */
void srv_describe_status(int wstatus, char *out, size_t size);

/*
 * The last max_lines lines p wrote to its log since it was spawned (the
 * file may hold earlier runs before log_offset). Heap string, "" if none.
 */
char *srv_log_tail(const struct srv_proc *p, int max_lines);

/*
 * Recognise a known failure in log text: returns a short label ("out of
 * memory", "CUDA error", "port in use", ...) and, in *line_out (may be
 * NULL), a heap copy of the last line that matched; NULL if none matched.
 */
const char *srv_log_cause(const char *text, char **line_out);

/*
 * Why p stopped, in one line for points.csv and messages: the wait status
 * and, when the log tail matches a known failure, the label and the line,
 * e.g. "server killed by SIGKILL" or "server exited with code 1: out of
 * memory ('RuntimeError: CUDA out of memory. Tried to allocate 20.00 GiB')".
 * p must have been reaped. Heap string.
 */
char *srv_exit_cause(const struct srv_proc *p, const char *who);

/*
 * Run argv (no shell) with stdout captured into out (stderr discarded),
 * waiting at most timeout_ms; for small queries such as nvidia-smi.
 * Returns the exit code, or -1 if it could not run or timed out (killed).
 */
int srv_capture(const struct strvec *argv, struct buf *out, double timeout_ms);

#endif
