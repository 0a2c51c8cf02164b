/* device_table: which device backends exist, by name (see device_backend.h).
 *
 * Where it sits: the one place where lib/transfer meets the simulator (sim/)
 * and the CUDA backend (lib/transfer/cuda/). Their headers declare only their
 * vtables, so no CUDA header reaches the core. The build defines HAVE_CUDA
 * when it compiled the CUDA backend.
 */
#include "transfer/device_backend.h"

#include "base/error.h"
#include "sim/device_sim.h"
#ifdef HAVE_CUDA
#include "transfer/cuda/device_cuda.h"
#endif

#include <string.h>

int device_backend_find(const char *name, const struct device_backend_ops **out)
{
    *out = NULL;
    if (!name) { /* the default: the real device when there is one */
#ifdef HAVE_CUDA
        if (device_backend_cuda.probe()) {
            *out = &device_backend_cuda;
            return 0;
        }
#endif
        *out = &device_backend_sim;
        return 0;
    }
    if (strcmp(name, "sim") == 0) {
        *out = &device_backend_sim;
        return 0;
    }
    if (strcmp(name, "cuda") == 0) {
#ifdef HAVE_CUDA
        *out = &device_backend_cuda;
        return 0;
#else
        return err_set(ERR_UNSUPPORTED, "device: this build has no CUDA support (the CUDA toolkit was not found "
                       "at build time): use --backend=sim");
#endif
    }
    return err_set(ERR_ARG, "device: unknown backend '%s' (sim or cuda)", name);
}
