/* bench_idx: how fast records come out of a mmapped IDX file (see bench.h).
 *
 * What it measures: random records read on one thread into a batch-sized
 * buffer, two ways: one dataset_read() at a time, and dataset_read_batch() of
 * BENCH_BATCH indices, the call the loader's collate makes for a batch (which
 * IDX overlaps with prefetching). The records are in the page cache (we touch
 * them all first), so the figure is the cost of the data path itself: index
 * check, dispatch, a 784-byte memcpy from a random place in a 47 MB mapping.
 * The limit it is compared with is memcpy bandwidth between two large buffers,
 * measured in the same run: a record read can at best move bytes that fast.
 * The 5 M records/s target is judged on the batched rate, since that is how
 * records are read in training.
 */
#include "bench.h"

#include "dataset/dataset.h"
#include "dataset/dataset_idx.h"
#include "base/error.h"
#include "base/clock.h"
#include "base/fsutil.h"
#include "base/hash.h"
#include "base/measure.h"
#include "base/verdict.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define BENCH_READS (4u << 20)       /* random reads per repetition: long enough to dwarf timer noise */
#define BENCH_REPS 5                 /* repetitions; the median is reported */
#define BENCH_BATCH 256              /* records per destination batch buffer */
#define BENCH_COPY_BYTES (64u << 20) /* memcpy buffers, far larger than any last-level cache */
#define BENCH_TARGET 5e6             /* records/s per core: the chapter's target */

/* splitmix64's stream (hash.h) from `seed`: one multiply-xorshift step per index. */
void bench_fill_indices(uint64_t *idx, size_t n, uint64_t length, uint64_t seed)
{
    uint64_t s = seed;
    for (size_t i = 0; i < n; i++)
        idx[i] = hash_splitmix64_next(&s) % length;
}

static double bench_median(double *v, int n)
{
    measure_sort(v, (size_t)n);
    return v[n / 2];
}

/* The IDX file to read: opt->data, or one we generate. */
static int bench_idx_source(const struct bench_options *opt, char *path, size_t cap, const char **why)
{
    if (opt->data) {
        snprintf(path, cap, "%s", opt->data);
        *why = "";
        return 0;
    }
    *why = " (generated: synthetic records in Fashion-MNIST's shape)";
    int rc = fsutil_mkdir_p(opt->work_dir);
    if (rc < 0)
        return rc;
    snprintf(path, cap, "%s/bench-images-idx3-ubyte", opt->work_dir);
    if (access(path, R_OK) == 0)
        return 0;
    struct dataset_options so;
    dataset_options_default(&so); /* 60000 x 784: Fashion-MNIST's shape */
    so.seed = opt->seed;
    dataset_t *syn;
    rc = dataset_open("synthetic", &so, &syn);
    if (rc == 0)
        rc = dataset_idx_write(syn, 28, 28, path, NULL);
    dataset_close(syn);
    return rc;
}

/* Seconds of CPU time this thread has used. The rates are per CPU-second of
 * the reading thread, i.e. per core: on a shared machine the wall clock also
 * counts the time other jobs held the core, which says nothing about the
 * data path (and made wall-clock runs here swing by 2x). */
static double bench_cpu_s(void) { return (double)clock_thread_cpu_ns() * 1e-9; }

/* Median records/s of BENCH_REPS passes over BENCH_READS random indices, read
 * one dataset_read() at a time (`batched` 0) or BENCH_BATCH indices per
 * dataset_read_batch() (`batched` 1), into the same batch buffer. */
static int bench_reads(const dataset_t *ds, uint64_t seed, int batched, double *records_per_s)
{
    const struct dataset_info *in = dataset_info(ds);
    uint64_t n = in->record_bytes;
    uint64_t *idx = malloc(BENCH_READS * sizeof *idx);
    uint8_t *batch = malloc(BENCH_BATCH * n);
    struct dataset_record *recs = malloc(BENCH_BATCH * sizeof *recs);
    int rc = 0;
    if (!idx || !batch || !recs) {
        rc = err_set(ERR_NOMEM, "bench: out of memory for %u indices", BENCH_READS);
        goto out;
    }
    bench_fill_indices(idx, BENCH_READS, in->length, seed);
    for (uint64_t i = 0; rc == 0 && i < in->length; i++) /* page every record in */
        rc = dataset_read(ds, i, batch, n, recs);
    double t[BENCH_REPS];
    for (int r = 0; rc == 0 && r < BENCH_REPS; r++) {
        double t0 = bench_cpu_s();
        if (batched) {
            for (uint32_t i = 0; rc == 0 && i < BENCH_READS; i += BENCH_BATCH)
                rc = dataset_read_batch(ds, idx + i, BENCH_BATCH, batch, n, recs);
        } else {
            for (uint32_t i = 0; rc == 0 && i < BENCH_READS; i++)
                rc = dataset_read(ds, idx[i], batch + (i % BENCH_BATCH) * n, n, recs);
        }
        t[r] = bench_cpu_s() - t0;
    }
    if (rc == 0)
        *records_per_s = BENCH_READS / bench_median(t, BENCH_REPS);
out:
    free(idx);
    free(batch);
    free(recs);
    return rc;
}

int bench_idx(const struct bench_options *opt)
{
    char path[4096];
    const char *why;
    int rc = bench_idx_source(opt, path, sizeof path, &why);
    if (rc < 0)
        return rc;
    dataset_t *ds;
    if ((rc = dataset_open(path, NULL, &ds)) < 0)
        return rc;
    const struct dataset_info *in = dataset_info(ds);
    if (in->kind != DATASET_IDX || in->length == 0) {
        dataset_close(ds);
        return err_set(ERR_ARG, "%s is not a non-empty IDX file (the benchmark reads 784-byte records from mmapped IDX)", path);
    }
    printf("bench idx: random-access reads from a mmapped IDX file, one thread, per CPU-second of it\n");
    printf("  data      %s%s: %llu records of %llu bytes\n", path, why,
           (unsigned long long)in->length, (unsigned long long)in->record_bytes);
    double one = 0, batched = 0, copy = 0;
    rc = bench_reads(ds, opt->seed, 0, &one);
    if (rc == 0)
        rc = bench_reads(ds, opt->seed, 1, &batched);
    struct measure_bandwidth bw; /* the same clock and statistic as the reads: per CPU-second, median */
    if (rc == 0 && (rc = measure_memcpy(BENCH_COPY_BYTES, BENCH_REPS, MEASURE_THREAD_CPU, &bw)) == 0)
        copy = bw.median_bps;
    if (rc == 0) {
        double rb = (double)in->record_bytes;
        printf("  memcpy    %u MiB buffer to buffer, same run (median of %d): %.2f GB/s\n",
               BENCH_COPY_BYTES >> 20, BENCH_REPS, copy / 1e9);
        printf("  one       %u random dataset_read() x %d (median): %.2f M records/s = %.2f GB/s, %.2f of memcpy\n",
               BENCH_READS, BENCH_REPS, one / 1e6, one * rb / 1e9, one * rb / copy);
        printf("  batched   the same indices, dataset_read_batch() of %d as collate reads them: %.2f M records/s "
               "= %.2f GB/s, %.2f of memcpy (%.2fx one at a time)\n",
               BENCH_BATCH, batched / 1e6, batched * rb / 1e9, batched * rb / copy, batched / one);
        /* the target is a rate of its own, judged on the batched reads (how the loader reads) */
        struct verdict v = {.what = "random IDX reads, batched, per core", .figure = batched / 1e6,
                            .unit = "M records/s", .peer = "the target rate", .peer_figure = BENCH_TARGET / 1e6,
                            .peer_unit = "M records/s", .ratio = batched / BENCH_TARGET, .op = VERDICT_AT_LEAST,
                            .target = 1};
        int printed = verdict_print(stdout, &v);
        rc = printed < 0 ? printed : 0;
    }
    dataset_close(ds);
    return rc;
}
