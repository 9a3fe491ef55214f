/*
 * threadpool: persistent workers for the CPU forward pass. One tp_run per
 * model step runs the same function on every thread (the caller is thread
 * 0); inside it, tp_barrier separates the ~300 parallel sections of a step.
 * Workers spin briefly, then yield, then sleep on a futex, so a section
 * costs a few hundred nanoseconds of synchronisation rather than a condvar
 * wake-up, and an idle pool uses no CPU.
 */
#ifndef ENGINE_THREADPOOL_H
#define ENGINE_THREADPOOL_H

#include <stdint.h>

typedef struct tp_pool tp_pool;

/* The work function: called once on each of nth threads with ith in [0, nth). */
typedef void (*tp_fn)(void *arg, int ith, int nth);

/* Start a pool of n_threads threads in total, the caller included (n_threads
 * - 1 workers). n_threads <= 0 means the number of online cores. Aborts (via
 * xalloc) on allocation failure; thread creation failure shrinks the pool
 * and is logged. */
tp_pool *tp_new(int n_threads);
/* Stop and join the workers. tp_free(NULL) is a no-op. */
void tp_free(tp_pool *p);
/* Threads in the pool, the caller included. */
int tp_threads(const tp_pool *p);

/* Run fn(arg, ith, nth) on every thread and return when all have returned.
 * Not reentrant: one tp_run at a time per pool, from one caller thread. */
void tp_run(tp_pool *p, tp_fn fn, void *arg);

/* Called by every thread inside fn: returns once all nth threads arrived.
 * Memory written before the barrier is visible to every thread after it. */
void tp_barrier(tp_pool *p);

/* Online cores (sysconf), at least 1. */
int tp_online_cores(void);

/* Average cost of one barrier and of one empty tp_run, measured over
 * `rounds` repetitions (for the bench's report). */
void tp_measure(tp_pool *p, int rounds, double *barrier_ns, double *run_ns);

#endif
