/* experiment: chapter 1's lesson experiment, "200 million lines in a JSONL index
 * exhaust RAM: what do I do?". It generates a large JSONL file and compares
 * load-everything, chunked reading and mmap + offset index on peak RSS, time to
 * first sample and random-access reads per second; prints a table, writes CSV
 * and renders plot.gp into out_dir. Called by main.c (--experiment, --plot).
 * The JSONL index benchmark (--bench=jsonl) lives here too: it shares the
 * generated file. */
#ifndef CH1_EXPERIMENT_H
#define CH1_EXPERIMENT_H

#include <stdint.h>

/* "A few million lines": 4 M lines of ~147 bytes, a 590 MB file,
 * about 20 s for the whole experiment on a 2-core shared machine. */
#define EXPERIMENT_DEFAULT_LINES 4000000u
#define EXPERIMENT_PLOT "jsonl_strategies" /* its CSV, PNG and SVG in out_dir */

struct experiment_options {
    uint64_t lines;      /* lines of the generated JSONL file */
    const char *work_dir; /* where the generated file and its index go */
    const char *out_dir;  /* where CSV, PNG and SVG go (--out, default build/out/chapter-1) */
    uint64_t seed;
};

/* 0, or a negative ERR_* with err_msg() set. */
int experiment_run(const struct experiment_options *opt);

/* The JSONL index build against `wc -l` on the same generated file of `lines`
 * lines (made in, or reused from, work_dir), best of 3 runs each. Prints both
 * rates in MB/s and ends with the verdict line (lib/base/verdict.h): the
 * ratio, target >= 0.5, PASS or MISS. 0 whatever the ratio (a miss is a
 * finding, not a failure), or a negative ERR_* when a run could not be made. */
int experiment_bench_index(uint64_t lines, const char *work_dir);

#endif
