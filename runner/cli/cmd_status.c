/*
 * cmd_status: `sweep status RUN_DIR`, the state of a run's SLURM tasks
 * (executor: slurm): per variant its task id, as recorded in manifest.json
 * when the array was submitted, and its state now (exec/slurm.c).
 */
#include <stdio.h>

#include "err.h"
#include "log.h"
#include "opts.h"
#include "strvec.h"
#include "sweep.h"

#include "exec/slurm.h"

static const char synopsis[] = "RUN_DIR";
static const char summary[] =
    "Print the job array of a run made with executor: slurm: per variant its task id and\n"
    "state now (squeue while it is queued or running, then sacct or scontrol).\n"
    "Exit status 2 when RUN_DIR has no SLURM job.";

static const struct opt_cmd usage = {"sweep", "status", synopsis, summary, RN_ERR_USAGE};

int cmd_status(int argc, char **argv)
{
    struct strvec pos = STRVEC_INIT;
    struct err err;
    err_init(&err);
    int rc = RN_ERR_USAGE;
    int pr = opt_cmd_parse(&usage, NULL, 0, argc, argv, &pos, &err);
    if (pr == 1) {
        rc = RN_OK;
    } else if (pr == 0 && pos.n != 1) {
        log_error("%s (sweep status RUN_DIR)",
                  pos.n ? "one run folder at a time" : "no run folder given");
    } else if (pr == 0) {
        rc = slurm_status(pos.v[0], stdout);
    } else {
        log_error("%s", err.msg);
    }
    strvec_release(&pos);
    return rc;
}
