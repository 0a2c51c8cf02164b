/* vclock: each thread's modelled host clock (see vclock.h). A thread-local
 * integer: no lock, no shared state but the wall-clock switch. */
#include "base/vclock.h"

#include "base/clock.h"

#include <math.h>

static _Thread_local uint64_t vclock_ns;
static int vclock_wall;           /* set before threads start: read without a lock */
static uint64_t vclock_wall_origin;

uint64_t vclock_now_ns(void)
{
    if (__atomic_load_n(&vclock_wall, __ATOMIC_RELAXED))
        return clock_now_ns() - vclock_wall_origin;
    return vclock_ns;
}

double vclock_now_s(void) { return (double)vclock_now_ns() * 1e-9; }

uint64_t vclock_advance_ns(uint64_t ns)
{
    if (vclock_is_wall())
        return vclock_now_ns();
    vclock_ns = ns > UINT64_MAX - vclock_ns ? UINT64_MAX : vclock_ns + ns;
    return vclock_ns;
}

uint64_t vclock_wait_until_ns(uint64_t t)
{
    if (vclock_is_wall())
        return vclock_now_ns();
    if (t > vclock_ns)
        vclock_ns = t;
    return vclock_ns;
}

void vclock_set_ns(uint64_t t) { vclock_ns = t; }

uint64_t vclock_ns_of_s(double seconds)
{
    if (!(seconds > 0))
        return 0;
    if (seconds >= 18446744073.709551615)
        return UINT64_MAX;
    return (uint64_t)llround(seconds * 1e9);
}

uint64_t vclock_memcpy_ns(uint64_t bytes) { return vclock_ns_of_s((double)bytes / VCLOCK_HOST_MEMCPY_BPS); }

void vclock_use_wall(int wall)
{
    if (wall && !vclock_is_wall())
        vclock_wall_origin = clock_now_ns();
    __atomic_store_n(&vclock_wall, wall != 0, __ATOMIC_RELAXED);
}

int vclock_is_wall(void) { return __atomic_load_n(&vclock_wall, __ATOMIC_RELAXED); }
