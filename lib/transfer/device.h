/* device: one interface to a GPU, real or simulated (chapter 4).
 *
 * Where it sits: after the loader (chapter 3), before the model (chapter 6).
 * A batch leaves the loader's ring in host memory; this is how it gets to
 * the device: memory on both sides, streams, asynchronous copies and the
 * events that order them. Two backends, chosen at run time:
 *
 *   "cuda"  a real GPU through the CUDA runtime (lib/transfer/cuda/, nvcc);
 *   "sim"   the simulated device (sim/device_sim.h): device memory is host
 *           memory, a copy engine per direction times each copy by the link
 *           model and really moves the bytes, and a use-before-ready detector
 *           checks the ordering of every access (see below).
 *
 * The calls mirror CUDA's, so reading one teaches the other:
 *
 *   device_open(&cfg, &dev);                          cudaSetDevice
 *   device_malloc(dev, bytes, "batch 0", &d);         cudaMalloc
 *   device_host_alloc(dev, DEVICE_HOST_PINNED, ...);  cudaHostAlloc
 *   device_stream_create(dev, "copy", &s);            cudaStreamCreateWithFlags(NonBlocking)
 *   device_copy_async(s, d, h, bytes, DEVICE_H2D, k); cudaMemcpyAsync
 *   device_event_record(e, s);                        cudaEventRecord
 *   device_stream_wait_event(compute, e);             cudaStreamWaitEvent
 *   device_launch(compute, &kernel);                  a kernel launch
 *   device_event_synchronize(e);                      cudaEventSynchronize
 *
 * Rules both backends keep, as CUDA does:
 * - Work on one stream runs in the order it was issued; work on two streams
 *   is unordered unless an event orders it.
 * - A copy from pinned (or write-combined, or registered) memory is
 *   asynchronous: it returns at once and the host must not touch the host
 *   buffer until the copy's event completed. A copy from pageable memory is
 *   staged through a small pinned bounce buffer by the host, chunk by chunk,
 *   and returns only when it is done: it blocks the host and overlaps nothing.
 * - Errors are sticky: after a use-before-ready error (sim) or a failed CUDA
 *   call, every later call on the device returns the same error.
 *
 * The detector (sim only, always on): it names the buffer, the copy, the
 * streams and the batch when
 *   - a kernel reads (or a copy overwrites) a device buffer whose last write
 *     (or read) is not ordered before it by its stream or an event; and
 *   - the host writes into a pinned buffer while an asynchronous copy out of
 *     it is still in flight: the bug of handing a loader slot back too early
 *     (caught in one of two ways, device_config's write_check).
 * A kernel declares the device memory it reads and writes (device_kernel's
 * reads and writes) for the first check; the second needs nothing.
 *
 * Read device_open(), device_copy_async() and the events first; struct
 * device_kernel is how chapter 6 runs its model in stream order.
 */
#ifndef DDP_DEVICE_H
#define DDP_DEVICE_H

#include "transfer/link.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct device device_t;
typedef struct device_stream device_stream_t;
typedef struct device_event device_event_t;

/* The four kinds of host memory a copy can start from. */
enum device_host_kind {
    DEVICE_HOST_PAGEABLE,       /* plain malloc: copies are staged and synchronous */
    DEVICE_HOST_PINNED,         /* page-locked (cudaHostAlloc): the copy engine reads it directly */
    DEVICE_HOST_WRITE_COMBINED, /* pinned and write-combined: the host writes it fast and reads it very slowly */
    DEVICE_HOST_REGISTERED,     /* an existing buffer page-locked in place (cudaHostRegister) */
    DEVICE_HOST_KINDS
};

enum device_dir { DEVICE_H2D, DEVICE_D2H };

/* How the simulated device catches a host write into the pinned source of a
 * copy still in flight (from the copy's issue until the host learns it
 * ended: an event, a query or a synchronize). */
enum device_write_check {
    /* The source's pages are write-protected (mprotect, sim/write_guard.h):
     * the first write traps, and the message names the writing thread and
     * the byte. Two mprotect calls a copy, each a TLB shootdown on every core
     * running the program: about 12 us with the other core busy. */
    DEVICE_WRITE_CHECK_TRAP,
    /* The source is hashed, in blocks of 4 KiB, at the copy's issue and again
     * when the host learns the copy ended: a write that changed its bytes is
     * reported then, naming the first changed block, not the writer. Two
     * passes over the bytes and no system call; it also sees writes a trap
     * cannot (by the kernel, read(2) into the buffer), and not a write that
     * left the bytes as they were (which changes nothing the copy reads). */
    DEVICE_WRITE_CHECK_BYTES,
};

struct device_config {
    const char *backend;      /* "sim", "cuda", or NULL: cuda when a GPU is found, else sim */
    int ordinal;              /* cuda: which GPU (-1: $LOCAL_RANK, else 0) */
    struct link_profile link; /* sim: the modelled link (device_config_default: LINK_DEFAULT) */
    double gemm_flops;        /* sim: the modelled GPU's matrix-product rate, FLOP/s (hw_gemm_flops of DEVICE_GPU_DEFAULT) */
    double gpu_memory_bps;    /* sim: its memory bandwidth, bytes per second */
    const char *name;         /* how messages name the device ("device", "rank 2's device") */
    enum device_write_check write_check; /* sim: how a host write into an in-flight copy is caught (default TRAP) */
};

/* Memory a kernel touches: `bytes` bytes at device address `ptr`. */
struct device_span {
    const void *ptr;
    uint64_t bytes;
};

/* A kernel: the device's compute, in stream order. On the simulated device
 * the compute engine is busy for `seconds` (modelled) and runs `fn` (real CPU
 * work, may read and write device memory, which is host memory there); on a
 * GPU `seconds` is a spin kernel and `fn` a host function in stream order
 * (cudaLaunchHostFunc: it must not call CUDA). Either may be 0/NULL. */
struct device_kernel {
    const char *name;  /* "forward", for messages */
    int64_t batch;     /* the batch it works on, for messages; -1: none */
    double seconds;
    void (*fn)(void *arg);
    void *arg;
    const struct device_span *reads; /* device memory it reads (sim: checked ready) */
    uint32_t nreads;
    const struct device_span *writes; /* device memory it writes */
    uint32_t nwrites;
};

/* What the device has done so far. The sim fills every field; cuda the
 * counts. */
struct device_stats {
    uint64_t copies[2], bytes[2];  /* per direction (DEVICE_H2D, DEVICE_D2H) */
    uint64_t staged_copies;        /* copies from pageable memory ... */
    uint64_t staged_bytes;         /* ... and their bytes: each one more host memcpy */
    double staging_s;              /* sim: modelled host time spent copying into and out of the bounce buffer */
    uint64_t kernels;
    double engine_busy_s[2];       /* sim: modelled time each copy engine was busy */
    double engine_cpu_s;           /* sim: CPU time the copy engines' threads used */
    uint64_t watched_copies[2];    /* sim: copies whose pinned source was watched for host writes, by
                                    * each write_check (DEVICE_WRITE_CHECK_TRAP, DEVICE_WRITE_CHECK_BYTES) */
    uint64_t pin_refused;          /* sim: pinned allocations the OS would not lock (RLIMIT_MEMLOCK) */
    uint64_t gemm_calls;           /* sim: matrix products run (device_sgemm) ... */
    double gemm_s;                 /* ... and the wall time spent inside cblas_sgemm */
};

/* The GPU the simulated device models by default (transfer/hw.h): the A100,
 * because its host link is PCIe Gen4, LINK_DEFAULT's, so that the default
 * link and the default GPU describe one machine. Its FP32 and memory peaks
 * time the simulated device's compute. */
#define DEVICE_GPU_DEFAULT "a100"

/* Fills the defaults: backend NULL (auto), ordinal -1, the LINK_DEFAULT link,
 * DEVICE_GPU_DEFAULT's compute and memory figures, name "device". */
void device_config_default(struct device_config *cfg);

struct hw_profile;
/* The modelled machine of hardware profile hw (--hw=NAME): its host link and
 * its GPU's compute and memory figures. */
void device_config_hw(struct device_config *cfg, const struct hw_profile *hw);

/* Opens a device. 0, or: ERR_ARG (unknown backend), ERR_UNSUPPORTED ("cuda"
 * in a build without CUDA, or no GPU found), ERR_IO / ERR_NOMEM, with
 * err_msg() naming the backend and why. */
int device_open(const struct device_config *cfg, device_t **out);

/* Waits for all work, then frees streams, events and memory still held.
 * NULL is allowed. */
void device_close(device_t *dev);

/* "sim" or "cuda". */
const char *device_backend_name(const device_t *dev);

/* One line: what the device is and the link it sits on ("simulated device,
 * PCIe Gen4 x16 modelled: 28.8 GB/s, 5 us" or the GPU's name and the link
 * the system reports). */
const char *device_describe(const device_t *dev);

/* The link: the sim's model, or the GPU's link from sysfs (ERR_UNSUPPORTED
 * when the system does not say). */
int device_link(const device_t *dev, struct link_profile *out);

/* Device memory. The sim returns host memory a CPU kernel can read; cuda a
 * device pointer. `name` is kept for messages. 0, ERR_ARG (0 bytes),
 * ERR_NOMEM naming the size. */
int device_malloc(device_t *dev, uint64_t bytes, const char *name, void **out);
void device_free(device_t *dev, void *ptr);

/* Host memory of `kind` (not DEVICE_HOST_REGISTERED: see device_host_register).
 * Pinned kinds are page-locked here, which costs time: pin once and reuse
 * (transfer/pinned_pool.h). 0, ERR_ARG, ERR_NOMEM naming the size and why. */
int device_host_alloc(device_t *dev, enum device_host_kind kind, uint64_t bytes, const char *name, void **out);
void device_host_free(device_t *dev, void *ptr);

/* Page-locks an existing buffer in place, and undoes it. */
int device_host_register(device_t *dev, void *ptr, uint64_t bytes, const char *name);
int device_host_unregister(device_t *dev, void *ptr);

/* Renames the pinned buffer holding `ptr` for messages ("loader slot 1").
 * Does nothing for memory the device does not know. */
void device_host_rename(device_t *dev, const void *ptr, const char *name);

/* What a copy of [ptr, ptr + bytes) would start from. */
enum device_host_kind device_host_kind_of(device_t *dev, const void *ptr, uint64_t bytes);

/* Streams. `name` is for messages ("copy", "compute"). */
int device_stream_create(device_t *dev, const char *name, device_stream_t **out);
void device_stream_destroy(device_stream_t *s);
const char *device_stream_name(const device_stream_t *s);
device_t *device_stream_device(const device_stream_t *s);
/* cuda: the cudaStream_t, for a caller's own kernels and libraries; sim: NULL. */
void *device_stream_native(const device_stream_t *s);

/* Copies `bytes` bytes on stream s: DEVICE_H2D from host `src` to device
 * `dst`, DEVICE_D2H from device `src` to host `dst`. `batch` names the batch
 * in messages (-1: none). Asynchronous from pinned memory, synchronous from
 * pageable (see the top). 0, ERR_ARG (0 bytes, NULL), ERR_RANGE (past the end
 * of a device buffer, sim), or the detector's ERR_STATE. */
int device_copy_async(device_stream_t *s, void *dst, const void *src, uint64_t bytes, enum device_dir dir,
                      int64_t batch);

/* A synchronous copy (cudaMemcpy): returns when the bytes have arrived. */
int device_copy(device_t *dev, void *dst, const void *src, uint64_t bytes, enum device_dir dir);

/* Queues a kernel on s. 0, ERR_ARG, or the detector's ERR_STATE. */
int device_launch(device_stream_t *s, const struct device_kernel *k);

/* Events. An event marks a point in a stream: everything issued on the stream
 * before device_event_record. */
int device_event_create(device_t *dev, device_event_t **out);
void device_event_destroy(device_event_t *e);
int device_event_record(device_event_t *e, device_stream_t *s);
/* Work issued on s after this call waits until e's point is reached. */
int device_stream_wait_event(device_stream_t *s, device_event_t *e);
/* Blocks the host until e's point is reached (at once if never recorded). */
int device_event_synchronize(device_event_t *e);
/* 1 if e's point is reached (or e was never recorded), 0 if not yet, or a
 * negative error. */
int device_event_query(device_event_t *e);
/* Seconds between two reached events (device time: modelled on the sim).
 * ERR_STATE if either was never recorded or is not reached yet. */
int device_event_elapsed(device_event_t *start, device_event_t *end, double *seconds);

int device_stream_synchronize(device_stream_t *s);
int device_synchronize(device_t *dev);

void device_stats(device_t *dev, struct device_stats *out);

/* The kind's name: "pageable", "pinned", "write-combined", "registered". */
const char *device_host_kind_name(enum device_host_kind kind);

#ifdef __cplusplus
}
#endif

#endif
