/* device_ops: the device computes. Matrix products, the kernels of
 * transfer/kernels.h, device-to-device copies and memsets, issued on a
 * stream in stream order, each declaring the device memory it reads and
 * writes.
 *
 * Where it sits: between chapter 6's model, optimizer and reducer
 * (lib/ddp), which say *what* a step computes on device buffers, and the
 * device backends, which say *where*:
 *
 *   "cuda"  cublasSgemm and the kernels of transfer/kernels.h as CUDA
 *           kernels (lib/transfer/cuda/device_cuda.cu);
 *   "sim"   the CBLAS column-major call with exactly cuBLAS's arguments (one
 *           BLAS thread per simulated rank), and the same kernel bodies as
 *           loops (sim/device_sim.c).
 *
 * So the arguments the GPU path passes, where row-major and column-major
 * mix-ups live, are the ones `make test` checks here; and the simulated
 * device's use-before-ready detector sees every buffer every operation of a
 * training step touches, on every stream, and names the one a missing event
 * leaves unordered.
 *
 *   device_sgemm(s, &g, "fc1 forward", batch);      cublasSgemm on s
 *                                                    (StridedBatched if g.count > 1)
 *   device_kernel(s, KERNEL_relu, n, &args, ...);    relu<<<blocks, threads, 0, s>>>
 *   device_memset_async(s, p, 0, bytes);             cudaMemsetAsync
 *   device_copy_d2d_async(s, dst, src, bytes);       cudaMemcpyAsync(DeviceToDevice)
 *
 * Every call returns 0 once the operation is queued, or ERR_ARG (a bad
 * argument, named), ERR_RANGE (a span past the end of a device buffer, sim),
 * the detector's ERR_STATE, or the device's sticky error. Read device_sgemm
 * first.
 */
#ifndef DDP_DEVICE_OPS_H
#define DDP_DEVICE_OPS_H

#include "transfer/device.h"
#include "transfer/kernels.h"

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

enum device_transpose { DEVICE_OP_N, DEVICE_OP_T };

/* C = alpha op(A) op(B) + beta C, column-major, with cuBLAS's (and BLAS's)
 * arguments: op(A) is m x k, op(B) k x n, C m x n; lda, ldb and ldc are the
 * leading dimensions (rows as stored) of A, B and C. beta = 0: C is only
 * written (whatever it held, NaN included, as BLAS promises).
 *
 * Batched (cublasSgemmStridedBatched): count > 1 computes count products of
 * this one shape in one operation (one launch), product i on
 * a + i stride_a, b + i stride_b and c + i stride_c (strides in floats, not
 * bytes), each with exactly the arguments above. The simulated device makes
 * product i the very CBLAS call a single device_sgemm on those pointers
 * makes, in order i = 0 .. count - 1, so it is bit-identical to it, however
 * many products share the operation. count 0 or 1: one product, the strides
 * ignored (so an initializer that names no batch field is a single product).
 * Strides are never negative; stride_a or stride_b 0 shares one A or B among
 * all products; the products' C must not overlap, as a GPU writes them
 * concurrently: stride_c at least one C's extent, (n - 1) ldc + m, or the Cs
 * side by side within the leading dimension (stride_c >= m and
 * (count - 1) stride_c + m <= ldc: column blocks of one matrix). */
struct device_gemm {
    enum device_transpose transa, transb;
    int m, n, k;
    float alpha;
    const float *a;
    int lda;
    const float *b;
    int ldb;
    float beta;
    float *c;
    int ldc;
    int count;                          /* products; 0 or 1: one */
    int64_t stride_a, stride_b, stride_c; /* floats between consecutive products' A, B, C */
};

/* The most spans one operation declares. */
#define DEVICE_OP_MAX_SPANS 6

/* One operation as a backend receives it: the front (device_ops.c) has
 * checked its arguments and derived the memory it reads and writes. */
enum device_op_kind { DEVICE_OP_GEMM, DEVICE_OP_KERNEL, DEVICE_OP_MEMSET, DEVICE_OP_COPY_D2D, DEVICE_OP_ACCESS };

struct device_op {
    enum device_op_kind kind;
    const char *name; /* "fc2 backward (dW)", for messages; a string that outlives the operation */
    int64_t batch;    /* the batch it works on, for messages; -1: none */
    struct device_gemm gemm;
    enum kernel_id kernel;
    uint64_t n;       /* the kernel's elements (threads) */
    union kernel_args args;
    int flush_subnormals; /* sim: run with FTZ and DAZ (Adam: see lib/ddp/optim.c) */
    void *dst;            /* memset, copy */
    const void *src;
    uint64_t bytes;
    int value;
    struct device_span reads[DEVICE_OP_MAX_SPANS], writes[DEVICE_OP_MAX_SPANS];
    uint32_t nreads, nwrites;
};

/* cublasSgemm on stream s (cublasSgemmStridedBatched when g->count > 1).
 * `name` and `batch` label messages. */
int device_sgemm(device_stream_t *s, const struct device_gemm *g, const char *name, int64_t batch);

/* Kernel `id` over n elements (transfer/kernels.h says what an element is
 * for each). The memory it touches is derived from args and n. */
int device_kernel(device_stream_t *s, enum kernel_id id, uint64_t n, const union kernel_args *args, const char *name,
                  int64_t batch);

/* Adam's kernel with subnormals flushed on the simulated device, as the CPU
 * step always ran it (lib/ddp/optim.c says why); a GPU computes on
 * subnormals at full speed and keeps them. */
int device_kernel_flushing(device_stream_t *s, enum kernel_id id, uint64_t n, const union kernel_args *args,
                           const char *name, int64_t batch);

int device_memset_async(device_stream_t *s, void *dst, int value, uint64_t bytes);

/* Work done outside the device on device memory, placed in stream order: it
 * computes nothing, and declares the memory that work reads (`reads`) and
 * writes (`writes`, each a span or NULL). A collective that the host drives
 * (the simulator's communicator, MPI) marks its bucket on the communication
 * stream this way, so that the detector checks the events between that
 * stream and the compute stream as it checks a GPU's NCCL kernels. */
int device_mark_access(device_stream_t *s, const char *name, int64_t batch, const struct device_span *reads,
                       const struct device_span *writes);
int device_copy_d2d_async(device_stream_t *s, void *dst, const void *src, uint64_t bytes);

/* "bias_rows", for messages and tests. */
const char *device_kernel_name(enum kernel_id id);

/* The spans kernel `id` over n elements touches, into op->reads and
 * op->writes (the backends' tests use it too). */
void device_kernel_spans(struct device_op *op);

/* The bytes one product of g reads and writes: A, B, C read when beta != 0,
 * C written (a batched op's modelled traffic is count times this). */
uint64_t device_gemm_product_bytes(const struct device_gemm *g);

#ifdef __cplusplus
}
#endif

#endif
