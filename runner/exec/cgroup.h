/*
 * cgroup: a cgroup v2 of its own for each server and client sweep starts,
 * so that every process they leave behind can be found and killed, even
 * one that left its process group with setsid (killpg misses it) after
 * sweep itself was SIGKILLed (the parent-death signal and the subreaper
 * die with sweep). Membership and cgroup.kill are all we use: no
 * controller is enabled, so the "no internal processes" rule does not
 * apply and a cgroup that holds sweep itself may have these children.
 *
 * Names: <sweep's own cgroup>/sweep-<pid>-<starttime>-ns<pidns>-<role>-<n>,
 * with sweep's pid, its start time (/proc/PID/stat field 22, clock ticks
 * after boot) and its PID namespace (the inode of /proc/self/ns/pid), so a
 * later sweep in the same namespace can tell for sure that the owner is
 * dead even when the pid was reused (cg_clean_leftovers), and one in
 * another namespace (a container sharing the cgroup tree) leaves it be.
 * Without a writable cgroup2 hierarchy everything here is a no-op and
 * sweep keeps to process groups (docs/reliability.md §3.1 rule 7).
 */
#ifndef RUNNER_CGROUP_H
#define RUNNER_CGROUP_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

/* Where this sweep creates its cgroups. Zeroed = not opened (none made). */
struct cg_base {
    char *dir;                      /* owned: sweep's own cgroup folder; NULL when unusable */
    char *why;                      /* owned: why dir is NULL (for the one warning) */
    pid_t owner;                    /* our pid, first part of each name */
    unsigned long long owner_start; /* our start time, clock ticks after boot */
    unsigned long long owner_ns;    /* our PID namespace: inode of /proc/self/ns/pid */
    long n;                         /* cgroups created so far, the last part of each name */
};

/*
 * Find the cgroup2 mount (/proc/self/mountinfo) and our own cgroup in it
 * ("0::/path" in /proc/self/cgroup), and check that we may create a child
 * there. Returns 0, or -1 with b->why saying what is missing ("no cgroup2
 * mount", "/sys/fs/cgroup/x: Permission denied", ...); b is usable (and
 * cg_create returns NULL) either way. mountinfo and cgroup_file are the
 * files to read, NULL for /proc/self/...: tests pass their own.
 */
int cg_open(struct cg_base *b, const char *mountinfo, const char *cgroup_file);
void cg_close(struct cg_base *b);

/*
 * mkdir a fresh child cgroup named after us and role ("server", "client").
 * Returns its heap path, or NULL when cgroups are not usable or the mkdir
 * failed; in that case *why (heap, caller frees) says why when why is not
 * NULL, and b is closed so the next call does not retry.
 */
char *cg_create(struct cg_base *b, const char *role, char **why);

/* The pids in cgroup dir (its cgroup.procs, zombies excluded by the
 * kernel), at most max of them. Returns how many; 0 if unreadable. */
size_t cg_pids(const char *dir, pid_t *out, size_t max);

/* True when pid is in cgroup dir itself (its cgroup.procs lists it). */
bool cg_has_pid(const char *dir, pid_t pid);

/* Send sig to every process in cgroup dir. Returns how many were sent. */
size_t cg_signal(const char *dir, int sig);

/* SIGKILL everything in cgroup dir: cgroup.kill (Linux 5.14+), else each
 * pid from cgroup.procs, repeated by the caller's wait loop. */
void cg_kill(const char *dir);

/* 1 while a live process is in dir or below (cgroup.events "populated"),
 * 0 when none is, -1 when the file cannot be read (dir gone). */
int cg_populated(const char *dir);

/* rmdir dir and the cgroups a process in it made below it (a server may
 * make its own), innermost first. Returns 0, or -1 (errno set) while one of
 * them still holds a process. */
int cg_remove(const char *dir);

/* Wait up to timeout_ms for dir to hold no process. True if it is empty. */
bool cg_wait_empty(const char *dir, double timeout_ms);

/*
 * Find the cgroups a dead sweep left in our own cgroup (name starts with
 * "sweep-", owner pid gone or running something started at another time;
 * cgroups of a live sweep, and those named by a sweep of another PID
 * namespace, are never touched). An empty one is removed
 * silently. One that still holds processes is named on stderr, each pid
 * with its command line and where its output goes (the run folder's log),
 * then killed (cgroup.kill), waited for and removed, and the warning says
 * so. Returns the number of processes killed. A no-op when b is unusable.
 */
size_t cg_clean_leftovers(struct cg_base *b);

#endif
