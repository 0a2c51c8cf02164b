/* grade: lab 3's grader (`make lab-3`). It drives the loader built from the
 * learner's labs/03-loader/loader.c and checks what the two exercise regions
 * must guarantee: batches in order (or, out of order, a finished batch handed
 * out while an earlier one is still stuck), every sample exactly once, never
 * more than `slots` batches of memory in flight, an error delivered at its
 * batch, and a clean stop. Every loader with workers gets the loader's own
 * timeout (GRADE_LOADER_TIMEOUT_S): a deadlock in the ring fails its test in
 * seconds, with the loader's word on which batch is late and who holds it.
 * Each test also runs in its own process with a time limit, for a hang the
 * loader cannot see (a claim that never returns).
 */
#include "grader.h"

#include "loader_fixture.h"

#include <stdio.h>

/* No batch of these tests takes more than milliseconds: 3 s without one is a
 * deadlock, even on a loaded machine. */
#define GRADE_LOADER_TIMEOUT_S 3.0

/* The next batch, which must exist: a timeout or an error says why not. */
static struct loader_batch *grade_next(loader_t *L)
{
    struct loader_batch *b;
    int rc = loader_next(L, &b);
    CHECK_MSG(rc == 1, "loader_next: expected a batch, got %s%s%s", rc == 0 ? "the end of the epoch" : err_name(rc),
              rc ? ": " : "", rc ? err_msg() : "");
    return b;
}

/* Runs one epoch of n samples in batches of bs and checks order and
 * exactly-once delivery; with out_of_order, only exactly-once. The trainer
 * holds up to `hold` batches at once, releasing the oldest when it has more. */
static void grade_epochs(uint32_t workers, int out_of_order, uint64_t n, uint64_t bs, uint64_t epochs, uint32_t hold)
{
    struct loader_batch *held[4];
    CHECK(hold >= 1 && hold <= sizeof held / sizeof held[0]);
    dataset_t *ds = fixture_dataset(n, 24, 24);
    struct loader_options opt = fixture_options(workers, (uint32_t)bs, fixture_delay);
    opt.out_of_order = out_of_order;
    loader_t *L;
    CHECK_OK(loader_open(ds, &opt, &L));
    uint64_t nb = (n + bs - 1) / bs;
    for (uint64_t epoch = 0; epoch < epochs; epoch++) {
        uint64_t *idx = fixture_shuffled(n, epoch + 100);
        struct loader_epoch e = {.epoch = epoch, .indices = index_stream_of_array(&(struct index_array){idx, n}), .batch_size = (uint32_t)bs};
        CHECK_OK(loader_start_epoch(L, &e));
        uint8_t *seen = calloc(nb, 1);
        uint64_t got = 0;
        uint32_t holding = 0;
        struct loader_batch *b;
        int rc;
        while ((rc = loader_next(L, &b)) == 1) {
            CHECK_MSG(b->number < nb, "batch number %llu past the epoch's %llu batches",
                      (unsigned long long)b->number, (unsigned long long)nb);
            if (!out_of_order)
                CHECK_MSG(b->number == got, "expected batch %llu next, got batch %llu (out of order)",
                          (unsigned long long)got, (unsigned long long)b->number);
            CHECK_MSG(!seen[b->number], "batch %llu delivered twice%s", (unsigned long long)b->number,
                      hold > 1 ? " (the trainer holds several batches at once: a slot it holds is not finished)" : "");
            seen[b->number] = 1;
            fixture_check_batch(ds, b, idx, b->number * bs);
            if (holding == hold) {
                loader_release(L, held[0]);
                memmove(held, held + 1, --holding * sizeof held[0]);
            }
            held[holding++] = b;
            got++;
        }
        while (holding > 0)
            loader_release(L, held[--holding]);
        CHECK_OK(rc);
        CHECK_MSG(got == nb, "epoch %llu: %llu batches delivered, expected %llu", (unsigned long long)epoch,
                  (unsigned long long)got, (unsigned long long)nb);
        free(seen);
        free(idx);
    }
    loader_close(L);
    dataset_close(ds);
}

static void order_one_worker(void) { grade_epochs(1, 0, 300, 8, 2, 1); }
static void order_many_workers(void) { grade_epochs(4, 0, 600, 7, 2, 1); }
static void caller_thread(void) { grade_epochs(0, 0, 200, 9, 2, 1); }
/* The trainer holds three batches at once: a held slot is not finished. */
static void out_of_order(void) { grade_epochs(3, 1, 500, 8, 1, 3); }
/* Batch 0 blocks until twice the ring's size of later batches were delivered
 * (3 workers, prefetch 2: 6 slots): only a real out-of-order pick gets past
 * the first batch, and only a claim into any free slot gets past the fifth
 * (see fixture_check_overtaking_by). */
static void out_of_order_overtakes(void) { fixture_check_overtaking_by(3, 12); }

/* A slow trainer, so the workers run into the ring's bound. Out of order the
 * bound is the same: at most `slots` batches claimed and not yet released. */
static void grade_memory_bound(int out_of_order)
{
    dataset_t *ds = fixture_dataset(300, 24, 24);
    struct fixture_counting c = {0};
    struct loader_options opt = fixture_options(3, 5, fixture_bound_transform);
    opt.out_of_order = out_of_order;
    opt.allocator = (struct loader_allocator){fixture_count_alloc, fixture_count_free, &c};
    fixture_slots = 3 * opt.prefetch;
    loader_t *L;
    CHECK_OK(loader_open(ds, &opt, &L));
    uint64_t *idx = fixture_shuffled(300, 1);
    struct loader_epoch e = {.epoch = 0, .indices = index_stream_of_array(&(struct index_array){idx, 300}), .batch_size = 5};
    CHECK_OK(loader_start_epoch(L, &e));
    struct loader_batch *b;
    int rc;
    while ((rc = loader_next(L, &b)) == 1) {
        clock_sleep_ns(50000); /* a slow trainer: the workers must wait for free slots */
        atomic_fetch_add(&fixture_released, 1);
        loader_release(L, b);
    }
    CHECK_OK(rc);
    CHECK_MSG(atomic_load(&fixture_violations) == 0,
              "%d samples were collated into a batch more than %u batches ahead of the trainer (the ring's size)",
              atomic_load(&fixture_violations), fixture_slots);
    CHECK_EQ(atomic_load(&c.allocs), fixture_slots);
    loader_close(L);
    CHECK_EQ(atomic_load(&c.live), 0);
    free(idx);
    dataset_close(ds);
}

static void memory_bound(void) { grade_memory_bound(0); }
static void memory_bound_out_of_order(void) { grade_memory_bound(1); }

/* With the trainer taking nothing, the workers fill the whole ring: every
 * slot ends READY (the loader counts them from the slots' states), and its
 * count of busy slots (loader_stats' max_busy_slots, kept by slot_set()) must
 * say all of them. The wait ends as soon as the ring cannot change any more
 * without the trainer: every worker found nothing to claim and none is
 * filling (loader_stats' idle_workers and filling_slots, which the loader
 * keeps outside the exercise regions), so a ring that stops short, or a
 * claim that fails, is reported at once; the deadline only turns workers
 * that never settle into a failure. Then every batch is taken: each from a
 * slot of the ring, and every slot must have held one. Two epochs: the busy
 * count carries over. */
static void grade_ring_fills(int out_of_order)
{
    const char *mode = out_of_order ? "out of order" : "in order";
    const uint64_t n = 200, bs = 4, nb = n / bs;
    const uint32_t workers = 3;
    dataset_t *ds = fixture_dataset(n, 24, 24);
    struct loader_options opt = fixture_options(workers, (uint32_t)bs, NULL);
    opt.out_of_order = out_of_order;
    loader_t *L;
    CHECK_OK(loader_open(ds, &opt, &L));
    uint64_t *idx = fixture_shuffled(n, 5);
    for (uint64_t epoch = 0; epoch < 2; epoch++) {
        struct loader_epoch e = {.epoch = epoch, .indices = index_stream_of_array(&(struct index_array){idx, n}),
                                 .batch_size = (uint32_t)bs};
        CHECK_OK(loader_start_epoch(L, &e));
        struct loader_stats st;
        uint64_t deadline = clock_now_ns() + 10000000000ull;
        int settled;
        for (;;) {
            loader_stats(L, &st);
            settled = st.idle_workers == workers && st.filling_slots == 0;
            if (st.ready_slots == st.slots || settled || clock_now_ns() >= deadline)
                break;
            clock_sleep_ns(1000000);
        }
        CHECK_MSG(st.ready_slots == st.slots, "%s, epoch %llu: with the trainer taking nothing, the workers filled "
                  "%u of the ring's %u slots %s: a free slot is never claimed, or a claim failed", mode,
                  (unsigned long long)epoch, st.ready_slots, st.slots,
                  settled ? "and then found nothing more to claim" : "and were still busy 10 s later");
        CHECK_MSG(st.max_busy_slots == st.slots, "%s, epoch %llu: all %u slots of the ring are READY, but the loader "
                  "counted at most %u busy at once: a slot's state changed without slot_set(), which keeps that "
                  "count", mode, (unsigned long long)epoch, st.slots, st.max_busy_slots);
        uint8_t used[64] = {0};
        CHECK(st.slots <= sizeof used);
        struct loader_batch *b;
        uint64_t got = 0;
        int rc;
        while ((rc = loader_next(L, &b)) == 1) {
            CHECK_MSG(b->slot < st.slots, "%s, epoch %llu: batch %llu came from slot %u, past the ring's %u slots", mode,
                      (unsigned long long)epoch, (unsigned long long)b->number, b->slot, st.slots);
            used[b->slot] = 1;
            fixture_check_batch(ds, b, idx, b->number * bs);
            loader_release(L, b);
            got++;
        }
        CHECK_OK(rc);
        CHECK_EQ_U64(got, nb);
        for (uint32_t s = 0; s < st.slots; s++)
            CHECK_MSG(used[s], "%s, epoch %llu: slot %u of the ring's %u never held a batch", mode,
                      (unsigned long long)epoch, s, st.slots);
    }
    loader_close(L);
    free(idx);
    dataset_close(ds);
}

static void ring_fills_in_order(void) { grade_ring_fills(0); }
static void ring_fills_out_of_order(void) { grade_ring_fills(1); }

static int fail_on_77(void *user, const struct loader_sample *s, void *data, uint64_t bytes)
{
    if (s->index == 77)
        return err_set(ERR_FORMAT, "sample 77 is corrupt");
    return fixture_delay(user, s, data, bytes);
}

/* Sample 77 fails. In order, its error must come after batches 0 to 6; out
 * of order, after any batches, but it must come. */
static void grade_error_at_its_batch(int out_of_order)
{
    dataset_t *ds = fixture_dataset(200, 24, 24);
    struct loader_options opt = fixture_options(3, 10, fail_on_77);
    opt.out_of_order = out_of_order;
    loader_t *L;
    CHECK_OK(loader_open(ds, &opt, &L));
    uint64_t idx[200];
    for (uint64_t i = 0; i < 200; i++)
        idx[i] = i; /* sample 77 is in batch 7 */
    struct loader_epoch e = {.epoch = 0, .indices = index_stream_of_array(&(struct index_array){idx, 200}), .batch_size = 10};
    CHECK_OK(loader_start_epoch(L, &e));
    uint64_t got;
    int rc = fixture_drain(L, &got);
    CHECK_ERR(rc, ERR_FORMAT, "sample 77 is corrupt");
    CHECK_CONTAINS(err_msg(), "batch 7");
    CHECK_MSG(out_of_order || got == 7, "expected batches 0 to 6 before the error, got %llu batches",
              (unsigned long long)got);
    loader_close(L);
    dataset_close(ds);
}

static void error_at_its_batch(void) { grade_error_at_its_batch(0); }
static void error_out_of_order(void) { grade_error_at_its_batch(1); }

static void shutdown_and_restart(void)
{
    dataset_t *ds = fixture_dataset(400, 24, 24);
    struct loader_options opt = fixture_options(4, 8, fixture_delay);
    loader_t *L;
    CHECK_OK(loader_open(ds, &opt, &L));
    uint64_t *idx = fixture_shuffled(400, 3);
    struct loader_epoch e = {.epoch = 0, .indices = index_stream_of_array(&(struct index_array){idx, 400}), .batch_size = 8};
    CHECK_OK(loader_start_epoch(L, &e));
    struct loader_batch *held = grade_next(L), *b = grade_next(L);
    loader_release(L, b);
    loader_stop(L); /* the trainer breaks out of its loop holding batch 0 */
    fixture_check_batch(ds, held, idx, 0);
    loader_release(L, held);
    e.epoch = 1;
    CHECK_OK(loader_start_epoch(L, &e));
    uint64_t got;
    CHECK_OK(fixture_drain(L, &got));
    CHECK_EQ_U64(got, 50);
    CHECK_OK(loader_start_epoch(L, &e)); /* close with work in flight */
    grade_next(L);
    loader_close(L);
    free(idx);
    dataset_close(ds);
}

static const struct grade_test tests[] = {
    {"order-one-worker", 10, 10, order_one_worker},
    {"order-many-workers", 20, 10, order_many_workers},
    {"caller-thread", 10, 10, caller_thread},
    {"out-of-order", 10, 10, out_of_order},
    {"out-of-order-overtakes", 10, 10, out_of_order_overtakes},
    {"memory-bound", 20, 10, memory_bound},
    {"memory-bound-out-of-order", 10, 10, memory_bound_out_of_order},
    {"ring-fills-every-slot", 5, 30, ring_fills_in_order},
    {"ring-fills-every-slot-out-of-order", 10, 30, ring_fills_out_of_order},
    {"error-at-its-batch", 10, 10, error_at_its_batch},
    {"error-out-of-order", 10, 10, error_out_of_order},
    {"shutdown-and-restart", 20, 10, shutdown_and_restart},
};

int main(int argc, char **argv)
{
    fixture_timeout_s = GRADE_LOADER_TIMEOUT_S;
    return GRADE_MAIN(argc, argv, tests);
}
