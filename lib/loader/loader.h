/* loader: K worker threads collate batches ahead of the trainer (chapter 3).
 *
 * Where it sits: between the sampler and the copy to the device. A sampler
 * (lib/sampler: a DistributedSampler's index stream, a token-budget
 * sampler's batch stream, or any other) gives each epoch's indices; the
 * loader's workers read those records with dataset_read() straight into a
 * ring of preallocated batch slots, and the trainer takes finished batches
 * with loader_next() and gives the slot back with loader_release(). This is
 * the C counterpart of torch.utils.data.DataLoader(num_workers=K,
 * prefetch_factor=2).
 *
 *     loader_open(ds, &opt, &L);                     threads start once (persistent workers)
 *     for each epoch:
 *         sampler_set_epoch(s, e); sampler_begin(s);
 *         loader_start_epoch(L, &epoch);             an index stream + batch_size, or a batch stream
 *         while ((rc = loader_next(L, &b)) == 1) {   in batch order (or as ready)
 *             train_step(b->data, b->labels, b->count);
 *             loader_release(L, b);                  the slot can be refilled
 *         }                                          rc == 0: epoch done; rc < 0: err_msg()
 *     loader_close(L);
 *
 * The ring has max(workers, 1) × prefetch slots of slot_bytes each: that is all
 * the batch memory the loader ever holds, whatever the epoch size. Work is
 * handed out one batch at a time from a shared counter (see loader.c for why),
 * and a worker may only claim a batch whose slot is free, so a slow batch never
 * lets the others run more than `slots` batches ahead of the trainer.
 *
 * Read loader_open() and loader_next() first; loader.c explains the ring,
 * loader_collate.c holds the built-in collate functions.
 */
#ifndef DDP_LOADER_H
#define DDP_LOADER_H

#include "dataset/dataset.h"
#include "sampler/batch.h"

#include <stdint.h>

typedef struct loader loader_t;

/* One finished batch: a view of a ring slot, valid until loader_release(). */
struct loader_batch {
    uint64_t number;         /* batch number in the epoch: 0, 1, 2, ... */
    uint64_t epoch;
    uint32_t count;          /* samples in the batch */
    uint64_t stride;         /* bytes from one sample's row to the next in data */
    uint64_t bytes;          /* bytes of data in use: count × stride for the built-in collates */
    void *data;              /* the slot's data region (slot_bytes, 4096-aligned by default) */
    int64_t *labels;         /* count labels (-1: the dataset has none) */
    uint64_t *lengths;       /* count record sizes in bytes, before padding */
    const uint64_t *indices; /* count dataset indices, in the order of the rows */
    int worker;              /* who collated it: 0..K-1, or -1 for the caller's thread */
    double wait_s;           /* how long loader_next() waited for it (data-wait) */
    uint32_t slot;           /* which ring slot holds it (loader's own) */
};

/* What a per-sample transform is told about the sample it transforms. */
struct loader_sample {
    uint64_t index;          /* dataset index */
    uint64_t epoch;
    uint64_t batch;          /* batch number */
    uint32_t position;       /* row in the batch */
    int worker;              /* 0..K-1, or -1 for the caller's thread */
    uint64_t seed;           /* loader_sample_seed(base seed, epoch, index) */
    const loader_t *loader;  /* for loader_stopping() */
};

/* A per-sample transform (augmentation, decode): changes the record's `bytes`
 * bytes at `data` in place. Its only randomness must come from s->seed, so a
 * sample is augmented the same way whatever worker handles it. Returns 0, or a
 * negative ERR_* with err_set() saying why: the loader adds the sample index,
 * batch and worker and delivers the error at that batch's position. */
typedef int (*loader_transform_fn)(void *user, const struct loader_sample *s, void *data, uint64_t bytes);

/* One batch to collate, as a collate function sees it. */
struct loader_job {
    loader_t *loader;
    const dataset_t *ds;
    const uint64_t *indices; /* the batch's dataset indices, in order */
    uint32_t count;
    uint64_t batch, epoch;
    int worker;
    struct loader_batch *out; /* data (cap bytes), labels and lengths are set; fill them, set stride and bytes */
    uint64_t cap;             /* bytes available at out->data */
    struct dataset_record *recs; /* room for count records: the collate's scratch */
};

/* A collate function: reads the job's samples (with loader_read_sample() or
 * loader_read_rows()) into out->data and fills labels, lengths, stride and
 * bytes. 0 or a negative ERR_*. The built-in ones (loader_collate.c) use
 * nothing but these two calls, as a collate of your own would. */
typedef int (*loader_collate_fn)(void *user, struct loader_job *job);

/* Where the ring's slots come from. The pinned-transfer chapter (4) passes an
 * allocator of page-locked memory (pinned_pool_loader_allocator() of
 * lib/transfer/pinned_pool.h), so collate writes where the copy engine reads. alloc returns memory of `bytes` bytes, or NULL, having said why with
 * err_set() if it can (loader_open's error then carries the reason). */
struct loader_allocator {
    void *(*alloc)(void *user, uint64_t bytes);
    void (*free)(void *user, void *ptr, uint64_t bytes);
    void *user;
};

struct loader_options {
    uint32_t workers;         /* 0: load in the caller's thread, inside loader_next() */
    uint32_t prefetch;        /* batches in flight per worker (PyTorch's prefetch_factor); 0 means 2 */
    uint32_t max_batch;       /* the most samples a batch may have (sizes labels and lengths) */
    uint64_t slot_bytes;      /* data bytes per slot; 0: max_batch × the dataset's max_record_bytes */
    int out_of_order;         /* deliver batches as they finish (PyTorch's in_order=False) */
    double timeout_s;         /* 0: wait forever; else loader_next() fails after this long without its batch
                               * (at most 1e6; needs workers >= 1, as PyTorch ignores it at num_workers=0) */
    uint64_t seed;            /* base seed of every transform's randomness */
    loader_collate_fn collate; /* NULL: loader_collate_stack */
    void *collate_user;
    loader_transform_fn transform; /* NULL: none */
    void *transform_user;
    struct loader_allocator allocator; /* alloc == NULL: malloc, 4096-aligned */
    /* Virtual time (base/vclock.h; the simulator's loops set it): each batch's
     * collate is modelled, its start fixed when it is claimed, in claim order,
     * at the latest of the earliest-free modelled worker, its slot's release
     * (the trainer's modelled time at loader_release) and the epoch's start;
     * it lasts records x model_record_s + data bytes / the host's modelled
     * memcpy. loader_next waits for the batch (really) and for its modelled
     * ready time (on the trainer's modelled clock); wait_s and the stats'
     * times are then modelled. Deterministic with out_of_order 0 only. */
    int modelled;
    double model_record_s;    /* modelled: one record's read and decode, seconds (0: only the copy) */
};

/* Fills the defaults: 0 workers, prefetch 2, max_batch 256, in order, no
 * timeout, seed 0, stacking collate, no transform, the malloc allocator. */
void loader_options_default(struct loader_options *opt);

/* An epoch's work, from any sampler (lib/sampler/batch.h). Either `indices`,
 * an index stream (index_stream_of_sampler(), index_stream_of_array()) cut
 * into batches of `batch_size`, the last one shorter unless drop_last, as
 * DataLoader(batch_size=B, sampler=...) does; or, when batches.get is set,
 * `batches`, a batch stream taken as it is (batch_stream_of_dynamic() for the
 * token-budget sampler's variable-size batches, batch_stream_of_sampler(),
 * batch_stream_of_array()), as DataLoader(batch_sampler=...) does.
 *
 * loader_start_epoch() reads the whole stream into the loader once, as
 * PyTorch's DistributedSampler hands the DataLoader a list: the epoch is a
 * snapshot (8 bytes per index), so the sampler may go on to its next epoch
 * while this one still loads, and a bad index is refused before any work. */
struct loader_epoch {
    uint64_t epoch;
    struct index_stream indices;
    uint32_t batch_size;
    int drop_last;
    struct batch_stream batches;
};

/* Per-epoch statistics (the current epoch while it runs). */
struct loader_stats {
    uint64_t batches, samples, bytes; /* delivered so far */
    double elapsed_s;        /* from loader_start_epoch() to the last delivery (or end of epoch) */
    double wait_s;           /* time spent inside loader_next() waiting for data */
    double wait_fraction;    /* wait_s / elapsed_s: the share of the step the trainer starved */
    double samples_per_s, bytes_per_s;
    double max_wait_s;       /* the longest single wait */
    uint32_t slots;          /* ring capacity: max(workers, 1) × prefetch */
    uint64_t slot_bytes;     /* bytes of one slot (data, labels and lengths) */
    uint64_t memory_bytes;   /* slots × slot_bytes: all the batch memory the loader holds */
    uint32_t max_busy_slots; /* the most slots filling, ready or held at once (≤ slots) */
    uint32_t ready_slots;    /* now: finished batches waiting for loader_next() (the prefetched depth) */
    uint32_t filling_slots;  /* now: slots a worker is collating into */
    uint32_t idle_workers;   /* now: workers waiting for work that nothing has woken (they found no batch
                              * they may claim). All of them, with no slot filling: the ring stays as it is
                              * until the trainer releases a batch or starts an epoch, so a test that waits
                              * for the ring to fill can stop waiting */
};

/* Allocates the ring and starts the workers. `ds` must outlive the loader.
 * Returns 0 and sets *out, or ERR_ARG (a bad option: timeout_s NaN, negative
 * or over 1e6 s; a slot whose layout or ring size overflows 64 bits, named
 * "slot_bytes"; variable-length records with the stacking collate), ERR_NOMEM
 * (a slot allocation failed; nothing leaks), ERR_IO (a thread could not
 * start), with err_msg() saying which. */
int loader_open(const dataset_t *ds, const struct loader_options *opt, loader_t **out);

/* Starts an epoch. If the previous epoch is unfinished (the trainer broke out
 * of its loop, or it failed), its in-flight batches are abandoned first: hooks
 * see loader_stopping(), every worker finishes its batch, the slots are freed.
 * Batches the caller still holds stay valid until released. Returns 0, or
 * ERR_ARG (no stream, both streams, batch_size 0 or over max_batch, an index
 * past the dataset, a batch of 0 or over max_batch samples) with err_msg()
 * naming the batch and position, the stream's own error, or ERR_NOMEM. */
int loader_start_epoch(loader_t *L, const struct loader_epoch *epoch);

/* Waits for the next batch: the next batch number in order, or any finished
 * one with out_of_order. Returns 1 and sets *out; 0 when the epoch is done;
 * or a negative code that ends the epoch:
 *   the sample's own code (ERR_FORMAT, ERR_RANGE, ...): a sample failed; the
 *     message names the batch, the sample index, its position and the worker;
 *   ERR_TIMEOUT: timeout_s passed without the batch; names the batch and the
 *     worker holding it (and the sample it is on), or says nobody has it yet;
 *   ERR_STATE: no epoch started, or the caller holds the slot the next batch
 *     needs (release batches first).
 * After an error, loader_next() returns ERR_STATE until the next epoch. */
int loader_next(loader_t *L, struct loader_batch **out);

/* Gives a batch's slot back to the ring. `b` must come from loader_next() on
 * this loader and not be released twice (assert). */
void loader_release(loader_t *L, struct loader_batch *b);

/* Abandons the current epoch now (see loader_start_epoch): returns once no
 * worker touches a slot. Workers stay alive for the next epoch. */
void loader_stop(loader_t *L);

/* Non-zero while the loader is abandoning work: a transform or collate that
 * may run long should poll it and return early (any value; it is discarded). */
int loader_stopping(const loader_t *L);

/* Copies the current (or last) epoch's statistics into *st. */
void loader_stats(loader_t *L, struct loader_stats *st);

/* Stops the epoch, joins the workers and frees the ring. A transform that
 * never returns blocks this (threads cannot be killed safely): poll
 * loader_stopping(). NULL is allowed. */
void loader_close(loader_t *L);

/* The seed of sample `index`'s randomness in `epoch`: a hash of the three, so
 * it depends on nothing else (not the worker, not the timing). */
uint64_t loader_sample_seed(uint64_t base, uint64_t epoch, uint64_t index);

/* For collate functions: reads sample i of the job into dst (cap bytes),
 * applies the transform, fills *rec. Errors are wrapped with "sample INDEX
 * (position I) on worker W". */
int loader_read_sample(struct loader_job *job, uint32_t i, void *dst, uint64_t cap, struct dataset_record *rec);

/* For collate functions: every sample of the job at once, into rows `stride`
 * bytes apart from `data` (one dataset_read_batch(): IDX copies them in one
 * tight loop), then the transform of each row; recs[i] describes row i. The
 * rows must fit job->cap. Errors are wrapped like loader_read_sample()'s. */
int loader_read_rows(struct loader_job *job, void *data, uint64_t stride, struct dataset_record *recs);

/* The default collate: fixed-size records stacked row after row (stride =
 * record size), like torch.stack in PyTorch's default_collate. The batch is
 * read with one loader_read_rows(). */
int loader_collate_stack(void *user, struct loader_job *job);

/* Variable-length records: every row is padded with zeros to the batch's
 * longest record (stride = longest), lengths[] holds the real sizes. Needs
 * count × longest bytes in the slot; ERR_RANGE naming the batch otherwise. */
int loader_collate_pad(void *user, struct loader_job *job);

#endif
