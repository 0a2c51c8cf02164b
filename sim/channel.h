/* channel: a bounded, one-way link between two simulated ranks (chapter 5).
 *
 * Where it sits: under the simulator's algorithms (sim/comm_sim_algos.c). A
 * real ring moves data through a small fixed buffer on each link, in slots,
 * so a sender blocks when the receiver falls behind; so does this. The buffer
 * is `slots` slots of `slot_bytes`; a message is one slot. The sender fills
 * a slot in place (channel_send_begin/end) and the receiver reads or reduces
 * straight out of it (channel_recv_begin/end), so a hop costs one write and
 * one read of the data, as a copy between two GPUs' buffers does.
 *
 * Every wait has a deadline and gives up early when the simulated world is
 * broken (another rank's watchdog fired), so no thread ever waits forever.
 */
#ifndef DDP_CHANNEL_H
#define DDP_CHANNEL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

typedef struct channel {
    pthread_mutex_t lock;
    pthread_cond_t changed; /* a slot was filled or emptied */
    unsigned char *buf;     /* slots x slot_bytes */
    size_t slot_bytes;
    int slots;
    uint64_t sent, received; /* messages ever published / consumed */
    size_t *len;             /* bytes in each slot */
    atomic_int *broken;
} channel_t;

/* Initializes a condition variable whose timed waits take CLOCK_MONOTONIC
 * deadlines (clock_now_ns() times, lib/base/clock.h), immune to wall-clock jumps;
 * every wait of the simulator uses one. */
void channel_cond_init(pthread_cond_t *cond);

/* A clock_now_ns() deadline as the timespec pthread_cond_timedwait takes. */
struct timespec channel_deadline(uint64_t deadline_ns);

/* Sets up a channel of `slots` x `slot_bytes` whose waits also end when
 * *broken becomes non-zero. 0 or ERR_NOMEM. */
int channel_init(channel_t *ch, int slots, size_t slot_bytes, atomic_int *broken);
void channel_destroy(channel_t *ch);

/* Wakes every waiter (after *broken was set). */
void channel_wake(channel_t *ch);

/* Waits for a free slot until deadline_ns (clock_now_ns() time) and returns
 * it in *slot: 0, ERR_TIMEOUT, or ERR_PEER when the world broke meanwhile. */
int channel_send_begin(channel_t *ch, uint64_t deadline_ns, void **slot);
/* Publishes the slot from channel_send_begin with `bytes` (<= slot_bytes). */
void channel_send_end(channel_t *ch, size_t bytes);

/* Waits for the oldest unread message: 0 with *slot and *bytes, ERR_TIMEOUT
 * or ERR_PEER as above. */
int channel_recv_begin(channel_t *ch, uint64_t deadline_ns, const void **slot, size_t *bytes);
/* Frees the slot from channel_recv_begin. */
void channel_recv_end(channel_t *ch);

/* Empties the channel (after a failure, so the next world starts clean). */
void channel_reset(channel_t *ch);

#endif
