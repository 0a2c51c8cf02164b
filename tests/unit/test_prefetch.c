/* test_prefetch: double buffering between the loader's ring and the device
 * (lib/transfer/prefetch.c) on the simulated device.
 *
 * Every batch reaches the device intact and in order, whatever the depth,
 * the worker count, the ring (pinned, pageable, or staged through pinned
 * memory as PyTorch does) and over several epochs; the detector finds no
 * hazard in any of it (it would fail the epoch); with two buffers the copy of
 * batch k+1 completes while the compute on batch k is held, and with one it
 * cannot; loader slots are all back at the end of an epoch; the copies are
 * counted: two passes over each byte with a pinned ring, three staged.
 */
#include "prefetch_fixture.h"

static const struct pf_config pf_base = {.gbps = 20, .latency_us = 5, .workers = 2, .prefetch = 2, .depth = 2,
                                         .batch = 16, .records = 300, .record_bytes = 200};

TEST(prefetch_every_batch_intact_in_order)
{
    for (uint32_t depth = 1; depth <= 3; depth++) {
        for (uint32_t workers = 0; workers <= 2; workers += 2) {
            struct pf_config c = pf_base;
            c.depth = depth;
            c.workers = workers;
            struct pf_rig r;
            pf_open(&r, &c);
            for (uint64_t epoch = 0; epoch < 2; epoch++) {
                struct pf_result res;
                pf_epoch(&r, epoch, 2e-5, 1, &res);
                char what[64];
                snprintf(what, sizeof what, "depth %u, %u workers, epoch %llu", depth, workers,
                         (unsigned long long)epoch);
                pf_expect_good(&r, &res, what);
            }
            struct loader_stats ls;
            loader_stats(r.loader, &ls);
            CHECK_EQ(ls.max_busy_slots <= ls.slots, 1);
            pf_close(&r);
        }
    }
}

TEST(prefetch_pageable_ring_and_pytorch_staging)
{
    for (int mode = 0; mode < 2; mode++) {
        struct pf_config c = pf_base;
        c.pageable_ring = 1;
        c.pin_copy = mode;
        struct pf_rig r;
        pf_open(&r, &c);
        struct pf_result res;
        pf_epoch(&r, 0, 2e-5, 1, &res);
        pf_expect_good(&r, &res, mode ? "pageable ring staged through pinned memory" : "pageable ring");
        struct device_stats ds;
        struct prefetch_stats ps;
        device_stats(r.dev, &ds);
        prefetch_stats(r.pf, &ps);
        uint64_t bytes = c.records * c.record_bytes;
        CHECK_EQ_U64(ps.bytes, bytes);
        /* the copies of the data: the driver's staging copy, or ours into pinned memory */
        CHECK_EQ_U64(mode ? ps.pin_bytes : ds.staged_bytes - c.records * sizeof(int64_t), bytes);
        CHECK_EQ_U64(mode ? ds.staged_bytes : ps.pin_bytes, 0);
        pf_close(&r);
    }
}

TEST(prefetch_pinned_ring_copies_each_byte_twice)
{
    struct pf_rig r;
    pf_open(&r, &pf_base);
    struct pf_result res;
    pf_epoch(&r, 0, 0, 0, &res);
    pf_expect_good(&r, &res, "pinned ring");
    struct device_stats ds;
    struct prefetch_stats ps;
    struct loader_stats ls;
    device_stats(r.dev, &ds);
    prefetch_stats(r.pf, &ps);
    loader_stats(r.loader, &ls);
    /* 1: collate into the slot (the loader's bytes); 2: the DMA. Nothing staged, nothing pinned on the way. */
    CHECK_EQ_U64(ls.bytes, pf_base.records * pf_base.record_bytes);
    CHECK_EQ_U64(ds.bytes[DEVICE_H2D], ls.bytes + pf_base.records * sizeof(int64_t));
    CHECK_EQ_U64(ds.staged_bytes, 0);
    CHECK_EQ_U64(ps.pin_bytes, 0);
    CHECK_EQ_U64(ds.watched_copies[DEVICE_WRITE_CHECK_TRAP], ds.copies[DEVICE_H2D]); /* every copy out of a slot watched */
    pf_close(&r);
}

/* Overlap, seen without a clock: hold the compute stream and watch batch 1's copy. */
TEST(prefetch_double_buffering_overlaps)
{
    for (uint32_t depth = 1; depth <= 2; depth++) {
        struct pf_config c = pf_base;
        c.depth = depth;
        c.workers = 0;
        struct pf_rig r;
        pf_open(&r, &c);
        int overlapped = pf_copy_overlaps_compute(&r, depth == 2 ? 30 : 1);
        if (depth == 2) {
            CHECK_MSG(overlapped, "two buffers: the copy of batch 1 waited for the compute on batch 0");
            pf_close(&r);
            c.gbps = 0.002;
            pf_open(&r, &c);
            double lead = pf_compute_lead(&r), copy = (double)c.batch * c.record_bytes / (c.gbps * 1e9);
            CHECK_MSG(lead > 0.5 * copy, "two buffers: the compute on batch 0 began %.3f ms before batch 1's copy "
                      "ended, expected about one copy (%.3f ms)", lead * 1e3, copy * 1e3);
        }
        else
            CHECK_MSG(!overlapped, "one buffer: the copy of batch 1 overwrote the buffer batch 0's compute reads");
        pf_close(&r);
    }
}

/* A slot goes back only after its copy: with a slow link, no worker and a
 * ring of two, the loader would refill batch 0's slot while its copy is in
 * flight if it came back early; the detector would fail the epoch. */
TEST(prefetch_slots_go_back_after_their_copy)
{
    struct pf_config c = pf_base;
    c.gbps = 0.002; /* 3.2 KiB batches: 1.6 ms each */
    c.workers = 0;
    c.records = 80;
    struct pf_rig r;
    pf_open(&r, &c);
    struct pf_result res;
    pf_epoch(&r, 0, 1e-3, 1, &res);
    pf_expect_good(&r, &res, "slow link, no workers, ring of 2");
    struct prefetch_stats ps;
    prefetch_stats(r.pf, &ps);
    CHECK_MSG(ps.slot_wait_s > 0, "no slot ever waited for its copy: with 1.6 ms copies one must have");
    pf_close(&r);
}

TEST(prefetch_bad_use)
{
    struct pf_rig r;
    pf_open(&r, &pf_base);
    struct prefetch_options po = {.depth = 2, .max_bytes = 0, .max_batch = 16, .compute = r.compute};
    prefetch_t *p;
    CHECK_ERR(prefetch_open(r.dev, r.loader, &po, &p), ERR_ARG, "max_bytes");
    po.max_bytes = 100;
    po.depth = 17;
    CHECK_ERR(prefetch_open(r.dev, r.loader, &po, &p), ERR_ARG, "depth 17");
    struct index_array order = {r.order, pf_base.records};
    struct loader_epoch e = {.epoch = 0, .indices = index_stream_of_array(&order), .batch_size = pf_base.batch};
    CHECK_OK(loader_start_epoch(r.loader, &e));
    struct prefetch_batch *b, *b2;
    CHECK_EQ(prefetch_next(r.pf, &b), 1);
    CHECK_ERR(prefetch_next(r.pf, &b2), ERR_STATE, "batch 0 is still held: prefetch_release it first");
    CHECK_OK(prefetch_release(r.pf, b));
    CHECK_ERR(prefetch_release(r.pf, b), ERR_STATE, "batch 0 is not the batch handed out last");
    pf_close(&r); /* mid-epoch: every slot goes back, no leak */
    /* buffers smaller than a batch */
    struct pf_config c = pf_base;
    pf_open(&r, &c);
    prefetch_close(r.pf);
    po = (struct prefetch_options){.depth = 2, .max_bytes = 100, .max_batch = 16, .compute = r.compute};
    CHECK_OK(prefetch_open(r.dev, r.loader, &po, &r.pf));
    order.indices = r.order;
    e.indices = index_stream_of_array(&order);
    CHECK_OK(loader_start_epoch(r.loader, &e));
    CHECK_ERR(prefetch_next(r.pf, &b), ERR_RANGE, "batch 0 has 3200 bytes and 16 samples; the device buffers hold "
                                                  "100 bytes");
    pf_close(&r);
}
