/*
 * ssh: the ssh executor (executor: {kind: ssh}). One ControlMaster
 * connection per run, started here as a supervised child; every server,
 * client and helper command is a `ssh -S CONTROL` client riding on it.
 * The remote side of a server or client is a small /bin/sh wrapper: it
 * runs the program with setsid in a process group of its own and kills
 * that group (SIGTERM, grace, SIGKILL) when its stdin, which is the ssh
 * channel, reaches end of file: when sweep stops it, when the local ssh
 * dies and when the connection drops. Output streams back over the channel
 * into the local log. Readiness is polled from here through a -L forward.
 * executor.c is the only caller.
 */
#ifndef RUNNER_SSH_H
#define RUNNER_SSH_H

#include "buf.h"
#include "err.h"
#include "strvec.h"

#include "exec/proc.h"

#include "config/experiment.h"
#include "config/plan.h"

struct ssh_conn;

/* Open the master connection to cfg's host (cfg is borrowed and must
 * outlive the connection) and wait until it is up. NULL with err set
 * (RN_ERR_ENV with ssh's last line; RN_ERR_INTERRUPTED). */
struct ssh_conn *ssh_open(const struct exp_executor *cfg, proc_stop_flag *stop, struct err *err);
/* Close the connection, remove the control folder, free s (NULL: nothing). */
void ssh_close(struct ssh_conn *s);
/* The master's pid (a child of ours that must survive proc_kill_strays). */
pid_t ssh_master_pid(const struct ssh_conn *s);

/* The remote checks of exec_preflight (executor.h). */
int ssh_preflight(struct ssh_conn *s, struct plan *p, struct err *err);
/* exec_spawn and exec_stop for ssh (executor.h). */
int ssh_spawn(struct ssh_conn *s, struct proc *p, const struct strvec *argv,
              const struct strvec *env_add, const char *log_path, const char *remote_dir,
              double grace_s, struct err *err);
int ssh_stop(struct ssh_conn *s, struct proc *p, double grace_s, const proc_stop_flag *stop,
             struct proc_stop_info *info);
/* A forward from 127.0.0.1 here to host:port as the remote host sees it;
 * the one made before is cancelled unless it is the same. Returns the
 * local port, or -1 with err set (RN_ERR_ENV). */
long ssh_forward(struct ssh_conn *s, const char *host, long port, struct err *err);
/* Copy the remote file remote_path (relative: to the work folder) to
 * local_path (written atomically). Returns 0 or -1 with err set. */
int ssh_fetch(struct ssh_conn *s, const char *remote_path, const char *local_path, struct err *err);

/*
 * The remote command line that runs argv under the wrapper: "exec /bin/sh
 * -c SCRIPT sweep-remote WORKDIR GRACE DIR ENVLEN HEARTBEAT ARGV..." with
 * every word
 * through shq_word (shquote.h), into out; and into env_out the ENVLEN
 * bytes the wrapper reads from its stdin first: one "export 'NAME=value'"
 * line per env_add entry (so values stay out of any command line). With
 * heartbeat_s > 0 the wrapper also stops the program when no byte came on
 * its stdin for that long (ssh_spawn's thread sends one every 2 s). Both
 * buffers are initialised here and released by the caller. Exposed for
 * the unit tests. Returns 0, or -1 when the line would pass SSH_REMOTE_MAX
 * or the environment SSH_ENV_MAX bytes (err set, RN_ERR_ENV) or an env
 * entry is not NAME=value (RN_ERR_USAGE).
 */
#define SSH_REMOTE_MAX ((size_t)100 << 10) /* bytes; one argv string may hold 128 KiB */
#define SSH_ENV_MAX    ((size_t)8 << 20)   /* bytes of the environment script */
int ssh_run_line(const char *workdir, double grace_s, const char *remote_dir,
                 const struct strvec *env_add, const struct strvec *argv, long heartbeat_s,
                 struct buf *out, struct buf *env_out, struct err *err);

#endif
