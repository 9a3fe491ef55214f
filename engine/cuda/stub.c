/*
 * cuda/stub: stands in for the CUDA backend when the build has no nvcc (or
 * no .cu sources yet); every entry point reports "built without CUDA".
 */
#ifndef HAVE_CUDA
#include <stddef.h>

/* Number of CUDA devices usable by this build: always 0 here. */
int cuda_device_count(void);
int cuda_device_count(void)
{
    return 0;
}
#endif
