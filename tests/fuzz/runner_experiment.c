/*
 * Fuzz target: experiment files. Any bytes must either load or fail with a
 * one-line message; whatever loads must dump to YAML that loads back to
 * the same dump (so results/.../experiment.yaml can always be re-read).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/experiment.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct experiment e, again;
    struct err err;
    err_init(&err);
    if (exp_load_string("fuzz.yaml", (const char *)data, size, &e, &err) != 0) {
        if (!err.code || strchr(err.msg, '\n')) {
            fprintf(stderr, "bad error report (code %d): %s\n", err.code, err.msg);
            abort();
        }
        return 0;
    }
    struct buf d1, d2;
    buf_init(&d1, (size_t)8 << 20);
    buf_init(&d2, (size_t)8 << 20);
    exp_dump_yaml(&e, &d1);
    err_init(&err);
    if (exp_load_string("fuzz.yaml", d1.data, d1.len, &again, &err) != 0) {
        fprintf(stderr, "the dump does not load: %s\n%s\n", err.msg, d1.data);
        abort();
    }
    exp_dump_yaml(&again, &d2);
    if (d1.len != d2.len || memcmp(d1.data, d2.data, d1.len) != 0) {
        fprintf(stderr, "the dump changed on reload:\n%s\n---\n%s\n", d1.data, d2.data);
        abort();
    }
    exp_release(&again);
    exp_release(&e);
    buf_release(&d1);
    buf_release(&d2);
    return 0;
}
