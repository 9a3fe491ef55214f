/*
 * energy: sampling the power a point draws, while it runs, into the samples
 * file beside its log (analysis/power.h reads it into mean_power_w,
 * energy_j, j_per_token). Where nvidia-smi is on PATH: a child process,
 * `nvidia-smi --query-gpu=timestamp,index,power.draw
 * --format=csv,noheader,nounits -lms 200 [-i GPUS]` (5 Hz; GPUS from the
 * server's CUDA_VISIBLE_DEVICES, else every GPU), its stdout the file
 * itself, so a crash of sweep loses nothing written. Else, where readable,
 * the RAPL package counters (/sys/class/powercap/intel-rapl:N/energy_uj,
 * wrapping at max_energy_range_uj), read by sweep at most once a second
 * from the run loop and appended as one line per reading in nvidia-smi's
 * shape. Else nothing, and the reason, for REPORT.md. The sampler starts
 * before the client and stops with it (exec/run.c run_point).
 */
#ifndef RUNNER_ENERGY_H
#define RUNNER_ENERGY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "err.h"
#include "strvec.h"

#include "exec/proc.h"

#define ENERGY_NVSMI_MS 200  /* nvidia-smi -lms: 5 samples a second */
#define ENERGY_RAPL_MS  1000 /* RAPL: a reading at most this often */
#define ENERGY_RAPL_MAX 16   /* packages read */

enum energy_kind { ENERGY_NONE, ENERGY_NVSMI, ENERGY_RAPL };

/* Where a variant's power comes from; energy_choose fills it. */
struct energy_src {
    enum energy_kind kind;
    char *nvsmi;        /* owned: nvidia-smi's path (ENERGY_NVSMI) */
    char *gpus;         /* owned: the -i list (CUDA_VISIBLE_DEVICES), NULL: every GPU */
    struct strvec rapl; /* ENERGY_RAPL: the packages' folders (.../intel-rapl:0) */
    char *what;         /* owned: the source in words, or "not measured: REASON" */
};

/*
 * Decide the source: nvsmi (nvidia-smi's path, NULL when not on PATH)
 * first, with cvd the server's CUDA_VISIBLE_DEVICES (NULL or "" = every
 * GPU; "-1" or "none" = none: then RAPL); else the RAPL packages under
 * powercap (normally "/sys/class/powercap") whose energy_uj can be read;
 * else none, with the reason in s->what. remote: the server runs on
 * another host (executor: ssh): none.
 */
void energy_choose(struct energy_src *s, const char *nvsmi, const char *cvd, bool remote,
                   const char *powercap);
void energy_src_release(struct energy_src *s);

/* One point's sampling. Zeroed (energy_run_init) = none. */
struct energy_run {
    struct proc p;                      /* nvidia-smi, when started */
    int fd;                             /* RAPL: the samples file (appended), -1 when none */
    size_t n;                           /* RAPL packages */
    char *uj[ENERGY_RAPL_MAX];          /* owned: their energy_uj paths */
    uint64_t last_uj[ENERGY_RAPL_MAX];  /* previous reading, µJ */
    uint64_t range_uj[ENERGY_RAPL_MAX]; /* max_energy_range_uj (0: unknown, no wrap fixed) */
    double last_ms;                     /* CLOCK_MONOTONIC ms of the previous reading */
    double every_ms;                    /* between RAPL readings (ENERGY_RAPL_MS) */
};

void energy_run_init(struct energy_run *r);

/*
 * Start sampling s into path (created or truncated). Returns 0 (also for
 * ENERGY_NONE: nothing to do), or -1 with err (RN_ERR_ENV: the file or the
 * child could not be made); the point goes on without energy columns.
 */
int energy_start(const struct energy_src *s, struct energy_run *r, const char *path,
                 struct err *err);
/* From the run loop, often: RAPL takes a reading when every_ms passed. */
void energy_tick(struct energy_run *r);
/* A last RAPL reading, or nvidia-smi stopped (SIGINT, its documented end
 * of a loop, then proc_stop); r is left as energy_run_init made it. */
void energy_stop(struct energy_run *r);

#endif
