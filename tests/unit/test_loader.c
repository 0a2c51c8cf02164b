/* test_loader: the worker loader of chapter 3 (lib/loader/loader.c).
 *
 * Every index exactly once and in order whatever the worker count and the
 * per-sample delays; out of order the same multiset; augmentation identical
 * across worker counts and between IDX's batched reads and per-record reads;
 * a failing sample and a stuck sample named with their batch and worker;
 * stopping mid-epoch and restarting; the memory bound; the padding collate and
 * explicit (token-budget) batches; a later batch overtaking a blocked one out
 * of order; options that overflow or make no sense. No assertion here is about
 * durations: the delays only shuffle the thread timing, and every wait is for
 * an event (a gate, a slot count), not for a clock. With `modelled` (virtual
 * time), the trainer's waits are the model's to the nanosecond on one and two
 * workers, and the same with real delays in the collates and the trainer.
 */
#include "loader/augment.h"
#include "dataset/dataset_idx.h"
#include "loader_fixture.h"
#include "base/mem.h"
#include "base/vclock.h"

#include <math.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static void run_in_order(uint32_t workers, int drop_last)
{
    const uint64_t n = 600, bs = 7;
    dataset_t *ds = fixture_dataset(n, 24, 24);
    struct loader_options opt = fixture_options(workers, bs, fixture_delay);
    loader_t *L;
    CHECK_OK(loader_open(ds, &opt, &L));
    for (uint64_t epoch = 0; epoch < 2; epoch++) {
        uint64_t *idx = fixture_shuffled(n, epoch);
        struct loader_epoch e = {.epoch = epoch, .indices = index_stream_of_array(&(struct index_array){idx, n}), .batch_size = bs, .drop_last = drop_last};
        CHECK_OK(loader_start_epoch(L, &e));
        uint8_t *seen = calloc(n, 1);
        uint64_t want_batches = drop_last ? n / bs : (n + bs - 1) / bs, got = 0;
        struct loader_batch *b;
        int rc;
        while ((rc = loader_next(L, &b)) == 1) {
            CHECK_EQ_U64(b->number, got);
            CHECK_EQ_U64(b->epoch, epoch);
            CHECK_EQ(b->count, got * bs + bs <= n ? bs : n - got * bs);
            fixture_check_batch(ds, b, idx, got * bs);
            for (uint32_t i = 0; i < b->count; i++) {
                CHECK_MSG(!seen[b->indices[i]], "index %llu delivered twice", (unsigned long long)b->indices[i]);
                seen[b->indices[i]] = 1;
            }
            loader_release(L, b);
            got++;
        }
        CHECK_OK(rc);
        CHECK_EQ_U64(got, want_batches);
        for (uint64_t i = 0; i < want_batches * bs && i < n; i++)
            CHECK_MSG(seen[idx[i]], "index %llu never delivered", (unsigned long long)idx[i]);
        CHECK_EQ(loader_next(L, &b), 0); /* the end stays the end */
        free(seen);
        free(idx);
    }
    loader_close(L);
    dataset_close(ds);
}

TEST(in_order_exactly_once_0_workers) { run_in_order(0, 0); }
TEST(in_order_exactly_once_1_worker) { run_in_order(1, 1); }
TEST(in_order_exactly_once_2_workers) { run_in_order(2, 0); }
TEST(in_order_exactly_once_3_workers) { run_in_order(3, 1); }
TEST(in_order_exactly_once_8_workers) { run_in_order(8, 0); }

TEST(out_of_order_delivers_the_same_multiset)
{
    const uint64_t n = 500, bs = 8, nb = (n + bs - 1) / bs;
    dataset_t *ds = fixture_dataset(n, 24, 24);
    struct loader_options opt = fixture_options(3, bs, fixture_delay);
    opt.out_of_order = 1;
    loader_t *L;
    CHECK_OK(loader_open(ds, &opt, &L));
    uint64_t *idx = fixture_shuffled(n, 3);
    struct loader_epoch e = {.epoch = 0, .indices = index_stream_of_array(&(struct index_array){idx, n}), .batch_size = bs};
    CHECK_OK(loader_start_epoch(L, &e));
    uint8_t *seen_batch = calloc(nb, 1);
    uint64_t got = 0;
    struct loader_batch *b;
    int rc;
    while ((rc = loader_next(L, &b)) == 1) {
        CHECK(b->number < nb && !seen_batch[b->number]);
        seen_batch[b->number] = 1;
        fixture_check_batch(ds, b, idx, b->number * bs);
        loader_release(L, b);
        got++;
    }
    CHECK_OK(rc);
    CHECK_EQ_U64(got, nb);
    free(seen_batch);
    free(idx);
    loader_close(L);
    dataset_close(ds);
}

/* Batch 0 is held on a gate until a later batch has been delivered: out of
 * order must hand out that later batch; in order would wait for ever. */
TEST(out_of_order_a_later_batch_overtakes_a_blocked_one) { fixture_check_overtaking(2); }
TEST(out_of_order_overtakes_with_many_workers) { fixture_check_overtaking(5); }

/* One epoch's images with the flip, as one buffer in epoch order. */
static uint8_t *flipped_epoch(const dataset_t *ds, uint32_t workers, uint64_t epoch, const uint64_t *idx, uint64_t n)
{
    struct augment_hflip flip = {.rows = 28, .cols = 28, .p = 0.5};
    struct loader_options opt = fixture_options(workers, 16, augment_hflip);
    opt.seed = 1234;
    opt.transform_user = &flip;
    loader_t *L;
    CHECK_OK(loader_open(ds, &opt, &L));
    struct loader_epoch e = {.epoch = epoch, .indices = index_stream_of_array(&(struct index_array){idx, n}), .batch_size = 16};
    CHECK_OK(loader_start_epoch(L, &e));
    uint8_t *all = malloc(n * 784), *p = all;
    struct loader_batch *b;
    int rc;
    while ((rc = loader_next(L, &b)) == 1) {
        memcpy(p, b->data, b->bytes);
        p += b->bytes;
        loader_release(L, b);
    }
    CHECK_OK(rc);
    loader_close(L);
    return all;
}

TEST(augmentation_is_identical_across_worker_counts)
{
    const uint64_t n = 200;
    dataset_t *ds = fixture_dataset(n, 784, 784);
    uint64_t *idx = fixture_shuffled(n, 5);
    uint8_t *ref = flipped_epoch(ds, 0, 0, idx, n);
    uint32_t counts[] = {1, 3, 8};
    for (int k = 0; k < 3; k++) {
        uint8_t *got = flipped_epoch(ds, counts[k], 0, idx, n);
        CHECK_MSG(memcmp(ref, got, n * 784) == 0, "%u workers augment differently from 0 workers", counts[k]);
        free(got);
    }
    /* The flip really happens, on about half the samples, and it changes with the epoch. */
    uint64_t flipped = 0, changed = 0;
    for (uint64_t i = 0; i < n; i++) {
        uint8_t raw[784];
        struct dataset_record rec;
        CHECK_OK(dataset_read(ds, idx[i], raw, sizeof raw, &rec));
        int flip = augment_hflip_decision(loader_sample_seed(1234, 0, idx[i]), 0.5);
        flipped += flip;
        changed += flip != augment_hflip_decision(loader_sample_seed(1234, 1, idx[i]), 0.5);
        CHECK_EQ(raw[0] == ref[i * 784 + (flip ? 27 : 0)], 1);
        CHECK_EQ(raw[27] == ref[i * 784 + (flip ? 0 : 27)], 1);
    }
    CHECK(flipped > n / 4 && flipped < 3 * n / 4);
    CHECK(changed > 0);
    free(ref);
    free(idx);
    dataset_close(ds);
}

/* The flip itself, on images too small to hide an off-by-one: each row
 * reversed whole (odd and even widths), and 0-pixel rows left alone. */
TEST(hflip_reverses_every_row)
{
    struct loader_sample s = {.index = 0, .seed = 0};
    struct augment_hflip odd = {.rows = 2, .cols = 5, .p = 1.0}, even = {.rows = 1, .cols = 4, .p = 1.0};
    uint8_t a[10] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, b[4] = {1, 2, 3, 4};
    CHECK_OK(augment_hflip(&odd, &s, a, sizeof a));
    CHECK(memcmp(a, (uint8_t[]){5, 4, 3, 2, 1, 10, 9, 8, 7, 6}, sizeof a) == 0);
    CHECK_OK(augment_hflip(&even, &s, b, sizeof b));
    CHECK(memcmp(b, (uint8_t[]){4, 3, 2, 1}, sizeof b) == 0);
    struct augment_hflip empty = {.rows = 3, .cols = 0, .p = 1.0};
    uint8_t guard = 7;
    CHECK_OK(augment_hflip(&empty, &s, &guard, 0));
    CHECK_EQ(guard, 7);
    CHECK_ERR(augment_hflip(&odd, &s, a, 9), ERR_FORMAT, "sample 0 has 9 bytes, not a 2x5 image");
}

/* The stacking collate reads a batch with dataset_read_batch(): IDX's own
 * batch loop, then the transform row by row, must give what synthetic's
 * per-record reads give for the same records. */
TEST(idx_batched_reads_collate_like_record_reads)
{
    const uint64_t n = 200;
    dataset_t *syn = fixture_dataset(n, 784, 784), *idx_ds;
    char path[4096];
    snprintf(path, sizeof path, "%s/loader-images-idx3-ubyte", check_tmpdir());
    CHECK_OK(dataset_idx_write(syn, 28, 28, path, NULL));
    CHECK_OK(dataset_open(path, NULL, &idx_ds));
    uint64_t *idx = fixture_shuffled(n, 6);
    uint8_t *ref = flipped_epoch(syn, 0, 0, idx, n);
    uint32_t counts[] = {0, 3};
    for (int k = 0; k < 2; k++) {
        uint8_t *got = flipped_epoch(idx_ds, counts[k], 0, idx, n);
        CHECK_MSG(memcmp(ref, got, n * 784) == 0, "IDX with %u workers collates differently", counts[k]);
        free(got);
    }
    free(ref);
    free(idx);
    dataset_close(idx_ds);
    dataset_close(syn);
}

static atomic_int bad_worker = -2;
static const uint64_t bad_index = 123;

static int transform_fails_on_bad(void *user, const struct loader_sample *s, void *data, uint64_t bytes)
{
    (void)user, (void)data, (void)bytes;
    if (s->index != bad_index)
        return fixture_delay(NULL, s, data, bytes);
    atomic_store(&bad_worker, s->worker);
    return err_set(ERR_FORMAT, "corrupt image header");
}

static void run_failing_sample(uint32_t workers, int out_of_order)
{
    const uint64_t n = 300, bs = 10;
    dataset_t *ds = fixture_dataset(n, 24, 24);
    struct loader_options opt = fixture_options(workers, bs, transform_fails_on_bad);
    opt.out_of_order = out_of_order;
    loader_t *L;
    CHECK_OK(loader_open(ds, &opt, &L));
    uint64_t *idx = fixture_shuffled(n, 9);
    uint64_t pos = 0;
    while (idx[pos] != bad_index)
        pos++;
    struct loader_epoch e = {.epoch = 4, .indices = index_stream_of_array(&(struct index_array){idx, n}), .batch_size = bs};
    CHECK_OK(loader_start_epoch(L, &e));
    struct loader_batch *b;
    uint64_t got = 0;
    int rc;
    while ((rc = loader_next(L, &b)) == 1) {
        loader_release(L, b);
        got++;
    }
    if (out_of_order) /* whatever finished before the bad batch was picked, never all of them */
        CHECK(got < n / bs);
    else
        CHECK_EQ_U64(got, pos / bs); /* every batch before the bad one, then the error */
    CHECK_EQ(rc, ERR_FORMAT);
    char want[128];
    snprintf(want, sizeof want, "batch %llu of epoch 4: sample %llu (position %llu) on ", (unsigned long long)(pos / bs),
             (unsigned long long)bad_index, (unsigned long long)(pos % bs));
    CHECK_CONTAINS(err_msg(), want);
    CHECK_CONTAINS(err_msg(), "corrupt image header");
    char who[64];
    if (workers)
        snprintf(who, sizeof who, "on worker %d:", atomic_load(&bad_worker));
    else
        snprintf(who, sizeof who, "on the caller's thread:");
    CHECK_CONTAINS(err_msg(), who);
    CHECK_ERR(loader_next(L, &b), ERR_STATE, "ended with an error");
    /* The loader stopped cleanly: a new epoch without the bad sample runs. */
    for (uint64_t i = 0; i < n; i++)
        idx[i] = idx[i] == bad_index ? 0 : idx[i];
    e.epoch = 5;
    CHECK_OK(loader_start_epoch(L, &e));
    CHECK_OK(fixture_drain(L, &got));
    CHECK_EQ_U64(got, n / bs);
    free(idx);
    loader_close(L);
    dataset_close(ds);
}

TEST(failing_sample_is_reported_with_index_and_worker) { run_failing_sample(3, 0); }
TEST(failing_sample_is_reported_without_workers) { run_failing_sample(0, 0); }
TEST(failing_sample_is_reported_out_of_order) { run_failing_sample(3, 1); }
TEST(failing_sample_is_reported_out_of_order_without_workers) { run_failing_sample(0, 1); }

static atomic_int stuck_worker = -2;
static const uint64_t stuck_index = 42;

/* Never finishes sample 42 on its own; returns once the loader is stopping. */
static int transform_stuck(void *user, const struct loader_sample *s, void *data, uint64_t bytes)
{
    (void)user, (void)data, (void)bytes;
    if (s->index != stuck_index)
        return 0;
    atomic_store(&stuck_worker, s->worker);
    while (!loader_stopping(s->loader))
        clock_sleep_ns(1000000);
    return 0;
}

TEST(stuck_sample_trips_the_timeout_naming_batch_and_worker)
{
    const uint64_t n = 200, bs = 10;
    dataset_t *ds = fixture_dataset(n, 24, 24);
    struct loader_options opt = fixture_options(3, bs, transform_stuck);
    opt.timeout_s = 1;
    loader_t *L;
    CHECK_OK(loader_open(ds, &opt, &L));
    uint64_t idx[200];
    for (uint64_t i = 0; i < n; i++)
        idx[i] = i; /* sample 42 is in batch 4 */
    struct loader_epoch e = {.epoch = 0, .indices = index_stream_of_array(&(struct index_array){idx, n}), .batch_size = bs};
    CHECK_OK(loader_start_epoch(L, &e));
    struct loader_batch *b;
    int rc;
    uint64_t got = 0;
    /* Batches 0..3 come (they are not stuck). Wait for the stuck batch to be
     * held by its worker, and for every other slot of the ring (6: batches
     * 0..3 and 5) to be finished, so the 1 s timeout can only fire on batch 4,
     * however slowly the other workers ran. */
    while (atomic_load(&stuck_worker) < 0)
        clock_sleep_ns(1000000);
    for (struct loader_stats st = {0}; st.ready_slots < 5; clock_sleep_ns(1000000))
        loader_stats(L, &st);
    while ((rc = loader_next(L, &b)) == 1) {
        loader_release(L, b);
        got++;
    }
    CHECK_EQ(rc, ERR_TIMEOUT);
    CHECK_EQ_U64(got, 4);
    char want[64];
    snprintf(want, sizeof want, "worker %d holds it, on sample 42 (position 2 of 10)", atomic_load(&stuck_worker));
    CHECK_CONTAINS(err_msg(), "batch 4 is late");
    CHECK_CONTAINS(err_msg(), want);
    loader_close(L); /* the stuck transform sees loader_stopping() and returns */
    dataset_close(ds);
}

TEST(open_rejects_sizes_that_overflow)
{
    dataset_t *ds = fixture_dataset(10, 24, 24);
    /* A slot_bytes near 2^64 once wrapped to a tiny slot while collate was told
     * it had slot_bytes: a heap overflow on the first batch. */
    uint64_t bad[] = {UINT64_MAX, UINT64_MAX - 10, UINT64_MAX - 63, UINT64_MAX & ~(uint64_t)63,
                      UINT64_MAX - 2 * 8 * 8 - 62};
    for (int i = 0; i < 5; i++) {
        struct loader_options opt = fixture_options(2, 8, NULL);
        opt.slot_bytes = bad[i];
        loader_t *L = NULL;
        CHECK_ERR(loader_open(ds, &opt, &L), ERR_ARG, "slot_bytes");
        CHECK(L == NULL);
    }
    struct loader_options opt = fixture_options(8, 8, NULL); /* 16 slots × 2^61: the ring overflows */
    opt.slot_bytes = (uint64_t)1 << 61;
    CHECK_ERR(loader_open(ds, &opt, &(loader_t *){0}), ERR_ARG, "slot_bytes");
    dataset_close(ds);
    /* The default slot, max_batch × max_record_bytes, overflows too. */
    ds = fixture_dataset(10, (uint64_t)1 << 60, (uint64_t)1 << 60);
    opt = fixture_options(1, 16, NULL);
    CHECK_ERR(loader_open(ds, &opt, &(loader_t *){0}), ERR_ARG, "slot_bytes");
    dataset_close(ds);
}

TEST(open_rejects_timeouts_that_make_no_sense)
{
    dataset_t *ds = fixture_dataset(10, 24, 24);
    /* below 10 ms a timeout blames a worker that only waited for a core; 1e-300 s used to round to "now" */
    double bad[] = {NAN, -NAN, INFINITY, -INFINITY, -1, -1e-9, 1e300, 1e6 + 1, 1e-300, 1e-3, 0.009};
    for (int i = 0; i < 11; i++) {
        struct loader_options opt = fixture_options(1, 8, NULL);
        opt.timeout_s = bad[i];
        CHECK_ERR(loader_open(ds, &opt, &(loader_t *){0}), ERR_ARG, "timeout_s");
    }
    struct loader_options inline_opt = fixture_options(0, 8, NULL); /* no workers: nobody to time out */
    inline_opt.timeout_s = 1;
    CHECK_ERR(loader_open(ds, &inline_opt, &(loader_t *){0}), ERR_ARG, "timeout_s 1 needs workers");
    double good[] = {0, 0.01, 1e6};
    for (int i = 0; i < 3; i++) {
        struct loader_options opt = fixture_options(1, 8, NULL);
        opt.timeout_s = good[i];
        loader_t *L;
        CHECK_OK(loader_open(ds, &opt, &L));
        loader_close(L);
    }
    dataset_close(ds);
}

/* The ring is allocated whole at open. Variable-length records make every
 * automatic slot max_batch rows padded to the dataset's longest record, so
 * one long record can make the ring larger than the machine: it is refused
 * then, naming what sized it and the way out, instead of being allocated
 * under overcommit. A slot_bytes cap the machine holds is accepted, and a
 * batch that needs more than it fails naming itself. */
TEST(open_refuses_a_padded_ring_the_machine_cannot_hold)
{
    const uint64_t longest = 5u << 20, have = mem_physical_bytes();
    CHECK(have > 0);
    dataset_t *ds = fixture_dataset(64, 24, longest);
    /* 1 worker x prefetch 2 = 2 slots of 0.6 x physical memory each */
    struct loader_options opt = fixture_options(1, (uint32_t)(have / 10 * 6 / longest), NULL);
    opt.collate = loader_collate_pad;
    CHECK_ERR(loader_open(ds, &opt, &(loader_t *){0}), ERR_NOMEM, "loader: a ring of 2 slots, each sized for max_batch");
    CHECK_CONTAINS(err_msg(), "records of up to the longest record's 5242880 bytes: needs");
    CHECK_CONTAINS(err_msg(), "set slot_bytes (the most bytes a padded batch may take");
    opt.slot_bytes = have / 2; /* an explicit size the machine cannot hold twice is refused the same way */
    CHECK_ERR(loader_open(ds, &opt, &(loader_t *){0}), ERR_NOMEM, "loader: a ring of 2 slots of slot_bytes");
    opt.slot_bytes = 64u << 10; /* a cap: every batch of 64 records padded to its longest needs more */
    opt.max_batch = 64;
    loader_t *L;
    CHECK_OK(loader_open(ds, &opt, &L));
    uint64_t *idx = fixture_shuffled(64, 3);
    struct loader_epoch e = {.epoch = 0, .indices = index_stream_of_array(&(struct index_array){idx, 64}),
                             .batch_size = 64};
    CHECK_OK(loader_start_epoch(L, &e));
    struct loader_batch *b;
    CHECK_ERR(loader_next(L, &b), ERR_RANGE, "batch 0");
    CHECK_CONTAINS(err_msg(), "slot of 65536 bytes");
    loader_close(L);
    free(idx);
    dataset_close(ds);
}

TEST(stop_mid_epoch_then_restart)
{
    const uint64_t n = 400, bs = 8;
    dataset_t *ds = fixture_dataset(n, 24, 24);
    struct loader_options opt = fixture_options(4, bs, fixture_delay);
    loader_t *L;
    CHECK_OK(loader_open(ds, &opt, &L));
    uint64_t *idx = fixture_shuffled(n, 11);
    struct loader_epoch e = {.epoch = 0, .indices = index_stream_of_array(&(struct index_array){idx, n}), .batch_size = bs};
    CHECK_OK(loader_start_epoch(L, &e));
    struct loader_batch *held, *b;
    CHECK_EQ(loader_next(L, &held), 1);
    CHECK_EQ(loader_next(L, &b), 1);
    loader_release(L, b);
    loader_stop(L); /* the trainer breaks out of its loop, still holding a batch */
    CHECK_ERR(loader_next(L, &b), ERR_STATE, "was stopped after 2 of 50 batches");
    fixture_check_batch(ds, held, idx, 0); /* a held batch stays valid */
    loader_release(L, held);
    /* Restart, then break out again without stopping: start_epoch abandons it. */
    for (uint64_t epoch = 1; epoch < 3; epoch++) {
        e.epoch = epoch;
        CHECK_OK(loader_start_epoch(L, &e));
        uint64_t got = 0;
        int rc;
        while ((rc = loader_next(L, &b)) == 1) {
            CHECK_EQ_U64(b->number, got);
            fixture_check_batch(ds, b, idx, got * bs);
            loader_release(L, b);
            if (++got == 10 && epoch == 1)
                break;
        }
        CHECK_OK(rc);
        CHECK_EQ_U64(got, epoch == 1 ? 10 : n / bs);
    }
    /* Close mid-epoch with work in flight and a batch held: no leak, no hang. */
    CHECK_OK(loader_start_epoch(L, &e));
    CHECK_EQ(loader_next(L, &held), 1);
    loader_close(L);
    free(idx);
    dataset_close(ds);
}

TEST(memory_bound_is_respected)
{
    const uint64_t n = 400, bs = 5;
    dataset_t *ds = fixture_dataset(n, 24, 24);
    uint32_t workers[] = {1, 2, 4}, prefetch[] = {1, 2, 3};
    for (int w = 0; w < 3; w++) {
        struct fixture_counting c = {0};
        struct loader_options opt = fixture_options(workers[w], bs, fixture_bound_transform);
        opt.prefetch = prefetch[w];
        opt.allocator = (struct loader_allocator){fixture_count_alloc, fixture_count_free, &c};
        fixture_slots = workers[w] * prefetch[w];
        atomic_store(&fixture_released, 0);
        loader_t *L;
        CHECK_OK(loader_open(ds, &opt, &L));
        CHECK_EQ(atomic_load(&c.allocs), fixture_slots);
        uint64_t *idx = fixture_shuffled(n, w);
        struct loader_epoch e = {.epoch = 0, .indices = index_stream_of_array(&(struct index_array){idx, n}), .batch_size = bs};
        CHECK_OK(loader_start_epoch(L, &e));
        struct loader_batch *b;
        int rc;
        while ((rc = loader_next(L, &b)) == 1) {
            clock_sleep_ns(20000); /* a slow trainer: workers run ahead until the ring is full */
            atomic_fetch_add(&fixture_released, 1); /* before the slot is free, so the check never races ahead */
            loader_release(L, b);
        }
        CHECK_OK(rc);
        struct loader_stats st;
        loader_stats(L, &st);
        CHECK_EQ(st.slots, fixture_slots);
        CHECK(st.max_busy_slots <= fixture_slots);
        CHECK_EQ_U64(st.memory_bytes, (uint64_t)fixture_slots * st.slot_bytes);
        CHECK_EQ_U64(st.samples, n);
        CHECK(st.wait_fraction >= 0 && st.wait_fraction <= 1);
        CHECK_EQ(atomic_load(&fixture_violations), 0);
        CHECK_EQ(atomic_load(&c.allocs), fixture_slots); /* nothing allocated per batch */
        loader_close(L);
        CHECK_EQ(atomic_load(&c.live), 0);
        free(idx);
    }
    dataset_close(ds);
}

TEST(padding_collate_and_explicit_batches)
{
    const uint64_t n = 100;
    dataset_t *ds = fixture_dataset(n, 3, 40);
    struct loader_options opt = fixture_options(0, 9, NULL);
    CHECK_ERR(loader_open(ds, &opt, &(loader_t *){0}), ERR_ARG, "variable-length");
    opt.workers = 2;
    opt.collate = loader_collate_pad;
    loader_t *L;
    CHECK_OK(loader_open(ds, &opt, &L));
    /* Variable-size batches, as a token-budget sampler makes them. */
    uint64_t offsets[] = {0, 1, 10, 14, 20, 29, 35, 44, 45, 51, 60, 69, 78, 87, 96, 100};
    uint64_t nb = sizeof offsets / sizeof offsets[0] - 1;
    uint64_t *idx = fixture_shuffled(n, 2);
    struct batch_array batches = {idx, offsets, nb};
    struct loader_epoch e = {.epoch = 0, .batches = batch_stream_of_array(&batches)};
    CHECK_OK(loader_start_epoch(L, &e));
    struct loader_batch *b;
    int rc;
    uint64_t got = 0;
    while ((rc = loader_next(L, &b)) == 1) {
        CHECK_EQ_U64(b->count, offsets[got + 1] - offsets[got]);
        uint64_t longest = 0;
        for (uint32_t i = 0; i < b->count; i++)
            longest = b->lengths[i] > longest ? b->lengths[i] : longest;
        CHECK_EQ_U64(b->stride, longest);
        CHECK_EQ_U64(b->bytes, longest * b->count);
        fixture_check_batch(ds, b, idx, offsets[got]);
        for (uint32_t i = 0; i < b->count; i++)
            for (uint64_t k = b->lengths[i]; k < b->stride; k++)
                CHECK_EQ(((uint8_t *)b->data)[i * b->stride + k], 0);
        loader_release(L, b);
        got++;
    }
    CHECK_OK(rc);
    CHECK_EQ_U64(got, nb);
    uint64_t too_big[] = {0, 50, 100};
    struct batch_array big = {idx, too_big, 2};
    e.batches = batch_stream_of_array(&big);
    CHECK_ERR(loader_start_epoch(L, &e), ERR_ARG, "batch 0 has 50 samples");
    idx[7] = n;
    e.batches = batch_stream_of_array(&batches);
    CHECK_ERR(loader_start_epoch(L, &e), ERR_ARG, "index 100 at position 7 is past the end");
    /* an epoch names one source: an index stream or a batch stream */
    e.indices = index_stream_of_array(&(struct index_array){idx, n});
    CHECK_ERR(loader_start_epoch(L, &e), ERR_ARG, "give one");
    CHECK_ERR(loader_start_epoch(L, &(struct loader_epoch){.epoch = 3}), ERR_ARG, "no index stream or batch stream");
    free(idx);
    loader_close(L);
    dataset_close(ds);
}

/* A custom collate: only labels, summed into the first row. */
static int collate_label_sum(void *user, struct loader_job *job)
{
    int64_t sum = 0;
    uint8_t scratch[64];
    for (uint32_t i = 0; i < job->count; i++) {
        struct dataset_record rec;
        int rc = loader_read_sample(job, i, scratch, sizeof scratch, &rec);
        if (rc < 0)
            return rc;
        job->out->labels[i] = rec.label;
        job->out->lengths[i] = rec.bytes;
        sum += rec.label;
    }
    memcpy(job->out->data, &sum, sizeof sum);
    job->out->stride = 0;
    job->out->bytes = sizeof sum;
    (*(atomic_int *)user)++;
    return 0;
}

/* Batch 6 waits on a gate: the first batch a release lets the workers claim
 * when the trainer took nothing before (prefetch 2, 3 workers: 6 slots). */
static atomic_int settle_gate_open;

static int settle_gate_transform(void *user, const struct loader_sample *s, void *data, uint64_t bytes)
{
    (void)user, (void)data, (void)bytes;
    while (s->batch == 6 && !atomic_load(&settle_gate_open) && !loader_stopping(s->loader))
        clock_sleep_ns(100000);
    return 0;
}

static void wait_until_settled(loader_t *L, uint32_t workers, struct loader_stats *st)
{
    for (loader_stats(L, st); st->idle_workers != workers || st->filling_slots != 0; loader_stats(L, st))
        clock_sleep_ns(1000000);
}

/* The loader says when the ring has settled (every worker idle, none
 * filling), so a test can wait for that instead of for a clock: with the
 * trainer taking nothing it settles with every slot READY; taking a batch
 * wakes nobody; a release wakes one worker, and from that moment until it
 * has collated the next batch (held at the gate) the ring is not settled,
 * however soon the trainer asks. */
TEST(idle_workers_say_when_the_ring_has_settled)
{
    const uint32_t workers = 3;
    dataset_t *ds = fixture_dataset(200, 24, 24);
    uint64_t *idx = fixture_shuffled(200, 7);
    for (int out_of_order = 0; out_of_order < 2; out_of_order++) {
        atomic_store(&settle_gate_open, 0);
        struct loader_options opt = fixture_options(workers, 4, settle_gate_transform);
        opt.out_of_order = out_of_order;
        loader_t *L;
        CHECK_OK(loader_open(ds, &opt, &L));
        struct loader_epoch e = {.epoch = 0, .indices = index_stream_of_array(&(struct index_array){idx, 200}),
                                 .batch_size = 4};
        CHECK_OK(loader_start_epoch(L, &e));
        struct loader_stats st;
        wait_until_settled(L, workers, &st);
        CHECK_EQ(st.slots, 6);
        CHECK_EQ(st.ready_slots, st.slots);
        struct loader_batch *b;
        CHECK_EQ(loader_next(L, &b), 1);
        CHECK_EQ_U64(b->number, 0);
        loader_stats(L, &st);
        CHECK_EQ(st.idle_workers, workers);
        CHECK_EQ(st.ready_slots, 5);
        loader_release(L, b);
        loader_stats(L, &st);
        CHECK_MSG(st.idle_workers < workers || st.filling_slots > 0,
                  "settled (%u idle workers, none filling) while the worker a release woke has not collated batch 6",
                  st.idle_workers);
        atomic_store(&settle_gate_open, 1);
        wait_until_settled(L, workers, &st);
        CHECK_EQ(st.ready_slots, st.slots);
        loader_close(L);
    }
    free(idx);
    dataset_close(ds);
}

TEST(custom_collate_and_holding_every_slot)
{
    dataset_t *ds = fixture_dataset(64, 24, 24);
    /* in order the message names the batch; out of order it counts deliveries */
    static const char *const held[2] = {"epoch 0: batch 2 needs a slot the caller still holds",
                                        "epoch 0: the next batch (2 delivered) needs a slot the caller still holds"};
    for (int out_of_order = 0; out_of_order < 2; out_of_order++) {
        atomic_int calls = 0;
        struct loader_options opt = fixture_options(2, 8, NULL);
        opt.prefetch = 1;
        opt.collate = collate_label_sum;
        opt.collate_user = &calls;
        opt.out_of_order = out_of_order;
        loader_t *L;
        CHECK_OK(loader_open(ds, &opt, &L));
        uint64_t idx[64];
        for (int i = 0; i < 64; i++)
            idx[i] = (uint64_t)i;
        struct loader_epoch e = {.epoch = 0, .indices = index_stream_of_array(&(struct index_array){idx, 64}), .batch_size = 8};
        CHECK_ERR(loader_next(L, &(struct loader_batch *){0}), ERR_STATE, "no epoch started");
        CHECK_OK(loader_start_epoch(L, &e));
        struct loader_batch *a, *b, *c;
        CHECK_EQ(loader_next(L, &a), 1);
        CHECK_EQ(loader_next(L, &b), 1);
        int64_t sum = 0, got;
        for (uint32_t i = 0; i < a->count; i++)
            sum += a->labels[i];
        memcpy(&got, a->data, sizeof got);
        CHECK_EQ(got, sum);
        /* Two slots, both held: waiting for batch 2 would never end. */
        CHECK_ERR(loader_next(L, &c), ERR_STATE, "release batches");
        CHECK_CONTAINS(err_msg(), held[out_of_order]);
        loader_release(L, a);
        loader_release(L, b);
        loader_close(L);
        CHECK(atomic_load(&calls) >= 2);
    }
    dataset_close(ds);
}

/* ---- virtual time (loader_options.modelled) ------------------------------------------ */

static atomic_uint vt_calls;

/* Real delays that change from call to call: none of them may show in a modelled time. */
static int vt_jitter(void *user, const struct loader_sample *s, void *data, uint64_t bytes)
{
    (void)user, (void)s, (void)data, (void)bytes;
    unsigned k = atomic_fetch_add(&vt_calls, 1);
    if (k % 7 == 3)
        usleep(2000 + 500 * (k % 5));
    return 0;
}

/* One epoch of 8 batches of 10 on `workers` modelled workers, each batch's collate 10 ms + its
 * bytes at 10 GB/s; the trainer steps 3 ms after each batch. The waits, into wait[8]. */
static void vt_epoch(uint32_t workers, int jitter, uint64_t wait[8])
{
    dataset_t *ds;
    CHECK_OK(dataset_open("synthetic", NULL, &ds));
    struct loader_options lo;
    loader_options_default(&lo);
    lo.workers = workers;
    lo.max_batch = 10;
    lo.modelled = 1;
    lo.model_record_s = 1e-3;
    lo.transform = jitter ? vt_jitter : NULL;
    loader_t *L;
    CHECK_OK(loader_open(ds, &lo, &L));
    uint64_t idx[80];
    for (int i = 0; i < 80; i++)
        idx[i] = (uint64_t)i;
    struct index_array all = {idx, 80};
    struct loader_epoch ep = {.epoch = 0, .indices = index_stream_of_array(&all), .batch_size = 10};
    vclock_set_ns(0);
    CHECK_OK(loader_start_epoch(L, &ep));
    struct loader_batch *b;
    for (int k = 0; k < 8; k++) {
        uint64_t t0 = vclock_now_ns();
        CHECK_EQ(loader_next(L, &b), 1);
        wait[k] = vclock_now_ns() - t0;
        CHECK_EQ_U64((uint64_t)llround(b->wait_s * 1e9), wait[k]);
        if (jitter && k % 3 == 1)
            usleep(3000); /* the trainer is slow for real: not in modelled time either */
        vclock_advance_ns(3000000);
        loader_release(L, b);
    }
    CHECK_EQ(loader_next(L, &b), 0);
    loader_close(L);
    dataset_close(ds);
}

/* The collates are timed by the model, in claim order, on the earliest-free
 * modelled worker: the waits are the model's to the nanosecond, and the same
 * however the threads really ran (jittered collates, a slow trainer). */
TEST(loader_modelled_waits_are_the_model)
{
    uint64_t c = 10000000 + 784; /* 10 records: 10 ms, and 7840 bytes at 10 GB/s */
    for (uint32_t workers = 1; workers <= 2; workers++) {
        uint64_t quiet[8], jittered[8];
        vt_epoch(workers, 0, quiet);
        vt_epoch(workers, 1, jittered);
        for (int k = 0; k < 8; k++)
            CHECK_MSG(quiet[k] == jittered[k], "%u workers, batch %d: waited %llu ns, then %llu ns with real "
                      "delays", workers, k, (unsigned long long)quiet[k], (unsigned long long)jittered[k]);
        if (workers == 1) { /* one worker, back to back: batch k ready at (k + 1) c, the trainer at k c + 3k ms */
            for (int k = 0; k < 8; k++)
                CHECK_EQ_U64(quiet[k], k == 0 ? c : c - 3000000);
        } else { /* two: batches 0 and 1 ready at c, 2 and 3 at 2c, ... */
            CHECK_EQ_U64(quiet[0], c);
            CHECK_EQ_U64(quiet[1], 0);
            CHECK_EQ_U64(quiet[2], 2 * c - (c + 6000000));
        }
    }
}
