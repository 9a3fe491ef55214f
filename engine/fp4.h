/*
 * fp4: fp4serve's exit statuses and its subcommands. main.c dispatches
 * over a table of these; each fp4_* gets the arguments after its name and
 * returns the process exit status.
 */
#ifndef ENGINE_FP4_H
#define ENGINE_FP4_H

/* Exit statuses; numbers are never reused for another meaning. */
enum fp_err {
    FP_OK = 0,
    FP_ERR_USAGE = 2,       /* bad command line or request parameters */
    FP_ERR_IO = 3,          /* file missing, unreadable or unwritable */
    FP_ERR_FORMAT = 4,      /* corrupt or truncated GGUF, bad metadata */
    FP_ERR_UNSUPPORTED = 5, /* architecture, tensor type or tokenizer we do not run */
    FP_ERR_ADDR = 6,        /* cannot listen: port in use, bad address */
    FP_ERR_DEVICE = 7,      /* --device cuda without a GPU or a CUDA build */
    FP_ERR_RESOURCE = 8,    /* context or batch does not fit in memory */
    FP_ERR_INTERRUPTED = 130,
};

int fp4_serve(int argc, char **argv);
int fp4_generate(int argc, char **argv);
int fp4_bench(int argc, char **argv);
int fp4_quantize(int argc, char **argv);
int fp4_eval(int argc, char **argv);
int fp4_synth(int argc, char **argv);
int fp4_info(int argc, char **argv);
int fp4_export(int argc, char **argv);

#endif
