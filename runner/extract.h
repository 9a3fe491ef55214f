/*
 * extract: metrics out of benchmark output with PCRE2. A preset (sglang,
 * vllm, ...) holds the label regexes of one tool family, across the label
 * spellings its versions used; user patterns override or add names. Each
 * regex has exactly one capture group: the value ("inf" -> INFINITY,
 * "not set"/"N/A" -> absent). Every match runs under a match limit, so a
 * pathological user regex fails fast instead of hanging.
 */
#ifndef RUNNER_EXTRACT_H
#define RUNNER_EXTRACT_H

#include <stddef.h>

#include "err.h"
#include "metrics.h"
#include "strvec.h"

typedef struct ext_set ext_set; /* compiled patterns: a preset plus user patterns */

struct ext_pattern {
    const char *name;  /* canonical metric name, or a new name the user picked */
    const char *regex; /* PCRE2 pattern with exactly one capture group */
};

/* NULL-terminated list of preset names ("sglang", "vllm", ...). */
const char *const *ext_preset_names(void);

/*
 * Check that regex compiles and has exactly one capture group. On failure
 * returns -1 with a message such as "missing closing parenthesis at offset
 * 12" in err (code RN_ERR_USAGE); the caller prefixes the location.
 */
int ext_regex_check(const char *regex, struct err *err);

/*
 * Compile preset (NULL = no preset) plus user patterns (a user pattern with
 * the same name as a preset one replaces it). Returns 0, or -1 with err set
 * (unknown preset, bad regex naming the pattern and offset).
 */
int ext_new(const char *preset, const struct ext_pattern *user, size_t n_user, ext_set **out,
            struct err *err);
void ext_free(ext_set *set);

/*
 * Run every pattern over text[0..len) and put what matched into out (which
 * the caller initialised; existing names are overwritten). Returns 0, or -1
 * with err set when a pattern hit the match limit (the message names it).
 */
int ext_run(const ext_set *set, const char *text, size_t len, struct metric_set *out,
            struct err *err);

/*
 * Check that every name in require is present in got. Returns 0, or -1 with
 * a message naming the first missing metric and every regex that was tried
 * for it (or saying that no pattern defines it).
 */
int ext_require(const ext_set *set, const struct metric_set *got, const struct strvec *require,
                struct err *err);

#endif
