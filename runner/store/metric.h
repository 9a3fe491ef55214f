/*
 * metric: the canonical metric vocabulary (one meaning per name, whatever
 * tool produced the number) and the name -> value set that extraction
 * fills and results store. DESIGN.md "Metrics" defines each quantity.
 */
#ifndef RUNNER_METRIC_H
#define RUNNER_METRIC_H

#include <stdbool.h>
#include <stddef.h>

struct metric_def {
    const char *name; /* canonical name, e.g. "median_tpot_ms" */
    const char *unit; /* "ms", "tok/s", "req/s", "s", "tokens", "requests", "" */
    const char *doc;  /* one line: what it measures */
};

/* The canonical metrics in their display order; n set to the count. */
const struct metric_def *metric_defs(size_t *n);
/* The definition of a canonical name, or NULL. */
const struct metric_def *metric_find(const char *name);
/* NULL-terminated list of canonical names (for "did you mean" hints). */
const char *const *metric_names(void);

struct metric {
    char *name;   /* owned */
    double value; /* may be INFINITY (a tool printed "inf") */
};

/* An ordered set of named values; names are unique. */
struct metric_set {
    struct metric *m; /* owned */
    size_t n, cap;
};

void mset_init(struct metric_set *s);
void mset_release(struct metric_set *s);
/* Insert or overwrite name. */
void mset_set(struct metric_set *s, const char *name, double value);
/* true and *value set when name is present. */
bool mset_get(const struct metric_set *s, const char *name, double *value);
/* Deep copy. */
void mset_copy(struct metric_set *dst, const struct metric_set *src);

#endif
