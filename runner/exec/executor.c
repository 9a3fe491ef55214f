/*
 * executor: the local/ssh switch (see executor.h). Local is proc.c and the
 * plan's own URL; ssh is exec/ssh.c. Nothing here knows how either works.
 */
#include "exec/executor.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fileio.h"
#include "http.h"
#include "log.h"
#include "timeutil.h"
#include "xalloc.h"

#include "exec/ports.h"
#include "exec/ssh.h"

#include "client/scrape.h"

int exec_open(struct executor *ex, const struct experiment *exp, proc_stop_flag *stop,
              struct err *err)
{
    memset(ex, 0, sizeof(*ex));
    ex->kind = exp->executor.kind;
    ex->where = "";
    if (ex->kind == EXP_EXEC_SLURM) {
        /* the submitter's own tools; the tasks run sweep itself */
        static const char *const tools[] = {"sbatch", "squeue", "scancel", NULL};
        for (size_t i = 0; tools[i]; i++) {
            char *prog = proc_resolve_program(tools[i], err);
            if (!prog) {
                err_prefix(err, "executor: slurm");
                return -1;
            }
            free(prog);
        }
        return 0;
    }
    if (ex->kind != EXP_EXEC_SSH)
        return 0;
    ex->where = xasprintf(" on host '%s'", exp->executor.host);
    ex->ssh = ssh_open(&exp->executor, stop, err);
    return ex->ssh ? 0 : -1;
}

void exec_close(struct executor *ex)
{
    ssh_close(ex->ssh);
    ex->ssh = NULL;
    if (ex->where && *ex->where)
        free((char *)ex->where);
    ex->where = "";
}

pid_t exec_pid(const struct executor *ex)
{
    return ex->ssh ? ssh_master_pid(ex->ssh) : 0;
}

int exec_preflight(struct executor *ex, struct plan *p, struct err *err)
{
    return ex->ssh ? ssh_preflight(ex->ssh, p, err) : 0;
}

int exec_spawn(struct executor *ex, struct proc *p, const struct strvec *argv,
               const struct strvec *env_add, const char *log_path, const char *remote_dir,
               double grace_s, struct err *err)
{
    if (ex->ssh)
        return ssh_spawn(ex->ssh, p, argv, env_add, log_path, remote_dir, grace_s, err);
    return proc_spawn(p, argv, env_add, log_path, err);
}

int exec_stop(struct executor *ex, struct proc *p, double grace_s, const proc_stop_flag *stop,
              struct proc_stop_info *info)
{
    if (ex->ssh)
        return ssh_stop(ex->ssh, p, grace_s, stop, info);
    return proc_stop(p, grace_s, stop, info);
}

char *exec_base_url(struct executor *ex, const struct plan_variant *pv, struct err *err)
{
    if (!ex->ssh)
        return xstrdup(pv->url);
    long port = ssh_forward(ex->ssh, pv->v->server.host, pv->port, err);
    if (port < 0)
        return NULL;
    return xasprintf("http://127.0.0.1:%ld", port);
}

char *exec_ready_url(struct executor *ex, const struct plan_variant *pv, struct err *err)
{
    char *base = exec_base_url(ex, pv, err);
    if (!base)
        return NULL;
    char *url = xasprintf("%s%s", base, pv->v->server.ready_path);
    free(base);
    return url;
}

bool exec_port_in_use(struct executor *ex, const struct plan_variant *pv, long port)
{
    const struct exp_server *s = &pv->v->server;
    if (!ex->ssh)
        return port_in_use(s->host, port);
    struct err err;
    err_init(&err);
    long local = ssh_forward(ex->ssh, s->host, port, &err);
    if (local < 0)
        return false; /* no forward, no probe: the start will say what is wrong */
    /* through a forward, "nothing listens there" is a closed connection,
     * not a refused one; only an HTTP answer proves a listener */
    char *url = xasprintf("http://127.0.0.1:%ld%s", local, s->ready_path);
    long status = http_get(url, 500, 1500, NULL, NULL, 0);
    free(url);
    return status > 0;
}

long exec_port_free(struct executor *ex, const char *host)
{
    return port_free(ex->ssh ? "127.0.0.1" : host);
}

char *exec_client_metrics_file(struct executor *ex, const struct plan *p,
                               const struct plan_point *pp, const char *log_path)
{
    const struct exp_variant *v = p->variants[pp->variant].v;
    if (v->bench.tool != EXP_TOOL_BUILTIN || v->bench.warmup <= 0 || !v->metrics.server)
        return NULL;
    if (ex->kind == EXP_EXEC_LOCAL)
        return scrape_path(log_path, true);
    if (!ex->ssh || !p->run_dir)
        return NULL;
    char *stem = path_stem(pp->log_name, ".log");
    char *remote = xasprintf("%s/%s/.%s.metrics-before.%ld-%.0f.txt", p->run_dir, v->name, stem,
                             (long)getpid(), clock_ms());
    free(stem);
    return remote;
}

/* Whether the client's log says it saved the metrics after its warmup (the
 * line cmd_bench prints). */
static bool client_saved_metrics(const char *log_path)
{
    struct buf b;
    struct err err;
    buf_init(&b, 16 << 20);
    err_init(&err);
    bool yes = file_read_all(log_path, &b, &err, 1) == 0 && b.data &&
               strstr(b.data, "\n#metrics: server metrics saved after") != NULL;
    buf_release(&b);
    return yes;
}

void exec_point_done(struct executor *ex, const struct plan *p, const struct plan_point *pp,
                     const char *log_path, const char *client_metrics)
{
    const struct exp_variant *v = p->variants[pp->variant].v;
    if (!ex->ssh || v->bench.tool != EXP_TOOL_BUILTIN || !p->run_dir)
        return;
    if (client_metrics) { /* over sweep's own scrape, which stays when this fails */
        struct err err;
        err_init(&err);
        char *before = scrape_path(log_path, true);
        if (ssh_fetch(ex->ssh, client_metrics, before, &err) != 0 && client_saved_metrics(log_path))
            log_warn("%s; the scrape taken before the client started stays (the server_* "
                     "columns include the warmup)",
                     err.msg);
        free(before);
    }
    /* plan.c names the records RUN_DIR/VARIANT/STEM.jsonl after the log */
    char *stem = path_stem(pp->log_name, ".log");
    char *remote = xasprintf("%s/%s/%s.jsonl", p->run_dir, v->name, stem);
    size_t n = strlen(log_path);
    char *local = xasprintf("%.*s.jsonl", (int)(n > 4 ? n - 4 : n), log_path);
    struct err err;
    err_init(&err);
    if (ssh_fetch(ex->ssh, remote, local, &err) != 0)
        log_warn("%s; the per-request records stay on the remote host", err.msg);
    free(local);
    free(remote);
    free(stem);
}
