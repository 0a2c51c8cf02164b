/* device_backend: what a device backend implements (sim, cuda).
 *
 * Where it sits: between lib/transfer/device.c (the front: argument checks,
 * counts, dispatch) and the backends:
 *
 *   sim/device_sim.c                 device_backend_sim   (always built)
 *   lib/transfer/cuda/device_cuda.cu device_backend_cuda  (when HAVE_CUDA; extern "C")
 *
 * lib/backend_table.c is the one file that names them. The front has
 * checked every argument a backend receives: no NULL pointer, no 0-byte copy,
 * no invalid enum, streams and events of the same device. A backend reports
 * failure like every module (negative ERR_*, err_set()) and keeps its errors
 * sticky: once broken, every call returns the first error.
 *
 * Read struct device_backend_ops first.
 */
#ifndef DDP_DEVICE_BACKEND_H
#define DDP_DEVICE_BACKEND_H

#include "transfer/device.h"
#include "transfer/device_ops.h"

#ifdef __cplusplus
extern "C" {
#endif

struct device {
    const struct device_backend_ops *ops;
    char name[64];
    char description[512]; /* device_describe(); the backend fills it in open() */
    uint64_t copies[2], bytes[2], kernels; /* updated with __atomic builtins (C and C++ both read this) */
    void *impl;
};

struct device_stream {
    device_t *dev;
    char name[48];
    void *impl;
};

struct device_event {
    device_t *dev;
    void *impl;
};

struct device_backend_ops {
    const char *name; /* "sim", "cuda" */

    /* How many devices of it this machine has (0: none, so not the auto
     * choice); NULL: one, always. */
    int (*probe)(void);

    int (*open)(device_t *d, const struct device_config *cfg); /* sets d->impl and d->description */
    void (*close)(device_t *d);                                /* after the front synchronized */
    int (*link)(const device_t *d, struct link_profile *out);

    int (*mem_alloc)(device_t *d, uint64_t bytes, const char *name, void **out);
    void (*mem_free)(device_t *d, void *ptr);
    int (*host_alloc)(device_t *d, enum device_host_kind kind, uint64_t bytes, const char *name, void **out);
    void (*host_free)(device_t *d, void *ptr);
    int (*host_register)(device_t *d, void *ptr, uint64_t bytes, const char *name);
    int (*host_unregister)(device_t *d, void *ptr);
    void (*host_rename)(device_t *d, const void *ptr, const char *name);
    enum device_host_kind (*host_kind_of)(device_t *d, const void *ptr, uint64_t bytes);

    int (*stream_create)(device_stream_t *s); /* s->dev and s->name are set; sets s->impl */
    void (*stream_destroy)(device_stream_t *s);
    void *(*stream_native)(const device_stream_t *s);

    int (*copy_async)(device_stream_t *s, void *dst, const void *src, uint64_t bytes, enum device_dir dir,
                      int64_t batch);
    int (*copy)(device_t *d, void *dst, const void *src, uint64_t bytes, enum device_dir dir);
    int (*launch)(device_stream_t *s, const struct device_kernel *k);
    /* A device operation (transfer/device_ops.h), its spans derived by the front. */
    int (*run)(device_stream_t *s, const struct device_op *op);

    int (*event_create)(device_event_t *e); /* e->dev is set; sets e->impl */
    void (*event_destroy)(device_event_t *e);
    int (*event_record)(device_event_t *e, device_stream_t *s);
    int (*stream_wait_event)(device_stream_t *s, device_event_t *e);
    int (*event_synchronize)(device_event_t *e);
    int (*event_query)(device_event_t *e);
    int (*event_elapsed)(device_event_t *start, device_event_t *end, double *seconds);
    int (*stream_synchronize)(device_stream_t *s);
    int (*synchronize)(device_t *d);

    /* Fills the backend's own fields of *out (the front filled the counts). */
    void (*stats)(device_t *d, struct device_stats *out);
};

#ifdef __cplusplus
}
#endif

#endif
