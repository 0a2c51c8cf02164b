/* race: --demo=race, the loader slot handed back too early (chapter 4).
 *
 * A hand-written double-buffering loop, the way one is first written:
 *
 *     loader_next(L, &hb);
 *     device_copy_async(copy, buf[k % 2], hb->data, ...);   asynchronous: returns at once
 *     device_event_record(ready[k % 2], copy);
 *     loader_release(L, hb);                                 BUG: the copy is still reading the slot
 *
 * The loader's worker collates the next batch into the slot it got back while
 * the DMA engine is still reading it: the batch that reaches the device is
 * part one batch, part the next, and nothing fails. On a GPU no tool sees
 * it (the DMA engine reads physical pages; the CPU's page tables know nothing
 * of it). The simulated device write-protects a pinned buffer while a copy
 * reads it, so the worker's first write is caught and named. The fix: hand
 * the slot back only once the copy's event has completed, which is what
 * lib/transfer/prefetch.c does. The copies run on a slow link here (0.004
 * GB/s) so each one is in flight for tens of milliseconds: the worker writes
 * long before the copy ends.
 */
#include "chapter4.h"

#include "base/error.h"
#include "dataset/dataset.h"
#include "loader/loader.h"
#include "transfer/pinned_pool.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CH4_RACE_BATCHES 6
#define CH4_RACE_BATCH 256

/* The loop above, with the slot going back `fixed` ? after its copy : at once.
 * 0 when every batch went through; the device's error otherwise. */
static int ch4_race_loop(const struct ch4_opts *o, int fixed)
{
    struct ch4_opts slow = *o;
    link_profile_set(&slow.link, 0.004, -1);
    slow.backend = "sim"; /* the detector is the simulator's */
    device_t *dev;
    int rc = ch4_device_open(&slow, &slow.link, &dev);
    if (rc)
        return rc;
    pinned_pool_t *pool = NULL;
    dataset_t *ds = NULL;
    loader_t *L = NULL;
    device_stream_t *copy = NULL, *compute = NULL;
    device_event_t *ready[2] = {0}, *free_ev[2] = {0};
    void *buf[2] = {0};
    rc = pinned_pool_create(dev, o->pool_bytes, DEVICE_HOST_PINNED, &pool);
    if (rc == 0)
        rc = dataset_open("synthetic", NULL, &ds);
    struct loader_options lo;
    loader_options_default(&lo);
    lo.workers = 1; /* a worker, eager to refill every slot it gets back */
    lo.max_batch = CH4_RACE_BATCH;
    lo.allocator = pinned_pool_loader_allocator(pool);
    if (rc == 0)
        rc = loader_open(ds, &lo, &L);
    uint64_t bytes = rc == 0 ? CH4_RACE_BATCH * dataset_info(ds)->record_bytes : 0;
    if (rc == 0)
        rc = device_stream_create(dev, "copy", &copy);
    if (rc == 0)
        rc = device_stream_create(dev, "compute", &compute);
    for (int i = 0; rc == 0 && i < 2; i++) {
        char name[32];
        snprintf(name, sizeof name, "batch buffer %d", i);
        rc = device_malloc(dev, bytes, name, &buf[i]);
        if (rc == 0)
            rc = device_event_create(dev, &ready[i]);
        if (rc == 0)
            rc = device_event_create(dev, &free_ev[i]);
    }
    uint64_t idx[CH4_RACE_BATCHES * CH4_RACE_BATCH];
    for (uint64_t i = 0; i < CH4_RACE_BATCHES * CH4_RACE_BATCH; i++)
        idx[i] = i;
    struct index_array all = {idx, CH4_RACE_BATCHES * CH4_RACE_BATCH};
    struct loader_epoch ep = {.epoch = 0, .indices = index_stream_of_array(&all), .batch_size = CH4_RACE_BATCH};
    if (rc == 0)
        rc = loader_start_epoch(L, &ep);
    struct loader_batch *held = NULL; /* the fixed loop's: the slot whose copy is in flight */
    struct loader_batch *hb;
    for (int k = 0; rc == 0; k++) {
        if (held) { /* the fix: the previous slot goes back once its copy is done */
            rc = device_event_synchronize(ready[(k - 1) % 2]);
            if (rc)
                break;
            loader_release(L, held);
            held = NULL;
        }
        if ((rc = loader_next(L, &hb)) != 1)
            break;
        char name[32];
        snprintf(name, sizeof name, "loader slot %u", hb->slot);
        device_host_rename(dev, hb->data, name);
        int i = k % 2;
        rc = k >= 2 ? device_stream_wait_event(copy, free_ev[i]) : 0;
        if (rc == 0)
            rc = device_copy_async(copy, buf[i], hb->data, hb->bytes, DEVICE_H2D, (int64_t)hb->number);
        if (rc == 0)
            rc = device_event_record(ready[i], copy);
        if (fixed)
            held = hb;
        else
            loader_release(L, hb); /* the bug: the copy is still reading this slot */
        if (rc == 0)
            rc = device_stream_wait_event(compute, ready[i]);
        struct device_span in = {buf[i], bytes};
        struct device_kernel kern = {.name = "train step", .batch = k, .seconds = 1e-3, .reads = &in, .nreads = 1};
        if (rc == 0)
            rc = device_launch(compute, &kern);
        if (rc == 0)
            rc = device_event_record(free_ev[i], compute);
    }
    if (rc == 0)
        rc = device_synchronize(dev);
    char msg[1536];
    snprintf(msg, sizeof msg, "%s", err_msg());
    if (held) {
        device_synchronize(dev);
        loader_release(L, held);
    }
    loader_close(L); /* before the device: the slots are the pool's */
    for (int i = 0; i < 2; i++) {
        device_event_destroy(ready[i]);
        device_event_destroy(free_ev[i]);
        device_free(dev, buf[i]);
    }
    device_stream_destroy(copy);
    device_stream_destroy(compute);
    pinned_pool_destroy(pool);
    dataset_close(ds);
    device_close(dev);
    return rc ? err_set(rc, "%s", msg) : 0;
}

int ch4_demo_race(const struct ch4_opts *o)
{
    printf("== --demo=race: a loader slot handed back while its copy is still reading it\n\n"
           "    device_copy_async(copy, buf[k %% 2], slot->data, ...);   returns at once\n"
           "    device_event_record(ready[k %% 2], copy);\n"
           "    loader_release(L, slot);        <- the bug: the worker refills the slot mid-copy\n\n");
    int rc = ch4_race_loop(o, 0);
    if (rc == 0)
        return err_set(ERR_STATE, "the early release went unnoticed: the detector should have caught the "
                       "worker's write");
    printf("caught by the simulator's detector:\n  %s\n\n", err_msg());
    printf("the fix: keep the slot until the copy's event completed, then release it\n\n"
           "    device_event_synchronize(ready[k %% 2]);   (next step, before loader_next)\n"
           "    loader_release(L, slot);\n\n");
    rc = ch4_race_loop(o, 1);
    if (rc)
        return err_wrap(rc, "the fixed loop failed");
    printf("fixed: %d batches, no hazard. lib/transfer/prefetch.c does this for every slot (prefetch_give_back).\n",
           CH4_RACE_BATCHES);
    return 0;
}
