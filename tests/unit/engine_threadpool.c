/* Unit tests for engine/model/threadpool: every thread runs, barriers order
 * memory, runs repeat, and single-thread pools work. */
#include <stdatomic.h>

#include "test.h"

#include "model/threadpool.h"

struct hits {
    atomic_int calls;
    int seen[8];
    int rounds;
    int bad;
    int slots[8];
    tp_pool *p;
};

static void count_fn(void *arg, int ith, int nth)
{
    struct hits *h = arg;
    atomic_fetch_add(&h->calls, 1);
    h->seen[ith] = nth;
}

TEST(every_thread_runs_once)
{
    tp_pool *p = tp_new(4);
    CHECK_INT(tp_threads(p), 4);
    struct hits h = {0};
    for (int r = 0; r < 1000; r++)
        tp_run(p, count_fn, &h);
    CHECK_INT(atomic_load(&h.calls), 4000);
    for (int i = 0; i < 4; i++)
        CHECK_INT(h.seen[i], 4);
    tp_free(p);
}

/* Round i: each thread writes i into its slot, barrier, checks every slot
 * holds i, barrier. A barrier that lets a thread through early fails. */
static void barrier_fn(void *arg, int ith, int nth)
{
    struct hits *h = arg;
    for (int i = 1; i <= h->rounds; i++) {
        h->slots[ith] = i;
        tp_barrier(h->p);
        for (int t = 0; t < nth; t++)
            if (h->slots[t] != i)
                h->bad = 1;
        tp_barrier(h->p);
    }
}

TEST(barrier_orders_memory)
{
    for (int n = 1; n <= 3; n++) {
        tp_pool *p = tp_new(n);
        struct hits h = {.rounds = 5000, .p = p};
        tp_run(p, barrier_fn, &h);
        tp_run(p, barrier_fn, &h);
        CHECK_MSG(!h.bad, "barrier let a thread through early with %d threads", n);
        tp_free(p);
    }
}

TEST(default_is_online_cores_and_free_null)
{
    tp_pool *p = tp_new(0);
    CHECK_INT(tp_threads(p), tp_online_cores());
    double bar, run;
    tp_measure(p, 100, &bar, &run);
    CHECK(bar > 0 && run > 0);
    tp_free(p);
    tp_free(NULL);
}

TEST_MAIN()
