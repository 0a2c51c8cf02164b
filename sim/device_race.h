/* device_race: the ordering half of the simulated device's use-before-ready
 * detector (the other half, host writes into in-flight pinned buffers, is
 * sim/write_guard.h).
 *
 * Where it sits: inside sim/device_sim.c, which calls it under its lock at
 * every copy and kernel launch. Pure logic, no threads: it answers "is this
 * access to a device buffer ordered after every conflicting access before
 * it?" with vector clocks, the happens-before bookkeeping of race detectors
 * such as ThreadSanitizer, applied to streams instead of threads:
 *
 *   - every stream numbers its operations 1, 2, 3, ...;
 *   - a stream's clock says, for every stream, the last operation known to
 *     be ordered before the stream's next one: its own previous operation,
 *     and whatever an event it waited on had seen when it was recorded;
 *   - the host has a clock too: synchronizing on an event or a stream joins
 *     what that one has seen, and everything the host issues afterwards is
 *     ordered after it;
 *   - an access is ordered after an earlier one on stream s, number n, when
 *     the accessing stream's clock has clock[s] >= n.
 *
 * Two accesses to overlapping bytes of a device buffer conflict when either
 * writes; a conflict that is not ordered is a hazard, reported with both
 * operations, both streams, the buffer and the batch. Read
 * race_buffer_access() first.
 */
#ifndef DDP_DEVICE_RACE_H
#define DDP_DEVICE_RACE_H

#include <stddef.h>
#include <stdint.h>

#define RACE_MAX_STREAMS 64

struct race_clock {
    uint64_t t[RACE_MAX_STREAMS];
};

/* into[i] = max(into[i], from[i]) for every stream. */
void race_clock_join(struct race_clock *into, const struct race_clock *from);

/* One access to a device buffer by one operation. */
struct race_access {
    uint64_t lo, hi;      /* bytes [lo, hi) of the buffer */
    int write;
    int stream;           /* the stream's number, 0 .. RACE_MAX_STREAMS-1 */
    uint64_t seq;         /* the operation's number on that stream */
    char what[192];       /* "copy #12 (H2D of 9.60 MiB from pinned 'loader slot 1', batch 5)" */
    char stream_name[48];
};

/* The recent accesses to one device buffer. Zero-initialize it. */
struct race_buffer {
    struct race_access *acc;
    int n, cap;
};

/* Checks access `a`, made by an operation whose stream clock (after the join
 * with the host's) is `clock`, against the accesses recorded on buffer
 * `name`, then records it. Returns 0, or 1 with msg (len bytes) describing
 * the first hazard. ERR_NOMEM if the record could not grow (the access is
 * then only checked). */
int race_buffer_access(struct race_buffer *b, const char *name, const struct race_access *a,
                       const struct race_clock *clock, char *msg, size_t len);

void race_buffer_free(struct race_buffer *b);

#endif
