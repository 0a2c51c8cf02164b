/* test_device: the device interface on the simulated device (lib/transfer/device.h,
 * sim/device_sim.c) and its use-before-ready detector.
 *
 * Bytes round-trip exactly from every kind of host memory and every size
 * (pageable ones through the bounce buffer's chunks); device time is the
 * model's exactly (α + S/B per copy, FIFO per engine, the two directions at
 * once); pageable copies are synchronous; events order streams. The
 * detector: a kernel reading a copy's buffer without an event, a copy
 * overwriting a buffer a kernel still reads, and a host write into a pinned
 * buffer an in-flight copy reads are each caught and named (the last by the
 * trap and by the bytes check, which also sees read(2)'s writes and not a
 * byte rewritten as it was), and the same programs with the ordering put
 * right are not. No assertion is about wall
 * time: in-flight is made certain with a gate kernel the test opens.
 * Virtual time (the vtime_ tests): a gate held for real lasts its declared
 * seconds; a query answers by the modelled end against the host's modelled
 * clock, to the nanosecond; a pageable copy's host memcpy is modelled
 * exactly; a stream-ordered round trip through one pinned buffer is no
 * hazard, an unordered one is caught.
 *
 * DEVICE_TEST_BACKEND=cuda runs the backend-neutral tests on a GPU (make
 * test-gpu); the detector's tests then skip, saying why.
 */
#include "check.h"
#include "backend_table.h"
#include "base/error.h"
#include "base/vclock.h"
#include "transfer/device.h"
#include "transfer/link.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *test_backend(void)
{
    const char *b = getenv("DEVICE_TEST_BACKEND");
    return b && *b ? b : "sim";
}

static int test_is_sim(void) { return strcmp(test_backend(), "sim") == 0; }

/* A device on a link of `gbps` GB/s and `latency_us`, catching a host write
 * into an in-flight copy's source by `check`. */
static device_t *test_device_checked(double gbps, double latency_us, enum device_write_check check)
{
    struct device_config cfg;
    device_config_default(&cfg);
    cfg.backend = test_backend();
    cfg.write_check = check;
    CHECK_OK(link_profile_set(&cfg.link, gbps, latency_us));
    device_t *dev;
    CHECK_OK(device_open(&cfg, &dev));
    return dev;
}

/* ... by the default check, the trap. */
static device_t *test_device(double gbps, double latency_us)
{
    return test_device_checked(gbps, latency_us, DEVICE_WRITE_CHECK_TRAP);
}

static void test_fill(uint8_t *p, uint64_t n, uint64_t seed)
{
    for (uint64_t i = 0; i < n; i++)
        p[i] = (uint8_t)((i * 2654435761u + seed * 97) >> 7);
}

/* Host memory of `kind`: allocated by the device, or malloc + register. */
static void *test_host(device_t *dev, enum device_host_kind kind, uint64_t bytes)
{
    void *p;
    if (kind == DEVICE_HOST_REGISTERED) {
        CHECK(posix_memalign(&p, 4096, bytes) == 0);
        CHECK_OK(device_host_register(dev, p, bytes, "registered test buffer"));
    } else {
        CHECK_OK(device_host_alloc(dev, kind, bytes, "test buffer", &p));
    }
    return p;
}

static void test_host_free(device_t *dev, enum device_host_kind kind, void *p)
{
    if (kind == DEVICE_HOST_REGISTERED) {
        CHECK_OK(device_host_unregister(dev, p));
        free(p);
    } else {
        device_host_free(dev, p);
    }
}

TEST(device_round_trip_every_kind_and_size)
{
    device_t *dev = test_device(50, 1);
    /* one byte, a page and a bit, exactly one bounce chunk, two and a half chunks and 3 bytes */
    const uint64_t sizes[] = {1, 4099, 1u << 20, (5u << 19) + 3};
    device_stream_t *s;
    CHECK_OK(device_stream_create(dev, "copy", &s));
    for (int kind = 0; kind < DEVICE_HOST_KINDS; kind++) {
        for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
            uint64_t n = sizes[k];
            uint8_t *in = test_host(dev, (enum device_host_kind)kind, n);
            uint8_t *out = test_host(dev, (enum device_host_kind)kind, n);
            void *d;
            CHECK_OK(device_malloc(dev, n, "round trip", &d));
            test_fill(in, n, k + 1);
            memset(out, 0, n);
            CHECK_OK(device_copy_async(s, d, in, n, DEVICE_H2D, -1));
            CHECK_OK(device_copy_async(s, out, d, n, DEVICE_D2H, -1));
            CHECK_OK(device_stream_synchronize(s));
            CHECK_MSG(memcmp(in, out, n) == 0, "%s memory, %llu bytes: the round trip changed the bytes",
                      device_host_kind_name((enum device_host_kind)kind), (unsigned long long)n);
            memset(out, 0, n);
            CHECK_OK(device_copy(dev, out, d, n, DEVICE_D2H)); /* the synchronous form too */
            CHECK(memcmp(in, out, n) == 0);
            device_free(dev, d);
            test_host_free(dev, (enum device_host_kind)kind, in);
            test_host_free(dev, (enum device_host_kind)kind, out);
        }
    }
    struct device_stats st;
    device_stats(dev, &st);
    CHECK_EQ_U64(st.copies[DEVICE_H2D], 4 * 4);
    CHECK_EQ_U64(st.copies[DEVICE_D2H], 4 * 4 * 2);
    CHECK_EQ_U64(st.staged_copies, 4 * 3); /* pageable: H2D, D2H and the synchronous D2H, 4 sizes */
    device_stream_destroy(s);
    device_close(dev);
}

TEST(device_host_kinds_are_known)
{
    device_t *dev = test_device(50, 1);
    for (int kind = 0; kind < DEVICE_HOST_KINDS; kind++) {
        uint8_t *p = test_host(dev, (enum device_host_kind)kind, 10000);
        CHECK_STR(device_host_kind_name(device_host_kind_of(dev, p + 10, 100)),
                  device_host_kind_name((enum device_host_kind)kind));
        test_host_free(dev, (enum device_host_kind)kind, p);
    }
    int on_stack;
    CHECK_EQ(device_host_kind_of(dev, &on_stack, sizeof on_stack), DEVICE_HOST_PAGEABLE);
    device_close(dev);
}

/* A kernel that blocks the compute engine until the test opens it: whatever
 * is queued behind it (through an event) stays in flight for certain. */
static atomic_int test_gate;
static void test_gate_fn(void *arg)
{
    (void)arg;
    while (!atomic_load(&test_gate))
        usleep(200);
}

/* Holds streams `a` and `b` (b may be NULL) behind a gate kernel until
 * test_gate is set: work queued on them meanwhile waits, whatever the host's
 * speed. Returns the gate's stream (destroy it at the end). */
static device_stream_t *test_hold(device_t *dev, device_stream_t *a, device_stream_t *b)
{
    device_stream_t *g;
    device_event_t *e;
    CHECK_OK(device_stream_create(dev, "gate", &g));
    CHECK_OK(device_event_create(dev, &e));
    atomic_store(&test_gate, 0);
    struct device_kernel gate = {.name = "gate", .batch = -1, .fn = test_gate_fn};
    CHECK_OK(device_launch(g, &gate));
    CHECK_OK(device_event_record(e, g));
    CHECK_OK(device_stream_wait_event(a, e));
    if (b)
        CHECK_OK(device_stream_wait_event(b, e));
    device_event_destroy(e);
    return g;
}

/* Device time is the model's: back-to-back copies on one engine take
 * α + S/B each, exactly, and the two directions run at once. */
TEST(device_time_is_the_model)
{
    if (!test_is_sim())
        CHECK_SKIP("device time is measured, not modelled, on %s", test_backend());
    device_t *dev = test_device(1, 20); /* 1 GB/s, 20 us: 1 MiB takes 1.07 ms */
    struct link_profile link;
    CHECK_OK(device_link(dev, &link));
    const uint64_t n = 1u << 20;
    uint8_t *h;
    void *d1, *d2;
    CHECK_OK(device_host_alloc(dev, DEVICE_HOST_PINNED, 2 * n, "pinned", (void **)&h));
    CHECK_OK(device_malloc(dev, n, "d1", &d1));
    CHECK_OK(device_malloc(dev, n, "d2", &d2));
    device_stream_t *a, *b;
    device_event_t *e0, *e1, *e2, *e3;
    CHECK_OK(device_stream_create(dev, "a", &a));
    CHECK_OK(device_stream_create(dev, "b", &b));
    CHECK_OK(device_event_create(dev, &e0));
    CHECK_OK(device_event_create(dev, &e1));
    CHECK_OK(device_event_create(dev, &e2));
    CHECK_OK(device_event_create(dev, &e3));
    /* Three H2D copies queued at once on two streams: one engine, FIFO. */
    device_stream_t *g = test_hold(dev, a, b);
    CHECK_OK(device_copy_async(a, d1, h, n, DEVICE_H2D, -1));
    CHECK_OK(device_event_record(e0, a));
    CHECK_OK(device_copy_async(b, d2, h, n, DEVICE_H2D, -1));
    CHECK_OK(device_event_record(e1, b));
    CHECK_OK(device_copy_async(a, d1, h, n, DEVICE_H2D, -1));
    CHECK_OK(device_event_record(e2, a));
    atomic_store(&test_gate, 1);
    CHECK_OK(device_synchronize(dev));
    device_stream_destroy(g);
    double t01, t12, want = link_copy_seconds(&link, n);
    CHECK_OK(device_event_elapsed(e0, e1, &t01));
    CHECK_OK(device_event_elapsed(e1, e2, &t12));
    CHECK_MSG(t01 > want * (1 - 1e-9) && t01 < want * (1 + 1e-9), "copy 2 took %.9f s of device time, the model "
              "says %.9f", t01, want);
    CHECK_MSG(t12 > want * (1 - 1e-9) && t12 < want * (1 + 1e-9), "copy 3 took %.9f s, the model says %.9f", t12,
              want);
    /* H2D and D2H at once: both engines busy together, not one after the other. */
    g = test_hold(dev, a, b);
    CHECK_OK(device_event_record(e0, a));
    CHECK_OK(device_copy_async(a, d1, h, n, DEVICE_H2D, -1));
    CHECK_OK(device_copy_async(b, h + n, d2, n, DEVICE_D2H, -1));
    CHECK_OK(device_event_record(e1, a));
    CHECK_OK(device_event_record(e3, b));
    atomic_store(&test_gate, 1);
    CHECK_OK(device_synchronize(dev));
    device_stream_destroy(g);
    double t_h2d, t_d2h;
    CHECK_OK(device_event_elapsed(e0, e1, &t_h2d));
    CHECK_OK(device_event_elapsed(e0, e3, &t_d2h));
    CHECK_MSG(t_d2h < 1.5 * want, "the D2H copy ended %.6f s after the H2D one began: the engines did not overlap "
              "(one copy takes %.6f)", t_d2h, want);
    CHECK(t_h2d < 1.5 * want);
    struct device_stats st;
    device_stats(dev, &st);
    CHECK_MSG(st.engine_busy_s[DEVICE_H2D] > 4 * want * (1 - 1e-9) && st.engine_busy_s[DEVICE_H2D] < 4 * want * (1 + 1e-9),
              "H2D engine busy %.9f s, want 4 x %.9f", st.engine_busy_s[DEVICE_H2D], want);
    device_event_destroy(e0);
    device_event_destroy(e1);
    device_event_destroy(e2);
    device_event_destroy(e3);
    device_stream_destroy(a);
    device_stream_destroy(b);
    device_free(dev, d1);
    device_free(dev, d2);
    device_host_free(dev, h);
    device_close(dev);
}

/* A pageable copy blocks: when it returns, its bytes have arrived and the
 * stream has nothing left to do. A pinned one returns at once. */
TEST(device_pageable_copies_are_synchronous)
{
    if (!test_is_sim())
        CHECK_SKIP("which copies the driver makes synchronous is its business on %s", test_backend());
    device_t *dev = test_device(0.5, 0); /* 3 MiB take 6 ms */
    const uint64_t n = 3u << 20;
    uint8_t *pageable, *pinned;
    void *d;
    CHECK_OK(device_host_alloc(dev, DEVICE_HOST_PAGEABLE, n, "pageable", (void **)&pageable));
    CHECK_OK(device_host_alloc(dev, DEVICE_HOST_PINNED, n, "pinned", (void **)&pinned));
    CHECK_OK(device_malloc(dev, n, "d", &d));
    test_fill(pageable, n, 3);
    device_stream_t *s;
    device_event_t *e;
    CHECK_OK(device_stream_create(dev, "copy", &s));
    CHECK_OK(device_event_create(dev, &e));
    CHECK_OK(device_copy_async(s, d, pageable, n, DEVICE_H2D, -1));
    CHECK_OK(device_event_record(e, s));
    CHECK_EQ(device_event_query(e), 1);
    CHECK(memcmp(d, pageable, n) == 0); /* the sim's device memory is host memory */
    CHECK_OK(device_copy_async(s, d, pinned, n, DEVICE_H2D, -1));
    CHECK_OK(device_event_record(e, s));
    CHECK_EQ(device_event_query(e), 0); /* 6 ms of modelled copy: certainly still in flight */
    CHECK_OK(device_event_synchronize(e));
    CHECK_EQ(device_event_query(e), 1);
    device_event_destroy(e);
    device_stream_destroy(s);
    device_free(dev, d);
    device_host_free(dev, pageable);
    device_host_free(dev, pinned);
    device_close(dev);
}

/* Events order two streams: a copy up on one, the copy back on the other
 * after a wait for the first's event, round trips exactly on any backend. */
TEST(device_events_order_streams)
{
    device_t *dev = test_device(50, 1);
    const uint64_t n = 3u << 20;
    uint8_t *in, *out;
    void *d;
    CHECK_OK(device_host_alloc(dev, DEVICE_HOST_PINNED, n, "in", (void **)&in));
    CHECK_OK(device_host_alloc(dev, DEVICE_HOST_PINNED, n, "out", (void **)&out));
    CHECK_OK(device_malloc(dev, n, "d", &d));
    device_stream_t *up, *down;
    device_event_t *e0, *e1, *e2;
    CHECK_OK(device_stream_create(dev, "up", &up));
    CHECK_OK(device_stream_create(dev, "down", &down));
    CHECK_OK(device_event_create(dev, &e0));
    CHECK_OK(device_event_create(dev, &e1));
    CHECK_OK(device_event_create(dev, &e2));
    for (int round = 0; round < 3; round++) {
        test_fill(in, n, (uint64_t)round + 10);
        memset(out, 0, n);
        CHECK_OK(device_event_record(e0, up));
        CHECK_OK(device_copy_async(up, d, in, n, DEVICE_H2D, round));
        CHECK_OK(device_event_record(e1, up));
        CHECK_OK(device_stream_wait_event(down, e1));
        CHECK_OK(device_copy_async(down, out, d, n, DEVICE_D2H, round));
        CHECK_OK(device_event_record(e2, down));
        CHECK_OK(device_event_synchronize(e2));
        CHECK_EQ(device_event_query(e1), 1); /* what e2 waited for is done too */
        CHECK_MSG(memcmp(in, out, n) == 0, "round %d: the copy back did not wait for the copy up", round);
        double up_s, total_s;
        CHECK_OK(device_event_elapsed(e0, e1, &up_s));
        CHECK_OK(device_event_elapsed(e0, e2, &total_s));
        CHECK_MSG(up_s > 0 && total_s > up_s, "round %d: events out of order: up %.9f s, up and down %.9f s", round,
                  up_s, total_s);
        CHECK_OK(device_stream_synchronize(up)); /* before the next round's writes into `in` */
    }
    device_event_destroy(e0);
    device_event_destroy(e1);
    device_event_destroy(e2);
    device_stream_destroy(up);
    device_stream_destroy(down);
    device_free(dev, d);
    device_host_free(dev, in);
    device_host_free(dev, out);
    device_close(dev);
}

/* ---- the detector ---------------------------------------------------------------------- */

struct test_rig {
    device_t *dev;
    device_stream_t *copy, *compute;
    device_event_t *ready, *done;
    uint8_t *pinned;
    void *d;
    uint64_t n;
};

static void test_rig_open_checked(struct test_rig *r, enum device_write_check check)
{
    if (!test_is_sim())
        CHECK_SKIP("the use-before-ready detector is the simulator's; %s has none", test_backend());
    r->dev = test_device_checked(50, 1, check);
    r->n = 64 << 10;
    CHECK_OK(device_host_alloc(r->dev, DEVICE_HOST_PINNED, r->n, "loader slot 1", (void **)&r->pinned));
    CHECK_OK(device_malloc(r->dev, r->n, "batch buffer 0", &r->d));
    CHECK_OK(device_stream_create(r->dev, "copy", &r->copy));
    CHECK_OK(device_stream_create(r->dev, "compute", &r->compute));
    CHECK_OK(device_event_create(r->dev, &r->ready));
    CHECK_OK(device_event_create(r->dev, &r->done));
}

static void test_rig_open(struct test_rig *r) { test_rig_open_checked(r, DEVICE_WRITE_CHECK_TRAP); }

static void test_rig_close(struct test_rig *r)
{
    device_event_destroy(r->ready);
    device_event_destroy(r->done);
    device_stream_destroy(r->copy);
    device_stream_destroy(r->compute);
    device_free(r->dev, r->d);
    device_host_free(r->dev, r->pinned);
    device_close(r->dev);
}

static int test_forward(struct test_rig *r, int64_t batch)
{
    struct device_span in = {r->d, r->n};
    struct device_kernel k = {.name = "forward", .batch = batch, .seconds = 1e-4, .reads = &in, .nreads = 1};
    return device_launch(r->compute, &k);
}

/* The same program twice: with the event, nothing is said; without it, the
 * kernel's launch is refused, naming everything. */
static void test_kernel_after_copy(int with_event)
{
    struct test_rig r;
    test_rig_open(&r);
    CHECK_OK(device_copy_async(r.copy, r.d, r.pinned, r.n, DEVICE_H2D, 5));
    if (with_event) {
        CHECK_OK(device_event_record(r.ready, r.copy));
        CHECK_OK(device_stream_wait_event(r.compute, r.ready));
        CHECK_OK(test_forward(&r, 5));
        CHECK_OK(device_synchronize(r.dev));
    } else {
        int rc = test_forward(&r, 5);
        CHECK_ERR(rc, ERR_STATE, "use before ready");
        const char *msg = err_msg();
        CHECK_CONTAINS(msg, "kernel #1 'forward' (batch 5) on stream 'compute' reads device buffer 'batch buffer 0'");
        CHECK_CONTAINS(msg, "copy #1 (H2D of 64 KiB from pinned 'loader slot 1' to 'batch buffer 0', batch 5) on "
                            "stream 'copy' writes");
        /* sticky: the device stays broken */
        CHECK_ERR(device_synchronize(r.dev), ERR_STATE, "use before ready");
    }
    test_rig_close(&r);
}

TEST(detector_kernel_after_copy_with_event_is_fine) { test_kernel_after_copy(1); }
TEST(detector_kernel_reading_an_unordered_copy_is_caught) { test_kernel_after_copy(0); }

/* Ordered by the host instead of an event: the host waited for the copy. */
TEST(detector_host_synchronize_orders_too)
{
    struct test_rig r;
    test_rig_open(&r);
    CHECK_OK(device_copy_async(r.copy, r.d, r.pinned, r.n, DEVICE_H2D, 0));
    CHECK_OK(device_event_record(r.ready, r.copy));
    CHECK_OK(device_event_synchronize(r.ready));
    CHECK_OK(test_forward(&r, 0));
    CHECK_OK(device_synchronize(r.dev));
    test_rig_close(&r);
}

/* A copy into a buffer a kernel may still be reading (the device half of
 * reusing a double buffer too early). */
static void test_copy_after_kernel(int with_event)
{
    struct test_rig r;
    test_rig_open(&r);
    CHECK_OK(device_copy_async(r.copy, r.d, r.pinned, r.n, DEVICE_H2D, 0));
    CHECK_OK(device_event_record(r.ready, r.copy));
    CHECK_OK(device_stream_wait_event(r.compute, r.ready));
    CHECK_OK(test_forward(&r, 0));
    if (with_event) {
        CHECK_OK(device_event_record(r.done, r.compute));
        CHECK_OK(device_stream_wait_event(r.copy, r.done));
        CHECK_OK(device_copy_async(r.copy, r.d, r.pinned, r.n, DEVICE_H2D, 2));
        CHECK_OK(device_synchronize(r.dev));
    } else {
        CHECK_ERR(device_copy_async(r.copy, r.d, r.pinned, r.n, DEVICE_H2D, 2), ERR_STATE, "overwrite before done");
        CHECK_CONTAINS(err_msg(), "copy #2 (H2D of 64 KiB from pinned 'loader slot 1' to 'batch buffer 0', batch 2)"
                                  " on stream 'copy' writes device buffer 'batch buffer 0', which kernel #1 'forward' "
                                  "(batch 0) on stream 'compute' reads");
    }
    test_rig_close(&r);
}

TEST(detector_copy_after_kernel_with_event_is_fine) { test_copy_after_kernel(1); }
TEST(detector_copy_overwriting_a_buffer_in_use_is_caught) { test_copy_after_kernel(0); }

/* The host writes into the pinned source of a copy: while it is in flight
 * (held behind a gate for certain), or after its event completed. The trap
 * names the writing thread and the byte; the bytes check catches the write
 * when the host learns the copy ended, naming the first changed 4 KiB block. */
static void test_host_write(enum device_write_check check, int after_event)
{
    struct test_rig r;
    test_rig_open_checked(&r, check);
    device_stream_t *gate_stream = test_hold(r.dev, r.copy, NULL);
    memset(r.pinned, 1, r.n);
    CHECK_OK(device_copy_async(r.copy, r.d, r.pinned, r.n, DEVICE_H2D, 7));
    CHECK_OK(device_event_record(r.ready, r.copy));
    if (after_event) {
        atomic_store(&test_gate, 1);
        CHECK_OK(device_event_synchronize(r.ready));
        r.pinned[5000] = 2; /* the copy is done: the buffer is the host's again */
        CHECK_OK(device_synchronize(r.dev));
        CHECK_EQ(((uint8_t *)r.d)[5000], 1);
        struct device_stats ds; /* the copy was watched, and by the check asked for */
        device_stats(r.dev, &ds);
        CHECK_EQ_U64(ds.watched_copies[check], 1);
        CHECK_EQ_U64(ds.watched_copies[check == DEVICE_WRITE_CHECK_TRAP ? DEVICE_WRITE_CHECK_BYTES
                                                                        : DEVICE_WRITE_CHECK_TRAP], 0);
    } else {
        CHECK_EQ(device_event_query(r.ready), 0); /* behind the gate: in flight */
        r.pinned[5000] = 2;                         /* the bug: a loader slot refilled too early */
        atomic_store(&test_gate, 1);
        CHECK_ERR(device_event_synchronize(r.ready), ERR_STATE, "host write while in flight");
        const char *msg = err_msg();
        const char *copy = "of the source of copy #1 (H2D of 64 KiB from pinned 'loader slot 1' to 'batch buffer 0', "
                           "batch 7) on stream 'copy'";
        CHECK_CONTAINS(msg, copy);
        if (check == DEVICE_WRITE_CHECK_TRAP) {
            CHECK_CONTAINS(msg, "the host (thread ");
            CHECK_CONTAINS(msg, "wrote byte 5000 of the source");
        } else {
            CHECK_CONTAINS(msg, "host write while in flight: bytes 4096 to 8191 of the source");
            CHECK_CONTAINS(msg, "changed while that copy was still reading it");
        }
        CHECK_ERR(device_synchronize(r.dev), ERR_STATE, "host write while in flight"); /* sticky */
    }
    device_stream_destroy(gate_stream);
    test_rig_close(&r);
}

TEST(detector_host_write_after_the_copy_is_fine) { test_host_write(DEVICE_WRITE_CHECK_TRAP, 1); }
TEST(detector_host_write_into_an_in_flight_copy_is_caught) { test_host_write(DEVICE_WRITE_CHECK_TRAP, 0); }
TEST(detector_bytes_host_write_after_the_copy_is_fine) { test_host_write(DEVICE_WRITE_CHECK_BYTES, 1); }
TEST(detector_bytes_host_write_into_an_in_flight_copy_is_caught) { test_host_write(DEVICE_WRITE_CHECK_BYTES, 0); }

/* What the bytes check sees and what it does not: a write that leaves the
 * bytes as they were (nothing the copy reads changes) is not reported; the
 * kernel's write on the program's behalf, read(2) into the buffer, which a
 * trap refuses with EFAULT, is caught. */
TEST(detector_bytes_sees_changed_bytes_whoever_wrote_them)
{
    struct test_rig r;
    test_rig_open_checked(&r, DEVICE_WRITE_CHECK_BYTES);
    device_stream_t *gate_stream = test_hold(r.dev, r.copy, NULL);
    memset(r.pinned, 1, r.n);
    CHECK_OK(device_copy_async(r.copy, r.d, r.pinned, r.n, DEVICE_H2D, 7));
    r.pinned[100] = 1; /* the same byte */
    atomic_store(&test_gate, 1);
    CHECK_OK(device_synchronize(r.dev));
    device_stream_destroy(gate_stream);

    int fds[2];
    CHECK(pipe(fds) == 0);
    CHECK(write(fds[1], "xyz", 3) == 3);
    gate_stream = test_hold(r.dev, r.copy, NULL);
    CHECK_OK(device_copy_async(r.copy, r.d, r.pinned, r.n, DEVICE_H2D, 8));
    CHECK(read(fds[0], r.pinned + 9000, 3) == 3); /* the kernel writes: no trap could see it */
    atomic_store(&test_gate, 1);
    CHECK_ERR(device_synchronize(r.dev), ERR_STATE, "host write while in flight: bytes 8192 to 12287 of the source "
              "of copy #2");
    close(fds[0]);
    close(fds[1]);
    device_stream_destroy(gate_stream);
    test_rig_close(&r);
}

/* Memory next to a guarded copy (same page, outside its bytes) is not
 * reported, and the write lands. */
TEST(detector_neighbouring_bytes_are_not_a_hazard)
{
    struct test_rig r;
    test_rig_open(&r);
    device_stream_t *gate_stream = test_hold(r.dev, r.copy, NULL);
    CHECK_OK(device_copy_async(r.copy, r.d, r.pinned, 100, DEVICE_H2D, 0));
    r.pinned[200] = 9; /* same page, not the copy's bytes */
    atomic_store(&test_gate, 1);
    CHECK_OK(device_synchronize(r.dev));
    CHECK_EQ(r.pinned[200], 9);
    device_stream_destroy(gate_stream);
    test_rig_close(&r);
}

/* ---- bad input -------------------------------------------------------------------------- */

TEST(device_bad_input)
{
    device_t *dev = test_device(50, 1);
    void *d, *h;
    CHECK_ERR(device_malloc(dev, 0, "nothing", &d), ERR_ARG, "device_malloc of 0 bytes");
    CHECK_ERR(device_host_alloc(dev, DEVICE_HOST_PINNED, 0, "nothing", &h), ERR_ARG, "0 bytes of pinned memory");
    CHECK_ERR(device_host_alloc(dev, DEVICE_HOST_REGISTERED, 8, "x", &h), ERR_ARG, "device_host_register");
    CHECK_OK(device_malloc(dev, 4096, "small", &d));
    CHECK_OK(device_host_alloc(dev, DEVICE_HOST_PINNED, 8192, "pinned", &h));
    device_stream_t *s;
    CHECK_OK(device_stream_create(dev, "copy", &s));
    CHECK_ERR(device_copy_async(s, d, h, 0, DEVICE_H2D, -1), ERR_ARG, "copy of 0 bytes");
    if (test_is_sim()) {
        CHECK_ERR(device_copy_async(s, d, h, 4097, DEVICE_H2D, -1), ERR_RANGE,
                  "4097 bytes at offset 0 run past the end of device buffer 'small' (4096 bytes)");
        CHECK_ERR(device_copy_async(s, h, h, 16, DEVICE_H2D, -1), ERR_RANGE, "is not device memory");
        CHECK_ERR(device_copy_async(s, d, (uint8_t *)h + 8000, 1000, DEVICE_H2D, -1), ERR_RANGE,
                  "runs past the end of pinned buffer 'pinned'");
    }
    device_event_t *e;
    CHECK_OK(device_event_create(dev, &e));
    double t;
    CHECK_ERR(device_event_elapsed(e, e, &t), ERR_STATE, "never recorded");
    CHECK_EQ(device_event_query(e), 1); /* never recorded: nothing to wait for, as in CUDA */
    struct device_kernel k = {.name = "k", .seconds = -1};
    CHECK_ERR(device_launch(s, &k), ERR_ARG, "kernel 'k' takes -1 s");
    device_event_destroy(e);
    device_stream_destroy(s);
    device_free(dev, d);
    device_host_free(dev, h);
    device_close(dev);
}

TEST(device_backend_choice)
{
    struct device_config cfg;
    device_config_default(&cfg);
    device_t *dev;
    cfg.backend = "abacus";
    CHECK_ERR(device_open(&cfg, &dev), ERR_ARG, "unknown backend 'abacus' (sim or cuda)");
    cfg.backend = "cuda";
    int rc = device_open(&cfg, &dev);
    if (rc == 0) {
        CHECK_STR(device_backend_name(dev), "cuda");
        device_close(dev);
    } else {
        CHECK_EQ(rc, ERR_UNSUPPORTED);
        CHECK_MSG(strstr(err_msg(), "no CUDA device found") || strstr(err_msg(), "no CUDA support"),
                  "expected 'no CUDA device found' or 'no CUDA support', got: %s", err_msg());
    }
    cfg.backend = NULL; /* the default is always something: a GPU this machine has, else the simulator */
    CHECK_OK(device_open(&cfg, &dev));
    CHECK_STR(device_backend_name(dev), rc == 0 ? "cuda" : "sim");
    device_close(dev);
    /* the names --backend accepts, in --help's order */
    const char *const *names = backend_table_device_names();
    CHECK_STR(names[0], "sim");
    CHECK_STR(names[1], "cuda");
    CHECK(names[2] == NULL);
}

TEST(link_profiles)
{
    struct link_profile l;
    CHECK_OK(link_profile_find("pcie3", &l));
    CHECK_MSG(l.limit_bps > 15.75e9 && l.limit_bps < 15.76e9, "Gen3 x16: %g B/s", l.limit_bps);
    CHECK_OK(link_profile_find("pcie5", &l));
    CHECK_MSG(l.limit_bps > 63.0e9 && l.limit_bps < 63.1e9, "Gen5 x16: %g B/s", l.limit_bps);
    CHECK(l.bandwidth_bps < l.limit_bps);
    CHECK_ERR(link_profile_find("pcie9", &l), ERR_ARG, "unknown link profile 'pcie9' (known: pcie3, pcie4, pcie5)");
    CHECK_ERR(link_profile_set(&l, 0, -1), ERR_ARG, "link bandwidth");
    CHECK_ERR(link_profile_set(&l, -1, 2e6), ERR_ARG, "link latency");
    CHECK_OK(link_profile_set(&l, 2, 10));
    CHECK_STR(l.name, "custom");
    CHECK(link_copy_seconds(&l, 2000) > 10e-6 + 1e-6 * (1 - 1e-12) && link_copy_seconds(&l, 2000) < 11.0000001e-6);
    double bps;
    CHECK_OK(link_pcie_limit(4, 8, &bps));
    CHECK(bps > 15.75e9 && bps < 15.76e9);
    CHECK_ERR(link_pcie_limit(7, 16, &bps), ERR_RANGE, "generation 7");
}

/* GPUs sharing host links: each gets links / gpus of one, its latency whole */
TEST(link_share)
{
    struct link_profile l, alone;
    CHECK_OK(link_profile_find("pcie4", &alone));
    l = alone;
    CHECK_OK(link_profile_share(&l, 8, 8)); /* a link each: nothing changes */
    CHECK(memcmp(&l, &alone, sizeof l) == 0);
    CHECK_OK(link_profile_share(&l, 8, 2));
    CHECK(l.bandwidth_bps == alone.bandwidth_bps / 4 && l.limit_bps == alone.limit_bps / 4);
    CHECK(l.latency_s == alone.latency_s);
    CHECK_STR(l.title, "PCIe Gen4 x16, shared by 4 GPUs");
    CHECK_STR(l.name, "pcie4");
    l = alone;
    CHECK_ERR(link_profile_share(&l, 8, 3), ERR_ARG, "8 GPUs on 3 host links");
    CHECK_ERR(link_profile_share(&l, 8, 9), ERR_ARG, "8 GPUs on 9 host links");
    CHECK_ERR(link_profile_share(&l, 8, 0), ERR_ARG, "8 GPUs on 0 host links");
    CHECK(memcmp(&l, &alone, sizeof l) == 0); /* a refusal leaves it as it was */
}

/* ---- virtual time (DESIGN.md): every time the simulator reports is modelled ---------- */

/* A kernel lasts its declared seconds, however long its function really ran:
 * a gate held for 30 ms of wall time with 2 ms declared is 2 ms of device
 * time, exactly, and the host's clock after synchronizing is the event's. */
TEST(vtime_a_gate_lasts_its_declared_seconds)
{
    if (!test_is_sim())
        CHECK_SKIP("device time is measured, not modelled, on %s", test_backend());
    device_t *dev = test_device(1, 20);
    device_stream_t *s;
    device_event_t *e0, *e1;
    CHECK_OK(device_stream_create(dev, "compute", &s));
    CHECK_OK(device_event_create(dev, &e0));
    CHECK_OK(device_event_create(dev, &e1));
    uint64_t t0 = vclock_now_ns();
    CHECK_OK(device_event_record(e0, s));
    atomic_store(&test_gate, 0);
    struct device_kernel gate = {.name = "gate", .batch = -1, .seconds = 2e-3, .fn = test_gate_fn};
    CHECK_OK(device_launch(s, &gate));
    CHECK_OK(device_event_record(e1, s));
    usleep(30 * 1000); /* the gate is held for real: none of this is device time */
    atomic_store(&test_gate, 1);
    CHECK_OK(device_event_synchronize(e1));
    double sec;
    CHECK_OK(device_event_elapsed(e0, e1, &sec));
    CHECK_MSG(sec == 2e-3, "the gate took %.9f s of device time, declared 0.002", sec);
    CHECK_EQ_U64(vclock_now_ns(), t0 + 2000000); /* the host waited until the gate's modelled end */
    device_event_destroy(e0);
    device_event_destroy(e1);
    device_stream_destroy(s);
    device_close(dev);
}

/* A query answers by the model: "not yet" while the copy's modelled end is
 * after the host's clock (at once, whatever the engine really did), "done"
 * once the host's clock passed it, without a synchronize; so does
 * device_event_elapsed. */
TEST(vtime_query_answers_by_the_model)
{
    if (!test_is_sim())
        CHECK_SKIP("a query answers by the real GPU on %s", test_backend());
    device_t *dev = test_device(1, 0); /* 1 MiB: 1048576 ns */
    const uint64_t n = 1u << 20;
    uint8_t *h;
    void *d;
    CHECK_OK(device_host_alloc(dev, DEVICE_HOST_PINNED, n, "pinned", (void **)&h));
    CHECK_OK(device_malloc(dev, n, "d", &d));
    device_stream_t *s;
    device_event_t *e, *e0;
    CHECK_OK(device_stream_create(dev, "copy", &s));
    CHECK_OK(device_event_create(dev, &e));
    CHECK_OK(device_event_create(dev, &e0));
    test_fill(h, n, 5);
    uint64_t t0 = vclock_now_ns();
    CHECK_OK(device_event_record(e0, s));
    CHECK_OK(device_copy_async(s, d, h, n, DEVICE_H2D, -1));
    CHECK_OK(device_event_record(e, s));
    usleep(20 * 1000); /* the engine has surely moved the bytes for real: the model says not yet */
    CHECK_EQ(device_event_query(e), 0);
    double sec;
    CHECK_ERR(device_event_elapsed(e0, e, &sec), ERR_STATE, "the end event is not reached yet");
    vclock_advance_ns(1048575);
    CHECK_EQ(device_event_query(e), 0); /* one nanosecond short */
    vclock_advance_ns(1);
    CHECK_EQ(device_event_query(e), 1);
    CHECK_EQ_U64(vclock_now_ns(), t0 + 1048576);
    CHECK_OK(device_event_elapsed(e0, e, &sec));
    CHECK(sec > 1048575.9e-9 && sec < 1048576.1e-9);
    CHECK(memcmp(d, h, n) == 0); /* "done" means the bytes are there */
    h[0] ^= 1;                   /* the host learned the copy is done: the buffer is its own again */
    CHECK_OK(device_synchronize(dev));
    device_event_destroy(e0);
    device_event_destroy(e);
    device_stream_destroy(s);
    device_free(dev, d);
    device_host_free(dev, h);
    device_close(dev);
}

/* A pageable copy costs the host its memcpy into the bounce buffer, at the
 * modelled host rate, chunk by chunk beside the engine: its end on the
 * host's clock is the model's, exactly. */
TEST(vtime_pageable_copy_is_modelled)
{
    if (!test_is_sim())
        CHECK_SKIP("staging is the driver's on %s", test_backend());
    device_t *dev = test_device(1, 0);
    const uint64_t n = 3u << 20; /* three 1 MiB chunks */
    uint8_t *h;
    void *d;
    CHECK_OK(device_host_alloc(dev, DEVICE_HOST_PAGEABLE, n, "pageable", (void **)&h));
    CHECK_OK(device_malloc(dev, n, "d", &d));
    uint64_t t0 = vclock_now_ns();
    CHECK_OK(device_copy(dev, d, h, n, DEVICE_H2D));
    /* host memcpy of a chunk at 10 GB/s: 104858 ns; its copy at 1 GB/s: 1048576 ns. The engine
     * is the bottleneck: the first chunk waits for the host's first memcpy, the rest follow. */
    uint64_t chunk_host = 104858, chunk_copy = 1048576;
    CHECK_EQ_U64(vclock_now_ns() - t0, chunk_host + 3 * chunk_copy);
    struct device_stats st;
    device_stats(dev, &st);
    CHECK(st.staging_s > 3 * chunk_host * 1e-9 * (1 - 1e-9) && st.staging_s < 3 * chunk_host * 1e-9 * (1 + 1e-9));
    device_free(dev, d);
    device_host_free(dev, h);
    device_close(dev);
}

/* A round trip through one pinned buffer, ordered by its stream: the copy
 * back writes the bytes the copy up read, after it in modelled time, and is
 * no hazard, though the host never synchronized between them. */
TEST(vtime_round_trip_through_one_pinned_buffer_is_fine)
{
    if (!test_is_sim())
        CHECK_SKIP("the write guard is the simulator's");
    device_t *dev = test_device(1, 5);
    const uint64_t n = 64u << 10;
    uint8_t *h;
    void *d;
    CHECK_OK(device_host_alloc(dev, DEVICE_HOST_PINNED, n, "pinned", (void **)&h));
    CHECK_OK(device_malloc(dev, n, "d", &d));
    device_stream_t *s;
    CHECK_OK(device_stream_create(dev, "copy", &s));
    test_fill(h, n, 9);
    CHECK_OK(device_copy_async(s, d, h, n, DEVICE_H2D, -1));
    CHECK_OK(device_copy_async(s, h, d, n, DEVICE_D2H, -1));
    CHECK_OK(device_stream_synchronize(s));
    device_stream_destroy(s);
    device_free(dev, d);
    device_host_free(dev, h);
    device_close(dev);
}

/* A D2H copy on another stream, unordered, writing the bytes an in-flight
 * H2D copy reads (both in flight at once in modelled time): caught whatever
 * the engines' real speed. The trap names the D2H engine as the D2H copy
 * writes; the bytes check (over a source the D2H copy changes: d2 is zeros)
 * finds it when the host learns the copy up ended, naming the source's first
 * block. A round trip ordered by its stream, first, is no hazard to either. */
static void test_unordered_d2h(enum device_write_check check)
{
    if (!test_is_sim())
        CHECK_SKIP("the write check is the simulator's");
    device_t *dev = test_device_checked(1, 5, check);
    const uint64_t n = 1u << 20;
    uint8_t *h;
    void *d1, *d2;
    CHECK_OK(device_host_alloc(dev, DEVICE_HOST_PINNED, n, "pinned", (void **)&h));
    CHECK_OK(device_malloc(dev, n, "d1", &d1));
    CHECK_OK(device_malloc(dev, n, "d2", &d2));
    device_stream_t *up, *down;
    CHECK_OK(device_stream_create(dev, "up", &up));
    CHECK_OK(device_stream_create(dev, "down", &down));
    test_fill(h, n, 9);
    CHECK_OK(device_copy_async(up, d1, h, n, DEVICE_H2D, -1)); /* ordered: d1 back into h after it */
    CHECK_OK(device_copy_async(up, h, d1, n, DEVICE_D2H, -1));
    CHECK_OK(device_stream_synchronize(up));
    /* The copy up is held behind a gate for real (its bytes are read after the write, so no real
     * race for ThreadSanitizer to see), but in modelled time both start at once. */
    device_stream_t *g = test_hold(dev, up, NULL);
    CHECK_OK(device_copy_async(up, d1, h, n, DEVICE_H2D, -1));
    CHECK_OK(device_copy_async(down, h, d2, n, DEVICE_D2H, -1));
    if (check == DEVICE_WRITE_CHECK_TRAP) {
        CHECK_ERR(device_stream_synchronize(down), ERR_STATE, "host write while in flight");
        CHECK_CONTAINS(err_msg(), "the D2H copy engine");
    } else {
        CHECK_OK(device_stream_synchronize(down));
    }
    atomic_store(&test_gate, 1);
    CHECK_ERR(device_synchronize(dev), ERR_STATE, "host write while in flight");
    if (check == DEVICE_WRITE_CHECK_BYTES) {
        CHECK_CONTAINS(err_msg(), "bytes 0 to 4095 of the source of copy #3");
        CHECK_CONTAINS(err_msg(), "or by a device-to-host copy into the same buffer");
    }
    device_stream_destroy(g);
    device_stream_destroy(up);
    device_stream_destroy(down);
    device_close(dev);
}

TEST(vtime_unordered_d2h_into_a_copy_source_is_caught) { test_unordered_d2h(DEVICE_WRITE_CHECK_TRAP); }
TEST(vtime_unordered_d2h_into_a_copy_source_is_caught_by_its_bytes) { test_unordered_d2h(DEVICE_WRITE_CHECK_BYTES); }
