/* opts: flag tables -> parsing, validation and help text. */
#include "opts.h"

#include <stdlib.h>
#include <string.h>

#include "strutil.h"
#include "xalloc.h"

static const struct opt *find_long(const struct opt *opts, size_t n, const char *name, size_t len)
{
    for (size_t i = 0; i < n; i++)
        if (strlen(opts[i].name) == len && strncmp(opts[i].name, name, len) == 0)
            return &opts[i];
    return NULL;
}

static const struct opt *find_short(const struct opt *opts, size_t n, char c)
{
    for (size_t i = 0; i < n; i++)
        if (opts[i].short_name && opts[i].short_name == c)
            return &opts[i];
    return NULL;
}

static void unknown(const struct opt *opts, size_t n, const char *arg, size_t len, struct err *err,
                    int code)
{
    const char **names = xcalloc(n + 1, sizeof(*names));
    for (size_t i = 0; i < n; i++)
        names[i] = opts[i].name;
    char *word = xstrndup(arg, len);
    const char *hint = str_suggest(word, names);
    if (hint)
        err_set(err, code, "unknown option '--%s' (did you mean '--%s'?)", word, hint);
    else
        err_set(err, code, "unknown option '--%s' (see --help)", word);
    free(word);
    free(names);
}

static int set_value(const struct opt *o, const char *val, struct err *err, int code)
{
    /* no flag takes '': a path would become "/" once joined ("--out ''"
     * wrote DIR/plots to /plots), a name or pattern would match nothing */
    if (o->type != OPT_BOOL && !*val)
        return err_set(err, code, "option '--%s' must not be empty", o->name), -1;
    switch (o->type) {
    case OPT_BOOL:
        *(bool *)o->dest = true;
        return 0;
    case OPT_STR:
        *(const char **)o->dest = val;
        return 0;
    case OPT_LIST:
        strvec_push((struct strvec *)o->dest, val);
        return 0;
    case OPT_LONG: {
        long v;
        if (str_to_long(val, &v) != 0)
            return err_set(err, code, "option '--%s' wants an integer, got '%s'", o->name, val), -1;
        if (o->min < o->max && (v < o->min || v > o->max))
            return err_set(err, code, "option '--%s' must be between %.0f and %.0f, got %ld",
                           o->name, o->min, o->max, v),
                   -1;
        *(long *)o->dest = v;
        return 0;
    }
    case OPT_DOUBLE: {
        double v;
        if (str_to_double(val, &v) != 0)
            return err_set(err, code, "option '--%s' wants a number, got '%s'", o->name, val), -1;
        if (o->min < o->max && (v < o->min || v > o->max))
            return err_set(err, code, "option '--%s' must be between %g and %g, got %g", o->name,
                           o->min, o->max, v),
                   -1;
        *(double *)o->dest = v;
        return 0;
    }
    }
    return 0;
}

int opt_parse(int argc, char **argv, const struct opt *opts, size_t n_opts,
              struct strvec *positional, struct err *err, int code)
{
    for (int i = 0; i < argc; i++)
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0)
            return 1;
        else if (strcmp(argv[i], "--") == 0)
            break;

    bool flags_done = false;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (flags_done || a[0] != '-' || a[1] == '\0') {
            if (!positional)
                return err_set(err, code, "unexpected argument '%s'", a), -1;
            if (!*a) /* '' would become the current folder, or '/' once joined */
                return err_set(err, code, "empty argument '' (a file or folder name was expected)"),
                       -1;
            strvec_push(positional, a);
            continue;
        }
        if (strcmp(a, "--") == 0) {
            flags_done = true;
            continue;
        }
        const struct opt *o;
        const char *val = NULL;
        if (a[1] == '-') {
            const char *name = a + 2;
            const char *eq = strchr(name, '=');
            size_t len = eq ? (size_t)(eq - name) : strlen(name);
            o = find_long(opts, n_opts, name, len);
            if (!o) {
                unknown(opts, n_opts, name, len, err, code);
                return -1;
            }
            if (eq)
                val = eq + 1;
        } else {
            o = a[2] == '\0' ? find_short(opts, n_opts, a[1]) : NULL;
            if (!o)
                return err_set(err, code, "unknown option '%s' (see --help)", a), -1;
        }
        if (o->type == OPT_BOOL) {
            if (val)
                return err_set(err, code, "option '--%s' takes no value", o->name), -1;
        } else if (!val) {
            if (i + 1 >= argc)
                return err_set(err, code, "option '--%s' needs a value (%s)", o->name,
                               o->arg ? o->arg : "VALUE"),
                       -1;
            val = argv[++i];
        }
        if (set_value(o, val, err, code) != 0)
            return -1;
    }
    return 0;
}

void opt_help(FILE *f, const char *prog, const char *cmd, const char *synopsis, const char *summary,
              const struct opt *opts, size_t n_opts)
{
    fprintf(f, "usage: %s %s %s\n", prog, cmd, synopsis ? synopsis : "");
    if (summary)
        fprintf(f, "\n%s\n", summary);
    if (n_opts)
        fprintf(f, "\noptions:\n");
    for (size_t i = 0; i < n_opts; i++) {
        const struct opt *o = &opts[i];
        char left[64];
        const char *arg = o->arg ? o->arg : "VALUE";
        if (o->short_name)
            snprintf(left, sizeof(left), "-%c, --%s%s%s", o->short_name, o->name,
                     o->type == OPT_BOOL ? "" : " ", o->type == OPT_BOOL ? "" : arg);
        else
            snprintf(left, sizeof(left), "    --%s%s%s", o->name, o->type == OPT_BOOL ? "" : " ",
                     o->type == OPT_BOOL ? "" : arg);
        fprintf(f, "  %-28s %s\n", left, o->help);
    }
    fprintf(f, "  %-28s %s\n", "-h, --help", "show this help and exit");
}

int opt_cmd_parse(const struct opt_cmd *c, const struct opt *opts, size_t n_opts, int argc,
                  char **argv, struct strvec *positional, struct err *err)
{
    err_init(err);
    int rc = opt_parse(argc, argv, opts, n_opts, positional, err, c->code);
    if (rc == 1)
        opt_help(stdout, c->prog, c->name, c->synopsis, c->summary, opts, n_opts);
    return rc;
}
