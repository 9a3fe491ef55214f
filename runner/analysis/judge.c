/*
 * judge: extraction plus the rules that make a measurement trustworthy.
 * The order matters for the message a user sees: a pattern that hit its
 * match limit first, then the missing required metrics, then the
 * invariants (which need the metrics to be there).
 */
#include "analysis/judge.h"

#include <stdlib.h>

#include "fileio.h"
#include "strutil.h"
#include "xalloc.h"
#include "sweep.h"

int judge_point(const struct judge_spec *spec, const char *log_path, bool client_ok,
                struct metric_set *metrics, bool *ok, struct buf *cause, struct err *err)
{
    struct buf text;
    buf_init(&text, EXT_LOG_MAX_BYTES);
    if (file_read_all(log_path, &text, err, RN_ERR_ENV) != 0) {
        buf_release(&text);
        return -1;
    }
    struct err e;
    err_init(&e);
    *ok = false;
    if (ext_run(spec->set, text.data ? text.data : "", text.len, metrics, &e) != 0 ||
        ext_require(spec->set, metrics, spec->require, &e) != 0) {
        if (client_ok)
            buf_printf(cause, "%s", e.msg);
    } else if (client_ok) {
        /* labels that match do not make the requests behind them successful */
        *ok = !ext_check_invariants(metrics, spec->concurrency, spec->prompts, spec->request_rate,
                                    cause);
    }
    buf_release(&text);
    return 0;
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
        struct judge_spec spec = {set, &x->require, p->concurrency, p->prompts,
                                  rundir_rate(rd, variant)};
        rc = judge_point(&spec, path, true, &ms, &ok, &cause, err);
    }
    if (rc == 0) {
        free(p->status);
        free(p->cause);
        p->status = xstrdup(ok ? RES_OK : RES_FAILED);
        p->cause = xstrdup(cause.data ? cause.data : "");
        mset_release(&p->metrics);
        p->metrics = ms;
        mset_init(&ms);
    }
    ext_free(set);
    mset_release(&ms);
    buf_release(&cause);
    free(path);
    return rc;
}
