/*
 * membw: memcpy and multi-threaded streaming-read bandwidth (see membw.h).
 */
#include "model/membw.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "timeutil.h"
#include "xalloc.h"

struct bw_probe {
    const uint64_t *buf;
    size_t words;
    uint64_t sink[64]; /* one per thread, 64 threads at most */
};

static void read_part(void *arg, int ith, int nth)
{
    struct bw_probe *p = arg;
    size_t lo = p->words * ith / nth / 8 * 8, hi = p->words * (ith + 1) / nth / 8 * 8;
    uint64_t a0 = 0, a1 = 0, a2 = 0, a3 = 0, a4 = 0, a5 = 0, a6 = 0, a7 = 0;
    for (size_t i = lo; i < hi; i += 8) {
        a0 ^= p->buf[i];
        a1 ^= p->buf[i + 1];
        a2 ^= p->buf[i + 2];
        a3 ^= p->buf[i + 3];
        a4 ^= p->buf[i + 4];
        a5 ^= p->buf[i + 5];
        a6 ^= p->buf[i + 6];
        a7 ^= p->buf[i + 7];
    }
    if (ith < 64)
        p->sink[ith] = a0 ^ a1 ^ a2 ^ a3 ^ a4 ^ a5 ^ a6 ^ a7;
}

void membw_probe(tp_pool *pool, double *copy_gbs, double *read_gbs)
{
    uint64_t *src = xaligned_alloc(64, MEMBW_PROBE_BYTES),
             *dst = xaligned_alloc(64, MEMBW_PROBE_BYTES);
    memset(src, 1, MEMBW_PROBE_BYTES);
    memset(dst, 2, MEMBW_PROBE_BYTES);
    double best_copy = 1e30, best_read = 1e30;
    struct bw_probe p = {src, MEMBW_PROBE_BYTES / 8, {0}};
    for (int i = 0; i < 3; i++) {
        uint64_t t0 = clock_ns();
        memcpy(dst, src, MEMBW_PROBE_BYTES);
        uint64_t t1 = clock_ns();
        tp_run(pool, read_part, &p);
        uint64_t t2 = clock_ns();
        best_copy = (double)(t1 - t0) < best_copy ? (double)(t1 - t0) : best_copy;
        best_read = (double)(t2 - t1) < best_read ? (double)(t2 - t1) : best_read;
    }
    *copy_gbs = 2.0 * MEMBW_PROBE_BYTES / best_copy;
    *read_gbs = (double)MEMBW_PROBE_BYTES / best_read;
    free(src);
    free(dst);
}
