/* backend_table: the rows of every backend table (see backend_table.h).
 *
 * The build defines HAVE_MPI / HAVE_NCCL / HAVE_CUDA when it compiled those
 * backends; a backend's own header declares only its ops (no MPI, CUDA or
 * NCCL header comes with it), so this file compiles the same with or without
 * them. */
#include "backend_table.h"

#include "base/error.h"
#include "comm/comm_backend.h"
#include "sim/comm_sim.h"
#ifdef HAVE_MPI
#include "comm/mpi/comm_mpi.h"
#endif
#ifdef HAVE_NCCL
#include "comm/nccl/comm_nccl.h"
#endif
#include "sim/device_sim.h"
#include "transfer/device_backend.h"
#ifdef HAVE_CUDA
#include "transfer/cuda/device_cuda.h"
#endif

#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

/* One row: a backend's name and, when this build has it, its operations
 * (typed by the table's kind); otherwise what would build it. */
struct backend_row {
    const char *name;
    const void *ops;
    const char *unbuilt; /* NULL when built; else the message, saying what would build it */
};

/* Looks `name` up in `rows` (n of them) for a table of `kind` ("comm",
 * "device"): 0 and *ops, ERR_UNSUPPORTED for a row not built, ERR_ARG for an
 * unknown name. */
static int backend_lookup(const char *kind, const struct backend_row *rows, size_t n, const char *name,
                          const void **ops)
{
    *ops = NULL;
    char names[128] = "";
    for (size_t i = 0; i < n; i++) {
        if (name && strcmp(name, rows[i].name) == 0) {
            if (!rows[i].ops)
                return err_set(ERR_UNSUPPORTED, "%s: %s", kind, rows[i].unbuilt);
            *ops = rows[i].ops;
            return 0;
        }
        size_t used = strlen(names);
        snprintf(names + used, sizeof names - used, "%s%s", i == 0 ? "" : i + 1 == n ? " or " : ", ", rows[i].name);
    }
    if (!name)
        return err_set(ERR_ARG, "%s: no backend given (%s)", kind, names);
    return err_set(ERR_ARG, "%s: unknown backend '%s' (%s)", kind, name, names);
}

/* ---- communicators ------------------------------------------------------------ */

static const struct backend_row backend_comm_rows[] = {
    {"sim", &comm_backend_sim, NULL},
#ifdef HAVE_MPI
    {"mpi", &comm_backend_mpi, NULL},
#else
    {"mpi", NULL, "this build has no MPI support (install libopenmpi-dev and rebuild)"},
#endif
#ifdef HAVE_NCCL
    {"nccl", &comm_backend_nccl, NULL},
#else
    {"nccl", NULL, "this build has no NCCL support (needs CUDA and NCCL at build time)"},
#endif
};
#define BACKEND_COMM_ROWS (sizeof backend_comm_rows / sizeof backend_comm_rows[0])

int backend_table_comm(const char *name, const struct comm_backend_ops **out)
{
    const void *ops;
    int rc = backend_lookup("comm", backend_comm_rows, BACKEND_COMM_ROWS, name, &ops);
    *out = ops;
    return rc;
}

/* ---- devices ------------------------------------------------------------------ */

/* The simulator has no probe; a real device's probe() says whether this
 * machine has one. */
static const struct backend_row backend_device_rows[] = {
    {"sim", &device_backend_sim, NULL},
#ifdef HAVE_CUDA
    {"cuda", &device_backend_cuda, NULL},
#else
    {"cuda", NULL, "this build has no CUDA support (the CUDA toolkit was not found at build time): use the simulated device, sim"},
#endif
};
#define BACKEND_DEVICE_ROWS (sizeof backend_device_rows / sizeof backend_device_rows[0])

int backend_table_device(const char *name, const struct device_backend_ops **out)
{
    if (!name) { /* the default: the real device when this machine has one, else the simulator */
        name = "sim";
        for (size_t i = 0; i < BACKEND_DEVICE_ROWS; i++) {
            const struct device_backend_ops *ops = backend_device_rows[i].ops;
            if (ops && ops->probe && ops->probe()) {
                name = backend_device_rows[i].name;
                break;
            }
        }
    }
    const void *ops;
    int rc = backend_lookup("device", backend_device_rows, BACKEND_DEVICE_ROWS, name, &ops);
    *out = ops;
    return rc;
}

int backend_table_device_usable(const char *name, const char **chosen, int *count)
{
    const struct device_backend_ops *ops;
    int rc = backend_table_device(name, &ops);
    if (rc < 0)
        return rc;
    *chosen = ops->name;
    *count = ops->probe ? ops->probe() : 1;
    if (*count < 1)
        return err_set(ERR_UNSUPPORTED, "device: %s: no GPU found on this machine (the driver sees none, or "
                                        "CUDA_VISIBLE_DEVICES hides them)", ops->name);
    return 0;
}

/* ---- every table's names, for --help and flag parsing -------------------------- */

static const char *backend_comm_names[BACKEND_COMM_ROWS + 1];
static const char *backend_device_names[BACKEND_DEVICE_ROWS + 1];

static void backend_names_fill(void)
{
    for (size_t i = 0; i < BACKEND_COMM_ROWS; i++)
        backend_comm_names[i] = backend_comm_rows[i].name;
    for (size_t i = 0; i < BACKEND_DEVICE_ROWS; i++)
        backend_device_names[i] = backend_device_rows[i].name;
}

static pthread_once_t backend_names_once = PTHREAD_ONCE_INIT;

const char *const *backend_table_comm_names(void)
{
    pthread_once(&backend_names_once, backend_names_fill);
    return backend_comm_names;
}

const char *const *backend_table_device_names(void)
{
    pthread_once(&backend_names_once, backend_names_fill);
    return backend_device_names;
}
