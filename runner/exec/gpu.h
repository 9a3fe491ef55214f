/*
 * gpu: which processes hold a GPU context, from nvidia-smi. Used between
 * variants to wait until the last server is off the GPU.
 */
#ifndef RUNNER_GPU_H
#define RUNNER_GPU_H

#include <stddef.h>
#include <sys/types.h>

#include "strvec.h"

/*
 * The processes holding a GPU context, from `nvsmi --query-compute-apps=pid
 * --format=csv,noheader,nounits` (nvsmi: nvidia-smi's path), at most max
 * into out. Returns how many, or -1 when nvidia-smi failed or timed out.
 */
int gpu_pids(const char *nvsmi, pid_t *out, size_t max);

/*
 * One line per GPU, "NAME, DRIVER, MEMORY" as nvidia-smi's
 * --query-gpu=name,driver_version,memory.total prints it, appended to out.
 * Returns how many, or -1 when nvidia-smi is missing or failed.
 */
int gpu_describe(struct strvec *out);

#endif
