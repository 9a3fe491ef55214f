/*
 * manifest: results/.../manifest.json, what a run needs to be reproduced
 * and trusted later: sweep's version (git describe), host, CPU, GPU, start
 * and end, the exact argv of every server start, the model fingerprint and
 * the environment with secrets removed. Written atomically at the start and
 * rewritten when something changes (a server start, the end of the run).
 * A resumed run keeps the earlier sessions under "sessions".
 */
#ifndef RUNNER_MANIFEST_H
#define RUNNER_MANIFEST_H

#include <stdbool.h>
#include <stddef.h>

#include "err.h"
#include "strvec.h"

#include "config/plan.h"

struct json_t; /* jansson */

struct manifest {
    struct json_t *root;    /* owned: the whole document */
    struct json_t *session; /* borrowed from root: this invocation's entry in "sessions" */
};

/*
 * Describe this run: sweep version, host, CPU and GPU (nvidia-smi when it
 * is on PATH), start time, sweep's own argv, the environment without
 * secrets, and per variant the model path and fingerprint, server argv and
 * added environment (secrets removed), url and ready path. When
 * previous_path names a readable manifest (a resumed run), its sessions are
 * kept before this one. Never fails: what cannot be found is left out.
 */
void man_init(struct manifest *m, const struct plan *p, int argc, char **argv,
              const char *previous_path);
void man_release(struct manifest *m);

/* Record a server start of variant vi: its pid, the argv as run (the port
 * may have changed since planning) and how long readiness took (< 0: it
 * never became ready). */
void man_server_started(struct manifest *m, const struct plan *p, size_t vi, long pid,
                        double ready_s);

/* Record a SLURM job array: its id, and variants[i] as task JOB_i (in the
 * session's "executor" object). */
/* Where variant vi's power came from, or why it was not measured
 * (exec/energy.h energy_src.what): "energy" of the variant's entry. */
void man_energy(struct manifest *m, size_t vi, const char *what);

void man_slurm_job(struct manifest *m, const char *job, const char *const *variants, size_t n);

/* Record the end: wall time, exit status and the point counts. */
void man_finish(struct manifest *m, int exit_status, size_t n_ok, size_t n_failed,
                bool interrupted);

/* Write the manifest to path atomically. Returns 0 or -1 with err set
 * (RN_ERR_ENV). */
int man_save(const struct manifest *m, const char *path, struct err *err);

#endif
