/* backend_table: which implementation stands behind each run-time name.
 *
 * Where it sits: beside the stages, not in one. The portable core (lib/comm's
 * front, lib/transfer's device front) knows its backends only through an
 * interface (struct comm_backend_ops, struct device_backend_ops); this table
 * is the one place that names them, and so the one file of lib/ that includes
 * sim/ headers and the backend folders' headers (lib/comm/mpi/,
 * lib/comm/nccl/, lib/transfer/cuda/). A front asks the table by the name the
 * user typed (--backend=mpi) and gets the operations, or an error that says
 * what to install.
 *
 * A backend the build did not compile still has its row: its name then gives
 * "not built, install X" rather than "unknown".
 *
 * Adding a kind of backend is one more table of rows in backend_table.c and
 * one typed lookup here, in the shape of the comm and device functions below;
 * this header stays free of every stage's headers (the ops types are only
 * declared), so any stage's front may include it.
 *
 * Read backend_table_comm() first.
 */
#ifndef DDP_BACKEND_TABLE_H
#define DDP_BACKEND_TABLE_H

struct comm_backend_ops;
struct device_backend_ops;

/* ---- communicator backends (lib/comm/comm.h) -------------------------------- */

/* Finds the communicator backend called `name`: 0 with *out set; ERR_UNSUPPORTED
 * when this build lacks it (the message says what would build it); ERR_ARG for
 * a name no build knows or NULL (the message lists the names). */
int backend_table_comm(const char *name, const struct comm_backend_ops **out);

/* Every communicator backend's name, built or not, NULL-terminated, in the
 * order --help lists them ("sim", "mpi", "nccl"). For flag parsing: a name
 * outside this list is a usage error, a listed one that is not built is a
 * run-time one. */
const char *const *backend_table_comm_names(void);

/* ---- device backends (lib/transfer/device.h) --------------------------------- */

/* Finds the device backend called `name`: 0 with *out set; ERR_UNSUPPORTED
 * when this build lacks it ("cuda" without the CUDA toolkit: the message says
 * so); ERR_ARG for a name no build knows (the message lists the names). NULL
 * asks for the default: the real device when it is built and its probe finds
 * one on this machine (a GPU), else the simulator. */
int backend_table_device(const char *name, const struct device_backend_ops **out);

/* The device backend `name` can open here: built, and (for a real device)
 * its probe finds one. NULL: the default's name. 0 with *chosen set (the
 * default's name for NULL) and *count (how many such devices: GPUs, or 1),
 * ERR_UNSUPPORTED ("cuda: no GPU found", or this build lacks it), ERR_ARG. */
int backend_table_device_usable(const char *name, const char **chosen, int *count);

/* Every device backend's name, built or not, NULL-terminated, in the order
 * --help lists them ("sim", "cuda"). */
const char *const *backend_table_device_names(void);

#endif
