/*
 * dump: the two outputs generated from the schema table: the schema
 * itself (`sweep check --schema`, the README section) and an experiment as
 * resolved (results/.../experiment.yaml), written with libyaml's emitter
 * so that exp_load_string reads it back to an equal experiment.
 */
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <yaml.h>

#include "strutil.h"

#include "config/experiment.h"
#include "config/schema.h"

/* What is being printed: the top level, or one variant's sections. */
struct view {
    const struct experiment *exp;
    const struct exp_variant *var; /* the variant whose keys are printed, or NULL */
    bool top;                      /* print experiment-level keys */
    size_t n_variants;             /* print the variants list (top level only) */
};

/* ---- the schema, printed from the table ---- */

/* The type column of --schema. */
static const char *schema_type(const struct schema_key *k, char *out, size_t size)
{
    char list[128];
    switch (k->type) {
    case K_SECTION:
        return "map";
    case K_STR:
        return "string";
    case K_TMPL:
        return "template";
    case K_NAME:
        return "name";
    case K_HTTPPATH:
        return "HTTP path";
    case K_METRIC:
        return "metric name";
    case K_CHOICE:
    case K_ENUM:
        snprintf(out, size, "one of: %s", schema_choices_list(k->choices, list, sizeof(list)));
        return out;
    case K_INT:
        snprintf(out, size, "integer %ld..%ld", (long)k->min, (long)k->max);
        return out;
    case K_NUM:
        snprintf(out, size, "number %s %g, <= %g", (k->flags & KF_GT) ? ">" : ">=", k->min, k->max);
        return out;
    case K_PORT:
        return "port 1..65535 or auto";
    case K_TMPLLIST:
        return "list of templates";
    case K_METRICLIST:
        return "list of metric names";
    case K_CHOICELIST:
        snprintf(out, size, "list of: %s", schema_choices_list(k->choices, list, sizeof(list)));
        return out;
    case K_STRLIST:
        return "list of strings";
    case K_FLAGS:
        return "map of flag: template";
    case K_ENV:
        return "map of NAME: template";
    case K_PATTERNS:
        return "map of name: regex";
    case K_GRID:
        return "list of \"C:P\" or maps";
    case K_CONCLIST:
        snprintf(out, size, "list of integers 1..%d", SCHEMA_MAX_CONC);
        return out;
    case K_PROMPTS:
        return "integer or expression";
    case K_LEN:
        return "length 1..1048576 or {dist}";
    case K_RATELIST:
        return "list of numbers > 0";
    case K_MATRIX:
        return "map of key: list";
    case K_VARIANTS:
        return "list of maps";
    }
    return "?";
}

/* The default column: the default, or when the key is required. */
static const char *schema_default(const struct schema_key *k, char *out, size_t size)
{
    if (k->flags & KF_REQ) {
        if (!k->when)
            return "required";
        const char *eq = strchr(k->when, '=');
        snprintf(out, size, "required when %.*s is %s", (int)(eq - k->when), k->when, eq + 1);
        return out;
    }
    return k->def ? k->def : "";
}

/* The meaning column: the doc, plus when an optional key applies at all. */
static const char *schema_doc(const struct schema_key *k, char *out, size_t size)
{
    if ((k->flags & KF_ONLY) && !(k->flags & KF_REQ)) {
        const char *eq = strchr(k->when, '=');
        snprintf(out, size, "%s (only when %.*s is %s)", k->doc, (int)(eq - k->when), k->when,
                 eq + 1);
        return out;
    }
    return k->doc;
}

/* One markdown cell: '|' escaped, padded to width (counted in characters, so
 * UTF-8 text lines up too). The table reads well raw and rendered. */
static void cell(FILE *f, const char *s, int width, bool code)
{
    int n = 0;
    fputs("| ", f);
    if (code) {
        fputc('`', f);
        n += 2;
    }
    for (; *s; s++) {
        if (*s == '|') {
            fputc('\\', f);
            n++;
        }
        fputc(*s, f);
        n += ((unsigned char)*s & 0xc0) != 0x80;
    }
    if (code)
        fputc('`', f);
    fprintf(f, "%*s ", width > n ? width - n : 0, "");
}

void exp_print_schema(FILE *f)
{
    char b1[160], b2[160];
    const char *head[5] = {"key", "type", "default", "unit", "meaning"};
    int w[4] = {3, 4, 7, 4}; /* column widths: the header words at least */
    for (size_t i = 0; i < schema_n_keys; i++) {
        const struct schema_key *k = &schema_keys[i];
        int len[4] = {(int)strlen(k->path) + 2, (int)strlen(schema_type(k, b1, sizeof(b1))),
                      (int)strlen(schema_default(k, b2, sizeof(b2))),
                      (int)strlen(k->unit ? k->unit : "")};
        for (int j = 0; j < 4; j++)
            w[j] = len[j] > w[j] ? len[j] : w[j];
    }
    fprintf(f, "Every key of an experiment file, as `sweep check --schema` prints it.\n\n");
    for (int j = 0; j < 5; j++)
        cell(f, head[j], j < 4 ? w[j] : 0, false);
    fputs("|\n", f);
    for (int j = 0; j < 5; j++) {
        fputs("|", f);
        for (int d = 0; d < (j < 4 ? w[j] : 7) + 2; d++)
            fputc('-', f);
    }
    fputs("|\n", f);
    for (size_t i = 0; i < schema_n_keys; i++) {
        const struct schema_key *k = &schema_keys[i];
        char b3[400];
        cell(f, k->path, w[0], true);
        cell(f, schema_type(k, b1, sizeof(b1)), w[1], false);
        cell(f, schema_default(k, b2, sizeof(b2)), w[2], false);
        cell(f, k->unit ? k->unit : "", w[3], false);
        cell(f, schema_doc(k, b3, sizeof(b3)), 0, false);
        fputs("|\n", f);
    }
    fprintf(f,
            "\nTemplates are one argv element each, never run through a shell. They may use "
            "`${model}` `${port}` `${host}` `${url}` `${name}` `${variant}` `${run_dir}` and "
            "`${env:NAME}` (or `${env:NAME:-default}`); `bench.command` may also use "
            "`${concurrency}` `${prompts}` `${input_len}` `${output_len}` and `${point}` (the "
            "point's log name less `.log`: `c16-n48`, `c16-n48-r2`; an export preset reads "
            "the client's export there). `$$` is a literal `$`.\n"
            "\nA variant (`variants[]`) may set `name`, `server`, `bench` and `metrics`: maps "
            "merge into the base, lists and scalars replace, and giving one grid form "
            "(`grid`, or `concurrency`/`prompts`) drops the other from the base.\n"
            "\nLimits: %d variants, %d entries per list or map, %d points in all, files up to "
            "1 MiB, nesting up to %d levels; YAML anchors and aliases are refused.\n",
            SCHEMA_MAX_VARIANTS, SCHEMA_MAX_ITEMS, SCHEMA_MAX_POINTS, EXP_MAX_DEPTH);
}

/* ---- the resolved dump ---- */

struct em {
    yaml_emitter_t e;
    bool failed; /* an emit failed; the output is cut short */
};

/* libyaml's output callback: append to the caller's buffer (1 = ok). */
static int em_write(void *data, unsigned char *bytes, size_t size)
{
    return buf_append((struct buf *)data, bytes, size) == 0;
}

/* Emit one event; after a failure every later event is skipped. */
static void em_event(struct em *m, yaml_event_t *ev, int ok)
{
    if (!ok || m->failed || !yaml_emitter_emit(&m->e, ev))
        m->failed = true;
}

/* Strings that another YAML reader would take for a null, bool or number
 * (YAML 1.1 readers such as PyYAML also read yes/no/on/off/y/n as bools,
 * 0x1f, 0o17, 1_000, 1:30 and .inf as numbers). Our own number reader is
 * strict (decimal only), so anything that starts like a number is quoted. */
static bool ambiguous(const char *s)
{
    static const char *const words[] = {"",   "~",  "null", "true", "false", "yes",
                                        "no", "on", "off",  "y",    "n",     NULL};
    for (size_t i = 0; words[i]; i++)
        if (strcasecmp(s, words[i]) == 0)
            return true;
    const char *p = s + (*s == '+' || *s == '-');
    if (*p == '.')
        p++;
    return isdigit((unsigned char)*p) || strcasecmp(p, "inf") == 0 || strcasecmp(p, "nan") == 0;
}

/* A string value: double-quoted when asked or when another YAML reader
 * would take it for a null, bool or number; otherwise libyaml chooses. */
static void em_str(struct em *m, const char *s, bool quote)
{
    yaml_event_t ev;
    int ok = yaml_scalar_event_initialize(&ev, NULL, NULL, (yaml_char_t *)s, (int)strlen(s), 1, 1,
                                          quote || ambiguous(s) ? YAML_DOUBLE_QUOTED_SCALAR_STYLE
                                                                : YAML_ANY_SCALAR_STYLE);
    em_event(m, &ev, ok);
}

/* Plain when the loader reads it back the same (flag values, numbers): only
 * null-like text must be quoted, since a null is an error for our keys. */
static void em_plain(struct em *m, const char *s)
{
    yaml_event_t ev;
    bool null_like = !*s || strcmp(s, "~") == 0 || strcasecmp(s, "null") == 0;
    int ok = yaml_scalar_event_initialize(&ev, NULL, NULL, (yaml_char_t *)s, (int)strlen(s), 1, 1,
                                          null_like ? YAML_DOUBLE_QUOTED_SCALAR_STYLE
                                                    : YAML_ANY_SCALAR_STYLE);
    em_event(m, &ev, ok);
}

/* A double as the shortest text that reads back equal: 600, 2.5, 0.1. */
static void em_num(struct em *m, double d)
{
    char s[40];
    if (d == floor(d) && fabs(d) < 1e15) {
        snprintf(s, sizeof(s), "%.0f", d);
        em_plain(m, s);
        return;
    }
    for (int prec = 1; prec <= 17; prec++) { /* the shortest text that reads back equal */
        snprintf(s, sizeof(s), "%.*g", prec, d);
        if (strtod(s, NULL) == d)
            break;
    }
    em_plain(m, s);
}

/* An integer, plain. */
static void em_long(struct em *m, long v)
{
    char s[24];
    snprintf(s, sizeof(s), "%ld", v);
    em_plain(m, s);
}

/* Open a map or a list, in flow style ({...}, [...]) or block style. */
static void em_start(struct em *m, bool map, bool flow)
{
    yaml_event_t ev;
    int ok =
        map ? yaml_mapping_start_event_initialize(
                  &ev, NULL, NULL, 1, flow ? YAML_FLOW_MAPPING_STYLE : YAML_BLOCK_MAPPING_STYLE)
            : yaml_sequence_start_event_initialize(
                  &ev, NULL, NULL, 1, flow ? YAML_FLOW_SEQUENCE_STYLE : YAML_BLOCK_SEQUENCE_STYLE);
    em_event(m, &ev, ok);
}

/* Close what em_start opened. */
static void em_end(struct em *m, bool map)
{
    yaml_event_t ev;
    int ok = map ? yaml_mapping_end_event_initialize(&ev) : yaml_sequence_end_event_initialize(&ev);
    em_event(m, &ev, ok);
}

/* A list of strings, in flow style: [a, b]. */
static void em_list(struct em *m, const struct strvec *sv)
{
    em_start(m, false, true);
    for (size_t i = 0; i < sv->n; i++)
        em_str(m, sv->v[i], false);
    em_end(m, false);
}

/* The value of key k in view c (defined below; sections recurse). */
static void em_value(struct em *m, struct view *c, const struct schema_key *k);

/* The keys below path; variant-level ones only when c->var is set. */
static void em_section(struct em *m, struct view *c, const char *path)
{
    for (size_t i = 0; i < schema_n_keys; i++) {
        const struct schema_key *k = &schema_keys[i];
        bool var_key = (k->flags & KF_VAR) != 0;
        /* the matrix is dumped expanded, as the variants it made */
        if (!schema_is_child(k, path) || k->type == K_CONCLIST || k->type == K_PROMPTS ||
            k->type == K_RATELIST || k->type == K_MATRIX)
            continue;
        if (var_key ? !c->var : !c->top)
            continue;
        if (k->type == K_VARIANTS && !c->n_variants)
            continue;
        /* keys that do not apply (bench.command with tool: builtin) are left out */
        if ((k->flags & KF_ONLY) && !schema_when_holds(k, c->exp, c->var))
            continue;
        /* a template left out in the file stays out (model with engine: command) */
        if ((k->type == K_TMPL || k->type == K_STR || k->type == K_NAME) &&
            !*(char **)(schema_base(k, c->exp, c->var) + k->off))
            continue; /* an optional string that was not given (model, identity) */
        em_str(m, schema_leaf(k->path), false);
        em_value(m, c, k);
    }
}

/* The value of k by its type: the dump's counterpart of decode_value. */
static void em_value(struct em *m, struct view *c, const struct schema_key *k)
{
    const char *base = schema_base(k, c->exp, c->var);
    char name[32];
    switch (k->type) {
    case K_SECTION:
        em_start(m, true, false);
        em_section(m, c, k->path);
        em_end(m, true);
        break;
    case K_STR:
    case K_TMPL:
    case K_NAME:
    case K_HTTPPATH:
    case K_CHOICE:
    case K_METRIC:
        em_str(m, *(char *const *)(base + k->off), false);
        break;
    case K_ENUM:
        em_str(m, schema_choice_name(k->choices, *(const int *)(base + k->off), name, sizeof(name)),
               false);
        break;
    case K_INT:
        em_long(m, *(const long *)(base + k->off));
        break;
    case K_PORT:
        if (*(const long *)(base + k->off) == 0)
            em_str(m, "auto", false);
        else
            em_long(m, *(const long *)(base + k->off));
        break;
    case K_NUM:
        em_num(m, *(const double *)(base + k->off));
        break;
    case K_TMPLLIST:
    case K_METRICLIST:
    case K_CHOICELIST:
    case K_STRLIST:
        em_list(m, (const struct strvec *)(base + k->off));
        break;
    case K_FLAGS:
    case K_ENV: {
        const struct exp_kv *kv = *(struct exp_kv *const *)(base + k->off);
        size_t n = *(const size_t *)(base + k->off_n);
        em_start(m, true, false);
        for (size_t i = 0; i < n; i++) {
            em_str(m, kv[i].key, false);
            if (k->type == K_FLAGS)
                em_plain(m, kv[i].value);
            else
                em_str(m, kv[i].value, false);
        }
        em_end(m, true);
        break;
    }
    case K_PATTERNS: {
        const struct exp_pattern *p = *(struct exp_pattern *const *)(base + k->off);
        size_t n = *(const size_t *)(base + k->off_n);
        em_start(m, true, false);
        for (size_t i = 0; i < n; i++) {
            em_str(m, p[i].name, false);
            em_str(m, p[i].regex, false);
        }
        em_end(m, true);
        break;
    }
    case K_GRID: { /* the resolved points, whatever form the file used */
        char s[48];
        em_start(m, false, true);
        for (size_t i = 0; i < c->var->bench.n_grid; i++) {
            const struct exp_point *g = &c->var->bench.grid[i];
            if (g->rate > 0) /* %.17g: the rate reads back to the same double */
                snprintf(s, sizeof(s), "r%.17g:%ld", g->rate, g->prompts);
            else
                snprintf(s, sizeof(s), "%ld:%ld", g->concurrency, g->prompts);
            em_str(m, s, true);
        }
        em_end(m, false);
        break;
    }
    case K_VARIANTS: { /* each variant in full, so the base needs no sections */
        em_start(m, false, false);
        for (size_t i = 0; i < c->exp->n_variants; i++) {
            struct view vc = *c;
            vc.var = &c->exp->variants[i];
            vc.top = false;
            em_start(m, true, false);
            em_str(m, "name", false);
            em_str(m, vc.var->name, false);
            em_section(m, &vc, "");
            em_end(m, true);
        }
        em_end(m, false);
        break;
    }
    case K_CONCLIST:
    case K_PROMPTS:
    case K_RATELIST:
    case K_MATRIX:
        break;
    case K_LEN: /* a distribution in its text form, which the loader reads back */
        if (*(char *const *)(base + k->off_n))
            em_str(m, *(char *const *)(base + k->off_n), false);
        else
            em_long(m, *(const long *)(base + k->off));
        break;
    }
}

void exp_dump_yaml(const struct experiment *exp, struct buf *out)
{
    struct em m = {.failed = false};
    yaml_event_t ev;
    /* one flat experiment when the file had no variants, else every variant in full */
    bool flat = exp->n_variants == 1 && strcmp(exp->variants[0].name, "default") == 0;
    struct view c = {.exp = exp,
                     .var = flat ? exp->variants : NULL,
                     .top = true,
                     .n_variants = flat ? 0 : exp->n_variants};

    /* a comment first (the emitter cannot write comments), then the document */
    buf_printf(out, "# %s as resolved by sweep: defaults filled in%s.\n", exp->path,
               flat ? "" : ", every variant in full");
    yaml_emitter_initialize(&m.e);
    yaml_emitter_set_output(&m.e, em_write, out);
    yaml_emitter_set_unicode(&m.e, 1);
    yaml_emitter_set_width(&m.e, -1); /* never fold long strings */
    em_event(&m, &ev, yaml_stream_start_event_initialize(&ev, YAML_UTF8_ENCODING));
    em_event(&m, &ev, yaml_document_start_event_initialize(&ev, NULL, NULL, NULL, 1));
    em_start(&m, true, false);
    em_section(&m, &c, "");
    em_end(&m, true);
    em_event(&m, &ev, yaml_document_end_event_initialize(&ev, 1));
    em_event(&m, &ev, yaml_stream_end_event_initialize(&ev));
    yaml_emitter_flush(&m.e);
    yaml_emitter_delete(&m.e);
    if (m.failed)
        buf_puts(out, "\n# (output cut short: the YAML emitter failed)\n");
}
