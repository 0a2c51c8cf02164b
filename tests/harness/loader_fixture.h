/* loader_fixture: what tests/unit/test_loader.c and the lab 3 grader
 * (labs/03-loader/grade.c) both need to drive lib/loader/loader.h: a synthetic
 * dataset, a shuffled order, delays that scramble the thread timing, a batch
 * checked row by row against fresh reads, out-of-order delivery forced by a
 * gate, and the memory bound checked from outside the loader. Header-only (static functions): the Makefile builds
 * tests/test_*.c, and the grader is built by labs/lab.sh, each on its own.
 */
#ifndef DDP_LOADER_FIXTURE_H
#define DDP_LOADER_FIXTURE_H

#include "check.h"
#include "base/clock.h"
#include "dataset/dataset.h"
#include "base/error.h"
#include "base/hash.h"
#include "loader/loader.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

static inline dataset_t *fixture_dataset(uint64_t records, uint64_t min_bytes, uint64_t bytes)
{
    struct dataset_options opt;
    dataset_options_default(&opt);
    opt.synthetic_records = records;
    opt.synthetic_min_bytes = min_bytes;
    opt.synthetic_bytes = bytes;
    opt.seed = 7;
    dataset_t *ds;
    CHECK_OK(dataset_open("synthetic", &opt, &ds));
    return ds;
}

/* A permutation of 0..n-1 (Fisher-Yates on a fixed hash), as a sampler gives. */
static inline uint64_t *fixture_shuffled(uint64_t n, uint64_t seed)
{
    uint64_t *p = malloc(n * sizeof *p);
    for (uint64_t i = 0; i < n; i++)
        p[i] = i;
    for (uint64_t i = n - 1; i > 0; i--) {
        uint64_t j = hash_mix64(seed + i) % (i + 1), t = p[i];
        p[i] = p[j];
        p[j] = t;
    }
    return p;
}

/* A transform that sleeps 0 to 300 us on a quarter of the samples, so workers
 * finish their batches in a scrambled order. */
static inline int fixture_delay(void *user, const struct loader_sample *s, void *data, uint64_t bytes)
{
    (void)user, (void)data, (void)bytes;
    uint64_t r = hash_mix64(s->index * 31 + s->epoch);
    if (r % 4 == 0)
        clock_sleep_ns(r % 300000);
    return 0;
}

/* The loader's own timeout (loader_options.timeout_s) that fixture_options()
 * gives every loader with workers; 0, the default, is none. The lab 3 grader
 * sets it, so that a deadlocked ring fails in seconds with the loader's
 * diagnosis (which batch is late, who holds it) instead of running silently
 * into the test's time limit. */
static double fixture_timeout_s;

/* Options for `workers` threads, batches of up to max_batch, a transform. */
static inline struct loader_options fixture_options(uint32_t workers, uint32_t max_batch, loader_transform_fn transform)
{
    struct loader_options opt;
    loader_options_default(&opt);
    opt.workers = workers;
    opt.max_batch = max_batch;
    opt.transform = transform;
    opt.timeout_s = workers ? fixture_timeout_s : 0; /* no workers: nobody to time out */
    return opt;
}

/* Checks batch b: its rows are the records indices[first ...], read fresh. */
static inline void fixture_check_batch(const dataset_t *ds, const struct loader_batch *b, const uint64_t *indices,
                                uint64_t first)
{
    uint8_t want[64];
    for (uint32_t i = 0; i < b->count; i++) {
        struct dataset_record rec;
        CHECK_EQ_U64(b->indices[i], indices[first + i]);
        CHECK_OK(dataset_read(ds, indices[first + i], want, sizeof want, &rec));
        CHECK_EQ(b->labels[i], rec.label);
        CHECK_EQ_U64(b->lengths[i], rec.bytes);
        CHECK_MSG(memcmp((uint8_t *)b->data + i * b->stride, want, rec.bytes) == 0,
                  "batch %llu row %u: data is not record %llu", (unsigned long long)b->number, i,
                  (unsigned long long)indices[first + i]);
    }
}

/* Takes and releases every batch left in the epoch; returns loader_next()'s
 * final code and sets *count to the batches taken. */
static inline int fixture_drain(loader_t *L, uint64_t *count)
{
    struct loader_batch *b;
    int rc;
    for (*count = 0; (rc = loader_next(L, &b)) == 1; (*count)++)
        loader_release(L, b);
    return rc;
}

/* Out of order, for real: the first sample of batch 0 waits on a gate that
 * the trainer opens only once it has received `overtakes` later batches. An
 * implementation that delivers in order whatever out_of_order says never
 * gets past the first loader_next(); one that claims in order never gets
 * past the ring's size minus one (the next claim needs batch 0's slot). Both
 * wait until the loader's timeout, if one is set, or the test's time limit. */
static atomic_int fixture_gate_open;

static inline int fixture_gate_transform(void *user, const struct loader_sample *s, void *data, uint64_t bytes)
{
    (void)user, (void)data, (void)bytes;
    while (s->batch == 0 && s->position == 0 && !atomic_load(&fixture_gate_open) && !loader_stopping(s->loader))
        clock_sleep_ns(100000);
    return 0;
}

static inline void fixture_check_overtaking_by(uint32_t workers, uint64_t overtakes)
{
    const uint64_t n = 96, bs = 4, nb = n / bs;
    CHECK_MSG(overtakes >= 1 && overtakes < nb, "overtakes %llu is not 1 to %llu", (unsigned long long)overtakes,
              (unsigned long long)(nb - 1));
    dataset_t *ds = fixture_dataset(n, 24, 24);
    struct loader_options opt = fixture_options(workers, (uint32_t)bs, fixture_gate_transform);
    opt.out_of_order = 1;
    atomic_store(&fixture_gate_open, 0);
    loader_t *L;
    CHECK_OK(loader_open(ds, &opt, &L));
    uint64_t *idx = fixture_shuffled(n, 21);
    struct loader_epoch e = {.epoch = 0, .indices = index_stream_of_array(&(struct index_array){idx, n}), .batch_size = (uint32_t)bs};
    CHECK_OK(loader_start_epoch(L, &e));
    uint8_t seen[96 / 4] = {0};
    struct loader_batch *b;
    uint64_t got = 0;
    int rc;
    while ((rc = loader_next(L, &b)) == 1) {
        CHECK_MSG(b->number < nb && !seen[b->number], "batch %llu is unknown or came twice",
                  (unsigned long long)b->number);
        CHECK_MSG(b->number != 0 || got >= overtakes, "batch 0 is blocked until %llu later batches were delivered, "
                  "yet it came after %llu: out_of_order waited for it", (unsigned long long)overtakes,
                  (unsigned long long)got);
        seen[b->number] = 1;
        fixture_check_batch(ds, b, idx, b->number * bs);
        loader_release(L, b);
        if (++got == overtakes)
            atomic_store(&fixture_gate_open, 1);
    }
    CHECK_OK(rc);
    CHECK_EQ_U64(got, nb);
    loader_close(L);
    free(idx);
    dataset_close(ds);
}

static inline void fixture_check_overtaking(uint32_t workers) { fixture_check_overtaking_by(workers, 1); }

/* The memory bound from outside: an allocator that counts, and a transform
 * that flags any batch collated more than `fixture_slots` ahead of the batches
 * the trainer released (count them in fixture_released before releasing). */
struct fixture_counting {
    atomic_int live, allocs;
};
static atomic_ullong fixture_released;
static atomic_int fixture_violations;
static uint32_t fixture_slots;

static inline void *fixture_count_alloc(void *user, uint64_t bytes)
{
    struct fixture_counting *c = user;
    atomic_fetch_add(&c->live, 1);
    atomic_fetch_add(&c->allocs, 1);
    return malloc(bytes);
}

static inline void fixture_count_free(void *user, void *p, uint64_t bytes)
{
    (void)bytes;
    atomic_fetch_sub(&((struct fixture_counting *)user)->live, 1);
    free(p);
}

static inline int fixture_bound_transform(void *user, const struct loader_sample *s, void *data, uint64_t bytes)
{
    if (s->batch >= atomic_load(&fixture_released) + fixture_slots)
        atomic_fetch_add(&fixture_violations, 1);
    return fixture_delay(user, s, data, bytes);
}

#endif
