/*
 * manifest: builds manifest.json with jansson. The facts about the machine
 * are gathered once (uname, /proc/cpuinfo, nvidia-smi); the per-session
 * entry grows as servers start and is closed by man_finish.
 */
#include "exec/manifest.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "buf.h"
#include "fileio.h"
#include "sweep.h"
#include "timeutil.h"
#include "version.h"
#include "xalloc.h"

#include "exec/gpu.h"

#include "store/runfolder.h"

extern char **environ;

/* {"NAME": "value", ...} from "NAME=value" strings, secrets left out (by
 * name: values are never inspected, so a secret under an innocent name
 * does get through; the user chose that name). */
static json_t *env_object(char *const *entries, size_t n)
{
    json_t *o = json_object();
    for (size_t i = 0; i < n && entries[i]; i++) {
        const char *eq = strchr(entries[i], '=');
        if (!eq || plan_env_is_secret(entries[i], (size_t)(eq - entries[i])))
            continue;
        char *name = xstrndup(entries[i], (size_t)(eq - entries[i]));
        json_object_set_new(o, name, json_string(eq + 1));
        free(name);
    }
    return o;
}

/* ["argv0", "argv1", ...], each element exactly as passed to execve. */
static json_t *argv_array(const struct strvec *sv)
{
    json_t *a = json_array();
    for (size_t i = 0; i < sv->n; i++)
        json_array_append_new(a, json_string(sv->v[i]));
    return a;
}

/* "model name : Intel(R) ..." from /proc/cpuinfo, or NULL. */
static char *cpu_model(void)
{
    struct buf b;
    struct err e;
    buf_init(&b, 4 << 20);
    err_init(&e);
    char *out = NULL;
    if (file_read_all("/proc/cpuinfo", &b, &e, RN_ERR_ENV) == 0 && b.data) {
        const char *keys[] = {"model name", "Model", "cpu model", "Hardware"};
        for (size_t k = 0; k < 4 && !out; k++) {
            for (char *line = b.data; line && *line && !out;) {
                char *nl = strchr(line, '\n');
                if (strncmp(line, keys[k], strlen(keys[k])) == 0) {
                    char *colon = strchr(line, ':');
                    if (colon && (!nl || colon < nl)) {
                        colon++;
                        while (*colon == ' ' || *colon == '\t')
                            colon++;
                        out = xstrndup(colon, nl ? (size_t)(nl - colon) : strlen(colon));
                    }
                }
                line = nl ? nl + 1 : NULL;
            }
        }
    }
    buf_release(&b);
    return out;
}

/* One string per GPU from nvidia-smi, or an empty array without it. */
static json_t *gpu_list(void)
{
    json_t *a = json_array();
    struct strvec lines;
    strvec_init(&lines);
    gpu_describe(&lines);
    for (size_t i = 0; i < lines.n; i++)
        json_array_append_new(a, json_string(lines.v[i]));
    strvec_release(&lines);
    return a;
}

/* {"name", "os", "cpu", "cpus", "memory_bytes", "gpus"}: the machine the
 * numbers were measured on; a field that cannot be read is left out. */
static json_t *host_object(void)
{
    json_t *h = json_object();
    char name[256] = "";
    if (gethostname(name, sizeof(name) - 1) == 0)
        json_object_set_new(h, "name", json_string(name));
    struct utsname u;
    if (uname(&u) == 0) {
        char *os = xasprintf("%s %s %s", u.sysname, u.release, u.machine);
        json_object_set_new(h, "os", json_string(os));
        free(os);
    }
    char *cpu = cpu_model();
    if (cpu)
        json_object_set_new(h, "cpu", json_string(cpu));
    free(cpu);
    json_object_set_new(h, "cpus", json_integer(sysconf(_SC_NPROCESSORS_ONLN)));
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    if (pages > 0 && page > 0)
        json_object_set_new(h, "memory_bytes", json_integer((json_int_t)pages * page));
    json_object_set_new(h, "gpus", gpu_list());
    return h;
}

/* Size, mtime and the whole file's sha256 (cached: config/modelfp.h). */
static json_t *fingerprint(const struct model_fp *fp)
{
    json_t *o = json_object();
    json_object_set_new(o, "exists", json_boolean(fp->exists));
    if (fp->exists) {
        json_object_set_new(o, "size", json_integer(fp->size));
        json_object_set_new(o, "mtime", json_integer(fp->mtime));
        json_object_set_new(o, "sha256", json_string(fp->sha256));
    }
    return o;
}

/* A variant as planned; server_starts fills in as servers start. */
static json_t *variant_object(const struct plan *p, size_t vi)
{
    const struct plan_variant *pv = &p->variants[vi];
    json_t *o = json_object();
    json_object_set_new(o, "name", json_string(pv->v->name));
    if (pv->model_path) {
        json_object_set_new(o, "model", json_string(pv->model_path));
        json_object_set_new(o, "model_fingerprint", fingerprint(&pv->model_fp));
    }
    json_object_set_new(o, "server_argv", argv_array(&pv->server_argv));
    json_object_set_new(o, "server_env", env_object(pv->server_env.v, pv->server_env.n));
    json_object_set_new(o, "url", json_string(pv->url));
    json_object_set_new(o, "ready_path", json_string(pv->v->server.ready_path));
    json_object_set_new(o, "server_starts", json_array());
    /* what its keys are made of, for --resume to name what changed */
    struct plan_key_parts kp;
    struct err err;
    err_init(&err);
    if (plan_key_parts(p, vi, &kp, &err) == 0) {
        json_t *k = json_object();
        json_object_set_new(k, "server", json_string(kp.server));
        json_object_set_new(k, "client", json_string(kp.client));
        json_object_set_new(k, "model", json_string(kp.model));
        json_object_set_new(k, "dataset", json_string(kp.dataset));
        json_object_set_new(o, "key_parts", k);
    }
    return o;
}

/* Where the servers and clients ran: {"kind": "local"}, or for ssh the
 * host, port, work folder and the run folder there. */
static json_t *executor_object(const struct plan *p)
{
    const struct exp_executor *e = &p->exp->executor;
    json_t *o = json_object();
    json_object_set_new(o, "kind",
                        json_string(e->kind == EXP_EXEC_SSH     ? "ssh"
                                    : e->kind == EXP_EXEC_SLURM ? "slurm"
                                                                : "local"));
    if (e->kind == EXP_EXEC_SSH) {
        json_object_set_new(o, "host", json_string(e->host));
        json_object_set_new(o, "port", json_integer(e->port));
        json_object_set_new(o, "workdir", json_string(e->workdir));
        if (p->run_dir)
            json_object_set_new(o, "run_dir", json_string(p->run_dir));
    }
    return o;
}

void man_init(struct manifest *m, const struct plan *p, int argc, char **argv,
              const char *previous_path)
{
    char stamp[32];
    time_iso8601(stamp, sizeof(stamp));
    json_t *root = json_object();
    json_object_set_new(root, "sweep_version", json_string(BUILD_VERSION));
    json_object_set_new(root, "experiment", json_string(p->exp->name));
    json_object_set_new(root, "experiment_file", json_string(p->exp->path));
    /* how the point keys in points.csv were made (plan.h) */
    json_object_set_new(root, "key_recipe", json_integer(PLAN_KEY_RECIPE));
    json_object_set_new(root, "host", host_object());

    /* A resumed run adds a session; the earlier ones stay as they were. */
    json_t *sessions = json_array();
    json_t *prev = previous_path ? json_load_file(previous_path, 0, NULL) : NULL;
    json_t *old = prev ? json_object_get(prev, "sessions") : NULL;
    size_t i;
    json_t *s;
    json_array_foreach(old, i, s) json_array_append(sessions, s);

    json_t *session = json_object();
    json_t *args = json_array();
    for (int k = 0; k < argc; k++)
        json_array_append_new(args, json_string(argv[k]));
    json_object_set_new(session, "argv", args);
    json_object_set_new(session, "start", json_string(stamp));
    json_object_set_new(session, "end", json_null());
    json_object_set_new(session, "cwd", json_null());
    char *cwd = getcwd(NULL, 0); /* heap, from libc */
    if (cwd)
        json_object_set_new(session, "cwd", json_string(cwd));
    free(cwd);
    /* the environment the servers and clients inherit */
    size_t n_env = 0;
    while (environ && environ[n_env])
        n_env++;
    json_object_set_new(session, "environment", env_object(environ, n_env));
    json_t *variants = json_array();
    for (size_t v = 0; v < p->n_variants; v++)
        json_array_append_new(variants, variant_object(p, v));
    json_object_set_new(session, "variants", variants);
    json_object_set_new(session, "executor", executor_object(p));
    json_array_append_new(sessions, session);
    json_object_set_new(root, "sessions", sessions);

    /* The newest session's facts also sit at the top level for quick use. */
    json_object_set(root, "start", json_object_get(session, "start"));
    json_object_set_new(root, "end", json_null());
    json_object_set(root, "variants", variants);
    json_object_set(root, "executor", json_object_get(session, "executor"));
    /* Keep what other commands recorded (sweep plot's "replot", sweep
     * import's "imported"): every earlier top-level key not set above. */
    const char *key;
    json_t *val;
    json_object_foreach(prev, key, val) if (!json_object_get(root, key))
        json_object_set(root, key, val);
    json_decref(prev);
    m->root = root;
    m->session = session;
}

void man_release(struct manifest *m)
{
    json_decref(m->root);
    m->root = NULL;
    m->session = NULL;
}

void man_server_started(struct manifest *m, const struct plan *p, size_t vi, long pid,
                        double ready_s)
{
    json_t *v = json_array_get(json_object_get(m->session, "variants"), vi);
    json_t *starts = json_object_get(v, "server_starts");
    if (!starts)
        return;
    char stamp[32];
    time_iso8601(stamp, sizeof(stamp));
    json_t *o = json_object();
    json_object_set_new(o, "pid", json_integer(pid));
    json_object_set_new(o, "at", json_string(stamp));
    json_object_set_new(o, "argv", argv_array(&p->variants[vi].server_argv));
    json_object_set_new(o, "url", json_string(p->variants[vi].url));
    json_object_set_new(o, "ready_s", ready_s >= 0 ? json_real(ready_s) : json_null());
    json_array_append_new(starts, o);
}

void man_energy(struct manifest *m, size_t vi, const char *what)
{
    json_t *v = json_array_get(json_object_get(m->session, "variants"), vi);
    if (json_is_object(v))
        json_object_set_new(v, "energy", json_string(what));
}

void man_slurm_job(struct manifest *m, const char *job, const char *const *variants, size_t n)
{
    json_t *e = json_object_get(m->session, "executor");
    if (!e)
        return;
    json_object_set_new(e, "job", json_string(job));
    json_t *tasks = json_object();
    for (size_t i = 0; i < n; i++) {
        char id[96];
        snprintf(id, sizeof(id), "%s_%zu", job, i);
        json_object_set_new(tasks, variants[i], json_string(id));
    }
    json_object_set_new(e, "tasks", tasks);
}

void man_finish(struct manifest *m, int exit_status, size_t n_ok, size_t n_failed, bool interrupted)
{
    char stamp[32];
    time_iso8601(stamp, sizeof(stamp));
    json_object_set_new(m->session, "end", json_string(stamp));
    json_object_set_new(m->session, "exit_status", json_integer(exit_status));
    json_object_set_new(m->session, "interrupted", json_boolean(interrupted));
    json_object_set_new(m->session, "points_ok", json_integer((json_int_t)n_ok));
    json_object_set_new(m->session, "points_failed", json_integer((json_int_t)n_failed));
    json_object_set_new(m->root, "end", json_string(stamp));
}

/* Indented, in insertion order, with a final newline: easy to diff. */
int man_save(const struct manifest *m, const char *path, struct err *err)
{
    return rundir_write_json(path, m->root, 0, err);
}
