/* train: the whole data path of data-parallel training, as one rank runs it.
 *
 * Where it sits: at the end of the library, the one place where every stage
 * meets. Each rank runs train_rank() with its own communicator (the rank
 * launcher, sim/launch.h, starts the ranks: threads in the simulator, or this
 * process under mpirun), and one optimizer step is:
 *
 *   dataset (mmap, shared by the ranks)
 *     -> DistributedSampler: this rank's indices, seed + epoch (set_epoch every epoch)
 *     -> loader workers: batches of `batch` samples (DataLoader semantics, drop_last),
 *        augmented, collated straight into the pinned ring (pinned_pool)
 *     -> prefetcher: the next batch copied to the device on its own stream
 *        while this one computes (the simulated device; a kernel on the compute
 *        stream turns its bytes into the model's floats)
 *     -> reducer_prepare_forward (buffers from rank 0), replica check (simulator)
 *     -> forward, loss -> backward, the reducer's buckets all-reduced as they fill
 *     -> wait for the buckets, average -> optimizer step
 *     -> every checkpoint_every steps, rank 0 writes a checkpoint
 *
 * and after every epoch the ranks sum their statistics (one small
 * all-reduce) and evaluate on the test set (enum train_eval says who and
 * how). None of the stages is written here again: this file calls lib/dataset,
 * lib/sampler, lib/loader, lib/transfer, lib/comm and the rest of lib/ddp.
 *
 * Exact resume. A checkpoint holds the parameters, the optimizer's state, the
 * epoch and the number of its batches *trained on* (not merely prefetched by
 * the loader's workers or copied by the prefetcher), and the run's shape.
 * Resuming loads it on every rank, restores the bucket layout, and restarts
 * the epoch's index list at that batch. Nothing else carries state between
 * steps: the sampler's order depends only on seed + epoch, an augmentation
 * only on (seed, epoch, sample index) (lib/loader/augment.h), the learning
 * rate only on the step. So a resumed run ends with the same bits as one
 * never interrupted.
 *
 * Errors that every rank sees alike (a missing --init file, an unwritable
 * checkpoint directory, a batch larger than a rank's share) are found on every
 * rank before the first collective, so the job ends with the message instead
 * of a hang. Any other failure of a rank's own (rank 0's save, its loader, a
 * read) is told to every rank (comm_abort) with the phase the rank was in
 * (comm_set_activity: starting, training step N, evaluating, saving ...):
 * the others' collectives fail at once naming it, instead of waiting for the
 * watchdog.
 *
 * Read struct train_config, then train_rank() in train.c.
 */
#ifndef DDP_TRAIN_H
#define DDP_TRAIN_H

#include "comm/comm.h"
#include "dataset/dataset.h"
#include "ddp/model.h"
#include "ddp/optim.h"
#include "ddp/reducer.h"
#include "ddp/timeline.h"
#include "transfer/device.h"
#include "transfer/link.h"

#include <stddef.h>
#include <stdint.h>

/* Who evaluates on the test set after each epoch, and how. */
enum train_eval {
    TRAIN_EVAL_EVERY_RANK,      /* every rank, its share of the test set, through the DDP wrapper (one
                                 * buffer broadcast), the counts summed: the default */
    TRAIN_EVAL_RANK0_WRAPPED,   /* rank 0 alone, through the DDP wrapper: with BatchNorm and
                                 * broadcast_buffers its buffer broadcast has no partner ("hangs at the
                                 * start of epoch 2") */
    TRAIN_EVAL_RANK0_UNWRAPPED, /* rank 0 alone, with the model itself: no collective */
    TRAIN_EVAL_NONE,
};

/* A rank's own indices for an epoch, instead of the DistributedSampler's
 * (a custom sampler): *out (malloc'd, the caller frees it) and *count. 0 or
 * an ERR_*. */
typedef int (*train_indices_fn)(void *user, int rank, int world, uint64_t epoch, uint64_t records,
                                uint64_t **out, uint64_t *count);

/* A fault to inject (chapter 6's --fault=flip:R@K): right after optimizer
 * step `step` (1 = the first), rank `rank`'s replica gets one bit flipped
 * (replica_flip, lib/ddp/replica.h), which the next replica check names. */
struct train_flip {
    int rank;
    uint64_t step;
};

struct train_config {
    /* data */
    const dataset_t *train_set;  /* fixed-size records (784-byte images), labels */
    const dataset_t *test_set;   /* NULL: no evaluation */
    uint64_t train_records;      /* the first N records of train_set (0: all) */
    uint32_t batch;              /* samples per rank and batch */
    int drop_last;               /* drop each rank's last short batch (DataLoader's drop_last) */
    int shuffle;                 /* the sampler shuffles (seed + epoch) */
    uint64_t seed;               /* sampler, initialisation, augmentation */
    uint32_t workers;            /* loader worker threads per rank (0: load in the rank's thread) */
    int augment;                 /* random horizontal flip, p = 0.5 (lib/loader/augment.h) */
    uint32_t eval_batch;         /* samples per evaluation forward */
    train_indices_fn indices;    /* NULL: DistributedSampler */
    void *indices_user;

    /* how long */
    uint64_t epochs;
    uint64_t max_steps;          /* stop once the run (resumed steps included) has taken this many optimizer
                                  * steps; 0: no limit */

    /* model and optimizer */
    struct model_spec spec;
    const char *init_path;       /* initial parameters from a model file; NULL: model_init(seed) */
    struct optim_config optim;   /* total_steps and step_size are filled in for the schedules */

    /* data parallelism */
    int ddp;                     /* 0: no reducer, every rank trains alone (a benchmark's baseline) */
    int same_bits;               /* the same bits at any world size (1, 2, 4 or 8 ranks, the same global batch):
                                  * every batch by atoms (model_set_atoms), the ranks' sums added in a fixed tree
                                  * (tree_reduce.h) instead of the reducer's buckets; see TRAIN_SAME_BITS_ATOMS */
    struct reducer_config reducer;
    uint32_t accumulate;         /* micro-batches per optimizer step (no_sync for all but the last) */
    int overlap;                 /* 1: buckets start during backward; 0: only after it */
    int check;                   /* compare every rank's parameters (and buffers) bit for bit every step */
    const struct train_flip *flips; /* bits to flip in a replica, each in a step the run takes; NULL: none */
    int nflips;
    enum train_eval eval;
    int unordered_input;         /* a fault for the detector to name: the compute stream reads each batch
                                  * without waiting for its copy (the reducer's own: reducer.unordered) */

    /* files */
    const char *checkpoint_dir;  /* NULL: none */
    uint64_t checkpoint_every;   /* optimizer steps; 0: only at the end */
    const char *resume_dir;      /* a checkpoint directory or file to continue from */
    const char *save_path;       /* the final parameters, a model file */
    double save_stall_s;         /* rank 0 stays this long longer in each checkpoint save: slow storage */

    /* the device: "sim", "cuda", or NULL (cuda when a GPU is found, else sim) */
    const char *device;
    int device_per_rank;         /* rank r uses device r: ranks that are threads of one process, a GPU each
                                  * (0: the launcher's local rank picks it) */
    struct link_profile link;    /* sim: the modelled link */
    double gemm_flops, gpu_memory_bps; /* sim: the modelled GPU's GEMM rate and memory peak (0: DEVICE_GPU_DEFAULT's) */
    uint64_t pool_bytes;         /* each rank's pinned pool */
    enum device_write_check write_check; /* sim: how a loader slot written while its copy is in flight is caught
                                          * (default DEVICE_WRITE_CHECK_BYTES: no mprotect a step) */

    /* the timeline: bars of the first trace_steps steps this invocation takes (0: none); rank 0 gets every
     * rank's */
    uint64_t trace_steps;
};

/* same_bits: every global batch is cut into this many atoms, the samples at
 * positions t, t + 8, t + 16, ... of the batch (t < 8): rank r of W holds the
 * atoms t = r (mod W) (DistributedSampler's stride), each atom's gradient is
 * computed alone with the same shapes at any W, and the atoms' gradients are
 * added in one fixed tree. So W must divide it, and so must the global batch
 * and the training set's size (no world pads the sampler's split, and the
 * last, shorter global batch cuts into atoms too). */
#define TRAIN_SAME_BITS_ATOMS 8

/* The defaults: Fashion-MNIST's shape, batch 64, shuffle, seed 0, 1 worker,
 * flip off, evaluation batches of 1000, 1 epoch, the default MLP, SGD
 * (lr 0.01, momentum 0.9), DDP with PyTorch's bucket sizes, overlap, every
 * rank evaluating, checks off, link LINK_DEFAULT, a 64 MiB pool. Datasets
 * are NULL: set them. */
void train_config_default(struct train_config *c);

/* Mean seconds per optimizer step in each stage (timeline.h's lanes). */
struct train_times {
    double data, copy, forward, backward, comm, optim, check, step;
};

/* One epoch, as every rank together ran it. */
struct train_epoch {
    uint64_t epoch;              /* 0-based */
    uint64_t first_batch;        /* the batch it started at: > 0 when resumed in its middle */
    uint64_t batches;            /* micro-batches trained on, per rank */
    uint64_t steps;              /* optimizer steps */
    uint64_t step_end;           /* the run's step count after it */
    uint64_t samples;            /* trained on, all ranks */
    double loss;                 /* mean training loss over those samples */
    double train_accuracy;
    int evaluated;
    uint64_t test_correct, test_count;
    double test_accuracy;
    double seconds;              /* time of its training on rank 0's vclock (modelled on the simulator,
                                  * base/vclock.h), evaluation excluded */
    double samples_per_s;
    double lr;                   /* the learning rate of its last step */
    int stopped;                 /* max_steps ended it in its middle */
    struct train_times per_step; /* mean over its steps and the ranks */
};

/* What a run tells rank 0 as it goes. Any may be NULL; they run on rank 0's
 * thread (or process) only. */
struct train_hooks {
    void *user;
    void (*started)(void *user, const struct train_config *c, const struct train_epoch *resumed_at,
                    const char *plan, const char *init); /* init: "FILE (how it was read)" of --init, or NULL */
    void (*epoch)(void *user, const struct train_epoch *e);
    void (*saved)(void *user, const char *path, uint64_t step, uint64_t epoch, uint64_t batch);
};

/* A rank's run, when it is over. */
struct train_result {
    uint64_t steps;              /* optimizer steps the run has taken (resumed ones included) */
    uint64_t first_step;         /* the step this invocation began at (0, or the checkpoint's) */
    uint64_t epochs;             /* epochs completed */
    struct train_epoch last;     /* the last epoch's report */
    struct train_times per_step; /* mean over the whole run's steps and the ranks */
    double seconds;              /* time of all training on rank 0's vclock (modelled on the simulator) */
    double samples_per_s;
    uint64_t samples;
    int buckets;
    char layout[REDUCER_LAYOUT_MAX];
    struct reducer_stats reducer;
    uint64_t checkpoints;        /* checkpoints this rank wrote */
    struct timeline_all *timeline; /* rank 0 with trace_steps: every rank's bars (timeline_all_free it) */
    uint64_t trace_dropped;      /* bars this rank could not keep */
    uint64_t watched_copies[2];  /* this rank's simulated device: copies whose pinned source it watched for
                                  * host writes, by each write check (device_stats'; 0 on a GPU) */
};

/* Runs rank comm_rank(comm)'s share of training. Collective: every rank of
 * the communicator calls it with the same configuration. 0, or a negative
 * ERR_* with err_msg() naming what failed (ERR_ARG for a configuration no
 * rank can run: "--batch=512 is larger than rank 0's share of ..."). */
int train_rank(const struct train_config *c, comm_t *comm, const struct train_hooks *hooks,
               struct train_result *out);


#endif
