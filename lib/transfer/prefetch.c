/* prefetch: the double-buffering schedule (see prefetch.h).
 *
 * State. `depth` device buffers, used round robin: batch k goes to buffer
 * k mod depth. Each buffer has two events: `ready`, recorded on the copy
 * stream after the batch's copies, and `free`, recorded on the compute stream
 * when the trainer releases the batch. Each also remembers the loader slot
 * its batch came from (`host`) until that slot goes back to the loader.
 * `issued` counts the batches whose copies are queued, `handed` the ones given
 * to the trainer; issued - handed batches are in flight, at most depth.
 *
 * One call of prefetch_next():
 *   fill      while fewer than depth batches are in flight: take the next
 *             batch from the loader and queue its copies (prefetch_copy);
 *   hand over the oldest one: the compute stream waits for its ready event
 *             (prefetch_hand_over);
 *   give back every loader slot whose copy has completed (prefetch_give_back).
 *
 * The three helpers and prefetch_release's event are lab 4's exercise
 * (labs/04-transfer): each is one of the rules of prefetch.h.
 */
#include "transfer/prefetch.h"

#include "base/vclock.h"
#include "base/error.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PREFETCH_MAX_DEPTH 16

struct prefetch_buffer {
    void *data;
    int64_t *labels;
    device_event_t *ready; /* after this buffer's last copies */
    device_event_t *free;  /* after the trainer's work on this buffer's last batch */
    int free_recorded;     /* free marks something (not before the buffer's first release) */
    struct loader_batch *host; /* the loader slot of the batch in this buffer, until it goes back */
    void *staging;         /* pin_pool: the pinned copy of the batch (data, then labels) */
    int staged;            /* staging holds a batch whose copy may still be reading it */
    struct prefetch_batch view;
};

struct prefetch {
    device_t *dev;
    loader_t *loader;
    struct prefetch_options opt;
    device_stream_t *copy;
    struct prefetch_buffer *buf;
    uint64_t issued, handed; /* this epoch */
    int ended;               /* the loader said the epoch is over (or failed) */
    int failed;              /* ... failed: this error comes after the batches in flight */
    char failure[1024];
    int held_out;            /* the trainer holds the last batch handed out */
    uint32_t held_host;      /* loader slots not given back yet */
    uint32_t ring_slots;     /* the loader's ring */
    struct prefetch_stats st;
};

static struct prefetch_buffer *prefetch_buffer_of(prefetch_t *p, uint64_t batch)
{
    return &p->buf[batch % p->opt.depth];
}

/* ---- the schedule: lab 4 ---------------------------------------------------------- */

/* Queues the copies of the batch described by b->view (from `data` and
 * `labels`: the loader slot, or its pinned staging copy) into device buffer
 * b, on the prefetcher's copy stream. The buffer may still be read by the
 * compute on the batch it held before (rule 2); the compute on this batch
 * must be able to wait for these copies (rule 1). */
static int prefetch_copy(prefetch_t *p, struct prefetch_buffer *b, const void *data, const void *labels)
{
    // LAB:BEGIN issue-copy
    int rc = 0;
    if (b->free_recorded) /* the kernels that read this buffer's previous batch come first */
        rc = device_stream_wait_event(p->copy, b->free);
    if (rc == 0)
        rc = device_copy_async(p->copy, b->data, data, b->view.bytes, DEVICE_H2D, (int64_t)b->view.number);
    if (rc == 0)
        rc = device_copy_async(p->copy, b->labels, labels, b->view.count * sizeof(int64_t), DEVICE_H2D,
                               (int64_t)b->view.number);
    if (rc == 0) /* after both copies: the point the compute stream will wait for */
        rc = device_event_record(b->ready, p->copy);
    return rc;
    // LAB:STUB return LAB_TODO("issue-copy");
    // LAB:END
}

/* The batch in buffer b goes to the trainer: its kernels, queued on the
 * compute stream after this, must not start before its copies are done
 * (rule 1). */
static int prefetch_hand_over(prefetch_t *p, struct prefetch_buffer *b)
{
    // LAB:BEGIN hand-over
    return device_stream_wait_event(p->opt.compute, b->ready);
    // LAB:STUB return LAB_TODO("hand-over");
    // LAB:END
}

/* Gives loader slots back, oldest batch first, each once the copy out of it
 * has completed (rule 3). Only the last `depth` batches issued can still
 * hold one (a buffer's slot goes back before the buffer is reused). With
 * `must` set, one slot has to go back now (the loader's ring is all held, or
 * the next buffer still holds one): wait for the oldest copy. */
static int prefetch_give_back(prefetch_t *p, int must)
{
    // LAB:BEGIN give-back
    uint64_t first = p->issued > p->opt.depth ? p->issued - p->opt.depth : 0;
    for (uint64_t k = first; k < p->issued; k++) {
        struct prefetch_buffer *b = prefetch_buffer_of(p, k);
        if (!b->host)
            continue; /* already back (or staged through pinned memory: never held) */
        int done = device_event_query(b->ready);
        if (done < 0)
            return done;
        if (!done && must) {
            uint64_t t0 = vclock_now_ns(); /* the host's modelled clock (the wall clock's on a GPU) */
            int rc = device_event_synchronize(b->ready);
            p->st.slot_wait_s += (double)(vclock_now_ns() - t0) * 1e-9;
            if (rc)
                return rc;
            done = 1;
        }
        if (!done)
            break; /* the copy stream finishes in order: the later ones are not done either */
        loader_release(p->loader, b->host);
        b->host = NULL;
        p->held_host--;
        must = 0;
    }
    return 0;
    // LAB:STUB return LAB_TODO("give-back");
    // LAB:END
}

int prefetch_release(prefetch_t *p, struct prefetch_batch *batch)
{
    if (!p->held_out || batch != &prefetch_buffer_of(p, p->handed - 1)->view)
        return err_set(ERR_STATE, "prefetch_release: batch %llu is not the batch handed out last",
                       batch ? (unsigned long long)batch->number : 0ULL);
    struct prefetch_buffer *b = prefetch_buffer_of(p, p->handed - 1);
    p->held_out = 0;
    // LAB:BEGIN buffer-free
    /* Everything the trainer queued on this batch is on the compute stream by
     * now: once it is done, the buffer may be refilled (rule 2). */
    int rc = device_event_record(b->free, p->opt.compute);
    if (rc == 0)
        b->free_recorded = 1;
    return rc;
    // LAB:STUB return LAB_TODO("buffer-free");
    // LAB:END
}

/* ---- the rest: taking batches from the loader, epochs, memory --------------------- */

/* A schedule step's result: 0 or a negative error. A positive one (lab 4's
 * "true") would reach the trainer as prefetch_next's 1 with no batch. */
static int prefetch_step(const char *step, int rc)
{
    if (rc > 0)
        return err_set(ERR_STATE, "prefetch: %s returned %d: 0 when done, or a negative error", step, rc);
    return rc;
}

/* Where the labels sit in a staging buffer: after the data, 64-byte aligned. */
static uint64_t prefetch_labels_offset(const prefetch_t *p) { return (p->opt.max_bytes + 63) & ~(uint64_t)63; }

/* Takes the next batch from the loader and queues its copies. Sets p->ended
 * at the end of the loader's epoch. */
static int prefetch_issue(prefetch_t *p)
{
    struct prefetch_buffer *b = prefetch_buffer_of(p, p->issued);
    int must = p->held_host >= p->ring_slots || b->host != NULL;
    int rc = prefetch_step("prefetch_give_back", prefetch_give_back(p, must));
    if (rc)
        return rc;
    if (b->host)
        return err_set(ERR_STATE, "prefetch: device buffer %u is about to take batch %llu, but the loader slot of "
                       "batch %llu, copied into it before, was never given back", (unsigned)(p->issued % p->opt.depth),
                       (unsigned long long)p->issued, (unsigned long long)b->host->number);
    struct loader_batch *hb;
    rc = loader_next(p->loader, &hb);
    if (rc == 0)
        p->ended = 1;
    if (rc <= 0)
        return rc;
    if (hb->bytes > p->opt.max_bytes || hb->count > p->opt.max_batch) {
        rc = err_set(ERR_RANGE, "prefetch: batch %llu has %llu bytes and %u samples; the device buffers hold %llu "
                     "bytes and %u (max_bytes, max_batch)", (unsigned long long)hb->number,
                     (unsigned long long)hb->bytes, hb->count, (unsigned long long)p->opt.max_bytes,
                     p->opt.max_batch);
        loader_release(p->loader, hb);
        return rc;
    }
    b->view = (struct prefetch_batch){
        .number = hb->number, .epoch = hb->epoch, .count = hb->count, .bytes = hb->bytes, .stride = hb->stride,
        .data = b->data, .labels = b->labels, .ready = b->ready, .wait_s = hb->wait_s,
        .buffer = (uint32_t)(p->issued % p->opt.depth),
    };
    const void *data = hb->data, *labels = hb->labels;
    if (p->opt.pin_pool) { /* PyTorch's pin_memory: one more copy, into pinned memory; the slot goes back at once */
        if (b->staged) { /* the staging buffer is a copy's source too: wait until that copy is done */
            uint64_t t0 = vclock_now_ns();
            rc = device_event_synchronize(b->ready);
            p->st.slot_wait_s += (double)(vclock_now_ns() - t0) * 1e-9;
            if (rc) {
                loader_release(p->loader, hb);
                return rc;
            }
        }
        uint8_t *staging = b->staging;
        uint64_t t0 = vclock_now_ns();
        memcpy(staging, hb->data, hb->bytes);
        memcpy(staging + prefetch_labels_offset(p), hb->labels, hb->count * sizeof(int64_t));
        vclock_advance_ns(vclock_memcpy_ns(hb->bytes + hb->count * sizeof(int64_t))); /* modelled (none on a GPU) */
        p->st.pin_s += (double)(vclock_now_ns() - t0) * 1e-9;
        p->st.pin_copies++;
        p->st.pin_bytes += hb->bytes;
        data = staging;
        labels = staging + prefetch_labels_offset(p);
        loader_release(p->loader, hb);
        b->staged = 1;
    } else {
        char name[48];
        snprintf(name, sizeof name, "loader slot %u", hb->slot);
        device_host_rename(p->dev, hb->data, name);
        b->host = hb;
        p->held_host++;
    }
    rc = prefetch_step("prefetch_copy", prefetch_copy(p, b, data, labels));
    if (rc)
        return rc;
    p->st.h2d_copies += 2;
    p->issued++;
    return 0;
}

/* Waits for every copy and gives every loader slot back: the end of an
 * epoch, an error, or close. */
static int prefetch_drain(prefetch_t *p)
{
    int rc = device_stream_synchronize(p->copy);
    while (p->held_host > 0) {
        uint32_t before = p->held_host;
        int rg = prefetch_step("prefetch_give_back", prefetch_give_back(p, 1));
        rc = rc ? rc : rg;
        if (rg || p->held_host == before)
            break;
    }
    for (uint32_t i = 0; i < p->opt.depth; i++) { /* whatever is still held (after an error): back anyway */
        struct prefetch_buffer *b = &p->buf[i];
        if (b->host) {
            loader_release(p->loader, b->host);
            b->host = NULL;
        }
    }
    p->held_host = 0;
    p->issued = p->handed = 0;
    p->ended = 0;
    return rc;
}

int prefetch_next(prefetch_t *p, struct prefetch_batch **out)
{
    *out = NULL;
    if (p->held_out)
        return err_set(ERR_STATE, "prefetch_next: batch %llu is still held: prefetch_release it first",
                       (unsigned long long)prefetch_buffer_of(p, p->handed - 1)->view.number);
    int rc = 0;
    while (rc == 0 && !p->ended && p->issued - p->handed < p->opt.depth)
        rc = prefetch_issue(p);
    if (rc < 0 && !p->failed) { /* a batch failed to arrive: the ones before it still go out first */
        p->failed = rc;
        p->ended = 1;
        snprintf(p->failure, sizeof p->failure, "%s", err_msg());
        rc = 0;
    }
    if (rc == 0 && p->issued == p->handed) { /* the epoch is over */
        int failed = p->failed;
        p->failed = 0;
        rc = prefetch_drain(p);
        return failed ? err_set(failed, "%s", p->failure) : rc;
    }
    struct prefetch_buffer *b = prefetch_buffer_of(p, p->handed);
    if (rc == 0)
        rc = p->opt.unordered ? 0 : prefetch_step("prefetch_hand_over", prefetch_hand_over(p, b));
    if (rc == 0)
        rc = prefetch_step("prefetch_give_back", prefetch_give_back(p, 0));
    if (rc) {
        char msg[1024];
        snprintf(msg, sizeof msg, "%s", err_msg());
        prefetch_drain(p);
        return err_set(rc, "%s", msg);
    }
    p->handed++;
    p->held_out = 1;
    p->st.batches++;
    p->st.bytes += b->view.bytes;
    p->st.data_wait_s += b->view.wait_s;
    *out = &b->view;
    return 1;
}

void prefetch_stats(const prefetch_t *p, struct prefetch_stats *out) { *out = p->st; }

void prefetch_close(prefetch_t *p)
{
    if (!p)
        return;
    if (p->copy)
        prefetch_drain(p);
    for (uint32_t i = 0; p->buf && i < p->opt.depth; i++) {
        struct prefetch_buffer *b = &p->buf[i];
        device_free(p->dev, b->data);
        device_free(p->dev, b->labels);
        device_event_destroy(b->ready);
        device_event_destroy(b->free);
        if (p->opt.pin_pool)
            pinned_pool_free(p->opt.pin_pool, b->staging);
    }
    free(p->buf);
    device_stream_destroy(p->copy);
    free(p);
}

int prefetch_open(device_t *dev, loader_t *loader, const struct prefetch_options *opt, prefetch_t **out)
{
    *out = NULL;
    if (!opt->compute || opt->max_bytes == 0 || opt->max_batch == 0)
        return err_set(ERR_ARG, "prefetch: needs the compute stream, max_bytes and max_batch (got %s, %llu, %u)",
                       opt->compute ? "a stream" : "none", (unsigned long long)opt->max_bytes, opt->max_batch);
    if (opt->depth > PREFETCH_MAX_DEPTH)
        return err_set(ERR_ARG, "prefetch: depth %u is more than %d buffers", opt->depth, PREFETCH_MAX_DEPTH);
    if (device_stream_device(opt->compute) != dev)
        return err_set(ERR_ARG, "prefetch: the compute stream '%s' belongs to another device",
                       device_stream_name(opt->compute));
    prefetch_t *p = calloc(1, sizeof *p);
    if (!p)
        return err_set(ERR_NOMEM, "prefetch: out of memory");
    p->dev = dev;
    p->loader = loader;
    p->opt = *opt;
    if (p->opt.depth == 0)
        p->opt.depth = 2;
    p->st.depth = p->opt.depth;
    struct loader_stats ls;
    loader_stats(loader, &ls);
    p->ring_slots = ls.slots;
    int rc = device_stream_create(dev, "copy", &p->copy);
    p->buf = rc == 0 ? calloc(p->opt.depth, sizeof *p->buf) : NULL;
    if (rc == 0 && !p->buf)
        rc = err_set(ERR_NOMEM, "prefetch: out of memory");
    for (uint32_t i = 0; rc == 0 && i < p->opt.depth; i++) {
        struct prefetch_buffer *b = &p->buf[i];
        char name[48];
        snprintf(name, sizeof name, "batch buffer %u", i);
        rc = device_malloc(dev, p->opt.max_bytes, name, &b->data);
        snprintf(name, sizeof name, "labels buffer %u", i);
        if (rc == 0)
            rc = device_malloc(dev, p->opt.max_batch * sizeof(int64_t), name, (void **)&b->labels);
        if (rc == 0)
            rc = device_event_create(dev, &b->ready);
        if (rc == 0)
            rc = device_event_create(dev, &b->free);
        if (rc == 0 && p->opt.pin_pool)
            rc = pinned_pool_alloc(p->opt.pin_pool, prefetch_labels_offset(p) + p->opt.max_batch * sizeof(int64_t),
                                   &b->staging);
    }
    if (rc) {
        char msg[1024];
        snprintf(msg, sizeof msg, "%s", err_msg());
        prefetch_close(p);
        return err_set(rc, "prefetch: %s", msg);
    }
    *out = p;
    return 0;
}
