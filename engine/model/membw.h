/*
 * membw: this machine's memory bandwidth, measured. `fp4serve bench` prints
 * it beside the weight bytes a decode step reads; `fp4serve serve
 * --probe-bandwidth` reports it in /v1/models and /metrics, so a benchmark
 * can set the step time against the time to read the weights once.
 */
#ifndef ENGINE_MEMBW_H
#define ENGINE_MEMBW_H

#include "model/threadpool.h"

#define MEMBW_PROBE_BYTES ((size_t)256 << 20) /* well past any L3 */

/* Best of 3 over two MEMBW_PROBE_BYTES buffers: memcpy GB/s on one thread
 * (read + write bytes counted) and streaming-read GB/s on every thread of
 * pool. Takes about a second and 512 MiB while it runs. */
void membw_probe(tp_pool *pool, double *copy_gbs, double *read_gbs);

#endif
