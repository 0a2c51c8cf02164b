/* bench_idx: how fast records come out of a mmapped IDX file (see bench.h).
 *
 * What it measures: dataset_read() of random records, the call a loader
 * worker makes for every sample, on one thread, into a batch-sized buffer the
 * way collate fills a batch. The records are in the page cache (we touch them
 * all first), so the figure is the cost of the data path itself: index check,
 * dispatch, a 784-byte memcpy from a random place in a 47 MB mapping. The
 * limit it is compared with is memcpy bandwidth between two large buffers,
 * measured in the same run: a record read can at best move bytes that fast.
 */
#include "bench.h"

#include "clock.h"
#include "dataset.h"
#include "dataset_idx.h"
#include "error.h"
#include "plot.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define BENCH_READS (4u << 20)       /* random reads per repetition: long enough to dwarf timer noise */
#define BENCH_REPS 5                 /* repetitions; the median is reported */
#define BENCH_BATCH 256              /* records per destination batch buffer */
#define BENCH_COPY_BYTES (64u << 20) /* memcpy buffers, far larger than any last-level cache */
#define BENCH_TARGET 5e6             /* records/s per core: issue 2's target */

/* splitmix64 (Steele, Lea, Flood 2014): one multiply-xorshift step per index. */
void bench_fill_indices(uint64_t *idx, size_t n, uint64_t length, uint64_t seed)
{
    uint64_t s = seed;
    for (size_t i = 0; i < n; i++) {
        uint64_t z = (s += 0x9e3779b97f4a7c15ull);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        idx[i] = (z ^ (z >> 31)) % length;
    }
}

static int bench_cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double bench_median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, bench_cmp_double);
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
    int rc = plot_mkdir(opt->work_dir);
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

/* Median seconds of BENCH_REPS memcpy's of BENCH_COPY_BYTES. */
static int bench_memcpy(double *bytes_per_s)
{
    char *a = malloc(BENCH_COPY_BYTES), *b = malloc(BENCH_COPY_BYTES);
    if (!a || !b) {
        free(a);
        free(b);
        return err_set(ERR_NOMEM, "bench: out of memory for two %u MiB buffers", BENCH_COPY_BYTES >> 20);
    }
    memset(a, 1, BENCH_COPY_BYTES); /* fault every page in before timing */
    memset(b, 2, BENCH_COPY_BYTES);
    double t[BENCH_REPS];
    for (int r = 0; r < BENCH_REPS; r++) {
        double t0 = clock_now_s();
        memcpy(r % 2 ? a : b, r % 2 ? b : a, BENCH_COPY_BYTES);
        t[r] = clock_now_s() - t0;
    }
    /* read a byte so the copies cannot be optimised away */
    volatile char sink = a[BENCH_COPY_BYTES / 2] + b[BENCH_COPY_BYTES / 3];
    (void)sink;
    free(a);
    free(b);
    *bytes_per_s = BENCH_COPY_BYTES / bench_median(t, BENCH_REPS);
    return 0;
}

/* Median records/s of BENCH_REPS passes over BENCH_READS random indices. */
static int bench_reads(const dataset_t *ds, uint64_t seed, double *records_per_s)
{
    const struct dataset_info *in = dataset_info(ds);
    uint64_t n = in->record_bytes;
    uint64_t *idx = malloc(BENCH_READS * sizeof *idx);
    uint8_t *batch = malloc(BENCH_BATCH * n);
    int rc = 0;
    if (!idx || !batch) {
        rc = err_set(ERR_NOMEM, "bench: out of memory for %u indices", BENCH_READS);
        goto out;
    }
    bench_fill_indices(idx, BENCH_READS, in->length, seed);
    struct dataset_record rec;
    for (uint64_t i = 0; rc == 0 && i < in->length; i++) /* page every record in */
        rc = dataset_read(ds, i, batch, n, &rec);
    double t[BENCH_REPS];
    for (int r = 0; rc == 0 && r < BENCH_REPS; r++) {
        double t0 = clock_now_s();
        for (uint32_t i = 0; rc == 0 && i < BENCH_READS; i++)
            rc = dataset_read(ds, idx[i], batch + (i % BENCH_BATCH) * n, n, &rec);
        t[r] = clock_now_s() - t0;
    }
    if (rc == 0)
        *records_per_s = BENCH_READS / bench_median(t, BENCH_REPS);
out:
    free(idx);
    free(batch);
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
    printf("bench idx: random-access reads from a mmapped IDX file, one thread\n");
    printf("  data      %s%s: %llu records of %llu bytes\n", path, why,
           (unsigned long long)in->length, (unsigned long long)in->record_bytes);
    double rps = 0, copy = 0;
    rc = bench_reads(ds, opt->seed, &rps);
    if (rc == 0)
        rc = bench_memcpy(&copy);
    if (rc == 0) {
        double bps = rps * (double)in->record_bytes;
        printf("  reads     %u random records x %d (median): %.2f M records/s = %.2f GB/s\n", BENCH_READS,
               BENCH_REPS, rps / 1e6, bps / 1e9);
        printf("  memcpy    %u MiB buffer to buffer, same run (median of %d): %.2f GB/s\n",
               BENCH_COPY_BYTES >> 20, BENCH_REPS, copy / 1e9);
        printf("  ratio     record bytes/s over memcpy bytes/s: %.2f\n", bps / copy);
        printf("  target    >= %.1f M records/s per core: %s\n", BENCH_TARGET / 1e6,
               rps >= BENCH_TARGET ? "PASS" : "MISS");
    }
    dataset_close(ds);
    return rc;
}
