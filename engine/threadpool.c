/*
 * threadpool: persistent workers, a sense-reversing spin barrier, and a
 * futex for the idle wait between runs. See threadpool.h for the contract.
 */
#include "threadpool.h"

#include <errno.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <stdlib.h>
#include <stdatomic.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "log.h"
#include "timeutil.h"
#include "xalloc.h"

/* Spins (pause instructions) before a waiter starts yielding the CPU, and
 * yields before an idle worker sleeps on the futex. On an oversubscribed
 * machine yielding keeps a spinning thread from starving the one it waits
 * for. */
#define SPIN_PAUSES 4000
#define IDLE_YIELDS 2000

/* Each hot atomic on its own cache line, so waiters do not false-share. */
struct tp_pool {
    _Alignas(64) atomic_uint gen;       /* bumped by tp_run to start a run; futex word */
    _Alignas(64) atomic_int n_done;     /* workers finished with the current run */
    _Alignas(64) atomic_int n_arrived;  /* threads at the current barrier */
    _Alignas(64) atomic_uint phase;     /* bumped when a barrier opens */
    _Alignas(64) atomic_int n_sleeping; /* workers blocked on gen */
    tp_fn fn;                           /* current work (written before gen is bumped) */
    void *arg;
    int n; /* threads, caller included */
    atomic_bool stop;
    pthread_t *threads; /* (n - 1) workers, owned */
};

struct worker_arg {
    tp_pool *p;
    int ith;
};

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

static void futex_wait(atomic_uint *addr, unsigned expected)
{
    syscall(SYS_futex, (unsigned *)addr, FUTEX_WAIT_PRIVATE, expected, NULL, NULL, 0);
}

static void futex_wake_all(atomic_uint *addr)
{
    syscall(SYS_futex, (unsigned *)addr, FUTEX_WAKE_PRIVATE, 0x7fffffff, NULL, NULL, 0);
}

/* Wait until *gen differs from seen: spin, then yield, then sleep. */
static unsigned wait_gen(tp_pool *p, unsigned seen)
{
    unsigned g;
    for (int i = 0; i < SPIN_PAUSES; i++) {
        if ((g = atomic_load_explicit(&p->gen, memory_order_acquire)) != seen)
            return g;
        cpu_relax();
    }
    for (int i = 0; i < IDLE_YIELDS; i++) {
        if ((g = atomic_load_explicit(&p->gen, memory_order_acquire)) != seen)
            return g;
        sched_yield();
    }
    for (;;) {
        atomic_fetch_add(&p->n_sleeping, 1);
        g = atomic_load_explicit(&p->gen, memory_order_acquire);
        if (g == seen)
            futex_wait(&p->gen, seen);
        atomic_fetch_sub(&p->n_sleeping, 1);
        if ((g = atomic_load_explicit(&p->gen, memory_order_acquire)) != seen)
            return g;
    }
}

static void *worker_main(void *varg)
{
    struct worker_arg *wa = varg;
    tp_pool *p = wa->p;
    int ith = wa->ith;
    free(wa);
    unsigned seen = 0;
    for (;;) {
        seen = wait_gen(p, seen);
        if (atomic_load_explicit(&p->stop, memory_order_acquire))
            break;
        p->fn(p->arg, ith, p->n);
        atomic_fetch_add_explicit(&p->n_done, 1, memory_order_release);
    }
    return NULL;
}

int tp_online_cores(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

tp_pool *tp_new(int n_threads)
{
    if (n_threads <= 0)
        n_threads = tp_online_cores();
    tp_pool *p = xaligned_alloc(64, sizeof(*p));
    atomic_init(&p->gen, 0);
    atomic_init(&p->n_done, 0);
    atomic_init(&p->n_arrived, 0);
    atomic_init(&p->phase, 0);
    atomic_init(&p->n_sleeping, 0);
    atomic_init(&p->stop, false);
    p->fn = NULL;
    p->arg = NULL;
    p->threads = xcalloc((size_t)n_threads, sizeof(*p->threads));
    p->n = 1;
    for (int i = 1; i < n_threads; i++) {
        struct worker_arg *wa = xmalloc(sizeof(*wa));
        wa->p = p;
        wa->ith = i;
        int rc = pthread_create(&p->threads[i - 1], NULL, worker_main, wa);
        if (rc != 0) {
            free(wa);
            log_warn("thread pool: cannot start thread %d of %d (errno %d); using %d", i + 1,
                     n_threads, rc, p->n);
            break;
        }
        p->n++;
    }
    return p;
}

void tp_free(tp_pool *p)
{
    if (!p)
        return;
    atomic_store_explicit(&p->stop, true, memory_order_release);
    atomic_fetch_add_explicit(&p->gen, 1, memory_order_acq_rel);
    futex_wake_all(&p->gen);
    for (int i = 0; i < p->n - 1; i++)
        pthread_join(p->threads[i], NULL);
    free(p->threads);
    free(p);
}

int tp_threads(const tp_pool *p)
{
    return p->n;
}

void tp_run(tp_pool *p, tp_fn fn, void *arg)
{
    if (p->n == 1) {
        fn(arg, 0, 1);
        return;
    }
    p->fn = fn;
    p->arg = arg;
    atomic_store_explicit(&p->n_done, 0, memory_order_relaxed);
    atomic_fetch_add_explicit(&p->gen, 1, memory_order_acq_rel);
    if (atomic_load_explicit(&p->n_sleeping, memory_order_acquire) > 0)
        futex_wake_all(&p->gen);
    fn(arg, 0, p->n);
    int want = p->n - 1;
    for (int i = 0; atomic_load_explicit(&p->n_done, memory_order_acquire) != want; i++) {
        if (i < SPIN_PAUSES)
            cpu_relax();
        else
            sched_yield();
    }
}

void tp_barrier(tp_pool *p)
{
    if (p->n == 1)
        return;
    unsigned ph = atomic_load_explicit(&p->phase, memory_order_acquire);
    if (atomic_fetch_add_explicit(&p->n_arrived, 1, memory_order_acq_rel) == p->n - 1) {
        atomic_store_explicit(&p->n_arrived, 0, memory_order_relaxed);
        atomic_fetch_add_explicit(&p->phase, 1, memory_order_acq_rel);
        return;
    }
    for (int i = 0; atomic_load_explicit(&p->phase, memory_order_acquire) == ph; i++) {
        if (i < SPIN_PAUSES)
            cpu_relax();
        else
            sched_yield();
    }
}

struct measure_arg {
    tp_pool *p;
    int rounds;
};

static void barrier_loop(void *varg, int ith, int nth)
{
    struct measure_arg *m = varg;
    for (int i = 0; i < m->rounds; i++)
        tp_barrier(m->p);
}

static void empty_fn(void *arg, int ith, int nth)
{
}

void tp_measure(tp_pool *p, int rounds, double *barrier_ns, double *run_ns)
{
    struct measure_arg m = {p, rounds};
    tp_run(p, empty_fn, NULL); /* wake the workers first */
    uint64_t t0 = clock_ns();
    tp_run(p, barrier_loop, &m);
    uint64_t t1 = clock_ns();
    for (int i = 0; i < rounds; i++)
        tp_run(p, empty_fn, NULL);
    uint64_t t2 = clock_ns();
    *barrier_ns = (double)(t1 - t0) / rounds;
    *run_ns = (double)(t2 - t1) / rounds;
}
