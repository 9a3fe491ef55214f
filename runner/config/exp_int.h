/*
 * exp_int: what the files of the experiment loader share. experiment.c
 * decodes the tree against the schema (values, sections, the two passes);
 * exp_grid.c reads the load grid and rates; exp_variants.c the variants
 * list, the matrix and the merged view of a variant; exp_checks.c the
 * cross-key rules run once a section is decoded. Private to those files:
 * everything else goes through experiment.h.
 */
#ifndef RUNNER_EXP_INT_H
#define RUNNER_EXP_INT_H

#include <stdbool.h>
#include <stddef.h>

#include "err.h"

#include "config/experiment.h"
#include "config/schema.h"
#include "config/ytree.h"

#define E RN_ERR_USAGE
/* A node's text, quoted and cut to fit q (a char array) for a message. */
#define QUOTE(n, q) ytree_quote((n)->text, (n)->len, (q), sizeof(q))

/* Decoding state for one pass over one tree. */
struct dctx {
    const char *file;
    struct err *err;
    struct experiment *exp;                    /* experiment-level fields go here */
    struct exp_variant *var;                   /* variant-level fields go here */
    bool full_exp, full_var;                   /* apply defaults, required keys, cross-key rules */
    bool have_model;                           /* the merged server has a model (pass B) */
    const char *vname;                         /* variant name for messages; NULL: no variants */
    const struct ynode *grid, *conc, *prompts; /* grid-form nodes of the bench map */
    const struct ynode *rates;                 /* bench.rates, the open-loop list form */
    const struct ynode **variants;             /* pass A: the variant maps */
    const struct ynode *matrix;                /* pass A: the matrix map, NULL when none */
    size_t n_variants;
};

/* ---- experiment.c: the decoder's helpers ---- */

/* Record "file:line:col: message" as the error (the first one wins); returns -1. */
int cerr(struct dctx *c, int line, int col, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
const char *vsuffix(const struct dctx *c, char *buf, size_t size);
bool variant_name_ok(const char *s, size_t n);
int want_scalar(struct dctx *c, const struct schema_key *k, const struct ynode *n,
                const char *what);
int check_length(struct dctx *c, const struct schema_key *k, const struct ynode *n, size_t max);
int want_kind(struct dctx *c, const struct schema_key *k, const struct ynode *n, enum ykind kind);

/* ---- exp_grid.c: bench.grid, concurrency/prompts lists, rates ---- */

int parse_count(const char *s, size_t n, long max, long *out);
int parse_rate(const char *s, size_t n, double *out);
void grid_add(struct exp_bench *b, size_t *cap, long conc, long prompts, double rate);
int check_grid(struct dctx *c, const struct schema_key *k, const struct ynode *n,
               struct exp_bench *b, size_t *cap);
int check_conc_list(struct dctx *c, const struct schema_key *k, const struct ynode *n);
int check_rate_list(struct dctx *c, const struct schema_key *k, const struct ynode *n);
int eval_prompts(struct dctx *c, const struct ynode *n, double conc, long *out, bool syntax_only);
int check_prompts(struct dctx *c, const struct schema_key *k, const struct ynode *n);

/* ---- exp_variants.c: variants, matrix, a variant's merged view ---- */

int check_matrix(struct dctx *c, const struct schema_key *k, const struct ynode *n);
int decode_variants(struct dctx *c, const struct schema_key *k, const struct ynode *n);
struct ynode *merged_view(const struct ynode *root, const struct ynode *over);

/* ---- exp_checks.c: cross-key rules, run once a section is decoded ---- */

int finish_bench(struct dctx *c, const struct ynode *map, int line, int col);
int finish_metrics(struct dctx *c, const struct ynode *map, int line, int col);
int finish_executor(struct dctx *c, const struct ynode *map, int line, int col);
int check_fit(struct dctx *c, const struct ynode *root);
int check_group_by(struct dctx *c, const struct ynode *root);

#endif
