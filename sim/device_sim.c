/* device_sim: the simulated device (see device_sim.h).
 *
 * Two clocks, kept apart. Modelled time (DESIGN.md, "Virtual time") is
 * decided when an operation is issued, under the lock, in issue order:
 * dsim_schedule() starts it at the latest of the issuing host's modelled
 * time (base/vclock.h), its stream's previous end, the events its stream
 * waits for and its engine's free time, and ends it after what the hardware
 * model says it takes (a copy: the link's alpha + S/B; a device operation:
 * the GPU profile's compute and memory peaks; a kernel: its declared
 * seconds). Nothing modelled ever reads the wall clock, so the same program
 * gives the same device times on any machine under any load. Physically the
 * engines still run every operation in their FIFO order, as fast as they
 * can: the bytes really move and the math really runs, and a host call that
 * waits for an operation waits for both (its bytes, and its modelled end on
 * the host's clock).
 *
 * Everything an operation needs is in struct dsim_op: its stream, the
 * operation before it on that stream (prev), for a wait the event's operation
 * (dep), its modelled start and end. Copies and kernels go to an engine's
 * FIFO; waits have no engine and complete in dsim_settle() as soon as what
 * they wait for has. Operations are reference-counted: a stream holds its
 * last one, an event the one it marks, an engine the ones in its queue, an
 * operation its prev until it completes, the armed list the guarded copies.
 * One mutex guards it all; the engines drop it only to move bytes or run a
 * kernel's function.
 *
 * Read dsim_schedule() and dsim_engine_main() first, then dsim_copy_async()
 * and the staging of pageable copies (dsim_stage_h2d), then the events and
 * the write guards' lifting (dsim_lift_guards).
 */
#include "sim/device_sim.h"

#include "base/clock.h"
#include "base/error.h"
#include "base/units.h"
#include "base/vclock.h"
#include "sim/device_exec.h"
#include "sim/device_race.h"
#include "sim/source_hash.h"
#include "sim/write_guard.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

enum { DSIM_ENGINE_H2D, DSIM_ENGINE_D2H, DSIM_ENGINE_COMPUTE, DSIM_ENGINES };
enum dsim_kind { DSIM_COPY, DSIM_KERNEL, DSIM_WAIT };

#define DSIM_HOST_MEMCPY_BPS DEVICE_SIM_HOST_MEMCPY_BPS

/* What a device operation costs beyond its bytes and flops: the gap between
 * two back-to-back kernels on a GPU, a few microseconds (an assumed figure,
 * the usual order of magnitude of a CUDA launch; not measured here). Kernels
 * launched with device_launch declare their own seconds and pay nothing more. */
#define DSIM_LAUNCH_S 4e-6

/* A freed device buffer of up to DSIM_SPARE_BYTES stays mapped, up to
 * DSIM_SPARES of them, for the next allocation of the same length: for a
 * program that allocates a few words every step (as the replica check did
 * before the model kept its words), an mmap with its page populated, then a
 * munmap that shoots down every core's TLB, each step cost more than the
 * words. Handed out zeroed, as a fresh mapping is. */
#define DSIM_SPARES 4
#define DSIM_SPARE_BYTES (64u << 10)

struct dsim_op {
    int refs;
    enum dsim_kind kind;
    struct dsim_stream *stream;
    struct dsim_op *prev; /* the stream's previous operation, until this one completes */
    struct dsim_op *dep;  /* DSIM_WAIT: the event's operation */
    struct dsim_op *next; /* the engine's FIFO, or the list of pending waits */
    uint64_t issue_ns;     /* modelled: the issuing host's time (vclock) */
    uint64_t start_ns, end_ns; /* modelled: decided at issue (dsim_schedule) */
    int done;
    /* copies */
    enum device_dir dir;
    void *dst;
    const void *src;
    uint64_t bytes;
    int guard; /* write_guard id on the pinned source, or -1 */
    uint64_t *source_words; /* the bytes check's words of the pinned source at issue (source_hash), or NULL */
    /* kernels */
    void (*fn)(void *arg);
    void *arg;
    struct device_op math; /* a device operation (has_math), run by device_exec */
    int has_math;
    char what[192]; /* for messages: "copy #12 (H2D of 9.60 MiB from pinned 'slot 1' ..., batch 5)" */
    char stream_name[48]; /* guarded copies: for the message, which may come after the stream is gone */
};

struct dsim_stream {
    int id;
    char name[48];
    struct dsim_op *last;
    uint64_t floor_ns; /* modelled: the latest event this stream was told to wait for */
    struct race_clock clock;
};

struct dsim_event {
    int recorded;
    struct dsim_op *op; /* what it marks: its stream's last operation at record time (NULL: none) */
    uint64_t time_ns;   /* modelled: when its stream reaches it */
    struct race_clock clock;
};

struct dsim_engine {
    struct dsim *d;
    pthread_t thread;
    pthread_cond_t wake;  /* idle: waits here for its queue's head to be able to start */
    int tid;
    struct dsim_op *head, *tail;
    uint64_t free_ns, busy_ns; /* modelled: when its last operation ends, and its busy time */
    uint64_t cpu_ns;
    int inline_busy; /* a host thread is running one of its operations itself (dsim_run, staged copies) */
};

struct dsim_devbuf { /* a device allocation */
    uint8_t *base;
    uint64_t bytes;
    char name[64];
    struct race_buffer race;
};

struct dsim_hostbuf { /* a host allocation or registration the device knows */
    uint8_t *base;
    uint64_t bytes;
    enum device_host_kind kind;
    char name[64];
    uint64_t map_bytes; /* pinned and write-combined: the mmap'd length; pageable: 0 (malloc) */
};

struct dsim {
    device_t *pub;
    struct link_profile link;
    double gemm_flops, memory_bps; /* the modelled GPU (device_config): its GEMMs' FP32 rate, its memory's */
    pthread_mutex_t mu;
    pthread_cond_t changed; /* an operation completed, or the device broke */
    struct dsim_engine eng[DSIM_ENGINES];
    int stop;
    struct dsim_op *waits; /* pending DSIM_WAIT operations */
    struct dsim_stream *streams[RACE_MAX_STREAMS];
    uint64_t next_seq[RACE_MAX_STREAMS]; /* per stream number, never reset: ids are reused */
    struct dsim_stream *default_stream;  /* device_copy's */
    struct race_clock host;
    struct dsim_devbuf *dev;
    int ndev, capdev;
    struct dsim_hostbuf *host_bufs;
    int nhost, caphost;
    pthread_mutex_t staging; /* one pageable copy at a time uses the bounce buffer */
    uint8_t *bounce;
    struct dsim_op *bounce_op[2];
    uint64_t copy_number, kernel_number;
    int changed_waiters;      /* threads waiting on `changed` */
    uint64_t gemm_ns, gemm_calls;
    int broken;
    int broken_code;
    char broken_msg[1536];
    enum device_write_check write_check; /* how a host write into an in-flight copy's source is caught */
    int guard_hit; /* set by write_guard's signal handler */
    struct dsim_op **armed; /* copies watched (a write guard up, or source words taken): until the host learns they are done */
    int narmed, caparmed;
    int lifting; /* threads taking watches down with mu dropped: a buffer is not freed under them (dsim_drain) */
    struct dsim_spare { /* freed small device buffers, still mapped (dsim_mem_free) */
        uint8_t *base;
        uint64_t bytes;
    } spare[DSIM_SPARES];
    int nspare;
    /* statistics */
    uint64_t staged_copies, staged_bytes, watched[2], pin_refused; /* watched: by write_check */
    uint64_t staging_ns; /* modelled */
};

static struct dsim *dsim_of(const device_t *d) { return d->impl; }

static uint64_t dsim_max(uint64_t a, uint64_t b) { return a > b ? a : b; }

/* ---- operations ------------------------------------------------------------------- */

static void dsim_op_unref(struct dsim_op *op)
{
    while (op && --op->refs == 0) {
        struct dsim_op *prev = op->prev;
        if (op->dep)
            dsim_op_unref(op->dep);
        free(op->source_words);
        free(op);
        op = prev; /* iterative along the stream: no deep recursion on long chains */
    }
}

static struct dsim_op *dsim_op_ref(struct dsim_op *op)
{
    if (op)
        op->refs++;
    return op;
}

/* Called with mu held. The first error wins; waiters are woken to see it. */
static int dsim_break(struct dsim *d, int code, const char *msg)
{
    if (!d->broken) {
        d->broken = 1;
        d->broken_code = code;
        snprintf(d->broken_msg, sizeof d->broken_msg, "%s: %s", d->pub->name, msg);
        pthread_cond_broadcast(&d->changed);
    }
    return err_set(d->broken_code, "%s", d->broken_msg);
}

/* The host-write half of the detector: the message for a guard that caught a
 * write, naming the thread (or the engine) that wrote. */
static void dsim_guard_message(struct dsim *d, const struct dsim_op *op, const struct write_guard_hit *hit,
                               char *msg, size_t len)
{
    char writer[96];
    if (hit->tid == d->eng[DSIM_ENGINE_D2H].tid)
        snprintf(writer, sizeof writer, "the D2H copy engine (a device-to-host copy into the same buffer)");
    else
        snprintf(writer, sizeof writer, "the host (thread %d)", hit->tid);
    snprintf(msg, len,
             "host write while in flight: %s wrote byte %llu of the source of %s on stream '%s' while that copy "
             "was still reading it: a pinned buffer may be reused only after its copy's event completed "
             "(device_event_synchronize or device_event_query)",
             writer, (unsigned long long)hit->offset, op->what, op->stream_name);
}

/* The bytes check's half: the message for a copy whose source changed
 * before the host learned it ended, naming the first changed 4 KiB block. */
static void dsim_changed_message(const struct dsim_op *op, uint64_t block, char *msg, size_t len)
{
    uint64_t first = block * SOURCE_HASH_BLOCK, end = first + SOURCE_HASH_BLOCK;
    snprintf(msg, len,
             "host write while in flight: bytes %llu to %llu of the source of %s on stream '%s' changed while that "
             "copy was still reading it (the first 4 KiB that did; written by the host, or by a device-to-host copy "
             "into the same buffer): a pinned buffer may be reused only after its copy's event completed "
             "(device_event_synchronize or device_event_query)",
             (unsigned long long)first, (unsigned long long)(end < op->bytes ? end : op->bytes) - 1, op->what,
             op->stream_name);
}

/* Called with mu held at every entry: reports a guard that trapped a write
 * (the signal handler set guard_hit), then the sticky error if any. */
static int dsim_enter(struct dsim *d)
{
    if (__atomic_load_n(&d->guard_hit, __ATOMIC_SEQ_CST) && !d->broken) {
        for (int i = 0; i < d->narmed; i++) {
            struct dsim_op *op = d->armed[i];
            struct write_guard_hit hit;
            if (op->guard < 0)
                continue; /* watched by its bytes: told when it comes down */
            write_guard_peek(op->guard, &hit);
            if (hit.hit) {
                char msg[1024];
                dsim_guard_message(d, op, &hit, msg, sizeof msg);
                return dsim_break(d, ERR_STATE, msg);
            }
        }
    }
    return d->broken ? err_set(d->broken_code, "%s", d->broken_msg) : 0;
}

/* Completes every pending wait whose stream predecessor and event have
 * completed. Called with mu held after anything completes. */
static void dsim_settle(struct dsim *d)
{
    for (int changed = 1; changed;) {
        changed = 0;
        for (struct dsim_op **pp = &d->waits; *pp;) {
            struct dsim_op *op = *pp;
            if ((op->prev && !op->prev->done) || !op->dep->done) {
                pp = &op->next;
                continue;
            }
            op->done = 1; /* its modelled end was decided at issue */
            dsim_op_unref(op->prev);
            op->prev = NULL;
            *pp = op->next;
            dsim_op_unref(op); /* the list's reference */
            changed = 1;
        }
    }
}

/* Puts op at the end of stream s (op->stream, prev, issue time, its number
 * in the stream's clock). The caller fills the rest and queues it. */
static void dsim_issue(struct dsim *d, struct dsim_stream *s, struct dsim_op *op)
{
    op->stream = s;
    op->issue_ns = vclock_now_ns();
    op->prev = s->last; /* the stream's reference moves to op->prev */
    s->last = dsim_op_ref(op);
    race_clock_join(&s->clock, &d->host);
    s->clock.t[s->id] = ++d->next_seq[s->id];
}

/* Modelled time, decided once, at issue (mu held, after dsim_issue): op
 * starts at the latest of its host's time at issue, its stream's previous
 * end, the events its stream waits for and (engine >= 0) its engine's free
 * time, and lasts `duration_ns`. Issue order is the engines' FIFO order, so
 * the engine's free time is known here; nothing depends on how fast the
 * engines' threads really run. */
static void dsim_schedule(struct dsim *d, struct dsim_op *op, int engine, uint64_t duration_ns)
{
    uint64_t start = dsim_max(op->issue_ns, op->stream->floor_ns);
    if (op->prev)
        start = dsim_max(start, op->prev->end_ns);
    if (engine >= 0) {
        struct dsim_engine *e = &d->eng[engine];
        start = dsim_max(start, e->free_ns);
        e->free_ns = start + duration_ns;
        e->busy_ns += duration_ns;
    }
    op->start_ns = start;
    op->end_ns = start + duration_ns;
}

/* Where stream s stands in modelled time: the end of its last operation, or
 * the last event it was told to wait for. */
static uint64_t dsim_stream_end(const struct dsim_stream *s)
{
    return dsim_max(s->floor_ns, s->last ? s->last->end_ns : 0);
}

static void dsim_enqueue(struct dsim *d, int engine, struct dsim_op *op)
{
    struct dsim_engine *e = &d->eng[engine];
    op->refs++; /* the engine's reference */
    op->next = NULL;
    if (e->tail)
        e->tail->next = op;
    else
        e->head = op;
    e->tail = op;
    pthread_cond_signal(&e->wake);
}

/* Wakes the engines whose queue has a head (mu held): it may be able to
 * start now. An idle engine sleeps through what does not concern it. */
static void dsim_wake_engines(struct dsim *d)
{
    for (int i = 0; i < DSIM_ENGINES; i++)
        if (d->eng[i].head)
            pthread_cond_signal(&d->eng[i].wake);
}

static struct dsim_op *dsim_op_new(struct dsim *d, enum dsim_kind kind)
{
    struct dsim_op *op = calloc(1, sizeof *op);
    if (!op) {
        err_set(ERR_NOMEM, "%s: out of memory for an operation", d->pub->name);
        return NULL;
    }
    op->kind = kind;
    op->guard = -1;
    return op;
}

/* Waits (mu held) for the next completion, counted, so that an operation
 * the host ran itself wakes nobody when nobody waits. */
static void dsim_wait_changed(struct dsim *d)
{
    d->changed_waiters++;
    pthread_cond_wait(&d->changed, &d->mu);
    d->changed_waiters--;
}

/* Waits (mu held) until op completed or the device broke. */
static int dsim_wait_op(struct dsim *d, struct dsim_op *op)
{
    while (op && !op->done && !d->broken) {
        dsim_wait_changed(d);
        int rc = dsim_enter(d);
        if (rc)
            return rc;
    }
    return dsim_enter(d);
}

/* ---- the engines ------------------------------------------------------------------- */

/* An engine: runs its FIFO's operations for real (moves the bytes, runs the
 * math or the kernel's function), in order, as fast as this machine can.
 * When each one starts and ends in modelled time was decided at issue
 * (dsim_schedule): nothing here reads a clock for a device time. */
static void dsim_lift_for_writer(struct dsim *d, const struct dsim_op *w);

static void *dsim_engine_main(void *arg)
{
    struct dsim_engine *e = arg;
    struct dsim *d = e->d;
    pthread_mutex_lock(&d->mu);
    e->tid = (int)syscall(SYS_gettid);
    for (;;) {
        struct dsim_op *op = e->head;
        if (!op && d->stop)
            break;
        if (!op || (op->prev && !op->prev->done) || e->inline_busy) {
            /* FIFO: the head waits, and everything behind it, and for an operation of this engine's
             * that a host thread is running itself */
            pthread_cond_wait(&e->wake, &d->mu);
            continue;
        }
        if (op->kind == DSIM_COPY && op->dir == DEVICE_D2H && d->narmed) {
            dsim_lift_for_writer(d, op);
            if (e->head != op)
                continue; /* cannot happen (only this engine pops its FIFO), but never run a stale head */
        }
        pthread_mutex_unlock(&d->mu);
        uint64_t cpu0 = clock_thread_cpu_ns();
        uint64_t gemm = 0;
        if (op->kind == DSIM_COPY)
            memcpy(op->dst, op->src, op->bytes); /* the data really arrives */
        else if (op->has_math)
            gemm = device_exec(&op->math);
        else if (op->fn)
            op->fn(op->arg); /* a gate may wait here for the host: its modelled time is its declared seconds */
        uint64_t cpu = clock_thread_cpu_ns() - cpu0;
        pthread_mutex_lock(&d->mu);
        /* A guarded copy keeps its guard: it comes down when the host learns the copy is done
         * (dsim_lift_guards), not when this thread happens to finish the memcpy. */
        d->gemm_ns += gemm;
        d->gemm_calls += op->has_math && op->math.kind == DEVICE_OP_GEMM;
        if (op->kind == DSIM_COPY)
            e->cpu_ns += cpu;
        op->done = 1;
        e->head = op->next;
        if (!e->head)
            e->tail = NULL;
        dsim_op_unref(op->prev);
        op->prev = NULL;
        dsim_settle(d);
        pthread_cond_broadcast(&d->changed);
        dsim_wake_engines(d); /* another engine's head may wait on this one */
        dsim_op_unref(op);
    }
    pthread_mutex_unlock(&d->mu);
    return NULL;
}

/* Finishes an operation a host thread ran itself (mu held): a compute
 * operation or a staged copy. Its modelled times were set at issue. */
static void dsim_complete_inline(struct dsim *d, struct dsim_engine *e, struct dsim_op *op)
{
    op->done = 1;
    dsim_op_unref(op->prev);
    op->prev = NULL;
    e->inline_busy = 0;
    dsim_settle(d);
    if (d->changed_waiters)
        pthread_cond_broadcast(&d->changed);
    dsim_wake_engines(d); /* an engine's head may wait for us */
    dsim_op_unref(op);
}


/* A staged chunk (the host waits for it at once), or a copy from pinned
 * memory to the device, runs on the host's own thread when its engine is
 * idle and its stream's previous operation is done, as dsim_run runs
 * compute: its times were scheduled at issue, its guard stays up until the
 * host learns it ended (dsim_lift_guards), and an engine thread's wake-up
 * would cost more than a small copy (the loss's 16 bytes, a batch's labels
 * and images every step). A pinned copy to the host stays the engine's: it
 * first lifts the guards of copies out of the same bytes (dsim_lift_for_writer).
 * mu held; dropped for the memcpy. */
static void dsim_copy_inline(struct dsim *d, struct dsim_engine *e, struct dsim_op *op)
{
    e->inline_busy = 1;
    dsim_op_ref(op);
    pthread_mutex_unlock(&d->mu);
    uint64_t cpu0 = clock_thread_cpu_ns();
    memcpy(op->dst, op->src, op->bytes);
    uint64_t cpu = clock_thread_cpu_ns() - cpu0;
    pthread_mutex_lock(&d->mu);
    e->cpu_ns += cpu;
    dsim_complete_inline(d, e, op);
}

/* ---- the write guards' lifting ------------------------------------------------------- */

/* Takes down the guards of the copies the host now knows are done (mu held;
 * drops it for mprotect): each copy that really finished and whose modelled
 * end is not after the host's time, or with `all` every copy that really
 * finished (the host drained the device). A guard stays up from issue until
 * then, whatever the engines' speed: a host write before the host learned
 * the copy was done is caught on any machine, and one after is the host's
 * right. A write caught meanwhile breaks the device, naming the copy. */
static void dsim_lift_guards_where(struct dsim *d, int all, const struct dsim_op *writer);

static void dsim_lift_guards(struct dsim *d, int all) { dsim_lift_guards_where(d, all, NULL); }

/* 1 when armed copy `op` reads bytes that D2H copy `w` writes. */
static int dsim_overlaps(const struct dsim_op *op, const struct dsim_op *w)
{
    const uint8_t *a = op->src, *b = w->dst;
    return a < b + w->bytes && b < a + op->bytes;
}

/* The engine's side of the guards (mu held, D2H copy `w` about to write host
 * memory): a guarded copy out of the same bytes that ends, in modelled time,
 * no later than w starts is over for w: wait until it really is, and take its
 * guard down, so that a stream-ordered round trip through one pinned buffer
 * is no hazard. One that overlaps w in modelled time keeps its guard, and w's
 * write is caught, on any machine. */
static void dsim_lift_for_writer(struct dsim *d, const struct dsim_op *w)
{
    for (int i = 0; i < d->narmed && !d->stop; i++) {
        struct dsim_op *op = d->armed[i];
        if (!op->done && op->end_ns <= w->start_ns && dsim_overlaps(op, w)) {
            dsim_wait_changed(d);
            i = -1; /* the list may have changed meanwhile */
        }
    }
    dsim_lift_guards_where(d, 0, w);
}

/* dsim_lift_guards, or with `writer` the guards dsim_lift_for_writer lifts. */
static void dsim_lift_guards_where(struct dsim *d, int all, const struct dsim_op *writer)
{
    for (;;) {
        struct dsim_op *lift[WRITE_GUARD_BATCH];
        int n = 0, ntraps = 0, ids[WRITE_GUARD_BATCH];
        uint64_t now = vclock_now_ns();
        for (int i = 0; i < d->narmed && n < WRITE_GUARD_BATCH;) {
            struct dsim_op *op = d->armed[i];
            int over = writer ? dsim_overlaps(op, writer) && op->end_ns <= writer->start_ns
                              : all || op->end_ns <= now;
            if (op->done && over) {
                if (op->guard >= 0)
                    ids[ntraps++] = op->guard;
                lift[n++] = op;
                d->armed[i] = d->armed[--d->narmed];
            } else {
                i++;
            }
        }
        if (n == 0)
            return;
        struct write_guard_hit hit[WRITE_GUARD_BATCH];
        int64_t changed[WRITE_GUARD_BATCH];
        d->lifting++;
        pthread_mutex_unlock(&d->mu); /* mprotect, or a pass over the bytes: not under the lock the host's calls need */
        if (ntraps)
            write_guard_remove_all(ids, ntraps, hit);
        for (int i = 0; i < n; i++)
            changed[i] = lift[i]->source_words
                             ? source_hash_first_change(lift[i]->src, lift[i]->bytes, lift[i]->source_words)
                             : -1;
        pthread_mutex_lock(&d->mu);
        if (--d->lifting == 0 && d->changed_waiters)
            pthread_cond_broadcast(&d->changed); /* a drain may wait to free what was read */
        for (int i = 0, trap = 0; i < n; i++) {
            char msg[1024];
            if (lift[i]->guard >= 0) {
                lift[i]->guard = -1;
                if (hit[trap].hit) {
                    dsim_guard_message(d, lift[i], &hit[trap], msg, sizeof msg);
                    dsim_break(d, ERR_STATE, msg);
                }
                trap++;
            } else if (changed[i] >= 0) {
                dsim_changed_message(lift[i], (uint64_t)changed[i], msg, sizeof msg);
                dsim_break(d, ERR_STATE, msg);
            }
            dsim_op_unref(lift[i]); /* the armed list's reference */
        }
    }
}

/* ---- memory ----------------------------------------------------------------------- */

static int dsim_find_dev(struct dsim *d, const void *ptr, uint64_t bytes, const char *what, struct dsim_devbuf **out)
{
    const uint8_t *p = ptr;
    for (int i = 0; i < d->ndev; i++) {
        struct dsim_devbuf *b = &d->dev[i];
        if (p < b->base || p >= b->base + b->bytes)
            continue;
        if (bytes > (uint64_t)(b->base + b->bytes - p))
            return err_set(ERR_RANGE, "%s: %s: %llu bytes at offset %llu run past the end of device buffer '%s' "
                           "(%llu bytes)", d->pub->name, what, (unsigned long long)bytes,
                           (unsigned long long)(p - b->base), b->name, (unsigned long long)b->bytes);
        *out = b;
        return 0;
    }
    return err_set(ERR_RANGE, "%s: %s: %p is not device memory of this device (device_malloc)", d->pub->name, what,
                   ptr);
}

/* dsim_find_dev for span `index` of a kernel's reads or writes, the message
 * written only when the span is wrong (this runs for every span of every
 * operation). */
static int dsim_find_span(struct dsim *d, const struct device_span *sp, const char *kernel, int write, uint32_t index,
                          struct dsim_devbuf **out)
{
    const uint8_t *p = sp->ptr;
    for (int i = 0; i < d->ndev; i++) {
        struct dsim_devbuf *b = &d->dev[i];
        if (p >= b->base && p < b->base + b->bytes && sp->bytes <= (uint64_t)(b->base + b->bytes - p)) {
            *out = b;
            return 0;
        }
    }
    char where[96];
    snprintf(where, sizeof where, "kernel '%s' %s span %u", kernel, write ? "write" : "read", index);
    return dsim_find_dev(d, sp->ptr, sp->bytes, where, out);
}

static struct dsim_hostbuf *dsim_find_host(struct dsim *d, const void *ptr)
{
    const uint8_t *p = ptr;
    for (int i = 0; i < d->nhost; i++)
        if (p >= d->host_bufs[i].base && p < d->host_bufs[i].base + d->host_bufs[i].bytes)
            return &d->host_bufs[i];
    return NULL;
}

static int dsim_grow(void **arr, int *cap, int n, size_t elem)
{
    if (n < *cap)
        return 0;
    int c = *cap ? *cap * 2 : 8;
    void *a = realloc(*arr, (size_t)c * elem);
    if (!a)
        return ERR_NOMEM;
    *arr = a;
    *cap = c;
    return 0;
}

/* Waits for every engine to drain (mu held): what cudaFree and cudaFreeHost do
 * before they free; and for any other thread taking a watch down, which may
 * be reading the bytes about to be freed. */
static void dsim_drain(struct dsim *d)
{
    while (d->eng[0].head || d->eng[1].head || d->eng[2].head || d->waits || d->lifting)
        dsim_wait_changed(d);
    dsim_lift_guards(d, 1);
}

static int dsim_mem_alloc(device_t *dev, uint64_t bytes, const char *name, void **out)
{
    struct dsim *d = dsim_of(dev);
    void *p = NULL;
    pthread_mutex_lock(&d->mu);
    for (int i = 0; i < d->nspare && !p; i++)
        if (d->spare[i].bytes == bytes) {
            p = d->spare[i].base;
            d->spare[i] = d->spare[--d->nspare];
        }
    pthread_mutex_unlock(&d->mu);
    if (p) {
        memset(p, 0, bytes);
    } else {
        /* Populated now, as cudaMalloc's memory is: a first copy into it must not pay page faults. */
        p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
        if (p == MAP_FAILED)
            return err_set(ERR_NOMEM, "%s: cannot allocate %llu bytes of device memory for '%s': %s", dev->name,
                           (unsigned long long)bytes, name, strerror(errno));
    }
    pthread_mutex_lock(&d->mu);
    if (dsim_grow((void **)&d->dev, &d->capdev, d->ndev, sizeof *d->dev)) {
        pthread_mutex_unlock(&d->mu);
        munmap(p, bytes);
        return err_set(ERR_NOMEM, "%s: out of memory for the buffer table", dev->name);
    }
    struct dsim_devbuf *b = &d->dev[d->ndev++];
    memset(b, 0, sizeof *b);
    b->base = p;
    b->bytes = bytes;
    snprintf(b->name, sizeof b->name, "%s", name);
    pthread_mutex_unlock(&d->mu);
    *out = p;
    return 0;
}

static void dsim_mem_free(device_t *dev, void *ptr)
{
    struct dsim *d = dsim_of(dev);
    pthread_mutex_lock(&d->mu);
    dsim_drain(d);
    for (int i = 0; i < d->ndev; i++) {
        if (d->dev[i].base != ptr)
            continue;
        if (d->dev[i].bytes <= DSIM_SPARE_BYTES && d->nspare < DSIM_SPARES)
            d->spare[d->nspare++] = (struct dsim_spare){d->dev[i].base, d->dev[i].bytes};
        else
            munmap(d->dev[i].base, d->dev[i].bytes);
        race_buffer_free(&d->dev[i].race);
        d->dev[i] = d->dev[--d->ndev];
        break;
    }
    pthread_mutex_unlock(&d->mu);
}

/* Page-locks [p, p + bytes); 0, or 1 when the OS refused (RLIMIT_MEMLOCK). */
static int dsim_lock(void *p, uint64_t bytes) { return mlock(p, bytes) == 0 ? 0 : 1; }

static int dsim_add_host(struct dsim *d, uint8_t *base, uint64_t bytes, enum device_host_kind kind,
                         const char *name, uint64_t map_bytes)
{
    if (dsim_grow((void **)&d->host_bufs, &d->caphost, d->nhost, sizeof *d->host_bufs))
        return err_set(ERR_NOMEM, "%s: out of memory for the host buffer table", d->pub->name);
    struct dsim_hostbuf *h = &d->host_bufs[d->nhost++];
    h->base = base;
    h->bytes = bytes;
    h->kind = kind;
    h->map_bytes = map_bytes;
    snprintf(h->name, sizeof h->name, "%s", name);
    return 0;
}

static int dsim_host_alloc(device_t *dev, enum device_host_kind kind, uint64_t bytes, const char *name, void **out)
{
    struct dsim *d = dsim_of(dev);
    uint8_t *p;
    uint64_t map_bytes = 0;
    if (kind == DEVICE_HOST_PAGEABLE) {
        void *m = NULL;
        if (bytes > SIZE_MAX || posix_memalign(&m, 64, (size_t)bytes) != 0)
            return err_set(ERR_NOMEM, "%s: cannot allocate %llu bytes of pageable memory for '%s'", dev->name,
                           (unsigned long long)bytes, name);
        p = m;
    } else {
        void *m = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (m == MAP_FAILED)
            return err_set(ERR_NOMEM, "%s: cannot allocate %llu bytes of %s memory for '%s': %s", dev->name,
                           (unsigned long long)bytes, device_host_kind_name(kind), name, strerror(errno));
        p = m;
        map_bytes = bytes;
    }
    pthread_mutex_lock(&d->mu);
    int refused = kind != DEVICE_HOST_PAGEABLE && dsim_lock(p, bytes);
    d->pin_refused += (uint64_t)refused;
    int rc = dsim_add_host(d, p, bytes, kind, name, map_bytes);
    pthread_mutex_unlock(&d->mu);
    if (rc) {
        if (map_bytes)
            munmap(p, map_bytes);
        else
            free(p);
        return rc;
    }
    *out = p;
    return 0;
}

static void dsim_host_free(device_t *dev, void *ptr)
{
    struct dsim *d = dsim_of(dev);
    pthread_mutex_lock(&d->mu);
    dsim_drain(d);
    for (int i = 0; i < d->nhost; i++) {
        struct dsim_hostbuf *h = &d->host_bufs[i];
        if (h->base != ptr || h->kind == DEVICE_HOST_REGISTERED)
            continue;
        if (h->map_bytes)
            munmap(h->base, h->map_bytes); /* unlocks too */
        else
            free(h->base);
        d->host_bufs[i] = d->host_bufs[--d->nhost];
        break;
    }
    pthread_mutex_unlock(&d->mu);
}

static int dsim_host_register(device_t *dev, void *ptr, uint64_t bytes, const char *name)
{
    struct dsim *d = dsim_of(dev);
    uint8_t *p = ptr;
    pthread_mutex_lock(&d->mu);
    for (int i = 0; i < d->nhost; i++) {
        const struct dsim_hostbuf *h = &d->host_bufs[i];
        if (p < h->base + h->bytes && h->base < p + bytes) {
            pthread_mutex_unlock(&d->mu);
            return err_set(ERR_ARG, "%s: cannot register %llu bytes at %p for '%s': they overlap %s buffer '%s'",
                           dev->name, (unsigned long long)bytes, ptr, name, device_host_kind_name(h->kind), h->name);
        }
    }
    d->pin_refused += (uint64_t)dsim_lock(p, bytes);
    int rc = dsim_add_host(d, p, bytes, DEVICE_HOST_REGISTERED, name, 0);
    pthread_mutex_unlock(&d->mu);
    return rc;
}

static int dsim_host_unregister(device_t *dev, void *ptr)
{
    struct dsim *d = dsim_of(dev);
    pthread_mutex_lock(&d->mu);
    dsim_drain(d);
    for (int i = 0; i < d->nhost; i++) {
        struct dsim_hostbuf *h = &d->host_bufs[i];
        if (h->base != ptr || h->kind != DEVICE_HOST_REGISTERED)
            continue;
        /* Unlock only the pages wholly inside: the edge pages may hold another buffer's bytes. */
        uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
        uintptr_t lo = ((uintptr_t)h->base + page - 1) & ~(page - 1), hi = ((uintptr_t)h->base + h->bytes) & ~(page - 1);
        if (lo < hi)
            munlock((void *)lo, hi - lo);
        d->host_bufs[i] = d->host_bufs[--d->nhost];
        pthread_mutex_unlock(&d->mu);
        return 0;
    }
    pthread_mutex_unlock(&d->mu);
    return err_set(ERR_ARG, "%s: %p was not registered (device_host_register)", dev->name, ptr);
}

static void dsim_host_rename(device_t *dev, const void *ptr, const char *name)
{
    struct dsim *d = dsim_of(dev);
    pthread_mutex_lock(&d->mu);
    struct dsim_hostbuf *h = dsim_find_host(d, ptr);
    if (h)
        snprintf(h->name, sizeof h->name, "%s", name);
    pthread_mutex_unlock(&d->mu);
}

static enum device_host_kind dsim_host_kind_of(device_t *dev, const void *ptr, uint64_t bytes)
{
    struct dsim *d = dsim_of(dev);
    pthread_mutex_lock(&d->mu);
    const struct dsim_hostbuf *h = dsim_find_host(d, ptr);
    enum device_host_kind kind = h && bytes <= (uint64_t)(h->base + h->bytes - (const uint8_t *)ptr)
                                     ? h->kind
                                     : DEVICE_HOST_PAGEABLE;
    pthread_mutex_unlock(&d->mu);
    return kind;
}

/* ---- streams ------------------------------------------------------------------------ */

static int dsim_stream_new(struct dsim *d, const char *name, struct dsim_stream **out)
{
    int id = -1;
    for (int i = 0; i < RACE_MAX_STREAMS && id < 0; i++)
        if (!d->streams[i])
            id = i;
    if (id < 0)
        return err_set(ERR_RANGE, "%s: at most %d streams at once", d->pub->name, RACE_MAX_STREAMS);
    struct dsim_stream *s = calloc(1, sizeof *s);
    if (!s)
        return err_set(ERR_NOMEM, "%s: out of memory for a stream", d->pub->name);
    s->id = id;
    snprintf(s->name, sizeof s->name, "%s", name);
    s->clock = d->host; /* a new stream starts after everything the host knows finished */
    s->clock.t[id] = d->next_seq[id];
    d->streams[id] = s;
    *out = s;
    return 0;
}

static int dsim_stream_create(device_stream_t *pub)
{
    struct dsim *d = dsim_of(pub->dev);
    pthread_mutex_lock(&d->mu);
    struct dsim_stream *s = NULL;
    int rc = dsim_enter(d);
    if (rc == 0)
        rc = dsim_stream_new(d, pub->name, &s);
    pthread_mutex_unlock(&d->mu);
    pub->impl = s;
    return rc;
}

/* Waits for the stream's work, tells the host it finished, frees the
 * stream. Its number may be reused: next_seq keeps counting, and the host's
 * clock now covers every operation the old stream ran. */
static void dsim_stream_free(struct dsim *d, struct dsim_stream *s)
{
    while (s->last && !s->last->done)
        dsim_wait_changed(d);
    race_clock_join(&d->host, &s->clock);
    dsim_op_unref(s->last);
    d->streams[s->id] = NULL;
    free(s);
}

static void dsim_stream_destroy(device_stream_t *pub)
{
    struct dsim *d = dsim_of(pub->dev);
    pthread_mutex_lock(&d->mu);
    dsim_stream_free(d, pub->impl);
    pthread_mutex_unlock(&d->mu);
}

/* ---- copies --------------------------------------------------------------------------- */

/* Appends text to dst[0..len), from *at, cut to len - 1 characters as
 * snprintf would, and always terminated: snprintf's result without its cost
 * (the detector copies two names for every span of every operation). */
static void dsim_text_append(char *dst, size_t len, size_t *at, const char *text)
{
    size_t n = *at < len - 1 ? strnlen(text, len - 1 - *at) : 0;
    memcpy(dst + *at, text, n);
    *at += n;
    dst[*at] = '\0';
}

/* dst = src, cut to len - 1 characters. */
static void dsim_copy_text(char *dst, const char *src, size_t len)
{
    size_t at = 0;
    dsim_text_append(dst, len, &at, src);
}

/* Appends v in decimal, as dsim_text_append. */
static void dsim_text_number(char *dst, size_t len, size_t *at, uint64_t v)
{
    char digits[21], *p = digits + sizeof digits - 1;
    *p = '\0';
    do
        *--p = (char)('0' + v % 10);
    while ((v /= 10) != 0);
    dsim_text_append(dst, len, at, p);
}

/* The detector's ordering check of one operation's access to device memory
 * (mu held): 0, or the hazard (the device breaks). */
static int dsim_access(struct dsim *d, struct dsim_devbuf *b, const void *ptr, uint64_t bytes, int write,
                       const struct dsim_stream *s, const struct race_clock *clock, const char *what)
{
    struct race_access a = {.lo = (uint64_t)((const uint8_t *)ptr - b->base), .write = write, .stream = s->id,
                            .seq = clock->t[s->id]};
    a.hi = a.lo + bytes;
    dsim_copy_text(a.what, what, sizeof a.what);
    dsim_copy_text(a.stream_name, s->name, sizeof a.stream_name);
    char msg[1024];
    int rc = race_buffer_access(&b->race, b->name, &a, clock, msg, sizeof msg);
    if (rc == 1)
        return dsim_break(d, ERR_STATE, msg);
    return rc;
}

/* The next operation's clock on s, for a check before it is issued. */
static struct race_clock dsim_next_clock(const struct dsim *d, const struct dsim_stream *s)
{
    struct race_clock c = s->clock;
    race_clock_join(&c, &d->host);
    c.t[s->id] = d->next_seq[s->id] + 1;
    return c;
}

/* How a copy's pinned source is watched: the write_guard already up on it,
 * or -1; the bytes check's words of it (source_hash_take), or NULL. */
struct dsim_watch {
    int guard;
    uint64_t *words;
};
#define DSIM_UNWATCHED ((struct dsim_watch){.guard = -1, .words = NULL})

/* Queues one engine copy on s (mu held), watched by `watch`, which it owns
 * once it returns the operation (the stream holds it); NULL on failure. */
static struct dsim_op *dsim_queue_copy(struct dsim *d, struct dsim_stream *s, void *dst, const void *src,
                                       uint64_t bytes, enum device_dir dir, const char *what, struct dsim_watch watch,
                                       int staged)
{
    struct dsim_op *op = dsim_op_new(d, DSIM_COPY);
    if (!op)
        return NULL;
    op->dir = dir;
    op->dst = dst;
    op->src = src;
    op->bytes = bytes;
    snprintf(op->what, sizeof op->what, "%s", what);
    int watched = watch.guard >= 0 || watch.words;
    if (watched && dsim_grow((void **)&d->armed, &d->caparmed, d->narmed, sizeof *d->armed)) {
        free(op);
        err_set(ERR_NOMEM, "%s: out of memory for the write guards' list", d->pub->name);
        return NULL;
    }
    int engine = dir == DEVICE_H2D ? DSIM_ENGINE_H2D : DSIM_ENGINE_D2H;
    dsim_issue(d, s, op);
    dsim_schedule(d, op, engine, vclock_ns_of_s(link_copy_seconds(&d->link, bytes)));
    op->guard = watch.guard;
    op->source_words = watch.words;
    d->watched[DEVICE_WRITE_CHECK_TRAP] += watch.guard >= 0;
    d->watched[DEVICE_WRITE_CHECK_BYTES] += watch.words != NULL;
    if (watched) {
        dsim_copy_text(op->stream_name, s->name, sizeof op->stream_name);
        d->armed[d->narmed++] = dsim_op_ref(op);
    }
    struct dsim_engine *e = &d->eng[engine];
    if ((staged || dir == DEVICE_H2D) && !e->head && !e->inline_busy && (!op->prev || op->prev->done))
        dsim_copy_inline(d, e, op);
    else
        dsim_enqueue(d, engine, op);
    return op;
}

/* Waits until bounce chunk k is free (its last engine copy done), mu held. */
static int dsim_bounce_wait(struct dsim *d, int k)
{
    int rc = dsim_wait_op(d, d->bounce_op[k]);
    if (rc == 0 && d->bounce_op[k])
        vclock_wait_until_ns(d->bounce_op[k]->end_ns);
    dsim_op_unref(d->bounce_op[k]);
    d->bounce_op[k] = NULL;
    return rc;
}

/* A pageable H2D copy, as the driver does it: the host copies a chunk into
 * one half of the bounce buffer while the engine moves the other half. Returns
 * when the last chunk has arrived. Called with mu and staging held; drops mu
 * for the host's memcpy. */
static int dsim_stage_h2d(struct dsim *d, struct dsim_stream *s, uint8_t *dst, const uint8_t *src, uint64_t bytes,
                          const char *what)
{
    int rc = 0;
    for (uint64_t off = 0, k = 0; rc == 0 && off < bytes; off += DEVICE_SIM_BOUNCE_BYTES, k ^= 1) {
        uint64_t n = bytes - off < DEVICE_SIM_BOUNCE_BYTES ? bytes - off : DEVICE_SIM_BOUNCE_BYTES;
        rc = dsim_bounce_wait(d, (int)k);
        if (rc)
            break;
        uint8_t *chunk = d->bounce + k * DEVICE_SIM_BOUNCE_BYTES;
        pthread_mutex_unlock(&d->mu);
        memcpy(chunk, src + off, n);
        pthread_mutex_lock(&d->mu);
        uint64_t host_ns = vclock_ns_of_s((double)n / DSIM_HOST_MEMCPY_BPS); /* the host's memcpy, modelled */
        vclock_advance_ns(host_ns);
        d->staging_ns += host_ns;
        struct dsim_op *op = dsim_queue_copy(d, s, dst + off, chunk, n, DEVICE_H2D, what, DSIM_UNWATCHED, 1);
        if (!op)
            return ERR_NOMEM;
        d->bounce_op[k] = dsim_op_ref(op);
    }
    for (int k = 0; k < 2; k++) {
        int rk = dsim_bounce_wait(d, k);
        rc = rc ? rc : rk;
    }
    return rc;
}

/* A pageable D2H copy: the engine fills one half of the bounce buffer while
 * the host copies the other half out. Returns when every byte is in dst. */
static int dsim_stage_d2h(struct dsim *d, struct dsim_stream *s, uint8_t *dst, const uint8_t *src, uint64_t bytes,
                          const char *what)
{
    uint64_t chunks = (bytes + DEVICE_SIM_BOUNCE_BYTES - 1) / DEVICE_SIM_BOUNCE_BYTES;
    int rc = 0;
    for (uint64_t c = 0; rc == 0 && c <= chunks; c++) {
        if (c < chunks) { /* queue chunk c while the host copies chunk c - 1 out */
            uint64_t off = c * DEVICE_SIM_BOUNCE_BYTES, n = bytes - off < DEVICE_SIM_BOUNCE_BYTES ? bytes - off
                                                                                           : DEVICE_SIM_BOUNCE_BYTES;
            struct dsim_op *op = dsim_queue_copy(d, s, d->bounce + (c & 1) * DEVICE_SIM_BOUNCE_BYTES, src + off, n,
                                                 DEVICE_D2H, what, DSIM_UNWATCHED, 1);
            if (!op)
                return ERR_NOMEM;
            d->bounce_op[c & 1] = dsim_op_ref(op);
        }
        if (c == 0)
            continue;
        uint64_t p = c - 1, off = p * DEVICE_SIM_BOUNCE_BYTES;
        uint64_t n = bytes - off < DEVICE_SIM_BOUNCE_BYTES ? bytes - off : DEVICE_SIM_BOUNCE_BYTES;
        rc = dsim_bounce_wait(d, (int)(p & 1));
        if (rc)
            break;
        pthread_mutex_unlock(&d->mu);
        memcpy(dst + off, d->bounce + (p & 1) * DEVICE_SIM_BOUNCE_BYTES, n);
        pthread_mutex_lock(&d->mu);
        uint64_t host_ns = vclock_ns_of_s((double)n / DSIM_HOST_MEMCPY_BPS); /* the host's memcpy, modelled */
        vclock_advance_ns(host_ns);
        d->staging_ns += host_ns;
    }
    for (int k = 0; k < 2; k++) {
        int rk = dsim_bounce_wait(d, k);
        rc = rc ? rc : rk;
    }
    return rc;
}

/* Puts the detector's watch on the pinned source of an H2D copy about to be
 * issued (mu not held: mprotect, or two passes over the bytes): a write trap,
 * or the bytes check's words (device_config's write_check). When neither can
 * be had (the guards' table full, mprotect refused, no memory for the words)
 * the copy goes unwatched, never wrongly reported. */
static struct dsim_watch dsim_watch_source(struct dsim *d, const void *src, uint64_t bytes)
{
    struct dsim_watch w = DSIM_UNWATCHED;
    if (d->write_check == DEVICE_WRITE_CHECK_TRAP) {
        w.guard = write_guard_add(src, bytes, &d->guard_hit);
    } else if ((w.words = malloc(source_hash_blocks(bytes) * sizeof *w.words)) != NULL) {
        source_hash_take(src, bytes, w.words);
    }
    return w;
}

static int dsim_copy_on(struct dsim *d, struct dsim_stream *s, void *dst, const void *src, uint64_t bytes,
                        enum device_dir dir, int64_t batch)
{
    const void *dev_ptr = dir == DEVICE_H2D ? dst : src;
    const void *host_ptr = dir == DEVICE_H2D ? src : dst;
    pthread_mutex_lock(&d->mu);
    const struct dsim_hostbuf *h = dsim_find_host(d, host_ptr);
    int pinned = h && h->kind != DEVICE_HOST_PAGEABLE;
    int fits = pinned && bytes <= (uint64_t)(h->base + h->bytes - (const uint8_t *)host_ptr);
    struct dsim_watch watch = DSIM_UNWATCHED;
    pthread_mutex_unlock(&d->mu);
    if (!pinned) /* one staged copy at a time; the staging lock comes before mu */
        pthread_mutex_lock(&d->staging);
    else if (dir == DEVICE_H2D && fits) /* the detector's watch, before the copy can start (unlocked) */
        watch = dsim_watch_source(d, src, bytes);
    pthread_mutex_lock(&d->mu);
    h = dsim_find_host(d, host_ptr); /* again: the table may have changed meanwhile */
    if (!pinned && h && h->kind != DEVICE_HOST_PAGEABLE) { /* registered meanwhile: no staging after all */
        pthread_mutex_unlock(&d->staging);
        pinned = 1;
    }
    int staged = !pinned;
    struct dsim_devbuf *b = NULL;
    int rc = dsim_enter(d);
    if (rc == 0 && pinned && !(h && h->kind != DEVICE_HOST_PAGEABLE)) /* freed by another thread meanwhile */
        rc = err_set(ERR_STATE, "%s: the pinned buffer at %p was freed while a copy from it was being issued",
                     d->pub->name, host_ptr);
    if (rc == 0)
        rc = dsim_find_dev(d, dev_ptr, bytes, dir == DEVICE_H2D ? "H2D copy destination" : "D2H copy source", &b);
    if (rc == 0 && pinned && bytes > (uint64_t)(h->base + h->bytes - (const uint8_t *)host_ptr))
        rc = err_set(ERR_RANGE, "%s: a %llu-byte copy at offset %llu runs past the end of %s buffer '%s' (%llu "
                     "bytes)", d->pub->name, (unsigned long long)bytes,
                     (unsigned long long)((const uint8_t *)host_ptr - h->base), device_host_kind_name(h->kind),
                     h->name, (unsigned long long)h->bytes);
    if (rc == 0) {
        char size[32], what[192], tag[32] = "";
        if (batch >= 0)
            snprintf(tag, sizeof tag, ", batch %lld", (long long)batch);
        snprintf(what, sizeof what, "copy #%llu (%s of %s %s %s '%s' %s '%s'%s)",
                 (unsigned long long)++d->copy_number, dir == DEVICE_H2D ? "H2D" : "D2H",
                 units_format_bytes(bytes, size, sizeof size), dir == DEVICE_H2D ? "from" : "to",
                 pinned ? device_host_kind_name(h->kind) : "pageable", pinned ? h->name : "memory",
                 dir == DEVICE_H2D ? "to" : "from", b->name, tag);
        /* The ordering check, with the clock of the copy's (first) operation.
         * A staged copy is several operations; later work is ordered after
         * all of them or none (the host waits for the last one). */
        struct race_clock clock = dsim_next_clock(d, s);
        rc = dsim_access(d, b, dev_ptr, bytes, dir == DEVICE_H2D, s, &clock, what);
        if (rc == 0 && pinned) {
            if (!dsim_queue_copy(d, s, dst, src, bytes, dir, what, watch, 0))
                rc = ERR_NOMEM;
            else
                watch = DSIM_UNWATCHED; /* the copy owns it now */
        }
        if (rc == 0 && staged) {
            d->staged_copies++;
            d->staged_bytes += bytes;
            rc = dir == DEVICE_H2D ? dsim_stage_h2d(d, s, dst, src, bytes, what)
                                   : dsim_stage_d2h(d, s, dst, src, bytes, what);
            if (rc == 0) /* the host waited for the last chunk: everything before it is done */
                race_clock_join(&d->host, &s->clock);
        }
    }
    pthread_mutex_unlock(&d->mu);
    if (staged)
        pthread_mutex_unlock(&d->staging);
    if (watch.guard >= 0) { /* the copy never started */
        struct write_guard_hit hit;
        write_guard_remove(watch.guard, &hit);
    }
    free(watch.words);
    return rc;
}

static int dsim_copy_async(device_stream_t *s, void *dst, const void *src, uint64_t bytes, enum device_dir dir,
                           int64_t batch)
{
    return dsim_copy_on(dsim_of(s->dev), s->impl, dst, src, bytes, dir, batch);
}

/* cudaMemcpy: the copy on the device's own stream, then the host waits for it. */
static int dsim_copy(device_t *dev, void *dst, const void *src, uint64_t bytes, enum device_dir dir)
{
    struct dsim *d = dsim_of(dev);
    struct dsim_stream *s = d->default_stream;
    int rc = dsim_copy_on(d, s, dst, src, bytes, dir, -1);
    if (rc)
        return rc;
    pthread_mutex_lock(&d->mu);
    rc = dsim_wait_op(d, s->last);
    if (rc == 0) {
        vclock_wait_until_ns(dsim_stream_end(s));
        race_clock_join(&d->host, &s->clock);
        dsim_lift_guards(d, 0);
        rc = dsim_enter(d);
    }
    pthread_mutex_unlock(&d->mu);
    return rc;
}

/* ---- kernels ------------------------------------------------------------------------ */

/* Checks a compute operation's spans with the detector and puts it on s
 * (mu held): the operation, its stream's reference taken, or NULL with the
 * error in *rc. */
static struct dsim_op *dsim_issue_compute(struct dsim *d, struct dsim_stream *s, const char *name, int64_t batch,
                                          const struct device_span *reads, uint32_t nreads,
                                          const struct device_span *writes, uint32_t nwrites, int *rc)
{
    /* "kernel #N 'name' (batch B)", for the messages that may name it: put
     * together by hand, not by snprintf, which takes glibc's slow path in
     * this program (libquadmath, loaded with OpenBLAS's libgfortran,
     * registers a printf modifier) and showed in the host's profile */
    char what[sizeof ((struct dsim_op *)0)->what];
    size_t at = 0;
    dsim_text_append(what, sizeof what, &at, "kernel #");
    dsim_text_number(what, sizeof what, &at, d->kernel_number + 1);
    dsim_text_append(what, sizeof what, &at, " '");
    dsim_text_append(what, sizeof what, &at, name);
    dsim_text_append(what, sizeof what, &at, "'");
    if (batch >= 0) {
        dsim_text_append(what, sizeof what, &at, " (batch ");
        dsim_text_number(what, sizeof what, &at, (uint64_t)batch);
        dsim_text_append(what, sizeof what, &at, ")");
    }
    struct race_clock clock = dsim_next_clock(d, s);
    *rc = dsim_enter(d);
    for (uint32_t i = 0; *rc == 0 && i < nreads + nwrites; i++) {
        int write = i >= nreads;
        const struct device_span *sp = write ? &writes[i - nreads] : &reads[i];
        struct dsim_devbuf *b;
        *rc = dsim_find_span(d, sp, name, write, write ? i - nreads : i, &b);
        if (*rc == 0)
            *rc = dsim_access(d, b, sp->ptr, sp->bytes, write, s, &clock, what);
    }
    struct dsim_op *op = *rc == 0 ? dsim_op_new(d, DSIM_KERNEL) : NULL;
    if (*rc == 0 && !op)
        *rc = ERR_NOMEM;
    if (op) {
        d->kernel_number++;
        memcpy(op->what, what, sizeof what);
        dsim_issue(d, s, op);
    }
    return op;
}

static int dsim_launch(device_stream_t *pub, const struct device_kernel *k)
{
    struct dsim *d = dsim_of(pub->dev);
    pthread_mutex_lock(&d->mu);
    int rc;
    struct dsim_op *op = dsim_issue_compute(d, pub->impl, k->name ? k->name : "kernel", k->batch, k->reads,
                                            k->nreads, k->writes, k->nwrites, &rc);
    if (op) {
        op->fn = k->fn;
        op->arg = k->arg;
        /* its declared seconds, never the time its function takes here: a gate that waits for the host
         * lasts what it says */
        dsim_schedule(d, op, DSIM_ENGINE_COMPUTE, vclock_ns_of_s(k->seconds));
        dsim_enqueue(d, DSIM_ENGINE_COMPUTE, op);
    }
    pthread_mutex_unlock(&d->mu);
    return rc;
}


/* A device operation's modelled duration on the GPU profile: a matrix
 * product is bound by its flops or its bytes, whichever takes longer (the
 * roofline: max(2mnk / GEMM rate, bytes / memory bandwidth), the GEMM rate
 * being the profile's share of the FP32 peak, hw_gemm_flops), a batched one
 * by count times one product's flops and bytes (its spans also cover the gaps
 * between products, which it never touches); a kernel, a memset or a
 * device-to-device copy by the bytes it reads and writes; each pays one
 * launch. A marked access is the host's work on device memory: it takes no
 * device time. */
static uint64_t dsim_op_ns(const struct dsim *d, const struct device_op *op)
{
    if (op->kind == DEVICE_OP_ACCESS)
        return 0;
    double bytes = 0, flops = 0;
    if (op->kind == DEVICE_OP_GEMM) {
        const struct device_gemm *g = &op->gemm;
        double count = g->count > 1 ? g->count : 1;
        bytes = count * (double)device_gemm_product_bytes(g);
        flops = count * 2.0 * (double)g->m * (double)g->n * (double)g->k;
    } else {
        for (uint32_t i = 0; i < op->nreads; i++)
            bytes += (double)op->reads[i].bytes;
        for (uint32_t i = 0; i < op->nwrites; i++)
            bytes += (double)op->writes[i].bytes;
    }
    double seconds = bytes / d->memory_bps;
    if (flops / d->gemm_flops > seconds)
        seconds = flops / d->gemm_flops;
    return vclock_ns_of_s(seconds + DSIM_LAUNCH_S);
}

/* A device operation (transfer/device_ops.h). When nothing is ahead of it,
 * neither on its stream nor on the compute engine, the host runs it at once
 * on its own thread: the order is the same as the engine's, and a step of
 * small kernels does not pay a thread's wake-up for each. Otherwise it
 * queues on the compute engine behind what it must follow. */
static int dsim_run(device_stream_t *pub, const struct device_op *dop)
{
    struct dsim *d = dsim_of(pub->dev);
    pthread_mutex_lock(&d->mu);
    int rc;
    struct dsim_op *op = dsim_issue_compute(d, pub->impl, dop->name, dop->batch, dop->reads, dop->nreads,
                                            dop->writes, dop->nwrites, &rc);
    if (!op) {
        pthread_mutex_unlock(&d->mu);
        return rc;
    }
    op->math = *dop;
    op->has_math = 1;
    dsim_schedule(d, op, DSIM_ENGINE_COMPUTE, dsim_op_ns(d, dop));
    struct dsim_engine *e = &d->eng[DSIM_ENGINE_COMPUTE];
    if (e->head || e->inline_busy || (op->prev && !op->prev->done)) {
        dsim_enqueue(d, DSIM_ENGINE_COMPUTE, op);
        pthread_mutex_unlock(&d->mu);
        return 0;
    }
    e->inline_busy = 1;
    dsim_op_ref(op);
    pthread_mutex_unlock(&d->mu);
    uint64_t gemm = device_exec(&op->math);
    pthread_mutex_lock(&d->mu);
    d->gemm_ns += gemm;
    d->gemm_calls += op->math.kind == DEVICE_OP_GEMM;
    dsim_complete_inline(d, e, op);
    pthread_mutex_unlock(&d->mu);
    return 0;
}

/* ---- events ------------------------------------------------------------------------- */

static int dsim_event_create(device_event_t *pub)
{
    struct dsim_event *e = calloc(1, sizeof *e);
    if (!e)
        return err_set(ERR_NOMEM, "%s: out of memory for an event", pub->dev->name);
    pub->impl = e;
    return 0;
}

static void dsim_event_destroy(device_event_t *pub)
{
    struct dsim *d = dsim_of(pub->dev);
    struct dsim_event *e = pub->impl;
    pthread_mutex_lock(&d->mu);
    dsim_op_unref(e->op);
    pthread_mutex_unlock(&d->mu);
    free(e);
}

static int dsim_event_record(device_event_t *pub, device_stream_t *spub)
{
    struct dsim *d = dsim_of(pub->dev);
    struct dsim_event *e = pub->impl;
    struct dsim_stream *s = spub->impl;
    pthread_mutex_lock(&d->mu);
    int rc = dsim_enter(d);
    if (rc == 0) {
        dsim_op_unref(e->op);
        e->op = dsim_op_ref(s->last);
        e->time_ns = dsim_max(vclock_now_ns(), dsim_stream_end(s));
        e->recorded = 1;
        race_clock_join(&s->clock, &d->host);
        e->clock = s->clock;
    }
    pthread_mutex_unlock(&d->mu);
    return rc;
}

static int dsim_stream_wait_event(device_stream_t *spub, device_event_t *pub)
{
    struct dsim *d = dsim_of(pub->dev);
    struct dsim_event *e = pub->impl;
    struct dsim_stream *s = spub->impl;
    pthread_mutex_lock(&d->mu);
    int rc = dsim_enter(d);
    if (rc == 0 && e->recorded) {
        /* Modelled: what s runs next starts after the event's time, whether or not the engines
         * really got there yet (that must not change a device time). */
        s->floor_ns = dsim_max(s->floor_ns, e->time_ns);
        if (e->op && !e->op->done && e->op != s->last) { /* physically: a point not reached yet on another stream */
            struct dsim_op *op = dsim_op_new(d, DSIM_WAIT);
            if (!op) {
                rc = ERR_NOMEM;
            } else {
                snprintf(op->what, sizeof op->what, "a wait on an event");
                op->dep = dsim_op_ref(e->op);
                op->refs++; /* the pending list's */
                dsim_issue(d, s, op);
                dsim_schedule(d, op, -1, 0);
                op->next = d->waits;
                d->waits = op;
                dsim_settle(d);
            }
        }
        if (rc == 0)
            race_clock_join(&s->clock, &e->clock);
    }
    pthread_mutex_unlock(&d->mu);
    return rc;
}

/* Reached, for device_event_elapsed: in modelled time, its time is not after
 * the host's (what the host could know), whatever the engines really did:
 * the answer must not depend on this machine's speed. */
static int dsim_event_reached(const struct dsim_event *e) { return !e->recorded || e->time_ns <= vclock_now_ns(); }

/* The host learned that everything up to modelled time t on its clock is
 * done (mu held): its clock moves there, and the guards of the copies that
 * ended by then come down. */
static int dsim_host_learns(struct dsim *d, uint64_t t)
{
    vclock_wait_until_ns(t);
    dsim_lift_guards(d, 0);
    return dsim_enter(d);
}

static int dsim_event_synchronize(device_event_t *pub)
{
    struct dsim *d = dsim_of(pub->dev);
    struct dsim_event *e = pub->impl;
    pthread_mutex_lock(&d->mu);
    int rc = dsim_wait_op(d, e->recorded ? e->op : NULL);
    if (rc == 0 && e->recorded) {
        race_clock_join(&d->host, &e->clock);
        rc = dsim_host_learns(d, e->time_ns);
    }
    pthread_mutex_unlock(&d->mu);
    return rc;
}

/* Modelled: reached when the event's time is not after the host's. Only then
 * does it wait for the engines to really get there (they are not slower than
 * the model by design, only by this machine's speed); when the model says
 * "not yet" it answers at once, so a query behind a gate that waits for the
 * host never blocks. */
static int dsim_event_query(device_event_t *pub)
{
    struct dsim *d = dsim_of(pub->dev);
    struct dsim_event *e = pub->impl;
    pthread_mutex_lock(&d->mu);
    int rc = dsim_enter(d);
    if (rc == 0 && (!e->recorded || e->time_ns <= vclock_now_ns())) {
        rc = dsim_wait_op(d, e->recorded ? e->op : NULL);
        if (rc == 0 && e->recorded) {
            race_clock_join(&d->host, &e->clock);
            rc = dsim_host_learns(d, e->time_ns);
        }
        if (rc == 0)
            rc = 1;
    }
    pthread_mutex_unlock(&d->mu);
    return rc;
}

static int dsim_event_elapsed(device_event_t *a, device_event_t *b, double *seconds)
{
    struct dsim *d = dsim_of(a->dev);
    struct dsim_event *ea = a->impl, *eb = b->impl;
    pthread_mutex_lock(&d->mu);
    int rc = dsim_enter(d);
    if (rc == 0 && (!ea->recorded || !eb->recorded))
        rc = err_set(ERR_STATE, "%s: device_event_elapsed: the %s event was never recorded", d->pub->name,
                     ea->recorded ? "end" : "start");
    else if (rc == 0 && (!dsim_event_reached(ea) || !dsim_event_reached(eb)))
        rc = err_set(ERR_STATE, "%s: device_event_elapsed: the %s event is not reached yet (synchronize first)",
                     d->pub->name, dsim_event_reached(ea) ? "end" : "start");
    if (rc == 0)
        *seconds = eb->time_ns >= ea->time_ns ? (double)(eb->time_ns - ea->time_ns) * 1e-9
                                              : -(double)(ea->time_ns - eb->time_ns) * 1e-9;
    pthread_mutex_unlock(&d->mu);
    return rc;
}

static int dsim_stream_synchronize(device_stream_t *pub)
{
    struct dsim *d = dsim_of(pub->dev);
    struct dsim_stream *s = pub->impl;
    pthread_mutex_lock(&d->mu);
    int rc = dsim_wait_op(d, s->last);
    if (rc == 0) {
        race_clock_join(&d->host, &s->clock);
        rc = dsim_host_learns(d, dsim_stream_end(s));
    }
    pthread_mutex_unlock(&d->mu);
    return rc;
}

static int dsim_synchronize(device_t *dev)
{
    struct dsim *d = dsim_of(dev);
    pthread_mutex_lock(&d->mu);
    int rc = 0;
    uint64_t end = 0;
    for (int i = 0; rc == 0 && i < RACE_MAX_STREAMS; i++) {
        if (!d->streams[i])
            continue;
        rc = dsim_wait_op(d, d->streams[i]->last);
        if (rc == 0) {
            race_clock_join(&d->host, &d->streams[i]->clock);
            end = dsim_max(end, dsim_stream_end(d->streams[i]));
        }
    }
    if (rc == 0)
        rc = dsim_host_learns(d, end);
    pthread_mutex_unlock(&d->mu);
    return rc;
}

/* ---- the device ---------------------------------------------------------------------- */

static void dsim_stats(device_t *dev, struct device_stats *out)
{
    struct dsim *d = dsim_of(dev);
    pthread_mutex_lock(&d->mu);
    out->staged_copies = d->staged_copies;
    out->staged_bytes = d->staged_bytes;
    out->staging_s = (double)d->staging_ns * 1e-9;
    out->engine_busy_s[DEVICE_H2D] = (double)d->eng[DSIM_ENGINE_H2D].busy_ns * 1e-9;
    out->engine_busy_s[DEVICE_D2H] = (double)d->eng[DSIM_ENGINE_D2H].busy_ns * 1e-9;
    out->engine_cpu_s = (double)(d->eng[DSIM_ENGINE_H2D].cpu_ns + d->eng[DSIM_ENGINE_D2H].cpu_ns) * 1e-9;
    out->watched_copies[DEVICE_WRITE_CHECK_TRAP] = d->watched[DEVICE_WRITE_CHECK_TRAP];
    out->watched_copies[DEVICE_WRITE_CHECK_BYTES] = d->watched[DEVICE_WRITE_CHECK_BYTES];
    out->pin_refused = d->pin_refused;
    out->gemm_calls = d->gemm_calls;
    out->gemm_s = (double)d->gemm_ns * 1e-9;
    pthread_mutex_unlock(&d->mu);
}

static int dsim_link(const device_t *dev, struct link_profile *out)
{
    *out = dsim_of(dev)->link;
    return 0;
}

static void dsim_free(struct dsim *d)
{
    for (int i = 0; i < RACE_MAX_STREAMS; i++)
        if (d->streams[i])
            dsim_stream_free(d, d->streams[i]);
    for (int k = 0; k < 2; k++)
        dsim_op_unref(d->bounce_op[k]);
    for (int i = 0; i < d->ndev; i++) {
        munmap(d->dev[i].base, d->dev[i].bytes);
        race_buffer_free(&d->dev[i].race);
    }
    for (int i = 0; i < d->nspare; i++)
        munmap(d->spare[i].base, d->spare[i].bytes);
    for (int i = 0; i < d->nhost; i++) {
        struct dsim_hostbuf *h = &d->host_bufs[i];
        if (h->kind == DEVICE_HOST_REGISTERED)
            continue; /* the caller's memory */
        if (h->map_bytes)
            munmap(h->base, h->map_bytes);
        else
            free(h->base);
    }
    for (int i = 0; i < d->narmed; i++) { /* never lifted (a failed open or a broken device) */
        struct write_guard_hit hit;
        if (d->armed[i]->guard >= 0)
            write_guard_remove(d->armed[i]->guard, &hit);
        dsim_op_unref(d->armed[i]);
    }
    free(d->armed);
    free(d->dev);
    free(d->host_bufs);
    free(d->bounce);
    pthread_cond_destroy(&d->changed);
    for (int i = 0; i < DSIM_ENGINES; i++)
        pthread_cond_destroy(&d->eng[i].wake);
    pthread_mutex_destroy(&d->staging);
    pthread_mutex_destroy(&d->mu);
    free(d);
}

static void dsim_stop(struct dsim *d, int started)
{
    pthread_mutex_lock(&d->mu);
    d->stop = 1;
    for (int i = 0; i < DSIM_ENGINES; i++)
        pthread_cond_broadcast(&d->eng[i].wake);
    pthread_mutex_unlock(&d->mu);
    for (int i = 0; i < started; i++)
        pthread_join(d->eng[i].thread, NULL);
}

static int dsim_open(device_t *dev, const struct device_config *cfg)
{
    if (!(cfg->link.bandwidth_bps > 0) || !(cfg->link.latency_s >= 0))
        return err_set(ERR_ARG, "%s: the simulated link needs a bandwidth above 0 and a latency of 0 or more "
                       "(link_profile_find)", dev->name);
    if (!(cfg->gemm_flops > 0) || !(cfg->gpu_memory_bps > 0))
        return err_set(ERR_ARG, "%s: the simulated GPU needs a GEMM rate and a memory bandwidth above 0 "
                       "(device_config_default, device_config_hw)", dev->name);
    struct dsim *d = calloc(1, sizeof *d);
    if (!d)
        return err_set(ERR_NOMEM, "%s: out of memory", dev->name);
    d->pub = dev;
    d->link = cfg->link;
    d->gemm_flops = cfg->gemm_flops;
    d->memory_bps = cfg->gpu_memory_bps;
    d->write_check = cfg->write_check;
    device_exec_one_blas_thread();
    pthread_mutex_init(&d->mu, NULL);
    pthread_mutex_init(&d->staging, NULL);
    pthread_cond_init(&d->changed, NULL);
    for (int i = 0; i < DSIM_ENGINES; i++) {
        d->eng[i].d = d;
        pthread_cond_init(&d->eng[i].wake, NULL);
    }
    dev->impl = d;
    d->bounce = malloc(2 * (size_t)DEVICE_SIM_BOUNCE_BYTES);
    int rc = d->bounce ? dsim_stream_new(d, "default", &d->default_stream)
                       : err_set(ERR_NOMEM, "%s: out of memory for the bounce buffer", dev->name);
    if (rc == 0)
        d->pin_refused += (uint64_t)dsim_lock(d->bounce, 2 * (uint64_t)DEVICE_SIM_BOUNCE_BYTES);
    int started = 0;
    while (rc == 0 && started < DSIM_ENGINES) {
        int e = pthread_create(&d->eng[started].thread, NULL, dsim_engine_main, &d->eng[started]);
        if (e)
            rc = err_set(ERR_IO, "%s: cannot start a copy engine thread: %s", dev->name, strerror(e));
        else
            started++;
    }
    if (rc) {
        dsim_stop(d, started);
        dsim_free(d);
        return rc;
    }
    char bw[32];
    snprintf(bw, sizeof bw, "%.2f GB/s", d->link.bandwidth_bps / 1e9);
    snprintf(dev->description, sizeof dev->description,
             "simulated device on %s (modelled: %s, %.1f us per copy; the wire's limit %.2f GB/s)", d->link.title,
             bw, d->link.latency_s * 1e6, d->link.limit_bps / 1e9);
    return 0;
}

static void dsim_close(device_t *dev)
{
    struct dsim *d = dsim_of(dev);
    pthread_mutex_lock(&d->mu);
    dsim_drain(d);
    pthread_mutex_unlock(&d->mu);
    dsim_stop(d, DSIM_ENGINES);
    dsim_free(d);
}

const struct device_backend_ops device_backend_sim = {
    .name = "sim",
    .probe = NULL,
    .open = dsim_open,
    .close = dsim_close,
    .link = dsim_link,
    .mem_alloc = dsim_mem_alloc,
    .mem_free = dsim_mem_free,
    .host_alloc = dsim_host_alloc,
    .host_free = dsim_host_free,
    .host_register = dsim_host_register,
    .host_unregister = dsim_host_unregister,
    .host_rename = dsim_host_rename,
    .host_kind_of = dsim_host_kind_of,
    .stream_create = dsim_stream_create,
    .stream_destroy = dsim_stream_destroy,
    .stream_native = NULL,
    .copy_async = dsim_copy_async,
    .copy = dsim_copy,
    .launch = dsim_launch,
    .run = dsim_run,
    .event_create = dsim_event_create,
    .event_destroy = dsim_event_destroy,
    .event_record = dsim_event_record,
    .stream_wait_event = dsim_stream_wait_event,
    .event_synchronize = dsim_event_synchronize,
    .event_query = dsim_event_query,
    .event_elapsed = dsim_event_elapsed,
    .stream_synchronize = dsim_stream_synchronize,
    .synchronize = dsim_synchronize,
    .stats = dsim_stats,
};
