/* cudahost: stands in for CUDA's cuda_runtime.h (see ../cudahost.h). */
#include "cudahost.h"
