/* grade: lab 4's grader (`make lab-4`). It drives the prefetcher built from
 * the learner's labs/04-transfer/prefetch.c on the simulated device, whose
 * use-before-ready detector turns every ordering mistake into a failed test
 * with the reason (which buffer, which copy, which streams, which batch). It
 * checks that every batch reaches the device intact and in order with one,
 * two and three buffers; that with two the copy of batch k+1 really runs
 * while batch k computes; that a loader slot goes back only after its copy;
 * PyTorch's staging path; errors and epochs. Each test runs in its own
 * process with a time limit, so a deadlock is a failed test.
 */
#include "grader.h"

#include "prefetch_fixture.h"

#include <stdio.h>

static const struct pf_config grade_base = {.gbps = 20, .latency_us = 5, .workers = 2, .prefetch = 2, .depth = 2,
                                            .batch = 16, .records = 400, .record_bytes = 240};

/* Opens a rig for `c`, runs `epochs` epochs with the content check, closes it. */
static void grade_epochs(const struct pf_config *c, uint64_t epochs, double compute_s, const char *what)
{
    struct pf_rig r;
    pf_open(&r, c);
    for (uint64_t e = 0; e < epochs; e++) {
        struct pf_result res;
        pf_epoch(&r, e, compute_s, 1, &res);
        char label[128];
        snprintf(label, sizeof label, "%s, epoch %llu", what, (unsigned long long)e);
        pf_expect_good(&r, &res, label);
    }
    pf_close(&r);
}

static void double_buffered(void)
{
    grade_epochs(&grade_base, 3, 5e-5, "2 buffers, 2 workers");
    struct pf_config c = grade_base;
    c.workers = 0;
    grade_epochs(&c, 2, 5e-5, "2 buffers, batches made in the trainer's thread");
}

static void one_buffer(void)
{
    struct pf_config c = grade_base;
    c.depth = 1;
    grade_epochs(&c, 2, 5e-5, "1 buffer");
}

static void three_buffers(void)
{
    struct pf_config c = grade_base;
    c.depth = 3;
    c.workers = 1;
    c.prefetch = 4;
    grade_epochs(&c, 2, 5e-5, "3 buffers");
}

/* Epochs back to back, as a training loop runs them: the next epoch's first
 * copies are queued while the last kernels of the one before may still read
 * their buffers, with no device synchronization in between. The detector
 * sees a copy that is not ordered after those kernels whatever the timing:
 * a buffer's free event holds across epochs. */
static void grade_back_to_back(const struct pf_config *c, uint64_t epochs, const char *what)
{
    struct pf_rig r;
    pf_open(&r, c);
    uint64_t nb = (c->records + c->batch - 1) / c->batch;
    struct pf_check *checks = calloc(epochs * nb, sizeof *checks);
    CHECK(checks != NULL);
    struct pf_result res[8];
    CHECK(epochs <= sizeof res / sizeof res[0]);
    for (uint64_t e = 0; e < epochs; e++)
        pf_epoch_queued(&r, e, 2e-4, 1, checks + e * nb, &res[e]);
    pf_synchronize(&r, &res[epochs - 1]);
    for (uint64_t e = 0; e < epochs; e++) {
        char label[160];
        snprintf(label, sizeof label, "%s, epoch %llu of %llu run back to back (no device synchronization between "
                 "epochs)", what, (unsigned long long)e, (unsigned long long)epochs);
        pf_expect_good(&r, &res[e], label);
    }
    free(checks);
    pf_close(&r);
}

static void epochs_back_to_back(void)
{
    grade_back_to_back(&grade_base, 3, "2 buffers");
    struct pf_config c = grade_base;
    c.depth = 3;
    c.workers = 1;
    c.prefetch = 4;
    grade_back_to_back(&c, 3, "3 buffers");
}

/* More device buffers than the loader has slots: the ring runs out before
 * the buffers do, and a slot must go back (once its copy is done) before the
 * next batch can be collated, from the first batches of the epoch on. */
static void deeper_than_the_ring(void)
{
    struct pf_config c = grade_base;
    c.workers = 0; /* a ring of prefetch = 2 slots */
    for (uint32_t depth = 3; depth <= 4; depth++) {
        c.depth = depth;
        char what[96];
        snprintf(what, sizeof what, "%u buffers, a loader ring of 2 slots", depth);
        grade_epochs(&c, 2, 5e-5, what);
    }
    c.workers = 1;
    c.depth = 4;
    grade_epochs(&c, 2, 5e-5, "4 buffers, 1 worker, a loader ring of 2 slots");
}

/* Compute held behind a gate: batch 1's copy must complete meanwhile. */
static void copy_overlaps_compute(void)
{
    struct pf_config c = grade_base;
    c.workers = 0;
    struct pf_rig r;
    pf_open(&r, &c);
    int overlapped = pf_copy_overlaps_compute(&r, 5);
    CHECK_MSG(overlapped, "with 2 buffers the copy of batch 1 must finish while the compute on batch 0 is still "
              "running; it waited for it (5 s): copy and compute take turns, nothing is hidden");
    pf_close(&r);
    /* and the other way round: batch 0's compute starts when batch 0's copy is done, not batch 1's */
    c.gbps = 0.002;
    pf_open(&r, &c);
    double lead = pf_compute_lead(&r), copy = (double)c.batch * c.record_bytes / (c.gbps * 1e9);
    CHECK_MSG(lead > 0.5 * copy, "the compute on batch 0 began %.3f ms before batch 1's copy ended; with 2 buffers "
              "it must begin when batch 0's own copy ends, a whole copy (%.3f ms) earlier", lead * 1e3, copy * 1e3);
    pf_close(&r);
}

/* Copies in flight for milliseconds, no worker, a ring of two slots: a slot
 * given back before its copy completed is refilled by the very next
 * loader_next() while the copy still reads it. The detector fails the epoch. */
static void slot_back_after_copy(void)
{
    struct pf_config c = grade_base;
    c.gbps = 0.002; /* 3.75 KiB batches: about 2 ms each */
    c.workers = 0;
    c.records = 120;
    struct pf_rig r;
    pf_open(&r, &c);
    struct pf_result res;
    pf_epoch(&r, 0, 1e-3, 1, &res);
    pf_expect_good(&r, &res, "slow copies, a ring of two slots");
    pf_close(&r);
    c.workers = 2; /* and with eager workers, refilling every slot they get back at once */
    c.records = 80;
    pf_open(&r, &c);
    pf_epoch(&r, 0, 1e-3, 1, &res);
    pf_expect_good(&r, &res, "slow copies, 2 workers");
    pf_close(&r);
}

static void pytorch_staging(void)
{
    struct pf_config c = grade_base;
    c.pageable_ring = 1;
    c.pin_copy = 1;
    grade_epochs(&c, 2, 5e-5, "pageable ring staged through pinned memory (pin_memory=True)");
    c.pin_copy = 0;
    grade_epochs(&c, 1, 5e-5, "pageable ring, copied as it is (pin_memory=False)");
}

/* A sample that fails in batch 5 of epoch 0: the batches before it arrive,
 * then its error; the next epoch runs whole. */
static int grade_fail_one(void *user, const struct loader_sample *s, void *data, uint64_t bytes)
{
    (void)user, (void)data, (void)bytes;
    return s->epoch == 0 && s->batch == 5 && s->position == 3 ? err_set(ERR_FORMAT, "a corrupt record") : 0;
}

static void errors_and_epochs(void)
{
    struct pf_rig r;
    struct pf_config c = grade_base;
    pf_open(&r, &c);
    /* pf_open's loader has no transform: reopen it with the failing one behind the same prefetcher settings */
    prefetch_close(r.pf);
    loader_close(r.loader);
    struct loader_options lo = fixture_options(c.workers, c.batch, grade_fail_one);
    lo.prefetch = c.prefetch;
    lo.allocator = pinned_pool_loader_allocator(r.pool);
    CHECK_OK(loader_open(r.ds, &lo, &r.loader));
    struct prefetch_options po = {.depth = c.depth, .max_bytes = (uint64_t)c.batch * c.record_bytes,
                                  .max_batch = c.batch, .compute = r.compute};
    CHECK_OK(prefetch_open(r.dev, r.loader, &po, &r.pf));
    struct pf_result res;
    pf_epoch(&r, 0, 5e-5, 1, &res);
    CHECK_MSG(res.rc == ERR_FORMAT, "epoch 0: expected the failing sample's ERR_FORMAT after batches 0..4, got %s "
              "after %llu batches: %s", err_name(res.rc), (unsigned long long)res.batches, res.msg);
    CHECK_MSG(res.batches == 5, "epoch 0: %llu batches before the error, expected 5", (unsigned long long)res.batches);
    CHECK_CONTAINS(res.msg, "a corrupt record");
    pf_epoch(&r, 1, 5e-5, 1, &res);
    pf_expect_good(&r, &res, "epoch 1, after the failed one");
    pf_close(&r);
}

static const struct grade_test tests[] = {
    {"double-buffered", 20, 30, double_buffered},
    {"one-buffer", 10, 30, one_buffer},
    {"three-buffers", 10, 30, three_buffers},
    {"epochs-back-to-back", 10, 30, epochs_back_to_back},
    {"deeper-than-the-ring", 10, 30, deeper_than_the_ring},
    {"copy-overlaps-compute", 20, 30, copy_overlaps_compute},
    {"slot-back-after-copy", 20, 30, slot_back_after_copy},
    {"pytorch-staging", 10, 30, pytorch_staging},
    {"errors-and-epochs", 10, 30, errors_and_epochs},
};

int main(int argc, char **argv) { return GRADE_MAIN(argc, argv, tests); }
