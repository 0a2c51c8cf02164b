/* batch: grouping indices into the batches a rank trains on (chapter 2).
 *
 * Where it sits: after the sampler (lib/sampler/sampler.h), before the loader
 * (lib/loader/loader.h), which fetches and collates one batch at a time. The
 * loader takes either kind of stream defined here: an index stream (it cuts
 * the batches itself) or a batch stream (the batches as they come). Two
 * batch samplers:
 *
 *   batch_sampler_*  torch.utils.data.BatchSampler over any index stream (a
 *                    sampler's indices, an array):
 *                    batch_size indices per batch, the last one short unless
 *                    drop_last. batch_size is per rank (per GPU): the global
 *                    batch is batch_size x world.
 *   batch_dynamic_*  a token-budget batch sampler for variable-length records
 *                    (CustomDistributedBufferDynamicBatchSampler, as LLM
 *                    training codebases have it):
 *                    shuffle as DistributedSampler does, cut the order into
 *                    buffers of sort_size x world records, sort each buffer by
 *                    length, grow each batch while its padded size stays
 *                    within the budget, pad the batch list to a multiple of
 *                    world, and deal the batches round-robin to the ranks, so
 *                    every rank gets the same number of steps.
 *
 * Read batch_dynamic_begin() for the algorithm.
 */
#ifndef DDP_BATCH_H
#define DDP_BATCH_H

#include "dataset/dataset.h"
#include "sampler/sampler.h"

#include <stdint.h>

/* ---- fixed-size batches --------------------------------------------------- */

/* Any stream of indices a batch sampler can group, as PyTorch's BatchSampler
 * takes any Sampler: its length, and its k-th index (0, or a negative ERR_*). */
struct index_stream {
    uint64_t (*len)(const void *self);
    int (*get)(const void *self, uint64_t k, uint64_t *index);
    const void *self;
};

/* A DistributedSampler's indices for its current epoch (s must outlive it). */
struct index_stream index_stream_of_sampler(const sampler_t *s);

/* An array of indices in a fixed order: a subset, a hand-made order, a
 * sampler's output saved earlier (a must outlive the stream). */
struct index_array {
    const uint64_t *indices;
    uint64_t count;
};
struct index_stream index_stream_of_array(const struct index_array *a);

typedef struct batch_sampler {
    struct index_stream src;
    uint64_t batch_size;
    int drop_last;
} batch_sampler_t;

/* Groups `src`'s indices (its `self` must outlive *b). ERR_ARG when
 * batch_size is 0 or the stream has no len or get. */
int batch_sampler_init(batch_sampler_t *b, struct index_stream src, uint64_t batch_size, int drop_last);

/* len(BatchSampler): the number of batches per epoch. */
uint64_t batch_sampler_len(const batch_sampler_t *b);

/* Copies batch `batch` of the current epoch into out[0 .. batch_size) and
 * returns its size (batch_size, or less for a last short batch), or ERR_RANGE
 * for a batch past the end, or the sampler's error. */
int64_t batch_sampler_get(const batch_sampler_t *b, uint64_t batch, uint64_t *out);

/* ---- batch streams ---------------------------------------------------------- */

/* Any stream of batches, as PyTorch's DataLoader takes any batch_sampler: its
 * length, the most indices one batch may hold (get's `out` has room for
 * max_size), and batch b's indices (returns how many, or a negative ERR_*).
 * Like an index stream, it only reads `self`: get may be called again for the
 * same batch and gives the same answer until the source's next epoch. */
struct batch_stream {
    uint64_t (*len)(const void *self);
    int64_t (*get)(const void *self, uint64_t batch, uint64_t *out);
    uint64_t max_size;
    const void *self;
};

/* A BatchSampler's batches (b must outlive the stream). */
struct batch_stream batch_stream_of_sampler(const batch_sampler_t *b);

/* Batches given as arrays: batch b is indices[offsets[b] .. offsets[b+1])
 * (offsets has batches + 1 entries, from 0, never decreasing). The array must
 * outlive the stream; a malformed one gives ERR_ARG from get. */
struct batch_array {
    const uint64_t *indices;
    const uint64_t *offsets;
    uint64_t batches;
};
struct batch_stream batch_stream_of_array(const struct batch_array *a);

/* ---- token-budget batches ------------------------------------------------- */

enum batch_type {
    BATCH_TOKEN,   /* budget counts padded tokens: longest record x records */
    BATCH_EXAMPLE, /* budget counts records */
};

struct batch_dynamic_options {
    uint32_t world, rank;
    uint64_t seed;
    int shuffle;
    uint64_t sort_size;        /* records per rank in one sorting buffer (buffer = sort_size x world) */
    uint64_t budget;           /* tokens (BATCH_TOKEN) or records (BATCH_EXAMPLE) per batch */
    uint64_t max_samples;      /* batch_size_sample_max: records per batch, at most */
    uint64_t max_token_length; /* longer records are skipped and counted; 0: the token budget, or no limit */
    enum batch_type type;
    uint64_t start_step;       /* resume: this rank's first step is this one of the epoch */
    enum sampler_randperm randperm;
};

/* Defaults: world 1, rank 0, seed 0, shuffle, sort_size 100, budget 4096
 * tokens, max_samples 256, no max_token_length (the budget), start_step 0. */
void batch_dynamic_options_default(struct batch_dynamic_options *opt);

struct batch_dynamic_stats {
    uint64_t batches;        /* in the whole epoch, all ranks, padding included */
    uint64_t padded_batches; /* repeats added to reach a multiple of world */
    uint64_t records;        /* records placed in batches (without the repeats) */
    uint64_t skipped;        /* records longer than max_token_length */
};

typedef struct batch_dynamic batch_dynamic_t;

/* Makes a token-budget sampler over `ds` (which must outlive it), at epoch 0.
 * ERR_ARG naming the option for world 0, rank >= world, a zero sort_size,
 * budget or max_samples, or a max_token_length above the token budget (a
 * record that long could never fit a batch). */
int batch_dynamic_create(const dataset_t *ds, const struct batch_dynamic_options *opt, batch_dynamic_t **out);

/* Like DistributedSampler.set_epoch: the next begin uses seed + epoch. */
void batch_dynamic_set_epoch(batch_dynamic_t *d, uint64_t epoch);

/* Builds the epoch's batch list (every rank computes the same one). Reads
 * every record's length with dataset_length_of(). Like sampler_begin(), warns
 * once on stderr (per sampler) when a shuffled epoch is begun twice without a
 * new set_epoch() value. 0, or the dataset's error naming the record, or
 * ERR_NOMEM. */
int batch_dynamic_begin(batch_dynamic_t *d);

/* Steps left for this rank from start_step: the same on every rank. */
uint64_t batch_dynamic_len(const batch_dynamic_t *d);

/* Copies the indices of this rank's batch at `step` (0 = start_step) into
 * out[0 .. max_samples) and returns their count; ERR_RANGE past the end,
 * ERR_STATE before batch_dynamic_begin(). */
int64_t batch_dynamic_get(const batch_dynamic_t *d, uint64_t step, uint64_t *out);

/* 1 once this sampler has printed its "same order again" warning, else 0. */
int batch_dynamic_warned(const batch_dynamic_t *d);

/* The current epoch's totals (zero before batch_dynamic_begin()). */
struct batch_dynamic_stats batch_dynamic_stats(const batch_dynamic_t *d);

/* This rank's batches of the current epoch, from start_step on, as a batch
 * stream (d must outlive it; max_size is max_samples). */
struct batch_stream batch_stream_of_dynamic(const batch_dynamic_t *d);

void batch_dynamic_destroy(batch_dynamic_t *d);

/* ---- padding ---------------------------------------------------------------- */

/* What batches of variable-length records cost once each is padded to its
 * longest record, as a collate pads sequences into one tensor: a batch of
 * `count` records whose longest has L tokens takes L x count, of which only
 * the records' own lengths are real. */
struct batch_padding {
    uint64_t batches;
    uint64_t real;   /* the records' lengths, summed */
    uint64_t padded; /* longest x count, summed over the batches */
};

/* Adds one batch (indices into `ds`) to *p; *longest, unless NULL, gets its
 * longest record's length. 0, or dataset_length_of()'s error. */
int batch_padding_add(struct batch_padding *p, const dataset_t *ds, const uint64_t *indices, uint64_t count,
                      uint64_t *longest);

/* Adds every batch of a stream (a rank's epoch) to *p. 0, or the stream's or
 * the dataset's error, or ERR_NOMEM. */
int batch_padding_add_stream(struct batch_padding *p, const dataset_t *ds, struct batch_stream s);

#endif
