/* prefetch: double buffering between the loader's ring and the device.
 *
 * Where it sits: between the loader (chapter 3) and the model (chapter 6).
 * While the trainer computes on batch k, batch k+1 is already being copied
 * to the device on the prefetcher's own stream. It is the C counterpart of
 * apex's data_prefetcher (a side stream, wait_stream, record_stream) and of
 * FFCV's pinned slots with one event each. Three rules make it correct, and
 * the simulator's detector (sim/device_sim.h) catches each one broken:
 *
 *   1. an event is recorded after each batch's copies, and the compute
 *      stream waits for it before the trainer's kernels read the batch;
 *   2. a device buffer is copied into again only after the compute that read
 *      it is done (an event recorded on the compute stream at release);
 *   3. a loader slot goes back to the loader only after the copy out of it
 *      has completed: the loader's next collate would overwrite it.
 *
 * The trainer's loop, chapter 6's contract:
 *
 *     prefetch_open(dev, loader, &opt, &pf);       opt.compute: the trainer's stream
 *     loader_start_epoch(loader, &epoch);
 *     while ((rc = prefetch_next(pf, &b)) == 1) {  b->data, b->labels: device memory
 *         device_launch(compute, &(struct device_kernel){.reads = {b->data ...}, ...});
 *         prefetch_release(pf, b);                 after the kernels are queued, not finished
 *     }                                            rc == 0: the epoch is over
 *     prefetch_close(pf);
 *
 * On the simulated device, b->data is host memory a CPU kernel (device_kernel
 * .fn) can read; on a GPU it is a device pointer for the caller's kernels on
 * device_stream_native(compute). The loader's ring should be pinned
 * (pinned_pool_loader_allocator): from a pageable ring the copies still work
 * but are synchronous, and overlap nothing. With pin_pool set the prefetcher
 * does what PyTorch's pin_memory=True does instead: it copies each batch into
 * a pinned staging buffer first, a third copy of every byte.
 *
 * Read prefetch_next() and its three helpers in prefetch.c.
 */
#ifndef DDP_PREFETCH_H
#define DDP_PREFETCH_H

#include "loader/loader.h"
#include "transfer/device.h"
#include "transfer/pinned_pool.h"

#include <stdint.h>

typedef struct prefetch prefetch_t;

struct prefetch_options {
    uint32_t depth;           /* device buffers: 2 double-buffers (the default, 0), 1 copies then computes */
    uint64_t max_bytes;       /* data bytes of the largest batch (the loader's slot_bytes); required */
    uint32_t max_batch;       /* samples in the largest batch (the loader's max_batch); required */
    device_stream_t *compute; /* the trainer's stream; required */
    pinned_pool_t *pin_pool;  /* non-NULL: stage every batch through pinned memory from this pool (PyTorch's way) */
    int unordered;            /* a fault, to watch the simulated device's detector catch it: batches are handed
                               * over without the compute stream waiting for their copies */
};

/* One batch on the device, valid until prefetch_release(). */
struct prefetch_batch {
    uint64_t number, epoch;   /* as the loader numbered it */
    uint32_t count;           /* samples */
    uint64_t bytes, stride;   /* data bytes, and bytes from one sample's row to the next */
    void *data;               /* device memory: the batch's data */
    int64_t *labels;          /* device memory: count labels */
    device_event_t *ready;    /* recorded after its copies; the compute stream already waits for it */
    double wait_s;            /* how long its loader_next() waited (the data-wait) */
    uint32_t buffer;          /* which device buffer holds it: 0 .. depth-1 */
};

struct prefetch_stats {
    uint64_t batches, bytes;    /* handed out */
    uint64_t h2d_copies;        /* device copies issued (data and labels of each batch) */
    uint64_t pin_copies;        /* host copies into pinned staging (pin_pool only) ... */
    uint64_t pin_bytes;         /* ... and their bytes */
    double pin_s;               /* ... and the time they took (the host's clock: modelled on the simulator) */
    double data_wait_s;         /* time spent in loader_next() (modelled with the loader's `modelled`) */
    double slot_wait_s;         /* time spent waiting for a copy before its loader slot could go back (the
                                 * host's clock: modelled on the simulator) */
    uint32_t depth;
};

/* Allocates depth device buffers and a copy stream on dev. The loader and
 * the compute stream must outlive the prefetcher. 0, ERR_ARG (a missing
 * option, depth over 16), or the device's error. */
int prefetch_open(device_t *dev, loader_t *loader, const struct prefetch_options *opt, prefetch_t **out);

/* Hands out the next batch, in order: 1 and *out set; 0 when the loader's
 * epoch is over (every copy done, every loader slot back; call again after
 * loader_start_epoch for the next one); or a negative error, which ends the
 * epoch the same way: the loader's (a failing sample, a timeout: it comes
 * after the batches before it, as the loader delivers it), the device's (a
 * use-before-ready hazard), ERR_RANGE (a batch larger than max_bytes or
 * max_batch), ERR_STATE (the previous batch was not released). */
int prefetch_next(prefetch_t *p, struct prefetch_batch **out);

/* The trainer has queued all its work on b (on the compute stream): its
 * device buffer may be refilled once that work is done. 0 or an error. */
int prefetch_release(prefetch_t *p, struct prefetch_batch *b);

/* Waits for the copies in flight, gives every loader slot back, frees the
 * device buffers. NULL is allowed. */
void prefetch_close(prefetch_t *p);

void prefetch_stats(const prefetch_t *p, struct prefetch_stats *out);

#endif
