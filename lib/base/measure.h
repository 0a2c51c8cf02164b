/* measure: the limits and peers a benchmark compares itself with.
 *
 * Where it sits: under every chapter's benchmark. A figure means something only
 * next to a limit measured in the same run on the same machine: the memcpy
 * bandwidth bounds a dataset read, a collate, an all-reduce's memory traffic
 * and a simulated copy engine; a
 * child process's peak resident set is the honest memory cost of a strategy
 * (the parent's own allocations do not count); a thread's CPU time is what a
 * rate on a shared machine should be divided by (see clock_thread_cpu_ns()).
 *
 * Read measure_memcpy() first.
 */
#ifndef DDP_MEASURE_H
#define DDP_MEASURE_H

#include <stddef.h>
#include <stdint.h>

/* Which clock a measurement runs on. */
enum measure_clock {
    MEASURE_WALL,       /* monotonic wall time: what a user waits */
    MEASURE_THREAD_CPU, /* this thread's CPU time: immune to being descheduled */
};

/* A bandwidth from `trials` timed trials that each moved `bytes` bytes. Which
 * figure to quote is the benchmark's choice: the best trial on a shared
 * machine (other people's work only ever adds time), the median for a
 * typical one, the mean when the trials stand for consecutive epochs. */
struct measure_bandwidth {
    double best_bps;   /* bytes per second of the fastest trial */
    double median_bps; /* ... of the median trial */
    double mean_bps;   /* all bytes over all the trials' time */
    size_t bytes;      /* per trial, all threads together */
    int trials;
};

/* Sorts the timings v[0..n) from the fastest: v[0] is the best trial, v[n / 2]
 * the median. */
void measure_sort(double *v, size_t n);

/* Copies `bytes` bytes from one buffer to another `trials` times (both faulted
 * in first) and fills *out. Make `bytes` far larger than the last-level cache
 * for a memory bound. 0, ERR_ARG (bytes or trials 0, trials over 1000) or
 * ERR_NOMEM. */
int measure_memcpy(size_t bytes, int trials, enum measure_clock clock, struct measure_bandwidth *out);

/* The general form behind measure_memcpy(): `threads` threads copy at once,
 * each between two buffers of its own of `bytes` bytes, with `kernel` (NULL:
 * memcpy). A trial starts on every thread together and lasts until the
 * slowest thread is done; its bandwidth counts every thread's bytes. A kernel
 * that reduces (dst = dst + src) measures an adder's bandwidth the same way.
 * One thread runs on the caller's thread. ERR_ARG as measure_memcpy(), or
 * threads outside 1 .. 256; ERR_NOMEM; ERR_IO when a thread cannot start. */
struct measure_copy {
    size_t bytes;    /* per thread and trial */
    int trials;      /* 1 .. 1000 */
    int threads;     /* 1 .. 256 */
    enum measure_clock clock;
    void (*kernel)(void *user, void *dst, const void *src, size_t bytes); /* NULL: memcpy */
    void *user;
};
int measure_copy(const struct measure_copy *spec, struct measure_bandwidth *out);

/* A loader's collate without the loader: the memcpy bandwidth of gathering
 * `count` records of `record_bytes` each from a source of `records` records,
 * in the order `order` (count indices below `records`), into a destination of
 * `window` records written round and round (a batch buffer). The like-for-like
 * reference for records moved one by one from random places into a batch,
 * on one thread. ERR_ARG for an index past the source, a zero size, or sizes
 * that overflow; ERR_NOMEM. */
int measure_gather(size_t record_bytes, uint64_t records, const uint64_t *order, uint64_t count, uint64_t window,
                   int trials, enum measure_clock clock, struct measure_bandwidth *out);

/* Runs fn(arg, result) in a forked child and copies its `result_size` bytes of
 * `result` back through a pipe, with the child's peak resident set in
 * *peak_kib (wait4's ru_maxrss): the memory a strategy really needed, counted
 * apart from the parent's. fn returns 0 or a negative ERR_* with err_set();
 * the child's message comes back too. The child gets SIGTERM when the caller
 * dies, so that killing the program ends the measurement too. Returns fn's
 * result, or ERR_IO when the child could not start or died (a signal, out of
 * memory: said which). */
int measure_in_child(int (*fn)(void *arg, void *result), void *arg, void *result, size_t result_size,
                     uint64_t *peak_kib);

#endif
