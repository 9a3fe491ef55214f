/*
 * runner_dataset fuzz target: prompt files (JSONL and ShareGPT) from any
 * bytes. Each input is read as both kinds; a file that loads must give
 * entries with text, a permutation for their order, and request bodies
 * (chat and completions, with a length distribution) that are valid JSON
 * carrying the entry's prompt. A failure must say where. Anything else, or
 * a memory error, is a crash.
 */
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "xalloc.h"

#include "client/dataset.h"
#include "client/lengths.h"
#include "client/loadgen.h"

/* The input as a file (ds_load reads paths), once per process. */
static const char *as_file(const uint8_t *data, size_t size)
{
    static char path[64];
    if (!path[0])
        snprintf(path, sizeof(path), "/tmp/sweep-fuzz-dataset-%d", (int)getpid());
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(data, 1, size, f) != size || fclose(f) != 0)
        abort();
    return path;
}

static void check_bodies(const struct ds_set *ds)
{
    struct lg_config cfg = {.output_len = 8, .seed = 3, .dataset = ds};
    struct err err;
    err_init(&err);
    if (len_parse("normal:50:20:1:99", "x", &cfg.out_dist, &err, 2) != 0)
        abort();
    const char *endpoints[] = {"/v1/completions", "/v1/chat/completions"};
    for (int e = 0; e < 2; e++) {
        cfg.endpoint = endpoints[e];
        for (size_t i = 0; i < 4; i++) {
            struct buf b;
            long in, out;
            buf_init(&b, (size_t)1 << 31);
            lg_build_body_len(&cfg, i, i == 3, &b, &in, &out);
            json_t *j = json_loadb(b.data, b.len, 0, NULL);
            const struct ds_entry *en = ds_pick(ds, i, i == 3);
            if (!j || in != en->prompt_words || out < 1 ||
                json_integer_value(json_object_get(j, "max_tokens")) != out)
                abort();
            if (e == 0 && strcmp(json_string_value(json_object_get(j, "prompt")), en->prompt) != 0)
                abort();
            if (e == 1 && !json_is_array(json_object_get(j, "messages")))
                abort();
            json_decref(j);
            buf_release(&b);
        }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *path = as_file(data, size);
    for (int kind = DS_JSONL; kind <= DS_SHAREGPT; kind++) {
        struct ds_set ds;
        struct err err;
        err_init(&err);
        if (ds_load(path, (enum ds_kind)kind, size, &ds, &err, 3, 2) != 0) {
            if (err.code != 2 || !strstr(err.msg, path) || strchr(err.msg, '\n'))
                abort(); /* a bad file is named, on one line */
            continue;
        }
        if (ds.n == 0)
            abort();
        unsigned char *seen = xcalloc(ds.n, 1);
        for (size_t i = 0; i < ds.n; i++) {
            if (ds.order[i] >= ds.n || seen[ds.order[i]]++ || !ds.e[i].prompt ||
                ds.e[i].prompt_words < 1)
                abort();
        }
        free(seen);
        check_bodies(&ds);
        ds_release(&ds);
    }
    unlink(path);
    return 0;
}
