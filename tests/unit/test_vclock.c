/* test_vclock: the modelled host clock (lib/base/vclock.h).
 *
 * A thread's clock starts at 0 and moves only by what the code says: advance
 * adds, wait_until takes the later time, and neither reads the wall clock (a
 * sleep changes nothing); every thread has its own; conversions round to the
 * nearest nanosecond and saturate; the wall mode reads the wall clock and
 * ignores the model's moves.
 */
#include "check.h"
#include "base/clock.h"
#include "base/vclock.h"

#include <pthread.h>
#include <stdint.h>

TEST(vclock_starts_at_zero_and_moves_only_when_told)
{
    CHECK_EQ_U64(vclock_now_ns(), 0);
    clock_sleep_ns(20 * 1000 * 1000); /* 20 ms of wall time: not modelled time */
    CHECK_EQ_U64(vclock_now_ns(), 0);
    CHECK_EQ_U64(vclock_advance_ns(1500), 1500);
    CHECK_EQ_U64(vclock_wait_until_ns(1000), 1500); /* already later: no change */
    CHECK_EQ_U64(vclock_wait_until_ns(4000), 4000);
    CHECK_EQ_U64(vclock_now_ns(), 4000);
    CHECK(vclock_now_s() > 3.999999e-6 && vclock_now_s() < 4.000001e-6);
    vclock_set_ns(7);
    CHECK_EQ_U64(vclock_now_ns(), 7);
    vclock_set_ns(UINT64_MAX - 1);
    CHECK_EQ_U64(vclock_advance_ns(10), UINT64_MAX); /* saturates, never wraps to the past */
}

static void *vclock_thread(void *arg)
{
    uint64_t *out = arg;
    out[0] = vclock_now_ns(); /* a new thread starts at 0, whatever its creator's clock says */
    vclock_advance_ns(300);
    out[1] = vclock_now_ns();
    return NULL;
}

TEST(vclock_is_per_thread)
{
    vclock_advance_ns(1000000);
    uint64_t seen[2] = {99, 99};
    pthread_t t;
    CHECK_EQ(pthread_create(&t, NULL, vclock_thread, seen), 0);
    pthread_join(t, NULL);
    CHECK_EQ_U64(seen[0], 0);
    CHECK_EQ_U64(seen[1], 300);
    CHECK_EQ_U64(vclock_now_ns(), 1000000); /* the other thread's advance is not ours */
}

TEST(vclock_converts_seconds_exactly)
{
    CHECK_EQ_U64(vclock_ns_of_s(0), 0);
    CHECK_EQ_U64(vclock_ns_of_s(-1), 0);
    CHECK_EQ_U64(vclock_ns_of_s(0.0 / 0.0), 0);
    CHECK_EQ_U64(vclock_ns_of_s(1e-9), 1);
    CHECK_EQ_U64(vclock_ns_of_s(1.4e-9), 1);
    CHECK_EQ_U64(vclock_ns_of_s(1.6e-9), 2);
    CHECK_EQ_U64(vclock_ns_of_s(5e-6), 5000);
    CHECK_EQ_U64(vclock_ns_of_s(2.5), 2500000000u);
    CHECK_EQ_U64(vclock_ns_of_s(1e30), UINT64_MAX);
}

TEST(vclock_wall_mode_reads_the_wall_clock)
{
    CHECK(!vclock_is_wall());
    vclock_use_wall(1);
    CHECK(vclock_is_wall());
    uint64_t a = vclock_now_ns();
    clock_sleep_ns(5 * 1000 * 1000);
    uint64_t b = vclock_now_ns();
    CHECK(b - a >= 5 * 1000 * 1000);
    uint64_t c = vclock_advance_ns(1000000000000ull); /* no model to follow: nothing moves */
    CHECK(c < 1000000000000ull);
    vclock_use_wall(0);
    CHECK(!vclock_is_wall());
    CHECK_EQ_U64(vclock_now_ns(), 0);
}
