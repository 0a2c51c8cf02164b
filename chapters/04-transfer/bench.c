/* bench: chapter 4's benchmarks, one verdict line each (--bench, make bench).
 *
 *   bench: <what>: <figure> <unit> | <peer or limit>: <figure> <unit> | ratio <x.xx> | target <op> <t> | PASS|MISS
 *
 * (the format is lib/base/verdict.h's). In the simulator:
 *   - the copy engines' rates against the model's own formula S / (α + S/B),
 *     both directions at once: the engines must add no error (within 2 %);
 *   - the double-buffered training loop's step against max(copy, compute):
 *     within 10 % (best of three runs);
 *   - the engines' CPU time per copied GiB against memcpy of as many bytes,
 *     measured in the same run: within 2x.
 * On a GPU (a "not run: no GPU" line each when there is none):
 *   - pinned H2D of 256 MiB against the PCIe limit the system reports: 85 %;
 *   - the double-buffered loop's step against max(copy, compute): within 10 %.
 */
#include "chapter4.h"

#include "base/error.h"
#include "base/measure.h"
#include "base/units.h"
#include "base/verdict.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* One verdict line in the project's one format (lib/base/verdict.h). */
static void ch4_verdict(const char *what, double figure, const char *unit, const char *peer, double peer_figure,
                        const char *peer_unit, double ratio, enum verdict_op op, double target)
{
    struct verdict v = {what, figure, unit, peer, peer_figure, peer_unit, ratio, op, target};
    if (verdict_print(stdout, &v) < 0)
        fprintf(stderr, "chapter-4: %s\n", err_msg());
}

/* The double-buffered training loop against max(copy, compute): the best of
 * three runs, as a step's device time includes the host's issue, and a host
 * descheduled by other work on a shared machine leaves the device idle. */
static int ch4_bench_loop(const struct ch4_opts *o, const char *what)
{
    double best = 0, step = 0, bound = 0;
    for (int run = 0; run < 3; run++) {
        struct ch4_loop_result res;
        int rc = ch4_loop_run(o, CH4_PINNED, 2, &res);
        if (rc)
            return rc;
        double copy = res.dma_s + res.host_copy_s, b = copy > res.compute_s ? copy : res.compute_s;
        if (run == 0 || res.step_s / b < best)
            best = res.step_s / b, step = res.step_s, bound = b;
    }
    ch4_verdict(what, step * 1e3, "ms", "max(copy, compute)", bound * 1e3, "ms", best, VERDICT_AT_MOST, 1.10);
    return 0;
}

/* Both engines at once: n copies of `bytes` each way. The slower of the two
 * rates, and the formula's. */
static int ch4_bench_engines(device_t *dev, uint64_t bytes, uint64_t n, double *rate, double *formula)
{
    struct link_profile link;
    device_link(dev, &link);
    void *hin = NULL, *hout = NULL, *d1 = NULL, *d2 = NULL;
    device_stream_t *up = NULL, *down = NULL;
    device_event_t *e[4] = {0};
    int rc = device_host_alloc(dev, DEVICE_HOST_PINNED, bytes, "bench source", &hin);
    if (rc == 0)
        rc = device_host_alloc(dev, DEVICE_HOST_PINNED, bytes, "bench destination", &hout);
    if (rc == 0)
        rc = device_malloc(dev, bytes, "bench up", &d1);
    if (rc == 0)
        rc = device_malloc(dev, bytes, "bench down", &d2);
    if (rc == 0)
        rc = device_stream_create(dev, "up", &up);
    if (rc == 0)
        rc = device_stream_create(dev, "down", &down);
    for (int i = 0; rc == 0 && i < 4; i++)
        rc = device_event_create(dev, &e[i]);
    if (rc == 0) { /* touch everything once, so page faults are not the engines' */
        memset(hin, 1, bytes);
        rc = device_copy(dev, d1, hin, bytes, DEVICE_H2D);
        if (rc == 0)
            rc = device_copy(dev, d2, hin, bytes, DEVICE_H2D);
        if (rc == 0)
            rc = device_copy(dev, hout, d2, bytes, DEVICE_D2H);
    }
    /* Both trains queued behind one gate, then let go: the engines' rates, not this host's issue rate. */
    device_stream_t *gate = NULL;
    device_event_t *opened = NULL;
    if (rc == 0)
        rc = device_stream_create(dev, "gate", &gate);
    if (rc == 0)
        rc = device_event_create(dev, &opened);
    if (rc == 0)
        rc = ch4_gate_hold(gate);
    if (rc == 0)
        rc = device_event_record(opened, gate);
    if (rc == 0)
        rc = device_stream_wait_event(up, opened);
    if (rc == 0)
        rc = device_stream_wait_event(down, opened);
    if (rc == 0)
        rc = device_event_record(e[0], up);
    if (rc == 0)
        rc = device_event_record(e[2], down);
    for (uint64_t i = 0; rc == 0 && i < n; i++) {
        rc = device_copy_async(up, d1, hin, bytes, DEVICE_H2D, -1);
        if (rc == 0)
            rc = device_copy_async(down, hout, d2, bytes, DEVICE_D2H, -1);
    }
    if (rc == 0)
        rc = device_event_record(e[1], up);
    if (rc == 0)
        rc = device_event_record(e[3], down);
    ch4_gate_release();
    if (rc == 0)
        rc = device_synchronize(dev);
    device_event_destroy(opened);
    device_stream_destroy(gate);
    double tu = 0, td = 0;
    if (rc == 0)
        rc = device_event_elapsed(e[0], e[1], &tu);
    if (rc == 0)
        rc = device_event_elapsed(e[2], e[3], &td);
    double slowest = tu > td ? tu : td;
    *formula = (double)bytes / link_copy_seconds(&link, bytes);
    *rate = slowest > 0 ? (double)(bytes * n) / slowest : 0;
    for (int i = 0; i < 4; i++)
        device_event_destroy(e[i]);
    device_stream_destroy(up);
    device_stream_destroy(down);
    device_free(dev, d1);
    device_free(dev, d2);
    device_host_free(dev, hin);
    device_host_free(dev, hout);
    return rc;
}

static int ch4_bench_sim(const struct ch4_opts *o)
{
    struct ch4_opts so = *o;
    so.backend = "sim";
    device_t *dev;
    int rc = ch4_device_open(&so, &so.link, &dev);
    if (rc)
        return rc;
    struct link_profile link;
    device_link(dev, &link);
    printf("== chapter 4 benchmarks, simulator: %s\n", device_describe(dev));
    double worst = 2, worst_rate = 0, worst_formula = 0;
    uint64_t moved = 0, worst_bytes = 0;
    struct device_stats before, after;
    device_stats(dev, &before);
    for (uint64_t bytes = 64 << 10; rc == 0 && bytes <= (64u << 20) && bytes <= o->pool_bytes; bytes *= 16) {
        uint64_t n = (64u << 20) / bytes < 4 ? 4 : (64u << 20) / bytes;
        double rate = 0, formula = 1;
        rc = ch4_bench_engines(dev, bytes, n, &rate, &formula);
        if (rc == 0 && rate / formula < worst)
            worst = rate / formula, worst_rate = rate, worst_formula = formula, worst_bytes = bytes;
        moved += 2 * bytes * n;
    }
    device_stats(dev, &after);
    device_close(dev);
    if (rc)
        return rc;
    char what[160], sz[32];
    snprintf(what, sizeof what, "sim copy engines, both directions at once, worst of 64 KiB .. 64 MiB (%s), device "
             "time", units_format_bytes(worst_bytes, sz, sizeof sz));
    ch4_verdict(what, worst_rate / 1e9, "GB/s", "the model S/(alpha+S/B)", worst_formula / 1e9, "GB/s", worst,
                VERDICT_AT_LEAST, 0.98);
    /* The CPU the engines burn moving those bytes, against memcpy of as many. */
    struct measure_bandwidth mc;
    rc = measure_memcpy(64u << 20, 3, MEASURE_THREAD_CPU, &mc);
    if (rc)
        return rc;
    double gib = (double)moved / (1u << 30);
    double engine_ms = (after.engine_cpu_s - before.engine_cpu_s) * 1e3 / gib, memcpy_ms = 1e3 * (1u << 30) / mc.best_bps;
    ch4_verdict("sim copy engines' CPU per copied GiB", engine_ms, "ms", "memcpy of 1 GiB, same run", memcpy_ms, "ms",
                engine_ms / memcpy_ms, VERDICT_AT_MOST, 2);
    /* The training loop, double-buffered, against its bound. */
    return ch4_bench_loop(&so, "sim double-buffered training step (device time, best of 3 runs)");
}

static int ch4_bench_gpu(const struct ch4_opts *o)
{
    const char *what[] = {"GPU pinned H2D of 256 MiB", "GPU double-buffered training step"};
    const char *peer[] = {"the PCIe limit the system reports", "max(copy, compute)"};
    const enum verdict_op op[] = {VERDICT_AT_LEAST, VERDICT_AT_MOST};
    const double target[] = {0.85, 1.10};
    if (o->backend && strcmp(o->backend, "sim") == 0) {
        for (int i = 0; i < 2; i++)
            verdict_print_not_run(stdout, what[i], peer[i], op[i], target[i], "--backend=sim");
        return 0;
    }
    struct ch4_opts go = *o;
    go.backend = "cuda";
    device_t *dev;
    int rc = ch4_device_open(&go, &go.link, &dev);
    if (rc == ERR_UNSUPPORTED) {
        for (int i = 0; i < 2; i++)
            verdict_print_not_run(stdout, what[i], peer[i], op[i], target[i], "no GPU");
        return 0;
    }
    if (rc)
        return rc;
    printf("== chapter 4 benchmarks, GPU: %s\n", device_describe(dev));
    struct link_profile link;
    if (device_link(dev, &link)) {
        verdict_print_not_run(stdout, what[0], peer[0], op[0], target[0], err_msg());
    } else {
        const uint64_t bytes = 256u << 20, n = 10;
        struct ch4_train tr;
        double t = 0;
        rc = ch4_train_open(dev, NULL, DEVICE_HOST_PINNED, bytes, &tr);
        if (rc == 0) {
            rc = ch4_train_time(&tr, bytes, 0, n, 1, &t);
            ch4_train_close(&tr);
        }
        if (rc == 0) {
            double bps = (double)bytes * n / t;
            char title[160];
            snprintf(title, sizeof title, "%s (%s)", what[0], link.title);
            ch4_verdict(title, bps / 1e9, "GB/s", "limit", link.limit_bps / 1e9, "GB/s", bps / link.limit_bps,
                        VERDICT_AT_LEAST, 0.85);
        }
    }
    device_close(dev);
    if (rc)
        return rc;
    return ch4_bench_loop(&go, what[1]);
}

int ch4_bench(const struct ch4_opts *o)
{
    int rc = ch4_bench_sim(o);
    return rc ? rc : ch4_bench_gpu(o);
}
