/*
 * cuda/stub: stands in for the CUDA backend when the build has no nvcc (or
 * no .cu sources): no device is ever usable, and the reason says the
 * build lacks CUDA. backend_find gives the user-facing message.
 */
#ifndef HAVE_CUDA
#include <stdio.h>

#include "cuda/cuda.h"

int cu_device_count(char *why, size_t why_size)
{
    snprintf(why, why_size, "fp4serve was built without CUDA");
    return 0;
}
#endif
