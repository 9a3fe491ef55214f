/*
 * experiment: an experiment file (YAML, DESIGN.md "Experiment files")
 * loaded through one schema table, validated, with defaults filled in and
 * every variant resolved into a complete description. Templates such as
 * "${model}" are kept as written here; plan.c expands them.
 *
 * Errors are one line naming file:line:column, with "did you mean" where a
 * key is close to a known one; the code is RN_ERR_USAGE (exit 2).
 */
#ifndef RUNNER_EXPERIMENT_H
#define RUNNER_EXPERIMENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "buf.h"
#include "err.h"
#include "strvec.h"

#define EXP_MAX_FILE_BYTES ((size_t)1 << 20) /* 1 MiB */
#define EXP_MAX_DEPTH      64

enum exp_engine {
    EXP_ENGINE_BUNDLED, /* fp4serve from this build (or PATH) */
    EXP_ENGINE_COMMAND, /* server.command argv */
};

enum exp_tool {
    EXP_TOOL_BUILTIN, /* sweep's own load generator (`sweep bench`) */
    EXP_TOOL_COMMAND, /* bench.command argv, any client */
};

/* Where the servers and clients run (executor.kind). */
enum exp_exec_kind {
    EXP_EXEC_LOCAL, /* on this machine */
    EXP_EXEC_SSH,   /* on executor.host, through the system ssh (exec/ssh.c) */
    EXP_EXEC_SLURM, /* each variant one task of a SLURM job array (exec/slurm.c) */
};

/* The executor: section, experiment-level (variants cannot override it). */
struct exp_executor {
    enum exp_exec_kind kind; /* default local */
    char *host;              /* ssh: [user@]host as ssh takes it */
    long port;               /* ssh: default 22 */
    char *identity;          /* ssh: private key file (ssh -i), NULL: ssh's own choice */
    char *workdir;           /* ssh: the remote folder processes run in, default "." (home) */
    char *sweep;             /* ssh: the sweep program there (builtin client), default "sweep" */
    char *engine;            /* ssh: fp4serve there (engine: bundled), default "fp4serve" */
    struct strvec options;   /* ssh: extra arguments before the host, e.g. -o K=V, -F FILE;
                                slurm: extra sbatch arguments */
    char *partition;         /* slurm: sbatch --partition, NULL: the cluster's default */
    char *gres;              /* slurm: sbatch --gres ("gpu:1"), NULL: none */
    char *time;              /* slurm: sbatch --time ("01:00:00"), NULL: the partition's */
    char *account;           /* slurm: sbatch --account, NULL: the user's default */
};

/* A key: value pair from a map such as server.flags or server.env. */
struct exp_kv {
    char *key;   /* owned */
    char *value; /* owned; scalars as written ("true", "64", "nvfp4") */
    int line;    /* 1-based position of the value in the file */
    int col;
};

struct exp_server {
    enum exp_engine engine;
    struct strvec command; /* engine: command: argv templates, unexpanded */
    char *model;           /* model path template (relative paths: to the working folder);
                              may be NULL for engine: command */
    char *host;            /* default "127.0.0.1" */
    long port;             /* 0 = auto (a free loopback port) */
    struct exp_kv *flags;  /* appended as --key value; "true" -> --key; "false" -> omitted */
    size_t n_flags;
    struct strvec args; /* extra argv templates, verbatim after the flags */
    struct exp_kv *env; /* added to the server's environment */
    size_t n_env;
    char *ready_path;       /* default "/health" */
    double ready_timeout_s; /* default 600 */
    double stop_grace_s;    /* default 20: SIGTERM, then SIGKILL after this */
};

struct exp_point {
    long concurrency; /* >= 1; for a rate point the in-flight cap, min(prompts, 1024) */
    long prompts;     /* >= 1: measured requests (warmup not counted) */
    double rate;      /* req/s offered in open loop ("r2:64", bench.rates); 0 = closed loop */
};

struct exp_bench {
    enum exp_tool tool;     /* default builtin */
    struct strvec command;  /* tool: command: argv templates, unexpanded */
    long input_len;         /* tokens per prompt, default 256 */
    long output_len;        /* max_tokens per request, default 128 */
    long warmup;            /* warmup requests per point, default 2 */
    double request_rate;    /* req/s for an open-loop builtin client; 0 = closed loop */
    double timeout_s;       /* per point, default 1800 */
    long repeat;            /* runs per point, default 1 */
    struct exp_point *grid; /* in file order, duplicates removed */
    size_t n_grid;
    char *input_dist;   /* owned; lengths.h text form ("uniform:64:512"), NULL: input_len */
    char *output_dist;  /* owned; the same for max_tokens, NULL: output_len */
    int endpoint;       /* 0 completions, 1 chat (builtin client) */
    int dataset_kind;   /* enum ds_kind: 0 random, 1 jsonl, 2 sharegpt; then 3 shared-prefix,
                           4 multi-turn, 5 trace (client/workload.h) */
    char *dataset_path; /* owned; NULL for random prompts */
    long seed;          /* prompt order, lengths and arrivals of the builtin client */
    int rate_kind;      /* open-loop arrivals: 0 poisson, 1 constant */
    /* generated workloads (dataset_kind 3 shared-prefix, 4 multi-turn, 5 trace) */
    long wl_groups, wl_prefix_len, wl_questions, wl_question_len;
    long wl_sessions, wl_turns, wl_turn_len;
    double wl_think_s;      /* multi-turn pause, s */
    double wl_time_scale;   /* trace: gaps x this */
    long wl_block_tokens;   /* trace: tokens per hash id */
    int reset_cache;        /* 0 off, 1 fp4serve, 2 vllm, 3 sglang: POST the reset before a point */
    double find_start;      /* bench.find_max.start, req/s; 0 = no search */
    double find_max_rate;   /* bench.find_max.max, req/s */
    long find_steps;        /* bench.find_max.steps: bisections */
    double find_duration_s; /* bench.find_max.probe_s: a probe sends rate x this prompts */
    double find_attainment; /* bench.find_max.meet: a probe meets the targets at this */
};

struct exp_pattern {
    char *name;  /* owned: canonical metric name or a new one */
    char *regex; /* owned: checked at load time (one capture group) */
};

struct exp_metrics {
    char *preset;                 /* default "sglang" */
    struct exp_pattern *patterns; /* user patterns, override or add */
    size_t n_patterns;
    struct strvec require;     /* default output_throughput, median_tpot_ms */
    int server;                /* metrics.server: 1 = scrape server_path around each point */
    char *server_path;         /* default "/metrics" */
    struct exp_kv *server_map; /* server_* column -> expression over counter deltas */
    size_t n_server_map;
};

/* One variant with the base experiment and its overrides already merged. */
struct exp_variant {
    char *name; /* "default" when the file declares no variants */
    struct exp_server server;
    struct exp_bench bench;
    struct exp_metrics metrics;
};

struct experiment {
    char *path;                   /* the file it came from */
    char *name;                   /* [A-Za-z0-9._-]+, names the results folder */
    char *description;            /* may be "" */
    struct exp_variant *variants; /* >= 1 */
    size_t n_variants;
    char *fit_x;         /* analysis.fit.x, default "concurrency" */
    char *fit_y;         /* analysis.fit.y, default "median_tpot_ms" */
    struct strvec plots; /* chart names, default throughput, tpot, ttft */
    char *group_by;      /* analysis.group_by: a matrix axis as in variant names, or NULL */
    double slo_ttft_ms;  /* analysis.slo targets, ms; 0 = no target on that latency */
    double slo_tpot_ms;
    double slo_e2e_ms;
    struct exp_executor executor;
};

/*
 * Load and validate path. Files over EXP_MAX_FILE_BYTES, YAML aliases and
 * anchors, nesting deeper than EXP_MAX_DEPTH, duplicate or unknown keys,
 * wrong types, bad grid entries, unknown ${variables} and bad regexes are
 * errors. Returns 0 with *exp filled (release with exp_release), or -1 with
 * "path:line:col: message" in err.
 */
int exp_load_file(const char *path, struct experiment *exp, struct err *err);
/* The same from memory; display_name stands in for the path in messages. */
int exp_load_string(const char *display_name, const char *text, size_t len, struct experiment *exp,
                    struct err *err);
void exp_release(struct experiment *exp);

/* The variant called name, or NULL. */
const struct exp_variant *exp_find_variant(const struct experiment *exp, const char *name);

/* Print the schema (every key: type, default, unit, meaning) as generated
 * from the key table: `sweep check --schema` and the README section, a
 * markdown table plus notes on templates, variants and limits. */
void exp_print_schema(FILE *f);

/* The experiment as resolved (defaults filled in, variants listed in full)
 * as YAML that exp_load_string accepts again: results/.../experiment.yaml.
 * One variant called "default" dumps flat; otherwise every variant appears
 * in full under variants:. The grid is dumped as its resolved "C:P" points.
 * Appends to out (truncated, with a final comment, past out's cap). */
void exp_dump_yaml(const struct experiment *exp, struct buf *out);

#endif
