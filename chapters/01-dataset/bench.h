/* bench: chapter 1's benchmarks, run by `build/chapter-1 --bench=NAME` (and
 * so by bench.sh and `make bench`). Each prints its figure next to the peer or
 * physical limit it is measured against, and the ratio, in the same run. */
#ifndef CH1_BENCH_H
#define CH1_BENCH_H

#include <stddef.h>
#include <stdint.h>

struct bench_options {
    const char *data;     /* the dataset to measure, or NULL for the benchmark's default */
    const char *work_dir; /* where generated inputs go */
    uint64_t seed;        /* of the random indices */
    uint64_t lines;       /* of the JSONL benchmark's generated file */
};

/* Random-access reads of records from a mmapped IDX file, in records per
 * CPU-second of one thread, one dataset_read() at a time and in batches of 256
 * with dataset_read_batch(), each against memcpy bandwidth measured in the
 * same run; ends with the verdict line (lib/base/verdict.h) on the 5 M
 * records/s target, judged on the batched rate. Reads opt->data, or (NULL) a generated
 * IDX file of Fashion-MNIST's shape (60000 x 28 x 28) in work_dir. 0, or a
 * negative ERR_* with err_msg() set. */
int bench_idx(const struct bench_options *opt);

/* Fills idx[0..n) with uniform random indices below `length`, from `seed`
 * (splitmix64): the same seed, the same indices. */
void bench_fill_indices(uint64_t *idx, size_t n, uint64_t length, uint64_t seed);

#endif
