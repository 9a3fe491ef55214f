/* backend: the table of backends and the lookup by name (see backend.h). */
#include "model/backend.h"

#include <string.h>

#include "fp4.h"
#ifdef HAVE_CUDA
#include "cuda/cuda.h"
#endif

const struct backend *backend_find(const char *name, struct err *err)
{
    if (!name || strcmp(name, "cpu") == 0)
        return &backend_cpu;
    if (strcmp(name, "cuda") == 0) {
#ifdef HAVE_CUDA
        char why[160];
        if (cu_device_count(why, sizeof(why)) > 0)
            return &backend_cuda;
        err_set(err, FP_ERR_DEVICE, "device 'cuda': no usable CUDA device (%s); use --device cpu",
                why);
#else
        err_set(err, FP_ERR_DEVICE,
                "device 'cuda': fp4serve was built without CUDA (nvcc was not found at build "
                "time); use --device cpu");
#endif
        return NULL;
    }
    err_set(err, FP_ERR_USAGE, "unknown device '%s' (expected cpu or cuda)", name);
    return NULL;
}
