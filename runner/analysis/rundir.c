/*
 * rundir: reading a results folder's settings and facts, finding its client
 * logs, and re-extracting a point from one of them. Owning the folder (its
 * lock), JSON writes and moving an old run aside are store/runfolder.c.
 * Results themselves are written by the commands that call it.
 */
#include "analysis/rundir.h"

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
#include "fileio.h"
#include "strutil.h"
#include "sweep.h"
#include "timeutil.h"
#include "xalloc.h"

#include "config/experiment.h"
#include "store/runfolder.h"

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
        const char *energy = jstr(jv, "energy");
        if (energy) {
            free(v->energy);
            v->energy = xstrdup(energy);
        }
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
        free(rd->v[i].energy);
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
