/*
 * bench/kernels: q_matmul throughput per weight type, shape, batch size,
 * thread count and kernel table, side by side in one run: GB/s of weight
 * bytes streamed and GFLOP/s. Weights are cycled over enough copies to leave
 * the caches, as in a real decode step. A second section runs every matrix
 * of a SmolLM2-135M-shaped model (30 layers + tied head) once per "token"
 * and reports matmul-only tokens/s at batch 1.
 *
 * usage: kernels [--types q4_1,mxfp4] [--isa portable,avx2,avx512] [--batch 1,4,16,64,256]
 *                [--threads 1,2] [--shapes ffn_up,ffn_down,head] [--ms 150] [--model 0|1]
 */
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "xalloc.h"

#include "cpu/matmul.h"
#include "format/quant.h"

#define MAX_LIST     16
#define STREAM_BYTES (192ull << 20) /* weight copies cycled per measurement */

struct shape {
    const char *name;
    int64_t rows, cols;
};
static const struct shape shapes[] = {
    {"ffn_up", 1536, 576},   /* 576 -> 1536 (gate and up) */
    {"ffn_down", 576, 1536}, /* 1536 -> 576 */
    {"head", 49152, 576},    /* tied embedding as the output head */
    {"exp_up", 256, 512},    /* qwen3moe-small expert: 512 -> 256 (gate and up) */
    {"exp_down", 512, 256},  /* qwen3moe-small expert: 256 -> 512 */
};

static double clock_s(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}
/* Single-thread cells use the thread's CPU time: on a shared machine the time
 * the thread spends descheduled is not the kernel's. Two-thread cells need
 * wall time (the threads wait for each other). */
static double cell_clock(int nthreads)
{
    return clock_s(nthreads == 1 ? CLOCK_THREAD_CPUTIME_ID : CLOCK_MONOTONIC);
}
#define ROUNDS 10

static uint64_t rng = 88172645463325252ull;
static float gauss(void)
{
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    double u = (double)(rng >> 11) * 0x1p-53 + 1e-300;
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    double v = (double)(rng >> 11) * 0x1p-53;
    return (float)(sqrt(-2 * log(u)) * cos(2 * M_PI * v));
}

/* ---- a two-thread pool: the helper spins briefly for work (calls are 10 us to
 * 1 ms apart), then sleeps on a condition variable so an idle helper does not
 * steal the shared CPUs ---- */

struct weights;
struct job {
    const struct q_kernels *k;
    const struct q_matrix *w;
    const struct q_act *a;
    float *y;
    int64_t ldy, r0, r1;
    struct weights *wt; /* when set: ncalls calls over copies first.. of wt, not w */
    int first, ncalls;
};
static void run_job(const struct job *j);

struct pool {
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    atomic_int go, done, quit, sleeping;
    struct job job; /* the helper's share */
};

static void cpu_relax(void)
{
#if defined(__x86_64__)
    __builtin_ia32_pause();
#endif
}

static void *helper_main(void *arg)
{
    struct pool *p = arg;
    int seen = 0;
    for (;;) {
        for (int spins = 0; atomic_load(&p->go) == seen && spins < 200000; spins++)
            cpu_relax();
        if (atomic_load(&p->go) == seen) {
            pthread_mutex_lock(&p->mu);
            atomic_store(&p->sleeping, 1);
            while (atomic_load(&p->go) == seen && !atomic_load(&p->quit))
                pthread_cond_wait(&p->cv, &p->mu);
            atomic_store(&p->sleeping, 0);
            pthread_mutex_unlock(&p->mu);
        }
        if (atomic_load(&p->quit))
            return NULL;
        seen = atomic_load(&p->go);
        run_job(&p->job);
        atomic_fetch_add(&p->done, 1);
    }
}

static void pool_wake(struct pool *p)
{
    if (atomic_load(&p->sleeping)) {
        pthread_mutex_lock(&p->mu);
        pthread_cond_signal(&p->cv);
        pthread_mutex_unlock(&p->mu);
    }
}

static void pool_start(struct pool *p)
{
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->cv, NULL);
    pthread_create(&p->thread, NULL, helper_main, p);
}

static void pool_stop(struct pool *p)
{
    atomic_store(&p->quit, 1);
    pthread_mutex_lock(&p->mu);
    pthread_cond_signal(&p->cv);
    pthread_mutex_unlock(&p->mu);
    pthread_join(p->thread, NULL);
}

/* y = W x on nthreads threads (1 or 2), rows split at an even index. */
static void matmul_mt(struct pool *p, int nthreads, const struct q_kernels *k,
                      const struct q_matrix *w, const struct q_act *a, float *y)
{
    if (nthreads == 1) {
        q_matmul(k, w, a, y, w->rows, 0, w->rows);
        return;
    }
    int64_t mid = (w->rows / 2 + 1) & ~(int64_t)1;
    int target = atomic_load(&p->done) + 1;
    p->job = (struct job){k, w, a, y, w->rows, mid, w->rows, NULL, 0, 0};
    atomic_fetch_add(&p->go, 1);
    pool_wake(p);
    q_matmul(k, w, a, y, w->rows, 0, mid);
    for (int spins = 0; atomic_load(&p->done) < target; spins++) {
        cpu_relax();
        if (spins > 20000)
            sched_yield(); /* the helper may be waiting for a CPU */
    }
}

/* ---- weights ---- */

/* n_copies matrices of one shape, filled from a pool of 32 quantized random rows. */
struct weights {
    struct q_matrix m;
    uint8_t *data;
    int copies;
};

static void weights_make(struct weights *wt, uint32_t type, int64_t rows, int64_t cols, int copies)
{
    const int pool_rows = 32;
    size_t rb = q_row_bytes(type, cols);
    float *x = xmalloc((size_t)cols * pool_rows * sizeof(float));
    uint8_t *rowpool = xmalloc(rb * pool_rows);
    for (int64_t i = 0; i < cols * pool_rows; i++)
        x[i] = 0.02f * gauss();
    float s2 = type == Q_NVFP4 ? q_nvfp4_tensor_scale(x, cols * pool_rows) : 1.0f;
    struct q_quant_opts opts = {.nvfp4_tensor_scale = s2};
    for (int r = 0; r < pool_rows; r++)
        q_quant_row(type, x + r * cols, rowpool + rb * r, cols, &opts);
    wt->copies = copies;
    wt->data = xaligned_alloc(64, rb * (size_t)rows * (size_t)copies);
    for (int64_t r = 0; r < rows * copies; r++)
        memcpy(wt->data + rb * (size_t)r, rowpool + rb * (size_t)(r % pool_rows), rb);
    wt->m = (struct q_matrix){type, rows, cols, wt->data, rb, s2};
    free(x);
    free(rowpool);
}

static const struct q_matrix *weights_copy(struct weights *wt, int i, struct q_matrix *m)
{
    *m = wt->m;
    m->data = wt->data + wt->m.row_bytes * (size_t)wt->m.rows * (size_t)(i % wt->copies);
    return m;
}

static void run_job(const struct job *j)
{
    if (!j->wt) {
        q_matmul(j->k, j->w, j->a, j->y, j->ldy, j->r0, j->r1);
        return;
    }
    for (int i = 0; i < j->ncalls; i++) {
        struct q_matrix m;
        q_matmul(j->k, weights_copy(j->wt, j->first + i, &m), j->a, j->y, j->ldy, j->r0, j->r1);
    }
}

/* ---- options ---- */

struct opts {
    int types[MAX_LIST], ntypes;
    int isas[MAX_LIST], nisas;
    int batch[MAX_LIST], nbatch;
    int threads[MAX_LIST], nthreads;
    int shapes[MAX_LIST], nshapes;
    double min_s;
    int model;
};

static int parse_list(const char *s, int *out, int (*conv)(const char *))
{
    char buf[256];
    int n = 0;
    snprintf(buf, sizeof(buf), "%s", s);
    for (char *save, *tok = strtok_r(buf, ",", &save); tok && n < MAX_LIST;
         tok = strtok_r(NULL, ",", &save)) {
        int v = conv(tok);
        if (v < 0) {
            fprintf(stderr, "kernels: unknown value '%s'\n", tok);
            exit(2);
        }
        out[n++] = v;
    }
    return n;
}
static int conv_int(const char *s)
{
    char *end;
    long v = strtol(s, &end, 10);
    return *end || v <= 0 || v > 4096 ? -1 : (int)v;
}
static int conv_shape(const char *s)
{
    for (int i = 0; i < (int)(sizeof(shapes) / sizeof(shapes[0])); i++)
        if (strcmp(shapes[i].name, s) == 0)
            return i;
    return -1;
}

static void parse_opts(int argc, char **argv, struct opts *o)
{
    *o = (struct opts){.min_s = 0.15, .model = 1};
    o->ntypes = parse_list("q4_1,q8_0,mxfp4,nvfp4", o->types, q_type_from_name);
    o->nisas = parse_list("portable,avx2,avx512", o->isas, q_isa_from_name);
    o->nbatch = parse_list("1,4,16,64", o->batch, conv_int);
    o->nthreads = parse_list("1,2", o->threads, conv_int);
    o->nshapes = parse_list("ffn_up,ffn_down,head", o->shapes, conv_shape);
    for (int i = 1; i + 1 < argc; i += 2) {
        const char *f = argv[i], *v = argv[i + 1];
        if (strcmp(f, "--types") == 0)
            o->ntypes = parse_list(v, o->types, q_type_from_name);
        else if (strcmp(f, "--isa") == 0)
            o->nisas = parse_list(v, o->isas, q_isa_from_name);
        else if (strcmp(f, "--batch") == 0)
            o->nbatch = parse_list(v, o->batch, conv_int);
        else if (strcmp(f, "--threads") == 0)
            o->nthreads = parse_list(v, o->threads, conv_int);
        else if (strcmp(f, "--shapes") == 0)
            o->nshapes = parse_list(v, o->shapes, conv_shape);
        else if (strcmp(f, "--ms") == 0)
            o->min_s = conv_int(v) / 1000.0;
        else if (strcmp(f, "--model") == 0)
            o->model = strcmp(v, "0") != 0;
        else {
            fprintf(stderr, "kernels: unknown flag '%s'\n", f);
            exit(2);
        }
    }
}

/* One measurement: a kernel table on nthreads over a cycled weight set. */
struct cell {
    struct pool *pool;
    int nthreads;
    const struct q_kernels *k;
    struct weights *wt;
    const struct q_act *a;
    float *y;
};

/* Seconds per q_matmul call, cycling weight copies: the best of ROUNDS rounds
 * of at least min_s / ROUNDS each (the machine is shared: the best round is
 * the least disturbed one). With two threads each runs its half of the rows
 * for a whole round of calls and they meet once per round: the throughput of
 * two threads streaming together, without a barrier per call (on a shared
 * 2-CPU machine a per-call barrier mostly measures the scheduler). */
static double time_matmul(struct cell *c, double min_s)
{
    struct q_matrix m;
    int i = 0;
    double best = INFINITY;
    matmul_mt(c->pool, c->nthreads, c->k, weights_copy(c->wt, i++, &m), c->a, c->y); /* warm */
    if (c->nthreads == 2) {
        const struct q_matrix *w = &c->wt->m;
        int64_t mid = (w->rows / 2 + 1) & ~(int64_t)1;
        double t0 = clock_s(CLOCK_MONOTONIC);
        matmul_mt(c->pool, 2, c->k, weights_copy(c->wt, i++, &m), c->a, c->y);
        double one = clock_s(CLOCK_MONOTONIC) - t0;
        int ncalls = (int)(min_s / ROUNDS / (one > 1e-7 ? one : 1e-7)) + 2;
        for (int round = 0; round < ROUNDS; round++, i += ncalls) {
            struct pool *p = c->pool;
            int target = atomic_load(&p->done) + 1;
            t0 = clock_s(CLOCK_MONOTONIC);
            p->job = (struct job){c->k, NULL, c->a, c->y, w->rows, mid, w->rows, c->wt, i, ncalls};
            atomic_fetch_add(&p->go, 1);
            pool_wake(p);
            struct job mine = {c->k, NULL, c->a, c->y, w->rows, 0, mid, c->wt, i, ncalls};
            run_job(&mine);
            for (int spins = 0; atomic_load(&p->done) < target; spins++) {
                cpu_relax();
                if (spins > 20000)
                    sched_yield();
            }
            double t = (clock_s(CLOCK_MONOTONIC) - t0) / ncalls;
            best = t < best ? t : best;
        }
        return best;
    }
    for (int round = 0; round < ROUNDS; round++) {
        double t0 = cell_clock(c->nthreads), t;
        int calls = 0;
        do {
            for (int j = 0; j < 2; j++, calls++)
                matmul_mt(c->pool, c->nthreads, c->k, weights_copy(c->wt, i++, &m), c->a, c->y);
            t = cell_clock(c->nthreads) - t0;
        } while (t < min_s / ROUNDS);
        best = t / calls < best ? t / calls : best;
    }
    return best;
}

/* ---- the SmolLM2-shaped model pass ---- */

struct model_mat {
    int64_t rows, cols;
    int head;
};
static const struct model_mat smollm2_layer[] = {
    {576, 576, 0},  {192, 576, 0},  {192, 576, 0},  {576, 576, 0}, /* q, k, v, o */
    {1536, 576, 0}, {1536, 576, 0}, {576, 1536, 0},                /* gate, up, down */
};

static void model_pass(struct opts *o, struct pool *pool, uint32_t type, uint32_t head_type)
{
    enum { LAYERS = 30 };
    struct weights w[LAYERS * 7 + 1];
    size_t bytes = 0;
    for (int l = 0; l < LAYERS; l++)
        for (int i = 0; i < 7; i++) {
            weights_make(&w[l * 7 + i], type, smollm2_layer[i].rows, smollm2_layer[i].cols, 1);
            bytes += w[l * 7 + i].m.row_bytes * (size_t)w[l * 7 + i].m.rows;
        }
    weights_make(&w[LAYERS * 7], head_type, 49152, 576, 1);
    bytes += w[LAYERS * 7].m.row_bytes * 49152;
    struct q_act a;
    q_act_init(&a, 1, 1536);
    float *x = xmalloc(1536 * sizeof(float)), *y = xmalloc(49152 * sizeof(float));
    for (int i = 0; i < 1536; i++)
        x[i] = gauss();
    printf("%-6s layers + %-5s head: %6.1f MB/token |", q_info(type)->name, q_info(head_type)->name,
           bytes / 1e6);
    for (int ii = 0; ii < o->nisas; ii++) {
        const struct q_kernels *k = q_kernels_select((enum q_isa)o->isas[ii]);
        if (!k || k == q_kernels_select(Q_ISA_PORTABLE))
            continue;
        for (int ti = 0; ti < o->nthreads; ti++) {
            int nt = o->threads[ti] > 2 ? 2 : o->threads[ti];
            double best = INFINITY;
            for (int round = 0; round < ROUNDS; round++) {
                double t0 = cell_clock(nt), t;
                int tokens = 0;
                do {
                    for (int i = 0; i < LAYERS * 7 + 1; i++) {
                        q_act_prepare(&a, w[i].m.type, x, 1536, 1, w[i].m.cols);
                        struct q_matrix m;
                        matmul_mt(pool, nt, k, weights_copy(&w[i], 0, &m), &a, y);
                    }
                    tokens++;
                    t = cell_clock(nt) - t0;
                } while (t < 4 * o->min_s / ROUNDS);
                best = t / tokens < best ? t / tokens : best;
            }
            printf(" %s %dT %6.1f tok/s %5.1f GB/s |", q_kernels_name(k), nt, 1 / best,
                   bytes / best / 1e9);
        }
    }
    printf("\n");
    for (int i = 0; i < LAYERS * 7 + 1; i++)
        free(w[i].data);
    q_act_release(&a);
    free(x);
    free(y);
}

int main(int argc, char **argv)
{
    struct opts o;
    parse_opts(argc, argv, &o);
    static struct pool pool;
    pool_start(&pool);

    printf("q_matmul micro-benchmark: auto kernels = %s; weights cycled over >= %llu MB "
           "(streamed from DRAM); GB/s = weight bytes / time, GFLOP/s = 2*rows*cols*B / time;\n"
           "best of %d rounds; T=1 timed in thread CPU time; T=2 in wall time, each thread running "
           "its\n"
           "half of the rows for a round of calls (no barrier per call)\n\n",
           q_kernels_name(q_kernels_select(Q_ISA_AUTO)), STREAM_BYTES >> 20, ROUNDS);
    printf("%-6s %-9s %11s %3s %2s |", "type", "shape", "rows x cols", "B", "T");
    for (int ii = 0; ii < o.nisas; ii++)
        printf(" %-8s %6s %7s |", q_kernels_name(q_kernels_select((enum q_isa)o.isas[ii])), "GB/s",
               "GFLOP/s");
    printf("\n");

    int max_b = 1; /* batch sizes above 64 are prompt chunks (prefill) */
    for (int bi = 0; bi < o.nbatch; bi++)
        max_b = o.batch[bi] > max_b ? o.batch[bi] : max_b;
    for (int si = 0; si < o.nshapes; si++) {
        const struct shape *sh = &shapes[o.shapes[si]];
        struct q_act a;
        q_act_init(&a, max_b, sh->cols);
        float *x = xmalloc((size_t)(max_b * sh->cols) * sizeof(float));
        float *y = xmalloc((size_t)(max_b * sh->rows) * sizeof(float));
        for (int64_t i = 0; i < max_b * sh->cols; i++)
            x[i] = gauss();
        for (int ti = 0; ti < o.ntypes; ti++) {
            uint32_t type = (uint32_t)o.types[ti];
            size_t mbytes = q_row_bytes(type, sh->cols) * (size_t)sh->rows;
            int copies = (int)((STREAM_BYTES + mbytes - 1) / mbytes);
            struct weights wt;
            weights_make(&wt, type, sh->rows, sh->cols, copies);
            for (int bi = 0; bi < o.nbatch; bi++) {
                int B = o.batch[bi];
                q_act_prepare(&a, type, x, sh->cols, B, sh->cols);
                for (int thi = 0; thi < o.nthreads; thi++) {
                    int nt = o.threads[thi] > 2 ? 2 : o.threads[thi];
                    printf("%-6s %-9s %5lld x %4lld %3d %2d |", q_info(type)->name, sh->name,
                           (long long)sh->rows, (long long)sh->cols, B, nt);
                    for (int ii = 0; ii < o.nisas; ii++) {
                        const struct q_kernels *k = q_kernels_select((enum q_isa)o.isas[ii]);
                        /* the portable table only at B <= 4 and on the layer shapes: it is slow */
                        if (!k || (o.isas[ii] == Q_ISA_PORTABLE && (B > 4 || sh->rows > 4096))) {
                            printf(" %-8s %6s %7s |", "", "-", "-");
                            continue;
                        }
                        struct cell c = {&pool, nt, k, &wt, &a, y};
                        double s = time_matmul(&c, o.min_s);
                        printf(" %-8s %6.2f %7.1f |", "", mbytes / s / 1e9,
                               2.0 * sh->rows * sh->cols * B / s / 1e9);
                        fflush(stdout);
                    }
                    printf("\n");
                }
            }
            free(wt.data);
        }
        q_act_release(&a);
        free(x);
        free(y);
    }

    if (o.model) {
        printf("\nSmolLM2-135M-shaped matmuls, batch 1, every weight matrix once per token "
               "(activation preparation included; no attention, norms or sampling):\n");
        model_pass(&o, &pool, Q_Q4_1, Q_Q8_0);
        model_pass(&o, &pool, Q_MXFP4, Q_Q8_0);
        model_pass(&o, &pool, Q_MXFP4, Q_MXFP4);
        model_pass(&o, &pool, Q_NVFP4, Q_Q8_0);
    }
    pool_stop(&pool);
    return 0;
}
