/*
 * dataset: prompt sets for the built-in client. Two file formats:
 *   jsonl     one JSON object per line: {"prompt": "text"} or {"messages":
 *             [{"role": "user", "content": "text"}, ...]}, with an optional
 *             "output_len" (integer, tokens); other keys are ignored, blank
 *             lines too;
 *   sharegpt  a JSON list of {"conversations": [{"from": "human", "value":
 *             "..."}, {"from": "gpt", "value": "..."}, ...]}: the first human
 *             turn is the prompt and the reply after it gives the output
 *             length (its words), as vLLM and SGLang take ShareGPT.
 * A malformed entry is an error naming file:line (jsonl) or the entry's
 * index (sharegpt), as are a key given twice in one object, a "\u0000" in
 * a string and a chat role other than system, developer, user, assistant
 * or tool; a ShareGPT entry without a human turn and a reply is
 * skipped, counted, and the first such index kept for the report. Requests
 * take entries in a seeded shuffled order, so the same seed sends the same
 * prompts in the same order.
 */
#ifndef RUNNER_DATASET_H
#define RUNNER_DATASET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "err.h"

#define DS_MAX_FILE_BYTES ((uint64_t)1 << 30) /* bytes; a bigger file is refused */
#define DS_MAX_FILE_TEXT  "1 GiB"
#define DS_MAX_LINE_BYTES ((size_t)64 << 20) /* bytes in one JSONL line (one entry) */
#define DS_MAX_LINE_TEXT  "64 MiB"
#define DS_MAX_ENTRIES    10000000 /* entries kept */

enum ds_kind {
    DS_RANDOM,   /* no file: random prompts (loadgen's own) */
    DS_JSONL,    /* one object per line */
    DS_SHAREGPT, /* ShareGPT's JSON list of conversations */
};

struct ds_entry {
    char *prompt;      /* owned; the prompt text (for messages: the contents joined by '\n') */
    char *messages;    /* owned; the messages list as compact JSON, NULL for a text prompt */
    long prompt_words; /* words (runs of non-space) in prompt: the requested input length */
    long output_len;   /* tokens, from the entry; -1 when it gives none */
};

struct ds_set {
    enum ds_kind kind;
    char *path;         /* owned */
    struct ds_entry *e; /* owned; n of them, in file order */
    size_t n;
    size_t *order;      /* owned; the seeded permutation of 0..n-1 */
    size_t n_skipped;   /* sharegpt entries without a prompt and a reply */
    long first_skipped; /* index of the first one, -1 when none */
    char sha256[65];    /* hex digest of the file's bytes, as read */
};

/* "random" / "jsonl" / "sharegpt" -> kind, or -1. */
int ds_kind_parse(const char *name);
const char *ds_kind_name(enum ds_kind kind);

/*
 * Read path as kind (DS_JSONL or DS_SHAREGPT) and shuffle with seed. The
 * file is read once, in chunks (never held whole), and must be a regular
 * file of at most DS_MAX_FILE_BYTES (1 GiB), a JSONL line at most
 * DS_MAX_LINE_BYTES (64 MiB); a FIFO, socket or device is refused before
 * any read, so it cannot block. ds->sha256 is the file's digest. Returns
 * 0 with ds filled (release with ds_release), or -1 with err set: code
 * io_code when the file cannot be read, bad_code for a malformed file or
 * entry (message "path:LINE: ..." or "path: entry N: ..."), or no entries.
 */
int ds_load(const char *path, enum ds_kind kind, uint64_t seed, struct ds_set *ds, struct err *err,
            int io_code, int bad_code);

/* The entry request `index` sends; warmup requests walk the order from its
 * other end, so measured prompts do not depend on the warmup count. */
const struct ds_entry *ds_pick(const struct ds_set *ds, size_t index, bool warmup);

void ds_release(struct ds_set *ds);

#endif
