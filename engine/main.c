/*
 * fp4serve: a compact LLM inference server for GGUF models with MXFP4 and
 * NVFP4 weights. This file only dispatches to the subcommand table; see
 * engine/README.md for a tour of the modules.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "fp4.h"
#include "log.h"
#include "version.h"

struct command {
    const char *name;
    int (*fn)(int argc, char **argv);
    const char *synopsis;
};

static const struct command commands[] = {
    {"serve", fp4_serve, "OpenAI-compatible streaming server with continuous batching"},
    {"generate", fp4_generate, "greedy generation from a prompt; prints text and token ids"},
    {"bench", fp4_bench, "offline decode throughput per batch size (no HTTP)"},
    {"quantize", fp4_quantize, "requantize a GGUF file to MXFP4 or NVFP4"},
    {"eval", fp4_eval, "perplexity over a text; KL divergence against native weights"},
    {"synth", fp4_synth, "write a seeded random-weight model of a given shape"},
    {"info", fp4_info, "architecture, hyperparameters, tokenizer and tensors of a GGUF file"},
    {"export-tokenizer", fp4_export, "write the GGUF's tokenizer as Hugging Face tokenizer files"},
};

/* Every enum fp_err value (fp4.h) and what it means; --help prints them.
 * tests/integration/fp4_help.sh checks it against fp4.h. */
static const struct {
    enum fp_err code;
    const char *what;
} statuses[] = {
    {FP_OK, "ok"},
    {FP_ERR_USAGE, "usage error (bad flag or value)"},
    {FP_ERR_IO, "I/O error (file missing, unreadable or unwritable)"},
    {FP_ERR_FORMAT, "corrupt or truncated GGUF, bad metadata"},
    {FP_ERR_UNSUPPORTED, "unsupported architecture, tensor type or tokenizer"},
    {FP_ERR_ADDR, "cannot listen (port in use, bad address)"},
    {FP_ERR_DEVICE, "device error (--device cuda without a GPU or a CUDA build)"},
    {FP_ERR_RESOURCE, "out of resources (context or batch does not fit in memory)"},
    {FP_ERR_INTERRUPTED, "interrupted"},
};

static void usage(FILE *f)
{
    fprintf(f, "usage: fp4serve COMMAND [ARGS]   (fp4serve COMMAND --help for details)\n\n"
               "commands:\n");
    int w = 0; /* the longest name sets the column */
    for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
        if ((int)strlen(commands[i].name) > w)
            w = (int)strlen(commands[i].name);
    for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
        fprintf(f, "  %-*s  %s\n", w, commands[i].name, commands[i].synopsis);
    fprintf(f, "\nexit status:\n");
    for (size_t i = 0; i < sizeof(statuses) / sizeof(statuses[0]); i++)
        fprintf(f, "  %3d  %s\n", (int)statuses[i].code, statuses[i].what);
}

/* status, unless stdout could not be written: text, ids, a table, help or
 * the version that did not reach it (a full disk, /dev/full) is an I/O
 * error, not a success (docs/reliability.md W3-N15). */
static int stdout_checked(int status)
{
    errno = 0;
    if (fflush(stdout) != 0 || ferror(stdout)) {
        log_error("output to stdout could not be written%s%s", errno ? ": " : "",
                  errno ? strerror(errno) : "");
        if (status == FP_OK)
            status = FP_ERR_IO;
    }
    return status;
}

int main(int argc, char **argv)
{
    log_setup("fp4serve", LOG_INFO, 0);
    if (argc < 2) {
        usage(stderr);
        return FP_ERR_USAGE;
    }
    const char *name = argv[1];
    if (strcmp(name, "--help") == 0 || strcmp(name, "-h") == 0 || strcmp(name, "help") == 0) {
        usage(stdout);
        return stdout_checked(FP_OK);
    }
    if (strcmp(name, "--version") == 0 || strcmp(name, "version") == 0) {
        printf("fp4serve %s\n", BUILD_VERSION);
        return stdout_checked(FP_OK);
    }
    for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
        if (strcmp(commands[i].name, name) == 0)
            return stdout_checked(commands[i].fn(argc - 2, argv + 2));
    fprintf(stderr, "fp4serve: unknown command '%s'\n", name);
    usage(stderr);
    return FP_ERR_USAGE;
}
