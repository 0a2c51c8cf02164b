/* device_cuda: the device interface on a real GPU (see device_cuda.h).
 *
 * Read in this order: cu_open (which GPU, its link), the copies (one
 * cudaMemcpyAsync each; from pageable memory the driver stages and blocks),
 * cu_launch (a spin kernel for the modelled compute, cudaLaunchHostFunc for
 * real host work in stream order), cu_run (the device operations: cuBLAS's
 * sgemm and the kernels of transfer/kernels.h), then the events. Every CUDA
 * and cuBLAS call goes through CU_CHECK or cu_blas_fail, which turn a failure
 * into a sticky error naming the GPU and the call, as the CUDA runtime's own
 * sticky errors are.
 */
#include "transfer/cuda/device_cuda.h"

extern "C" { /* the core's C headers without C++ guards of their own */
#include "base/cli.h"
#include "base/error.h"
}

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct cu_hostbuf { /* what device_host_alloc handed out, so device_host_free knows how to free it */
    void *ptr;
    uint64_t bytes;
    enum device_host_kind kind;
};

struct cu_device {
    int ordinal;
    struct link_profile link;
    int have_link;
    pthread_mutex_t mu;
    struct cu_hostbuf *host;
    int nhost, caphost;
    uint64_t staged_copies, staged_bytes;
    /* cuBLAS: one handle per device, made on the first product. A handle's
     * stream is its state (cublasSetStream), so setting it and issuing the
     * product hold blas_mu: two host threads on one device stay apart.
     * cuBLAS gives the same bits run after run while one stream at a time
     * runs its products (concurrent streams may get other workspaces, hence
     * other algorithms): a training step issues them on its compute stream. */
    pthread_mutex_t blas_mu;
    cublasHandle_t blas;
    int broken;
    char broken_msg[1024];
};

struct cu_event {
    cudaEvent_t ev;
    int recorded;
};

static struct cu_device *cu_of(const device_t *d) { return (struct cu_device *)d->impl; }

/* A failed call: the device breaks with a message naming the call and the
 * library's name and words for its error. */
static int cu_break(device_t *d, const char *call, const char *error, const char *why)
{
    struct cu_device *c = cu_of(d);
    pthread_mutex_lock(&c->mu);
    if (!c->broken) {
        c->broken = 1;
        snprintf(c->broken_msg, sizeof c->broken_msg, "%s (GPU %d): %s failed: %s (%s)", d->name, c->ordinal, call,
                 error, why);
    }
    int rc = err_set(ERR_IO, "%s", c->broken_msg);
    pthread_mutex_unlock(&c->mu);
    return rc;
}

static int cu_fail(device_t *d, cudaError_t e, const char *call)
{
    return cu_break(d, call, cudaGetErrorName(e), cudaGetErrorString(e));
}

static int cu_blas_fail(device_t *d, cublasStatus_t e, const char *call)
{
    return cu_break(d, call, cublasGetStatusName(e), cublasGetStatusString(e));
}

#define CU_CHECK(d, call)                          \
    do {                                           \
        cudaError_t cu_e_ = (call);                \
        if (cu_e_ != cudaSuccess)                  \
            return cu_fail((d), cu_e_, #call);     \
    } while (0)

/* Every entry: the sticky error, then this thread's current GPU. */
static int cu_enter(device_t *d)
{
    struct cu_device *c = cu_of(d);
    pthread_mutex_lock(&c->mu);
    int broken = c->broken;
    pthread_mutex_unlock(&c->mu);
    if (broken)
        return err_set(ERR_IO, "%s", c->broken_msg);
    CU_CHECK(d, cudaSetDevice(c->ordinal));
    return 0;
}

/* ---- the device ---------------------------------------------------------------------- */

static int cu_probe(void)
{
    int n = 0;
    return cudaGetDeviceCount(&n) == cudaSuccess ? n : 0;
}

static int cu_open(device_t *d, const struct device_config *cfg)
{
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess || n == 0)
        return err_set(ERR_UNSUPPORTED, "%s: --backend=cuda: no CUDA device found (cudaGetDeviceCount: %s)", d->name,
                       e != cudaSuccess ? cudaGetErrorString(e) : "0 devices");
    int ordinal = cfg->ordinal;
    if (ordinal < 0) { /* the launcher's GPU for this process, read as strictly as a flag: "1x" is not GPU 1 */
        const char *var = "LOCAL_RANK", *local = getenv(var); /* torchrun's */
        if (!local || !*local) /* Open MPI's mpirun says it under its own name */
            local = getenv(var = "OMPI_COMM_WORLD_LOCAL_RANK");
        uint64_t v = 0;
        int rc = local && *local ? cli_parse_env(var, local, 0, (uint64_t)n - 1, &v) : 0;
        if (rc < 0)
            return err_wrap(rc, "%s: --backend=cuda: the GPU of this rank (this machine has %d)", d->name, n);
        ordinal = (int)v;
    }
    if (ordinal < 0 || ordinal >= n)
        return err_set(ERR_ARG, "%s: GPU %d asked, this machine has %d (0 to %d)", d->name, ordinal, n, n - 1);
    struct cu_device *c = (struct cu_device *)calloc(1, sizeof *c);
    if (!c)
        return err_set(ERR_NOMEM, "%s: out of memory", d->name);
    c->ordinal = ordinal;
    pthread_mutex_init(&c->mu, NULL);
    pthread_mutex_init(&c->blas_mu, NULL);
    d->impl = c;
    cudaDeviceProp prop;
    e = cudaSetDevice(ordinal);
    if (e == cudaSuccess)
        e = cudaGetDeviceProperties(&prop, ordinal);
    if (e != cudaSuccess) {
        int rc = err_set(ERR_IO, "%s: GPU %d: %s", d->name, ordinal, cudaGetErrorString(e));
        pthread_mutex_destroy(&c->mu);
        pthread_mutex_destroy(&c->blas_mu);
        free(c);
        d->impl = NULL;
        return rc;
    }
    char bus[32] = "";
    cudaDeviceGetPCIBusId(bus, (int)sizeof bus, ordinal);
    for (char *p = bus; *p; p++) /* sysfs names are lower case */
        if (*p >= 'A' && *p <= 'F')
            *p = (char)(*p - 'A' + 'a');
    c->have_link = link_from_sysfs(bus, &c->link) == 0;
    if (c->have_link)
        snprintf(d->description, sizeof d->description, "%.100s (GPU %d, PCI %.16s) on %s as the system reports it "
                 "(limit %.2f GB/s)", prop.name, ordinal, bus, c->link.title, c->link.limit_bps / 1e9);
    else
        snprintf(d->description, sizeof d->description, "%.100s (GPU %d, PCI %.16s); link not reported: %.100s", prop.name,
                 ordinal, bus, err_msg());
    return 0;
}

static void cu_close(device_t *d)
{
    struct cu_device *c = cu_of(d);
    cudaSetDevice(c->ordinal);
    for (int i = 0; i < c->nhost; i++) {
        if (c->host[i].kind == DEVICE_HOST_PAGEABLE)
            free(c->host[i].ptr);
        else
            cudaFreeHost(c->host[i].ptr);
    }
    free(c->host);
    if (c->blas)
        cublasDestroy(c->blas);
    pthread_mutex_destroy(&c->mu);
    pthread_mutex_destroy(&c->blas_mu);
    free(c);
}

static int cu_link(const device_t *d, struct link_profile *out)
{
    const struct cu_device *c = cu_of(d);
    if (!c->have_link)
        return err_set(ERR_UNSUPPORTED, "%s: the system does not report GPU %d's PCIe link", d->name, c->ordinal);
    *out = c->link;
    return 0;
}

/* ---- memory ------------------------------------------------------------------------ */

static int cu_mem_alloc(device_t *d, uint64_t bytes, const char *name, void **out)
{
    int rc = cu_enter(d);
    if (rc)
        return rc;
    cudaError_t e = cudaMalloc(out, bytes);
    if (e != cudaSuccess) { /* out of memory is the caller's problem, not a broken device */
        cudaGetLastError();
        return err_set(ERR_NOMEM, "%s (GPU %d): cannot allocate %llu bytes of device memory for '%s': %s", d->name,
                       cu_of(d)->ordinal, (unsigned long long)bytes, name, cudaGetErrorString(e));
    }
    return 0;
}

static void cu_mem_free(device_t *d, void *ptr)
{
    if (cu_enter(d) == 0)
        cudaFree(ptr);
}

static int cu_remember(device_t *d, void *ptr, uint64_t bytes, enum device_host_kind kind)
{
    struct cu_device *c = cu_of(d);
    pthread_mutex_lock(&c->mu);
    if (c->nhost == c->caphost) {
        int cap = c->caphost ? c->caphost * 2 : 8;
        struct cu_hostbuf *h = (struct cu_hostbuf *)realloc(c->host, (size_t)cap * sizeof *h);
        if (!h) {
            pthread_mutex_unlock(&c->mu);
            return err_set(ERR_NOMEM, "%s: out of memory for the host buffer table", d->name);
        }
        c->host = h;
        c->caphost = cap;
    }
    c->host[c->nhost].ptr = ptr;
    c->host[c->nhost].bytes = bytes;
    c->host[c->nhost].kind = kind;
    c->nhost++;
    pthread_mutex_unlock(&c->mu);
    return 0;
}

static int cu_host_alloc(device_t *d, enum device_host_kind kind, uint64_t bytes, const char *name, void **out)
{
    int rc = cu_enter(d);
    if (rc)
        return rc;
    if (kind == DEVICE_HOST_PAGEABLE) {
        *out = malloc(bytes);
        if (!*out)
            return err_set(ERR_NOMEM, "%s: cannot allocate %llu bytes of pageable memory for '%s'", d->name,
                           (unsigned long long)bytes, name);
    } else {
        unsigned flags = kind == DEVICE_HOST_WRITE_COMBINED ? cudaHostAllocWriteCombined : cudaHostAllocDefault;
        cudaError_t e = cudaHostAlloc(out, bytes, flags);
        if (e != cudaSuccess) {
            cudaGetLastError();
            return err_set(ERR_NOMEM, "%s (GPU %d): cudaHostAlloc of %llu bytes of %s memory for '%s' failed: %s",
                           d->name, cu_of(d)->ordinal, (unsigned long long)bytes, device_host_kind_name(kind), name,
                           cudaGetErrorString(e));
        }
    }
    rc = cu_remember(d, *out, bytes, kind);
    if (rc) {
        if (kind == DEVICE_HOST_PAGEABLE)
            free(*out);
        else
            cudaFreeHost(*out);
        *out = NULL;
    }
    return rc;
}

static void cu_host_free(device_t *d, void *ptr)
{
    struct cu_device *c = cu_of(d);
    cudaSetDevice(c->ordinal);
    pthread_mutex_lock(&c->mu);
    for (int i = 0; i < c->nhost; i++) {
        if (c->host[i].ptr != ptr)
            continue;
        if (c->host[i].kind == DEVICE_HOST_PAGEABLE)
            free(ptr);
        else
            cudaFreeHost(ptr);
        c->host[i] = c->host[--c->nhost];
        break;
    }
    pthread_mutex_unlock(&c->mu);
}

static int cu_host_register(device_t *d, void *ptr, uint64_t bytes, const char *name)
{
    int rc = cu_enter(d);
    if (rc)
        return rc;
    cudaError_t e = cudaHostRegister(ptr, bytes, cudaHostRegisterDefault);
    if (e != cudaSuccess) {
        cudaGetLastError();
        return err_set(ERR_ARG, "%s (GPU %d): cudaHostRegister of %llu bytes at %p ('%s') failed: %s", d->name,
                       cu_of(d)->ordinal, (unsigned long long)bytes, ptr, name, cudaGetErrorString(e));
    }
    return 0;
}

static int cu_host_unregister(device_t *d, void *ptr)
{
    int rc = cu_enter(d);
    if (rc)
        return rc;
    cudaError_t e = cudaHostUnregister(ptr);
    if (e != cudaSuccess) {
        cudaGetLastError();
        return err_set(ERR_ARG, "%s: cudaHostUnregister(%p) failed: %s", d->name, ptr, cudaGetErrorString(e));
    }
    return 0;
}

static enum device_host_kind cu_host_kind_of(device_t *d, const void *ptr, uint64_t bytes)
{
    struct cu_device *c = cu_of(d);
    (void)bytes;
    pthread_mutex_lock(&c->mu);
    for (int i = 0; i < c->nhost; i++) {
        const char *p = (const char *)ptr, *base = (const char *)c->host[i].ptr;
        if (p >= base && p < base + c->host[i].bytes) {
            enum device_host_kind kind = c->host[i].kind;
            pthread_mutex_unlock(&c->mu);
            return kind;
        }
    }
    pthread_mutex_unlock(&c->mu);
    cudaPointerAttributes attr;
    if (cudaPointerGetAttributes(&attr, ptr) != cudaSuccess) {
        cudaGetLastError();
        return DEVICE_HOST_PAGEABLE;
    }
    return attr.type == cudaMemoryTypeHost ? DEVICE_HOST_REGISTERED : DEVICE_HOST_PAGEABLE;
}

/* ---- streams and copies -------------------------------------------------------------- */

static int cu_stream_create(device_stream_t *s)
{
    int rc = cu_enter(s->dev);
    if (rc)
        return rc;
    cudaStream_t st;
    CU_CHECK(s->dev, cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    s->impl = (void *)st;
    return 0;
}

static void cu_stream_destroy(device_stream_t *s)
{
    cudaSetDevice(cu_of(s->dev)->ordinal);
    cudaStreamDestroy((cudaStream_t)s->impl);
}

static void *cu_stream_native(const device_stream_t *s) { return s->impl; }

static void cu_count_staged(device_t *d, const void *host, uint64_t bytes)
{
    if (cu_host_kind_of(d, host, bytes) != DEVICE_HOST_PAGEABLE)
        return;
    struct cu_device *c = cu_of(d);
    pthread_mutex_lock(&c->mu);
    c->staged_copies++;
    c->staged_bytes += bytes;
    pthread_mutex_unlock(&c->mu);
}

static int cu_copy_async(device_stream_t *s, void *dst, const void *src, uint64_t bytes, enum device_dir dir,
                         int64_t batch)
{
    (void)batch;
    int rc = cu_enter(s->dev);
    if (rc)
        return rc;
    cu_count_staged(s->dev, dir == DEVICE_H2D ? src : dst, bytes);
    CU_CHECK(s->dev, cudaMemcpyAsync(dst, src, bytes, dir == DEVICE_H2D ? cudaMemcpyHostToDevice
                                                                        : cudaMemcpyDeviceToHost,
                                     (cudaStream_t)s->impl));
    return 0;
}

static int cu_copy(device_t *d, void *dst, const void *src, uint64_t bytes, enum device_dir dir)
{
    int rc = cu_enter(d);
    if (rc)
        return rc;
    cu_count_staged(d, dir == DEVICE_H2D ? src : dst, bytes);
    CU_CHECK(d, cudaMemcpy(dst, src, bytes, dir == DEVICE_H2D ? cudaMemcpyHostToDevice : cudaMemcpyDeviceToHost));
    return 0;
}

/* Busy for `ns` nanoseconds of the GPU's global timer: the modelled compute. */
__global__ void cu_spin(unsigned long long ns)
{
    unsigned long long start, now;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
    do {
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
    } while (now - start < ns);
}

static int cu_launch(device_stream_t *s, const struct device_kernel *k)
{
    int rc = cu_enter(s->dev);
    if (rc)
        return rc;
    cudaStream_t st = (cudaStream_t)s->impl;
    if (k->seconds > 0) {
        cu_spin<<<1, 1, 0, st>>>((unsigned long long)(k->seconds * 1e9));
        CU_CHECK(s->dev, cudaGetLastError());
    }
    if (k->fn)
        CU_CHECK(s->dev, cudaLaunchHostFunc(st, k->fn, k->arg));
    return 0;
}

/* ---- the device operations (transfer/device_ops.h) ---------------------------------- */

/* The handle, made once (blas_mu held). Float32 stays float32:
 * CUBLAS_DEFAULT_MATH keeps at least the precision asked for, so no TF32
 * tensor-core products (CUBLAS_TF32_TENSOR_OP_MATH) and no BF16x9 emulation
 * (CUBLAS_FP32_EMULATED_BF16X9_MATH), which must be asked for by name; it is
 * also what PyTorch sets when TF32 is off, its default for matmul. alpha and
 * beta are host floats (CUBLAS_POINTER_MODE_HOST). */
static int cu_blas_handle(device_t *d, cublasHandle_t *out)
{
    struct cu_device *c = cu_of(d);
    if (!c->blas) {
        cublasHandle_t h;
        cublasStatus_t e = cublasCreate(&h);
        if (e != CUBLAS_STATUS_SUCCESS)
            return cu_blas_fail(d, e, "cublasCreate");
        e = cublasSetMathMode(h, CUBLAS_DEFAULT_MATH);
        if (e == CUBLAS_STATUS_SUCCESS)
            e = cublasSetPointerMode(h, CUBLAS_POINTER_MODE_HOST);
        if (e != CUBLAS_STATUS_SUCCESS) {
            cublasDestroy(h);
            return cu_blas_fail(d, e, "cublasSetMathMode/cublasSetPointerMode");
        }
        c->blas = h;
    }
    *out = c->blas;
    return 0;
}

static cublasOperation_t cu_blas_op(enum device_transpose t) { return t == DEVICE_OP_T ? CUBLAS_OP_T : CUBLAS_OP_N; }

/* The product with exactly the arguments device_gemm holds: they are
 * cuBLAS's own, which the simulated device passes to CBLAS's column-major
 * call. count > 1: cublasSgemmStridedBatched, one launch for every product. */
static int cu_gemm(device_t *d, cudaStream_t st, const struct device_op *op)
{
    struct cu_device *c = cu_of(d);
    const struct device_gemm *g = &op->gemm;
    char call[160];
    snprintf(call, sizeof call, "%s '%.100s'", g->count > 1 ? "cublasSgemmStridedBatched" : "cublasSgemm", op->name);
    pthread_mutex_lock(&c->blas_mu);
    cublasHandle_t h = NULL;
    int rc = cu_blas_handle(d, &h);
    cublasStatus_t e = CUBLAS_STATUS_SUCCESS;
    if (rc == 0)
        e = cublasSetStream(h, st);
    if (rc == 0 && e == CUBLAS_STATUS_SUCCESS && g->count > 1)
        e = cublasSgemmStridedBatched(h, cu_blas_op(g->transa), cu_blas_op(g->transb), g->m, g->n, g->k, &g->alpha,
                                      g->a, g->lda, g->stride_a, g->b, g->ldb, g->stride_b, &g->beta, g->c, g->ldc,
                                      g->stride_c, g->count);
    else if (rc == 0 && e == CUBLAS_STATUS_SUCCESS)
        e = cublasSgemm(h, cu_blas_op(g->transa), cu_blas_op(g->transb), g->m, g->n, g->k, &g->alpha, g->a, g->lda,
                        g->b, g->ldb, &g->beta, g->c, g->ldc);
    pthread_mutex_unlock(&c->blas_mu);
    if (rc == 0 && e != CUBLAS_STATUS_SUCCESS)
        rc = cu_blas_fail(d, e, call);
    return rc;
}

/* Every kernel of KERNEL_LIST as a CUDA kernel: a grid-stride loop calling
 * the body both compilers build (nvcc with -fmad=false: see kernels.h), its
 * arguments passed by value as kernel parameters. */
#define CU_KERNEL(name)                                                                                                \
    __global__ void cu_kernel_##name(struct kernel_##name a, uint64_t n)                                               \
    {                                                                                                                  \
        uint64_t stride = (uint64_t)gridDim.x * blockDim.x;                                                            \
        for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)                         \
            kernel_##name(&a, i);                                                                                      \
    }
KERNEL_LIST(CU_KERNEL)
#undef CU_KERNEL

/* 256 threads a block; at most 1024 blocks, about one full wave on a large
 * GPU (an H100 holds 132 x 2048 threads at once): a longer tensor loops. */
static const unsigned cu_threads = 256, cu_max_blocks = 1024;

static int cu_kernel(device_t *d, cudaStream_t st, const struct device_op *op)
{
    uint64_t want = (op->n + cu_threads - 1) / cu_threads;
    unsigned blocks = want < cu_max_blocks ? (unsigned)want : cu_max_blocks;
#define CU_LAUNCH(name)                                                                                                \
    case KERNEL_##name: cu_kernel_##name<<<blocks, cu_threads, 0, st>>>(op->args.name, op->n); break;
    switch (op->kernel) {
        KERNEL_LIST(CU_LAUNCH)
    case KERNEL_COUNT: return err_set(ERR_ARG, "%s: kernel %d does not exist", d->name, (int)op->kernel);
    }
#undef CU_LAUNCH
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) {
        char call[160];
        snprintf(call, sizeof call, "the launch of kernel '%.100s'", op->name);
        return cu_fail(d, e, call);
    }
    return 0;
}

/* A device operation on s's stream, in stream order. A GPU computes on
 * subnormals at full speed, so op->flush_subnormals (a CPU's concern) is
 * not applied here. */
static int cu_run(device_stream_t *s, const struct device_op *op)
{
    int rc = cu_enter(s->dev);
    if (rc)
        return rc;
    cudaStream_t st = (cudaStream_t)s->impl;
    switch (op->kind) {
    case DEVICE_OP_GEMM: return cu_gemm(s->dev, st, op);
    case DEVICE_OP_KERNEL: return cu_kernel(s->dev, st, op);
    case DEVICE_OP_MEMSET: CU_CHECK(s->dev, cudaMemsetAsync(op->dst, op->value, op->bytes, st)); return 0;
    case DEVICE_OP_COPY_D2D:
        CU_CHECK(s->dev, cudaMemcpyAsync(op->dst, op->src, op->bytes, cudaMemcpyDeviceToDevice, st));
        return 0;
    case DEVICE_OP_ACCESS: return 0; /* work done elsewhere: its order is the simulator's detector's concern */
    }
    return err_set(ERR_ARG, "%s: device operation '%s' of unknown kind %d", s->dev->name, op->name, (int)op->kind);
}

/* ---- events -------------------------------------------------------------------------- */

static int cu_event_create(device_event_t *e)
{
    int rc = cu_enter(e->dev);
    if (rc)
        return rc;
    struct cu_event *ce = (struct cu_event *)calloc(1, sizeof *ce);
    if (!ce)
        return err_set(ERR_NOMEM, "%s: out of memory for an event", e->dev->name);
    cudaError_t err = cudaEventCreate(&ce->ev);
    if (err != cudaSuccess) {
        free(ce);
        return cu_fail(e->dev, err, "cudaEventCreate");
    }
    e->impl = ce;
    return 0;
}

static void cu_event_destroy(device_event_t *e)
{
    struct cu_event *ce = (struct cu_event *)e->impl;
    cudaSetDevice(cu_of(e->dev)->ordinal);
    cudaEventDestroy(ce->ev);
    free(ce);
}

static int cu_event_record(device_event_t *e, device_stream_t *s)
{
    int rc = cu_enter(e->dev);
    if (rc)
        return rc;
    struct cu_event *ce = (struct cu_event *)e->impl;
    CU_CHECK(e->dev, cudaEventRecord(ce->ev, (cudaStream_t)s->impl));
    ce->recorded = 1;
    return 0;
}

static int cu_stream_wait_event(device_stream_t *s, device_event_t *e)
{
    int rc = cu_enter(s->dev);
    if (rc)
        return rc;
    CU_CHECK(s->dev, cudaStreamWaitEvent((cudaStream_t)s->impl, ((struct cu_event *)e->impl)->ev, 0));
    return 0;
}

static int cu_event_synchronize(device_event_t *e)
{
    int rc = cu_enter(e->dev);
    if (rc)
        return rc;
    CU_CHECK(e->dev, cudaEventSynchronize(((struct cu_event *)e->impl)->ev));
    return 0;
}

static int cu_event_query(device_event_t *e)
{
    int rc = cu_enter(e->dev);
    if (rc)
        return rc;
    cudaError_t err = cudaEventQuery(((struct cu_event *)e->impl)->ev);
    if (err == cudaErrorNotReady) {
        cudaGetLastError();
        return 0;
    }
    CU_CHECK(e->dev, err);
    return 1;
}

static int cu_event_elapsed(device_event_t *a, device_event_t *b, double *seconds)
{
    int rc = cu_enter(a->dev);
    if (rc)
        return rc;
    struct cu_event *ea = (struct cu_event *)a->impl, *eb = (struct cu_event *)b->impl;
    if (!ea->recorded || !eb->recorded)
        return err_set(ERR_STATE, "%s: device_event_elapsed: the %s event was never recorded", a->dev->name,
                       ea->recorded ? "end" : "start");
    float ms = 0;
    cudaError_t err = cudaEventElapsedTime(&ms, ea->ev, eb->ev);
    if (err == cudaErrorNotReady) {
        cudaGetLastError();
        return err_set(ERR_STATE, "%s: device_event_elapsed: an event is not reached yet (synchronize first)",
                       a->dev->name);
    }
    CU_CHECK(a->dev, err);
    *seconds = ms * 1e-3;
    return 0;
}

static int cu_stream_synchronize(device_stream_t *s)
{
    int rc = cu_enter(s->dev);
    if (rc)
        return rc;
    CU_CHECK(s->dev, cudaStreamSynchronize((cudaStream_t)s->impl));
    return 0;
}

static int cu_synchronize(device_t *d)
{
    int rc = cu_enter(d);
    if (rc)
        return rc;
    CU_CHECK(d, cudaDeviceSynchronize());
    return 0;
}

static void cu_stats(device_t *d, struct device_stats *out)
{
    struct cu_device *c = cu_of(d);
    pthread_mutex_lock(&c->mu);
    out->staged_copies = c->staged_copies;
    out->staged_bytes = c->staged_bytes;
    pthread_mutex_unlock(&c->mu);
}

extern "C" const struct device_backend_ops device_backend_cuda = {
    "cuda",
    cu_probe,
    cu_open,
    cu_close,
    cu_link,
    cu_mem_alloc,
    cu_mem_free,
    cu_host_alloc,
    cu_host_free,
    cu_host_register,
    cu_host_unregister,
    NULL, /* host_rename: names are for the simulator's messages */
    cu_host_kind_of,
    cu_stream_create,
    cu_stream_destroy,
    cu_stream_native,
    cu_copy_async,
    cu_copy,
    cu_launch,
    cu_run,
    cu_event_create,
    cu_event_destroy,
    cu_event_record,
    cu_stream_wait_event,
    cu_event_synchronize,
    cu_event_query,
    cu_event_elapsed,
    cu_stream_synchronize,
    cu_synchronize,
    cu_stats,
};
