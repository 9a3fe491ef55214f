/*
 * cuda/stub: stands in for the CUDA backend when the build has no nvcc (or
 * no .cu sources): no device is ever usable, and the reason says the
 * build lacks CUDA. Its backend_cuda is never usable, so backend_find
 * refuses --device cuda with that reason and nothing else is called.
 */
#ifndef HAVE_CUDA
#include <stdio.h>

#include "cuda/cuda.h"

#include "model/backend.h"

int cu_device_count(char *why, size_t why_size)
{
    snprintf(why, why_size, "fp4serve was built without CUDA");
    return 0;
}

static int stub_usable(char *why, size_t why_size)
{
    snprintf(why, why_size, "fp4serve was built without CUDA (nvcc was not found at build time)");
    return -1;
}

const struct backend backend_cuda = {"cuda", NULL, NULL, NULL, stub_usable};
#endif
