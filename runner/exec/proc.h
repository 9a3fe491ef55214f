/*
 * proc: supervision of the child processes sweep starts (the server under
 * test and each point's client). A child runs from an argv vector (never a
 * shell) in its own process group, with stdout+stderr appended to a log
 * file, and is stopped by SIGTERM to the group, a grace period, SIGKILL,
 * and a check that the group is empty. Given a cgroup (cgroup.h), the child
 * joins it before exec and stopping covers every process in it as well.
 * Its neighbours: ready.c (readiness polling), cause.c (why a child died),
 * ports.c and gpu.c.
 * docs/reliability.md §3 has the rules and their sources.
 */
#ifndef RUNNER_PROC_H
#define RUNNER_PROC_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "buf.h"
#include "err.h"
#include "strvec.h"

/* One supervised child and its process group. Zeroed (proc_init) = none. */
struct proc {
    pid_t pid;            /* child pid = its process group id; 0 when none started */
    int pidfd;            /* pidfd of the child for poll(), -1 if unavailable */
    bool reaped;          /* the child itself was waited for; wstatus is valid */
    int wstatus;          /* waitpid status once reaped */
    char *log_path;       /* owned: where stdout and stderr go */
    long long log_offset; /* log size in bytes at spawn: its own output starts here */
    uint64_t started_ns;  /* CLOCK_MONOTONIC at spawn */
    bool stdin_pipe;      /* set before proc_spawn: stdin is a pipe we hold open, not
                             /dev/null (the ssh executor: its EOF stops the remote side) */
    int stdin_w;          /* the write end of that pipe, -1 when none; nothing is written,
                             closing it is the signal; proc_release closes it */
    char *cg_dir;         /* owned: cgroup the child joins (set between proc_init and
                             proc_spawn, from cg_create); NULL: process group only */
};

/* What proc_stop did, for logs and tests. */
struct proc_stop_info {
    double elapsed_s;   /* from SIGTERM until the group was empty */
    bool escalated;     /* SIGKILL was needed */
    bool hurried;       /* ... because of a second interrupt, not the grace running out */
    bool group_emptied; /* killpg(pgid, 0) reported ESRCH (and the cgroup, if any, held
                           no process) before the 1 s deadline */
};

/* A stop request shared with the signal handler: 0 none, 1 stop (Ctrl-C),
 * 2 or more: hurry (second Ctrl-C: no grace period). May be NULL. */
typedef volatile sig_atomic_t proc_stop_flag;

void proc_init(struct proc *p);
/* Free what p owns and rmdir its cgroup if still there; the process must
 * have been stopped (or never started). */
void proc_release(struct proc *p);

/*
 * Make this process a child subreaper (PR_SET_CHILD_SUBREAPER), so that
 * descendants orphaned by a dying server are reparented to us, where
 * proc_stop reaps them and proc_kill_strays finds those that left the group.
 * Call once, from the main thread, before spawning. Returns 0 or -1.
 */
int proc_become_subreaper(void);

/*
 * Resolve prog as execvp would (a name without '/' is searched in $PATH) to
 * an executable file. Returns a heap path, or NULL with "program 'P': not
 * found in PATH" / "...: not executable" in err (RN_ERR_ENV). Used before
 * spawning so a missing binary is reported as such, not as exit 127.
 */
char *proc_resolve_program(const char *prog, struct err *err);

/*
 * Start argv (argv->v[0] resolved like execvp) as a new process group:
 * fork, setpgid, PR_SET_PDEATHSIG(SIGTERM) with a getppid check, default
 * signal dispositions and an empty mask, stdin from /dev/null (or, with
 * p->stdin_pipe, a pipe whose write end stays in p->stdin_w), stdout and
 * stderr appended to log_path (created 0644), environment = ours plus
 * env_add ("NAME=value", overriding). With p->cg_dir set the child first
 * moves itself into that cgroup (a cgroup whose cgroup.procs cannot be
 * opened is removed and dropped: process group only). If exec fails, the
 * child writes the reason to the log and exits 127. p must be fresh
 * (proc_init, then cg_dir if any); on success it owns a copy of log_path.
 * Returns 0, or -1 with err set (RN_ERR_ENV: program not found or not
 * executable, log not writable), p's cgroup removed and p as proc_init left it.
 */
int proc_spawn(struct proc *p, const struct strvec *argv, const struct strvec *env_add,
               const char *log_path, struct err *err);

/* Non-blocking: true while the child has not exited (reaps it once it has). */
bool proc_alive(struct proc *p);

/*
 * Wait until one of procs (entries may be NULL or not started) exits, the
 * stop flag is set, or timeout_ms passes; returns early on any of these.
 * Uses pidfds when the kernel has them, else sleeps in short slices.
 */
void proc_wait_any(struct proc *const *procs, size_t n, double timeout_ms,
                   const proc_stop_flag *stop);

/*
 * Stop p's process group: SIGTERM, then poll up to grace_s (cut short when
 * *stop >= 2), then SIGKILL; reap the child and any group members that were
 * reparented to us; finally poll up to 1 s until killpg(pgid, 0) says the
 * group is gone. With a cgroup, every process in it gets the same SIGTERM,
 * the hard phase writes cgroup.kill, "empty" also means cgroup.events says
 * populated 0, and the emptied cgroup is removed. Safe on a child that
 * already exited or was never started. Fills *info when given. Returns 0
 * when the group (and cgroup) is empty, -1 otherwise.
 */
int proc_stop(struct proc *p, double grace_s, const proc_stop_flag *stop,
              struct proc_stop_info *info);

/*
 * SIGKILL every child of this process that is not one of keep[0..n) (pids)
 * and reap it: descendants that left their process group (setsid) and were
 * reparented to us as subreaper. Children already dead (zombies, e.g.
 * killed with their cgroup) are reaped without a word. Returns how many
 * live ones were found.
 */
int proc_kill_strays(const pid_t *keep, size_t n);

/* The members of process group pgid that still run (zombies left out), at
 * most max of them into out. Returns how many. */
size_t proc_group_members(pid_t pgid, pid_t *out, size_t max);

/* True when pid runs (not a zombie) and is still in process group pgid: a
 * pid reused by an unrelated process does not count. */
bool proc_pid_in_group(pid_t pid, pid_t pgid);

/* "exited with code 2", "killed by SIGKILL", "killed by SIGSEGV (core dumped)". */
void proc_describe_status(int wstatus, char *out, size_t size);

/*
 * The last max_lines lines p wrote to its log since it was spawned (the
 * file may hold earlier runs before log_offset). Heap string, "" if none.
 */
char *proc_log_tail(const struct proc *p, int max_lines);

#endif
