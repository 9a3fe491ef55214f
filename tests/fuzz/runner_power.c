/*
 * runner_power fuzz target: the power samples reader (analysis/power.c),
 * fed whatever nvidia-smi or a cut file may hold. Any input summarises
 * without a memory error; the mean power and the span are finite and not
 * negative; the devices counted never exceed the lines; and the input with
 * every line that is not a sample removed gives the same summary.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/power.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > (1u << 16))
        return 0;
    const char *text = (const char *)data;
    double w, span, w2, span2;
    size_t skipped, skipped2, lines = 1;
    for (size_t i = 0; i < size; i++)
        lines += data[i] == '\n';
    size_t n = power_summarise(text, size, &w, &span, &skipped);
    if (!isfinite(w) || w < 0 || !isfinite(span) || span < 0 || n + skipped > lines)
        abort();
    /* keep only the lines that are samples on their own: same summary */
    char *kept = malloc(size + 1); /* allow: fuzz harness */
    size_t k = 0;
    for (size_t at = 0; at < size;) {
        const char *nl = memchr(text + at, '\n', size - at);
        size_t len = nl ? (size_t)(nl - (text + at)) + 1 : size - at;
        double lw, ls;
        size_t lsk;
        if (power_summarise(text + at, len, &lw, &ls, &lsk) == 1) {
            memcpy(kept + k, text + at, len);
            k += len;
            if (kept[k - 1] != '\n')
                kept[k++] = '\n';
        }
        at += len;
    }
    size_t n2 = power_summarise(kept, k, &w2, &span2, &skipped2);
    if (n >= 64) /* the reader's device cap (power.c MAX_DEVICES) skips lines that alone pass */
        goto out;
    if (n2 != n || skipped2 != 0 || (n && (fabs(w2 - w) > 1e-9 * (1 + fabs(w)) || span2 != span)))
        abort();
out:
    free(kept);
    return 0;
}
