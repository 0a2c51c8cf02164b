/* pinned_pool: page-locked host memory, pinned once and reused, up to a limit.
 *
 * Where it sits: between the loader (chapter 3) and the device. Page-locking
 * is slow (the OS faults in and locks every page; on a GPU the driver also
 * maps them for the DMA engine): pinning a batch's buffer anew for every batch
 * can cost more than the copy it enables. So the pool pins a block once and
 * hands it out again when it is freed. The loader's ring comes from here
 * (pinned_pool_loader_allocator), so collate writes straight into memory the
 * copy engine reads.
 *
 * Unlike PyTorch's caching host allocator, which keeps every block it ever
 * pinned (hosts fill up with locked memory nobody uses), the pool is bounded:
 * it never holds more than its limit, gives cached blocks back to the OS when
 * a new one would not fit, and otherwise fails, saying how much was asked,
 * how much is held and why.
 *
 *     pinned_pool_create(dev, 256 << 20, DEVICE_HOST_PINNED, &pool);
 *     opt.allocator = pinned_pool_loader_allocator(pool);   the loader's ring
 *     pinned_pool_stats(pool, &st);                          what it holds and what pinning cost
 *
 * Thread-safe. Read pinned_pool_alloc() first.
 */
#ifndef DDP_PINNED_POOL_H
#define DDP_PINNED_POOL_H

#include "loader/loader.h"
#include "transfer/device.h"

#include <stdint.h>

typedef struct pinned_pool pinned_pool_t;

struct pinned_pool_stats {
    uint64_t limit_bytes;   /* the most it may hold */
    uint64_t held_bytes;    /* pinned now: in use + cached */
    uint64_t in_use_bytes;  /* handed out and not freed */
    uint32_t blocks, blocks_in_use;
    uint64_t pins;          /* blocks pinned (a device_host_alloc each) */
    uint64_t reuses;        /* allocations served from a cached block: no pinning at all */
    uint64_t unpins;        /* cached blocks given back to make room */
    uint64_t pinned_bytes;  /* bytes ever pinned */
    double pin_s, unpin_s;  /* wall time spent pinning and giving back */
};

/* A pool of at most `limit_bytes` of `kind` memory (DEVICE_HOST_PINNED or
 * DEVICE_HOST_WRITE_COMBINED) on `dev`, which must outlive it. 0, or ERR_ARG
 * (a limit of 0, another kind). */
int pinned_pool_create(device_t *dev, uint64_t limit_bytes, enum device_host_kind kind, pinned_pool_t **out);

/* Frees every block, the ones still handed out included. NULL is allowed. */
void pinned_pool_destroy(pinned_pool_t *pool);

/* `bytes` bytes of pinned memory, page-aligned: a cached block of at least
 * that size (and at most twice it) when there is one, else a new block, after
 * giving cached blocks back if they stand in the way of the limit. 0, or:
 *   ERR_ARG    0 bytes;
 *   ERR_NOMEM  the request is larger than the whole limit, or the blocks in
 *              use leave too little room, or the device could not pin it;
 *              err_msg() says how much was asked, how much is held and in use,
 *              the limit, and why. */
int pinned_pool_alloc(pinned_pool_t *pool, uint64_t bytes, void **out);

/* Returns a block to the cache (it stays pinned). NULL is allowed; a pointer
 * the pool did not hand out is a programmer error (assert). */
void pinned_pool_free(pinned_pool_t *pool, void *ptr);

void pinned_pool_stats(pinned_pool_t *pool, struct pinned_pool_stats *out);

/* The loader's allocator hook over this pool: its ring slots are pinned. */
struct loader_allocator pinned_pool_loader_allocator(pinned_pool_t *pool);

#endif
