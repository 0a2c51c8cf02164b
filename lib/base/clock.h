/* clock: the one time source of every measurement (loader data-wait, copy and
 * all-reduce timings, benchmark rates): monotonic wall time, so wall-clock
 * jumps never produce negative durations, and a thread's own CPU time. */
#ifndef DDP_CLOCK_H
#define DDP_CLOCK_H

#include <stdint.h>

/* Nanoseconds since an arbitrary fixed point (CLOCK_MONOTONIC). */
uint64_t clock_now_ns(void);

/* The same in seconds, as a double, for rates and tables. */
double clock_now_s(void);

/* The shortest timeout a watchdog of the project accepts (the communicators,
 * the rendezvous, the loader): 10 ms. A watchdog shorter than the time a
 * runnable thread can wait for a core fires on threads that are only being
 * scheduled, and blames a healthy rank or worker: Linux's CFS scheduler aims
 * to run every runnable thread once per 6 ms x (1 + log2 CPUs)
 * (sysctl_sched_latency, kernel/sched/fair.c). Tiny values such as 1e-300 s
 * used to round to a deadline of "now". */
#define CLOCK_MIN_TIMEOUT_S 0.01

/* The clock_now_ns() time `ns` nanoseconds from now. Saturates at
 * UINT64_MAX instead of wrapping: a wait of 2^64-1 ns is "forever", never
 * "already over". Every deadline of the project is made here or below. */
uint64_t clock_deadline_ns(uint64_t ns);

/* The clock_now_ns() time `seconds` from now, as above: 0, negative or NaN
 * seconds give now; more seconds than uint64_t nanoseconds can hold give
 * UINT64_MAX. (A plain (uint64_t)(seconds * 1e9) is undefined behaviour
 * past 2^64 and rounds tiny timeouts to 0.) */
uint64_t clock_deadline_s(double seconds);

/* CPU time this thread has used, in nanoseconds (CLOCK_THREAD_CPUTIME_ID). A
 * rate per CPU-second of one thread is what a benchmark on a shared machine
 * can trust: the wall clock also counts the time other jobs held the core. */
uint64_t clock_thread_cpu_ns(void);

/* Sleeps for `ns` nanoseconds, resuming after signals. */
void clock_sleep_ns(uint64_t ns);

/* Burns `ns` nanoseconds of CPU on this thread (a stand-in for decode or compute
 * work: unlike sleeping, it occupies a core, as real work does). */
void clock_spin_ns(uint64_t ns);

#endif
