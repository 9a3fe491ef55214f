/*
 * executor: where a run's server and clients run, chosen by the experiment's
 * executor: section. local (the default) is proc.c as it always was; ssh
 * runs them on a remote host through the system ssh (exec/ssh.c) while the
 * run loop, the logs and the results stay here. run.c calls these instead
 * of proc_spawn/proc_stop for the server and the clients, so the run loop
 * is the same for both. slurm does not go through here past exec_open
 * (which checks sbatch, squeue and scancel): run.c hands the whole run to
 * exec/slurm.c, whose tasks run locally on their nodes.
 */
#ifndef RUNNER_EXECUTOR_H
#define RUNNER_EXECUTOR_H

#include "err.h"
#include "strvec.h"

#include "exec/proc.h"

#include "config/experiment.h"
#include "config/plan.h"

struct ssh_conn;

struct executor {
    enum exp_exec_kind kind;
    struct ssh_conn *ssh; /* owned: the connection, kind ssh only */
    const char *where;    /* for messages: "" or " on host 'me@gpu-box'" (owned when not "") */
};

/*
 * Get ready to run exp's processes: nothing for local; for ssh, open the
 * one master connection that every later command goes through (waits until
 * it is up, *stop cuts the wait short). Returns 0, or -1 with err set
 * (RN_ERR_ENV: ssh missing, the host cannot be reached or refuses us,
 * with ssh's own last line; RN_ERR_INTERRUPTED).
 */
int exec_open(struct executor *ex, const struct experiment *exp, proc_stop_flag *stop,
              struct err *err);

/* Close the connection (ssh) and remove what exec_open made. Safe on a
 * zeroed or already closed executor. */
void exec_close(struct executor *ex);

/* A child of ours that is not a server or client and must survive
 * proc_kill_strays (the ssh master), or 0. */
pid_t exec_pid(const struct executor *ex);

/*
 * ssh: the checks of run.c's preflight, made on the remote host before
 * anything starts: the work folder, every variant's model path (and its
 * fingerprint, into p: the point keys are computed again with it), every
 * server and client program, setsid, timeout, dd. Nothing for local
 * (run.c checks here). Returns 0, or -1 with "variant 'V': on host 'H': model path 'P':
 * not found" and the like in err (RN_ERR_ENV).
 */
int exec_preflight(struct executor *ex, struct plan *p, struct err *err);

/*
 * Start argv as p (fresh, proc_init) with env_add and its output appended
 * to log_path, as proc_spawn does. ssh: the local child is ssh, the
 * program runs remotely in its own process group under a small sh wrapper
 * (in the work folder, after making remote_dir when not NULL), and its
 * stdout and stderr stream into log_path as it runs. grace_s is the
 * remote SIGTERM-to-SIGKILL wait when the stop comes from the remote side
 * (the connection dropped). Returns 0 or -1 with err set, as proc_spawn.
 */
int exec_spawn(struct executor *ex, struct proc *p, const struct strvec *argv,
               const struct strvec *env_add, const char *log_path, const char *remote_dir,
               double grace_s, struct err *err);

/*
 * Stop p as proc_stop does. ssh: first the remote side: the program's
 * process group gets SIGTERM, then SIGKILL after grace_s, and this waits
 * for it (a second Ctrl-C does not); then the local ssh is stopped.
 * Returns proc_stop's result.
 */
int exec_stop(struct executor *ex, struct proc *p, double grace_s, const proc_stop_flag *stop,
              struct proc_stop_info *info);

/*
 * The URL sweep polls (from this machine) to see that variant pv's server
 * is ready: its url and ready path for local; for ssh a forward through
 * the connection (-L 127.0.0.1:LOCAL:HOST:PORT, one at a time) to the
 * server's host and port as the remote host sees them. Heap string, or
 * NULL with err set (RN_ERR_ENV).
 */
char *exec_ready_url(struct executor *ex, const struct plan_variant *pv, struct err *err);
/* The server's base URL as reached from here ("http://HOST:PORT"; under
 * ssh through the same forward), for other requests sweep makes itself
 * (the metrics scrape). Heap string, or NULL with err set. */
char *exec_base_url(struct executor *ex, const struct plan_variant *pv, struct err *err);

/*
 * Is port taken where variant pv's server would listen? Local: a listener
 * on server.host (port_in_use). ssh: something answers HTTP at server.host
 * and port on the remote host (probed through a forward); a listener that
 * does not speak HTTP is not seen, and the server's start fails instead.
 */
bool exec_port_in_use(struct executor *ex, const struct plan_variant *pv, long port);
/* A port to try instead of a taken auto port: port_free(host) locally; for
 * ssh one free here (the remote side is checked by exec_port_in_use). */
long exec_port_free(struct executor *ex, const char *host);

/*
 * Where the builtin client of point pp saves the server's metrics after its
 * warmup (client/loadgen.h LG_METRICS_FILE_ENV), so that the point's
 * server_* deltas leave the warmup out: locally the point's own
 * metrics-before file beside log_path (the client overwrites sweep's
 * scrape with a rename; same folder, same file system); under ssh a file
 * of this attempt only (pid and clock in its name, so a rerun never copies
 * an older one) in the variant's remote folder, copied back by
 * exec_point_done. Heap string; NULL when the client cannot do it (not
 * the builtin client, no warmup, no run folder, slurm's submitter).
 */
char *exec_client_metrics_file(struct executor *ex, const struct plan *p,
                               const struct plan_point *pp, const char *log_path);

/*
 * After point pp ran with the builtin client: under ssh its per-request
 * records (the --jsonl file in the remote run folder) are copied beside
 * the local log_path as .jsonl, and client_metrics (exec_client_metrics_file,
 * may be NULL) over the local metrics-before file. Failures are warnings
 * (a metrics copy only when the client's log says it saved one: else the
 * client has said why). Nothing for local.
 */
void exec_point_done(struct executor *ex, const struct plan *p, const struct plan_point *pp,
                     const char *log_path, const char *client_metrics);

#endif
