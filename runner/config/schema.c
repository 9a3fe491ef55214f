/*
 * schema: the schema table of experiment files and the small lookups over
 * it. Adding a key is adding a row here (and, for a new type, a case in
 * experiment.c's decoder and dump.c's printer).
 */
#include "config/schema.h"

#include <stdio.h>
#include <string.h>

/* Where a key's value lives: V for fields of struct exp_variant (the keys
 * variants may override, flagged KF_VAR), X for struct experiment. */
#define V(f) offsetof(struct exp_variant, f)
#define X(f) offsetof(struct experiment, f)

/*
 * Rows: the path, its type (K_*), flags (KF_*), the default as YAML text
 * (parsed and decoded like a value from the file), the unit, the one-line
 * doc, choices for enums, a `when` condition, a range, and the field.
 * A key with neither a default nor KF_REQ may be left out (its field stays
 * zero/NULL): the grid keys, server.model for engine: command.
 */
const struct schema_key schema_keys[] = {
    /* ---- the experiment ---- */
    {.path = "name",
     .type = K_NAME,
     .flags = KF_REQ,
     .off = X(name),
     .doc = "names the experiment and its results folder results/NAME/"},
    {.path = "description",
     .type = K_STR,
     .def = "\"\"",
     .off = X(description),
     .doc = "free text for the report"},
    /* ---- server: what is started, and how it is watched ---- */
    {.path = "server",
     .type = K_SECTION,
     .flags = KF_VAR,
     .doc = "the inference server: how to start it and when it is ready"},
    {.path = "server.engine",
     .type = K_ENUM,
     .flags = KF_VAR,
     .def = "bundled",
     .choices = "bundled|command",
     .off = V(server.engine),
     .doc = "bundled: fp4serve from this build; command: any server, from server.command"},
    {.path = "server.command",
     .type = K_TMPLLIST,
     .flags = KF_VAR | KF_SRV | KF_REQ | KF_ONLY,
     .when = "engine=command",
     .off = V(server.command),
     .doc = "the server's argv, run without a shell; flags and args are appended"},
    {.path = "server.model",
     .type = K_TMPL,
     .flags = KF_VAR | KF_SRV | KF_REQ | KF_NODASH,
     .when = "engine=bundled",
     .off = V(server.model),
     .doc = "model file (relative to where sweep runs; a GGUF file for engine: bundled, a file "
            "or folder for engine: command); must exist before anything starts"},
    {.path = "server.host",
     .type = K_STR,
     .flags = KF_VAR | KF_NODASH,
     .def = "127.0.0.1",
     .off = V(server.host),
     .doc = "address the server listens on and the client connects to"},
    {.path = "server.port",
     .type = K_PORT,
     .flags = KF_VAR,
     .def = "auto",
     .off = V(server.port),
     .doc = "TCP port; auto picks one that is free on the loopback interface"},
    {.path = "server.flags",
     .type = K_FLAGS,
     .flags = KF_VAR | KF_SRV,
     .def = "{}",
     .off = V(server.flags),
     .off_n = V(server.n_flags),
     .doc = "appended as --KEY VALUE; true gives --KEY alone, false leaves it out"},
    {.path = "server.args",
     .type = K_TMPLLIST,
     .flags = KF_VAR | KF_SRV,
     .def = "[]",
     .off = V(server.args),
     .doc = "extra argv elements, appended verbatim after the flags"},
    {.path = "server.env",
     .type = K_ENV,
     .flags = KF_VAR | KF_SRV,
     .def = "{}",
     .off = V(server.env),
     .off_n = V(server.n_env),
     .doc = "added to the server's environment"},
    {.path = "server.ready",
     .type = K_SECTION,
     .flags = KF_VAR,
     .doc = "readiness: poll GET path until it answers 200"},
    {.path = "server.ready.path",
     .type = K_HTTPPATH,
     .flags = KF_VAR,
     .def = "/health",
     .off = V(server.ready_path),
     .doc = "HTTP path polled until it answers 200"},
    {.path = "server.ready.timeout_s",
     .type = K_NUM,
     .flags = KF_VAR | KF_GT,
     .def = "600",
     .unit = "s",
     .min = 0,
     .max = 86400,
     .off = V(server.ready_timeout_s),
     .doc = "give up when the server is not ready after this long"},
    {.path = "server.stop", .type = K_SECTION, .flags = KF_VAR, .doc = "stopping the server"},
    {.path = "server.stop.grace_s",
     .type = K_NUM,
     .flags = KF_VAR,
     .def = "20",
     .unit = "s",
     .min = 0,
     .max = 3600,
     .off = V(server.stop_grace_s),
     .doc = "SIGTERM to the process group, then SIGKILL after this long (the bundled engine "
            "drains for 3/4 of it: --drain-timeout)"},
    /* ---- bench: the client and the grid of points ---- */
    {.path = "bench",
     .type = K_SECTION,
     .flags = KF_VAR,
     .doc = "the load: client, request shape and the grid of points"},
    {.path = "bench.tool",
     .type = K_ENUM,
     .flags = KF_VAR,
     .def = "builtin",
     .choices = "builtin|command",
     .off = V(bench.tool),
     .doc = "builtin: sweep's own load generator; command: any client, from bench.command"},
    {.path = "bench.command",
     .type = K_TMPLLIST,
     .flags = KF_VAR | KF_CLI | KF_REQ | KF_ONLY,
     .when = "tool=command",
     .off = V(bench.command),
     .doc = "the client's argv per point, run without a shell; every ${var} is available"},
    {.path = "bench.input_len",
     .type = K_LEN,
     .flags = KF_VAR,
     .def = "256",
     .unit = "tokens",
     .min = 1,
     .max = 1 << 20,
     .off = V(bench.input_len),
     .off_n = V(bench.input_dist),
     .doc = "prompt length, or a distribution drawn per request: {dist: uniform, min: 64, max: "
            "512} or {dist: normal, mean: 480, sd: 240, min: 1, max: N} (seeded)"},
    {.path = "bench.output_len",
     .type = K_LEN,
     .flags = KF_VAR,
     .def = "128",
     .unit = "tokens",
     .min = 1,
     .max = 1 << 20,
     .off = V(bench.output_len),
     .off_n = V(bench.output_dist),
     .doc = "max_tokens per request, or a distribution as for input_len (a dataset entry's own "
            "length wins)"},
    {.path = "bench.warmup",
     .type = K_INT,
     .flags = KF_VAR,
     .def = "2",
     .unit = "requests",
     .min = 0,
     .max = 100000,
     .off = V(bench.warmup),
     .doc = "unmeasured requests before each point (builtin client); the server_* columns leave "
            "them out too"},
    {.path = "bench.request_rate",
     .type = K_NUM,
     .flags = KF_VAR | KF_ONLY | KF_RATE,
     .def = "0",
     .unit = "req/s",
     .min = 0,
     .max = 1e6,
     .when = "tool=builtin",
     .off = V(bench.request_rate),
     .doc = "open-loop arrival rate of the builtin client (at least 1e-06); 0 = closed loop"},
    {.path = "bench.timeout_s",
     .type = K_NUM,
     .flags = KF_VAR | KF_GT,
     .def = "1800",
     .unit = "s",
     .min = 0,
     .max = 604800,
     .off = V(bench.timeout_s),
     .doc = "wall-clock limit of one point"},
    {.path = "bench.repeat",
     .type = K_INT,
     .flags = KF_VAR,
     .def = "1",
     .min = 1,
     .max = 100,
     .off = V(bench.repeat),
     .doc = "runs of each point"},
    {.path = "bench.grid",
     .type = K_GRID,
     .flags = KF_VAR,
     .doc = "the points: [\"1:8\", \"16:48\"] (concurrency:prompts) or "
            "[{concurrency: 1, prompts: 8}]"},
    {.path = "bench.concurrency",
     .type = K_CONCLIST,
     .flags = KF_VAR,
     .min = 1,
     .max = SCHEMA_MAX_CONC,
     .doc = "instead of grid: the concurrencies, with bench.prompts"},
    {.path = "bench.prompts",
     .type = K_PROMPTS,
     .flags = KF_VAR,
     .min = 1,
     .max = SCHEMA_MAX_PROMPTS,
     .doc = "with bench.concurrency: an integer, or an expression in c such as "
            "\"max(8, 1.5*c)\" (+ - * / ( ) min max ceil floor; rounded up)"},
    {.path = "bench.endpoint",
     .type = K_ENUM,
     .flags = KF_VAR | KF_ONLY,
     .def = "completions",
     .choices = "completions|chat",
     .when = "tool=builtin",
     .off = V(bench.endpoint),
     .doc = "the builtin client's API: /v1/completions or /v1/chat/completions (streamed)"},
    {.path = "bench.rates",
     .type = K_RATELIST,
     .flags = KF_VAR,
     .min = 0,
     .max = SCHEMA_MAX_RATE,
     .unit = "req/s",
     .doc = "open-loop points at these offered rates (1e-06 to 1e+06), with bench.prompts (whose c "
            "is the rate); "
            "in bench.grid the same is \"r2:64\" (rate:prompts); at most min(prompts, 1024) in "
            "flight"},
    {.path = "bench.rate_kind",
     .type = K_ENUM,
     .flags = KF_VAR | KF_ONLY,
     .def = "poisson",
     .choices = "poisson|constant",
     .when = "tool=builtin",
     .off = V(bench.rate_kind),
     .doc = "open-loop arrivals: Poisson (exponential gaps, seeded) or evenly spaced"},
    {.path = "bench.find_max",
     .type = K_SECTION,
     .flags = KF_VAR,
     .doc = "after the grid, search the highest offered rate meeting analysis.slo: double from "
            "start, then bisect; each probe is a recorded rate point"},
    {.path = "bench.find_max.start",
     .type = K_NUM,
     .flags = KF_VAR | KF_RATE,
     .def = "0",
     .unit = "req/s",
     .min = 0,
     .max = SCHEMA_MAX_RATE,
     .off = V(bench.find_start),
     .doc = "the first probe's rate (at least 1e-06); 0 = no search"},
    {.path = "bench.find_max.max",
     .type = K_NUM,
     .flags = KF_VAR | KF_GT,
     .def = "10000",
     .unit = "req/s",
     .min = 0,
     .max = SCHEMA_MAX_RATE,
     .off = V(bench.find_max_rate),
     .doc = "the doubling stops here"},
    {.path = "bench.find_max.steps",
     .type = K_INT,
     .flags = KF_VAR,
     .def = "4",
     .min = 0,
     .max = 20,
     .off = V(bench.find_steps),
     .doc = "bisections after the first rate that misses"},
    {.path = "bench.find_max.probe_s",
     .type = K_NUM,
     .flags = KF_VAR | KF_GT,
     .def = "10",
     .unit = "s",
     .min = 0,
     .max = 86400,
     .off = V(bench.find_duration_s),
     .doc = "a probe at rate r sends ceil(r x this) prompts, at least 16"},
    {.path = "bench.find_max.meet",
     .type = K_NUM,
     .flags = KF_VAR | KF_GT,
     .def = "0.9",
     .min = 0,
     .max = 1,
     .off = V(bench.find_attainment),
     .doc = "a probe meets the targets when it is ok and slo_attainment is at least this"},
    {.path = "bench.dataset",
     .type = K_SECTION,
     .flags = KF_VAR,
     .doc = "the builtin client's prompts: random ids/words, or a file (experiments/data/)"},
    {.path = "bench.dataset.kind",
     .type = K_ENUM,
     .flags = KF_VAR,
     .def = "random",
     .choices = "random|jsonl|sharegpt|shared-prefix|multi-turn|trace",
     .off = V(bench.dataset_kind),
     .doc = "jsonl: {\"prompt\": ...} or {\"messages\": [...]} per line, optional "
            "\"output_len\"; sharegpt: first human turn, reply length as output length; "
            "shared-prefix: groups x questions sharing a system prompt; multi-turn: sessions "
            "resending their history; trace: a Mooncake-style JSONL replayed at its times"},
    {.path = "bench.dataset.path",
     .type = K_STR,
     .flags = KF_VAR | KF_NODASH,
     .off = V(bench.dataset_path),
     .doc = "the file (relative to where sweep runs; a regular file of at most 1 GiB, read "
            "once in chunks), required unless kind is random; checked with the plan (a bad "
            "entry is named), its sha256 is part of each point's key"},
    {.path = "bench.dataset.seed",
     .type = K_INT,
     .flags = KF_VAR,
     .def = "42",
     .min = 0,
     .max = 2147483647,
     .off = V(bench.seed),
     .doc = "seed of the prompt order, prompts, lengths and arrival times"},
    {.path = "bench.dataset.groups",
     .type = K_INT,
     .flags = KF_VAR | KF_ONLY,
     .def = "8",
     .min = 1,
     .max = 1000000,
     .when = "kind=shared-prefix",
     .off = V(bench.wl_groups),
     .doc = "shared-prefix: system prompts (request i takes group i mod groups)"},
    {.path = "bench.dataset.prefix_len",
     .type = K_INT,
     .flags = KF_VAR | KF_ONLY,
     .def = "512",
     .unit = "tokens",
     .min = 0,
     .max = 10000000,
     .when = "kind=shared-prefix",
     .off = V(bench.wl_prefix_len),
     .doc = "shared-prefix: tokens of each system prompt"},
    {.path = "bench.dataset.questions",
     .type = K_INT,
     .flags = KF_VAR | KF_ONLY,
     .def = "16",
     .min = 1,
     .max = 1000000,
     .when = "kind=shared-prefix",
     .off = V(bench.wl_questions),
     .doc = "shared-prefix: questions per system prompt"},
    {.path = "bench.dataset.question_len",
     .type = K_INT,
     .flags = KF_VAR | KF_ONLY,
     .def = "32",
     .unit = "tokens",
     .min = 1,
     .max = 10000000,
     .when = "kind=shared-prefix",
     .off = V(bench.wl_question_len),
     .doc = "shared-prefix: tokens of each question"},
    {.path = "bench.dataset.sessions",
     .type = K_INT,
     .flags = KF_VAR | KF_ONLY,
     .def = "8",
     .min = 1,
     .max = 1000000,
     .when = "kind=multi-turn",
     .off = V(bench.wl_sessions),
     .doc = "multi-turn: conversations; a point sends sessions x turns requests (its prompts count "
            "is not used)"},
    {.path = "bench.dataset.turns",
     .type = K_INT,
     .flags = KF_VAR | KF_ONLY,
     .def = "4",
     .min = 1,
     .max = 10000,
     .when = "kind=multi-turn",
     .off = V(bench.wl_turns),
     .doc = "multi-turn: turns per conversation; each resends the whole history and the answers"},
    {.path = "bench.dataset.turn_len",
     .type = K_INT,
     .flags = KF_VAR | KF_ONLY,
     .def = "64",
     .unit = "tokens",
     .min = 1,
     .max = 10000000,
     .when = "kind=multi-turn",
     .off = V(bench.wl_turn_len),
     .doc = "multi-turn: tokens of each new user message"},
    {.path = "bench.dataset.think_s",
     .type = K_NUM,
     .flags = KF_VAR | KF_ONLY,
     .def = "0",
     .unit = "s",
     .min = 0,
     .max = 100000,
     .when = "kind=multi-turn",
     .off = V(bench.wl_think_s),
     .doc = "multi-turn: pause between an answer and the session's next turn"},
    {.path = "bench.dataset.time_scale",
     .type = K_NUM,
     .flags = KF_VAR | KF_ONLY | KF_GT,
     .def = "1",
     .min = 0,
     .max = 1000000,
     .when = "kind=trace",
     .off = V(bench.wl_time_scale),
     .doc = "trace: recorded gaps between timestamps are multiplied by this"},
    {.path = "bench.dataset.block_tokens",
     .type = K_INT,
     .flags = KF_VAR | KF_ONLY,
     .def = "512",
     .unit = "tokens",
     .min = 1,
     .max = 1000000,
     .when = "kind=trace",
     .off = V(bench.wl_block_tokens),
     .doc = "trace: tokens per hash id (Mooncake's block size)"},
    {.path = "bench.reset_cache",
     .type = K_ENUM,
     .flags = KF_VAR | KF_ONLY,
     .def = "off",
     .choices = "off|fp4serve|vllm|sglang",
     .when = "tool=builtin",
     .off = V(bench.reset_cache),
     .doc = "before each point, reset the server's prefix cache so points do not warm each "
            "other: fp4serve and vllm POST /reset_prefix_cache, sglang POST /flush_cache"},
    /* ---- metrics: reading numbers out of the client's output ---- */
    {.path = "metrics",
     .type = K_SECTION,
     .flags = KF_VAR,
     .doc = "how numbers are read from the client's output"},
    {.path = "metrics.preset",
     .type = K_CHOICE,
     .flags = KF_VAR,
     .def = "sglang",
     .choices = "sglang|vllm|aiperf|aiperf-json|aiperf-csv|guidellm-json|vllm-json|sglang-jsonl",
     .off = V(metrics.preset),
     .doc = "a known client's console labels (the builtin client prints sglang's), or its "
            "export file beside each log (*-json, *-csv, *-jsonl: docs/benchmarks.md 2.6)"},
    {.path = "metrics.patterns",
     .type = K_PATTERNS,
     .flags = KF_VAR,
     .def = "{}",
     .off = V(metrics.patterns),
     .off_n = V(metrics.n_patterns),
     .doc = "NAME: regex with one capture group; overrides or adds metrics"},
    {.path = "metrics.require",
     .type = K_METRICLIST,
     .flags = KF_VAR,
     .def = "[output_throughput, median_tpot_ms]",
     .off = V(metrics.require),
     .doc = "a point fails when one of these metrics is missing"},
    {.path = "metrics.server",
     .type = K_ENUM,
     .flags = KF_VAR,
     .def = "true",
     .choices = "false|true",
     .off = V(metrics.server),
     .doc = "scrape the server's Prometheus text before and after each point (server_* columns)"},
    {.path = "metrics.server_path",
     .type = K_HTTPPATH,
     .flags = KF_VAR,
     .def = "/metrics",
     .off = V(metrics.server_path),
     .doc = "HTTP path of the server's Prometheus text"},
    {.path = "metrics.server_map",
     .type = K_ENV,
     .flags = KF_VAR,
     .def = "{}",
     .off = V(metrics.server_map),
     .off_n = V(metrics.n_server_map),
     .doc = "server_NAME: counter expression (\"NAME\", \"NAME / NAME * 1000\"), over deltas"},
    /* ---- variants, each merged over server/bench/metrics (experiment.c) ---- */
    {.path = "variants",
     .type = K_VARIANTS,
     .doc = "each variant overrides parts of server, bench and metrics"},
    {.path = "variants[].name",
     .type = K_NAME,
     .flags = KF_REQ,
     .doc = "the variant's name, unique; names its results subfolder"},
    {.path = "matrix",
     .type = K_MATRIX,
     .doc = "{flags.max-batch: [8, 16], bench.output_len: [64, 256]}: every combination becomes "
            "a variant named max-batch=8,output_len=64 (each variant crossed with it); flags.X "
            "and env.X stand for server.flags.X and server.env.X"},
    /* ---- analysis and charts ---- */
    {.path = "analysis", .type = K_SECTION, .doc = "the scaling fit"},
    {.path = "analysis.fit", .type = K_SECTION, .doc = "least squares y = a + b*x per variant"},
    {.path = "analysis.fit.x",
     .type = K_METRIC,
     .def = "concurrency",
     .off = X(fit_x),
     .doc = "x of the fit"},
    {.path = "analysis.fit.y",
     .type = K_METRIC,
     .def = "median_tpot_ms",
     .off = X(fit_y),
     .doc = "y of the fit (the step time)"},
    {.path = "analysis.slo",
     .type = K_SECTION,
     .doc = "latency targets: per point the fraction of requests meeting all of them "
            "(slo_attainment) and goodput (goodput_req_s, goodput_tok_s), from the builtin "
            "client's per-request records or a detailed vLLM export (X.json beside X.log)"},
    {.path = "analysis.slo.ttft_ms",
     .type = K_NUM,
     .def = "0",
     .unit = "ms",
     .min = 0,
     .max = 1e9,
     .off = X(slo_ttft_ms),
     .doc = "time to first token at most this; 0 = no target"},
    {.path = "analysis.slo.tpot_ms",
     .type = K_NUM,
     .def = "0",
     .unit = "ms",
     .min = 0,
     .max = 1e9,
     .off = X(slo_tpot_ms),
     .doc = "time per output token at most this; 0 = no target"},
    {.path = "analysis.slo.e2e_ms",
     .type = K_NUM,
     .def = "0",
     .unit = "ms",
     .min = 0,
     .max = 1e9,
     .off = X(slo_e2e_ms),
     .doc = "end-to-end latency at most this; 0 = no target"},
    {.path = "analysis.group_by",
     .type = K_NAME,
     .off = X(group_by),
     .doc = "a matrix axis (quant, or flags.quant): the charts draw one colour per value of it, "
            "one marker per combination of the other axes (sweep plot --by AXIS for one plot)"},
    /* ---- executor: where servers and clients run ---- */
    {.path = "executor",
     .type = K_SECTION,
     .doc = "where the server and its client run: this machine, or a remote host over ssh"},
    {.path = "executor.kind",
     .type = K_ENUM,
     .def = "local",
     .choices = "local|ssh|slurm",
     .off = X(executor.kind),
     .doc = "local: on this machine; ssh: on executor.host through the system ssh, one "
            "connection for the whole run; slurm: each variant one task of a job array "
            "(sbatch), in this run folder on a filesystem the nodes share"},
    {.path = "executor.host",
     .type = K_STR,
     .flags = KF_REQ | KF_ONLY | KF_NODASH,
     .when = "kind=ssh",
     .off = X(executor.host),
     .doc = "[user@]host, as ssh takes it (a Host from ~/.ssh/config works)"},
    {.path = "executor.port",
     .type = K_INT,
     .flags = KF_ONLY,
     .def = "22",
     .min = 1,
     .max = 65535,
     .when = "kind=ssh",
     .off = X(executor.port),
     .doc = "the ssh port of the host"},
    {.path = "executor.identity",
     .type = K_STR,
     .flags = KF_ONLY | KF_NODASH,
     .when = "kind=ssh",
     .off = X(executor.identity),
     .doc = "private key file (ssh -i); left out: ssh's own configuration"},
    {.path = "executor.workdir",
     .type = K_STR,
     .flags = KF_ONLY | KF_NODASH,
     .def = ".",
     .when = "kind=ssh",
     .off = X(executor.workdir),
     .doc = "remote folder the server and client run in (relative: to the login folder); "
            "relative model paths and ${run_dir} are read there"},
    {.path = "executor.sweep",
     .type = K_STR,
     .flags = KF_ONLY | KF_NODASH,
     .def = "sweep",
     .when = "kind=ssh",
     .off = X(executor.sweep),
     .doc = "the sweep program on the remote host (it runs the builtin client)"},
    {.path = "executor.engine",
     .type = K_STR,
     .flags = KF_ONLY | KF_NODASH,
     .def = "fp4serve",
     .when = "kind=ssh",
     .off = X(executor.engine),
     .doc = "fp4serve on the remote host (engine: bundled)"},
    {.path = "executor.partition",
     .type = K_STR,
     .flags = KF_ONLY | KF_NODASH,
     .when = "kind=slurm",
     .off = X(executor.partition),
     .doc = "sbatch --partition; left out: the cluster's default"},
    {.path = "executor.gres",
     .type = K_STR,
     .flags = KF_ONLY | KF_NODASH,
     .when = "kind=slurm",
     .off = X(executor.gres),
     .doc = "sbatch --gres per task, e.g. \"gpu:1\""},
    {.path = "executor.time",
     .type = K_STR,
     .flags = KF_ONLY | KF_NODASH,
     .when = "kind=slurm",
     .off = X(executor.time),
     .doc = "sbatch --time per task, e.g. \"01:00:00\"; left out: the partition's limit"},
    {.path = "executor.account",
     .type = K_STR,
     .flags = KF_ONLY | KF_NODASH,
     .when = "kind=slurm",
     .off = X(executor.account),
     .doc = "sbatch --account"},
    {.path = "executor.options",
     .type = K_STRLIST,
     .def = "[]",
     .off = X(executor.options),
     .doc = "extra arguments: ssh's before the host (kind ssh, e.g. [-o, "
            "ServerAliveInterval=5]), sbatch's (kind slurm); not for local"},
    {.path = "plots",
     .type = K_CHOICELIST,
     .def = "[throughput, tpot, ttft]",
     .choices = "throughput|tpot|ttft",
     .off = X(plots),
     .doc = "charts to draw against concurrency"},
};
const size_t schema_n_keys = sizeof(schema_keys) / sizeof(schema_keys[0]);
_Static_assert(sizeof(schema_keys) / sizeof(schema_keys[0]) <= SCHEMA_MAX_KEYS,
               "raise SCHEMA_MAX_KEYS");

const struct schema_key *schema_find(const char *path)
{
    for (size_t i = 0; i < schema_n_keys; i++)
        if (strcmp(schema_keys[i].path, path) == 0)
            return &schema_keys[i];
    return NULL;
}

const char *schema_leaf(const char *path)
{
    const char *dot = strrchr(path, '.');
    return dot ? dot + 1 : path;
}

bool schema_is_child(const struct schema_key *k, const char *path)
{
    size_t n = strlen(path);
    if (n == 0)
        return !strchr(k->path, '.');
    return strncmp(k->path, path, n) == 0 && k->path[n] == '.' && !strchr(k->path + n + 1, '.');
}

char *schema_base(const struct schema_key *k, const struct experiment *exp,
                  const struct exp_variant *var)
{
    return (k->flags & KF_VAR) ? (char *)var : (char *)exp;
}

int schema_choice_index(const char *choices, const char *text)
{
    size_t n = strlen(text);
    int i = 0;
    for (const char *p = choices; *p; i++) {
        const char *bar = strchr(p, '|');
        size_t len = bar ? (size_t)(bar - p) : strlen(p);
        if (len == n && strncmp(p, text, n) == 0)
            return i;
        p += len + (bar ? 1 : 0);
    }
    return -1;
}

const char *schema_choice_name(const char *choices, int i, char *out, size_t size)
{
    const char *p = choices;
    for (; i > 0 && p; i--) {
        p = strchr(p, '|');
        p = p ? p + 1 : NULL;
    }
    size_t len = p ? strcspn(p, "|") : 0;
    snprintf(out, size, "%.*s", (int)len, p ? p : "");
    return out;
}

const char *schema_choices_list(const char *choices, char *out, size_t size)
{
    size_t o = 0;
    for (const char *p = choices; *p && o + 3 < size; p++) {
        if (*p == '|') {
            out[o++] = ',';
            out[o++] = ' ';
        } else {
            out[o++] = *p;
        }
    }
    out[o] = '\0';
    return out;
}

/* ---- lookups ---- */

/* The sibling enum that k's condition names ("engine" in "engine=bundled"). */
static const struct schema_key *when_key(const struct schema_key *k)
{
    char path[64];
    const char *eq = strchr(k->when, '=');
    size_t parent = (size_t)(schema_leaf(k->path) - k->path);
    snprintf(path, sizeof(path), "%.*s%.*s", (int)parent, k->path, (int)(eq - k->when), k->when);
    return schema_find(path);
}

bool schema_when_holds(const struct schema_key *k, const struct experiment *exp,
                       const struct exp_variant *var)
{
    const struct schema_key *s = when_key(k);
    int have = *(const int *)(schema_base(s, exp, var) + s->off);
    return have == schema_choice_index(s->choices, strchr(k->when, '=') + 1);
}

void schema_when_now(const struct schema_key *k, const struct experiment *exp,
                     const struct exp_variant *var, char *out, size_t size)
{
    char name[32];
    const struct schema_key *s = when_key(k);
    const char *eq = strchr(k->when, '=');
    schema_choice_name(s->choices, *(const int *)(schema_base(s, exp, var) + s->off), name,
                       sizeof(name));
    snprintf(out, size, "%.*s is %s", (int)(eq - k->when), k->when, name);
}
