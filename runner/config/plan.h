/*
 * plan: an experiment expanded into what will run. For each variant: the
 * model path, the server argv and environment with ${vars} expanded; for
 * each point (variant x grid entry x repeat): the client argv, the log name
 * and the point key. `sweep check` and `sweep run --dry-run` print a plan;
 * `sweep run` executes one.
 *
 * Variables (DESIGN.md): ${model} ${port} ${host} ${url} ${concurrency}
 * ${prompts} ${input_len} ${output_len} ${name} ${variant} ${run_dir} and
 * ${env:NAME} (${env:NAME:-default} when NAME may be unset). Server argv and
 * model may use every variable except concurrency, prompts, input_len and
 * output_len; client argv may use all. Expansion never involves a shell:
 * each template becomes exactly one argv element.
 */
#ifndef RUNNER_PLAN_H
#define RUNNER_PLAN_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "buf.h"
#include "err.h"
#include "strvec.h"

#include "config/experiment.h"

/* Values for ${...}; NULL strings and negative numbers mean "not available
 * in this context" (using one is an error naming the variable). */
struct plan_vars {
    const char *model, *host, *url, *name, *variant, *run_dir;
    long port, concurrency, prompts, input_len, output_len;
};

/* Placeholders that stand in for values that vary between runs of the same
 * experiment: keys are computed with them, and `sweep check` (no run
 * folder yet) prints PLAN_RUN_DIR where the run folder will go. */
#define PLAN_PORT    "<port>"
#define PLAN_RUN_DIR "<run_dir>"

/*
 * Expand every ${...} in tmpl into out (appended). "$$" is a literal "$".
 * Returns 0, or -1 with err set (RN_ERR_USAGE): unknown variable, variable
 * not available here, unset environment variable without a default,
 * unterminated "${".
 */
int plan_expand(const char *tmpl, const struct plan_vars *vars, struct buf *out, struct err *err);

/* What identifies a model's contents. */
struct model_fp {
    int exists;      /* 0: path missing (size/mtime/hash unset) */
    long long size;  /* bytes (for a folder: 0) */
    long long mtime; /* seconds since the epoch */
    char sha256[65]; /* sha256 of the whole file, hex (cached: config/modelfp.h); for a
                        folder, of its listing (one "name<TAB>bytes" line per entry,
                        sorted) */
};

/*
 * Model preflight, before anything starts: path exists, is readable, and a
 * file is non-empty (a folder: listable and not empty); a .gguf file must
 * start with the GGUF magic and version 2 or 3. Fills *fp (exists = 1 once
 * the path was found, even when a later check fails). Returns 0, or -1 with
 * "model path 'P': reason" in err (code RN_ERR_ENV).
 */
int plan_check_model(const char *path, struct model_fp *fp, struct err *err);

struct plan_variant {
    const struct exp_variant *v; /* borrowed from the experiment */
    char *model_path;            /* owned; expanded, NULL if none */
    struct model_fp model_fp;    /* filled by plan_build (exists = 0 if missing) */
    char *model_problem;         /* owned: plan_check_model's message, or NULL when the
                                    model checked out (or there is none) */
    long port;                   /* planned port (auto: a port free at plan time) */
    char *url;                   /* owned: "http://HOST:PORT" */
    struct strvec server_argv;   /* expanded; argv[0] is the program */
    struct strvec server_env;    /* "NAME=value" entries to add to the environment */
    char dataset_sha256[65];     /* hex digest of bench.dataset.path's file, "" without one */
};

struct plan_point {
    size_t variant; /* index into plan.variants */
    long concurrency;
    long prompts;
    long repeat;               /* 1..bench.repeat */
    double rate;               /* offered req/s of an open-loop grid point, 0 otherwise */
    struct strvec client_argv; /* expanded; builtin: [sweep, bench, --url, ...] */
    char key[17];              /* 16 hex chars: sha256 of everything that determines the
                                  result (see plan_build) */
    char log_name[64];         /* "c16-n48.log"; with bench.repeat > 1 every repeat is
                                  numbered: "c16-n48-r1.log", "c16-n48-r2.log", ...; a rate
                                  point is "rate2.5-n64.log" */
};

struct plan {
    const struct experiment *exp; /* borrowed */
    char *run_dir;                /* owned; may be NULL (check) */
    char *self_exe;               /* owned: argv[0] of builtin clients ("sweep" if not given) */
    char *engine;                 /* owned: fp4serve for bundled variants, NULL if none */
    struct plan_variant *variants;
    size_t n_variants;
    struct plan_point *points; /* variant-major, grid order, then repeats */
    size_t n_points;
};

struct plan_opts {
    const char *run_dir;        /* results/<name>/<stamp>, or NULL */
    const struct strvec *only;  /* variant names to keep (--only), or NULL for all */
    const char *self_exe;       /* the sweep binary, for the builtin client */
    const char *bundled_engine; /* fp4serve path for engine: bundled, or NULL to search */
};

/*
 * Expand exp into *p (release with plan_release, also after a failure).
 * Bundled argv: [ENGINE, serve, --model, MODEL, --host, HOST, --port, PORT]
 * + flags + args; engine: command: the expanded command + flags + args.
 * Builtin client argv: [SELF, bench, --url, URL, -c, C, -n, P, --input-len,
 * IL, --output-len, OL, --warmup, W, (--request-rate, R when > 0), --jsonl,
 * RUN_DIR/VARIANT/LOGBASE.jsonl].
 *
 * The point key is the first 16 hex chars of sha256 over: the variant's
 * server argv and env as expanded with port and run_dir replaced by
 * placeholders (so an auto port does not change the key) and the bundled
 * engine's path by "<fp4serve>", the model fingerprint (exists, size and
 * the whole file's sha256; not the mtime, so a copy keeps its key), the
 * client argv likewise (the builtin client's own path as "<sweep>", the
 * variant's folder and the log's name in its --jsonl path and ${point} as
 * "<variant>" and "<point>"), input/output lengths, warmup, request rate,
 * concurrency, prompts, the repeat index, a rate point's rate and the
 * dataset file's sha256 (recipe PLAN_KEY_RECIPE).
 * A missing or bad model is not an error here: it goes into model_problem
 * (run refuses it; check prints it as a warning). An expanded model path
 * or flag value that starts with '-' is an error (it would become an
 * option). Returns 0, or -1 with err set (unknown --only variant,
 * expansion errors: RN_ERR_USAGE; bundled engine binary not found, no free
 * port: RN_ERR_ENV).
 * Under executor: ssh the programs are the remote ones (executor.sweep and
 * executor.engine, not searched here), ${run_dir} is the remote run folder
 * (plan_remote_run_dir) and the model is not checked here (the executor
 * checks and fingerprints it on the host: plan_set_model_fp). Under
 * executor: slurm it is checked here, like a local one: the nodes share
 * this filesystem, and the tasks' keys (computed there) must be these.
 */
int plan_build(const struct experiment *exp, const struct plan_opts *opts, struct plan *p,
               struct err *err);

/* The run folder on a remote host (executor: ssh), relative to its work
 * folder: "sweep-runs/NAME/BASE" where BASE is run_dir's last component,
 * so a resumed run finds the same one. Heap string. */
char *plan_remote_run_dir(const struct experiment *exp, const char *run_dir);

/* Variant vi's model fingerprint as found elsewhere (the ssh executor's
 * host), and its points' keys computed again with it. Returns 0, or -1
 * with err set. */
int plan_set_model_fp(struct plan *p, size_t vi, const struct model_fp *fp, struct err *err);

/* The point key recipe: bumped when what goes into a key changes, and
 * recorded in manifest.json ("key_recipe"), so that --resume can tell the
 * keys of an older sweep from a changed setup. 2: the whole model file's
 * sha256 (1 hashed its first MiB), the log name left out (bench.repeat
 * renames logs), a rate point's rate in. 3: repeat r of the builtin
 * client draws its prompts with seed + r - 1 (the same prompts in every
 * repeat let a caching server answer repeats from its prefix cache), which
 * changes the keys of repeats 2 and up only; the tag, hashed into every
 * key, stays "v2" so that the other points of a recipe-2 folder keep
 * theirs. PLAN_KEY_RECIPE_WHY says what each recipe changed. */
#define PLAN_KEY_RECIPE     3
#define PLAN_KEY_RECIPE_TAG "sweep point key v2"
#define PLAN_KEY_RECIPE_WHY                                                                        \
    {                                                                                              \
        NULL, NULL, "it fingerprints the whole model file, not its first MiB",                     \
            "each repeat of the builtin client draws its own prompts (seed + repeat - 1)"          \
    }

/* What variant vi's keys are made of besides each point's own numbers, as
 * short digests that manifest.json records per variant: --resume compares
 * them to name what changed when a key no longer matches. */
struct plan_key_parts {
    char server[17];  /* server argv and env as hashed (placeholders included) */
    char client[17];  /* the client argv of a stand-in point (c=1, n=1) as hashed */
    char model[96];   /* "EXISTS/SIZE/SHA256" of the model, "0/0/" without one */
    char dataset[65]; /* the dataset file's sha256, "" without one */
};

/* Fill *kp for variant vi. Returns 0, or -1 with err set (expansion). */
int plan_key_parts(const struct plan *p, size_t vi, struct plan_key_parts *kp, struct err *err);

/* Re-expand variant vi's server argv, url and client argvs for a new port
 * (after the planned one was taken). Keys do not change. */
int plan_set_port(struct plan *p, size_t vi, long port, struct err *err);

/*
 * Append a rate point of variant vi at rate req/s (a bench.find_max probe:
 * ceil(rate x duration_s) prompts, at least 16, log "rateR-nP.log") with its
 * key and argv; *pi is its index. p->points may move. Returns 0, or -1 with
 * err set.
 */
int plan_add_probe(struct plan *p, size_t vi, double rate, size_t *pi, struct err *err);

/* The path of fp4serve for engine: bundled: next to self_exe, then
 * build/bin/fp4serve, then $PATH. Returns a heap string or NULL. */
char *plan_find_bundled_engine(const char *self_exe);

/* Print the plan: per variant the exact server argv (shell-quoted) and env,
 * then every point with its client argv, log name and key. */
void plan_print(FILE *f, const struct plan *p);

void plan_release(struct plan *p);

struct res_table;
/* Point pi of p has an ok row in t (from this session or an earlier one):
 * its variant's name and its key (store/results.h res_table_find_ok). */
bool plan_point_done(const struct plan *p, const struct res_table *t, size_t pi);

/* True when an environment variable called name (the part before '=')
 * may hold a secret: it contains TOKEN, KEY, SECRET, PASSWORD, PASSWD,
 * CREDENTIAL or AUTH in any case. Such variables never reach the manifest,
 * and `sweep check` prints them as NAME=<hidden>. */
bool plan_env_is_secret(const char *name, size_t len);

#endif
