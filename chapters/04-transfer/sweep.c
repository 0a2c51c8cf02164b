/* sweep: copy rate against size, for every kind of host memory (chapter 4).
 *
 * For each size, a train of host-to-device copies issued the way a program
 * would: synchronously (the host waits for each, as .to(device) does) or
 * asynchronously (queued back to back, as .to(device, non_blocking=True)
 * does), timed by events on the copy's stream, as cudaEventElapsedTime
 * measures. On the simulator the times are modelled device time (DESIGN.md,
 * "Virtual time"): the link model for every pinned copy, plus, for pageable
 * ones, the host's memcpy into the bounce buffer at the modelled host rate
 * (DEVICE_SIM_HOST_MEMCPY_BPS). Nothing printed depends on this machine or
 * its load: the same flags print the same bytes anywhere. The pinned buffer
 * comes from the pool, so --max-bytes must fit in --pool.
 */
#include "chapter4.h"

#include "base/error.h"
#include "base/measure.h"
#include "base/units.h"
#include "base/plot.h"
#include "base/progress.h"
#include "sim/device_sim.h"
#include "transfer/pinned_pool.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct ch4_variant {
    const char *name, *csv;
    enum device_host_kind kind;
    int async;
};

static const struct ch4_variant ch4_variants[] = {
    {"pageable", "pageable_sync", DEVICE_HOST_PAGEABLE, 0},
    {"pinned sync", "pinned_sync", DEVICE_HOST_PINNED, 0},
    {"pinned async", "pinned_async", DEVICE_HOST_PINNED, 1},
    {"wc async", "write_combined_async", DEVICE_HOST_WRITE_COMBINED, 1},
    {"registered", "registered_async", DEVICE_HOST_REGISTERED, 1},
};
#define CH4_VARIANTS (sizeof ch4_variants / sizeof ch4_variants[0])
#define CH4_MAX_SIZES 40

/* What the plot's title says the copies ran on: "simulated device, PCIe Gen4
 * x16", or the GPU's name (its description up to the details in
 * parentheses) and its link. */
static void ch4_sweep_title(device_t *dev, int sim, const struct link_profile *link, int have_link, char *buf,
                            size_t len)
{
    const char *d = sim ? "simulated device" : device_describe(dev);
    size_t n = strcspn(d, "(");
    while (n > 0 && d[n - 1] == ' ')
        n--;
    snprintf(buf, len, "%.*s, %s", (int)n, d, have_link ? link->title : "link not reported");
}

/* How many copies of `bytes` make one measurement: enough to move 32 MiB,
 * at least 3 and at most 256. */
static uint64_t ch4_copies_of(uint64_t bytes)
{
    uint64_t n = (32u << 20) / bytes;
    return n < 3 ? 3 : n > 256 ? 256 : n;
}

int ch4_train_open(device_t *dev, pinned_pool_t *pool, enum device_host_kind kind, uint64_t bytes,
                   struct ch4_train *t)
{
    memset(t, 0, sizeof *t);
    t->dev = dev;
    t->pool = pool;
    t->kind = kind;
    int rc;
    if (kind == DEVICE_HOST_PINNED && pool) {
        rc = pinned_pool_alloc(pool, bytes, &t->host);
    } else if (kind == DEVICE_HOST_REGISTERED) {
        rc = posix_memalign(&t->host, 4096, bytes) ? err_set(ERR_NOMEM, "cannot allocate %llu bytes to register",
                                                              (unsigned long long)bytes)
                                                    : device_host_register(dev, t->host, bytes, "registered buffer");
        if (rc) {
            free(t->host);
            t->host = NULL;
        }
    } else {
        rc = device_host_alloc(dev, kind, bytes, device_host_kind_name(kind), &t->host);
    }
    if (rc == 0)
        memset(t->host, 0x5a, bytes); /* fault the pages in now, not inside the first copy */
    if (rc == 0)
        rc = device_malloc(dev, bytes, "copy target", &t->target);
    if (rc == 0)
        rc = device_stream_create(dev, "copy", &t->s);
    if (rc == 0)
        rc = device_event_create(dev, &t->e0);
    if (rc == 0)
        rc = device_event_create(dev, &t->e1);
    if (rc)
        ch4_train_close(t);
    return rc;
}

void ch4_train_close(struct ch4_train *t)
{
    device_event_destroy(t->e0);
    device_event_destroy(t->e1);
    device_stream_destroy(t->s);
    device_free(t->dev, t->target);
    if (!t->host)
        return;
    if (t->kind == DEVICE_HOST_PINNED && t->pool) {
        pinned_pool_free(t->pool, t->host);
    } else if (t->kind == DEVICE_HOST_REGISTERED) {
        device_host_unregister(t->dev, t->host);
        free(t->host);
    } else {
        device_host_free(t->dev, t->host);
    }
    t->host = NULL;
}

int ch4_train_time(struct ch4_train *t, uint64_t bytes, uint64_t tail, uint64_t n, int async, double *seconds)
{
    *seconds = 0;
    int rc = device_copy_async(t->s, t->target, t->host, bytes, DEVICE_H2D, -1); /* warm-up */
    if (rc == 0)
        rc = device_stream_synchronize(t->s);
    if (rc == 0 && async) /* the whole train is queued before the engine sees it */
        rc = ch4_gate_hold(t->s);
    if (rc == 0)
        rc = device_event_record(t->e0, t->s);
    for (uint64_t i = 0; rc == 0 && i < n; i++) {
        rc = device_copy_async(t->s, t->target, t->host, bytes, DEVICE_H2D, -1);
        if (rc == 0 && tail)
            rc = device_copy_async(t->s, t->target, t->host, tail, DEVICE_H2D, -1);
        if (rc == 0 && !async)
            rc = device_stream_synchronize(t->s);
    }
    if (rc == 0)
        rc = device_event_record(t->e1, t->s);
    ch4_gate_release();
    if (rc == 0)
        rc = device_event_synchronize(t->e1);
    if (rc == 0)
        rc = device_event_elapsed(t->e0, t->e1, seconds);
    return rc;
}

int ch4_sweep(const struct ch4_opts *o)
{
    uint64_t sizes[CH4_MAX_SIZES];
    int nsizes = 0;
    for (uint64_t s = o->min_bytes; s <= o->max_bytes && nsizes < CH4_MAX_SIZES; s *= 4) {
        sizes[nsizes++] = s;
        if (s > o->max_bytes / 4)
            break;
    }
    device_t *dev;
    int rc = ch4_device_open(o, &o->link, &dev);
    if (rc)
        return rc;
    struct link_profile link;
    int have_link = device_link(dev, &link) == 0;
    int sim = strcmp(device_backend_name(dev), "sim") == 0;
    struct measure_bandwidth mc = {0};
    if (!sim) /* a GPU's pageable copies really run at this machine's memcpy; the simulator's at a modelled one */
        rc = measure_memcpy(64u << 20, 3, MEASURE_WALL, &mc);
    printf("== the size sweep: host-to-device copies, %s\n", device_describe(dev));
    if (rc == 0 && sim)
        printf("   the host's memcpy into the bounce buffer (modelled): %.2f GB/s\n", DEVICE_SIM_HOST_MEMCPY_BPS / 1e9);
    else if (rc == 0)
        printf("   this machine's memcpy (measured now, 64 MiB, best of 3): %.2f GB/s\n", mc.best_bps / 1e9);
    pinned_pool_t *pool = NULL;
    if (rc == 0)
        rc = pinned_pool_create(dev, o->pool_bytes, DEVICE_HOST_PINNED, &pool);
    static double bps[CH4_VARIANTS][CH4_MAX_SIZES];
    progress_t prog;
    progress_begin(&prog, "sweep", CH4_VARIANTS * (uint64_t)nsizes);
    for (size_t v = 0; rc == 0 && v < CH4_VARIANTS; v++) {
        struct ch4_train t;
        rc = ch4_train_open(dev, pool, ch4_variants[v].kind, o->max_bytes, &t);
        if (rc)
            break;
        for (int i = 0; rc == 0 && i < nsizes; i++) {
            uint64_t n = ch4_copies_of(sizes[i]);
            double sec = 0;
            rc = ch4_train_time(&t, sizes[i], 0, n, ch4_variants[v].async, &sec);
            bps[v][i] = sec > 0 ? (double)(sizes[i] * n) / sec : 0;
            progress_update(&prog, v * (uint64_t)nsizes + (uint64_t)i + 1);
        }
        ch4_train_close(&t);
    }
    progress_end(&prog, CH4_VARIANTS * (uint64_t)nsizes);
    char csv_path[PLOT_PATH_MAX], out_path[PLOT_PATH_MAX];
    struct plot_csv csv;
    if (rc == 0 && plot_paths(o->out_dir, "bandwidth", csv_path, out_path) < 0)
        rc = err_wrap(ERR_ARG, "--out");
    if (rc == 0 && (rc = plot_csv_open(&csv, csv_path, "--out")) == 0) {
        fprintf(csv.f, "bytes,pageable_sync,pinned_sync,pinned_async,write_combined_async,registered_async,model,"
                       "limit\n");
        printf("\n%10s", "size");
        for (size_t v = 0; v < CH4_VARIANTS; v++)
            printf(" %14s", ch4_variants[v].name);
        printf(" %10s %10s\n", sim ? "model" : "", have_link ? "of limit" : "");
        for (int i = 0; i < nsizes; i++) {
            char sz[32];
            double model = have_link && sim ? (double)sizes[i] / link_copy_seconds(&link, sizes[i]) : 0;
            printf("%10s", units_format_bytes(sizes[i], sz, sizeof sz));
            for (size_t v = 0; v < CH4_VARIANTS; v++)
                printf(" %9.2f GB/s", bps[v][i] / 1e9);
            if (sim)
                printf(" %5.2f GB/s", model / 1e9);
            else
                printf(" %10s", "");
            if (have_link)
                printf(" %9.1f%%", 100 * bps[2][i] / link.limit_bps);
            printf("\n");
            fprintf(csv.f, "%llu", (unsigned long long)sizes[i]);
            for (size_t v = 0; v < CH4_VARIANTS; v++)
                fprintf(csv.f, ",%.6f", bps[v][i] / 1e9);
            fprintf(csv.f, ",%.6f,%.6f\n", model / 1e9, have_link ? link.limit_bps / 1e9 : 0.0);
        }
        rc = plot_csv_close(&csv, 0);
        printf("(GB/s = 1e9 bytes per second of device time; 'of limit' is pinned async against the wire's limit)\n");
        if (have_link && sim) {
            char half[32];
            printf("latency dominates below %s: there a copy spends more time on its fixed %.1f us than on its\n"
                   "bytes (S = alpha x B), and the rate is under half of B = %.2f GB/s. Batch small copies.\n",
                   units_format_bytes((uint64_t)link_half_size(&link), half, sizeof half), link.latency_s * 1e6,
                   link.bandwidth_bps / 1e9);
            printf("all modelled (device time, the same on any machine): a pinned copy, sync or async, is the\n"
                   "model exactly; the simulator models no host round trip between sync copies (on a GPU the\n"
                   "driver's adds one per copy). A pageable copy adds the host's memcpy into the bounce buffer\n"
                   "(modelled at %.2f GB/s, which caps it). Write-combined and registered memory are pinned\n"
                   "memory to the simulator: the same model.\n",
                   DEVICE_SIM_HOST_MEMCPY_BPS / 1e9);
        } else if (!have_link) {
            printf("(the system does not report this GPU's PCIe link: no limit to compare with)\n");
        }
        if (rc == 0) {
            printf("wrote %s\n", csv_path);
            char title[192];
            ch4_sweep_title(dev, sim, &link, have_link, title, sizeof title);
            rc = ch4_plot("chapters/04-transfer/plot.gp", csv_path, out_path, title);
        }
    }
    pinned_pool_destroy(pool);
    device_close(dev);
    printf("\n");
    return rc;
}
