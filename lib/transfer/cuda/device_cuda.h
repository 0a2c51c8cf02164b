/* device_cuda: the CUDA backend of the device interface (backend "cuda"),
 * chapter 4.
 *
 * Where it sits: behind lib/transfer/device.h, built by nvcc from
 * device_cuda.cu when the CUDA toolkit is found (it needs CUDA only, not
 * NCCL). Each call is its CUDA runtime counterpart: cudaMalloc,
 * cudaHostAlloc (pinned, write-combined), cudaHostRegister, non-blocking
 * streams, cudaMemcpyAsync, events with timing; a kernel is a spin kernel of
 * the requested duration (read on the GPU's global timer) followed by its
 * host function through cudaLaunchHostFunc. The device operations
 * (transfer/device_ops.h) are cublasSgemm (StridedBatched for a batch) on the stream (one cuBLAS handle
 * per device, float32 kept float32), one CUDA kernel per body of
 * transfer/kernels.h, cudaMemsetAsync and cudaMemcpyAsync device to device.
 * The GPU is device_config.ordinal, else $LOCAL_RANK (torchrun), else
 * $OMPI_COMM_WORLD_LOCAL_RANK (Open MPI's mpirun), else 0; its link is the
 * generation and width sysfs reports for it.
 *
 * There is no detector here: that is what the simulator is for.
 *
 * No CUDA header here: lib/backend_table.c includes this file when HAVE_CUDA.
 */
#ifndef DDP_DEVICE_CUDA_H
#define DDP_DEVICE_CUDA_H

#include "transfer/device_backend.h"

#ifdef __cplusplus
extern "C" {
#endif

extern const struct device_backend_ops device_backend_cuda;

#ifdef __cplusplus
}
#endif

#endif
