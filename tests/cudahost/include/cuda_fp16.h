/* cudahost: stands in for CUDA's cuda_fp16.h (see ../cudahost.h). */
#include "cudahost.h"
