/*
 * slurm: the SLURM executor (executor: {kind: slurm}). The submitting
 * `sweep run` turns every variant with points still to run into one task
 * of a job array (sbatch --parsable --array). Each task runs `sweep run
 * RUN_DIR/experiment.yaml --only VARIANT --resume RUN_DIR/tasks/VARIANT`
 * on its node with SWEEP_EXECUTOR=local (server and client on that node),
 * in a run folder of its own under the shared run folder, so no two
 * processes ever write one points.csv. The submitter waits (squeue, with
 * backoff), shows each variant's state, cancels the array on Ctrl-C
 * (scancel), and when the tasks have ended merges their rows and logs into
 * the run folder, which then has the layout of a local run. Points a task
 * left unfinished become failed rows whose cause names the task's final
 * state (sacct, else scontrol). A filesystem shared by the submitter and
 * the nodes is assumed.
 */
#ifndef RUNNER_SLURM_H
#define RUNNER_SLURM_H

#include <stdbool.h>
#include <stddef.h>

#include "err.h"

#include "exec/manifest.h"
#include "exec/proc.h"
#include "exec/progress.h"

#include "config/plan.h"
#include "store/results.h"

/* The environment variable that makes a task run its variant locally. */
#define SLURM_TASK_ENV "SWEEP_EXECUTOR"

struct slurm_run {
    const struct plan *plan;   /* the whole run's plan (variants with --only applied) */
    const char *run_dir;       /* the shared run folder */
    const char *self_exe;      /* the sweep binary the tasks run (same path on the nodes) */
    struct res_table *table;   /* the run's rows: merged into, failed rows added */
    const char *csv_path;      /* where the table is saved */
    struct manifest *man;      /* gets the job id and the task of each variant */
    const char *manifest_path; /* where the manifest is saved */
    struct progress *prog;
    proc_stop_flag *stop;
    double cancel_wait_s;  /* after scancel, how long squeue may list the job (0: 60 s) */
    size_t n_ok, n_failed; /* out: rows merged or added this session */
};

/*
 * Submit, wait, merge (see above). Variants without a pending point are
 * not submitted; with none at all nothing is. Returns 0 when every task
 * ended and was merged (rows may be failed), or -1 with err set:
 * RN_ERR_ENV when sbatch refused or squeue cannot be read (what was merged
 * is kept), RN_ERR_INTERRUPTED after Ctrl-C (the array was cancelled and
 * what the tasks finished was merged).
 */
int slurm_run(struct slurm_run *r, struct err *err);

/* `sweep status RUN_DIR`: per variant the task id and its state now
 * (squeue, else sacct, else scontrol), from the manifest. Returns an exit
 * status (RN_OK, or RN_ERR_USAGE when RUN_DIR has no SLURM job). */
int slurm_status(const char *run_dir, FILE *out);

#endif
