/* device: the device's front (see device.h): the backend from lib/backend_table.h,
 * argument checks, copy counts, dispatch to the backend's vtable
 * (device_backend.h). Nothing here knows how bytes move. */
#include "transfer/device.h"

#include "backend_table.h"
#include "base/error.h"
#include "base/vclock.h"
#include "transfer/device_backend.h"
#include "transfer/hw.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The most a kernel may claim to take, and the most spans it may declare:
 * beyond that a value is a mistake, not a workload. */
#define DEVICE_MAX_KERNEL_S 1e6
#define DEVICE_MAX_SPANS 4096

void device_config_default(struct device_config *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->backend = NULL;
    cfg->ordinal = -1;
    link_profile_find(LINK_DEFAULT, &cfg->link);
    const struct hw_profile *hw = NULL;
    if (hw_profile_find(DEVICE_GPU_DEFAULT, &hw) == 0) {
        cfg->gemm_flops = hw_gemm_flops(hw);
        cfg->gpu_memory_bps = hw->memory_bps;
    }
    cfg->name = "device";
    cfg->write_check = DEVICE_WRITE_CHECK_TRAP;
}

void device_config_hw(struct device_config *cfg, const struct hw_profile *hw)
{
    hw_host_link(hw, &cfg->link);
    cfg->gemm_flops = hw_gemm_flops(hw);
    cfg->gpu_memory_bps = hw->memory_bps;
}

int device_open(const struct device_config *cfg, device_t **out)
{
    *out = NULL;
    const struct device_backend_ops *ops;
    int rc = backend_table_device(cfg->backend, &ops);
    if (rc)
        return rc;
    device_t *d = calloc(1, sizeof *d);
    if (!d)
        return err_set(ERR_NOMEM, "device: out of memory");
    d->ops = ops;
    snprintf(d->name, sizeof d->name, "%s", cfg->name ? cfg->name : "device");
    rc = ops->open(d, cfg);
    if (rc) {
        free(d);
        return rc;
    }
    if (strcmp(ops->name, "sim") != 0)
        vclock_use_wall(1); /* a real GPU: there is no model to follow, the host's times are the wall clock's */
    *out = d;
    return 0;
}

void device_close(device_t *dev)
{
    if (!dev)
        return;
    dev->ops->synchronize(dev); /* a sticky error is already reported; close anyway */
    dev->ops->close(dev);
    free(dev);
}

const char *device_backend_name(const device_t *dev) { return dev->ops->name; }
const char *device_describe(const device_t *dev) { return dev->description; }
int device_link(const device_t *dev, struct link_profile *out) { return dev->ops->link(dev, out); }

const char *device_host_kind_name(enum device_host_kind kind)
{
    static const char *names[] = {"pageable", "pinned", "write-combined", "registered"};
    return (unsigned)kind < DEVICE_HOST_KINDS ? names[kind] : "?";
}

/* ---- memory ---------------------------------------------------------------------- */

int device_malloc(device_t *dev, uint64_t bytes, const char *name, void **out)
{
    *out = NULL;
    if (bytes == 0)
        return err_set(ERR_ARG, "%s: device_malloc of 0 bytes ('%s')", dev->name, name ? name : "");
    return dev->ops->mem_alloc(dev, bytes, name ? name : "device buffer", out);
}

void device_free(device_t *dev, void *ptr)
{
    if (ptr)
        dev->ops->mem_free(dev, ptr);
}

int device_host_alloc(device_t *dev, enum device_host_kind kind, uint64_t bytes, const char *name, void **out)
{
    *out = NULL;
    if ((unsigned)kind >= DEVICE_HOST_KINDS || kind == DEVICE_HOST_REGISTERED)
        return err_set(ERR_ARG, "%s: device_host_alloc: kind %d is not pageable, pinned or write-combined "
                       "(registered memory comes from device_host_register)", dev->name, (int)kind);
    if (bytes == 0)
        return err_set(ERR_ARG, "%s: device_host_alloc of 0 bytes of %s memory ('%s')", dev->name,
                       device_host_kind_name(kind), name ? name : "");
    return dev->ops->host_alloc(dev, kind, bytes, name ? name : "host buffer", out);
}

void device_host_free(device_t *dev, void *ptr)
{
    if (ptr)
        dev->ops->host_free(dev, ptr);
}

int device_host_register(device_t *dev, void *ptr, uint64_t bytes, const char *name)
{
    if (!ptr || bytes == 0)
        return err_set(ERR_ARG, "%s: device_host_register needs a buffer and a size, got %p and %llu", dev->name,
                       ptr, (unsigned long long)bytes);
    return dev->ops->host_register(dev, ptr, bytes, name ? name : "registered buffer");
}

int device_host_unregister(device_t *dev, void *ptr)
{
    if (!ptr)
        return err_set(ERR_ARG, "%s: device_host_unregister(NULL)", dev->name);
    return dev->ops->host_unregister(dev, ptr);
}

void device_host_rename(device_t *dev, const void *ptr, const char *name)
{
    if (ptr && name && dev->ops->host_rename)
        dev->ops->host_rename(dev, ptr, name);
}

enum device_host_kind device_host_kind_of(device_t *dev, const void *ptr, uint64_t bytes)
{
    return dev->ops->host_kind_of(dev, ptr, bytes);
}

/* ---- streams --------------------------------------------------------------------- */

int device_stream_create(device_t *dev, const char *name, device_stream_t **out)
{
    *out = NULL;
    device_stream_t *s = calloc(1, sizeof *s);
    if (!s)
        return err_set(ERR_NOMEM, "%s: out of memory for a stream", dev->name);
    s->dev = dev;
    snprintf(s->name, sizeof s->name, "%s", name ? name : "stream");
    int rc = dev->ops->stream_create(s);
    if (rc) {
        free(s);
        return rc;
    }
    *out = s;
    return 0;
}

void device_stream_destroy(device_stream_t *s)
{
    if (!s)
        return;
    s->dev->ops->stream_destroy(s);
    free(s);
}

const char *device_stream_name(const device_stream_t *s) { return s->name; }
device_t *device_stream_device(const device_stream_t *s) { return s->dev; }

void *device_stream_native(const device_stream_t *s)
{
    return s->dev->ops->stream_native ? s->dev->ops->stream_native(s) : NULL;
}

/* ---- copies and kernels -------------------------------------------------------------- */

static int device_check_copy(device_t *dev, const void *dst, const void *src, uint64_t bytes, enum device_dir dir)
{
    if (dir != DEVICE_H2D && dir != DEVICE_D2H)
        return err_set(ERR_ARG, "%s: copy direction %d is neither H2D nor D2H", dev->name, (int)dir);
    if (!dst || !src)
        return err_set(ERR_ARG, "%s: %s copy with a NULL %s", dev->name, dir == DEVICE_H2D ? "H2D" : "D2H",
                       dst ? "source" : "destination");
    if (bytes == 0)
        return err_set(ERR_ARG, "%s: %s copy of 0 bytes", dev->name, dir == DEVICE_H2D ? "H2D" : "D2H");
    return 0;
}

static void device_count_copy(device_t *dev, uint64_t bytes, enum device_dir dir)
{
    __atomic_fetch_add(&dev->copies[dir], 1, __ATOMIC_RELAXED);
    __atomic_fetch_add(&dev->bytes[dir], bytes, __ATOMIC_RELAXED);
}

int device_copy_async(device_stream_t *s, void *dst, const void *src, uint64_t bytes, enum device_dir dir,
                      int64_t batch)
{
    int rc = device_check_copy(s->dev, dst, src, bytes, dir);
    if (rc == 0)
        rc = s->dev->ops->copy_async(s, dst, src, bytes, dir, batch);
    if (rc == 0)
        device_count_copy(s->dev, bytes, dir);
    return rc;
}

int device_copy(device_t *dev, void *dst, const void *src, uint64_t bytes, enum device_dir dir)
{
    int rc = device_check_copy(dev, dst, src, bytes, dir);
    if (rc == 0)
        rc = dev->ops->copy(dev, dst, src, bytes, dir);
    if (rc == 0)
        device_count_copy(dev, bytes, dir);
    return rc;
}

static int device_check_spans(const device_t *dev, const char *kname, const char *what,
                              const struct device_span *spans, uint32_t n)
{
    if (n > DEVICE_MAX_SPANS)
        return err_set(ERR_ARG, "%s: kernel '%s' declares %u %s spans, more than %d", dev->name, kname, n, what,
                       DEVICE_MAX_SPANS);
    if (n && !spans)
        return err_set(ERR_ARG, "%s: kernel '%s' declares %u %s spans but gives none", dev->name, kname, n, what);
    for (uint32_t i = 0; i < n; i++)
        if (!spans[i].ptr || spans[i].bytes == 0)
            return err_set(ERR_ARG, "%s: kernel '%s': %s span %u is empty (NULL or 0 bytes)", dev->name, kname,
                           what, i);
    return 0;
}

int device_launch(device_stream_t *s, const struct device_kernel *k)
{
    device_t *dev = s->dev;
    if (!k)
        return err_set(ERR_ARG, "%s: device_launch without a kernel", dev->name);
    const char *name = k->name ? k->name : "kernel";
    if (!(k->seconds >= 0 && k->seconds <= DEVICE_MAX_KERNEL_S))
        return err_set(ERR_ARG, "%s: kernel '%s' takes %g s: expected 0 to %g", dev->name, name, k->seconds,
                       DEVICE_MAX_KERNEL_S);
    int rc = device_check_spans(dev, name, "read", k->reads, k->nreads);
    if (rc == 0)
        rc = device_check_spans(dev, name, "write", k->writes, k->nwrites);
    if (rc == 0)
        rc = dev->ops->launch(s, k);
    if (rc == 0)
        __atomic_fetch_add(&dev->kernels, 1, __ATOMIC_RELAXED);
    return rc;
}

/* ---- events -------------------------------------------------------------------------- */

int device_event_create(device_t *dev, device_event_t **out)
{
    *out = NULL;
    device_event_t *e = calloc(1, sizeof *e);
    if (!e)
        return err_set(ERR_NOMEM, "%s: out of memory for an event", dev->name);
    e->dev = dev;
    int rc = dev->ops->event_create(e);
    if (rc) {
        free(e);
        return rc;
    }
    *out = e;
    return 0;
}

void device_event_destroy(device_event_t *e)
{
    if (!e)
        return;
    e->dev->ops->event_destroy(e);
    free(e);
}

static int device_same(const device_stream_t *s, const device_event_t *e, const char *call)
{
    if (s->dev != e->dev)
        return err_set(ERR_ARG, "%s: the stream '%s' belongs to %s, the event to %s", call, s->name, s->dev->name,
                       e->dev->name);
    return 0;
}

int device_event_record(device_event_t *e, device_stream_t *s)
{
    int rc = device_same(s, e, "device_event_record");
    return rc ? rc : s->dev->ops->event_record(e, s);
}

int device_stream_wait_event(device_stream_t *s, device_event_t *e)
{
    int rc = device_same(s, e, "device_stream_wait_event");
    return rc ? rc : s->dev->ops->stream_wait_event(s, e);
}

int device_event_synchronize(device_event_t *e) { return e->dev->ops->event_synchronize(e); }
int device_event_query(device_event_t *e) { return e->dev->ops->event_query(e); }

int device_event_elapsed(device_event_t *start, device_event_t *end, double *seconds)
{
    *seconds = 0;
    if (start->dev != end->dev)
        return err_set(ERR_ARG, "device_event_elapsed: the events belong to %s and %s", start->dev->name,
                       end->dev->name);
    return start->dev->ops->event_elapsed(start, end, seconds);
}

int device_stream_synchronize(device_stream_t *s) { return s->dev->ops->stream_synchronize(s); }
int device_synchronize(device_t *dev) { return dev->ops->synchronize(dev); }

void device_stats(device_t *dev, struct device_stats *out)
{
    memset(out, 0, sizeof *out);
    for (int d = 0; d < 2; d++) {
        out->copies[d] = __atomic_load_n(&dev->copies[d], __ATOMIC_RELAXED);
        out->bytes[d] = __atomic_load_n(&dev->bytes[d], __ATOMIC_RELAXED);
    }
    out->kernels = __atomic_load_n(&dev->kernels, __ATOMIC_RELAXED);
    if (dev->ops->stats)
        dev->ops->stats(dev, out);
}
