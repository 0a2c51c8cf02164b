/* test_pinned_pool: the bounded pool of pinned blocks (lib/transfer/pinned_pool.c)
 * and the loader's ring allocated from it.
 *
 * Reuse without pinning again, a block not wasted on a much smaller request,
 * cached blocks given back when a new one would pass the limit, the errors
 * (0 bytes, more than the limit, the limit held in use) with what was asked
 * and what is held, and a loader whose slots are pinned memory of the device.
 * DEVICE_TEST_BACKEND=cuda runs them on a GPU (make test-gpu).
 */
#include "check.h"
#include "loader_fixture.h"
#include "transfer/pinned_pool.h"

#include <stdlib.h>

#define KIB 1024u

/* The simulated device, or DEVICE_TEST_BACKEND's (make test-gpu sets cuda). */
static device_t *pool_device(void)
{
    struct device_config cfg;
    device_config_default(&cfg);
    const char *backend = getenv("DEVICE_TEST_BACKEND");
    cfg.backend = backend && *backend ? backend : "sim";
    device_t *dev;
    CHECK_OK(device_open(&cfg, &dev));
    return dev;
}

TEST(pool_reuses_blocks)
{
    device_t *dev = pool_device();
    pinned_pool_t *pool;
    CHECK_OK(pinned_pool_create(dev, 1024 * KIB, DEVICE_HOST_PINNED, &pool));
    void *a, *b, *c;
    CHECK_OK(pinned_pool_alloc(pool, 100 * KIB, &a));
    CHECK_EQ(device_host_kind_of(dev, a, 100 * KIB), DEVICE_HOST_PINNED);
    pinned_pool_free(pool, a);
    CHECK_OK(pinned_pool_alloc(pool, 90 * KIB, &b)); /* fits the cached block */
    CHECK(b == a);
    CHECK_OK(pinned_pool_alloc(pool, 10 * KIB, &c)); /* far smaller: a block of its own */
    CHECK(c != a);
    struct pinned_pool_stats st;
    pinned_pool_stats(pool, &st);
    CHECK_EQ_U64(st.pins, 2);
    CHECK_EQ_U64(st.reuses, 1);
    CHECK_EQ_U64(st.held_bytes, 112 * KIB); /* 100 KiB and 12 KiB: whole pages */
    CHECK_EQ_U64(st.in_use_bytes, 112 * KIB);
    CHECK_EQ(st.blocks, 2);
    CHECK(st.pin_s > 0);
    pinned_pool_free(pool, b);
    pinned_pool_free(pool, c);
    pinned_pool_destroy(pool);
    device_close(dev);
}

TEST(pool_is_bounded)
{
    device_t *dev = pool_device();
    pinned_pool_t *pool;
    CHECK_OK(pinned_pool_create(dev, 1024 * KIB, DEVICE_HOST_PINNED, &pool));
    void *a, *b;
    CHECK_OK(pinned_pool_alloc(pool, 900 * KIB, &a));
    pinned_pool_free(pool, a);
    /* a cached 900 KiB block is too big to spend on 200 KiB, and both do not fit: it goes back */
    CHECK_OK(pinned_pool_alloc(pool, 200 * KIB, &b));
    struct pinned_pool_stats st;
    pinned_pool_stats(pool, &st);
    CHECK_EQ_U64(st.unpins, 1);
    CHECK_EQ_U64(st.held_bytes, 200 * KIB);
    CHECK_ERR(pinned_pool_alloc(pool, 900 * KIB, &a), ERR_NOMEM,
              "pinned pool: 900 KiB asked, but 200 KiB of the pool's 1 MiB limit are held and in use (1 block)");
    pinned_pool_stats(pool, &st);
    CHECK_EQ_U64(st.held_bytes, 200 * KIB); /* a failure holds nothing more */
    CHECK_ERR(pinned_pool_alloc(pool, 0, &a), ERR_ARG, "pinned pool: 0 bytes asked");
    CHECK_ERR(pinned_pool_alloc(pool, 1024 * KIB + 1, &a), ERR_NOMEM,
              "1048577 bytes (1.0 MiB) asked, more than the pool's whole limit of 1 MiB");
    CHECK_ERR(pinned_pool_alloc(pool, UINT64_MAX, &a), ERR_NOMEM, "more than the pool's whole limit");
    pinned_pool_free(pool, b);
    pinned_pool_destroy(pool);
    CHECK_ERR(pinned_pool_create(dev, 0, DEVICE_HOST_PINNED, &pool), ERR_ARG, "a limit of 0 bytes");
    CHECK_ERR(pinned_pool_create(dev, 1, DEVICE_HOST_PAGEABLE, &pool), ERR_ARG, "pageable memory is not pinned");
    device_close(dev);
}

/* The loader's ring comes from the pool: every slot pinned, every batch right. */
TEST(pool_loader_ring_is_pinned)
{
    device_t *dev = pool_device();
    pinned_pool_t *pool;
    CHECK_OK(pinned_pool_create(dev, 4u << 20, DEVICE_HOST_PINNED, &pool));
    const uint64_t n = 200, bs = 16;
    dataset_t *ds = fixture_dataset(n, 40, 40);
    struct loader_options opt = fixture_options(2, bs, NULL);
    opt.allocator = pinned_pool_loader_allocator(pool);
    loader_t *L;
    CHECK_OK(loader_open(ds, &opt, &L));
    uint64_t *idx = fixture_shuffled(n, 1);
    struct loader_epoch e = {.epoch = 0, .indices = index_stream_of_array(&(struct index_array){idx, n}), .batch_size = bs};
    CHECK_OK(loader_start_epoch(L, &e));
    struct loader_batch *b;
    uint64_t got = 0;
    int rc;
    while ((rc = loader_next(L, &b)) == 1) {
        CHECK_EQ(device_host_kind_of(dev, b->data, b->bytes), DEVICE_HOST_PINNED);
        fixture_check_batch(ds, b, idx, got * bs);
        got++;
        loader_release(L, b);
    }
    CHECK_OK(rc);
    CHECK_EQ_U64(got, (n + bs - 1) / bs);
    struct pinned_pool_stats st;
    struct loader_stats ls;
    pinned_pool_stats(pool, &st);
    loader_stats(L, &ls);
    CHECK_EQ_U64(st.pins, ls.slots); /* one pinning per slot, once */
    loader_close(L);
    pinned_pool_stats(pool, &st);
    CHECK_EQ_U64(st.in_use_bytes, 0);
    /* A pool too small for the ring: loader_open says so, with the pool's reason. */
    pinned_pool_t *small;
    CHECK_OK(pinned_pool_create(dev, 4096, DEVICE_HOST_PINNED, &small));
    opt.allocator = pinned_pool_loader_allocator(small);
    opt.slot_bytes = 8192;
    CHECK_ERR(loader_open(ds, &opt, &L), ERR_NOMEM, "loader: cannot allocate slot 0 of 4");
    CHECK_CONTAINS(err_msg(), "more than the pool's whole limit of 4 KiB"); /* not "0.00 MiB" */
    pinned_pool_destroy(small);
    free(idx);
    dataset_close(ds);
    pinned_pool_destroy(pool);
    device_close(dev);
}
