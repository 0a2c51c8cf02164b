/* pinning: what page-locking costs, per batch and with a pool (chapter 4).
 *
 * Three ways to get a batch's bytes into pinned memory, each measured on this
 * machine and this device: allocate a pinned buffer for every batch and free
 * it after (cudaHostAlloc / cudaFreeHost; on the simulator mmap + mlock +
 * munmap, really page-locking); lock an existing buffer in place and unlock
 * it (cudaHostRegister); or take a block from the pool, which pins it once
 * and hands it out again. Next to them, the time the copy they enable takes
 * (the model's on the simulator): pinning per batch can cost more than the
 * copy itself.
 */
#include "chapter4.h"

#include "base/clock.h"
#include "base/error.h"
#include "base/units.h"
#include "transfer/pinned_pool.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CH4_PIN_ROUNDS 5

/* Seconds per round of alloc + touch + free of pinned memory. */
static int ch4_pin_per_batch(device_t *dev, uint64_t bytes, double *s)
{
    uint64_t t0 = clock_now_ns();
    for (int r = 0; r < CH4_PIN_ROUNDS; r++) {
        void *p;
        int rc = device_host_alloc(dev, DEVICE_HOST_PINNED, bytes, "pinned per batch", &p);
        if (rc)
            return rc;
        device_host_free(dev, p);
    }
    *s = (double)(clock_now_ns() - t0) * 1e-9 / CH4_PIN_ROUNDS;
    return 0;
}

/* Seconds per round of register + unregister of a buffer already in memory. */
static int ch4_register_per_batch(device_t *dev, uint64_t bytes, double *s)
{
    void *p;
    if (posix_memalign(&p, 4096, bytes))
        return err_set(ERR_NOMEM, "cannot allocate %llu bytes to register", (unsigned long long)bytes);
    memset(p, 1, bytes);
    int rc = 0;
    uint64_t t0 = clock_now_ns();
    for (int r = 0; rc == 0 && r < CH4_PIN_ROUNDS; r++) {
        rc = device_host_register(dev, p, bytes, "registered per batch");
        if (rc == 0)
            rc = device_host_unregister(dev, p);
    }
    *s = (double)(clock_now_ns() - t0) * 1e-9 / CH4_PIN_ROUNDS;
    free(p);
    return rc;
}

/* The pool: the first allocation pins, the others reuse. Seconds of the
 * first, and per round of the rest. */
static int ch4_pool_per_batch(device_t *dev, uint64_t limit, uint64_t bytes, double *first, double *rest,
                              struct pinned_pool_stats *st)
{
    pinned_pool_t *pool;
    int rc = pinned_pool_create(dev, limit, DEVICE_HOST_PINNED, &pool);
    if (rc)
        return rc;
    uint64_t t0 = clock_now_ns(), t1 = t0;
    for (int r = 0; rc == 0 && r <= CH4_PIN_ROUNDS; r++) {
        void *p;
        rc = pinned_pool_alloc(pool, bytes, &p);
        if (rc == 0)
            pinned_pool_free(pool, p);
        if (r == 0)
            t1 = clock_now_ns();
    }
    *first = (double)(t1 - t0) * 1e-9;
    *rest = (double)(clock_now_ns() - t1) * 1e-9 / CH4_PIN_ROUNDS;
    pinned_pool_stats(pool, st);
    pinned_pool_destroy(pool);
    return rc;
}

int ch4_pinning(const struct ch4_opts *o)
{
    device_t *dev;
    int rc = ch4_device_open(o, &o->link, &dev);
    if (rc)
        return rc;
    struct link_profile link;
    int have_link = device_link(dev, &link) == 0;
    int sim = strcmp(device_backend_name(dev), "sim") == 0;
    printf("== the cost of pinning: a batch's pinned buffer, %s\n", device_describe(dev));
    printf("\n%10s %20s %20s %22s %16s %12s\n", "batch", "pin+free per batch", "register per batch",
           "pool: first, then", sim ? "its copy (model)" : "its copy", "pin / copy");
    const uint64_t sizes[] = {1u << 20, 16u << 20, 64u << 20};
    struct device_stats st0;
    device_stats(dev, &st0);
    size_t i;
    for (i = 0; rc == 0 && i < sizeof sizes / sizeof sizes[0]; i++) {
        uint64_t bytes = sizes[i];
        if (bytes > o->pool_bytes)
            break;
        double pin = 0, reg = 0, first = 0, rest = 0, copy = 0;
        struct pinned_pool_stats ps;
        rc = ch4_pin_per_batch(dev, bytes, &pin);
        if (rc == 0)
            rc = ch4_register_per_batch(dev, bytes, &reg);
        if (rc == 0)
            rc = ch4_pool_per_batch(dev, o->pool_bytes, bytes, &first, &rest, &ps);
        if (rc)
            break;
        if (have_link)
            copy = sim ? link_copy_seconds(&link, bytes) : (double)bytes / (0.85 * link.limit_bps);
        char sz[32];
        printf("%10s %9.2f ms %5.2f GB/s %9.2f ms %5.2f GB/s %8.2f ms, %6.1f us %13.3f ms %11.1fx\n",
               units_format_bytes(bytes, sz, sizeof sz), pin * 1e3, (double)bytes / pin / 1e9, reg * 1e3,
               (double)bytes / reg / 1e9, first * 1e3, rest * 1e6, copy * 1e3, copy > 0 ? pin / copy : 0);
        if (ps.pins != 1 || ps.reuses != CH4_PIN_ROUNDS)
            printf("   (the pool pinned %llu times and reused %llu: expected 1 and %d)\n",
                   (unsigned long long)ps.pins, (unsigned long long)ps.reuses, CH4_PIN_ROUNDS);
    }
    struct device_stats st1;
    device_stats(dev, &st1);
    if (rc == 0 && i < sizeof sizes / sizeof sizes[0]) {
        char sz[32], pool[32];
        printf("(batches of %s and more do not fit the pinned pool of %s (--pool): not measured)\n",
               units_format_bytes(sizes[i], sz, sizeof sz), units_format_bytes(o->pool_bytes, pool, sizeof pool));
    }
    if (rc == 0) {
        printf("(measured on this machine: pinning allocates, faults in and locks every page%s;\n"
               " the pool pays that once, then hands the block out again in microseconds.%s)\n",
               sim ? " (mmap, mlock, munmap)" : " (cudaHostAlloc, cudaFreeHost)",
               sim ? " The copy is the link's\n model" : " The copy assumes 85% of the link's limit");
        if (st1.pin_refused > st0.pin_refused)
            printf("note: the OS refused to lock %llu buffers (RLIMIT_MEMLOCK, ulimit -l): the figures above are the\n"
                   "      allocation and page faults only; locking would cost more. Run as root or raise the limit.\n",
                   (unsigned long long)(st1.pin_refused - st0.pin_refused));
    }
    device_close(dev);
    printf("\n");
    return rc;
}
