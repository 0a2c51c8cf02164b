/* partition: the simulator's check that the ranks' shares of a dataset fit
 * together, epoch after epoch.
 *
 * Where it sits: between the sampler stage (lib/sampler) and whatever shows
 * the result (chapter 2 prints it; tests assert it). No single rank can see
 * whether the job's shares are right: a real rank only knows its own indices.
 * The simulator runs every rank as a thread of one process (sim/ranks.h),
 * each building its own sampler exactly as every process of a real job does,
 * records what each would train on, and then checks what only the whole job
 * can show:
 *
 *   DistributedSampler (and its Feistel mode), per epoch:
 *     equal counts  every rank gets the same number of indices
 *     disjoint      no index twice, apart from the padding repeats
 *     coverage      every index once (drop_last: exactly the first
 *                   world x len of the epoch's order)
 *     new order     the order changes from epoch to epoch when shuffled
 *                   (the forgotten set_epoch() fails here), stays when not
 *   token-budget batches, per epoch:
 *     equal steps, budget (no batch over it), skipped (records too long,
 *     counted independently), disjoint (a batch is new records or an exact
 *     padding copy), coverage, new order; and resume (starting at a step
 *     gives exactly the tail of the uninterrupted epoch).
 *
 * Each check is a verdict: a name, pass or fail, and one line of figures.
 * Read partition_run_distributed() and partition_check_epoch().
 */
#ifndef DDP_PARTITION_H
#define DDP_PARTITION_H

#include "dataset/dataset.h"
#include "sampler/batch.h"
#include "sampler/sampler.h"

#include <stdint.h>

/* Below this many records two epochs may shuffle to the same order by chance
 * (1 in n!), so "the order changes" is reported but not required. */
#define PARTITION_ORDER_MIN_N 20

/* Verdicts of one epoch, at most. */
#define PARTITION_MAX_VERDICTS 8

/* One check's outcome. */
struct partition_verdict {
    const char *check; /* "equal counts", "disjoint", "coverage", ... */
    int ok;            /* 1 passed, 0 failed, -1 a figure only (no verdict) */
    char detail[160];  /* the figures behind it, one line */
};

/* What one rank was given in one epoch. */
struct partition_shard {
    uint64_t *indices; /* in order (batch after batch for the token-budget sampler) */
    uint64_t count;
    uint64_t *sizes;   /* token-budget: records per batch, `steps` of them; else NULL */
    uint64_t steps;
    struct batch_dynamic_stats stats; /* token-budget: the sampler's own totals */
};

/* A recorded run: every rank's shard of every epoch, and how it was made. */
typedef struct partition_run {
    int dynamic;                        /* 0: DistributedSampler, 1: token-budget batches */
    struct sampler_options dist;        /* the sampler's options (rank: per thread) */
    struct batch_dynamic_options dyn;   /* ... or the token-budget sampler's */
    const dataset_t *ds;                /* token-budget: the dataset it batches */
    uint64_t n;                         /* records in the dataset */
    uint32_t world;
    uint64_t epochs;
    int set_epoch;                      /* 0: set_epoch() was never called (the classic bug) */
    struct partition_shard *shards;     /* [epoch * world + rank] */
} partition_run_t;

/* Runs opt->world rank threads, each with its own DistributedSampler of
 * `opt` (rank set per thread), for `epochs` epochs (1 .. 1000), calling
 * set_epoch(e) before each unless set_epoch is 0, and records every rank's
 * indices in *run. 0, or ERR_ARG (bad options, too many epochs or threads),
 * ERR_NOMEM, or the first failing rank's error. */
int partition_run_distributed(const struct sampler_options *opt, uint64_t epochs, int set_epoch,
                              partition_run_t *run);

/* The same for the token-budget batch sampler over `ds` (which must outlive
 * the run). */
int partition_run_dynamic(const dataset_t *ds, const struct batch_dynamic_options *opt, uint64_t epochs,
                          int set_epoch, partition_run_t *run);

/* Rank r's shard of epoch e. */
const struct partition_shard *partition_shard(const partition_run_t *run, uint64_t e, uint32_t r);

/* The checks of epoch e (listed at the top), into v[0 ..) (room for
 * PARTITION_MAX_VERDICTS); returns how many, or a negative ERR_* when the
 * check itself could not run (ERR_RANGE: a sampler handed out an index
 * outside the dataset, named; ERR_NOMEM). */
int partition_check_epoch(const partition_run_t *run, uint64_t e, struct partition_verdict *v);

/* Token-budget only: resuming epoch 0 at its middle step must give exactly
 * the tail of the uninterrupted epoch (what a restart from a checkpoint
 * relies on). One verdict into *v; 0 or ERR_*. */
int partition_check_resume(const partition_run_t *run, struct partition_verdict *v);

/* Frees the recorded shards. */
void partition_run_free(partition_run_t *run);

#endif
