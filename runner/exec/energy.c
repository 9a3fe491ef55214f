/*
 * energy: the power sampler of a point (nvidia-smi as a child, or RAPL
 * counters read from the run loop) and the choice between them.
 */
#include "exec/energy.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "buf.h"
#include "fileio.h"
#include "strutil.h"
#include "sweep.h"
#include "timeutil.h"
#include "xalloc.h"

#define NVSMI_INT_WAIT_MS 1000 /* after SIGINT, before the usual TERM/KILL stop */

/* A small sysfs file as an unsigned number; -1 when unreadable. */
static int read_u64(const char *path, uint64_t *out)
{
    char b[64];
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    ssize_t n = read(fd, b, sizeof(b) - 1);
    int e = errno;
    close(fd);
    if (n <= 0) {
        errno = n < 0 ? e : EIO;
        return -1;
    }
    b[n] = '\0';
    while (n && (b[n - 1] == '\n' || b[n - 1] == ' '))
        b[--n] = '\0';
    long v;
    if (str_to_long(b, &v) != 0 || v < 0) {
        errno = EINVAL;
        return -1;
    }
    *out = (uint64_t)v;
    return 0;
}

/* The package zones, "intel-rapl:N" (not their sub-zones "intel-rapl:N:M",
 * which the package already counts), in name order. */
static int rapl_cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static void find_rapl(struct energy_src *s, const char *powercap, struct buf *why)
{
    DIR *d = opendir(powercap);
    if (!d) {
        buf_printf(why, "%s: %s", powercap, strerror(errno));
        return;
    }
    struct strvec found = STRVEC_INIT;
    struct dirent *e;
    while ((e = readdir(d))) {
        const char *n = e->d_name;
        if (strncmp(n, "intel-rapl:", 11) != 0 || !n[11] ||
            strspn(n + 11, "0123456789") != strlen(n + 11))
            continue;
        strvec_push(&found, n);
    }
    closedir(d);
    if (found.n)
        qsort(found.v, found.n, sizeof(char *), rapl_cmp);
    for (size_t i = 0; i < found.n && s->rapl.n < ENERGY_RAPL_MAX; i++) {
        char *dir = path_join(powercap, found.v[i]);
        char *uj = path_join(dir, "energy_uj");
        uint64_t v;
        if (read_u64(uj, &v) == 0)
            strvec_push(&s->rapl, dir);
        else if (!why->len)
            buf_printf(why, "%s: %s", uj, strerror(errno));
        free(uj);
        free(dir);
    }
    if (!found.n && !why->len)
        buf_printf(why, "%s has no intel-rapl:N package", powercap);
    strvec_release(&found);
}

void energy_choose(struct energy_src *s, const char *nvsmi, const char *cvd, bool remote,
                   const char *powercap)
{
    memset(s, 0, sizeof(*s));
    if (remote) {
        s->what = xstrdup("not measured: the server runs on another host (executor: ssh)");
        return;
    }
    bool no_gpu = cvd && (strcmp(cvd, "-1") == 0 || strcmp(cvd, "none") == 0 ||
                          strcmp(cvd, "NoDevFiles") == 0);
    if (nvsmi && !no_gpu) {
        s->kind = ENERGY_NVSMI;
        s->nvsmi = xstrdup(nvsmi);
        s->gpus = cvd && *cvd ? xstrdup(cvd) : NULL;
        s->what = xasprintf("nvidia-smi power.draw, %s%s, %d Hz", s->gpus ? "GPUs " : "every GPU",
                            s->gpus ? s->gpus : "", 1000 / ENERGY_NVSMI_MS);
        return;
    }
    struct buf why;
    buf_init(&why, 4096);
    find_rapl(s, powercap, &why);
    if (s->rapl.n) {
        s->kind = ENERGY_RAPL;
        struct buf w;
        buf_init(&w, 4096);
        buf_puts(&w, "RAPL package energy (CPU), ");
        for (size_t i = 0; i < s->rapl.n; i++)
            buf_printf(&w, "%s%s", i ? ", " : "", path_base(s->rapl.v[i]));
        s->what = buf_detach(&w, NULL);
        buf_release(&w);
    } else {
        s->what =
            xasprintf("not measured: %s, and no readable RAPL counter (%s)",
                      no_gpu ? "CUDA_VISIBLE_DEVICES hides every GPU" : "no nvidia-smi on PATH",
                      why.data ? why.data : "none");
    }
    buf_release(&why);
}

void energy_src_release(struct energy_src *s)
{
    free(s->nvsmi);
    free(s->gpus);
    strvec_release(&s->rapl);
    free(s->what);
    memset(s, 0, sizeof(*s));
}

void energy_run_init(struct energy_run *r)
{
    memset(r, 0, sizeof(*r));
    proc_init(&r->p);
    r->fd = -1;
    r->every_ms = ENERGY_RAPL_MS;
}

/* One RAPL reading: per package the energy since the last one (a counter
 * that went down wrapped at its range) over the time since, as watts. */
static void rapl_read(struct energy_run *r)
{
    double now = clock_ms();
    double dt_s = (now - r->last_ms) / 1000.0;
    /* CLOCK_MONOTONIC as a date from 1970: nvidia-smi's shape, no wall clock */
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    time_t secs = ts.tv_sec;
    struct tm tm;
    gmtime_r(&secs, &tm);
    char stamp[96];
    snprintf(stamp, sizeof(stamp), "%04d/%02d/%02d %02d:%02d:%02d.%03ld", tm.tm_year + 1900,
             tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000000);
    struct buf lines;
    buf_init(&lines, 8192);
    for (size_t i = 0; i < r->n; i++) {
        uint64_t v;
        if (read_u64(r->uj[i], &v) != 0)
            continue;
        uint64_t d = v >= r->last_uj[i] ? v - r->last_uj[i]
                     : r->range_uj[i]   ? r->range_uj[i] - r->last_uj[i] + v
                                        : 0; /* no range known: the interval is lost */
        r->last_uj[i] = v;
        if (dt_s > 0)
            buf_printf(&lines, "%s, rapl:%zu, %.3f\n", stamp, i, (double)d / 1e6 / dt_s);
    }
    r->last_ms = now;
    if (lines.len && write(r->fd, lines.data, lines.len) < 0) {
        close(r->fd); /* a full disk: the point's energy stays empty */
        r->fd = -1;
    }
    buf_release(&lines);
}

int energy_start(const struct energy_src *s, struct energy_run *r, const char *path,
                 struct err *err)
{
    if (s->kind == ENERGY_NONE)
        return 0;
    if (s->kind == ENERGY_NVSMI) {
        struct strvec argv = STRVEC_INIT;
        strvec_push(&argv, s->nvsmi);
        strvec_push(&argv, "--query-gpu=timestamp,index,power.draw");
        strvec_push(&argv, "--format=csv,noheader,nounits");
        strvec_push(&argv, "-lms");
        strvec_pushf(&argv, "%d", ENERGY_NVSMI_MS);
        if (s->gpus) {
            strvec_push(&argv, "-i");
            strvec_push(&argv, s->gpus);
        }
        /* the samples file is its log: truncated first, so an old point's
         * samples never mix in (keep_old_log moved the old one aside) */
        int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
        if (fd < 0) {
            strvec_release(&argv);
            return err_set(err, RN_ERR_ENV, "%s: %s", path, strerror(errno)), -1;
        }
        close(fd);
        int rc = proc_spawn(&r->p, &argv, NULL, path, err);
        strvec_release(&argv);
        return rc;
    }
    r->fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (r->fd < 0)
        return err_set(err, RN_ERR_ENV, "%s: %s", path, strerror(errno)), -1;
    for (size_t i = 0; i < s->rapl.n && r->n < ENERGY_RAPL_MAX; i++) {
        char *uj = path_join(s->rapl.v[i], "energy_uj");
        char *range = path_join(s->rapl.v[i], "max_energy_range_uj");
        uint64_t v, m = 0;
        if (read_u64(uj, &v) == 0) {
            read_u64(range, &m);
            r->uj[r->n] = uj;
            r->last_uj[r->n] = v;
            r->range_uj[r->n] = m;
            r->n++;
            uj = NULL;
        }
        free(uj);
        free(range);
    }
    r->last_ms = clock_ms();
    return 0;
}

void energy_tick(struct energy_run *r)
{
    if (r->fd >= 0 && clock_ms() - r->last_ms >= r->every_ms)
        rapl_read(r);
}

void energy_stop(struct energy_run *r)
{
    if (r->fd >= 0) {
        if (clock_ms() - r->last_ms >= 1)
            rapl_read(r); /* the stretch since the last reading */
        if (r->fd >= 0)
            close(r->fd);
    }
    for (size_t i = 0; i < r->n; i++)
        free(r->uj[i]);
    if (r->p.pid) {
        /* nvidia-smi's loop ends on Ctrl-C, flushing what it has */
        if (proc_alive(&r->p)) {
            kill(-r->p.pid, SIGINT);
            struct proc *w[1] = {&r->p};
            proc_wait_any(w, 1, NVSMI_INT_WAIT_MS, NULL);
        }
        proc_stop(&r->p, 1.0, NULL, NULL);
    }
    proc_release(&r->p);
    energy_run_init(r);
}
