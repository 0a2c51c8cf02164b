/* prefetch_fixture: what tests/unit/test_prefetch.c and the lab 4 grader
 * (labs/04-transfer/grade.c) both need to drive lib/transfer/prefetch.h: a
 * simulated device on a chosen link, a loader over synthetic records whose
 * ring is pinned (or not), a trainer that runs one kernel per batch and checks
 * on the device that the batch holds the right records and labels, and a gate
 * that holds the compute stream so a test can see what the copies do
 * meanwhile. Header-only (static functions), like loader_fixture.h.
 *
 * Every check waits for an event, never for a clock: the gate's watchdog
 * only turns a wrong schedule's deadlock into a failed test.
 */
#ifndef DDP_PREFETCH_FIXTURE_H
#define DDP_PREFETCH_FIXTURE_H

#include "check.h"
#include "loader_fixture.h"
#include "transfer/prefetch.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <unistd.h>

struct pf_config {
    double gbps, latency_us;  /* the simulated link */
    uint32_t workers, prefetch; /* the loader */
    uint32_t depth;           /* the prefetcher */
    uint32_t batch;
    uint64_t records, record_bytes;
    int pageable_ring;        /* the loader's ring from malloc instead of the pinned pool */
    int pin_copy;             /* PyTorch's way: stage each batch through the pool */
};

struct pf_rig {
    struct pf_config c;
    device_t *dev;
    pinned_pool_t *pool;
    dataset_t *ds;
    loader_t *loader;
    device_stream_t *compute;
    prefetch_t *pf;
    uint64_t *order; /* the epoch's indices */
};

static inline void pf_open(struct pf_rig *r, const struct pf_config *c)
{
    memset(r, 0, sizeof *r);
    r->c = *c;
    struct device_config dc;
    device_config_default(&dc);
    dc.backend = "sim";
    CHECK_OK(link_profile_set(&dc.link, c->gbps, c->latency_us));
    CHECK_OK(device_open(&dc, &r->dev));
    CHECK_OK(pinned_pool_create(r->dev, 64u << 20, DEVICE_HOST_PINNED, &r->pool));
    r->ds = fixture_dataset(c->records, c->record_bytes, c->record_bytes);
    struct loader_options lo = fixture_options(c->workers, c->batch, NULL);
    lo.prefetch = c->prefetch;
    if (!c->pageable_ring)
        lo.allocator = pinned_pool_loader_allocator(r->pool);
    CHECK_OK(loader_open(r->ds, &lo, &r->loader));
    CHECK_OK(device_stream_create(r->dev, "compute", &r->compute));
    struct prefetch_options po = {.depth = c->depth, .max_bytes = (uint64_t)c->batch * c->record_bytes,
                                  .max_batch = c->batch, .compute = r->compute,
                                  .pin_pool = c->pin_copy ? r->pool : NULL};
    CHECK_OK(prefetch_open(r->dev, r->loader, &po, &r->pf));
    r->order = fixture_shuffled(c->records, 3);
}

static inline void pf_close(struct pf_rig *r)
{
    prefetch_close(r->pf);
    loader_close(r->loader);
    device_stream_destroy(r->compute);
    pinned_pool_destroy(r->pool);
    dataset_close(r->ds);
    device_close(r->dev);
    free(r->order);
}

/* What the trainer's kernel on batch `number` checks, on the compute engine. */
struct pf_check {
    struct pf_rig *rig;
    uint64_t number, epoch;
    uint32_t count;
    uint64_t stride;
    const uint8_t *data;
    const int64_t *labels;
};

static _Atomic uint64_t pf_bad; /* batches whose device copy was wrong */
static char pf_bad_msg[512];

static void pf_check_fn(void *arg)
{
    const struct pf_check *k = arg;
    const struct pf_config *c = &k->rig->c;
    uint8_t *want = malloc(c->record_bytes);
    for (uint32_t i = 0; want && i < k->count; i++) {
        struct dataset_record rec;
        uint64_t index = k->rig->order[k->number * c->batch + i];
        int rc = dataset_read(k->rig->ds, index, want, c->record_bytes, &rec);
        const char *what = rc ? "unreadable" : memcmp(k->data + i * k->stride, want, c->record_bytes) ? "data"
                         : k->labels[i] != rec.label                                               ? "label"
                                                                                                  : NULL;
        if (what) {
            if (atomic_fetch_add(&pf_bad, 1) == 0)
                snprintf(pf_bad_msg, sizeof pf_bad_msg, "epoch %llu, batch %llu, row %u (record %llu): the device "
                         "holds the wrong %s", (unsigned long long)k->epoch, (unsigned long long)k->number, i,
                         (unsigned long long)index, what);
            break;
        }
    }
    free(want);
}

struct pf_result {
    int rc;                 /* prefetch_next's last result: 0 at the end of a good epoch */
    char msg[1024];         /* its message */
    uint64_t batches;       /* handed out, in order */
    int out_of_order;
};

/* One epoch: every batch gets a kernel of `compute_s` (modelled) that reads
 * its data and labels (and checks them when `check`), then is released.
 * Returns as soon as the last kernel is queued, without synchronizing the
 * device: the next epoch may begin while the kernels still read (as a
 * training loop's does). The kernels read `checks` (one per batch), which must
 * outlive them. */
static inline void pf_epoch_queued(struct pf_rig *r, uint64_t epoch, double compute_s, int check,
                                   struct pf_check *checks, struct pf_result *out)
{
    memset(out, 0, sizeof *out);
    uint64_t nb = (r->c.records + r->c.batch - 1) / r->c.batch;
    struct loader_epoch e = {.epoch = epoch, .indices = index_stream_of_array(&(struct index_array){r->order, r->c.records}),
                             .batch_size = r->c.batch};
    CHECK_OK(loader_start_epoch(r->loader, &e));
    struct prefetch_batch *b;
    int rc;
    while ((rc = prefetch_next(r->pf, &b)) == 1) {
        if (b->number != out->batches || b->epoch != epoch || b->number >= nb)
            out->out_of_order = 1;
        struct pf_check *k = &checks[b->number < nb ? b->number : 0];
        *k = (struct pf_check){r, b->number, epoch, b->count, b->stride, b->data, b->labels};
        struct device_span in[2] = {{b->data, b->bytes}, {b->labels, b->count * sizeof(int64_t)}};
        struct device_kernel kern = {.name = "train step", .batch = (int64_t)b->number, .seconds = compute_s,
                                     .fn = check ? pf_check_fn : NULL, .arg = k, .reads = in, .nreads = 2};
        rc = device_launch(r->compute, &kern);
        int rr = prefetch_release(r->pf, b);
        rc = rc ? rc : rr;
        if (rc)
            break;
        out->batches++;
    }
    out->rc = rc;
    snprintf(out->msg, sizeof out->msg, "%s", rc ? err_msg() : "");
}

/* Waits for every kernel queued so far; its error, if any, goes to `out`
 * unless the epoch had failed already. */
static inline void pf_synchronize(struct pf_rig *r, struct pf_result *out)
{
    int rs = device_synchronize(r->dev);
    if (out->rc == 0 && rs) {
        out->rc = rs;
        snprintf(out->msg, sizeof out->msg, "%s", err_msg());
    }
}

/* One epoch, then the device synchronized. */
static inline void pf_epoch(struct pf_rig *r, uint64_t epoch, double compute_s, int check, struct pf_result *out)
{
    uint64_t nb = (r->c.records + r->c.batch - 1) / r->c.batch;
    struct pf_check *checks = calloc(nb, sizeof *checks);
    CHECK(checks != NULL);
    pf_epoch_queued(r, epoch, compute_s, check, checks, out);
    pf_synchronize(r, out); /* the kernels read checks[] */
    free(checks);
}

/* Fails the test unless the epoch went through whole, in order, and (when
 * checked) every batch arrived intact. */
static inline void pf_expect_good(const struct pf_rig *r, const struct pf_result *res, const char *what)
{
    uint64_t nb = (r->c.records + r->c.batch - 1) / r->c.batch;
    CHECK_MSG(res->rc == 0, "%s: after %llu batches: %s", what, (unsigned long long)res->batches, res->msg);
    CHECK_MSG(!res->out_of_order, "%s: batches came out of order", what);
    CHECK_MSG(res->batches == nb, "%s: %llu batches handed out, the epoch has %llu", what,
              (unsigned long long)res->batches, (unsigned long long)nb);
    CHECK_MSG(atomic_load(&pf_bad) == 0, "%s: %s", what, pf_bad_msg);
}

/* ---- the gate: hold the compute stream, see what the copies do meanwhile -------- */

static atomic_int pf_gate_open;
static void pf_gate_fn(void *arg)
{
    (void)arg;
    while (!atomic_load(&pf_gate_open))
        usleep(200);
}

static atomic_int pf_watchdog_fired, pf_watchdog_done;
static void *pf_watchdog(void *arg)
{
    unsigned seconds = *(unsigned *)arg;
    for (unsigned i = 0; i < seconds * 100 && !atomic_load(&pf_watchdog_done); i++)
        usleep(10000);
    if (!atomic_load(&pf_watchdog_done)) {
        atomic_store(&pf_watchdog_fired, 1);
        atomic_store(&pf_gate_open, 1);
    }
    return NULL;
}

/* With the compute stream held behind a gate from the start, takes batch 0,
 * queues its (held) kernel, releases it, takes batch 1 and waits for batch
 * 1's copy: with double buffering it completes while batch 0's compute is
 * still held. A schedule that makes copy k+1 wait for compute k deadlocks
 * there; after `seconds` the watchdog opens the gate and this returns 0.
 * Returns 1 when the copy completed under the gate. */
static inline int pf_copy_overlaps_compute(struct pf_rig *r, unsigned seconds)
{
    atomic_store(&pf_gate_open, 0);
    atomic_store(&pf_watchdog_fired, 0);
    atomic_store(&pf_watchdog_done, 0);
    struct device_kernel gate = {.name = "gate", .batch = -1, .fn = pf_gate_fn};
    CHECK_OK(device_launch(r->compute, &gate));
    pthread_t dog;
    CHECK(pthread_create(&dog, NULL, pf_watchdog, &seconds) == 0);
    struct loader_epoch e = {.epoch = 0, .indices = index_stream_of_array(&(struct index_array){r->order, r->c.records}),
                             .batch_size = r->c.batch};
    CHECK_OK(loader_start_epoch(r->loader, &e));
    struct prefetch_batch *b;
    int overlapped = 0, rc = prefetch_next(r->pf, &b);
    if (rc == 1) {
        struct device_span in = {b->data, b->bytes};
        struct device_kernel k = {.name = "train step", .batch = 0, .seconds = 1e-4, .reads = &in, .nreads = 1};
        rc = device_launch(r->compute, &k);
        if (rc == 0)
            rc = prefetch_release(r->pf, b);
        if (rc == 0)
            rc = prefetch_next(r->pf, &b);
        if (rc == 1) {
            rc = device_event_synchronize(b->ready);
            overlapped = rc == 0 && !atomic_load(&pf_watchdog_fired);
            prefetch_release(r->pf, b);
        }
    }
    CHECK_MSG(rc >= 0, "%s", err_msg());
    atomic_store(&pf_watchdog_done, 1);
    atomic_store(&pf_gate_open, 1);
    pthread_join(dog, NULL);
    while (prefetch_next(r->pf, &b) == 1) /* finish the epoch */
        prefetch_release(r->pf, b);
    device_synchronize(r->dev);
    return overlapped;
}

/* The other half of overlap: the compute on batch 0 starts when batch 0's
 * copy is done, not batch 1's. The copy engine is held behind a gate (a copy
 * on another stream that waits for it, at the head of the engine's FIFO) while
 * batches 0 and 1 are queued and batch 0's kernel is launched; then it is let
 * go, and the two copies run back to back in device time. Returns how long
 * before the end of batch 1's copy the compute on batch 0 began (seconds of
 * device time): one copy's duration when right, about 0 when the compute
 * waited for the wrong batch. Needs depth 2 and a slow link. */
static inline double pf_compute_lead(struct pf_rig *r)
{
    device_stream_t *gs, *blocker;
    device_event_t *opened, *mark;
    void *hb, *db;
    CHECK_OK(device_stream_create(r->dev, "gate", &gs));
    CHECK_OK(device_stream_create(r->dev, "blocker", &blocker));
    CHECK_OK(device_event_create(r->dev, &opened));
    CHECK_OK(device_event_create(r->dev, &mark));
    CHECK_OK(device_host_alloc(r->dev, DEVICE_HOST_PINNED, 64, "blocker source", &hb));
    CHECK_OK(device_malloc(r->dev, 64, "blocker destination", &db));
    atomic_store(&pf_gate_open, 0);
    struct device_kernel gate = {.name = "gate", .batch = -1, .fn = pf_gate_fn};
    CHECK_OK(device_launch(gs, &gate));
    CHECK_OK(device_event_record(opened, gs));
    CHECK_OK(device_stream_wait_event(blocker, opened));
    CHECK_OK(device_copy_async(blocker, db, hb, 64, DEVICE_H2D, -1)); /* the H2D engine's head, held */
    struct loader_epoch e = {.epoch = 0, .indices = index_stream_of_array(&(struct index_array){r->order, r->c.records}),
                             .batch_size = r->c.batch};
    CHECK_OK(loader_start_epoch(r->loader, &e));
    struct prefetch_batch *b;
    double lead = -1;
    int rc = prefetch_next(r->pf, &b);
    if (rc == 1) {
        struct device_span in = {b->data, b->bytes};
        struct device_kernel k = {.name = "train step", .batch = 0, .seconds = 1e-4, .reads = &in, .nreads = 1};
        rc = device_event_record(mark, r->compute); /* where the compute on batch 0 begins */
        if (rc == 0)
            rc = device_launch(r->compute, &k);
        if (rc == 0)
            rc = prefetch_release(r->pf, b);
    }
    atomic_store(&pf_gate_open, 1);
    if (rc == 0)
        rc = prefetch_next(r->pf, &b);
    if (rc == 1) {
        rc = device_event_synchronize(b->ready); /* batch 1's copy, done */
        if (rc == 0)
            rc = device_event_elapsed(mark, b->ready, &lead);
        prefetch_release(r->pf, b);
    }
    CHECK_MSG(rc >= 0, "%s", err_msg());
    while (prefetch_next(r->pf, &b) == 1) /* finish the epoch */
        prefetch_release(r->pf, b);
    device_synchronize(r->dev);
    device_free(r->dev, db);
    device_host_free(r->dev, hb);
    device_event_destroy(opened);
    device_event_destroy(mark);
    device_stream_destroy(gs);
    device_stream_destroy(blocker);
    return lead;
}

#endif
