/* device_exec: how the simulated device computes. One device operation
 * (transfer/device_ops.h), run on the calling thread: a matrix product as
 * CBLAS's column-major call with exactly the arguments cuBLAS takes, a
 * kernel as a loop over its elements calling the body of
 * transfer/kernels.h, a memset or a device-to-device copy as memset and
 * memcpy (device memory is host memory here).
 *
 * Where it sits: under sim/device_sim.c, which orders the operation on its
 * stream, checks its spans with the detector and then calls this, on its
 * compute engine or inline on the host's thread. Pure computation: no lock,
 * no state but what the operation names.
 */
#ifndef DDP_DEVICE_EXEC_H
#define DDP_DEVICE_EXEC_H

#include "transfer/device_ops.h"

#include <stdint.h>

/* Runs op; returns the nanoseconds spent inside cblas_sgemm (0 for the
 * others), for device_stats' gemm time. */
uint64_t device_exec(const struct device_op *op);

/* Sets OpenBLAS to one thread, once per process: every simulated rank runs
 * its own products, and BLAS threads on top of rank threads thrash a small
 * machine (openblas_set_num_threads itself is not safe to call from several
 * threads at once). */
void device_exec_one_blas_thread(void);

#endif
