/* backend: the table of backends and the lookup by name (see backend.h). */
#include "model/backend.h"

#include <string.h>

#include "fp4.h"

static const struct backend *const backends[] = {&backend_cpu, &backend_cuda};

const struct backend *backend_find(const char *name, struct err *err)
{
    if (!name)
        name = "cpu";
    for (size_t i = 0; i < sizeof(backends) / sizeof(backends[0]); i++) {
        const struct backend *b = backends[i];
        if (strcmp(name, b->name) != 0)
            continue;
        char why[200];
        if (!b->usable || b->usable(why, sizeof(why)) == 0)
            return b;
        err_set(err, FP_ERR_DEVICE, "device '%s': %s; use --device cpu", name, why);
        return NULL;
    }
    err_set(err, FP_ERR_USAGE, "unknown device '%s' (expected cpu or cuda)", name);
    return NULL;
}
