/*
 * Fuzz target: metric extraction over arbitrary log bytes. Every input is
 * read with every preset, the regex ones (and the block finder) and the
 * export ones (JSON, JSONL, CSV: export.c), then ext_shape and ext_require;
 * an input whose first line starts with "re:" also compiles the rest of
 * that line as a user pattern (bad ones must fail cleanly, runaway ones
 * must stop at the limits), and its first line is read as a file-name tag.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "xalloc.h"

#include "client/export.h"
#include "client/extract.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static ext_set *presets[16];
    const char *const *names = ext_preset_names();
    size_t n_presets = 0;
    struct err err;
    while (names[n_presets] && n_presets < 16)
        n_presets++;
    if (!presets[0])
        for (size_t i = 0; i < n_presets; i++) {
            err_init(&err);
            if (ext_new(names[i], NULL, 0, &presets[i], &err) != 0)
                abort();
        }
    const char *text = (const char *)data;
    struct strvec require = STRVEC_INIT;
    strvec_push(&require, "output_throughput");
    strvec_push(&require, "median_tpot_ms");
    for (size_t i = 0; i < n_presets; i++) {
        bool export = xp_find(names[i]) != NULL;
        struct metric_set ms;
        mset_init(&ms);
        err_init(&err);
        struct ext_info info;
        ext_info_init(&info);
        ext_run(presets[i], text, size, &ms, &info, &err);
        err_init(&err);
        ext_require(presets[i], &ms, &info, &require, &err);
        struct buf notes;
        buf_init(&notes, 4096);
        ext_info_notes(&info, &notes);
        buf_release(&notes);
        for (size_t k = 0; k < info.n_unread; k++)
            if (strlen(info.unread[k].text) > EXT_QUOTE_MAX + 3 ||
                info.unread[k].line < (export ? 0 : 1))
                abort(); /* quotes are cut, lines counted from 1 (an export has none) */
        ext_info_release(&info);
        for (size_t k = 0; k < ms.n; k++)
            if (!metric_find(ms.m[k].name))
                abort(); /* presets only produce canonical names */
        mset_release(&ms);
    }
    struct ext_shape shape;
    err_init(&err);
    if (ext_shape(text, size, &shape, &err) == 0 &&
        ((shape.concurrency != -1 && shape.concurrency < 1) ||
         (shape.prompts != -1 && shape.prompts < 1)))
        abort();

    const char *nl = memchr(text, '\n', size);
    size_t first = nl ? (size_t)(nl - text) : size;
    char *line = xstrndup(text, first); /* stops at a NUL byte too */
    long c, p;
    err_init(&err);
    if (ext_tag(NULL, line, &c, &p, &err) != 0)
        abort(); /* the built-in tags always compile */
    if (strncmp(line, "re:", 3) == 0) {
        struct ext_pattern user = {"user", line + 3};
        ext_set *set = NULL;
        err_init(&err);
        if (ext_new("sglang", &user, 1, &set, &err) == 0) {
            struct metric_set ms;
            mset_init(&ms);
            err_init(&err);
            ext_run(set, text, size, &ms, NULL, &err);
            mset_release(&ms);
            ext_free(set);
        }
        err_init(&err);
        ext_tag(line + 3, "sweep_c16-n48.log", &c, &p, &err);
    }
    free(line);
    strvec_release(&require);
    return 0;
}
