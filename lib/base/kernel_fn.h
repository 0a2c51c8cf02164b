/* kernel_fn: the qualifier of a function both compilers build, gcc for the
 * host and the simulated device, nvcc for the host and the GPU.
 *
 * Where it sits: under every arithmetic the device runs (lib/transfer/
 * kernels.h, the 16-bit conversions of base/half.h). Written once, such a
 * function is the same arithmetic on the GPU and in the tests that run here.
 */
#ifndef DDP_KERNEL_FN_H
#define DDP_KERNEL_FN_H

#if defined(__CUDACC__)
#define KERNEL_FN static inline __host__ __device__
#else
#define KERNEL_FN static inline
#endif

#endif
