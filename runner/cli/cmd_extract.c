/*
 * cmd_extract: `sweep extract LOG... [--preset P] [--pattern NAME=REGEX]...`
 * runs the extraction a run would run on each log and prints the metrics
 * as one JSON object keyed by file, so patterns can be tried on saved logs
 * before an experiment uses them.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "log.h"
#include "opts.h"
#include "sweep.h"
#include "xalloc.h"

#include "client/extract.h"

static const char synopsis[] =
    "LOG... [--preset NAME] [--pattern NAME=REGEX]... [--require NAME]...";
static const char summary[] =
    "Extract metrics from benchmark logs and print them as JSON: one object per\n"
    "log, keyed by its path, with canonical metric names. Infinite values print as\n"
    "\"inf\"; values the log marks as not measured are left out. Each log is read line by\n"
    "line (any size); one that cannot be read or trusted prints null and the others go on.\n"
    "Exit status 1 when a log matches no pattern, lacks a --require'd metric or cannot be\n"
    "trusted (a metric printed twice in its result block, a block cut short); 3 when a log\n"
    "cannot be read.";

#define OUT_MAX_BYTES ((size_t)64 << 20) /* the JSON printed */

/* A value as JSON: infinities as the string "inf"/"-inf" (as vLLM's JSON does). */
static void put_value(struct buf *b, double v)
{
    if (isinf(v))
        buf_puts(b, v > 0 ? "\"inf\"" : "\"-inf\"");
    else
        buf_json_num(b, v);
}

static const struct opt_cmd usage = {"sweep", "extract", synopsis, summary, RN_ERR_USAGE};

int cmd_extract(int argc, char **argv)
{
    const char *preset = "sglang";
    struct strvec pattern_args = STRVEC_INIT, require = STRVEC_INIT, logs = STRVEC_INIT;
    const struct opt opts[] = {
        {"preset", 0, OPT_STR, &preset, "NAME",
         "sglang (default; also sweep's client), vllm, aiperf, or an export: aiperf-json, "
         "aiperf-csv, guidellm-json, vllm-json, sglang-jsonl (LOG is then that file)"},
        {"pattern", 0, OPT_LIST, &pattern_args, "NAME=REGEX",
         "add or replace a metric: a PCRE2 regex with one capture group (repeatable)"},
        {"require", 0, OPT_LIST, &require, "NAME", "exit 1 unless every log has this metric"},
    };
    struct err err;
    struct ext_pattern *user = NULL;
    ext_set *set = NULL;
    struct buf out;
    int rc = RN_ERR_USAGE;
    err_init(&err);
    buf_init(&out, OUT_MAX_BYTES);

    int p = opt_cmd_parse(&usage, opts, OPT_N(opts), argc, argv, &logs, &err);
    if (p == 1) {
        rc = RN_OK;
        goto out;
    }
    if (p < 0)
        goto fail;
    if (logs.n == 0) {
        err_set(&err, RN_ERR_USAGE, "no log given (sweep extract LOG...)");
        goto fail;
    }
    user = xcalloc(pattern_args.n + 1, sizeof(*user));
    for (size_t i = 0; i < pattern_args.n; i++)
        if (ext_pattern_arg(pattern_args.v[i], &user[i], &err) != 0)
            goto fail;
    if (ext_new(preset, user, pattern_args.n, &set, &err) != 0)
        goto fail;

    rc = RN_OK;
    buf_puts(&out, "{");
    for (size_t i = 0; i < logs.n; i++) {
        struct err e;
        struct metric_set ms;
        struct ext_info info;
        err_init(&e);
        mset_init(&ms);
        ext_info_init(&info);
        buf_puts(&out, i ? ",\n  " : "\n  ");
        buf_json_str(&out, logs.v[i], strlen(logs.v[i]));
        buf_puts(&out, ": ");
        if (ext_run_file(set, logs.v[i], &ms, &info, &e) != 0) {
            if (e.code == RN_ERR_ENV)
                log_error("%s", e.msg); /* names the file */
            else
                log_error("%s: %s", logs.v[i], e.msg);
            buf_puts(&out, "null");
            if (rc == RN_OK || e.code == RN_ERR_ENV)
                rc = e.code;
            mset_release(&ms);
            ext_info_release(&info);
            continue;
        }
        struct buf notes;
        buf_init(&notes, sizeof(e.msg));
        ext_info_notes(&info, &notes);
        if (notes.len)
            log_warn("%s: %s", logs.v[i], notes.data);
        buf_release(&notes);
        buf_puts(&out, "{");
        for (size_t k = 0; k < ms.n; k++) {
            buf_puts(&out, k ? ",\n    " : "\n    ");
            buf_json_str(&out, ms.m[k].name, strlen(ms.m[k].name));
            buf_puts(&out, ": ");
            put_value(&out, ms.m[k].value);
        }
        buf_puts(&out, ms.n ? "\n  }" : "}");
        if (require.n && ext_require(set, &ms, &info, &require, &e) != 0) {
            log_error("%s: %s", logs.v[i], e.msg);
            if (rc == RN_OK)
                rc = RN_ERR_POINTS;
        } else if (ms.n == 0) {
            log_error("%s: no metric matched (preset '%s'%s)", logs.v[i], preset,
                      pattern_args.n ? " and the given patterns" : "");
            if (rc == RN_OK)
                rc = RN_ERR_POINTS;
        }
        mset_release(&ms);
        ext_info_release(&info);
    }
    buf_puts(&out, "\n}\n");
    fwrite(out.data, 1, out.len, stdout);
    goto out;
fail:
    log_error("%s", err.msg);
    rc = err.code ? err.code : RN_ERR_USAGE;
out:
    for (size_t i = 0; user && i < pattern_args.n; i++)
        free((char *)user[i].name);
    free(user);
    ext_free(set);
    strvec_release(&pattern_args);
    strvec_release(&require);
    strvec_release(&logs);
    buf_release(&out);
    return rc;
}
