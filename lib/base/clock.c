/* clock: monotonic time, thread CPU time, sleeping and spinning (see clock.h). */
#include "base/clock.h"

#include <errno.h>
#include <math.h>
#include <time.h>

uint64_t clock_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

double clock_now_s(void) { return (double)clock_now_ns() * 1e-9; }

uint64_t clock_deadline_ns(uint64_t ns)
{
    uint64_t now = clock_now_ns();
    return ns > UINT64_MAX - now ? UINT64_MAX : now + ns;
}

uint64_t clock_deadline_s(double seconds)
{
    if (!(seconds > 0)) /* NaN too */
        return clock_now_ns();
    double ns = ceil(seconds * 1e9); /* never shorter than asked: 1e-300 s is 1 ns, not 0 */
    return ns >= 18446744073709551616.0 ? UINT64_MAX : clock_deadline_ns((uint64_t)ns);
}

uint64_t clock_thread_cpu_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

void clock_sleep_ns(uint64_t ns)
{
    struct timespec ts = {.tv_sec = (time_t)(ns / 1000000000u), .tv_nsec = (long)(ns % 1000000000u)};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

void clock_spin_ns(uint64_t ns)
{
    uint64_t end = clock_deadline_ns(ns);
    while (clock_now_ns() < end) {
    }
}
