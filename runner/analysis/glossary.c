/*
 * glossary: the canonical quantities and each preset's term for them (see
 * glossary.h). Columns follow ext_preset_names(): sglang, vllm, aiperf
 * (console tables), aiperf-json, aiperf-csv, guidellm-json, vllm-json,
 * sglang-jsonl. A "*" in a term stands for the statistic (mean, median,
 * p90, p95, p99); the console presets read "Mean X (ms):"-style rows.
 * Sources: SGLang 0.5.23 sglang/benchmark/serving.py, vLLM 0.33.0
 * vllm/benchmarks/serve.py, AIPerf 0.13.0 aiperf/metrics/types/,
 * GuideLLM 0.8.1 guidellm/benchmark/schemas/metrics.py.
 */
#include "analysis/glossary.h"

#include "client/extract.h"

static const struct gloss_entry entries[] = {
    {"TTFT",
     "median_ttft_ms",
     "`*_ttft_ms`",
     "request sent -> first chunk that carries text",
     {"TTFT", "TTFT", "Time to First Token (ms)", "time_to_first_token", "Time to First Token (ms)",
      "time_to_first_token_ms", "*_ttft_ms", "*_ttft_ms"}},
    {"TPOT",
     "median_tpot_ms",
     "`*_tpot_ms`",
     "per request (E2E - TTFT) / (output tokens - 1), then over requests: the decode step a "
     "request saw",
     {"TPOT", "TPOT", "Inter Token Latency (ms)", "inter_token_latency", "Inter Token Latency (ms)",
      "inter_token_latency_ms", "*_tpot_ms", "*_tpot_ms"}},
    {"ITL",
     "median_itl_ms",
     "`*_itl_ms`, `max_itl_ms`",
     "gaps between consecutive chunks that carry text, pooled over all requests",
     {"ITL", "ITL", "", "inter_chunk_latency", "Inter Chunk Latency (ms)", "", "*_itl_ms",
      "*_itl_ms"}},
    {"E2E",
     "median_e2e_ms",
     "`*_e2e_ms`",
     "request sent -> its last byte",
     {"E2E Latency", "E2EL", "Request Latency (ms)", "request_latency", "Request Latency (ms)",
      "request_latency", "*_e2el_ms", "*_e2e_latency_ms"}},
    {"output throughput",
     "output_throughput",
     "`output_throughput`",
     "output tokens of successful requests / benchmark duration, tok/s",
     {"Output token throughput (tok/s)", "Output token throughput (tok/s)",
      "Output Token Throughput (tokens/sec)", "output_token_throughput",
      "Output Token Throughput (tokens/sec)", "output_tokens_per_second", "output_throughput",
      "output_throughput"}},
    {"concurrency",
     "achieved_concurrency",
     "`achieved_concurrency`",
     "requests in flight on average: sum of E2E / duration (Little's law)",
     {"Concurrency", "", "", "effective_concurrency", "Effective Concurrency",
      "request_concurrency", "", "concurrency"}},
    {"E2E / output tokens",
     NULL,
     "none (not read)",
     "E2E divided by all output tokens, the first included: neither TPOT nor ITL",
     {"", "", "", "", "", "time_per_output_token_ms", "", ""}},
};

const struct gloss_entry *gloss_entries(size_t *n)
{
    *n = sizeof(entries) / sizeof(entries[0]);
    return entries;
}

void gloss_print(FILE *f)
{
    const char *const *presets = ext_preset_names();
    fputs("| quantity | sweep's names | meaning here |", f);
    for (size_t p = 0; p < GLOSS_N_PRESETS; p++)
        fprintf(f, " %s |", presets[p]);
    fputs("\n|---|---|---|", f);
    for (size_t p = 0; p < GLOSS_N_PRESETS; p++)
        fputs("---|", f);
    fputc('\n', f);
    for (size_t i = 0; i < sizeof(entries) / sizeof(entries[0]); i++) {
        const struct gloss_entry *e = &entries[i];
        fprintf(f, "| %s | %s | %s |", e->quantity, e->ours, e->meaning);
        for (size_t p = 0; p < GLOSS_N_PRESETS; p++)
            fprintf(f, e->tool[p][0] ? " `%s` |" : " -%s |", e->tool[p]);
        fputc('\n', f);
    }
    fputs("\n`*` stands for mean, median, p90, p95 and p99. The sglang and vllm presets read\n"
          "the rows `Mean X (ms):`, `Median X (ms):`, ... of term X; aiperf reads the row X\n"
          "of AIPerf's console table (columns avg, p50, p90, p95, p99). `-`: the tool has no such\n"
          "number, or sweep does not read it. GuideLLM's `request_latency` is in seconds\n"
          "(read x 1000). AIPerf's and GuideLLM's \"inter token latency\" is our TPOT, not\n"
          "`*_itl_ms`.\n",
          f);
}
