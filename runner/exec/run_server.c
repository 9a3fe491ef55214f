/*
 * run_server: the server of the current variant. Start it (argv from the
 * plan, its own process group and cgroup, the log marked per start), wait
 * for readiness, check it before each point and restart it when it died,
 * stop it (TERM, grace, KILL), and wait out the last server's leftovers
 * (R9: no process of its group running or holding a GPU) before the next.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fileio.h"
#include "log.h"
#include "sweep.h"
#include "timeutil.h"

#include "exec/cause.h"
#include "exec/gpu.h"
#include "exec/ready.h"
#include "exec/run_int.h"

/* "http://HOST:PORT/health" for the variant's current port, as polled from
 * here (through a forward under ssh). NULL with err set. */
static char *ready_url(struct run_ctx *c, const struct plan_variant *pv, struct err *err)
{
    return exec_ready_url(&c->ex, pv, err);
}

/* The variant's folder in the remote run folder (made before a remote
 * start, for ${run_dir} and the builtin client's records); NULL for local. */
char *remote_dir(const struct run_ctx *c, const struct exp_variant *v)
{
    if (c->ex.kind == EXP_EXEC_LOCAL || !c->plan.run_dir)
        return NULL;
    return path_join(c->plan.run_dir, v->name);
}

/* Children of ours that are neither server nor client: the ssh master. */
void kill_strays(const struct run_ctx *c)
{
    pid_t keep = exec_pid(&c->ex);
    proc_kill_strays(&keep, keep ? 1 : 0);
}

/* The last lines of a server's log on stderr, indented with "  | ", after
 * a failed start: usually the real reason is in there. */
static void print_tail(struct run_ctx *c, const struct proc *p)
{
    char *tail = proc_log_tail(p, TAIL_LINES);
    if (*tail) {
        prog_note(&c->prog, "sweep: last lines of %s:", p->log_path);
        for (char *line = tail; line;) {
            char *nl = strchr(line, '\n');
            if (nl)
                *nl = '\0';
            prog_note(&c->prog, "  | %s", line);
            line = nl ? nl + 1 : NULL;
        }
    }
    free(tail);
}

/* Stop the current server (if any) with its variant's grace period; a
 * second Ctrl-C shortens it to nothing (proc_stop reads the flag). Helpers
 * it moved out of its group (setsid) came to us as subreaper: they go too,
 * before the next server could find its GPU memory or port still held.
 * Callers stop the client first, so no other child of ours is running. */
void server_stop(struct run_ctx *c)
{
    if (!c->server.pid)
        return;
    const struct exp_server *s = &c->plan.variants[c->server_vi].v->server;
    /* who was in the group, for the next start's stale check (the leader
     * too, though it may be a zombie already: the GPU may still list it) */
    c->stale_pgid = c->server.pid;
    c->stale[0] = c->server.pid;
    c->n_stale = 1 + proc_group_members(c->server.pid, c->stale + 1, STALE_MAX - 1);
    struct proc_stop_info info;
    if (exec_stop(&c->ex, &c->server, s->stop_grace_s, c->stop, &info) != 0)
        log_error("server process group %ld is not empty after SIGKILL", (long)c->server.pid);
    else if (info.hurried) /* its grace was cut short: it did not ignore anything */
        prog_note(&c->prog, "sweep: second interrupt: server (pid %ld) killed without waiting",
                  (long)c->server.pid);
    else if (info.escalated)
        prog_note(&c->prog, "sweep: server (pid %ld) ignored SIGTERM for %.1f s; killed",
                  (long)c->server.pid, info.elapsed_s);
    proc_release(&c->server);
    kill_strays(c);
}

/* The first process of the last server's group that still runs, or that
 * nvidia-smi still lists with a GPU context (why says which); 0 if none. */
static pid_t stale_pid(struct run_ctx *c, const char **why)
{
    for (size_t i = 0; i < c->n_stale; i++)
        if (proc_pid_in_group(c->stale[i], c->stale_pgid)) {
            *why = "still running";
            return c->stale[i];
        }
    if (!c->nvsmi_looked) {
        struct err e;
        err_init(&e);
        c->nvsmi = proc_resolve_program("nvidia-smi", &e);
        c->nvsmi_looked = true;
    }
    if (!c->nvsmi)
        return 0;
    pid_t gpu[256];
    int n = gpu_pids(c->nvsmi, gpu, sizeof(gpu) / sizeof(gpu[0]));
    for (int g = 0; g < n; g++)
        for (size_t i = 0; i < c->n_stale; i++)
            if (gpu[g] == c->stale[i]) {
                *why = "still listed by nvidia-smi";
                return gpu[g];
            }
    return 0;
}

/*
 * Reliability R9: a server starts only once the processes of the one
 * before it are gone and off the GPU, or it would find the memory or the
 * port still held and fail in a way that blames it. Waits up to
 * STALE_WAIT_S; then err says "stale server process PID n" and the caller
 * fails the next point only (the one after looks again).
 */
static int stale_wait(struct run_ctx *c, struct err *err)
{
    double t0 = clock_ms();
    bool noted = false;
    while (c->n_stale) {
        const char *why = "";
        pid_t pid = stale_pid(c, &why);
        if (!pid) {
            c->n_stale = 0;
            break;
        }
        double waited_s = (clock_ms() - t0) / 1000.0;
        if (waited_s >= STALE_WAIT_S)
            return err_set(err, RN_ERR_ENV,
                           "stale server process PID %ld (%s %.0f s after the server was stopped)",
                           (long)pid, why, waited_s),
                   -1;
        if (!noted)
            prog_note(&c->prog,
                      "sweep: waiting up to %.0f s for the last server's process %ld (%s)",
                      STALE_WAIT_S, (long)pid, why);
        noted = true;
        sleep_ms(STALE_POLL_MS, c->stop);
        if (stopping(c))
            return err_set(err, RN_ERR_INTERRUPTED, "interrupted"), -1;
    }
    return 0;
}

/* A cgroup for the next child (role "server" or "client"), or NULL; the
 * first mkdir that fails is said once and process groups carry on. */
char *new_cgroup(struct run_ctx *c, const char *role)
{
    char *why;
    char *dir = cg_create(&c->cg, role, &why);
    if (why)
        prog_note(&c->prog, "sweep: %s; using process groups only", why);
    free(why);
    return dir;
}

/* Write one line to server.log before a start, so restarts are visible. */
static void mark_server_log(const char *log, const struct plan_variant *pv, long start_no)
{
    char stamp[32];
    time_iso8601(stamp, sizeof(stamp));
    char *mem = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&mem, &len);
    if (!f)
        return;
    fprintf(f, "==== sweep %s: starting server for variant '%s' (start %ld): ", stamp, pv->v->name,
            start_no);
    strvec_print_quoted(f, &pv->server_argv);
    fputc('\n', f); /* strvec_print_quoted does not end the line */
    fclose(f);
    struct err e;
    err_init(&e);
    if (file_append_sync(log, mem, len, &e, RN_ERR_ENV) != 0)
        log_warn("%s", e.msg);
    free(mem);
}

/*
 * Start variant vi's server and wait until it is ready. An auto port that
 * something else took since planning is replaced; a fixed one is refused.
 * On failure the server is stopped, err says why (its log tail printed).
 */
int server_start(struct run_ctx *c, size_t vi, struct err *err)
{
    struct plan_variant *pv = &c->plan.variants[vi];
    const struct exp_server *s = &pv->v->server;
    c->start_stale = false;
    if (stale_wait(c, err) != 0) {
        c->start_stale = err->code != RN_ERR_INTERRUPTED;
        return -1;
    }
    if (exec_port_in_use(&c->ex, pv, pv->port)) {
        if (s->port != 0)
            return err_set(err, RN_ERR_ENV, "port %ld in use on %s%s (server.port is fixed)",
                           pv->port, s->host, c->ex.where),
                   -1;
        long port = -1;
        for (int tries = 0; tries < 5 && port < 0; tries++) {
            port = exec_port_free(&c->ex, s->host);
            if (port > 0 && exec_port_in_use(&c->ex, pv, port))
                port = -1;
        }
        if (port < 0)
            return err_set(err, RN_ERR_ENV, "no free port on %s", s->host), -1;
        prog_note(&c->prog, "sweep: port %ld is taken now; using %ld", pv->port, port);
        if (plan_set_port(&c->plan, vi, port, err) != 0)
            return -1;
    }
    char *dir = path_join(c->run_dir, pv->v->name);
    char *log = path_join(dir, "server.log");
    free(dir);
    c->server_starts++;
    mark_server_log(log, pv, c->server_starts);
    proc_init(&c->server);
    c->server.cg_dir = new_cgroup(c, "server");
    c->server_vi = vi;
    int rc = -1;
    char *url = NULL;
    char *rdir = remote_dir(c, pv->v);
    int spawned = exec_spawn(&c->ex, &c->server, &pv->server_argv, &pv->server_env, log, rdir,
                             s->stop_grace_s, err);
    free(rdir);
    if (spawned != 0)
        goto out;
    url = ready_url(c, pv, err);
    if (!url)
        goto out;
    prog_note(&c->prog, "sweep: variant '%s': server started (pid %ld), waiting for %s",
              pv->v->name, (long)c->server.pid, url);
    double t0 = clock_ms();
    enum ready_result r = ready_wait(&c->server, url, s->ready_timeout_s, c->stop, err);
    double ready_s = (clock_ms() - t0) / 1000.0;
    man_server_started(&c->man, &c->plan, vi, c->server.pid, r == READY_OK ? ready_s : -1);
    struct err e2;
    err_init(&e2);
    if (man_save(&c->man, c->manifest_path, &e2) != 0) {
        log_error("%s; stopping the run", e2.msg);
        c->fatal = true;
    }
    if (r == READY_OK) {
        prog_note(&c->prog, "sweep: variant '%s': server ready after %.1f s", pv->v->name, ready_s);
        rc = 0;
    } else if (r != READY_INTERRUPTED) {
        print_tail(c, &c->server);
    }
out:
    if (rc != 0)
        server_stop(c);
    free(url);
    free(log);
    return rc;
}

/*
 * Before a point: the server of variant vi is alive and answers its ready
 * path; otherwise (died between points, stopped answering) restart it.
 */
int server_ensure(struct run_ctx *c, size_t vi, struct err *err)
{
    if (!c->server.pid)
        prog_note(&c->prog, "sweep: variant '%s': restarting the server",
                  c->plan.variants[vi].v->name);
    if (c->server.pid && c->server_vi == vi) {
        if (proc_alive(&c->server)) {
            struct err e2;
            err_init(&e2);
            char *url = ready_url(c, &c->plan.variants[vi], &e2);
            enum ready_result r =
                url ? ready_wait(&c->server, url, HEALTH_RECHECK_S, c->stop, &e2) : READY_EXITED;
            free(url);
            if (r == READY_OK)
                return 0;
            if (r == READY_INTERRUPTED)
                return err_set(err, RN_ERR_INTERRUPTED, "interrupted"), -1;
            prog_note(&c->prog, "sweep: server unhealthy before the point (%s); restarting",
                      e2.msg);
        } else {
            char *cause = cause_of_exit(&c->server, "server");
            prog_note(&c->prog, "sweep: %s between points; restarting", cause);
            free(cause);
        }
    }
    server_stop(c);
    return server_start(c, vi, err);
}
