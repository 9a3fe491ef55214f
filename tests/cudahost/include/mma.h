/* cudahost: stands in for CUDA's mma.h (see ../cudahost.h). */
#include "cudahost.h"
