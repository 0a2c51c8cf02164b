/* loop: a training loop fed by the loader through the prefetcher (chapter 4).
 *
 * Each step takes a batch from lib/transfer/prefetch.h and runs the model's
 * compute on it (a kernel of --compute-ms on the compute stream; on the
 * simulator a modelled duration, on a GPU a spin kernel). Four ways to feed
 * it, as PyTorch users meet them:
 *
 *   pageable ring         pin_memory=False: the loader's slots are malloc'd, each
 *                         copy is staged through the driver's bounce buffer and
 *                         blocks the host: three passes over every byte
 *   pageable + pin copy   pin_memory=True: each batch copied into pinned memory
 *                         first (PyTorch's pin-memory thread): three passes
 *   pinned ring, 1 buffer the ring is pinned (collate writes where the DMA reads,
 *                         two passes), but copy and compute take turns
 *   pinned ring, 2 buffers double buffering: batch k+1 copies while k computes
 *
 * The copies per batch are counted from the byte counters of the loader, the
 * device and the prefetcher, not assumed. Step times are device time (the
 * compute stream's, between events), as a profiler shows them. On the
 * simulator every time is modelled (DESIGN.md, "Virtual time"): the loader's
 * collate at the host's modelled memcpy rate (lib/loader's `modelled`), the
 * data-wait, the pin copy and the host's step on the host's modelled clock,
 * so loop.csv and timeline.csv are the same bytes on any machine.
 */
#include "chapter4.h"

#include "base/vclock.h"
#include "base/error.h"
#include "base/plot.h"
#include "dataset/dataset.h"
#include "dataset/dataset_default.h"
#include "loader/loader.h"
#include "sampler/sampler.h"
#include "transfer/pinned_pool.h"
#include "transfer/prefetch.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CH4_TIMELINE_STEPS 6

static const char *ch4_ring_names[] = {"pageable ring", "pageable + pin copy", "pinned ring"};
static const char *ch4_ring_torch[] = {"pin_memory=False", "pin_memory=True", "ours"};

/* The loop's dataset: --data, else dataset_open_default() (Fashion-MNIST's
 * training images, else the synthetic stand-in of the same shape), saying
 * which when `say`; refused when the loop cannot stack its records. */
static int ch4_open_data(const struct ch4_opts *o, dataset_t **ds, int say)
{
    int rc;
    *ds = NULL;
    if (o->data) {
        if ((rc = dataset_open(o->data, NULL, ds)) < 0)
            return err_wrap(rc, "--data");
    } else {
        char why[768];
        rc = dataset_open_default(NULL, ds, why, sizeof why);
        if (rc == 0 && say && dataset_info(*ds)->kind == DATASET_SYNTHETIC)
            printf("(%s)\n", why);
    }
    if (rc == 0 && dataset_info(*ds)->record_bytes == 0)
        rc = err_set(ERR_ARG, "--data: %s has variable-length records; the loop stacks fixed-size ones",
                     dataset_name(*ds));
    if (rc == 0 && dataset_info(*ds)->length == 0)
        rc = err_set(ERR_ARG, "--data: %s has no records", dataset_name(*ds));
    if (rc < 0 && *ds) {
        dataset_close(*ds);
        *ds = NULL;
    }
    return rc;
}

/* Device seconds of a batch's pinned copies (`bytes` of data, then `labels`
 * bytes): the model on the simulator, the GPU's own on a GPU. */
static int ch4_copy_time(device_t *dev, uint64_t bytes, uint64_t labels, double *s)
{
    struct ch4_train t; /* one buffer for both copies: as large as the larger (records under 8 bytes) */
    int rc = ch4_train_open(dev, NULL, DEVICE_HOST_PINNED, bytes > labels ? bytes : labels, &t);
    if (rc == 0) {
        rc = ch4_train_time(&t, bytes, labels, 1, 1, s);
        ch4_train_close(&t);
    }
    return rc;
}

/* The same on the GPU's own link: where --topology shares the loop's link
 * among a node's GPUs, on a device of its own on the unshared one, so the
 * default compute is one batch's copy whatever the node's size. */
static int ch4_own_copy_time(const struct ch4_opts *o, device_t *dev, uint64_t bytes, uint64_t labels, double *s)
{
    if (o->host_links >= o->node_gpus)
        return ch4_copy_time(dev, bytes, labels, s);
    device_t *own;
    int rc = ch4_device_open(o, &o->own_loop_link, &own);
    if (rc == 0) {
        rc = ch4_copy_time(own, bytes, labels, s);
        device_close(own);
    }
    return rc;
}

struct ch4_span_ms {
    double start, end;
};
struct ch4_timeline {
    struct ch4_span_ms copy[CH4_TIMELINE_STEPS], compute[CH4_TIMELINE_STEPS];
    struct ch4_span_ms allreduce[CH4_TIMELINE_STEPS]; /* its copies into the GPU (--algo) */
};

struct ch4_rig {
    device_t *dev;
    pinned_pool_t *pool;
    dataset_t *ds;
    loader_t *loader;
    device_stream_t *compute;
    prefetch_t *pf;
    struct ch4_allreduce ar;
    uint64_t *order, count;
    uint64_t record_bytes, batch_bytes;
};

static void ch4_rig_close(struct ch4_rig *r)
{
    prefetch_close(r->pf);
    loader_close(r->loader);
    ch4_allreduce_close(&r->ar);
    device_stream_destroy(r->compute);
    pinned_pool_destroy(r->pool);
    dataset_close(r->ds);
    device_close(r->dev);
    free(r->order);
}

static int ch4_rig_open(const struct ch4_opts *o, enum ch4_ring ring, uint32_t depth, uint64_t batches,
                        struct ch4_rig *r)
{
    memset(r, 0, sizeof *r);
    int rc = ch4_device_open(o, &o->loop_link, &r->dev);
    if (rc == 0)
        rc = pinned_pool_create(r->dev, o->pool_bytes, DEVICE_HOST_PINNED, &r->pool);
    if (rc == 0)
        rc = ch4_open_data(o, &r->ds, 0);
    if (rc) {
        ch4_rig_close(r);
        return rc;
    }
    uint64_t n = dataset_info(r->ds)->length;
    r->record_bytes = dataset_info(r->ds)->record_bytes;
    r->batch_bytes = o->batch * r->record_bytes;
    r->count = batches * o->batch;
    sampler_seq_t perm = {0};
    rc = sampler_randperm(n, 0, SAMPLER_RANDPERM_AUTO, &perm);
    r->order = rc == 0 ? malloc(r->count * sizeof *r->order) : NULL;
    if (rc == 0 && !r->order)
        rc = err_set(ERR_NOMEM, "out of memory for %llu indices", (unsigned long long)r->count);
    for (uint64_t i = 0; rc == 0 && i < r->count; i++) /* an epoch of whole batches, around the dataset */
        r->order[i] = sampler_seq_at(&perm, i % n);
    sampler_seq_free(&perm);
    struct loader_options lo;
    loader_options_default(&lo);
    lo.workers = (uint32_t)o->workers;
    lo.max_batch = (uint32_t)o->batch;
    lo.modelled = strcmp(device_backend_name(r->dev), "sim") == 0; /* the collate on the host's modelled clock */
    /* The prefetcher holds a slot until its copy is done, `depth` of them at
     * most: the ring gets that many more, or the workers would wait for the
     * copies (the loader's own prefetch of 2 per worker, plus depth). */
    uint32_t per = o->workers ? (uint32_t)o->workers : 1;
    lo.prefetch = 2 + (depth + per - 1) / per;
    if (ring == CH4_PINNED)
        lo.allocator = pinned_pool_loader_allocator(r->pool);
    if (rc == 0)
        rc = loader_open(r->ds, &lo, &r->loader);
    if (rc == 0)
        rc = device_stream_create(r->dev, "compute", &r->compute);
    if (rc == 0)
        rc = ch4_allreduce_open(o, r->dev, r->batch_bytes, &r->ar);
    struct prefetch_options po = {.depth = depth, .max_bytes = r->batch_bytes, .max_batch = (uint32_t)o->batch,
                                  .compute = r->compute, .pin_pool = ring == CH4_PIN_COPY ? r->pool : NULL};
    if (rc == 0)
        rc = prefetch_open(r->dev, r->loader, &po, &r->pf);
    if (rc) {
        char msg[1024];
        snprintf(msg, sizeof msg, "%s", err_msg());
        ch4_rig_close(r);
        return err_set(rc, "the training loop (%s, %u buffer%s): %s", ch4_ring_names[ring], depth,
                       depth == 1 ? "" : "s", msg);
    }
    return 0;
}

/* The loop's table, a row per ring and depth; --bench times the last. */
static const struct ch4_loop_row {
    enum ch4_ring ring;
    uint32_t depth;
} ch4_loop_rows[] = {{CH4_PAGEABLE, 2}, {CH4_PIN_COPY, 2}, {CH4_PINNED, 1}, {CH4_PINNED, 2}};
#define CH4_LOOP_ROWS (sizeof ch4_loop_rows / sizeof ch4_loop_rows[0])

int ch4_loop_check(const struct ch4_opts *o, int bench)
{
    dataset_t *ds = NULL;
    int rc = ch4_open_data(o, &ds, 0);
    if (rc == 0)
        rc = ch4_allreduce_check(o, o->batch * dataset_info(ds)->record_bytes);
    dataset_close(ds);
    /* Each row's rig opened and closed: a batch whose buffers the pinned pool
     * cannot hold is refused now, not after the sweep has run. */
    for (size_t i = bench ? CH4_LOOP_ROWS - 1 : 0; rc == 0 && i < CH4_LOOP_ROWS; i++) {
        struct ch4_rig r;
        if ((rc = ch4_rig_open(o, ch4_loop_rows[i].ring, ch4_loop_rows[i].depth, 1, &r)) == 0)
            ch4_rig_close(&r);
        else if (rc == ERR_NOMEM || rc == ERR_ARG) /* what the flags asked for does not fit: name them */
            rc = err_wrap(rc, "--batch=%llu with --pool=%llu bytes", (unsigned long long)o->batch,
                          (unsigned long long)o->pool_bytes);
    }
    return rc;
}

/* Runs warmup + steps steps; measures the last `steps` (and with tl reads
 * their timeline: the host then waits for each copy to read its time). */
static int ch4_run(const struct ch4_opts *o, enum ch4_ring ring, uint32_t depth, uint64_t warmup, uint64_t steps,
                   struct ch4_loop_result *res, struct ch4_timeline *tl)
{
    struct ch4_rig r;
    int rc = ch4_rig_open(o, ring, depth, warmup + steps, &r);
    if (rc)
        return rc;
    memset(res, 0, sizeof *res);
    res->batch_bytes = r.batch_bytes;
    double copy_s = 0;
    rc = ch4_own_copy_time(o, r.dev, r.batch_bytes, o->batch * sizeof(int64_t), &copy_s);
    res->compute_s = o->compute_s >= 0 ? o->compute_s : copy_s;
    device_event_t *t0 = NULL, *t1 = NULL, *marks[2 * CH4_TIMELINE_STEPS] = {0};
    if (rc == 0)
        rc = device_event_create(r.dev, &t0);
    if (rc == 0)
        rc = device_event_create(r.dev, &t1);
    for (int i = 0; rc == 0 && tl && i < 2 * CH4_TIMELINE_STEPS; i++)
        rc = device_event_create(r.dev, &marks[i]);
    struct index_array order = {r.order, r.count};
    struct loader_epoch ep = {.epoch = 0, .indices = index_stream_of_array(&order), .batch_size = (uint32_t)o->batch};
    if (rc == 0)
        rc = loader_start_epoch(r.loader, &ep);
    struct prefetch_stats p0 = {0}, p1;
    struct device_stats d1, begin; /* begin: after the calibration copy, for the counts */
    device_stats(r.dev, &begin);
    uint64_t w0 = vclock_now_ns();
    if (rc == 0 && warmup == 0)
        rc = device_event_record(t0, r.compute);
    struct prefetch_batch *b;
    uint64_t k = 0;
    while (rc == 0 && (rc = prefetch_next(r.pf, &b)) == 1) {
        rc = 0;
        uint64_t m = k - warmup; /* the timeline's step, once warm */
        int mark = tl && k >= warmup && m < CH4_TIMELINE_STEPS;
        if (mark) {
            double end;
            rc = device_event_synchronize(b->ready);
            if (rc == 0) /* t0 is on the compute stream, which may still trail this copy: both must have happened */
                rc = device_event_synchronize(t0);
            if (rc == 0)
                rc = device_event_elapsed(t0, b->ready, &end);
            tl->copy[m] = (struct ch4_span_ms){(end - copy_s) * 1e3, end * 1e3};
            if (rc == 0)
                rc = device_event_record(marks[2 * m], r.compute);
        }
        /* with --algo the step also reads the last all-reduce's result and writes the gradients */
        struct device_span in[3] = {{b->data, b->bytes}, {b->labels, b->count * sizeof(int64_t)},
                                    {r.ar.reduced, r.ar.bytes}};
        struct device_span grads = {r.ar.grads, r.ar.bytes};
        struct device_kernel kern = {.name = "train step", .batch = (int64_t)b->number, .seconds = res->compute_s,
                                     .reads = in, .nreads = r.ar.dev ? 3 : 2, .writes = &grads,
                                     .nwrites = r.ar.dev ? 1 : 0};
        if (rc == 0)
            rc = device_launch(r.compute, &kern);
        if (rc == 0 && mark)
            rc = device_event_record(marks[2 * m + 1], r.compute);
        if (rc == 0)
            rc = ch4_allreduce_step(&r.ar, r.compute, (int64_t)b->number);
        if (rc == 0 && mark && r.ar.dev && r.ar.in_bytes) { /* its copies in end when this event does */
            double end;
            rc = device_event_synchronize(r.ar.received);
            if (rc == 0)
                rc = device_event_elapsed(t0, r.ar.received, &end);
            tl->allreduce[m] = (struct ch4_span_ms){(end - r.ar.in_s) * 1e3, end * 1e3};
        }
        int rr = prefetch_release(r.pf, b);
        rc = rc ? rc : rr;
        if (rc == 0 && k + 1 == warmup) { /* the measured steps start here */
            rc = device_event_record(t0, r.compute);
            prefetch_stats(r.pf, &p0);
            w0 = vclock_now_ns();
        }
        k++;
    }
    if (rc == 0)
        rc = device_event_record(t1, r.compute);
    if (rc == 0)
        rc = device_synchronize(r.dev);
    uint64_t w1 = vclock_now_ns();
    double device_s = 0;
    if (rc == 0)
        rc = device_event_elapsed(t0, t1, &device_s);
    for (uint64_t i = 0; rc == 0 && tl && i < CH4_TIMELINE_STEPS && warmup + i < k; i++) {
        double a, e;
        rc = device_event_elapsed(t0, marks[2 * i], &a);
        if (rc == 0)
            rc = device_event_elapsed(t0, marks[2 * i + 1], &e);
        tl->compute[i] = (struct ch4_span_ms){a * 1e3, e * 1e3};
    }
    if (rc == 0 && k != warmup + steps)
        rc = err_set(ERR_STATE, "the loop ran %llu steps, expected %llu", (unsigned long long)k,
                     (unsigned long long)(warmup + steps));
    if (rc == 0) {
        prefetch_stats(r.pf, &p1);
        device_stats(r.dev, &d1);
        struct loader_stats ls;
        loader_stats(r.loader, &ls);
        double n = (double)steps;
        res->step_s = device_s / n;
        res->host_step_s = (double)(w1 - w0) * 1e-9 / n;
        res->wait_s = (p1.data_wait_s - p0.data_wait_s) / n;
        int sim = strcmp(device_backend_name(r.dev), "sim") == 0;
        double all = (double)(warmup + steps); /* copies complete out of step with the window: count them all */
        res->allreduce_s = r.ar.in_s > r.ar.out_s ? r.ar.in_s : r.ar.out_s; /* the two directions at once */
        res->allreduce_in_s = r.ar.in_s;
        /* the batches' copies: the engine's busy time and bytes less the all-reduce's copies into the GPU */
        res->dma_s = sim ? (d1.engine_busy_s[DEVICE_H2D] - begin.engine_busy_s[DEVICE_H2D]) / all - r.ar.in_s
                         : copy_s;
        res->host_copy_s = (d1.staging_s - begin.staging_s + p1.pin_s) / all;
        /* Passes over the data bytes of the whole run (labels are copied beside them, not counted). */
        double data = (double)ls.bytes, labels = (double)(ls.samples * sizeof(int64_t));
        double staged = (double)(d1.staged_bytes - begin.staged_bytes);
        staged -= staged > 0 ? labels : 0;
        double dma = (double)(d1.bytes[DEVICE_H2D] - begin.bytes[DEVICE_H2D]) - labels - all * (double)r.ar.in_bytes;
        res->copies = data > 0 ? (data + staged + (double)p1.pin_bytes + dma) / data : 0;
        double copy = res->dma_s + res->host_copy_s;
        res->hidden = copy > 0 ? 1 - (res->step_s - res->compute_s - res->allreduce_s) / copy : 1;
        res->hidden = res->hidden < 0 ? 0 : res->hidden > 1 ? 1 : res->hidden;
    }
    device_event_destroy(t0);
    device_event_destroy(t1);
    for (int i = 0; i < 2 * CH4_TIMELINE_STEPS; i++)
        device_event_destroy(marks[i]);
    ch4_rig_close(&r);
    return rc;
}

int ch4_loop_run(const struct ch4_opts *o, enum ch4_ring ring, uint32_t depth, struct ch4_loop_result *out)
{
    return ch4_run(o, ring, depth, o->warmup, o->steps, out, NULL);
}

static int ch4_timeline_plot(const struct ch4_opts *o, const struct ch4_timeline tl[2])
{
    char csv_path[PLOT_PATH_MAX], out_path[PLOT_PATH_MAX];
    if (plot_paths(o->out_dir, "timeline", csv_path, out_path) < 0)
        return err_wrap(ERR_ARG, "--out");
    struct plot_csv csv;
    int rc = plot_csv_open(&csv, csv_path, "--out");
    if (rc < 0)
        return rc;
    fprintf(csv.f, "buffers,step,what,start_ms,end_ms\n");
    for (int c = 0; c < 2; c++) {
        double t0 = tl[c].copy[0].start; /* from the first copy on: the loader's start-up is not the point */
        for (int k = 0; k < CH4_TIMELINE_STEPS; k++) {
            fprintf(csv.f, "%d,%d,copy,%.4f,%.4f\n", c + 1, k, tl[c].copy[k].start - t0, tl[c].copy[k].end - t0);
            fprintf(csv.f, "%d,%d,compute,%.4f,%.4f\n", c + 1, k, tl[c].compute[k].start - t0,
                    tl[c].compute[k].end - t0);
            if (tl[c].allreduce[k].end > 0)
                fprintf(csv.f, "%d,%d,allreduce,%.4f,%.4f\n", c + 1, k, tl[c].allreduce[k].start - t0,
                        tl[c].allreduce[k].end - t0);
        }
    }
    if ((rc = plot_csv_close(&csv, 0)) < 0)
        return rc;
    printf("wrote %s\n", csv_path);
    char title[160];
    snprintf(title, sizeof title, "in red, each step's all-reduce (--algo=%s) coming into the GPU on the same link",
             comm_algo_name(o->algo));
    return ch4_plot("chapters/04-transfer/timeline.gp", csv_path, out_path, o->allreduce ? title : NULL);
}

int ch4_loop(const struct ch4_opts *o)
{
    device_t *dev;
    int rc = ch4_device_open(o, &o->loop_link, &dev);
    if (rc)
        return rc;
    printf("== the training loop: %s\n", device_describe(dev));
    int sim = strcmp(device_backend_name(dev), "sim") == 0;
    device_close(dev);
    dataset_t *ds = NULL;
    rc = ch4_open_data(o, &ds, 1);
    if (rc)
        return rc;
    uint64_t record = dataset_info(ds)->record_bytes;
    printf("   %s, batches of %llu (%.2f MiB), %llu loader worker%s, %llu steps measured after %llu\n",
           dataset_name(ds), (unsigned long long)o->batch, (double)(o->batch * record) / (1 << 20),
           (unsigned long long)o->workers, o->workers == 1 ? "" : "s", (unsigned long long)o->steps,
           (unsigned long long)o->warmup);
    dataset_close(ds);
    if (o->allreduce)
        ch4_allreduce_describe(o, o->batch * record);
    const struct ch4_loop_row *rows = ch4_loop_rows;
    struct ch4_loop_result res[CH4_LOOP_ROWS];
    char csv_path[PLOT_PATH_MAX];
    struct plot_csv csv;
    int csv_open = 0;
    if (plot_paths(o->out_dir, "loop", csv_path, NULL) < 0)
        return err_wrap(ERR_ARG, "--out");
    printf("\n%-22s %-17s %7s %8s %10s %10s %10s %10s ", "loader ring", "(PyTorch)", "copies", "buffers", "data-wait",
           sim ? "dma(mod.)" : "dma", "host copy", "compute");
    if (o->allreduce)
        printf("%10s ", "all-reduce");
    printf("%10s %7s\n", "step", "hidden");
    for (size_t i = 0; rc == 0 && i < CH4_LOOP_ROWS; i++) {
        rc = ch4_loop_run(o, rows[i].ring, rows[i].depth, &res[i]);
        if (rc)
            break;
        if (!csv_open && (rc = plot_csv_open(&csv, csv_path, "--out")) < 0)
            break;
        csv_open = 1;
        if (i == 0)
            fprintf(csv.f, "ring,depth,copies_per_batch,data_wait_ms,dma_ms,host_copy_ms,compute_ms,step_ms,"
                           "host_step_ms,hidden%s\n", o->allreduce ? ",allreduce_ms" : "");
        const struct ch4_loop_result *x = &res[i];
        printf("%-22s %-17s %7.1f %8u %7.3f ms %7.3f ms %7.3f ms %7.3f ms ", ch4_ring_names[rows[i].ring],
               ch4_ring_torch[rows[i].ring], x->copies, rows[i].depth, x->wait_s * 1e3, x->dma_s * 1e3,
               x->host_copy_s * 1e3, x->compute_s * 1e3);
        if (o->allreduce)
            printf("%7.3f ms ", x->allreduce_s * 1e3);
        printf("%7.3f ms %6.0f%%\n", x->step_s * 1e3, 100 * x->hidden);
        fprintf(csv.f, "%s,%u,%.3f,%.4f,%.4f,%.4f,%.4f,%.4f,%.4f,%.4f", ch4_ring_names[rows[i].ring], rows[i].depth,
                x->copies, x->wait_s * 1e3, x->dma_s * 1e3, x->host_copy_s * 1e3, x->compute_s * 1e3,
                x->step_s * 1e3, x->host_step_s * 1e3, x->hidden);
        if (o->allreduce)
            fprintf(csv.f, ",%.4f", x->allreduce_s * 1e3);
        fprintf(csv.f, "\n");
    }
    if (csv_open)
        rc = plot_csv_close(&csv, rc);
    if (rc)
        return rc;
    const struct ch4_loop_result *serial = &res[2], *ours = &res[3];
    /* the link into the GPU carries the batch and the all-reduce's part; the compute stream runs the
     * compute and waits for the all-reduce */
    double link = ours->dma_s + ours->allreduce_in_s;
    double device = ours->compute_s + ours->allreduce_s;
    double bound = link > device ? link : device;
    printf("copies = passes over every byte of a batch, counted: collate, then the driver's staging or the pin\n"
           "copy, then the DMA. step = device time per step (the compute stream's, between events).\n"
           "hidden = the share of the copy (dma + host copy) that the step did not pay for%s.\n",
           o->allreduce ? " (the all-reduce is paid in full: the step waits for it)" : "");
    printf("double buffering: %.3f ms a step against %.3f ms with one buffer (%.2fx faster); the bound\n"
           "%s is %.3f ms, so the step is %.2f of it.\n",
           ours->step_s * 1e3, serial->step_s * 1e3, ours->step_s > 0 ? serial->step_s / ours->step_s : 0,
           o->allreduce ? "max(copy + the all-reduce's copies in, compute + the all-reduce)" : "max(copy, compute)",
           bound * 1e3, bound > 0 ? ours->step_s / bound : 0);
    printf("wrote %s\n", csv_path);
    struct ch4_loop_result tres;
    struct ch4_timeline tl[2];
    memset(tl, 0, sizeof tl);
    for (uint32_t depth = 1; rc == 0 && depth <= 2; depth++)
        rc = ch4_run(o, CH4_PINNED, depth, o->warmup, CH4_TIMELINE_STEPS, &tres, &tl[depth - 1]);
    if (rc == 0)
        rc = ch4_timeline_plot(o, tl);
    printf("\n");
    return rc;
}
