/* backend: the table of backends and the lookup by name (see backend.h). */
#include "backend.h"

#include <string.h>

#include "fp4.h"

const struct backend *backend_find(const char *name, struct err *err)
{
    if (!name || strcmp(name, "cpu") == 0)
        return &backend_cpu;
    if (strcmp(name, "cuda") == 0) {
        err_set(
            err, FP_ERR_DEVICE,
            "device 'cuda': the CUDA backend is not available in this build (use --device cpu)");
        return NULL;
    }
    err_set(err, FP_ERR_USAGE, "unknown device '%s' (expected cpu or cuda)", name);
    return NULL;
}
