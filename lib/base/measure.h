/* measure: the limits and peers a benchmark compares itself with.
 *
 * Where it sits: under every chapter's benchmark. A figure means something only
 * next to a limit measured in the same run on the same machine: the memcpy
 * bandwidth bounds a dataset read, a collate and a simulated copy engine; a
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

/* memcpy bandwidth between two buffers of `bytes` bytes each, on one thread. */
struct measure_bandwidth {
    double best_bps;   /* bytes per second of the fastest trial */
    double median_bps; /* ... of the median trial */
    size_t bytes;
    int trials;
};

/* Copies `bytes` bytes from one buffer to another `trials` times (both faulted
 * in first) and fills *out. Make `bytes` far larger than the last-level cache
 * for a memory bound, or the size of the records under test for a like-for-like
 * reference. 0, ERR_ARG (bytes or trials 0, trials over 1000) or ERR_NOMEM. */
int measure_memcpy(size_t bytes, int trials, enum measure_clock clock, struct measure_bandwidth *out);

/* Runs fn(arg, result) in a forked child and copies its `result_size` bytes of
 * `result` back through a pipe, with the child's peak resident set in
 * *peak_kib (wait4's ru_maxrss): the memory a strategy really needed, counted
 * apart from the parent's. fn returns 0 or a negative ERR_* with err_set();
 * the child's message comes back too. Returns fn's result, or ERR_IO when the
 * child could not start or died (a signal, out of memory: said which). */
int measure_in_child(int (*fn)(void *arg, void *result), void *arg, void *result, size_t result_size,
                     uint64_t *peak_kib);

#endif
