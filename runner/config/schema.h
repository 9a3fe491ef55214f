/*
 * schema: the experiment-file schema as one table (path, type, flags,
 * default, unit, doc, field offset), shared by the loader (experiment.c)
 * and the schema printer and dumper (dump.c). Private to config/.
 */
#ifndef RUNNER_SCHEMA_H
#define RUNNER_SCHEMA_H

#include <stdbool.h>
#include <stddef.h>

#include "config/experiment.h"

/* Limits that keep a hostile or mistaken file from planning absurd work. */
#define SCHEMA_MAX_ITEMS       1024   /* entries in any list or map value */
#define SCHEMA_MAX_VARIANTS    64     /* variants per experiment */
#define SCHEMA_MAX_NAME        64     /* bytes in an experiment or variant name */
#define SCHEMA_MAX_MATRIX_NAME 200    /* bytes in a variant name (a matrix makes long ones) */
#define SCHEMA_MAX_MATRIX_KEYS 16     /* keys of the matrix */
#define SCHEMA_MAX_STRING      4096   /* bytes in a variant-level string (paths, argv, regexes) */
#define SCHEMA_MAX_TEXT        65536  /* bytes in the description */
#define SCHEMA_MAX_POINTS      100000 /* variants x grid points x repeats */
#define SCHEMA_MAX_CONC        65536  /* concurrency of one point */
#define SCHEMA_MAX_PROMPTS     10000000L /* measured requests of one point */
#define SCHEMA_MAX_KEYS        128       /* rows in the table (sizes the loader's arrays) */
#define SCHEMA_MAX_RATE        1e6       /* req/s of one rate point */
#define SCHEMA_MIN_RATE        1e-6      /* req/s: the client's lowest --request-rate */
#define SCHEMA_RATE_CAP        1024      /* a rate point's in-flight cap: min(prompts, this) */

enum schema_type {
    K_SECTION,    /* a map of the keys below it */
    K_STR,        /* char *: any string */
    K_TMPL,       /* char *: a ${var} template (one argv element) */
    K_NAME,       /* char *: [A-Za-z0-9._-]+ */
    K_HTTPPATH,   /* char *: an HTTP path starting with '/' */
    K_CHOICE,     /* char *: one of choices */
    K_METRIC,     /* char *: a metric name (canonical or from a pattern) */
    K_ENUM,       /* int: index of the value in choices */
    K_INT,        /* long in [min, max] */
    K_NUM,        /* double in [min, max] */
    K_PORT,       /* long: 1..65535, or auto = 0 */
    K_TMPLLIST,   /* struct strvec of templates */
    K_METRICLIST, /* struct strvec of metric names */
    K_CHOICELIST, /* struct strvec, each one of choices */
    K_STRLIST,    /* struct strvec of plain strings (no templates) */
    K_FLAGS,      /* struct exp_kv * (+ count at off_n): --key value */
    K_ENV,        /* struct exp_kv * (+ count at off_n): NAME=value */
    K_PATTERNS,   /* struct exp_pattern * (+ count at off_n) */
    K_GRID,       /* bench.grid: "C:P" strings or {concurrency, prompts} maps */
    K_CONCLIST,   /* bench.concurrency: list of integers */
    K_PROMPTS,    /* bench.prompts: an integer or an expression in c */
    K_VARIANTS,   /* the variants list */
    K_RATELIST,   /* bench.rates: list of numbers > 0 (req/s) */
    K_MATRIX,     /* matrix: {dotted.path: [values]}, expanded into variants */
    K_LEN,        /* long (the mean) at off, and char * (lengths.h text form, NULL when
                     fixed) at off_n: an integer, "uniform:A:B"..., or {dist: ..., ...} */
};

enum {
    KF_REQ = 1u << 0,    /* required (when `when` holds, if given) */
    KF_ONLY = 1u << 1,   /* allowed only when `when` holds */
    KF_VAR = 1u << 2,    /* lives in struct exp_variant; variants may override it */
    KF_SRV = 1u << 3,    /* server template: no per-point variables */
    KF_CLI = 1u << 4,    /* client template: every variable */
    KF_NODASH = 1u << 5, /* must not start with '-' (it would become an option) */
    KF_GT = 1u << 6,     /* min is exclusive */
    KF_RATE = 1u << 7,   /* a rate: 0 (none) or at least SCHEMA_MIN_RATE */
};

struct schema_key {
    const char *path; /* dotted; "variants[].name" for the variant's own name */
    enum schema_type type;
    unsigned flags;      /* KF_* */
    const char *def;     /* default as YAML text, or NULL */
    const char *unit;    /* "s", "tokens", ... or NULL */
    const char *doc;     /* one line for --schema */
    const char *choices; /* "a|b" for K_ENUM, K_CHOICE, K_CHOICELIST */
    const char *when;    /* "engine=bundled": a sibling key and one of its choices */
    double min, max;     /* K_INT, K_NUM ranges */
    size_t off, off_n;   /* field (and count field) in the variant or the experiment */
};

/* THE schema, in the order of --schema, the README and the dump. */
extern const struct schema_key schema_keys[];
extern const size_t schema_n_keys;

/* The entry for a dotted path, or NULL. */
const struct schema_key *schema_find(const char *path);
/* The last component of a dotted path. */
const char *schema_leaf(const char *path);
/* true when k sits directly below section path ("" is the top level). */
bool schema_is_child(const struct schema_key *k, const char *path);
/* Where k's field lives: in var (KF_VAR keys) or in exp. */
char *schema_base(const struct schema_key *k, const struct experiment *exp,
                  const struct exp_variant *var);
/* Index of text among "a|b|c", or -1. */
int schema_choice_index(const char *choices, const char *text);
/* The i-th choice of "a|b|c", written into out. */
const char *schema_choice_name(const char *choices, int i, char *out, size_t size);
/* "a|b|c" -> "a, b, c" into out. */
const char *schema_choices_list(const char *choices, char *out, size_t size);
/* Does k's `when` condition (a sibling enum has a given choice) hold? */
bool schema_when_holds(const struct schema_key *k, const struct experiment *exp,
                       const struct exp_variant *var);
/* "engine is bundled": the sibling named by k's condition and its value now. */
void schema_when_now(const struct schema_key *k, const struct experiment *exp,
                     const struct exp_variant *var, char *out, size_t size);

#endif
