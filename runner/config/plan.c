/*
 * plan: from a loaded experiment to exactly what will run: per variant the
 * model path (checked, fingerprinted), port, URL, server argv and env; per
 * point the client argv, log name and key. Every argv element comes from
 * one template expansion, never from a shell.
 */
#include "config/plan.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fileio.h"
#include "sha256.h"
#include "strutil.h"
#include "sweep.h"
#include "xalloc.h"

#include "config/modelfp.h"
#include "config/schema.h"
#include "config/tmpl.h"

#include "client/dataset.h"
#include "client/workload.h"
#include "store/results.h"

#define KEY_ENGINE   "<fp4serve>"
#define KEY_SELF     "<sweep>"
#define KEY_VARIANT  "<variant>"
#define KEY_POINT    "<point>"
#define MAX_EXPANDED 65536 /* bytes of one expanded template */
#define GGUF_MAGIC   "GGUF"

/* ---- expansion ---- */

/* Values of every variable for one expansion, with storage for numbers. */
struct vals {
    const char *v[TMPL_N_VARS];
    char port[16], conc[24], prompts[24], in[24], out[24], point[64];
    char *url; /* owned */
};

/* "http://HOST:PORT", with an IPv6 literal in brackets. */
static char *make_url(const char *host, const char *port)
{
    if (strchr(host, ':')) /* an IPv6 literal */
        return xasprintf("http://[%s]:%s", host, port);
    return xasprintf("http://%s:%s", host, port);
}

/*
 * Fill x for variant pv (and point pt, or NULL for server templates). In key
 * mode the port, URL and run folder are the placeholders, so keys do not
 * depend on them.
 */
static void vals_fill(struct vals *x, const struct plan *p, const struct plan_variant *pv,
                      const struct plan_point *pt, bool key)
{
    const struct exp_variant *v = pv->v;
    memset(x, 0, sizeof(*x));
    if (key)
        snprintf(x->port, sizeof(x->port), "%s", PLAN_PORT);
    else
        snprintf(x->port, sizeof(x->port), "%ld", pv->port);
    x->url = make_url(v->server.host, x->port);
    x->v[TMPL_MODEL] = pv->model_path;
    x->v[TMPL_PORT] = x->port;
    x->v[TMPL_HOST] = v->server.host;
    x->v[TMPL_URL] = x->url;
    x->v[TMPL_NAME] = p->exp->name;
    x->v[TMPL_VARIANT] = v->name;
    x->v[TMPL_RUN_DIR] = key || !p->run_dir ? PLAN_RUN_DIR : p->run_dir;
    if (pt) {
        snprintf(x->conc, sizeof(x->conc), "%ld", pt->concurrency);
        snprintf(x->prompts, sizeof(x->prompts), "%ld", pt->prompts);
        snprintf(x->in, sizeof(x->in), "%ld", v->bench.input_len);
        snprintf(x->out, sizeof(x->out), "%ld", v->bench.output_len);
        x->v[TMPL_CONCURRENCY] = x->conc;
        x->v[TMPL_PROMPTS] = x->prompts;
        x->v[TMPL_INPUT_LEN] = x->in;
        x->v[TMPL_OUTPUT_LEN] = x->out;
        /* in key mode the log's name is a placeholder too: it changes with
         * bench.repeat ("c1-n2.log" becomes "c1-n2-r1.log"), the point does not */
        if (key)
            snprintf(x->point, sizeof(x->point), "%s", KEY_POINT);
        else
            snprintf(x->point, sizeof(x->point), "%.*s",
                     (int)(strlen(pt->log_name) - strlen(".log")), pt->log_name);
        x->v[TMPL_POINT] = x->point;
    }
}

/* Expand tmpl into a fresh heap string, or NULL with err set. what names
 * the setting in messages. */
static char *expand(const char *tmpl, const struct vals *x, const char *what, struct err *err)
{
    struct buf b;
    buf_init(&b, MAX_EXPANDED);
    if (tmpl_expand(tmpl, x->v, &b, err, RN_ERR_USAGE) != 0) {
        err_prefix(err, "%s", what);
        buf_release(&b);
        return NULL;
    }
    size_t len;
    char *s = b.data ? buf_detach(&b, &len) : xstrdup("");
    buf_release(&b);
    return s;
}

/* Expand tmpl and push it as one argv element. */
static int expand_push(struct strvec *sv, const char *tmpl, const struct vals *x, const char *what,
                       struct err *err)
{
    char *s = expand(tmpl, x, what, err);
    if (!s)
        return -1;
    strvec_push_owned(sv, s);
    return 0;
}

int plan_expand(const char *tmpl, const struct plan_vars *vars, struct buf *out, struct err *err)
{
    char nums[5][24];
    const long n[5] = {vars->port, vars->concurrency, vars->prompts, vars->input_len,
                       vars->output_len};
    const enum tmpl_var which[5] = {TMPL_PORT, TMPL_CONCURRENCY, TMPL_PROMPTS, TMPL_INPUT_LEN,
                                    TMPL_OUTPUT_LEN};
    const char *v[TMPL_N_VARS] = {0};
    v[TMPL_MODEL] = vars->model;
    v[TMPL_HOST] = vars->host;
    v[TMPL_URL] = vars->url;
    v[TMPL_NAME] = vars->name;
    v[TMPL_VARIANT] = vars->variant;
    v[TMPL_RUN_DIR] = vars->run_dir;
    for (int i = 0; i < 5; i++)
        if (n[i] >= 0) {
            snprintf(nums[i], sizeof(nums[i]), "%ld", n[i]);
            v[which[i]] = nums[i];
        }
    return tmpl_expand(tmpl, v, out, err, RN_ERR_USAGE);
}

/* A value that the server would read as an option (CWE-88). */
static int refuse_dash(const char *what, const char *value, struct err *err)
{
    double num;
    if (value[0] != '-' || str_to_double(value, &num) == 0) /* "-1" is a value */
        return 0;
    return err_set(err, RN_ERR_USAGE,
                   "%s expands to '%s', which starts with '-' and would be read as an option", what,
                   value),
           -1;
}

/* Shortest text that reads back as d. */
static void fmt_double(char *out, size_t size, double d)
{
    if (d == (double)(long long)d && d > -1e15 && d < 1e15) {
        snprintf(out, size, "%lld", (long long)d);
        return;
    }
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(out, size, "%.*g", prec, d);
        if (strtod(out, NULL) == d)
            return;
    }
}

/* ---- server and client argv ---- */

/*
 * The server argv and environment of variant pv (env may be NULL). The
 * bundled engine gets model, host and port as options of its own; a
 * command gets exactly what the file says. Flags follow, then args. In key
 * mode the engine path, port, URL and run folder are placeholders.
 */
static int build_server(const struct plan *p, const struct plan_variant *pv, bool key,
                        struct strvec *argv, struct strvec *env, struct err *err)
{
    const struct exp_server *s = &pv->v->server;
    struct vals x;
    int rc = -1;
    vals_fill(&x, p, pv, NULL, key);
    if (s->engine == EXP_ENGINE_BUNDLED) {
        strvec_push(argv, key ? KEY_ENGINE : p->engine);
        strvec_push(argv, "serve");
        strvec_push(argv, "--model");
        strvec_push(argv, pv->model_path);
        strvec_push(argv, "--host");
        strvec_push(argv, s->host);
        strvec_push(argv, "--port");
        strvec_push(argv, x.port);
        /* its drain on SIGTERM ends before our SIGKILL (three quarters of
         * the grace; not in keys: it changes no measurement) */
        bool own = false;
        for (size_t i = 0; i < s->n_flags; i++)
            own = own || strcmp(s->flags[i].key, "drain-timeout") == 0;
        if (!key && !own) {
            strvec_push(argv, "--drain-timeout");
            strvec_pushf(argv, "%ld", (long)(s->stop_grace_s * 0.75));
        }
    } else {
        for (size_t i = 0; i < s->command.n; i++)
            if (expand_push(argv, s->command.v[i], &x, "server.command", err) != 0)
                goto out;
    }
    /* flags in file order: --key value; true is a bare --key, false nothing */
    for (size_t i = 0; i < s->n_flags; i++) {
        const struct exp_kv *f = &s->flags[i];
        if (strcmp(f->value, "false") == 0)
            continue;
        strvec_pushf(argv, "--%s", f->key);
        if (strcmp(f->value, "true") == 0)
            continue;
        char what[128];
        snprintf(what, sizeof(what), "server.flags '%s'", f->key);
        /* checked again after expansion: ${env:X} may bring the dash */
        if (expand_push(argv, f->value, &x, what, err) != 0 ||
            refuse_dash(what, argv->v[argv->n - 1], err) != 0)
            goto out;
    }
    for (size_t i = 0; i < s->args.n; i++)
        if (expand_push(argv, s->args.v[i], &x, "server.args", err) != 0)
            goto out;
    for (size_t i = 0; env && i < s->n_env; i++) {
        char what[128];
        snprintf(what, sizeof(what), "server.env '%s'", s->env[i].key);
        char *val = expand(s->env[i].value, &x, what, err);
        if (!val)
            goto out;
        strvec_pushf(env, "%s=%s", s->env[i].key, val);
        free(val);
    }
    rc = 0;
out:
    free(x.url);
    return rc;
}

/* The argv spelling of bench.dataset.kind (schema.c's choices). */
static const char *const dataset_kinds[] = {"random",        "jsonl",      "sharegpt",
                                            "shared-prefix", "multi-turn", "trace"};

/* The generated workloads' flags, in argv order (bench.dataset.kind 3
 * shared-prefix, 4 multi-turn, 5 trace: experiment.h dataset_kind). An
 * optional flag is left out while its value is not > 0. */
static const struct wl_flag {
    int kind;
    const char *flag;
    size_t off; /* of the long or double in struct exp_bench */
    bool dbl, optional;
} wl_flags[] = {
    {3, "--groups", offsetof(struct exp_bench, wl_groups), false, false},
    {3, "--prefix-len", offsetof(struct exp_bench, wl_prefix_len), false, false},
    {3, "--questions", offsetof(struct exp_bench, wl_questions), false, false},
    {3, "--question-len", offsetof(struct exp_bench, wl_question_len), false, false},
    {4, "--sessions", offsetof(struct exp_bench, wl_sessions), false, false},
    {4, "--turns", offsetof(struct exp_bench, wl_turns), false, false},
    {4, "--turn-len", offsetof(struct exp_bench, wl_turn_len), false, false},
    {4, "--think-time", offsetof(struct exp_bench, wl_think_s), true, true},
    {5, "--time-scale", offsetof(struct exp_bench, wl_time_scale), true, false},
    {5, "--block-tokens", offsetof(struct exp_bench, wl_block_tokens), false, false},
};

/* The generated workload's shape and the cache reset (bench's flags;
 * only those of the kind in use, so other points' keys do not change). */
static void workload_flags(const struct exp_bench *b, struct strvec *argv)
{
    for (size_t i = 0; i < sizeof(wl_flags) / sizeof(wl_flags[0]); i++) {
        const struct wl_flag *f = &wl_flags[i];
        const char *at = (const char *)b + f->off;
        if (f->kind != b->dataset_kind)
            continue;
        if (f->dbl) {
            double v;
            char num[40];
            memcpy(&v, at, sizeof(v));
            if (f->optional && !(v > 0))
                continue;
            fmt_double(num, sizeof(num), v);
            strvec_push(argv, f->flag);
            strvec_push(argv, num);
        } else {
            long v;
            memcpy(&v, at, sizeof(v));
            strvec_push(argv, f->flag);
            strvec_pushf(argv, "%ld", v);
        }
    }
    /* the reset endpoints: vLLM's (which fp4serve serves too) and SGLang's */
    static const char *const reset_paths[] = {NULL, "/reset_prefix_cache", "/reset_prefix_cache",
                                              "/flush_cache"};
    if (b->reset_cache > 0 && b->reset_cache < 4) {
        strvec_push(argv, "--reset-cache");
        strvec_push(argv, reset_paths[b->reset_cache]);
    }
}

/*
 * The client argv of point pt: sweep's own `bench` for tool: builtin (its
 * per-request records go next to the log as .jsonl), else bench.command
 * expanded. In key mode the run-dependent parts are placeholders.
 */
static int build_client(const struct plan *p, const struct plan_point *pt, bool key,
                        struct strvec *argv, struct err *err)
{
    const struct plan_variant *pv = &p->variants[pt->variant];
    const struct exp_bench *b = &pv->v->bench;
    struct vals x;
    int rc = -1;
    vals_fill(&x, p, pv, pt, key);
    if (b->tool == EXP_TOOL_BUILTIN) {
        char num[40];
        strvec_push(argv, key ? KEY_SELF : p->self_exe);
        strvec_push(argv, "bench");
        strvec_push(argv, "--url");
        strvec_push(argv, x.url);
        strvec_push(argv, "-c");
        strvec_push(argv, x.conc);
        strvec_push(argv, "-n");
        strvec_push(argv, x.prompts);
        strvec_push(argv, "--input-len");
        strvec_push(argv, b->input_dist ? b->input_dist : x.in);
        strvec_push(argv, "--output-len");
        strvec_push(argv, b->output_dist ? b->output_dist : x.out);
        strvec_push(argv, "--warmup");
        strvec_pushf(argv, "%ld", b->warmup);
        /* the workload flags appear only when they differ from bench's own
         * defaults, so the keys of points that use none stay what they were */
        if (b->endpoint == 1) {
            strvec_push(argv, "--endpoint");
            strvec_push(argv, "chat");
        }
        if (b->dataset_path) {
            strvec_push(argv, "--dataset");
            strvec_push(argv, b->dataset_path);
        }
        if (b->dataset_path || b->dataset_kind > DS_SHAREGPT) {
            strvec_push(argv, "--dataset-kind");
            strvec_push(argv, dataset_kinds[b->dataset_kind]);
        }
        workload_flags(b, argv);
        /* repeat r draws its own prompts (PLAN_KEY_RECIPE 3) */
        long seed = b->seed + (pt->repeat > 1 ? pt->repeat - 1 : 0);
        if (seed != 42) {
            strvec_push(argv, "--seed");
            strvec_pushf(argv, "%ld", seed);
        }
        double rate = pt->rate > 0 ? pt->rate : b->request_rate;
        if (rate > 0) {
            fmt_double(num, sizeof(num), rate);
            strvec_push(argv, "--request-rate");
            strvec_push(argv, num);
        }
        if (rate > 0 && b->rate_kind == 1) {
            strvec_push(argv, "--rate-kind");
            strvec_push(argv, "constant");
        }
        /* RUN_DIR/VARIANT/c16-n48.jsonl, beside RUN_DIR/VARIANT/c16-n48.log;
         * in key mode the variant's folder is a placeholder too: keys leave
         * the variant's name out (renaming one reruns nothing) */
        strvec_push(argv, "--jsonl");
        strvec_pushf(argv, "%s/%s/%s.jsonl", x.v[TMPL_RUN_DIR], key ? KEY_VARIANT : pv->v->name,
                     x.point);
    } else {
        for (size_t i = 0; i < b->command.n; i++)
            if (expand_push(argv, b->command.v[i], &x, "bench.command", err) != 0)
                goto out;
    }
    rc = 0;
out:
    free(x.url);
    return rc;
}

/* ---- keys ---- */

/* A length-prefixed string ("3:abc"), so concatenations cannot collide. */
static void hash_str(struct sha256 *h, const char *s)
{
    char len[24];
    int n = snprintf(len, sizeof(len), "%zu:", strlen(s));
    sha256_update(h, len, (size_t)n);
    sha256_update(h, s, strlen(s));
}

/* A labelled, counted list of strings: ["a b"] and ["a", "b"] hash apart. */
static void hash_vec(struct sha256 *h, const char *label, const struct strvec *sv)
{
    char n[24];
    hash_str(h, label);
    snprintf(n, sizeof(n), "%zu", sv->n);
    hash_str(h, n);
    for (size_t i = 0; i < sv->n; i++)
        hash_str(h, sv->v[i]);
}

/* A labelled value formatted with printf. */
static void hash_num(struct sha256 *h, const char *label, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void hash_num(struct sha256 *h, const char *label, const char *fmt, ...)
{
    char s[64];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(s, sizeof(s), fmt, ap);
    va_end(ap);
    hash_str(h, label);
    hash_str(h, s);
}

/* The key of point pt: see plan_build in plan.h for what goes in. */
static int point_key(const struct plan *p, struct plan_point *pt, struct err *err)
{
    const struct plan_variant *pv = &p->variants[pt->variant];
    const struct exp_bench *b = &pv->v->bench;
    struct strvec sargv = STRVEC_INIT, senv = STRVEC_INIT, cargv = STRVEC_INIT;
    struct sha256 h;
    uint8_t digest[32];
    char hex[65], rate[40];
    int rc = -1;
    if (build_server(p, pv, true, &sargv, &senv, err) != 0 ||
        build_client(p, pt, true, &cargv, err) != 0)
        goto out;
    /* every field labelled and length-prefixed, so no two different points
     * can serialize to the same bytes; bump v1 if the recipe changes */
    sha256_init(&h);
    hash_str(&h, PLAN_KEY_RECIPE_TAG);
    hash_vec(&h, "server", &sargv);
    hash_vec(&h, "env", &senv);
    hash_num(&h, "model", "%d/%lld/%s", pv->model_fp.exists, pv->model_fp.size,
             pv->model_fp.sha256);
    hash_vec(&h, "client", &cargv);
    fmt_double(rate, sizeof(rate), b->request_rate);
    hash_num(&h, "shape", "in=%ld out=%ld warmup=%ld rate=%s", b->input_len, b->output_len,
             b->warmup, rate);
    fmt_double(rate, sizeof(rate), pt->rate); /* a rate point's own; its log name is not hashed */
    hash_num(&h, "point", "c=%ld n=%ld r=%ld rate=%s", pt->concurrency, pt->prompts, pt->repeat,
             rate);
    if (pv->dataset_sha256[0]) /* the file's contents, not only its name */
        hash_num(&h, "dataset", "%s", pv->dataset_sha256);
    sha256_final(&h, digest);
    sha256_to_hex(digest, hex);
    memcpy(pt->key, hex, 16);
    pt->key[16] = '\0';
    rc = 0;
out:
    strvec_release(&sargv);
    strvec_release(&senv);
    strvec_release(&cargv);
    return rc;
}

/* The first 16 hex chars of the sha256 of a labelled list. */
static void digest_vec(const char *label, const struct strvec *a, const struct strvec *b,
                       char out[17])
{
    struct sha256 h;
    uint8_t digest[32];
    char hex[65];
    sha256_init(&h);
    hash_vec(&h, label, a);
    if (b)
        hash_vec(&h, "env", b);
    sha256_final(&h, digest);
    sha256_to_hex(digest, hex);
    memcpy(out, hex, 16);
    out[16] = '\0';
}

int plan_key_parts(const struct plan *p, size_t vi, struct plan_key_parts *kp, struct err *err)
{
    const struct plan_variant *pv = &p->variants[vi];
    struct strvec sargv = STRVEC_INIT, senv = STRVEC_INIT, cargv = STRVEC_INIT;
    struct plan_point stand_in = {.variant = vi, .concurrency = 1, .prompts = 1, .repeat = 1};
    int rc = -1;
    memset(kp, 0, sizeof(*kp));
    snprintf(stand_in.log_name, sizeof(stand_in.log_name), "c1-n1.log");
    if (build_server(p, pv, true, &sargv, &senv, err) == 0 &&
        build_client(p, &stand_in, true, &cargv, err) == 0) {
        digest_vec("server", &sargv, &senv, kp->server);
        digest_vec("client", &cargv, NULL, kp->client);
        snprintf(kp->model, sizeof(kp->model), "%d/%lld/%s", pv->model_fp.exists, pv->model_fp.size,
                 pv->model_fp.sha256);
        snprintf(kp->dataset, sizeof(kp->dataset), "%s", pv->dataset_sha256);
        rc = 0;
    }
    strvec_release(&sargv);
    strvec_release(&senv);
    strvec_release(&cargv);
    return rc;
}

/* ---- models ---- */

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* A folder's fingerprint: sha256 of its sorted "name<TAB>bytes" listing. */
static int fingerprint_dir(const char *path, struct model_fp *fp, struct err *err)
{
    DIR *d = opendir(path);
    struct strvec lines = STRVEC_INIT;
    struct dirent *de;
    if (!d)
        return err_set(err, RN_ERR_ENV, "model path '%s': cannot be read: %s", path,
                       strerror(errno)),
               -1;
    while ((de = readdir(d)) != NULL) {
        struct stat st;
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
            continue;
        if (fstatat(dirfd(d), de->d_name, &st, 0) != 0)
            st.st_size = -1;
        strvec_pushf(&lines, "%s\t%lld\n", de->d_name, (long long)st.st_size);
    }
    closedir(d);
    int rc = 0;
    if (lines.n == 0) {
        err_set(err, RN_ERR_ENV, "model path '%s': the folder is empty", path);
        rc = -1;
    } else {
        struct sha256 h;
        uint8_t digest[32];
        qsort(lines.v, lines.n, sizeof(*lines.v), cmp_str);
        sha256_init(&h);
        for (size_t i = 0; i < lines.n; i++)
            sha256_update(&h, lines.v[i], strlen(lines.v[i]));
        sha256_final(&h, digest);
        sha256_to_hex(digest, fp->sha256);
    }
    strvec_release(&lines);
    return rc;
}

int plan_check_model(const char *path, struct model_fp *fp, struct err *err)
{
    struct stat st;
    memset(fp, 0, sizeof(*fp));
    if (stat(path, &st) != 0)
        return err_set(err, RN_ERR_ENV, "model path '%s': %s", path,
                       errno == ENOENT ? "does not exist" : strerror(errno)),
               -1;
    fp->exists = 1;
    fp->mtime = (long long)st.st_mtime;
    if (S_ISDIR(st.st_mode))
        return fingerprint_dir(path, fp, err);
    if (!S_ISREG(st.st_mode))
        return err_set(err, RN_ERR_ENV, "model path '%s': not a regular file or a folder", path),
               -1;
    fp->size = (long long)st.st_size;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return err_set(err, RN_ERR_ENV, "model path '%s': cannot be read: %s", path,
                       strerror(errno)),
               -1;
    unsigned char head[8];
    size_t got = 0;
    int rc = -1;
    bool cached;
    while (got < sizeof(head)) {
        ssize_t n = read(fd, head + got, sizeof(head) - got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            err_set(err, RN_ERR_ENV, "model path '%s': cannot be read: %s", path, strerror(errno));
            goto out;
        }
        if (n == 0)
            break;
        got += (size_t)n;
    }
    if (got == 0) {
        err_set(err, RN_ERR_ENV, "model path '%s': the file is empty", path);
        goto out;
    }
    /* GGUF: 4 magic bytes, then the version as a little-endian uint32 */
    if (strlen(path) >= 5 && strcasecmp(path + strlen(path) - 5, ".gguf") == 0) {
        if (got < 8 || memcmp(head, GGUF_MAGIC, 4) != 0) {
            err_set(err, RN_ERR_ENV,
                    "model path '%s': not a GGUF file (it does not start with 'GGUF')", path);
            goto out;
        }
        uint32_t version = (uint32_t)head[4] | (uint32_t)head[5] << 8 | (uint32_t)head[6] << 16 |
                           (uint32_t)head[7] << 24;
        if (version != 2 && version != 3) {
            err_set(err, RN_ERR_ENV, "model path '%s': GGUF version %u is not supported (2 or 3)",
                    path, version);
            goto out;
        }
    }
    /* the whole file (H1): a GGUF's first MiB is mostly metadata, so two
     * quantizations can share it; cached by identity, read once */
    if (fstat(fd, &st) == 0 && modelfp_sha256(path, fd, &st, fp->sha256, &cached, err) == 0)
        rc = 0;
    else if (!err->code)
        err_set(err, RN_ERR_ENV, "model path '%s': cannot be read: %s", path, strerror(errno));
out:
    close(fd);
    return rc;
}

/* ---- engine and ports ---- */

static bool executable(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode) && access(path, X_OK) == 0;
}

char *plan_find_bundled_engine(const char *self_exe)
{
    const char *base = self_exe ? path_base(self_exe) : NULL;
    if (base && base != self_exe) { /* beside sweep: the folder keeps its '/' */
        char *p = xasprintf("%.*sfp4serve", (int)(base - self_exe), self_exe);
        if (executable(p))
            return p;
        free(p);
    }
    if (executable("build/bin/fp4serve"))
        return xstrdup("build/bin/fp4serve");
    const char *path = getenv("PATH");
    while (path && *path) { /* an empty PATH entry means the current folder */
        size_t n = strcspn(path, ":");
        char *p = n ? xasprintf("%.*s/fp4serve", (int)n, path) : xstrdup("./fp4serve");
        if (executable(p))
            return p;
        free(p);
        path += n + (path[n] == ':');
    }
    return NULL;
}

/* A TCP port that is free on 127.0.0.1 right now: bind port 0 and ask. */
static long free_port(struct err *err)
{
    /* The port is free now, not reserved: the runner probes it again before
     * spawning and calls plan_set_port when something took it meanwhile. */
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = 0};
    socklen_t len = sizeof(a);
    long port = -1;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof(a)) != 0 ||
        getsockname(fd, (struct sockaddr *)&a, &len) != 0)
        err_set(err, RN_ERR_ENV, "cannot find a free port on 127.0.0.1: %s", strerror(errno));
    else
        port = ntohs(a.sin_port);
    if (fd >= 0)
        close(fd);
    return port;
}

/* ---- the plan ---- */

/* (Re)build variant vi's URL, server argv and env for its current port. */
static int build_variant(struct plan *p, size_t vi, struct err *err)
{
    struct plan_variant *pv = &p->variants[vi];
    char port[16];
    snprintf(port, sizeof(port), "%ld", pv->port);
    free(pv->url);
    pv->url = make_url(pv->v->server.host, port);
    strvec_release(&pv->server_argv);
    strvec_release(&pv->server_env);
    if (build_server(p, pv, false, &pv->server_argv, &pv->server_env, err) != 0) {
        err_prefix(err, "variant '%s'", pv->v->name);
        return -1;
    }
    return 0;
}

/* (Re)build the client argv of every point of variant vi. */
static int build_clients(struct plan *p, size_t vi, struct err *err)
{
    for (size_t i = 0; i < p->n_points; i++) {
        struct plan_point *pt = &p->points[i];
        if (pt->variant != vi)
            continue;
        strvec_release(&pt->client_argv);
        if (build_client(p, pt, false, &pt->client_argv, err) != 0) {
            err_prefix(err, "variant '%s'", p->variants[vi].v->name);
            return -1;
        }
    }
    return 0;
}

/* Read and check pv's dataset file, if any (a bad entry is named: a usage
 * error before anything starts), and keep its digest for the keys. */
static int plan_dataset(struct plan_variant *pv, struct err *err)
{
    const struct exp_bench *b = &pv->v->bench;
    struct ds_set ds;
    pv->dataset_sha256[0] = '\0';
    if (!b->dataset_path)
        return 0;
    if (b->dataset_kind > DS_SHAREGPT) { /* a trace: every line checked now */
        struct wl w = {0};
        int trc = wl_load_trace(&w, b->dataset_path, err, RN_ERR_USAGE, RN_ERR_USAGE);
        wl_release(&w);
        if (trc != 0) {
            err_prefix(err, "variant '%s': bench.dataset", pv->v->name);
            return -1;
        }
        struct buf text;
        buf_init(&text, DS_MAX_FILE_BYTES);
        int rc = file_read_all(b->dataset_path, &text, err, RN_ERR_USAGE);
        if (rc == 0)
            sha256_hex(text.data ? text.data : "", text.len, pv->dataset_sha256);
        buf_release(&text);
        return rc;
    }
    if (ds_load(b->dataset_path, (enum ds_kind)b->dataset_kind, (uint64_t)b->seed, &ds, err,
                RN_ERR_USAGE, RN_ERR_USAGE) != 0) {
        err_prefix(err, "variant '%s': bench.dataset", pv->v->name);
        return -1;
    }
    memcpy(pv->dataset_sha256, ds.sha256, sizeof(pv->dataset_sha256));
    ds_release(&ds);
    return 0;
}

/* bench.find_max needs the builtin client (its per-request records) and a
 * target in analysis.slo to meet. */
static int plan_find_max(const struct plan *p, const struct plan_variant *pv, struct err *err)
{
    const struct exp_bench *b = &pv->v->bench;
    const struct experiment *e = p->exp;
    if (b->find_start <= 0)
        return 0;
    if (b->tool != EXP_TOOL_BUILTIN)
        return err_set(err, RN_ERR_USAGE,
                       "variant '%s': bench.find_max needs tool: builtin (its per-request "
                       "records are what the probes are judged by)",
                       pv->v->name),
               -1;
    if (!(e->slo_ttft_ms > 0 || e->slo_tpot_ms > 0 || e->slo_e2e_ms > 0))
        return err_set(err, RN_ERR_USAGE,
                       "variant '%s': bench.find_max needs a target in analysis.slo (ttft_ms, "
                       "tpot_ms or e2e_ms) for its probes to meet",
                       pv->v->name),
               -1;
    if (b->find_start > b->find_max_rate)
        return err_set(err, RN_ERR_USAGE,
                       "variant '%s': bench.find_max.start (%g) is above bench.find_max.max (%g)",
                       pv->v->name, b->find_start, b->find_max_rate),
               -1;
    return 0;
}

/* Expand the model path of pv and fingerprint it. */
static int plan_model(struct plan *p, struct plan_variant *pv, struct err *err)
{
    struct plan_variant tmp = *pv;
    struct vals x;
    struct err merr;
    if (!pv->v->server.model) /* engine: command without a model: nothing to check */
        return 0;
    tmp.model_path = NULL; /* the model path cannot refer to itself */
    vals_fill(&x, p, &tmp, NULL, false);
    pv->model_path = expand(pv->v->server.model, &x, "server.model", err);
    free(x.url);
    if (!pv->model_path || refuse_dash("server.model", pv->model_path, err) != 0) {
        err_prefix(err, "variant '%s'", pv->v->name);
        return -1;
    }
    /* on an ssh host the model is checked there, by the executor's
     * preflight; slurm's nodes share this filesystem (slurm.h), and the
     * submitter's keys must be the tasks' (S1): it fingerprints here */
    if (p->exp->executor.kind == EXP_EXEC_SSH)
        return 0;
    /* fp4serve loads one GGUF file; a folder would pass the checks below
     * (it has a fingerprint) and fail only when the server starts */
    struct stat st;
    if (pv->v->server.engine == EXP_ENGINE_BUNDLED && stat(pv->model_path, &st) == 0 &&
        S_ISDIR(st.st_mode))
        return err_set(err, RN_ERR_USAGE,
                       "variant '%s': server.model '%s' is a folder; the bundled engine "
                       "(fp4serve) loads a GGUF file",
                       pv->v->name, pv->model_path),
               -1;
    /* not an error here: `check` warns, `run` refuses before starting anything */
    err_init(&merr);
    if (plan_check_model(pv->model_path, &pv->model_fp, &merr) != 0)
        pv->model_problem = xstrdup(merr.msg);
    return 0;
}

/* Is the variant called name kept by --only (no --only keeps all)? */
static bool selected(const struct plan_opts *opts, const char *name)
{
    return !opts->only || opts->only->n == 0 || strvec_find(opts->only, name) >= 0;
}

/* Every --only name must be a variant. */
static int check_only(const struct experiment *exp, const struct plan_opts *opts, struct err *err)
{
    const char **names = xcalloc(exp->n_variants + 1, sizeof(*names));
    int rc = 0;
    for (size_t i = 0; i < exp->n_variants; i++)
        names[i] = exp->variants[i].name;
    for (size_t i = 0; opts->only && i < opts->only->n && rc == 0; i++) {
        const char *want = opts->only->v[i];
        if (exp_find_variant(exp, want))
            continue;
        const char *hint = str_suggest(want, names);
        struct buf all;
        buf_init(&all, 4096);
        for (size_t j = 0; j < exp->n_variants; j++)
            buf_printf(&all, "%s%s", j ? ", " : "", names[j]);
        if (hint)
            err_set(err, RN_ERR_USAGE, "--only: no variant '%s' (did you mean '%s'?)", want, hint);
        else
            err_set(err, RN_ERR_USAGE, "--only: no variant '%s' (variants: %s)", want,
                    all.data ? all.data : "");
        buf_release(&all);
        rc = -1;
    }
    free(names);
    return rc;
}

char *plan_remote_run_dir(const struct experiment *exp, const char *run_dir)
{
    char *base = path_dir_name(run_dir);
    char *dir = xasprintf("sweep-runs/%s/%s", exp->name, base);
    free(base);
    return dir;
}

int plan_build(const struct experiment *exp, const struct plan_opts *opts, struct plan *p,
               struct err *err)
{
    memset(p, 0, sizeof(*p));
    p->exp = exp;
    p->run_dir = opts->run_dir ? xstrdup(opts->run_dir) : NULL;
    p->self_exe = xstrdup(opts->self_exe ? opts->self_exe : "sweep");
    const char *engine = opts->bundled_engine;
    if (exp->executor.kind == EXP_EXEC_SSH) {
        /* everything runs on the remote host: its programs, its run folder */
        free(p->self_exe);
        p->self_exe = xstrdup(exp->executor.sweep);
        engine = exp->executor.engine;
        if (p->run_dir) {
            char *remote = plan_remote_run_dir(exp, p->run_dir);
            free(p->run_dir);
            p->run_dir = remote;
        }
    }
    if (check_only(exp, opts, err) != 0)
        return -1;

    size_t n_points = 0;
    bool need_engine = false;
    p->variants = xcalloc(exp->n_variants, sizeof(*p->variants));
    for (size_t i = 0; i < exp->n_variants; i++) {
        const struct exp_variant *v = &exp->variants[i];
        if (!selected(opts, v->name))
            continue;
        p->variants[p->n_variants++].v = v;
        n_points += v->bench.n_grid * (size_t)v->bench.repeat;
        need_engine = need_engine || v->server.engine == EXP_ENGINE_BUNDLED;
    }
    /* the engine is looked up once, and only when a variant needs it */
    if (need_engine) {
        p->engine = engine ? xstrdup(engine) : plan_find_bundled_engine(p->self_exe);
        if (!p->engine)
            return err_set(err, RN_ERR_ENV,
                           "the bundled engine 'fp4serve' was not found (looked next to '%s', in "
                           "build/bin and on PATH); build it with 'make'",
                           p->self_exe),
                   -1;
    }

    /* per variant: port, model, server argv; then its points in grid order,
     * each repeat a point of its own with its own key and log name */
    p->points = xcalloc(n_points ? n_points : 1, sizeof(*p->points));
    for (size_t vi = 0; vi < p->n_variants; vi++) {
        struct plan_variant *pv = &p->variants[vi];
        const struct exp_bench *b = &pv->v->bench;
        pv->port = pv->v->server.port ? pv->v->server.port : free_port(err);
        /* port first: the model path and argv may use ${port} and ${url} */
        if (pv->port < 0 || plan_model(p, pv, err) != 0 || plan_dataset(pv, err) != 0 ||
            plan_find_max(p, pv, err) != 0 || build_variant(p, vi, err) != 0)
            return -1;
        for (size_t g = 0; g < b->n_grid; g++)
            for (long r = 1; r <= b->repeat; r++) {
                struct plan_point *pt = &p->points[p->n_points++];
                pt->variant = vi;
                pt->concurrency = b->grid[g].concurrency;
                pt->prompts = b->grid[g].prompts;
                pt->repeat = r;
                pt->rate = b->grid[g].rate;
                char what[32], num[24]; /* "c16" or "rate2.5" */
                if (pt->rate > 0) {
                    fmt_double(num, sizeof(num), pt->rate);
                    snprintf(what, sizeof(what), "rate%s", num);
                } else
                    snprintf(what, sizeof(what), "c%ld", pt->concurrency);
                if (b->repeat > 1)
                    snprintf(pt->log_name, sizeof(pt->log_name), "%s-n%d-r%d.log", what,
                             (int)pt->prompts, (int)r); /* <= 1e7 and <= 100: ints */
                else
                    snprintf(pt->log_name, sizeof(pt->log_name), "%s-n%d.log", what,
                             (int)pt->prompts);
                if (point_key(p, pt, err) != 0) {
                    err_prefix(err, "variant '%s'", pv->v->name);
                    return -1;
                }
            }
        if (build_clients(p, vi, err) != 0)
            return -1;
    }
    return 0;
}

int plan_set_model_fp(struct plan *p, size_t vi, const struct model_fp *fp, struct err *err)
{
    if (vi >= p->n_variants)
        return err_set(err, RN_ERR_USAGE, "plan_set_model_fp: bad variant %zu", vi), -1;
    p->variants[vi].model_fp = *fp;
    for (size_t pi = 0; pi < p->n_points; pi++)
        if (p->points[pi].variant == vi && point_key(p, &p->points[pi], err) != 0)
            return -1;
    return 0;
}

int plan_set_port(struct plan *p, size_t vi, long port, struct err *err)
{
    if (vi >= p->n_variants || port < 1 || port > 65535)
        return err_set(err, RN_ERR_USAGE, "plan_set_port: bad variant %zu or port %ld", vi, port),
               -1;
    p->variants[vi].port = port;
    if (build_variant(p, vi, err) != 0 || build_clients(p, vi, err) != 0)
        return -1;
    return 0;
}

int plan_add_probe(struct plan *p, size_t vi, double rate, size_t *pi, struct err *err)
{
    const struct exp_bench *b = &p->variants[vi].v->bench;
    char num[24];
    double n = ceil(rate * b->find_duration_s);
    long prompts = n < 16 ? 16 : n > SCHEMA_MAX_PROMPTS ? SCHEMA_MAX_PROMPTS : (long)n;
    p->points = xrealloc(p->points, (p->n_points + 1) * sizeof(*p->points));
    struct plan_point *pt = &p->points[p->n_points];
    memset(pt, 0, sizeof(*pt));
    pt->variant = vi;
    pt->prompts = prompts;
    pt->concurrency = prompts < SCHEMA_RATE_CAP ? prompts : SCHEMA_RATE_CAP;
    pt->repeat = 1;
    pt->rate = rate;
    fmt_double(num, sizeof(num), rate);
    snprintf(pt->log_name, sizeof(pt->log_name), "rate%s-n%d.log", num, (int)prompts);
    if (point_key(p, pt, err) != 0 || build_client(p, pt, false, &pt->client_argv, err) != 0) {
        strvec_release(&pt->client_argv);
        return -1;
    }
    *pi = p->n_points++;
    return 0;
}

void plan_release(struct plan *p)
{
    if (!p)
        return;
    for (size_t i = 0; i < p->n_variants; i++) {
        struct plan_variant *pv = &p->variants[i];
        free(pv->model_path);
        free(pv->model_problem);
        free(pv->url);
        strvec_release(&pv->server_argv);
        strvec_release(&pv->server_env);
    }
    for (size_t i = 0; i < p->n_points; i++)
        strvec_release(&p->points[i].client_argv);
    free(p->variants);
    free(p->points);
    free(p->run_dir);
    free(p->self_exe);
    free(p->engine);
    memset(p, 0, sizeof(*p));
}

/* ---- printing ---- */

/* One string, shell-quoted like an argv element. */
static void print_one_quoted(FILE *f, const char *s)
{
    struct strvec one = STRVEC_INIT;
    strvec_push(&one, s);
    strvec_print_quoted(f, &one);
    strvec_release(&one);
}

void plan_print(FILE *f, const struct plan *p)
{
    const struct experiment *exp = p->exp;
    char grace[40], ready[40];
    /* one block per variant, then one line per point; argv shell-quoted so a
     * reader can paste them (nothing here is ever run through a shell) */
    fprintf(f, "experiment '%s' from %s\n", exp->name, exp->path);
    fprintf(f, "run folder: %s\n", p->run_dir ? p->run_dir : PLAN_RUN_DIR " (made by sweep run)");
    if (exp->executor.kind == EXP_EXEC_SSH)
        fprintf(f,
                "executor:   ssh to %s port %ld, in %s (the run folder above is there; logs "
                "come back to the local one)\n",
                exp->executor.host, exp->executor.port, exp->executor.workdir);
    else if (exp->executor.kind == EXP_EXEC_SLURM)
        fprintf(f,
                "executor:   slurm, one job array task per variant with points to run "
                "(partition %s; the run folder must be shared with the nodes)\n",
                exp->executor.partition ? exp->executor.partition : "default");
    for (size_t vi = 0; vi < p->n_variants; vi++) {
        const struct plan_variant *pv = &p->variants[vi];
        const struct exp_server *s = &pv->v->server;
        fprintf(f, "\nvariant '%s'\n", pv->v->name);
        if (!pv->model_path)
            fprintf(f, "  model:  (none: engine: command)\n");
        else if (exp->executor.kind == EXP_EXEC_SSH)
            fprintf(f, "  model:  %s  (on %s: checked there before anything starts)\n",
                    pv->model_path, exp->executor.host);
        else if (pv->model_problem)
            fprintf(f, "  model:  %s  (warning: %s)\n", pv->model_path, pv->model_problem);
        else if (pv->model_fp.size)
            fprintf(f, "  model:  %s  (ok: %lld bytes, sha256 %.16s)\n", pv->model_path,
                    pv->model_fp.size, pv->model_fp.sha256);
        else
            fprintf(f, "  model:  %s  (ok: folder, listing sha256 %.16s)\n", pv->model_path,
                    pv->model_fp.sha256);
        fprintf(f, "  server: ");
        strvec_print_quoted(f, &pv->server_argv);
        fputc('\n', f);
        for (size_t i = 0; i < pv->server_env.n; i++) {
            const char *kv = pv->server_env.v[i];
            const char *eq = strchr(kv, '=');
            char *name = xstrndup(kv, (size_t)(eq - kv));
            fprintf(f, "  env:    ");
            /* tokens stay out of terminals and CI logs (the manifest's rule) */
            if (plan_env_is_secret(name, strlen(name))) {
                fprintf(f, "%s=<hidden>", name);
            } else {
                print_one_quoted(f, kv);
            }
            fputc('\n', f);
            free(name);
        }
        fmt_double(ready, sizeof(ready), s->ready_timeout_s);
        fmt_double(grace, sizeof(grace), s->stop_grace_s);
        fprintf(f,
                "  url:    %s  (%s; ready: GET %s within %s s; stop: SIGTERM, then SIGKILL after "
                "%s s)\n",
                pv->url, s->port ? "fixed port" : "port: auto, free now", s->ready_path, ready,
                grace);
        size_t n = 0;
        for (size_t i = 0; i < p->n_points; i++) {
            const struct plan_point *pt = &p->points[i];
            if (pt->variant != vi)
                continue;
            fprintf(f, "  point %-4zu %-20s key %s  ", ++n, pt->log_name, pt->key);
            strvec_print_quoted(f, &pt->client_argv);
            fputc('\n', f);
            if (pt->prompts < pt->concurrency && pv->v->bench.request_rate <= 0)
                fprintf(f,
                        "             (warning: %ld prompts for concurrency %ld: at most %ld "
                        "requests run at once)\n",
                        pt->prompts, pt->concurrency, pt->prompts);
        }
    }
    fprintf(f, "\n%zu point%s in %zu variant%s\n", p->n_points, p->n_points == 1 ? "" : "s",
            p->n_variants, p->n_variants == 1 ? "" : "s");
}

bool plan_env_is_secret(const char *name, size_t len)
{
    static const char *const words[] = {"TOKEN",  "KEY",        "SECRET", "PASSWORD",
                                        "PASSWD", "CREDENTIAL", "AUTH"};
    char up[256];
    if (len >= sizeof(up))
        len = sizeof(up) - 1;
    for (size_t i = 0; i < len; i++)
        up[i] = (char)toupper((unsigned char)name[i]);
    up[len] = '\0';
    for (size_t i = 0; i < sizeof(words) / sizeof(words[0]); i++)
        if (strstr(up, words[i]))
            return true;
    return false;
}

bool plan_point_done(const struct plan *p, const struct res_table *t, size_t pi)
{
    const struct plan_point *pp = &p->points[pi];
    return res_table_find_ok(t, p->variants[pp->variant].v->name, pp->key) != NULL;
}
