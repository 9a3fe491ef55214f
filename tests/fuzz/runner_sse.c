/*
 * runner_sse fuzz target: the SSE parser and the stream reader must give
 * the same result for every split of the same bytes. Each input is parsed
 * whole, byte by byte, at pseudo-random cuts derived from the input, and
 * (for inputs up to 1 KiB) cut once at every position; any difference, or
 * any memory error, is a crash.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client/sse.h"
#include "client/stream.h"

#define CAP 4096

/* FNV-1a over every event (type, data, separators): equal hashes, same events. */
struct digest {
    uint64_t h;
    size_t n;
};

static void mix(struct digest *d, const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++)
        d->h = (d->h ^ b[i]) * 0x100000001b3ull;
}

static int on_event(void *ctx, const struct sse_event *ev)
{
    struct digest *d = ctx;
    if (ev->data[ev->data_len] != '\0')
        abort();
    mix(d, ev->type, strlen(ev->type) + 1);
    mix(d, &ev->data_len, sizeof(ev->data_len));
    mix(d, ev->data, ev->data_len);
    d->n++;
    return 0;
}

struct outcome {
    struct digest d;
    int status;
    int pending;
    /* the stream reader's view */
    int verdict;
    size_t chunks;
    long usage_c, usage_p;
    int done, finished;
};

/* Parse data cut at offsets produced by next_cut (returns 0 to stop cutting). */
static struct outcome run(const uint8_t *data, size_t size, const size_t *cuts, size_t n_cuts)
{
    struct outcome o;
    memset(&o, 0, sizeof(o));
    o.d.h = 0xcbf29ce484222325ull;
    struct sse_parser p;
    sse_init(&p, CAP);
    struct stream st;
    stream_init(&st, CAP, 64);
    size_t at = 0;
    for (size_t i = 0; i <= n_cuts; i++) {
        size_t end = i < n_cuts ? cuts[i] : size;
        o.status = sse_feed(&p, (const char *)data + at, end - at, on_event, &o.d);
        stream_feed(&st, (const char *)data + at, end - at, 1000 + i);
        at = end;
    }
    o.pending = sse_pending(&p);
    o.verdict = stream_end(&st);
    o.chunks = st.n_chunks;
    o.usage_c = st.usage_completion;
    o.usage_p = st.usage_prompt;
    o.done = st.done;
    o.finished = st.finished;
    if (st.n_stored > st.n_chunks || st.n_stored > 64)
        abort();
    stream_release(&st);
    sse_release(&p);
    return o;
}

static void same(const struct outcome *a, const struct outcome *b, const char *how)
{
    if (a->d.h != b->d.h || a->d.n != b->d.n || a->status != b->status ||
        a->pending != b->pending || a->verdict != b->verdict || a->chunks != b->chunks ||
        a->usage_c != b->usage_c || a->usage_p != b->usage_p || a->done != b->done ||
        a->finished != b->finished) {
        fprintf(stderr, "runner_sse: result differs when split %s\n", how);
        abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > (1u << 16))
        return 0;
    struct outcome whole = run(data, size, NULL, 0);
    size_t *cuts = calloc(size + 1, sizeof(*cuts)); /* allow: fuzz harness */

    for (size_t k = 1; k < size; k++)
        cuts[k - 1] = k;
    struct outcome bytes = run(data, size, cuts, size ? size - 1 : 0);
    same(&whole, &bytes, "byte by byte");

    /* cuts derived from the input itself, so the replay is deterministic */
    uint64_t h = 0x9e3779b97f4a7c15ull ^ size;
    for (size_t i = 0; i < size; i++)
        h = (h ^ data[i]) * 0x100000001b3ull;
    size_t n = 0;
    for (size_t at = 0;;) {
        h ^= h << 13, h ^= h >> 7, h ^= h << 17;
        at += 1 + h % 7;
        if (at >= size)
            break;
        cuts[n++] = at;
    }
    struct outcome ragged = run(data, size, cuts, n);
    same(&whole, &ragged, "at pseudo-random cuts");

    if (size <= 1024)
        for (size_t k = 1; k < size; k++) {
            cuts[0] = k;
            struct outcome one = run(data, size, cuts, 1);
            same(&whole, &one, "once");
        }
    free(cuts);
    return 0;
}
