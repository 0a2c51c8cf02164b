/* experiment: chapter 1's lesson experiment, "200 million lines in a JSONL index
 * exhaust RAM: what do I do?". It generates a large JSONL file and compares
 * load-everything, chunked reading and mmap + offset index on peak RSS, time to
 * first sample and random-access reads per second; prints a table, writes CSV
 * and renders plot.gp into out_dir. Called by main.c (--experiment, --plot). */
#ifndef CH1_EXPERIMENT_H
#define CH1_EXPERIMENT_H

#include <stdint.h>

struct experiment_options {
    uint64_t lines;      /* lines of the generated JSONL file */
    const char *work_dir; /* where the generated file and its index go */
    const char *out_dir;  /* where CSV, PNG and SVG go (notebooks-out/chapter-1) */
    uint64_t seed;
};

/* 0, or a negative ERR_* with err_msg() set. */
int experiment_run(const struct experiment_options *opt);

#endif
