/* Lab file generated from lib/loader/loader.c by labs/labgen.awk: write the LAB regions (see labs/03-loader/README.md). */
#include "lab_todo.h"
/* loader: the worker loader of chapter 3 (see loader.h for the contract).
 *
 * The ring. The loader owns max(workers, 1) × prefetch slots, allocated once.
 * A slot moves FREE -> FILLING (a worker collates into it) -> READY (or FAILED)
 * -> HELD (the trainer has it) -> FREE (loader_release). Nothing else is ever
 * allocated per batch, so memory is bounded by the ring, not by the epoch.
 *
 * Work distribution: one task = one whole batch, taken from a shared counter
 * (next_claim) by whichever worker is idle. PyTorch instead deals batches to
 * workers round-robin in advance (batch b always goes to worker b mod K), so
 * one slow sample on worker w also delays every later batch dealt to w. With
 * a shared counter a slow batch only holds its own worker; the others keep
 * taking the next batches. They can run at most `slots` batches ahead of the
 * trainer, because a batch can only be claimed into a free slot: that is the
 * bounded prefetch, and it is what keeps memory fixed while one sample stalls.
 * We chose whole batches, not single samples, as the unit: a sample costs
 * about a microsecond to copy, and a lock round-trip per sample would cost as
 * much as the sample; per batch it is noise.
 *
 * The reorder buffer. In order, batch b is collated into slot b mod slots, so
 * the slot number is the reorder buffer's key: loader_next() waits for slot
 * (next_deliver mod slots) to hold batch next_deliver, and a worker may claim
 * batch b only when that slot is free, i.e. once batch b - slots was released.
 * Out of order, any free slot is taken and the lowest finished batch is
 * delivered first.
 *
 * Errors and stopping. A failing sample marks its slot FAILED with a message
 * naming the batch, sample, position and worker; claims stop, the batches
 * before it are still delivered, then loader_next() returns the error. To
 * abandon an epoch (loader_stop, a new epoch, close, an error), the loader sets
 * `stopping`, waits until no slot is FILLING, and frees the finished ones.
 * Batches the caller holds stay valid until it releases them.
 *
 * Locking: one mutex guards all the state; workers drop it while collating.
 * Two condition variables: work_cv (workers: a slot was freed, an epoch began,
 * close) and done_cv (the trainer: a slot finished, or a worker failed).
 */
#include "loader/loader.h"

#include "base/clock.h"
#include "base/error.h"
#include "base/hash.h"
#include "base/mem.h"
#include "base/vclock.h"

#include <assert.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* PyTorch's DataLoader default prefetch_factor. */
#define LOADER_DEFAULT_PREFETCH 2
/* Slots start on a page: what DMA engines and cudaHostRegister like best. */
#define LOADER_SLOT_ALIGN 4096
#define LOADER_MAX_WORKERS 1024
#define LOADER_MAX_PREFETCH 1024
#define LOADER_MAX_TIMEOUT_S 1e6

enum slot_state { SLOT_FREE, SLOT_FILLING, SLOT_READY, SLOT_FAILED, SLOT_HELD };

struct loader_slot {
    enum slot_state state;
    uint64_t batch;          /* the batch it fills or holds */
    uint64_t claimed_ns;     /* when a worker claimed it (timeout messages) */
    uint64_t free_ns;        /* modelled: when the trainer released it */
    uint64_t ready_ns;       /* modelled: when its batch's collate ends */
    _Atomic uint32_t position; /* the row being read now, for the timeout message */
    _Atomic uint64_t index;    /* the dataset index being read now */
    int err;                 /* FAILED: the sample's code and message */
    char msg[768];
    struct loader_batch view;
    void *mem;               /* the allocator's block: data, then labels and lengths */
    uint64_t *indices;       /* a copy of the batch's indices, valid while HELD */
    struct dataset_record *recs; /* the collate's scratch: max_batch records (loader_job.recs) */
};

struct loader_worker {
    struct loader *loader;
    int id;
    pthread_t thread;
};

struct loader {
    const dataset_t *ds;
    struct loader_options opt;
    uint32_t nslots;
    uint64_t data_bytes;     /* data region of a slot */
    uint64_t labels_offset;  /* where labels start in a slot (then lengths) */
    uint64_t alloc_bytes;    /* the whole slot: data, labels, lengths */
    struct loader_slot *slots;
    struct loader_worker *workers;
    uint32_t nworkers;       /* threads started */

    pthread_mutex_t mu;
    pthread_cond_t work_cv, done_cv;

    /* The epoch. */
    uint64_t epoch;
    uint64_t *indices, *offsets; /* offsets: nbatches + 1 entries */
    uint64_t indices_cap, offsets_cap;
    uint64_t nbatches;
    uint64_t next_claim;     /* the next batch a worker may take */
    uint64_t next_deliver;   /* in order: the next batch number; out of order: batches delivered */
    int started;             /* an epoch was started */
    int running;             /* claims are allowed */
    int ended;               /* the epoch failed or was stopped: loader_next says so */
    char ended_msg[1024];
    int fatal;               /* a claim or pick failed (a lab stub): the epoch cannot go on */
    char fatal_msg[1024];
    int closing;
    _Atomic int stopping;
    uint32_t filling;        /* slots in FILLING */
    uint32_t busy;           /* slots not FREE */
    /* Workers blocked on work_cv, and how many of them were woken and have
     * not run yet: the others do nothing until the trainer frees a slot or
     * starts an epoch (loader_stats' idle_workers). */
    uint32_t waiting, wakes_due;

    /* Statistics of the epoch. */
    uint64_t start_ns, last_ns, wait_ns, max_wait_ns;
    /* Virtual time (opt.modelled): the modelled workers' free times, and the epoch's start. */
    uint64_t *worker_free_ns;
    uint64_t epoch_ns;
    uint64_t got_batches, got_samples, got_bytes;
    uint32_t max_busy;
};

static void slot_set(struct loader *L, struct loader_slot *s, enum slot_state state)
{
    if (s->state == SLOT_FREE && state != SLOT_FREE) {
        L->busy++;
        if (L->busy > L->max_busy)
            L->max_busy = L->busy;
    } else if (s->state != SLOT_FREE && state == SLOT_FREE) {
        L->busy--;
    }
    if (state == SLOT_FILLING)
        L->filling++;
    else if (s->state == SLOT_FILLING)
        L->filling--;
    s->state = state;
}

/* Wakes one waiting worker, or all of them, counting the wakes until each
 * woken worker has run. mu held. */
static void loader_wake_workers(struct loader *L, int all)
{
    if (all) {
        L->wakes_due = L->waiting;
        pthread_cond_broadcast(&L->work_cv);
    } else {
        if (L->wakes_due < L->waiting)
            L->wakes_due++;
        pthread_cond_signal(&L->work_cv);
    }
}

static const char *worker_name(int worker, char buf[32])
{
    if (worker < 0)
        return "the caller's thread";
    snprintf(buf, 32, "worker %d", worker);
    return buf;
}

uint64_t loader_sample_seed(uint64_t base, uint64_t epoch, uint64_t index)
{
    /* splitmix64's finaliser (hash.h), applied in a chain so that
     * (base, epoch, index) and (base, index, epoch) differ; each link folds
     * the next part in as boost::hash_combine does (golden-ratio constant). */
    uint64_t x = base;
    uint64_t parts[2] = {epoch, index};
    for (int i = 0; i < 2; i++)
        x = hash_mix64(x ^ (parts[i] + 0x9e3779b97f4a7c15ull + (x << 6) + (x >> 2)));
    return x;
}

void loader_options_default(struct loader_options *opt)
{
    memset(opt, 0, sizeof *opt);
    opt->prefetch = LOADER_DEFAULT_PREFETCH;
    opt->max_batch = 256;
}

int loader_stopping(const loader_t *L) { return atomic_load_explicit(&L->stopping, memory_order_relaxed); }

/* ---- reading samples for a collate (loader_collate.c holds the collates) --------- */

/* Marks sample i as the one this worker is on (a timeout names it); refuses
 * once the loader is stopping. */
static int loader_enter_sample(struct loader_job *job, uint32_t i)
{
    struct loader *L = job->loader;
    struct loader_slot *slot = &L->slots[job->out->slot];
    uint64_t index = job->indices[i];
    atomic_store_explicit(&slot->index, index, memory_order_relaxed);
    atomic_store_explicit(&slot->position, i, memory_order_relaxed);
    if (loader_stopping(L))
        return err_set(ERR_STATE, "sample %llu: abandoned, the loader is stopping", (unsigned long long)index);
    return 0;
}

/* Applies the transform, if there is one, to sample i, read into dst. */
static int loader_transform_sample(struct loader_job *job, uint32_t i, void *dst, const struct dataset_record *rec)
{
    struct loader *L = job->loader;
    if (!L->opt.transform)
        return 0;
    struct loader_sample s = {
        .index = job->indices[i],
        .epoch = job->epoch,
        .batch = job->batch,
        .position = i,
        .worker = job->worker,
        .seed = loader_sample_seed(L->opt.seed, job->epoch, job->indices[i]),
        .loader = L,
    };
    return L->opt.transform(L->opt.transform_user, &s, dst, rec->bytes);
}

static int loader_sample_failed(const struct loader_job *job, uint32_t i, int rc)
{
    char name[32];
    return err_wrap(rc, "sample %llu (position %u) on %s", (unsigned long long)job->indices[i], i,
                    worker_name(job->worker, name));
}

int loader_read_sample(struct loader_job *job, uint32_t i, void *dst, uint64_t cap, struct dataset_record *rec)
{
    int rc = loader_enter_sample(job, i);
    if (rc == 0)
        rc = dataset_read(job->ds, job->indices[i], dst, cap, rec);
    if (rc == 0)
        rc = loader_transform_sample(job, i, dst, rec);
    return rc < 0 ? loader_sample_failed(job, i, rc) : 0;
}

int loader_read_rows(struct loader_job *job, void *data, uint64_t stride, struct dataset_record *recs)
{
    int rc = job->count ? loader_enter_sample(job, 0) : 0;
    if (rc == 0)
        rc = dataset_read_batch(job->ds, job->indices, job->count, data, stride, recs);
    if (rc < 0) {
        char name[32];
        return err_wrap(rc, "on %s", worker_name(job->worker, name));
    }
    for (uint32_t i = 0; i < job->count && job->loader->opt.transform; i++) {
        rc = loader_enter_sample(job, i);
        if (rc == 0)
            rc = loader_transform_sample(job, i, (uint8_t *)data + i * stride, &recs[i]);
        if (rc < 0)
            return loader_sample_failed(job, i, rc);
    }
    return 0;
}

/* ---- the ring: claim (bounded prefetch) and pick (reorder buffer) ---------------- */

/* Chooses the batch an idle worker (or the caller, with 0 workers) collates
 * next, and the slot it goes into. Called with mu held while the epoch runs.
 * Returns 1 with *batch and *slot set and next_claim advanced, 0 when nothing
 * may be claimed now (all batches taken, or no free slot), or a negative ERR_*. */
static int loader_claim(struct loader *L, uint64_t *batch, uint32_t *slot)
{
    /* LAB bounded-prefetch: your code here (see labs/03-loader/README.md). */
    return LAB_TODO("bounded-prefetch");
}

/* Chooses the slot loader_next() hands out: in order, the one holding batch
 * next_deliver once it is finished; out of order, the lowest finished batch.
 * Called with mu held. Returns 1 with *slot set (a READY or FAILED slot), 0
 * when the batch to deliver is not finished yet, or a negative ERR_*. */
static int loader_pick(struct loader *L, uint32_t *slot)
{
    /* LAB reorder-buffer: your code here (see labs/03-loader/README.md). */
    return LAB_TODO("reorder-buffer");
}

/* ---- workers ----------------------------------------------------------------- */

/* Ends the epoch because the ring itself failed (not a sample): loader_next()
 * reports it. mu held. */
static void loader_fail_locked(struct loader *L, int code, const char *msg)
{
    L->fatal = code;
    snprintf(L->fatal_msg, sizeof L->fatal_msg, "%s", msg);
    L->running = 0;
    pthread_cond_broadcast(&L->done_cv);
}

/* Virtual time: the modelled start and end of the batch just claimed into
 * `slot` (mu held, in claim order: claims and this call share one lock
 * hold). The modelled worker is the earliest free one (the lowest on a tie),
 * not the thread that claimed: which thread wins a claim is the machine's
 * business, and must not change a modelled time. */
static void loader_model_batch(struct loader *L, struct loader_slot *slot, uint32_t count)
{
    uint32_t n = L->opt.workers ? L->opt.workers : 1, w = 0;
    for (uint32_t i = 1; i < n; i++)
        if (L->worker_free_ns[i] < L->worker_free_ns[w])
            w = i;
    uint64_t start = L->worker_free_ns[w];
    start = start > slot->free_ns ? start : slot->free_ns;
    start = start > L->epoch_ns ? start : L->epoch_ns;
    uint64_t record = dataset_info(L->ds)->record_bytes; /* 0: variable-length records, only their count costs */
    uint64_t cost = vclock_ns_of_s((double)count * L->opt.model_record_s) + vclock_memcpy_ns(count * record);
    slot->ready_ns = start + cost;
    L->worker_free_ns[w] = slot->ready_ns;
}

/* Collates batch `batch` into slot `s` on behalf of `worker`. Called with mu
 * held; drops it while collating. */
static void loader_fill(struct loader *L, uint32_t s, uint64_t batch, int worker)
{
    struct loader_slot *slot = &L->slots[s];
    uint64_t first = L->offsets[batch];
    uint32_t count = (uint32_t)(L->offsets[batch + 1] - first);
    memcpy(slot->indices, L->indices + first, count * sizeof *slot->indices);
    slot_set(L, slot, SLOT_FILLING);
    slot->batch = batch;
    slot->claimed_ns = clock_now_ns();
    if (L->opt.modelled)
        loader_model_batch(L, slot, count);
    atomic_store_explicit(&slot->position, 0, memory_order_relaxed);
    atomic_store_explicit(&slot->index, slot->indices[0], memory_order_relaxed);
    struct loader_batch *b = &slot->view;
    b->number = batch;
    b->epoch = L->epoch;
    b->count = count;
    b->indices = slot->indices;
    b->worker = worker;
    struct loader_job job = {
        .loader = L, .ds = L->ds, .indices = slot->indices, .count = count,
        .batch = batch, .epoch = L->epoch, .worker = worker, .out = b, .cap = L->data_bytes, .recs = slot->recs,
    };
    loader_collate_fn collate = L->opt.collate ? L->opt.collate : loader_collate_stack;
    pthread_mutex_unlock(&L->mu);

    int rc = collate(L->opt.collate_user, &job);

    pthread_mutex_lock(&L->mu);
    if (loader_stopping(L)) {
        slot_set(L, slot, SLOT_FREE); /* abandoned: whatever it holds is not wanted */
    } else if (rc < 0) {
        slot->err = rc;
        snprintf(slot->msg, sizeof slot->msg, "batch %llu of epoch %llu: %s", (unsigned long long)batch,
                 (unsigned long long)L->epoch, err_msg());
        slot_set(L, slot, SLOT_FAILED);
        L->running = 0; /* no new batches: the epoch ends at this one */
    } else {
        slot_set(L, slot, SLOT_READY);
    }
    pthread_cond_broadcast(&L->done_cv);
}

static void *loader_worker_main(void *arg)
{
    struct loader_worker *w = arg;
    struct loader *L = w->loader;
    pthread_mutex_lock(&L->mu);
    for (;;) {
        uint64_t batch = 0;
        uint32_t s = 0;
        int rc = 0;
        while (!L->closing && !(L->running && !L->fatal && (rc = loader_claim(L, &batch, &s)) != 0)) {
            L->waiting++;
            pthread_cond_wait(&L->work_cv, &L->mu);
            L->waiting--;
            if (L->wakes_due > 0)
                L->wakes_due--;
        }
        if (L->closing)
            break;
        if (rc < 0)
            loader_fail_locked(L, rc, err_msg());
        else
            loader_fill(L, s, batch, w->id);
    }
    pthread_mutex_unlock(&L->mu);
    return NULL;
}

/* ---- lifecycle ----------------------------------------------------------------- */

static void *loader_default_alloc(void *user, uint64_t bytes)
{
    (void)user;
    void *p = NULL;
    return posix_memalign(&p, LOADER_SLOT_ALIGN, bytes) == 0 ? p : NULL;
}

static void loader_default_free(void *user, void *ptr, uint64_t bytes)
{
    (void)user;
    (void)bytes;
    free(ptr);
}

static void loader_free(struct loader *L)
{
    if (L->slots) {
        for (uint32_t i = 0; i < L->nslots; i++) {
            if (L->slots[i].mem)
                L->opt.allocator.free(L->opt.allocator.user, L->slots[i].mem, L->alloc_bytes);
            free(L->slots[i].indices);
            free(L->slots[i].recs);
        }
    }
    free(L->slots);
    free(L->workers);
    free(L->worker_free_ns);
    free(L->indices);
    free(L->offsets);
    pthread_cond_destroy(&L->work_cv);
    pthread_cond_destroy(&L->done_cv);
    pthread_mutex_destroy(&L->mu);
    free(L);
}

static int loader_alloc_slots(struct loader *L)
{
    L->slots = calloc(L->nslots, sizeof *L->slots);
    if (!L->slots)
        return err_set(ERR_NOMEM, "loader: out of memory for %u slots", L->nslots);
    for (uint32_t i = 0; i < L->nslots; i++) {
        struct loader_slot *s = &L->slots[i];
        err_clear();
        s->mem = L->opt.allocator.alloc(L->opt.allocator.user, L->alloc_bytes);
        if (!s->mem && *err_msg()) /* the allocator said why (a pinned pool's limit, say) */
            return err_wrap(ERR_NOMEM, "loader: cannot allocate slot %u of %u (%llu bytes each)", i, L->nslots,
                            (unsigned long long)L->alloc_bytes);
        s->indices = malloc(L->opt.max_batch * sizeof *s->indices);
        s->recs = malloc(L->opt.max_batch * sizeof *s->recs);
        if (!s->mem || !s->indices || !s->recs)
            return err_set(ERR_NOMEM, "loader: cannot allocate slot %u of %u (%llu bytes each)", i, L->nslots,
                           (unsigned long long)L->alloc_bytes);
        s->view.data = s->mem;
        s->view.labels = (int64_t *)((uint8_t *)s->mem + L->labels_offset);
        s->view.lengths = (uint64_t *)(s->view.labels + L->opt.max_batch);
        s->view.slot = i;
    }
    return 0;
}

/* The slot's layout: data_bytes of data, then labels and lengths (max_batch
 * each), 64-byte aligned, in the same block so a pinned allocator pins them
 * too; and the whole ring. Every step is checked: a slot_bytes near 2^64 must
 * not wrap to a tiny slot while collate is told it has slot_bytes. Returns 0
 * with *labels_offset and *alloc_bytes set, or ERR_ARG naming slot_bytes. */
static int loader_slot_layout(uint64_t data_bytes, uint32_t max_batch, uint32_t nslots, uint64_t *labels_offset,
                              uint64_t *alloc_bytes)
{
    uint64_t aligned, tables, total, ring;
    if (__builtin_add_overflow(data_bytes, 63, &aligned) ||
        __builtin_mul_overflow((uint64_t)max_batch, 2 * sizeof(uint64_t), &tables) ||
        __builtin_add_overflow(aligned & ~(uint64_t)63, tables, &total) ||
        __builtin_mul_overflow(total, (uint64_t)nslots, &ring))
        return err_set(ERR_ARG, "loader: slot_bytes %llu with max_batch %u and %u slots overflows 64 bits "
                       "(data, labels, lengths and alignment)", (unsigned long long)data_bytes, max_batch, nslots);
    *labels_offset = aligned & ~(uint64_t)63;
    *alloc_bytes = total;
    return 0;
}

int loader_open(const dataset_t *ds, const struct loader_options *opt, loader_t **out)
{
    *out = NULL;
    const struct dataset_info *info = dataset_info(ds);
    if (opt->max_batch == 0)
        return err_set(ERR_ARG, "loader: max_batch must be at least 1");
    if (opt->workers > LOADER_MAX_WORKERS)
        return err_set(ERR_ARG, "loader: %u workers is more than %d", opt->workers, LOADER_MAX_WORKERS);
    if (!opt->collate && info->record_bytes == 0)
        return err_set(ERR_ARG, "loader: %s has variable-length records: the stacking collate cannot batch them "
                       "(use loader_collate_pad)", dataset_name(ds));
    if (opt->prefetch > LOADER_MAX_PREFETCH)
        return err_set(ERR_ARG, "loader: prefetch %u is more than %d", opt->prefetch, LOADER_MAX_PREFETCH);
    if (!(opt->model_record_s >= 0 && opt->model_record_s <= 1))
        return err_set(ERR_ARG, "loader: model_record_s %g is not 0 to 1 second", opt->model_record_s);
    /* 1e6 s (11.6 days): beyond that a timeout is a typo; below 10 ms
     * (CLOCK_MIN_TIMEOUT_S) it blames a worker that only waited for a core. */
    if (!(opt->timeout_s == 0 || (opt->timeout_s >= CLOCK_MIN_TIMEOUT_S && opt->timeout_s <= LOADER_MAX_TIMEOUT_S)))
        return err_set(ERR_ARG, "loader: timeout_s %g is not 0 (no timeout) or %g to %g seconds", opt->timeout_s,
                       CLOCK_MIN_TIMEOUT_S, LOADER_MAX_TIMEOUT_S);
    if (opt->timeout_s > 0 && opt->workers == 0) /* PyTorch ignores it there; we say so */
        return err_set(ERR_ARG, "loader: timeout_s %g needs workers: with workers = 0 loader_next() makes the "
                       "batch itself and has no one to time out", opt->timeout_s);
    uint64_t data_bytes = opt->slot_bytes;
    if (data_bytes == 0 && __builtin_mul_overflow((uint64_t)opt->max_batch, info->max_record_bytes, &data_bytes))
        return err_set(ERR_ARG, "loader: slot_bytes: %u records of %llu bytes overflow 64 bits", opt->max_batch,
                       (unsigned long long)info->max_record_bytes);
    uint32_t nslots = (opt->workers ? opt->workers : 1) * (opt->prefetch ? opt->prefetch : LOADER_DEFAULT_PREFETCH);
    uint64_t labels_offset = 0, alloc_bytes = 0;
    int rc = loader_slot_layout(data_bytes, opt->max_batch, nslots, &labels_offset, &alloc_bytes);
    if (rc)
        return rc;
    /* The ring is allocated whole, up front: a ring this machine cannot hold
     * is refused now, naming what sized it, rather than allocated under
     * overcommit and killed when the workers touch it. With variable-length
     * records the automatic slot holds max_batch rows padded to the dataset's
     * longest record: one 5 MB line makes every slot of a 256-batch 1.3 GB. */
    char what[256];
    if (opt->slot_bytes)
        snprintf(what, sizeof what, "loader: a ring of %u slots of slot_bytes %llu", nslots,
                 (unsigned long long)opt->slot_bytes);
    else
        snprintf(what, sizeof what, "loader: a ring of %u slots, each sized for max_batch %u records of %s%llu bytes",
                 nslots, opt->max_batch, info->record_bytes ? "" : "up to the longest record's ",
                 (unsigned long long)info->max_record_bytes);
    if ((rc = mem_check_fits(what, (uint64_t)nslots * alloc_bytes)) < 0)
        return err_wrap(rc, "%s", opt->slot_bytes ? "lower slot_bytes, workers or prefetch"
                        : info->record_bytes ? "lower max_batch, workers or prefetch"
                        : "set slot_bytes (the most bytes a padded batch may take: a batch that needs more fails, "
                          "naming itself) or make batches by a token budget (lib/sampler/batch.h)");

    struct loader *L = calloc(1, sizeof *L);
    if (!L)
        return err_set(ERR_NOMEM, "loader: out of memory");
    L->ds = ds;
    L->opt = *opt;
    if (L->opt.prefetch == 0)
        L->opt.prefetch = LOADER_DEFAULT_PREFETCH;
    if (!L->opt.allocator.alloc)
        L->opt.allocator = (struct loader_allocator){loader_default_alloc, loader_default_free, NULL};
    L->nslots = nslots;
    L->data_bytes = data_bytes;
    L->labels_offset = labels_offset;
    L->alloc_bytes = alloc_bytes;
    pthread_mutex_init(&L->mu, NULL);
    pthread_cond_init(&L->work_cv, NULL);
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(&L->done_cv, &attr);
    pthread_condattr_destroy(&attr);

    rc = loader_alloc_slots(L);
    if (rc == 0) {
        L->worker_free_ns = calloc(opt->workers ? opt->workers : 1, sizeof *L->worker_free_ns);
        if (!L->worker_free_ns)
            rc = err_set(ERR_NOMEM, "loader: out of memory for %u workers", opt->workers);
    }
    if (rc == 0 && opt->workers) {
        L->workers = calloc(opt->workers, sizeof *L->workers);
        if (!L->workers)
            rc = err_set(ERR_NOMEM, "loader: out of memory for %u workers", opt->workers);
    }
    for (uint32_t i = 0; rc == 0 && i < opt->workers; i++) {
        L->workers[i] = (struct loader_worker){.loader = L, .id = (int)i};
        int e = pthread_create(&L->workers[i].thread, NULL, loader_worker_main, &L->workers[i]);
        if (e)
            rc = err_set(ERR_IO, "loader: cannot start worker %u: %s", i, strerror(e));
        else
            L->nworkers++;
    }
    if (rc < 0) {
        char msg[1024];
        snprintf(msg, sizeof msg, "%s", err_msg());
        loader_close(L);
        return err_set(rc, "%s", msg);
    }
    *out = L;
    return 0;
}

/* Abandons the running epoch: no new claims, hooks see loader_stopping(),
 * wait for every FILLING slot, free the finished ones. mu held. */
static void loader_abandon_locked(struct loader *L)
{
    L->running = 0;
    atomic_store(&L->stopping, 1);
    while (L->filling > 0)
        pthread_cond_wait(&L->done_cv, &L->mu);
    for (uint32_t i = 0; i < L->nslots; i++)
        if (L->slots[i].state == SLOT_READY || L->slots[i].state == SLOT_FAILED)
            slot_set(L, &L->slots[i], SLOT_FREE);
    atomic_store(&L->stopping, 0);
}

void loader_stop(loader_t *L)
{
    pthread_mutex_lock(&L->mu);
    loader_abandon_locked(L);
    if (L->started && !L->ended && L->next_deliver < L->nbatches) {
        L->ended = 1;
        snprintf(L->ended_msg, sizeof L->ended_msg, "epoch %llu was stopped after %llu of %llu batches",
                 (unsigned long long)L->epoch, (unsigned long long)L->next_deliver, (unsigned long long)L->nbatches);
    }
    pthread_mutex_unlock(&L->mu);
}

void loader_close(loader_t *L)
{
    if (!L)
        return;
    pthread_mutex_lock(&L->mu);
    loader_abandon_locked(L);
    L->closing = 1;
    loader_wake_workers(L, 1);
    pthread_mutex_unlock(&L->mu);
    for (uint32_t i = 0; i < L->nworkers; i++)
        pthread_join(L->workers[i].thread, NULL);
    loader_free(L);
}

/* Makes room for `n` indices in L->indices, keeping the first `keep`. */
static int loader_reserve_indices(struct loader *L, uint64_t n, uint64_t keep)
{
    if (n <= L->indices_cap)
        return 0;
    uint64_t cap = n > 2 * L->indices_cap ? n : 2 * L->indices_cap;
    uint64_t *p = cap <= SIZE_MAX / sizeof *p ? malloc(cap * sizeof *p) : NULL;
    if (!p)
        return err_set(ERR_NOMEM, "epoch: out of memory for %llu indices", (unsigned long long)n);
    if (keep)
        memcpy(p, L->indices, keep * sizeof *p);
    free(L->indices);
    L->indices = p;
    L->indices_cap = cap;
    return 0;
}

/* Reads the epoch's stream into the loader's own arrays: its indices, and
 * where each batch starts (offsets, nbatches + 1 entries). mu held, nothing
 * running. */
static int loader_read_stream(struct loader *L, const struct loader_epoch *e)
{
    const unsigned long long epoch = (unsigned long long)e->epoch;
    const int by_batches = e->batches.get != NULL;
    if (by_batches ? !e->batches.len : !e->indices.len || !e->indices.get)
        return err_set(ERR_ARG, "epoch %llu: no index stream or batch stream to load", epoch);
    if (by_batches && e->indices.get)
        return err_set(ERR_ARG, "epoch %llu: an index stream and a batch stream: give one", epoch);
    uint64_t count = 0, nb;
    if (by_batches) {
        nb = e->batches.len(e->batches.self);
    } else {
        if (e->batch_size == 0 || e->batch_size > L->opt.max_batch)
            return err_set(ERR_ARG, "epoch %llu: batch size %u is not 1 to max_batch (%u)", epoch, e->batch_size,
                           L->opt.max_batch);
        count = e->indices.len(e->indices.self);
        nb = e->drop_last ? count / e->batch_size : count / e->batch_size + (count % e->batch_size != 0);
    }
    if (nb + 1 > L->offsets_cap) {
        free(L->offsets);
        L->offsets = nb < SIZE_MAX / sizeof *L->offsets ? malloc((nb + 1) * sizeof *L->offsets) : NULL;
        L->offsets_cap = L->offsets ? nb + 1 : 0;
        if (!L->offsets)
            return err_set(ERR_NOMEM, "epoch %llu: out of memory for %llu batches", epoch, (unsigned long long)nb);
    }
    L->offsets[0] = 0;
    int rc = 0;
    if (!by_batches) {
        if ((rc = loader_reserve_indices(L, count, 0)) < 0)
            return err_wrap(rc, "epoch %llu", epoch);
        for (uint64_t k = 0; k < count; k++)
            if ((rc = e->indices.get(e->indices.self, k, &L->indices[k])) < 0)
                return err_wrap(rc, "epoch %llu: the index stream at position %llu", epoch, (unsigned long long)k);
        for (uint64_t b = 1; b <= nb; b++)
            L->offsets[b] = b * e->batch_size < count ? b * e->batch_size : count;
    } else {
        uint64_t room = e->batches.max_size ? e->batches.max_size : 1;
        for (uint64_t b = 0; b < nb; b++) {
            if ((rc = loader_reserve_indices(L, count + room, count)) < 0)
                return err_wrap(rc, "epoch %llu", epoch);
            int64_t got = e->batches.get(e->batches.self, b, L->indices + count);
            if (got < 0)
                return err_wrap((int)got, "epoch %llu: the batch stream at batch %llu", epoch, (unsigned long long)b);
            if (got == 0 || (uint64_t)got > L->opt.max_batch)
                return err_set(ERR_ARG, "epoch %llu: batch %llu has %lld samples, not 1 to max_batch (%u)", epoch,
                               (unsigned long long)b, (long long)got, L->opt.max_batch);
            count += (uint64_t)got;
            L->offsets[b + 1] = count;
        }
    }
    L->nbatches = nb;
    return 0;
}

/* Loads the epoch's work and checks every index it will read. mu held,
 * nothing running. */
static int loader_load_epoch(struct loader *L, const struct loader_epoch *e)
{
    int rc = loader_read_stream(L, e);
    if (rc < 0) {
        L->nbatches = 0;
        return rc;
    }
    uint64_t length = dataset_info(L->ds)->length, used = L->offsets[L->nbatches];
    for (uint64_t i = 0; i < used; i++)
        if (L->indices[i] >= length) {
            L->nbatches = 0;
            return err_set(ERR_ARG, "epoch %llu: index %llu at position %llu is past the end of %s (%llu records)",
                           (unsigned long long)e->epoch, (unsigned long long)L->indices[i], (unsigned long long)i,
                           dataset_name(L->ds), (unsigned long long)length);
        }
    return 0;
}

int loader_start_epoch(loader_t *L, const struct loader_epoch *e)
{
    pthread_mutex_lock(&L->mu);
    loader_abandon_locked(L);
    L->started = 0;
    int rc = loader_load_epoch(L, e);
    if (rc == 0) {
        L->epoch = e->epoch;
        L->next_claim = L->next_deliver = 0;
        L->started = L->running = 1;
        L->ended = L->fatal = 0;
        L->start_ns = L->last_ns = clock_now_ns();
        if (L->opt.modelled) {
            L->epoch_ns = L->start_ns = L->last_ns = vclock_now_ns();
            for (uint32_t i = 0; i < L->nslots; i++)
                L->slots[i].free_ns = 0;
        }
        L->wait_ns = L->max_wait_ns = 0;
        L->got_batches = L->got_samples = L->got_bytes = 0;
        L->max_busy = L->busy;
        loader_wake_workers(L, 1);
    }
    pthread_mutex_unlock(&L->mu);
    return rc;
}

/* ---- the trainer's side -------------------------------------------------------- */

/* The batch loader_next() waits for, for messages: "batch 7" in order; out
 * of order next_deliver counts deliveries, so "the next batch (7 delivered)". */
static const char *loader_next_name(const struct loader *L, char *buf, size_t len)
{
    snprintf(buf, len, L->opt.out_of_order ? "the next batch (%llu delivered)" : "batch %llu",
             (unsigned long long)L->next_deliver);
    return buf;
}

/* The ERR_TIMEOUT message: which batch is late and who holds it. mu held. */
static int loader_timeout_error(struct loader *L, double waited_s)
{
    /* In order the late batch is next_deliver; out of order, the oldest in flight. */
    const struct loader_slot *late = NULL;
    for (uint32_t i = 0; i < L->nslots; i++) {
        const struct loader_slot *s = &L->slots[i];
        if (s->state != SLOT_FILLING)
            continue;
        if (L->opt.out_of_order ? (!late || s->batch < late->batch) : s->batch == L->next_deliver)
            late = s;
    }
    char name[48];
    if (!late)
        return err_set(ERR_TIMEOUT, "epoch %llu: %s is late: not ready after %.3g s, and no worker has "
                       "started it (all %u slots are busy or held)", (unsigned long long)L->epoch,
                       loader_next_name(L, name, sizeof name), waited_s, L->nslots);
    return err_set(ERR_TIMEOUT, "epoch %llu: batch %llu is late: no batch after %.3g s; %s holds it, on sample "
                   "%llu (position %u of %u) for %.3g s", (unsigned long long)L->epoch,
                   (unsigned long long)late->batch, waited_s, worker_name(late->view.worker, name),
                   (unsigned long long)atomic_load(&late->index), (unsigned)atomic_load(&late->position),
                   late->view.count, (double)(clock_now_ns() - late->claimed_ns) * 1e-9);
}

/* Ends the epoch with an error the caller sees now and later. mu held. */
static int loader_end_with(struct loader *L, int code)
{
    L->running = 0;
    L->ended = 1;
    snprintf(L->ended_msg, sizeof L->ended_msg, "epoch %llu ended with an error: %s", (unsigned long long)L->epoch,
             err_msg());
    return code;
}

/* The caller holds the slot the next batch needs: waiting would never end. */
static int loader_caller_blocks(const struct loader *L)
{
    if (!L->opt.out_of_order)
        return L->slots[L->next_deliver % L->nslots].state == SLOT_HELD;
    for (uint32_t i = 0; i < L->nslots; i++)
        if (L->slots[i].state != SLOT_HELD)
            return 0;
    return 1;
}

int loader_next(loader_t *L, struct loader_batch **out)
{
    *out = NULL;
    pthread_mutex_lock(&L->mu);
    uint64_t t0 = clock_now_ns(), host0 = vclock_now_ns();
    uint64_t deadline = L->opt.timeout_s > 0 ? clock_deadline_s(L->opt.timeout_s) : 0;
    int rc;
    uint32_t s = 0;
    for (;;) {
        if (!L->started) {
            rc = err_set(ERR_STATE, "loader: no epoch started (call loader_start_epoch)");
            goto out;
        }
        if (L->ended) {
            rc = err_set(ERR_STATE, "%s", L->ended_msg);
            goto out;
        }
        if (L->fatal) {
            rc = loader_end_with(L, err_set(L->fatal, "%s", L->fatal_msg));
            goto out;
        }
        if (L->next_deliver >= L->nbatches) {
            L->last_ns = L->opt.modelled ? vclock_now_ns() : clock_now_ns();
            rc = 0;
            goto out;
        }
        rc = loader_pick(L, &s);
        if (rc != 0)
            break;
        if (L->opt.workers == 0) { /* no workers: the caller collates, now */
            uint64_t batch = 0;
            rc = loader_claim(L, &batch, &s);
            if (rc > 0) {
                loader_fill(L, s, batch, -1);
                continue;
            }
            if (rc < 0)
                break;
        }
        /* Nothing to claim with no workers means the caller holds the slot. */
        if (L->opt.workers == 0 || loader_caller_blocks(L)) {
            char next[48];
            rc = err_set(ERR_STATE, "epoch %llu: %s needs a slot the caller still holds (all %u slots are "
                         "held or the next one is): release batches with loader_release",
                         (unsigned long long)L->epoch, loader_next_name(L, next, sizeof next), L->nslots);
            goto out;
        }
        if (!deadline) {
            pthread_cond_wait(&L->done_cv, &L->mu);
        } else {
            struct timespec ts = {.tv_sec = (time_t)(deadline / 1000000000u),
                                  .tv_nsec = (long)(deadline % 1000000000u)};
            if (pthread_cond_timedwait(&L->done_cv, &L->mu, &ts) == ETIMEDOUT && !loader_pick(L, &s)) {
                rc = loader_end_with(L, loader_timeout_error(L, (double)(clock_now_ns() - t0) * 1e-9));
                goto out;
            }
        }
    }
    if (rc < 0) {
        char msg[1024];
        snprintf(msg, sizeof msg, "%s", err_msg());
        rc = loader_end_with(L, err_set(rc, "%s", msg));
        goto out;
    }
    struct loader_slot *slot = &L->slots[s];
    if (slot->state == SLOT_FAILED) {
        slot_set(L, slot, SLOT_FREE);
        rc = loader_end_with(L, err_set(slot->err, "%s", slot->msg));
        goto out;
    }
    slot_set(L, slot, SLOT_HELD);
    L->next_deliver++;
    uint64_t now = clock_now_ns();
    if (L->opt.modelled) { /* the trainer waits for the batch's modelled end too: its wait is modelled */
        t0 = host0;
        now = vclock_wait_until_ns(slot->ready_ns);
    }
    slot->view.wait_s = (double)(now - t0) * 1e-9;
    L->wait_ns += now - t0;
    if (now - t0 > L->max_wait_ns)
        L->max_wait_ns = now - t0;
    L->last_ns = now;
    L->got_batches++;
    L->got_samples += slot->view.count;
    L->got_bytes += slot->view.bytes;
    *out = &slot->view;
    rc = 1;
out:
    pthread_mutex_unlock(&L->mu);
    return rc;
}

void loader_release(loader_t *L, struct loader_batch *b)
{
    pthread_mutex_lock(&L->mu);
    assert(b->slot < L->nslots && &L->slots[b->slot].view == b && L->slots[b->slot].state == SLOT_HELD);
    L->slots[b->slot].free_ns = vclock_now_ns(); /* modelled: the trainer's time (used with opt.modelled) */
    slot_set(L, &L->slots[b->slot], SLOT_FREE);
    loader_wake_workers(L, 0);
    pthread_mutex_unlock(&L->mu);
}

void loader_stats(loader_t *L, struct loader_stats *st)
{
    pthread_mutex_lock(&L->mu);
    uint32_t ready = 0;
    for (uint32_t i = 0; i < L->nslots; i++)
        ready += L->slots[i].state == SLOT_READY;
    double elapsed = (double)(L->last_ns - L->start_ns) * 1e-9;
    *st = (struct loader_stats){
        .batches = L->got_batches,
        .samples = L->got_samples,
        .bytes = L->got_bytes,
        .elapsed_s = elapsed,
        .wait_s = (double)L->wait_ns * 1e-9,
        .wait_fraction = elapsed > 0 ? (double)L->wait_ns * 1e-9 / elapsed : 0,
        .samples_per_s = elapsed > 0 ? (double)L->got_samples / elapsed : 0,
        .bytes_per_s = elapsed > 0 ? (double)L->got_bytes / elapsed : 0,
        .max_wait_s = (double)L->max_wait_ns * 1e-9,
        .slots = L->nslots,
        .slot_bytes = L->alloc_bytes,
        .memory_bytes = (uint64_t)L->nslots * L->alloc_bytes,
        .max_busy_slots = L->max_busy,
        .ready_slots = ready,
        .filling_slots = L->filling,
        .idle_workers = L->waiting - L->wakes_due,
    };
    pthread_mutex_unlock(&L->mu);
}
