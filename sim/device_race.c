/* device_race: vector-clock ordering checks on device buffers (see device_race.h).
 *
 * A buffer keeps its recent accesses. A new write supersedes the older
 * accesses it covers once it is known to be ordered after them, so a
 * steady loop (copy into a buffer, compute on it, copy again) keeps a
 * handful of records, not one per batch. The list is capped: past the cap
 * the oldest record goes, which can only miss a hazard, never invent one.
 */
#include "sim/device_race.h"

#include "base/error.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define RACE_MAX_RECORDS 64

void race_clock_join(struct race_clock *into, const struct race_clock *from)
{
    for (int i = 0; i < RACE_MAX_STREAMS; i++)
        if (from->t[i] > into->t[i])
            into->t[i] = from->t[i];
}

static int race_ordered(const struct race_access *earlier, const struct race_clock *clock)
{
    return clock->t[earlier->stream] >= earlier->seq;
}

/* The message of a hazard between earlier access x and new access a. */
static void race_describe(const char *name, const struct race_access *x, const struct race_access *a, char *msg,
                          size_t len)
{
    const char *kind = a->write && !x->write ? "overwrite before done"
                       : a->write            ? "write after write"
                                             : "use before ready";
    snprintf(msg, len,
             "%s: %s on stream '%s' %s device buffer '%s', which %s on stream '%s' %s, and nothing orders the "
             "one before the other: record an event on '%s' after it and make '%s' wait for that event "
             "(device_stream_wait_event) before this",
             kind, a->what, a->stream_name, a->write ? "writes" : "reads", name, x->what, x->stream_name,
             x->write ? "writes" : "reads", x->stream_name, a->stream_name);
}

static void race_drop(struct race_buffer *b, int i)
{
    memmove(&b->acc[i], &b->acc[i + 1], (size_t)(b->n - i - 1) * sizeof *b->acc);
    b->n--;
}

int race_buffer_access(struct race_buffer *b, const char *name, const struct race_access *a,
                       const struct race_clock *clock, char *msg, size_t len)
{
    for (int i = 0; i < b->n; i++) {
        const struct race_access *x = &b->acc[i];
        if (x->hi <= a->lo || a->hi <= x->lo || !(x->write || a->write) || x->stream == a->stream)
            continue; /* disjoint, two reads, or one stream (which orders itself) */
        if (!race_ordered(x, clock)) {
            race_describe(name, x, a, msg, len);
            return 1;
        }
    }
    /* Everything this access covers and is ordered after is superseded: a
     * later access conflicting with the old one conflicts with this one too
     * (a write), or is checked against the write the old one followed (a
     * read from the same stream). */
    for (int i = b->n - 1; i >= 0; i--) {
        const struct race_access *x = &b->acc[i];
        int covered = a->lo <= x->lo && x->hi <= a->hi;
        int ordered = x->stream == a->stream || race_ordered(x, clock);
        if (covered && ordered && (a->write || (!x->write && x->stream == a->stream)))
            race_drop(b, i);
    }
    if (b->n == RACE_MAX_RECORDS)
        race_drop(b, 0);
    if (b->n == b->cap) {
        int cap = b->cap ? b->cap * 2 : 4;
        struct race_access *acc = realloc(b->acc, (size_t)cap * sizeof *acc);
        if (!acc)
            return err_set(ERR_NOMEM, "device: out of memory for the access records of '%s'", name);
        b->acc = acc;
        b->cap = cap;
    }
    b->acc[b->n++] = *a;
    return 0;
}

void race_buffer_free(struct race_buffer *b)
{
    free(b->acc);
    memset(b, 0, sizeof *b);
}
