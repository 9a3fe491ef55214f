/*
 * cmd_import: `sweep import LOG... --out RUN_DIR` makes a run folder from
 * benchmark logs produced outside sweep (shell sweeps' sweep_<TAG>.log,
 * measure_<TAG>.log ...). Each log's concurrency and prompt count come from
 * its own lines when it has them, else from the tag in its name. The logs
 * are copied into the run layout (<variant>/c<C>-n<P>[-r<R>].log), the
 * extraction settings go into manifest.json's "imported" entry so that
 * `sweep plot` reads the logs the same way later, then points.csv, the fit,
 * the charts, REPORT.md and REPORT.html are written as for any run.
 */
#include <dirent.h>
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "buf.h"
#include "fileio.h"
#include "log.h"
#include "opts.h"
#include "strutil.h"
#include "sweep.h"
#include "timeutil.h"
#include "version.h"
#include "xalloc.h"

#include "analysis/judge.h"
#include "analysis/report.h"
#include "analysis/rundir.h"
#include "client/extract.h"
#include "store/results.h"
#include "store/runfolder.h"

static const char synopsis[] =
    "LOG... --out RUN_DIR [--preset NAME] [--pattern NAME=REGEX]... [--require NAME]...\n"
    "       [--tag-regex REGEX] [--variant NAME] [--no-preview]";
static const char summary[] =
    "Make a run folder from benchmark logs made outside sweep. Concurrency and prompts come\n"
    "from each log's own lines ('Max request concurrency:', 'Successful requests:' + 'Failed\n"
    "requests:'), else from the tag in the file name: c16-n48, 16_48, 16:48, 16x48 (or your\n"
    "--tag-regex with groups (?<c>...) and (?<p>...)). The logs are copied, then points.csv,\n"
    "fit.json, plots/, REPORT.md and REPORT.html are written; 'sweep plot' and 'sweep\n"
    "compare' then work on the folder like on any run. A folder given as LOG stands for the\n"
    "*.log files in it.\n"
    "A log without a required metric, or whose requests failed (none succeeded, more than\n"
    "5%, or not all accounted for), becomes a failed point. A log that cannot be read, or\n"
    "whose concurrency or prompts cannot be told, is named and left out; the others are\n"
    "imported (exit status 1, or 3 when a log could not be read; nothing is written when\n"
    "no log is left). Logs are streamed: their size costs no memory.";

struct import_args {
    const char *out, *preset, *tag_regex, *variant;
    struct strvec patterns, require, logs;
    bool no_preview;
};

/* One log to import. */
struct item {
    const char *src;    /* as given */
    long c, p, r;       /* concurrency, prompts, repeat */
    const char *c_from; /* "log" or "tag": where c came from */
    char *rel;          /* owned; VARIANT/cC-nP[-rR].log */
};

/* Fill c and p of it from its lines (or an export's keys), else its name. */
static int locate(struct item *it, const struct import_args *a, const ext_set *set, struct err *err)
{
    struct ext_shape shape;
    long tc, tp;
    if (ext_shape_for(set, it->src, &shape, err) != 0) {
        if (err->code != RN_ERR_ENV) /* a read error names the file already */
            err_prefix(err, "%s", it->src);
        return -1;
    }
    if (ext_tag(a->tag_regex, it->src, &tc, &tp, err) != 0) {
        err_prefix(err, "%s", it->src);
        return -1;
    }
    it->c = shape.concurrency > 0 ? shape.concurrency : tc;
    it->p = shape.prompts > 0 ? shape.prompts : tp;
    it->c_from = shape.concurrency > 0 ? "log" : "tag";
    if (shape.concurrency > 0 && tc > 0 && tc != shape.concurrency)
        log_warn("%s: the log says concurrency %ld, the file name %ld; using the log's", it->src,
                 shape.concurrency, tc);
    if (shape.prompts > 0 && tp > 0 && tp != shape.prompts)
        log_warn("%s: the log counts %ld requests, the file name says %ld; using the log's",
                 it->src, shape.prompts, tp);
    if (it->c < 1)
        return err_set(err, RN_ERR_USAGE,
                       "%s: cannot tell the concurrency: no 'Max request concurrency:' line with a "
                       "number and no tag such as c16-n48 in the name (use --tag-regex)",
                       it->src),
               -1;
    if (it->p < 1)
        return err_set(err, RN_ERR_USAGE,
                       "%s: cannot tell the number of prompts: no 'Successful requests:' line and "
                       "no tag such as c16-n48 in the name (use --tag-regex)",
                       it->src),
               -1;
    return 0;
}

static int by_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The logs as given, with each folder replaced by the *.log files in it
 * (by name; hidden files left out). A folder without any is an error. */
static int expand_folders(const struct strvec *in, struct strvec *out, struct err *err)
{
    for (size_t i = 0; i < in->n; i++) {
        struct stat st;
        if (stat(in->v[i], &st) != 0 || !S_ISDIR(st.st_mode)) {
            strvec_push(out, in->v[i]); /* reading it will say what is wrong */
            continue;
        }
        DIR *d = opendir(in->v[i]);
        if (!d)
            return err_set(err, RN_ERR_ENV, "%s: cannot list the folder: %s", in->v[i],
                           strerror(errno)),
                   -1;
        struct strvec found = STRVEC_INIT;
        struct dirent *de;
        while ((de = readdir(d)))
            if (de->d_name[0] != '.' && str_ends_with(de->d_name, ".log")) {
                char *path = path_join(in->v[i], de->d_name);
                if (stat(path, &st) == 0 && S_ISREG(st.st_mode))
                    strvec_push(&found, path);
                free(path);
            }
        closedir(d);
        if (!found.n) {
            strvec_release(&found);
            return err_set(err, RN_ERR_USAGE, "%s: a folder without any *.log file", in->v[i]), -1;
        }
        qsort(found.v, found.n, sizeof(found.v[0]), by_name);
        for (size_t k = 0; k < found.n; k++)
            strvec_push(out, found.v[k]);
        strvec_release(&found);
    }
    return 0;
}

/* Copy it into the run folder; an existing different file is an error. An
 * export (preset vllm-json, ...) goes where a point's export is read: beside
 * the log's name (ext_source_path: VARIANT/c4-n16.json). */
static int place(const struct item *it, const char *out, const ext_set *set, struct err *err)
{
    char *log = path_join(out, it->rel);
    char *path = ext_source_path(set, log);
    int rc = 0;
    free(log);
    if (path_exists(path)) {
        if (!file_same(path, it->src)) {
            err_set(err, RN_ERR_USAGE,
                    "%s: '%s' already holds a different log; import into a new folder", it->src,
                    path);
            rc = -1;
        }
    } else {
        /* an AIPerf export goes into a folder of its own (VARIANT/c4-n16/) */
        const char *slash = strrchr(path, '/');
        char *dir = slash ? xstrndup(path, (size_t)(slash - path)) : NULL;
        rc = dir ? mkdir_p(dir, 0755, err, RN_ERR_ENV) : 0;
        if (rc == 0)
            rc = file_copy_atomic(it->src, path, err, RN_ERR_ENV);
        free(dir);
    }
    free(path);
    return rc;
}

/* manifest.json for the imported run: what was imported, from where, and
 * the extraction settings `sweep plot` must reuse. An earlier import into
 * the same folder keeps its sources. */
static int write_manifest(const struct import_args *a, struct item *items, size_t n, int argc,
                          char **argv, struct err *err)
{
    char *path = path_join(a->out, "manifest.json");
    json_t *root = path_exists(path) ? json_load_file(path, 0, NULL) : NULL;
    char stamp[32];
    time_iso8601(stamp, sizeof(stamp));
    if (!json_is_object(root)) {
        json_decref(root);
        root = json_object();
        const char *base = path_base(a->out);
        json_object_set_new(root, "sweep_version", json_string(BUILD_VERSION));
        json_object_set_new(root, "experiment", json_string(*base ? base : a->out));
        json_object_set_new(root, "start", json_string(stamp));
    }
    json_object_set_new(root, "end", json_string(stamp));
    json_t *imp = json_object_get(root, "imported");
    if (!json_is_object(imp)) {
        imp = json_object();
        json_object_set_new(root, "imported", imp);
    }
    json_t *args = json_array();
    json_array_append_new(args, json_string("sweep"));
    json_array_append_new(args, json_string("import"));
    for (int i = 0; i < argc; i++)
        json_array_append_new(args, json_string(argv[i]));
    json_object_set_new(imp, "at", json_string(stamp));
    json_object_set_new(imp, "argv", args);
    json_object_set_new(imp, "variant", json_string(a->variant));
    json_object_set_new(imp, "tag_regex", a->tag_regex ? json_string(a->tag_regex) : json_null());
    json_t *m = json_object(), *pats = json_object(), *req = json_array();
    json_object_set_new(m, "preset", json_string(a->preset));
    for (size_t i = 0; i < a->patterns.n; i++) {
        const char *eq = strchr(a->patterns.v[i], '=');
        char *name = xstrndup(a->patterns.v[i], (size_t)(eq - a->patterns.v[i]));
        json_object_set_new(pats, name, json_string(eq + 1));
        free(name);
    }
    json_object_set_new(m, "patterns", pats);
    for (size_t i = 0; i < a->require.n; i++)
        json_array_append_new(req, json_string(a->require.v[i]));
    json_object_set_new(m, "require", req);
    json_object_set_new(imp, "metrics", m);
    json_t *sources = json_object_get(imp, "sources");
    if (!json_is_array(sources)) {
        sources = json_array();
        json_object_set_new(imp, "sources", sources);
    }
    for (size_t i = 0; i < n; i++) {
        char *abs = realpath(items[i].src, NULL); /* heap, from libc */
        const char *from = abs ? abs : items[i].src;
        bool known = false; /* the same log imported again into the same place */
        size_t k;
        json_t *old;
        json_array_foreach(sources, k, old) known =
            known || (json_is_string(json_object_get(old, "log")) &&
                      strcmp(json_string_value(json_object_get(old, "log")), from) == 0 &&
                      json_is_string(json_object_get(old, "as")) &&
                      strcmp(json_string_value(json_object_get(old, "as")), items[i].rel) == 0);
        if (known) {
            free(abs);
            continue;
        }
        json_array_append_new(
            sources, json_pack("{s:s, s:s, s:I, s:I, s:s}", "log", from, "as", items[i].rel,
                               "concurrency", (json_int_t)items[i].c, "prompts",
                               (json_int_t)items[i].p, "concurrency_from", items[i].c_from));
        free(abs);
    }
    int rc = rundir_write_json(path, root, 0, err);
    json_decref(root);
    free(path);
    return rc;
}

/* The points of the imported logs, merged into the folder's points.csv. */
static int write_points(const struct import_args *a, const struct item *items, size_t n,
                        size_t *failed, struct err *err)
{
    struct rundir rd;
    struct res_table t;
    char *csv = path_join(a->out, "points.csv");
    int rc = -1;
    res_table_init(&t);
    if (rundir_open(a->out, &rd, err) != 0)
        goto out_nord;
    if (path_exists(csv) && res_table_load(csv, &t, err) != 0)
        goto out;
    for (size_t i = 0; i < n; i++) {
        struct res_point p;
        res_point_begin(&p, a->variant, items[i].c, items[i].p, items[i].r, "", items[i].rel, "");
        struct err e; /* a log that cannot be read is a failed point, named */
        err_init(&e);
        judge_saved_point(&rd, a->variant, items[i].rel, &p, &e);
        if (strcmp(p.status, RES_OK) != 0) {
            log_warn("%s: %s", items[i].src, p.cause);
            (*failed)++;
        }
        res_table_put(&t, &p);
    }
    rc = res_table_save(&t, csv, err);
out:
    rundir_release(&rd);
out_nord:
    res_table_release(&t);
    free(csv);
    return rc;
}

/* Repeat numbers for logs of the same point, counting what the folder holds. */
static void number_repeats(struct item *items, size_t n, const struct import_args *a)
{
    for (size_t i = 0; i < n; i++) {
        long r = 1;
        for (size_t j = 0; j < i; j++)
            if (items[j].c == items[i].c && items[j].p == items[i].p)
                r++;
        for (;; r++) { /* skip names a different earlier import took */
            char *rel =
                r > 1 ? xasprintf("%s/c%ld-n%ld-r%ld.log", a->variant, items[i].c, items[i].p, r)
                      : xasprintf("%s/c%ld-n%ld.log", a->variant, items[i].c, items[i].p);
            char *path = path_join(a->out, rel);
            bool taken = path_exists(path) && !file_same(path, items[i].src);
            free(path);
            if (!taken) {
                items[i].rel = rel;
                items[i].r = r;
                break;
            }
            free(rel);
        }
    }
}

static const struct opt_cmd usage = {"sweep", "import", synopsis, summary, RN_ERR_USAGE};

int cmd_import(int argc, char **argv)
{
    struct import_args a = {NULL,        "sglang",    NULL,        "default",
                            STRVEC_INIT, STRVEC_INIT, STRVEC_INIT, false};
    const struct opt opts[] = {
        {"out", 'o', OPT_STR, &a.out, "RUN_DIR",
         "the run folder to create (or add to; not one made by sweep run)"},
        {"preset", 0, OPT_STR, &a.preset, "NAME",
         "sglang (default), vllm, aiperf, or an export preset (vllm-json, ...: sweep check "
         "--metrics)"},
        {"pattern", 0, OPT_LIST, &a.patterns, "NAME=REGEX",
         "add or replace a metric regex (one capture group; repeatable)"},
        {"require", 0, OPT_LIST, &a.require, "NAME",
         "metrics an ok point needs (repeatable; default output_throughput, median_tpot_ms)"},
        {"tag-regex", 0, OPT_STR, &a.tag_regex, "REGEX",
         "read C and P from file names with (?<c>...) and (?<p>...) groups"},
        {"variant", 0, OPT_STR, &a.variant, "NAME",
         "variant name for these logs (default: default)"},
        {"no-preview", 0, OPT_BOOL, &a.no_preview, NULL, "no terminal chart preview"},
    };
    struct err err;
    struct item *items = NULL;
    struct ext_pattern *user = NULL;
    ext_set *probe = NULL;
    size_t n = 0, failed = 0, skipped = 0;
    int rc = RN_ERR_USAGE, skip_code = RN_OK, lock_fd = -1;
    err_init(&err);

    int pr = opt_cmd_parse(&usage, opts, OPT_N(opts), argc, argv, &a.logs, &err);
    if (pr == 1) {
        rc = RN_OK;
        goto out;
    }
    if (pr < 0)
        goto fail;
    if (!a.out || !a.logs.n) {
        err_set(&err, RN_ERR_USAGE, "%s (sweep import LOG... --out RUN_DIR)",
                a.out ? "no log given" : "--out RUN_DIR is required");
        goto fail;
    }
    if (!*a.variant || strchr(a.variant, '/') || a.variant[0] == '.' ||
        strcmp(a.variant, "plots") == 0) {
        err_set(&err, RN_ERR_USAGE, "--variant '%s' cannot name a folder of the run", a.variant);
        goto fail;
    }
    if (!a.require.n) {
        strvec_push(&a.require, "output_throughput");
        strvec_push(&a.require, "median_tpot_ms");
    }
    user = xcalloc(a.patterns.n + 1, sizeof(*user));
    for (size_t i = 0; i < a.patterns.n; i++)
        if (ext_pattern_arg(a.patterns.v[i], &user[i], &err) != 0)
            goto fail;
    if (ext_new(a.preset, user, a.patterns.n, &probe, &err) != 0)
        goto fail;
    long tc, tp; /* a bad --tag-regex is the command's error, not one log's */
    if (a.tag_regex && ext_tag(a.tag_regex, "c1-n1.log", &tc, &tp, &err) != 0)
        goto fail;

    struct strvec given = a.logs;
    strvec_init(&a.logs);
    int ex = expand_folders(&given, &a.logs, &err);
    strvec_release(&given);
    if (ex != 0)
        goto fail;
    /* read and locate every log before writing anything; one that cannot
     * be read or placed is named and left out, the others go on */
    items = xcalloc(a.logs.n, sizeof(*items));
    for (size_t k = 0; k < a.logs.n; k++) {
        struct item *it = &items[n];
        struct err e;
        err_init(&e);
        it->src = a.logs.v[k];
        if (locate(it, &a, probe, &e) != 0) {
            log_error("%s", e.msg);
            skipped++;
            if (skip_code == RN_OK || e.code == RN_ERR_ENV)
                skip_code = e.code;
            continue;
        }
        n++;
    }
    if (n == 0) {
        rc = skip_code;
        goto out;
    }
    /* by concurrency, then prompts; equal points keep the order given (repeats) */
    for (size_t i = 1; i < n; i++)
        for (size_t j = i; j > 0 && (items[j - 1].c > items[j].c ||
                                     (items[j - 1].c == items[j].c && items[j - 1].p > items[j].p));
             j--) {
            struct item tmp = items[j];
            items[j] = items[j - 1];
            items[j - 1] = tmp;
        }
    /* own the folder before writing into it (no sweep run, plot or other
     * import at the same time), and never mix logs into a sweep run's folder */
    if (mkdir_p(a.out, 0755, &err, RN_ERR_ENV) != 0 || (lock_fd = rundir_lock(a.out, &err)) < 0)
        goto fail;
    char *yaml = path_join(a.out, "experiment.yaml");
    bool is_run = path_exists(yaml);
    free(yaml);
    if (is_run) {
        err_set(&err, RN_ERR_USAGE,
                "--out '%s' holds a run made by 'sweep run' (experiment.yaml); imported logs "
                "would be mixed into its points: import into a new folder",
                a.out);
        goto fail;
    }
    /* an earlier import's manifest.json that does not parse would be replaced */
    struct rundir before;
    if (rundir_open(a.out, &before, &err) != 0)
        goto fail;
    rundir_release(&before);
    char *vdir = path_join(a.out, a.variant);
    int mk = mkdir_p(vdir, 0755, &err, RN_ERR_ENV);
    free(vdir);
    if (mk != 0)
        goto fail;
    number_repeats(items, n, &a);
    for (size_t i = 0; i < n; i++)
        if (place(&items[i], a.out, probe, &err) != 0)
            goto fail;
    if (write_manifest(&a, items, n, argc, argv, &err) != 0 ||
        write_points(&a, items, n, &failed, &err) != 0)
        goto fail;
    printf("imported %zu log(s) into %s (%zu ok, %zu failed)", n, a.out, n - failed, failed);
    if (skipped)
        printf("; %zu log(s) left out", skipped);
    printf("\n");
    struct report_opts ro = {NULL, NULL, !a.no_preview && isatty(1), false};
    if (report_build(a.out, &ro, &err) != 0)
        goto fail;
    rc = skip_code == RN_ERR_ENV ? RN_ERR_ENV : failed || skipped ? RN_ERR_POINTS : RN_OK;
    goto out;
fail:
    log_error("%s", err.msg);
    rc = err.code ? err.code : RN_ERR_USAGE;
out:
    rundir_unlock(lock_fd);
    for (size_t i = 0; i < n; i++)
        free(items[i].rel);
    free(items);
    for (size_t i = 0; user && i < a.patterns.n; i++)
        free((char *)user[i].name);
    free(user);
    ext_free(probe);
    strvec_release(&a.patterns);
    strvec_release(&a.require);
    strvec_release(&a.logs);
    return rc;
}
