/* channel: bounded slot queues between simulated ranks (see channel.h). */
#include "sim/channel.h"

#include "base/error.h"

#include <errno.h>
#include <stdlib.h>

int channel_init(channel_t *ch, int slots, size_t slot_bytes, atomic_int *broken)
{
    *ch = (channel_t){.slot_bytes = slot_bytes, .slots = slots, .broken = broken};
    ch->buf = malloc((size_t)slots * slot_bytes);
    ch->len = calloc((size_t)slots, sizeof *ch->len);
    if (!ch->buf || !ch->len) {
        free(ch->buf);
        free(ch->len);
        return err_set(ERR_NOMEM, "channel: cannot allocate %d slots of %zu bytes", slots, slot_bytes);
    }
    pthread_mutex_init(&ch->lock, NULL);
    channel_cond_init(&ch->changed);
    return 0;
}

void channel_cond_init(pthread_cond_t *cond)
{
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(cond, &attr);
    pthread_condattr_destroy(&attr);
}

struct timespec channel_deadline(uint64_t deadline_ns)
{
    return (struct timespec){.tv_sec = (time_t)(deadline_ns / 1000000000u), .tv_nsec = (long)(deadline_ns % 1000000000u)};
}

void channel_destroy(channel_t *ch)
{
    pthread_mutex_destroy(&ch->lock);
    pthread_cond_destroy(&ch->changed);
    free(ch->buf);
    free(ch->len);
}

void channel_wake(channel_t *ch)
{
    pthread_mutex_lock(&ch->lock);
    pthread_cond_broadcast(&ch->changed);
    pthread_mutex_unlock(&ch->lock);
}

/* Waits under ch->lock until ready(ch) holds: 0, ERR_PEER or ERR_TIMEOUT. */
static int channel_wait(channel_t *ch, uint64_t deadline_ns, int (*ready)(const channel_t *))
{
    struct timespec ts = channel_deadline(deadline_ns);
    while (!ready(ch)) {
        if (atomic_load(ch->broken))
            return ERR_PEER;
        int rc = pthread_cond_timedwait(&ch->changed, &ch->lock, &ts);
        if (rc == ETIMEDOUT && !ready(ch))
            return atomic_load(ch->broken) ? ERR_PEER : ERR_TIMEOUT;
    }
    return 0;
}

static int channel_has_room(const channel_t *ch) { return ch->sent - ch->received < (uint64_t)ch->slots; }
static int channel_has_data(const channel_t *ch) { return ch->sent > ch->received; }

int channel_send_begin(channel_t *ch, uint64_t deadline_ns, void **slot)
{
    pthread_mutex_lock(&ch->lock);
    int rc = channel_wait(ch, deadline_ns, channel_has_room);
    uint64_t index = ch->sent;
    pthread_mutex_unlock(&ch->lock);
    /* only this sender advances `sent`, and the slot stays ours until we publish it */
    *slot = rc == 0 ? ch->buf + (size_t)(index % (uint64_t)ch->slots) * ch->slot_bytes : NULL;
    return rc;
}

/* The hand-offs below wake the other side after unlocking: woken under the
 * lock, it would find the lock still held and sleep once more on it. */
void channel_send_end(channel_t *ch, size_t bytes)
{
    pthread_mutex_lock(&ch->lock);
    ch->len[ch->sent % (uint64_t)ch->slots] = bytes;
    ch->sent++;
    pthread_mutex_unlock(&ch->lock);
    pthread_cond_broadcast(&ch->changed);
}

int channel_recv_begin(channel_t *ch, uint64_t deadline_ns, const void **slot, size_t *bytes)
{
    pthread_mutex_lock(&ch->lock);
    int rc = channel_wait(ch, deadline_ns, channel_has_data);
    uint64_t index = ch->received;
    *bytes = rc == 0 ? ch->len[index % (uint64_t)ch->slots] : 0;
    pthread_mutex_unlock(&ch->lock);
    *slot = rc == 0 ? ch->buf + (size_t)(index % (uint64_t)ch->slots) * ch->slot_bytes : NULL;
    return rc;
}

void channel_recv_end(channel_t *ch)
{
    pthread_mutex_lock(&ch->lock);
    ch->received++;
    pthread_mutex_unlock(&ch->lock);
    pthread_cond_broadcast(&ch->changed);
}

void channel_reset(channel_t *ch)
{
    pthread_mutex_lock(&ch->lock);
    ch->sent = ch->received = 0;
    pthread_mutex_unlock(&ch->lock);
}
