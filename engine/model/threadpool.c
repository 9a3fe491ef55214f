/*
 * threadpool: persistent workers, a sense-reversing barrier that spins
 * briefly and then sleeps on a futex, and the same spin-then-sleep wait
 * for the start of a run. See threadpool.h for the contract.
 */
#include "model/threadpool.h"

#include <linux/futex.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "log.h"
#include "timeutil.h"
#include "xalloc.h"

/* How long a barrier waiter spins before it sleeps on a futex (25 us:
 * longer than a balanced section's skew). Sleeping rather than spinning on
 * keeps an oversubscribed machine (more runnable threads than cores) from
 * burning the time slice that the awaited thread needs. An idle worker
 * spins longer (IDLE_SPIN_NS, 100 us) before sleeping, since the next step
 * usually follows within microseconds; a server's HTTP thread needs the
 * core after that. Measured in time, not in pause instructions: a pause takes ~50 ns
 * on Zen 4 but ~10 ns on a Sapphire Rapids VM, where 500 pauses were 5 us
 * and a waiter slept (and was woken, tens of us later) at most of the
 * ~300 barriers of a step: SmolLM2 B=1 decode ran at half its speed. */
#define SPIN_NS      25000
#define IDLE_SPIN_NS 100000

/* Each hot atomic on its own cache line, so waiters do not false-share. */
struct tp_pool {
    _Alignas(64) atomic_uint gen;       /* bumped by tp_run to start a run; futex word */
    _Alignas(64) atomic_int n_arrived;  /* threads at the current barrier */
    _Alignas(64) atomic_uint phase;     /* bumped when a barrier opens; futex word */
    _Alignas(64) atomic_int n_sleeping; /* workers asleep on gen */
    _Alignas(64) atomic_int n_bsleep;   /* threads asleep on phase */
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

/*
 * Wait until *word differs from seen: spin for spin_ns, then sleep.
 * The sleeper count and the word are both accessed seq_cst, and the waker
 * changes the word before reading the count, so either the waker sees a
 * sleeper (and wakes it) or the sleeper sees the new word (and never
 * sleeps); futex_wait itself returns at once if the word already changed.
 */
static unsigned wait_change(atomic_uint *word, atomic_int *sleepers, unsigned seen,
                            uint64_t spin_ns)
{
    unsigned v;
    uint64_t t0 = 0;
    for (unsigned i = 0;; i++) {
        if ((v = atomic_load_explicit(word, memory_order_acquire)) != seen)
            return v;
        cpu_relax();
        if (i % 64 == 63) { /* the clock every 64 pauses (~0.6 to 3 us) */
            uint64_t now = clock_ns();
            if (t0 == 0)
                t0 = now;
            else if (now - t0 >= spin_ns)
                break;
        }
    }
    for (;;) {
        atomic_fetch_add(sleepers, 1);
        if (atomic_load(word) == seen)
            futex_wait(word, seen);
        atomic_fetch_sub(sleepers, 1);
        if ((v = atomic_load(word)) != seen)
            return v;
    }
}

/* Change *word and wake whoever sleeps on it. */
static void bump(atomic_uint *word, atomic_int *sleepers)
{
    atomic_fetch_add(word, 1);
    if (atomic_load(sleepers) > 0)
        futex_wake_all(word);
}

static void *worker_main(void *varg)
{
    struct worker_arg *wa = varg;
    tp_pool *p = wa->p;
    int ith = wa->ith;
    free(wa);
    unsigned seen = 0;
    for (;;) {
        seen = wait_change(&p->gen, &p->n_sleeping, seen, IDLE_SPIN_NS);
        if (atomic_load_explicit(&p->stop, memory_order_acquire))
            break;
        p->fn(p->arg, ith, p->n);
        tp_barrier(p); /* a run ends when every thread is here */
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
    atomic_init(&p->n_arrived, 0);
    atomic_init(&p->phase, 0);
    atomic_init(&p->n_sleeping, 0);
    atomic_init(&p->n_bsleep, 0);
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
            log_warn("thread pool: cannot start thread %d of %d (error %d); using %d", i + 1,
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
    atomic_store(&p->stop, true);
    bump(&p->gen, &p->n_sleeping);
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
    bump(&p->gen, &p->n_sleeping);
    fn(arg, 0, p->n);
    tp_barrier(p);
}

void tp_barrier(tp_pool *p)
{
    if (p->n == 1)
        return;
    unsigned ph = atomic_load_explicit(&p->phase, memory_order_acquire);
    if (atomic_fetch_add_explicit(&p->n_arrived, 1, memory_order_acq_rel) == p->n - 1) {
        atomic_store_explicit(&p->n_arrived, 0, memory_order_relaxed);
        bump(&p->phase, &p->n_bsleep);
        return;
    }
    wait_change(&p->phase, &p->n_bsleep, ph, SPIN_NS);
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
