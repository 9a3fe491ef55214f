/*
 * judge: extraction plus the rules that make a measurement trustworthy.
 * The order matters for the message a user sees: a pattern that hit its
 * match limit first, then the missing required metrics, then the
 * invariants (which need the metrics to be there).
 */
#include "analysis/judge.h"

#include <stdlib.h>
#include <string.h>

#include "fileio.h"
#include "strutil.h"
#include "sweep.h"
#include "xalloc.h"

#include "analysis/power.h"

#include "client/export.h"

int judge_point(const struct judge_spec *spec, const char *log_path, bool client_ok,
                struct metric_set *metrics, bool *ok, struct buf *cause, struct err *err)
{
    struct err e;
    struct ext_info info;
    struct metric_set got;
    struct buf server; /* why the server scrapes gave no column, "" when they did */
    int rc;
    err_init(&e);
    buf_init(&server, 4096);
    ext_info_init(&info);
    mset_init(&got);
    *ok = false;
    /* an export preset reads the tool's export beside the log (export.h); a
     * client that wrote none failed its point, it did not break the run */
    char *source = ext_source_path(spec->set, log_path);
    const struct xp_preset *xp = ext_export(spec->set);
    if (strcmp(source, log_path) != 0 && !path_exists(source)) {
        if (client_ok)
            buf_printf(cause,
                       "no export '%s': the %s preset reads the client's export there (have the "
                       "client write \"${run_dir}/${variant}/${point}%s\")",
                       source, xp->name, xp->suffix);
        scrape_point_columns(log_path, spec->server_map, spec->n_server_map, metrics, &server);
        free(source);
        rc = 0;
        goto out_server;
    }
    rc = ext_run_file(spec->set, source, &got, &info, &e);
    free(source);
    if (rc != 0 && e.code == RN_ERR_ENV) {
        err_set(err, e.code, "%s", e.msg);
        goto out;
    }
    for (size_t i = 0; i < got.n; i++)
        mset_set(metrics, got.m[i].name, got.m[i].value);
    scrape_point_columns(log_path, spec->server_map, spec->n_server_map, metrics, &server);
    /* the per-request records, when the builtin client wrote them: a file
     * that cannot be read is noted, never a failed point */
    struct err ge;
    err_init(&ge);
    int gp_rc = gp_point(log_path, spec->slo, spec->request_rate, metrics, &ge);
    /* the power samples beside the log (analysis/power.h), after the block
     * gave duration_s and total_output_tokens: a bad file is a note too */
    struct err pe;
    err_init(&pe);
    int pw_rc = power_point(log_path, metrics, &pe);
    if (rc != 0 || ext_require(spec->set, metrics, &info, spec->require, &e) != 0) {
        if (client_ok) {
            buf_printf(cause, "%s", e.msg);
            ext_info_notes(&info, cause);
        }
    } else if (client_ok) {
        /* labels that match do not make the requests behind them successful */
        ext_info_notes(&info, cause);
        *ok = !ext_check_invariants(metrics, spec->concurrency, spec->prompts, spec->request_rate,
                                    cause);
    }
    if (gp_rc != 0 && client_ok)
        buf_printf(cause, "%sper-request records: %s", cause->len ? "; " : "", ge.msg);
    if (pw_rc != 0 && client_ok)
        buf_printf(cause, "%spower samples: %s", cause->len ? "; " : "", pe.msg);
    rc = 0;
out_server: /* a note: the point stands on the client's numbers */
    if (server.len && client_ok)
        buf_printf(cause, "%s%s", cause->len ? "; " : "", server.data);
out:
    buf_release(&server);
    mset_release(&got);
    ext_info_release(&info);
    return rc;
}

int judge_saved_point(const struct rundir *rd, const char *variant, const char *rel,
                      struct res_point *p, struct err *err)
{
    const struct rundir_extract *x = rundir_extract_for(rd, variant);
    char *path = path_join(rd->dir, rel);
    struct metric_set ms;
    struct buf cause;
    struct err e;
    ext_set *set = NULL;
    bool ok = false;
    int rc = 0;
    mset_init(&ms);
    buf_init(&cause, sizeof(e.msg));
    err_init(&e);
    if (ext_new(x->preset, x->patterns, x->n_patterns, &set, &e) != 0) {
        buf_printf(&cause, "%s", e.msg);
    } else {
        /* a rate point's log says its rate: "rate2.5-n64.log" */
        const char *base = path_base(rel);
        double rate = rundir_rate(rd, variant), r;
        const char *dash = strstr(base, "-n"); /* not '-': "rate1e-07-n5.log" */
        if (strncmp(base, "rate", 4) == 0 && dash &&
            str_to_double_n(base + 4, (size_t)(dash - base - 4), &r) == 0 && r > 0)
            rate = r;
        struct judge_spec spec = {set,  &x->require,   p->concurrency,  p->prompts,
                                  rate, x->server_map, x->n_server_map, &rd->slo};
        rc = judge_point(&spec, path, true, &ms, &ok, &cause, err);
        if (rc != 0) /* the point fails, the others go on (the caller decides) */
            buf_printf(&cause, "cannot read the log: %s", err->msg);
    }
    free(p->status);
    free(p->cause);
    p->status = xstrdup(ok ? RES_OK : RES_FAILED);
    p->cause = xstrdup(cause.data ? cause.data : "");
    mset_release(&p->metrics);
    p->metrics = ms;
    mset_init(&ms);
    ext_free(set);
    mset_release(&ms);
    buf_release(&cause);
    free(path);
    return rc;
}

bool judge_cause_from_log(const char *cause)
{
    /* the messages of ext_run, ext_require and judge_saved_point */
    static const char *const from_log[] = {
        "missing required metric",         "cannot read the log: ", "is printed twice in",
        "the result block opened at line", "; simplify the regex",  "no export '",
        "' matched a value twice: lines",
    };
    if (!cause || !*cause)
        return true;
    for (size_t i = 0; i < sizeof(from_log) / sizeof(from_log[0]); i++)
        if (strstr(cause, from_log[i]))
            return true;
    return false;
}
