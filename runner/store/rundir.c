/*
 * rundir: reading a results folder's settings and facts, finding its client
 * logs, and re-extracting a point from one of them; owning the folder (its
 * lock) and moving an old run aside. Results themselves are written by the
 * commands that call it.
 */
#include "store/rundir.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "buf.h"
#include "sweep.h"
#include "config/experiment.h"
#include "fileio.h"
#include "strutil.h"
#include "timeutil.h"
#include "xalloc.h"

/* DESIGN.md defaults for metrics.require and analysis.fit. */
static const char *const default_require[] = {"output_throughput", "median_tpot_ms"};
static const char *const default_plots[] = {"throughput", "tpot", "ttft"};

/* ---- extraction settings ---- */

static void extract_init_default(struct rundir_extract *x)
{
    memset(x, 0, sizeof(*x));
    x->preset = xstrdup("sglang");
    for (size_t i = 0; i < 2; i++)
        strvec_push(&x->require, default_require[i]);
}

static void extract_release(struct rundir_extract *x)
{
    free(x->preset);
    for (size_t i = 0; i < x->n_patterns; i++) {
        free((char *)x->patterns[i].name);
        free((char *)x->patterns[i].regex);
    }
    free(x->patterns);
    strvec_release(&x->require);
    for (size_t i = 0; i < x->n_server_map; i++) {
        free((char *)x->server_map[i].column);
        free((char *)x->server_map[i].expr);
    }
    free(x->server_map);
    memset(x, 0, sizeof(*x));
}

static void extract_copy(struct rundir_extract *dst, const struct rundir_extract *src)
{
    memset(dst, 0, sizeof(*dst));
    dst->preset = src->preset ? xstrdup(src->preset) : NULL;
    dst->patterns = xcalloc(src->n_patterns + 1, sizeof(*dst->patterns));
    for (size_t i = 0; i < src->n_patterns; i++) {
        dst->patterns[i].name = xstrdup(src->patterns[i].name);
        dst->patterns[i].regex = xstrdup(src->patterns[i].regex);
    }
    dst->n_patterns = src->n_patterns;
    strvec_copy(&dst->require, &src->require);
    dst->server_map = xcalloc(src->n_server_map + 1, sizeof(*dst->server_map));
    for (size_t i = 0; i < src->n_server_map; i++)
        dst->server_map[i] = (struct scrape_map){xstrdup(src->server_map[i].column),
                                                 xstrdup(src->server_map[i].expr)};
    dst->n_server_map = src->n_server_map;
}

/* Set or replace the pattern called name. */
static void extract_put(struct rundir_extract *x, const char *name, const char *regex)
{
    for (size_t i = 0; i < x->n_patterns; i++)
        if (strcmp(x->patterns[i].name, name) == 0) {
            free((char *)x->patterns[i].regex);
            x->patterns[i].regex = xstrdup(regex);
            return;
        }
    x->patterns = xrealloc(x->patterns, (x->n_patterns + 1) * sizeof(*x->patterns));
    x->patterns[x->n_patterns].name = xstrdup(name);
    x->patterns[x->n_patterns].regex = xstrdup(regex);
    x->n_patterns++;
}

static struct rundir_variant *find_or_add(struct rundir *rd, const char *name)
{
    for (size_t i = 0; i < rd->n_v; i++)
        if (strcmp(rd->v[i].name, name) == 0)
            return &rd->v[i];
    rd->v = xrealloc(rd->v, (rd->n_v + 1) * sizeof(*rd->v));
    struct rundir_variant *v = &rd->v[rd->n_v++];
    memset(v, 0, sizeof(*v));
    v->name = xstrdup(name);
    extract_copy(&v->ext, &rd->fallback);
    v->output_len = -1;
    return v;
}

/* ---- experiment.yaml ---- */

static void exp_metrics_to_extract(const struct exp_metrics *m, struct rundir_extract *x)
{
    extract_release(x);
    x->preset = m->preset && *m->preset ? xstrdup(m->preset) : NULL;
    for (size_t i = 0; i < m->n_patterns; i++)
        extract_put(x, m->patterns[i].name, m->patterns[i].regex);
    strvec_copy(&x->require, &m->require);
    x->server_map = xcalloc(m->n_server_map + 1, sizeof(*x->server_map));
    for (size_t i = 0; i < m->n_server_map; i++)
        x->server_map[i] =
            (struct scrape_map){xstrdup(m->server_map[i].key), xstrdup(m->server_map[i].value)};
    x->n_server_map = m->n_server_map;
}

static int read_experiment(struct rundir *rd, struct err *err)
{
    char *path = path_join(rd->dir, "experiment.yaml");
    struct experiment exp;
    int rc = 0;
    if (!path_exists(path))
        goto out;
    if (exp_load_file(path, &exp, err) != 0) {
        rc = -1;
        goto out;
    }
    rd->has_experiment = true;
    free(rd->name);
    rd->name = xstrdup(exp.name);
    free(rd->description);
    rd->description = xstrdup(exp.description ? exp.description : "");
    free(rd->fit_x);
    free(rd->fit_y);
    rd->slo = (struct gp_slo){exp.slo_ttft_ms, exp.slo_tpot_ms, exp.slo_e2e_ms};
    rd->fit_x = xstrdup(exp.fit_x ? exp.fit_x : "concurrency");
    rd->fit_y = xstrdup(exp.fit_y ? exp.fit_y : "median_tpot_ms");
    free(rd->group_by);
    rd->group_by = exp.group_by ? xstrdup(exp.group_by) : NULL;
    if (exp.plots.n) {
        strvec_release(&rd->plots);
        strvec_copy(&rd->plots, &exp.plots);
    }
    for (size_t i = 0; i < exp.n_variants; i++) {
        const struct exp_variant *ev = &exp.variants[i];
        struct rundir_variant *v = find_or_add(rd, ev->name);
        exp_metrics_to_extract(&ev->metrics, &v->ext);
        v->output_len = ev->bench.output_len;
        v->request_rate = ev->bench.request_rate;
        if (!v->model && ev->server.model)
            v->model = xstrdup(ev->server.model);
    }
    /* variants found only on disk read like the first declared one */
    if (exp.n_variants) {
        extract_release(&rd->fallback);
        exp_metrics_to_extract(&exp.variants[0].metrics, &rd->fallback);
    }
    exp_release(&exp);
out:
    free(path);
    return rc;
}

/* ---- manifest.json ---- */

static const char *jstr(json_t *o, const char *key)
{
    json_t *v = json_object_get(o, key);
    return json_is_string(v) ? json_string_value(v) : NULL;
}

static void jargv(json_t *a, struct strvec *out)
{
    size_t i;
    json_t *s;
    json_array_foreach(a, i, s) if (json_is_string(s)) strvec_push(out, json_string_value(s));
}

/* The "imported" entry `sweep import` writes: its extraction settings
 * become the run's (unless experiment.yaml says otherwise). */
static void read_imported(struct rundir *rd, json_t *imp)
{
    rd->imported = true;
    if (!rd->command.n)
        jargv(json_object_get(imp, "argv"), &rd->command);
    size_t i;
    json_t *s;
    json_array_foreach(json_object_get(imp, "sources"), i, s)
    {
        const char *from = jstr(s, "log"), *as = jstr(s, "as");
        if (from && as)
            strvec_pushf(&rd->sources, "%s -> %s", from, as);
    }
    json_t *m = json_object_get(imp, "metrics");
    if (rd->has_experiment || !json_is_object(m))
        return;
    struct rundir_extract x;
    memset(&x, 0, sizeof(x));
    const char *preset = jstr(m, "preset");
    x.preset = preset ? xstrdup(preset) : NULL;
    const char *key;
    json_t *val;
    json_object_foreach(json_object_get(m, "patterns"), key, val) if (json_is_string(val))
        extract_put(&x, key, json_string_value(val));
    jargv(json_object_get(m, "require"), &x.require);
    extract_release(&rd->fallback);
    rd->fallback = x;
    for (size_t k = 0; k < rd->n_v; k++) {
        extract_release(&rd->v[k].ext);
        extract_copy(&rd->v[k].ext, &x);
    }
    const char *variant = jstr(imp, "variant");
    if (variant)
        find_or_add(rd, variant);
}

/* Overrides saved by `sweep plot --preset/--pattern`, applied last. */
static void read_replot(struct rundir *rd, json_t *rp)
{
    const char *preset = jstr(rp, "preset");
    json_t *pats = json_object_get(rp, "patterns");
    for (size_t k = 0; k <= rd->n_v; k++) {
        struct rundir_extract *x = k < rd->n_v ? &rd->v[k].ext : &rd->fallback;
        if (preset) {
            free(x->preset);
            x->preset = xstrdup(preset);
        }
        const char *key;
        json_t *val;
        json_object_foreach(pats, key, val) if (json_is_string(val))
            extract_put(x, key, json_string_value(val));
    }
}

static int read_manifest(struct rundir *rd, struct err *err)
{
    char *path = path_join(rd->dir, "manifest.json");
    json_error_t je;
    json_t *root = NULL;
    int rc = 0;
    if (!path_exists(path))
        goto out;
    root = json_load_file(path, 0, &je);
    if (!root || !json_is_object(root)) {
        err_set(err, RN_ERR_USAGE, "%s:%d:%d: %s", path, root ? 1 : je.line, root ? 1 : je.column,
                root ? "not a JSON object" : je.text);
        rc = -1;
        goto out;
    }
    rd->has_manifest = true;
    const char *s;
    if ((s = jstr(root, "sweep_version")))
        rd->sweep_version = xstrdup(s);
    if ((s = jstr(root, "start")))
        rd->start = xstrdup(s);
    if ((s = jstr(root, "end")))
        rd->end = xstrdup(s);
    if (!rd->has_experiment && (s = jstr(root, "experiment"))) {
        free(rd->name);
        rd->name = xstrdup(s);
    }
    json_t *host = json_object_get(root, "host");
    if (json_is_object(host)) {
        const char *name = jstr(host, "name"), *cpu = jstr(host, "cpu"), *os = jstr(host, "os");
        json_t *cpus = json_object_get(host, "cpus");
        struct buf b;
        buf_init(&b, 4096);
        buf_puts(&b, name ? name : "unknown host");
        if (cpu || os || json_is_integer(cpus)) {
            buf_puts(&b, " (");
            if (cpu)
                buf_printf(&b, "%s", cpu);
            if (json_is_integer(cpus))
                buf_printf(&b, "%s%lld CPUs", cpu ? ", " : "", (long long)json_integer_value(cpus));
            if (os)
                buf_printf(&b, "%s%s", cpu || json_is_integer(cpus) ? ", " : "", os);
            size_t i;
            json_t *g;
            json_array_foreach(json_object_get(host, "gpus"), i, g) if (json_is_string(g))
                buf_printf(&b, "; GPU %s", json_string_value(g));
            buf_puts(&b, ")");
        }
        rd->host = buf_detach(&b, NULL);
        buf_release(&b);
    }
    /* the newest session's command line, and whether Ctrl-C ended it */
    json_t *sessions = json_object_get(root, "sessions");
    if (json_is_array(sessions) && json_array_size(sessions)) {
        json_t *last = json_array_get(sessions, json_array_size(sessions) - 1);
        jargv(json_object_get(last, "argv"), &rd->command);
        rd->interrupted = json_is_true(json_object_get(last, "interrupted"));
    }
    size_t i;
    json_t *jv;
    json_array_foreach(json_object_get(root, "variants"), i, jv)
    {
        const char *name = jstr(jv, "name");
        if (!name)
            continue;
        struct rundir_variant *v = find_or_add(rd, name);
        const char *model = jstr(jv, "model");
        if (model) {
            free(v->model);
            v->model = xstrdup(model);
        }
        if (!v->server_argv.n)
            jargv(json_object_get(jv, "server_argv"), &v->server_argv);
    }
    json_t *imp = json_object_get(root, "imported");
    if (json_is_object(imp))
        read_imported(rd, imp);
    json_t *replot = json_object_get(root, "replot");
    if (json_is_object(replot))
        read_replot(rd, replot);
out:
    json_decref(root);
    free(path);
    return rc;
}

int rundir_open(const char *dir, struct rundir *rd, struct err *err)
{
    struct stat st;
    memset(rd, 0, sizeof(*rd));
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
        err_set(err, RN_ERR_ENV, "run folder '%s': %s", dir,
                stat(dir, &st) != 0 ? strerror(errno) : "not a folder");
        return -1;
    }
    rd->dir = xstrdup(dir);
    rd->name = path_dir_name(dir);
    rd->description = xstrdup("");
    rd->fit_x = xstrdup("concurrency");
    rd->fit_y = xstrdup("median_tpot_ms");
    for (size_t i = 0; i < 3; i++)
        strvec_push(&rd->plots, default_plots[i]);
    extract_init_default(&rd->fallback);
    if (read_experiment(rd, err) != 0 || read_manifest(rd, err) != 0) {
        rundir_release(rd);
        return -1;
    }
    return 0;
}

void rundir_release(struct rundir *rd)
{
    for (size_t i = 0; i < rd->n_v; i++) {
        free(rd->v[i].name);
        extract_release(&rd->v[i].ext);
        free(rd->v[i].model);
        strvec_release(&rd->v[i].server_argv);
    }
    free(rd->v);
    extract_release(&rd->fallback);
    free(rd->dir);
    free(rd->name);
    free(rd->description);
    free(rd->fit_x);
    free(rd->fit_y);
    strvec_release(&rd->plots);
    free(rd->group_by);
    free(rd->sweep_version);
    free(rd->host);
    free(rd->start);
    free(rd->end);
    strvec_release(&rd->command);
    strvec_release(&rd->sources);
    memset(rd, 0, sizeof(*rd));
}

const struct rundir_extract *rundir_extract_for(const struct rundir *rd, const char *variant)
{
    for (size_t i = 0; variant && i < rd->n_v; i++)
        if (strcmp(rd->v[i].name, variant) == 0)
            return &rd->v[i].ext;
    return &rd->fallback;
}

int rundir_override(struct rundir *rd, const char *preset, const struct ext_pattern *patterns,
                    size_t n, struct err *err)
{
    ext_set *probe = NULL;
    if (ext_new(preset, patterns, n, &probe, err) != 0) /* check before changing anything */
        return -1;
    ext_free(probe);
    for (size_t k = 0; k <= rd->n_v; k++) {
        struct rundir_extract *x = k < rd->n_v ? &rd->v[k].ext : &rd->fallback;
        if (preset) {
            free(x->preset);
            x->preset = xstrdup(preset);
        }
        for (size_t i = 0; i < n; i++)
            extract_put(x, patterns[i].name, patterns[i].regex);
    }
    return 0;
}

int rundir_save_overrides(const char *dir, const char *preset, const struct ext_pattern *patterns,
                          size_t n, bool reset, int argc, char **argv, struct err *err)
{
    char *path = path_join(dir, "manifest.json");
    json_t *root = path_exists(path) ? json_load_file(path, 0, NULL) : NULL;
    int rc = -1;
    if (!json_is_object(root)) {
        json_decref(root);
        root = json_object();
    }
    json_t *rp = json_object_get(root, "replot");
    if (reset || !json_is_object(rp)) {
        rp = json_object();
        json_object_set_new(root, "replot", rp);
    }
    char stamp[32];
    time_iso8601(stamp, sizeof(stamp));
    json_object_set_new(rp, "at", json_string(stamp));
    json_t *args = json_array();
    json_array_append_new(args, json_string("sweep"));
    json_array_append_new(args, json_string("plot"));
    for (int i = 0; i < argc; i++)
        json_array_append_new(args, json_string(argv[i]));
    json_object_set_new(rp, "argv", args);
    if (preset)
        json_object_set_new(rp, "preset", json_string(preset));
    json_t *pats = json_object_get(rp, "patterns");
    if (!json_is_object(pats)) {
        pats = json_object();
        json_object_set_new(rp, "patterns", pats);
    }
    for (size_t i = 0; i < n; i++)
        json_object_set_new(pats, patterns[i].name, json_string(patterns[i].regex));
    if (reset && !preset && !n)
        json_object_del(root, "replot");
    rc = rundir_write_json(path, root, 0, err);
    json_decref(root);
    free(path);
    return rc;
}

int rundir_write_json(const char *path, const json_t *root, size_t extra_flags, struct err *err)
{
    char *text = json_dumps(root, JSON_INDENT(2) | JSON_PRESERVE_ORDER | extra_flags);
    if (!text)
        return err_set(err, RN_ERR_ENV, "%s: cannot serialise the JSON", path), -1;
    char *with_nl = xasprintf("%s\n", text);
    int rc = file_write_atomic(path, with_nl, strlen(with_nl), err, RN_ERR_ENV);
    free(with_nl);
    free(text);
    return rc;
}

/* ---- logs on disk ---- */

/* Digits at *s into *v (at least one, no overflow); advances *s. */
static bool take_num(const char **s, long *v)
{
    const char *p = *s;
    long n = 0;
    if (*p < '0' || *p > '9')
        return false;
    for (; *p >= '0' && *p <= '9'; p++) {
        if (n > (1L << 40))
            return false;
        n = n * 10 + (*p - '0');
    }
    *s = p;
    *v = n;
    return true;
}

bool rundir_parse_log_name(const char *base, long *c, long *p, long *r)
{
    const char *s = base;
    *r = 1;
    if (*s++ != 'c' || !take_num(&s, c) || strncmp(s, "-n", 2) != 0)
        return false;
    s += 2;
    if (!take_num(&s, p))
        return false;
    if (strncmp(s, "-r", 2) == 0) {
        s += 2;
        if (!take_num(&s, r))
            return false;
    }
    return strcmp(s, ".log") == 0 && *c >= 1 && *p >= 1 && *r >= 1;
}

static long variant_rank(const struct rundir *rd, const char *name)
{
    for (size_t i = 0; i < rd->n_v; i++)
        if (strcmp(rd->v[i].name, name) == 0)
            return (long)i;
    return (long)rd->n_v;
}

static int cmp_logs(const void *a, const void *b, void *ctx)
{
    const struct rundir *rd = ctx;
    const struct rundir_log *x = a, *y = b;
    long rx = variant_rank(rd, x->variant), ry = variant_rank(rd, y->variant);
    if (rx != ry)
        return rx < ry ? -1 : 1;
    int c = strcmp(x->variant, y->variant);
    if (c)
        return c;
    if (x->concurrency != y->concurrency)
        return x->concurrency < y->concurrency ? -1 : 1;
    if (x->prompts != y->prompts)
        return x->prompts < y->prompts ? -1 : 1;
    return (x->repeat > y->repeat) - (x->repeat < y->repeat);
}

int rundir_scan_logs(const struct rundir *rd, struct rundir_log **out, size_t *n, struct err *err)
{
    DIR *top = opendir(rd->dir);
    struct rundir_log *logs = NULL;
    size_t cnt = 0, cap = 0;
    *out = NULL;
    *n = 0;
    if (!top)
        return err_set(err, RN_ERR_ENV, "%s: %s", rd->dir, strerror(errno)), -1;
    struct dirent *de;
    while ((de = readdir(top))) {
        if (de->d_name[0] == '.' || strcmp(de->d_name, "plots") == 0)
            continue;
        char *sub = path_join(rd->dir, de->d_name);
        struct stat st;
        DIR *d = stat(sub, &st) == 0 && S_ISDIR(st.st_mode) ? opendir(sub) : NULL;
        struct dirent *fe;
        while (d && (fe = readdir(d))) {
            long c, p, r;
            if (!rundir_parse_log_name(fe->d_name, &c, &p, &r))
                continue;
            XGROW(logs, cap, cnt + 1);
            logs[cnt++] = (struct rundir_log){xstrdup(de->d_name), c, p, r,
                                              xasprintf("%s/%s", de->d_name, fe->d_name)};
        }
        if (d)
            closedir(d);
        free(sub);
    }
    closedir(top);
    qsort_r(logs, cnt, sizeof(*logs), cmp_logs, (void *)rd);
    *out = logs;
    *n = cnt;
    return 0;
}

void rundir_logs_free(struct rundir_log *logs, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        free(logs[i].variant);
        free(logs[i].rel);
    }
    free(logs);
}

/* ---- re-extraction ---- */

double rundir_rate(const struct rundir *rd, const char *variant)
{
    for (size_t i = 0; variant && i < rd->n_v; i++)
        if (strcmp(rd->v[i].name, variant) == 0)
            return rd->v[i].request_rate;
    return 0;
}

/* ---- owning the folder ---- */

/* Open dir's lock file without following a link: a .sweep.lock that is a
 * symlink (or anything but a regular file) is refused, never written
 * through. *created says whether this call made the file. -1 with err. */
static int open_lock_file(const char *dir, const char *path, bool *created, struct err *err)
{
    *created = false;
    int fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd >= 0)
        *created = true;
    else if (errno == EEXIST)
        fd = open(path, O_RDWR | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    struct stat st;
    if (fd < 0 && errno == ELOOP)
        return err_set(err, RN_ERR_ENV,
                       "run folder '%s': %s is a symbolic link (sweep never writes through a "
                       "link in a run folder); remove it",
                       dir, path),
               -1;
    if (fd < 0)
        return err_set(err, RN_ERR_ENV, "run folder '%s': cannot create the lock file: %s: %s", dir,
                       path, strerror(errno)),
               -1;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return err_set(err, RN_ERR_ENV,
                       "run folder '%s': %s is not a regular file (sweep keeps its lock there); "
                       "remove it",
                       dir, path),
               -1;
    }
    return fd;
}

/* Whether fd is still the file at path: a refused run removes the lock
 * file it created (rundir_unlock_undo), so a lock taken on the old inode
 * after that owns nothing. */
static bool same_file(int fd, const char *path)
{
    struct stat a, b;
    return fstat(fd, &a) == 0 && lstat(path, &b) == 0 && a.st_dev == b.st_dev &&
           a.st_ino == b.st_ino;
}

int rundir_lock_ex(const char *dir, bool *created, struct err *err)
{
    char *path = path_join(dir, RUNDIR_LOCK_NAME);
    bool made = false;
    int fd = -1;
    for (int tries = 0; fd < 0 && tries < 8; tries++) {
        /* CLOEXEC: a server that inherited the fd would keep the folder
         * locked after sweep is gone */
        fd = open_lock_file(dir, path, &made, err);
        if (fd < 0)
            goto out;
        if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
            if (errno == EWOULDBLOCK) {
                /* the holder wrote its pid after locking; it may not have yet */
                char text[32];
                ssize_t n = pread(fd, text, sizeof(text) - 1, 0);
                text[n > 0 ? n : 0] = '\0';
                text[strcspn(text, "\n")] = '\0';
                long pid = 0;
                if (str_to_long(text, &pid) != 0 || pid <= 0)
                    pid = 0;
                char holder[48] = "another sweep process";
                if (pid)
                    snprintf(holder, sizeof(holder), "pid %ld", pid);
                err_set(err, RN_ERR_ENV,
                        "run folder '%s' is in use by %s (another sweep run, plot or import "
                        "writes into it); wait until it ends or use another folder",
                        dir, holder);
            } else {
                err_set(err, RN_ERR_ENV, "run folder '%s': cannot lock %s: %s", dir, path,
                        strerror(errno));
            }
            close(fd);
            fd = -1;
            goto out;
        }
        if (!same_file(fd, path)) { /* removed or replaced meanwhile: take the new one */
            close(fd);
            fd = -1;
        }
    }
    if (fd < 0) {
        err_set(err, RN_ERR_ENV, "run folder '%s': %s keeps being replaced; cannot lock it", dir,
                path);
        goto out;
    }
    char pid[32];
    int len = snprintf(pid, sizeof(pid), "%ld\n", (long)getpid());
    ssize_t w = ftruncate(fd, 0) == 0 ? pwrite(fd, pid, (size_t)len, 0) : -1;
    if (w != len) {
        err_set(err, RN_ERR_ENV, "run folder '%s': cannot write the lock file %s: %s", dir, path,
                w < 0 ? strerror(errno) : "short write");
        if (made)
            unlink(path);
        close(fd);
        fd = -1;
    }
out:
    if (created)
        *created = fd >= 0 && made;
    free(path);
    return fd;
}

int rundir_lock(const char *dir, struct err *err)
{
    return rundir_lock_ex(dir, NULL, err);
}

void rundir_unlock(int fd)
{
    if (fd >= 0)
        close(fd); /* drops the flock; the file stays for the next owner */
}

void rundir_unlock_undo(int fd, const char *dir, bool remove_lock)
{
    if (fd < 0)
        return;
    if (remove_lock) { /* while still held: nobody else can own it meanwhile */
        char *path = path_join(dir, RUNDIR_LOCK_NAME);
        if (same_file(fd, path))
            unlink(path);
        free(path);
    }
    close(fd);
}

/* The entry name in dir is our lock file: a regular file, not a link. */
static bool is_lock_file(const char *dir, const char *name)
{
    if (strcmp(name, RUNDIR_LOCK_NAME) != 0)
        return false;
    char *path = path_join(dir, name);
    struct stat st;
    bool reg = lstat(path, &st) == 0 && S_ISREG(st.st_mode);
    free(path);
    return reg;
}

bool rundir_is_empty(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return errno == ENOENT;
    bool empty = true;
    struct dirent *de;
    while (empty && (de = readdir(d)))
        empty = strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0 ||
                is_lock_file(dir, de->d_name);
    closedir(d);
    return empty;
}

int rundir_mkdirs(const char *dir, struct strvec *made, struct err *err)
{
    char *p = xstrdup(dir);
    int rc = 0;
    for (char *s = p + 1;; s++) {
        if (*s != '/' && *s != '\0')
            continue;
        char saved = *s;
        *s = '\0';
        if (mkdir(p, 0755) == 0) {
            if (made)
                strvec_push(made, p);
        } else if (errno != EEXIST) {
            err_set(err, RN_ERR_ENV, "%s: %s", p, strerror(errno));
            rc = -1;
            break;
        }
        *s = saved;
        if (!saved)
            break;
    }
    free(p);
    return rc;
}

void rundir_unmake(const struct strvec *made)
{
    for (size_t i = made->n; i-- > 0;)
        rmdir(made->v[i]); /* fails, harmlessly, once something else is inside */
}

char *rundir_claim_new(const char *parent, const char *stem, struct strvec *made, struct err *err)
{
    int retries = 0;
    for (int n = 1; n < 1000; n++) {
        char *dir =
            n == 1 ? xasprintf("%s/%s", parent, stem) : xasprintf("%s/%s-%d", parent, stem, n);
        /* mkdir is the claim: of two runs started together, one gets each name */
        if (mkdir(dir, 0755) == 0) {
            if (made)
                strvec_push(made, dir);
            return dir;
        }
        int e = errno;
        free(dir);
        if (e == ENOENT && retries++ < 5) {
            if (rundir_mkdirs(parent, made, err) != 0)
                return NULL;
            n--; /* the parent is there now: the same name again */
            continue;
        }
        if (e != EEXIST)
            return err_set(err, RN_ERR_ENV, "results folder not writable: %s/%s: %s", parent, stem,
                           strerror(e)),
                   NULL;
    }
    return err_set(err, RN_ERR_ENV, "%s: %s-2 ... %s-999 are all taken", parent, stem, stem), NULL;
}

/* "previous-N" with N >= 1: a folder an earlier rundir_move_aside made. */
static bool is_previous(const char *name)
{
    long n;
    return str_starts_with(name, "previous-") && str_to_long(name + 9, &n) == 0 && n >= 1;
}

/* Whether path a is b or lies below it (both canonical). */
static bool is_within(const char *a, const char *b)
{
    size_t n = strlen(b);
    return strncmp(a, b, n) == 0 && (a[n] == '\0' || a[n] == '/' || (n == 1 && b[0] == '/'));
}

/*
 * Whether moving dir/name elsewhere takes path used with it: path (as the
 * run opens it, relative to the working folder) goes through dir/name, or
 * the file it resolves to lies in dir/name. real_dir is dir's realpath.
 */
static bool moves_path(const char *real_dir, const char *dir, const char *name, const char *used)
{
    char *cwd = getcwd(NULL, 0);
    char *abs = used[0] == '/' || !cwd ? xstrdup(used) : xasprintf("%s/%s", cwd, used);
    free(cwd);
    bool hit = false;
    /* each component of the path as written: is it name, inside dir? */
    for (char *slash = strrchr(abs, '/'); !hit && slash && slash > abs; slash = strrchr(abs, '/')) {
        const char *base = slash + 1;
        *slash = '\0';
        if (strcmp(base, name) != 0)
            continue;
        char *parent = realpath(abs, NULL);
        hit = parent && strcmp(parent, real_dir) == 0;
        free(parent);
    }
    free(abs);
    char *entry = path_join(dir, name);
    struct stat st;
    if (!hit && lstat(entry, &st) == 0 && !S_ISLNK(st.st_mode)) {
        /* reached through a link elsewhere that points into dir/name (moving
         * a link itself moves nothing it points to) */
        char *real_entry = realpath(entry, NULL), *real_used = realpath(used, NULL);
        hit = real_entry && real_used && is_within(real_used, real_entry);
        free(real_entry);
        free(real_used);
    }
    free(entry);
    return hit;
}

int rundir_move_aside(const char *dir, const struct strvec *used, char **moved_to, struct err *err)
{
    *moved_to = NULL;
    DIR *d = opendir(dir);
    if (!d)
        return err_set(err, RN_ERR_ENV, "%s: %s", dir, strerror(errno)), -1;
    struct strvec names = STRVEC_INIT;
    struct dirent *de;
    while ((de = readdir(d)))
        if (strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0 &&
            !is_lock_file(dir, de->d_name) && !is_previous(de->d_name))
            strvec_push(&names, de->d_name);
    closedir(d);
    int rc = 0;
    if (!names.n)
        goto out;
    /* nothing moves when one entry is something this run itself reads */
    char *real_dir = realpath(dir, NULL);
    for (size_t i = 0; real_dir && used && i < names.n && rc == 0; i++)
        for (size_t j = 0; j < used->n && rc == 0; j++)
            if (used->v[j] && *used->v[j] && moves_path(real_dir, dir, names.v[i], used->v[j])) {
                err_set(err, RN_ERR_USAGE,
                        "--force would move '%s' into %s/previous-N/, but this run uses '%s'; "
                        "nothing was moved: choose another --out folder",
                        names.v[i], dir, used->v[j]);
                rc = -1;
            }
    free(real_dir);
    if (rc != 0)
        goto out;
    char *to = NULL;
    for (int n = 1; !to; n++) {
        char *cand = xasprintf("%s/previous-%d", dir, n);
        if (mkdir(cand, 0755) == 0) {
            to = cand;
        } else {
            int e = errno;
            free(cand);
            if (e != EEXIST || n >= 100000) {
                rc = -1;
                err_set(err, RN_ERR_ENV, "%s: cannot make a previous-N folder: %s", dir,
                        strerror(e));
                goto out;
            }
        }
    }
    *moved_to = to;
    for (size_t i = 0; i < names.n && rc == 0; i++) {
        char *from = path_join(dir, names.v[i]), *dst = path_join(to, names.v[i]);
        if (rename(from, dst) != 0) {
            err_set(err, RN_ERR_ENV, "cannot move '%s' to '%s': %s", from, dst, strerror(errno));
            rc = -1;
        }
        free(from);
        free(dst);
    }
    if (rc == 0) { /* make the renames durable: dir lost the entries, to gained them */
        char *inside = path_join(to, names.v[0]);
        file_fsync_dir(to);
        file_fsync_dir(inside);
        free(inside);
    }
out:
    strvec_release(&names);
    return rc;
}
