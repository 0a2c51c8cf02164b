/* backend_table: the rows of every backend table (see backend_table.h).
 *
 * The build defines HAVE_MPI / HAVE_NCCL when it compiled those backends; a
 * backend's own header declares only its ops (no MPI, CUDA or NCCL header
 * comes with it), so this file compiles the same with or without them. */
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

/* Looks `name` up in `rows` (n of them) for a table of `kind` ("comm"): 0 and
 * *ops, ERR_UNSUPPORTED for a row not built, ERR_ARG for an unknown name. */
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

static const char *backend_comm_names[BACKEND_COMM_ROWS + 1];

static void backend_comm_names_fill(void)
{
    for (size_t i = 0; i < BACKEND_COMM_ROWS; i++)
        backend_comm_names[i] = backend_comm_rows[i].name;
}

const char *const *backend_table_comm_names(void)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, backend_comm_names_fill);
    return backend_comm_names;
}

/* ---- devices ------------------------------------------------------------------ */

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
