/*
 * fp4_synth: `fp4serve synth [--arch A] [--preset NAME] [--type T] [--seed N]
 * -o OUT` writes a seeded random-weight model (engine/format/synth.h) for
 * tests and benchmarks that must not depend on a download.
 */
#include <stdio.h>
#include <string.h>

#include "fp4.h"
#include "log.h"
#include "opts.h"

#include "format/gguf.h"
#include "format/synth.h"

/* The weight types synth writes, by their --type names. */
static const struct {
    const char *name;
    uint32_t type; /* ggml type id */
} synth_types[] = {
    {"f32", 0}, {"f16", 1}, {"q4_1", 3}, {"q8_0", 8}, {"mxfp4", 39}, {"nvfp4", 40},
};

static const struct opt_cmd usage = {
    "fp4serve", "synth", "[--arch A] [--preset NAME] [--type T] [--seed N] -o OUT.gguf",
    "Write a llama, qwen3 or qwen3moe model with seeded random weights and a small\n"
    "byte-level BPE tokenizer; the same options give a byte-identical file.",
    FP_ERR_USAGE};

int fp4_synth(int argc, char **argv)
{
    const char *preset = NULL, *arch = NULL, *type = "q4_1", *out = NULL;
    long seed = 1;
    const struct opt opts[] = {
        {"arch", 'a', OPT_STR, &arch, "A",
         "architecture: llama|qwen3|qwen3moe|gpt-oss (default: the preset's; alone, its smallest "
         "preset)"},
        {"preset", 'p', OPT_STR, &preset, "NAME",
         "model shape: tiny|smollm2-135m|llama-1b|qwen3-tiny|qwen3moe-tiny|qwen3moe-small"},
        {"type", 't', OPT_STR, &type, "T",
         "weight type: f32|f16|q4_1|q8_0|mxfp4|nvfp4 (default q4_1)"},
        {"seed", 's', OPT_LONG, &seed, "N", "generator seed (default 1)", 0, 9.2e18},
        {"output", 'o', OPT_STR, &out, "OUT.gguf", "file to write (replaced atomically)"},
    };
    struct err err;
    int p = opt_cmd_parse(&usage, opts, OPT_N(opts), argc, argv, NULL, &err);
    if (p == 1)
        return FP_OK;
    struct synth_opts o = {.seed = (uint64_t)seed};
    if (p == 0 && !preset && !arch)
        err_set(&err, FP_ERR_USAGE, "synth needs --preset (%s) or --arch", synth_preset_names());
    if (p == 0 && !out)
        err_set(&err, FP_ERR_USAGE, "synth needs -o OUT.gguf");
    if (!err.code && arch && !synth_preset_for_arch(arch))
        err_set(&err, FP_ERR_USAGE, "unknown --arch '%s' (use llama|qwen3|qwen3moe|gpt-oss)", arch);
    if (!err.code && !preset)
        o.preset = synth_preset_for_arch(arch);
    else if (!err.code && !(o.preset = synth_preset_find(preset)))
        err_set(&err, FP_ERR_USAGE, "unknown preset '%s' (use %s)", preset, synth_preset_names());
    if (!err.code && arch && strcmp(arch, synth_preset_arch(o.preset)) != 0)
        err_set(&err, FP_ERR_USAGE, "--arch %s does not match preset '%s' (a %s model)", arch,
                o.preset->name, synth_preset_arch(o.preset));
    size_t t = 0, n_types = sizeof(synth_types) / sizeof(synth_types[0]);
    while (t < n_types && strcmp(synth_types[t].name, type) != 0)
        t++;
    if (!err.code && t == n_types)
        err_set(&err, FP_ERR_USAGE, "unknown --type '%s' (use f32|f16|q4_1|q8_0|mxfp4|nvfp4)",
                type);
    if (!err.code) {
        o.type = synth_types[t].type;
        synth_write(&o, out, &err);
    }
    if (err.code) {
        log_error("%s", err.msg);
        return err.code;
    }
    return FP_OK;
}
