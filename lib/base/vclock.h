/* vclock: modelled time, the simulator's clock (DESIGN.md, "Virtual time").
 *
 * Where it sits: under everything that reports a time of the simulated
 * machine. Each thread has its own host clock: integer nanoseconds since its
 * rank started, 0 when the thread starts (origin 0 on every rank). It moves
 * only when the code says what something costs (vclock_advance_ns) or that
 * the host waited for something that ends at a known modelled time
 * (vclock_wait_until_ns), never because the host's wall clock moved: two runs
 * with the same flags read the same times on any machine under any load.
 * Integer nanoseconds, so that no byte of a figure depends on the order in
 * which floating-point durations were summed.
 *
 * A real backend (a GPU, MPI across machines) has no model to follow: with
 * vclock_use_wall(1) every thread's clock reads the wall clock since that
 * call instead, and advance and wait_until do nothing. The wall clock is
 * still what watchdogs use for real hangs (base/clock.h).
 *
 * Read vclock_now_ns() and vclock_wait_until_ns() first.
 */
#ifndef DDP_VCLOCK_H
#define DDP_VCLOCK_H

#include <stdint.h>

/* The host's memcpy, as modelled: 10 GB/s, one core's copy rate on a
 * current x86 server (STREAM's Copy kernel on one core of a Xeon or EPYC
 * runs at 10 to 15 GB/s; we take the low end). A modelled figure: this
 * machine's memcpy shows in no modelled time. The simulated device's
 * staging, the loader's collate and the prefetcher's pin copy pay it. */
#define VCLOCK_HOST_MEMCPY_BPS 10e9

/* The modelled time of a host memcpy of `bytes` bytes, nanoseconds. */
uint64_t vclock_memcpy_ns(uint64_t bytes);

/* This thread's modelled time, nanoseconds (0 when the thread started). */
uint64_t vclock_now_ns(void);

/* The same in seconds, for tables (a conversion only: sums stay in ns). */
double vclock_now_s(void);

/* This thread's host spends `ns` nanoseconds (a memcpy it models, a cost it
 * pays). Saturates at UINT64_MAX. Returns the new time. */
uint64_t vclock_advance_ns(uint64_t ns);

/* This thread's host waits for something that ends at modelled time t: its
 * clock becomes max(now, t). Returns the new time. */
uint64_t vclock_wait_until_ns(uint64_t t);

/* Sets this thread's clock (a thread that works for another, such as a
 * worker taking over its rank's time, or a test). */
void vclock_set_ns(uint64_t t);

/* Seconds to nanoseconds for a modelled duration: rounded to the nearest,
 * 0 for 0, negative or NaN, UINT64_MAX past what 64 bits hold. */
uint64_t vclock_ns_of_s(double seconds);

/* 1: every clock reads the wall clock since the first such call (a real
 * backend: device_open of a GPU calls it); 0: modelled time again (the
 * default). Process-wide. */
void vclock_use_wall(int wall);

/* 1 when the clocks read the wall clock. */
int vclock_is_wall(void);

#endif
