/*
 * glossary: what TTFT, TPOT, ITL, E2E and the other canonical quantities
 * mean in sweep, and what each preset's tool calls them. One table: `sweep
 * check --metrics` prints it, the README carries its output (a test keeps
 * the two equal), and a unit test checks every preset's rows against it,
 * so that AIPerf's "Inter Token Latency" (our TPOT) cannot drift into
 * median_itl_ms.
 */
#ifndef RUNNER_GLOSSARY_H
#define RUNNER_GLOSSARY_H

#include <stddef.h>
#include <stdio.h>

#define GLOSS_N_PRESETS 8 /* the presets of ext_preset_names(), in its order */

struct gloss_entry {
    const char *quantity;              /* "TPOT" */
    const char *check;                 /* a canonical metric whose preset rows must name the tool's
                                          term ("median_tpot_ms"); NULL = no canonical name */
    const char *ours;                  /* our names, as the table shows them */
    const char *meaning;               /* one line */
    const char *tool[GLOSS_N_PRESETS]; /* each preset's term, "" = the tool has none
                                          that sweep reads */
};

/* The entries in display order; n set to the count. */
const struct gloss_entry *gloss_entries(size_t *n);

/* Print the table as Markdown (the README block is this output). */
void gloss_print(FILE *f);

#endif
