/* train: one rank's share of data-parallel training, every stage of the data
 * path in one loop (see train.h). Read train_rank(), then train_step().
 *
 * The rank's state is struct train_run; train_open() builds it (checks that
 * every rank makes alike first, no collective), comm_agree_failure() tells
 * every rank whether they passed everywhere, train_start() runs the
 * collectives that start DDP (reducer_open), train_epoch() runs an epoch's
 * steps, train_close() frees it.
 */
#include "ddp/train.h"

#include "base/clock.h"
#include "base/error.h"
#include "base/fsutil.h"
#include "base/mem.h"
#include "base/vclock.h"
#include "ddp/checkpoint.h"
#include "ddp/replica.h"
#include "ddp/tree_reduce.h"
#include "loader/augment.h"
#include "loader/loader.h"
#include "sampler/sampler.h"
#include "transfer/device.h"
#include "transfer/pinned_pool.h"
#include "transfer/prefetch.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>


void train_config_default(struct train_config *c)
{
    memset(c, 0, sizeof *c);
    c->batch = 64;
    c->shuffle = 1;
    c->workers = 1;
    c->eval_batch = 1000;
    c->epochs = 1;
    model_spec_default(&c->spec);
    optim_config_default(&c->optim, OPTIM_SGD);
    c->ddp = 1;
    reducer_config_default(&c->reducer);
    c->accumulate = 1;
    c->overlap = 1;
    c->eval = TRAIN_EVAL_EVERY_RANK;
    link_profile_find(LINK_DEFAULT, &c->link);
    c->pool_bytes = 64u << 20;
    c->write_check = DEVICE_WRITE_CHECK_BYTES;
}

struct train_run {
    const struct train_config *c;
    const struct train_hooks *hooks;
    comm_t *comm;
    int rank, world, sim, check_what;
    model_t *m;
    optim_t *o;
    reducer_t *r;           /* DDP's buckets; NULL with same_bits */
    tree_reduce_t *tree;    /* same_bits: the ranks' fixed tree */
    device_t *dev;
    pinned_pool_t *pool;
    loader_t *L;
    device_stream_t *compute;
    prefetch_t *pf;
    sampler_t *s;
    struct augment_hflip flip;
    int64_t *labels;        /* an evaluation batch's labels, host */
    uint64_t *epoch_idx;    /* this epoch's indices, from its first batch on */
    timeline_t *tl;
    uint64_t records;       /* training records in use */
    uint64_t step;          /* optimizer steps taken by the run */
    uint64_t start_step, start_epoch, start_batch; /* where this run began (a resumed one: the checkpoint's) */
    uint64_t checkpoints;
    uint64_t saved_step;    /* the step of the last checkpoint written (rank 0), UINT64_MAX: none */
    char init_note[512];    /* how --init's file was read (checkpoint_load_model's note) */
    /* the epoch so far (this rank) */
    double loss_sum;
    uint64_t samples, correct, steps;
    struct train_times t;   /* sums of seconds */
    /* the whole run (this rank) */
    struct train_times run_t;
    uint64_t run_steps, run_samples;
    double run_seconds;
};

static double train_s(uint64_t a, uint64_t b) { return (double)(b - a) * 1e-9; }

/* ---- checks every rank makes alike, before any collective ------------------------------ */

/* The checkpoint directory `dir` can take its file: made if missing, then probed. */
static int train_probe_dir(const char *dir)
{
    char path[PATH_MAX];
    if (snprintf(path, sizeof path, "%s/%s", dir, CHECKPOINT_FILE) >= (int)sizeof path)
        return err_set(ERR_ARG, "--checkpoint=%s: path too long", dir);
    int rc = fsutil_mkdir_p(dir);
    if (rc == 0)
        rc = fsutil_probe_output(path);
    return rc < 0 ? err_wrap(rc, "--checkpoint=%s: cannot write there", dir) : 0;
}

/* On the simulator every rank is a thread of this one process, so the W
 * models, their gradients and their optimizers' state share its memory. Each
 * rank's model checks its own size when it is made; this checks all of them
 * together, before any is made: 64 ranks of a model that fits once may not
 * fit 64 times, and the kernel's OOM killer says nothing of why. */
static int train_check_world_memory(const struct train_config *c, int world)
{
    uint64_t states = c->optim.kind == OPTIM_ADAM ? 2 : c->optim.momentum > 0 ? 1 : 0;
    uint64_t per_rank = model_spec_param_floats(&c->spec) * (2 + states);
    char what[192];
    snprintf(what, sizeof what, "--world=%d on the simulator: the ranks' parameters, gradients and %s state (%llu "
             "floats a rank), all in this one process", world, optim_kind_name(c->optim.kind),
             (unsigned long long)per_rank);
    return mem_check_array(what, per_rank * (uint64_t)world, sizeof(float), &(size_t){0});
}

/* Batches of `count` indices per rank and epoch: DataLoader's len(). */
static uint64_t train_batches_of(const struct train_config *c, uint64_t count)
{
    return c->drop_last ? count / c->batch : (count + c->batch - 1) / c->batch;
}

/* Optimizer steps of an epoch of `batches` micro-batches: groups of
 * `accumulate`, the last one shorter. */
static uint64_t train_steps_of(const struct train_config *c, uint64_t batches)
{
    return (batches + c->accumulate - 1) / c->accumulate;
}

static int train_check_config(const struct train_config *c, int world)
{
    if (!c->train_set)
        return err_set(ERR_ARG, "train: no training set");
    const struct dataset_info *info = dataset_info(c->train_set);
    if (info->record_bytes != (uint64_t)c->spec.inputs || !info->has_labels)
        return err_set(ERR_ARG, "%s: records of %llu bytes%s, but the model takes %d inputs and a label each",
                       dataset_name(c->train_set), (unsigned long long)info->record_bytes,
                       info->has_labels ? "" : " without labels", c->spec.inputs);
    if (c->test_set && (dataset_info(c->test_set)->record_bytes != (uint64_t)c->spec.inputs ||
                        !dataset_info(c->test_set)->has_labels))
        return err_set(ERR_ARG, "%s: the test records do not fit the model (%d inputs and a label)",
                       dataset_name(c->test_set), c->spec.inputs);
    if (c->batch == 0 || c->batch > MODEL_MAX_BATCH || c->eval_batch == 0 || c->eval_batch > MODEL_MAX_BATCH)
        return err_set(ERR_ARG, "--batch: 1 to %d samples", MODEL_MAX_BATCH);
    if (c->accumulate == 0)
        return err_set(ERR_ARG, "--accumulate: at least 1");
    uint64_t records = c->train_records ? c->train_records : info->length;
    if (records > info->length)
        return err_set(ERR_ARG, "--train-size=%llu: %s has only %llu records", (unsigned long long)records,
                       dataset_name(c->train_set), (unsigned long long)info->length);
    if (c->same_bits) {
        int atoms = TRAIN_SAME_BITS_ATOMS;
        if (world > atoms || atoms % world)
            return err_set(ERR_ARG, "--same-bits with %d ranks: every global batch is cut into %d atoms and each rank "
                                    "must hold whole subtrees of their fixed sum, so the world must divide %d (1, 2, 4 "
                                    "or 8 ranks)", world, atoms, atoms);
        if ((c->batch * (uint32_t)world) % (uint32_t)atoms)
            return err_set(ERR_ARG, "--same-bits: a global batch of %u samples (%u a rank on %d) does not cut into %d "
                                    "atoms of equal size: give a global batch that %d divides", c->batch * (uint32_t)world,
                           c->batch, world, atoms, atoms);
        if (records % (uint64_t)atoms)
            return err_set(ERR_ARG, "--same-bits: %llu training records: use a training size that %d divides, so that "
                                    "the DistributedSampler pads no world of 1, 2, 4 or 8 ranks (each would pad with "
                                    "other samples) and the last, shorter global batch cuts into %d atoms too",
                           (unsigned long long)records, atoms, atoms);
        if (c->indices)
            return err_set(ERR_ARG, "--same-bits: the atoms are cut from the DistributedSampler's stride: a sampler "
                                    "of one's own has no such layout");
        if (c->accumulate != 1)
            return err_set(ERR_ARG, "--same-bits with --accumulate=%u: accumulating adds micro-batches in an order of "
                                    "their own; give the whole global batch with --global-batch instead", c->accumulate);
        if (c->spec.batchnorm)
            return err_set(ERR_ARG, "--same-bits with --batchnorm: BatchNorm1d normalises by each rank's batch, whose "
                                    "statistics change with the world size (the global batch's would need "
                                    "synchronised BatchNorm, which this program does not have)");
        if (c->reducer.compress != REDUCER_COMPRESS_NONE)
            return err_set(ERR_ARG, "--same-bits with --compress: the 16-bit rounding of each rank's sum depends on "
                                    "how many atoms the rank holds, so the bits would depend on the world size");
        if (!c->ddp)
            return err_set(ERR_ARG, "--same-bits without DDP: the ranks' gradients must be summed");
    }
    if (!c->indices) { /* the DistributedSampler's share, padded: the same on every rank */
        uint64_t share = (records + (uint64_t)world - 1) / (uint64_t)world;
        if (c->batch > share)
            return err_set(ERR_ARG, "--batch=%u is larger than each rank's share of the training set: %llu "
                                    "records over %d ranks give %llu each",
                           c->batch, (unsigned long long)records, world, (unsigned long long)share);
    }
    return 0;
}

/* Each flip must land in a step this run takes: one that never fires would
 * end the run as if the check had found nothing to find. */
static int train_check_flips(const struct train_config *c, int world, uint64_t first, uint64_t steps_per_epoch)
{
    uint64_t last = UINT64_MAX; /* a custom sampler's epochs have no length known in advance */
    if (!c->indices)
        last = steps_per_epoch && c->epochs > UINT64_MAX / steps_per_epoch ? UINT64_MAX : steps_per_epoch * c->epochs;
    if (c->max_steps && c->max_steps < last)
        last = c->max_steps;
    for (int i = 0; i < c->nflips; i++) {
        const struct train_flip *f = &c->flips[i];
        if (f->rank < 0 || f->rank >= world)
            return err_set(ERR_ARG, "--fault=flip:%d@%llu: rank %d is not in a world of %d", f->rank,
                           (unsigned long long)f->step, f->rank, world);
        if (f->step <= first || f->step > last)
            return err_set(ERR_ARG, "--fault=flip:%d@%llu: this run takes optimizer steps %llu to %llu, so the bit "
                                    "would never flip", f->rank, (unsigned long long)f->step,
                           (unsigned long long)first + 1, (unsigned long long)last);
    }
    return 0;
}

/* ---- building a rank --------------------------------------------------------------------- */

static void train_close(struct train_run *t)
{
    prefetch_close(t->pf);
    loader_close(t->L);
    reducer_close(t->r);
    tree_reduce_close(t->tree);
    optim_destroy(t->o);
    model_destroy(t->m);
    device_stream_destroy(t->compute);
    pinned_pool_destroy(t->pool);
    device_close(t->dev);
    sampler_destroy(t->s);
    timeline_destroy(t->tl);
    free(t->labels);
    free(t->epoch_idx);
}

/* The run's shape, as a checkpoint records it. */
static void train_state_of(const struct train_run *t, uint64_t epoch, uint64_t batch, struct checkpoint_state *s)
{
    const struct train_config *c = t->c;
    memset(s, 0, sizeof *s);
    s->step = t->step;
    s->epoch = epoch;
    s->batch = batch;
    s->seed = c->seed;
    s->world = t->world;
    s->batch_size = (int)c->batch;
    s->accumulate = (int)c->accumulate;
    s->records = t->records;
    s->shuffle = c->shuffle;
    s->drop_last = c->drop_last;
    s->same_bits = c->same_bits;
    s->first_bucket_bytes = c->reducer.first_bucket_bytes;
    s->bucket_cap_bytes = c->reducer.bucket_cap_bytes;
    snprintf(s->compress, sizeof s->compress, "%s", reducer_compress_name(c->ddp ? c->reducer.compress
                                                                                   : REDUCER_COMPRESS_NONE));
    if (t->r)
        reducer_layout_describe(t->r, s->buckets, sizeof s->buckets);
}

/* The schedules' lengths, from the run's shape (never from max_steps, so a
 * run stopped early and resumed follows the same schedule). */
static void train_schedule(const struct train_config *c, uint64_t steps_per_epoch, struct optim_config *oc)
{
    *oc = c->optim;
    uint64_t total = steps_per_epoch * c->epochs;
    if (oc->schedule == OPTIM_COSINE)
        oc->total_steps = total ? total : 1;
    if (oc->schedule == OPTIM_STEP && oc->step_size == 0) { /* two decays by gamma over the run */
        uint64_t third = (c->epochs + 2) / 3;
        oc->step_size = steps_per_epoch * (third ? third : 1);
        oc->step_size = oc->step_size ? oc->step_size : 1;
    }
}

/* 1 when this rank evaluates the test set (train_evaluate): with
 * TRAIN_EVAL_EVERY_RANK every rank its share, otherwise rank 0 alone. */
static int train_evaluates(const struct train_config *c, int rank)
{
    return c->eval != TRAIN_EVAL_NONE && c->test_set && (c->eval == TRAIN_EVAL_EVERY_RANK || rank == 0);
}

/* Everything a rank builds before the first collective: the checks every
 * rank makes alike (flags, files, the checkpoint to resume), then its model,
 * optimizer, device and loader; *saved is the checkpoint's state when
 * resuming. No collective: the caller agrees on the outcome first. */
static int train_open(struct train_run *t, const struct train_config *c, comm_t *comm,
                      const struct train_hooks *hooks, struct checkpoint_state *saved)
{
    memset(t, 0, sizeof *t);
    t->c = c;
    t->hooks = hooks;
    t->comm = comm;
    t->rank = comm_rank(comm);
    t->world = comm_world(comm);
    t->sim = strcmp(comm_backend_name(comm), "sim") == 0;
    t->saved_step = UINT64_MAX;
    int rc = train_check_config(c, t->world);
    if (rc == 0 && t->sim && t->world > 1)
        rc = train_check_world_memory(c, t->world);
    if (rc < 0)
        return rc;
    t->records = c->train_records ? c->train_records : dataset_info(c->train_set)->length;

    /* files first: a bad path must stop every rank before the first collective */
    if (c->checkpoint_dir && (rc = train_probe_dir(c->checkpoint_dir)) < 0)
        return rc;
    if (c->save_path && (rc = fsutil_probe_output(c->save_path)) < 0)
        return err_wrap(rc, "--save=%s: cannot write it", c->save_path);

    struct sampler_options so;
    sampler_options_default(&so);
    so.size = t->records;
    so.world = (uint32_t)t->world;
    so.rank = (uint32_t)t->rank;
    so.seed = c->seed;
    so.shuffle = c->shuffle;
    if ((rc = sampler_create(&so, &t->s)) < 0)
        return rc;

    /* the device the model lives on, and its compute stream */
    struct device_config dc;
    device_config_default(&dc);
    dc.backend = c->device;
    dc.ordinal = c->device_per_rank ? t->rank : -1;
    dc.link = c->link;
    if (c->gemm_flops > 0 && c->gpu_memory_bps > 0) {
        dc.gemm_flops = c->gemm_flops;
        dc.gpu_memory_bps = c->gpu_memory_bps;
    }
    char devname[48];
    snprintf(devname, sizeof devname, "rank %d's device", t->rank);
    dc.name = devname;
    dc.write_check = c->write_check;
    if ((rc = device_open(&dc, &t->dev)) < 0)
        return err_wrap(rc, "--device=%s", c->device ? c->device : "auto");
    if ((rc = device_stream_create(t->dev, "compute", &t->compute)) < 0)
        return rc;
    /* room for an evaluation's batch only on a rank that evaluates: each
     * buffer is populated and zeroed up front, 12 MB at the default 1000 */
    uint32_t max_batch = train_evaluates(c, t->rank) && c->eval_batch > c->batch ? c->eval_batch : c->batch;
    if ((rc = model_create(&c->spec, (int)max_batch, t->compute, &t->m)) < 0)
        return rc;
    if (c->same_bits && (rc = model_set_atoms(t->m, TRAIN_SAME_BITS_ATOMS / t->world)) < 0)
        return rc;
    if (c->init_path)
        rc = checkpoint_load_model(c->init_path, t->m, t->init_note, sizeof t->init_note);
    else if ((rc = model_init(t->m, c->seed)) < 0)
        return rc;
    if (rc < 0) /* every refusal of the file names the flag it came from: a FIFO, a foreign file, a shape */
        return err_wrap(rc, "--init");
    struct optim_config oc;
    uint64_t spe = c->indices ? 0 : train_steps_of(c, train_batches_of(c, sampler_len(t->s)));
    train_schedule(c, spe, &oc);
    if ((rc = optim_create(&oc, t->m, &t->o)) < 0)
        return rc;

    if (c->resume_dir) { /* the run's shape first: its message says why another world cannot continue */
        struct checkpoint_state now;
        train_state_of(t, 0, 0, &now);
        char path[PATH_MAX + 32];
        checkpoint_path(c->resume_dir, path, sizeof path);
        fsutil_tmp_sweep(path); /* what a save killed by SIGKILL left beside it */
        uint64_t nb = c->indices ? 0 : train_batches_of(c, sampler_len(t->s));
        struct checkpoint_span span = {.epochs = c->epochs, .batches = nb, .max_steps = c->max_steps};
        char warning[1024] = "";
        if ((rc = checkpoint_read_state(c->resume_dir, saved)) < 0 ||
            (rc = checkpoint_check_resume(path, saved, &now, warning, sizeof warning)) < 0 ||
            (rc = checkpoint_check_position(path, saved, &span)) < 0 ||
            (rc = checkpoint_load(c->resume_dir, t->m, t->o, saved)) < 0)
            return err_wrap(rc, "--resume");
        if (*warning && t->rank == 0)
            fprintf(stderr, "warning: --resume=%s\n", warning);
        t->step = t->start_step = saved->step;
        t->start_epoch = saved->epoch;
        t->start_batch = saved->batch;
        if (nb && t->start_batch == nb) { /* saved at an epoch's end: the next one starts */
            t->start_epoch++;
            t->start_batch = 0;
        }
    }

    if ((rc = train_check_flips(c, t->world, t->start_step, spe)) < 0)
        return rc;

    /* the data path: the device's pinned pool, the loader's ring in it, the prefetcher */
    if ((rc = pinned_pool_create(t->dev, c->pool_bytes, DEVICE_HOST_PINNED, &t->pool)) < 0)
        return rc;
    struct loader_options lo;
    loader_options_default(&lo);
    lo.workers = c->workers;
    lo.max_batch = c->batch;
    lo.seed = c->seed;
    /* the prefetcher holds a slot until its copy is done: 2 more than the loader's own prefetch */
    uint32_t per = c->workers ? c->workers : 1;
    lo.prefetch = 2 + (2 + per - 1) / per;
    lo.allocator = pinned_pool_loader_allocator(t->pool);
    /* on modelled time (a simulated device) the collate is on the host's modelled clock, as chapter 4's:
     * records copied at the host's modelled memcpy (VCLOCK_HOST_MEMCPY_BPS), nothing more per record
     * (model_record_s 0: a record is a slice of a mapped file, no decode); a GPU's run reads the wall clock */
    lo.modelled = !vclock_is_wall();
    if (c->augment) {
        t->flip = (struct augment_hflip){.rows = 28, .cols = 28, .p = 0.5};
        if ((uint64_t)c->spec.inputs != 784)
            return err_set(ERR_ARG, "--augment=flip: flips 28 x 28 images; the model takes %d inputs",
                           c->spec.inputs);
        lo.transform = augment_hflip;
        lo.transform_user = &t->flip;
    }
    if ((rc = loader_open(c->train_set, &lo, &t->L)) < 0)
        return rc;
    struct prefetch_options po = {.depth = 2, .max_bytes = (uint64_t)c->batch * (uint64_t)c->spec.inputs,
                                  .max_batch = c->batch, .compute = t->compute, .unordered = c->unordered_input};
    if ((rc = prefetch_open(t->dev, t->L, &po, &t->pf)) < 0)
        return rc;
    t->labels = malloc((size_t)max_batch * sizeof *t->labels);
    if (!t->labels)
        return err_set(ERR_NOMEM, "train: out of memory");
    /* the bars a step can leave: data wait, copy, forward, backward and exposed communication per
     * micro-batch; per step, each bucket's all-reduce (at most one per parameter), the buffer broadcast,
     * the replica check, the optimizer, a save and an evaluation */
    uint64_t per_step = 5 * (uint64_t)c->accumulate + (uint64_t)model_param_tensors(t->m) + 5;
    if (c->trace_steps && (rc = timeline_create(t->step, c->trace_steps, c->trace_steps * per_step, &t->tl)) < 0)
        return err_wrap(rc, "--trace-steps=%llu", (unsigned long long)c->trace_steps);
    return 0;
}

/* The collectives that start the run, once every rank has opened: DDP's
 * first (every rank's model the same shape, then rank 0's parameters to
 * all), the clocks' common start. */
static int train_start(struct train_run *t, const struct checkpoint_state *saved)
{
    const struct train_config *c = t->c;
    comm_t *comm = t->comm;
    int rc;
    if (c->same_bits && (rc = tree_reduce_open(comm, t->m, &t->tree)) < 0)
        return rc;
    if (c->ddp && !c->same_bits) {
        if ((rc = reducer_open(&c->reducer, comm, t->m, &t->r)) < 0)
            return rc;
        if (c->resume_dir && (rc = reducer_layout_restore(t->r, saved->buckets)) < 0)
            return err_wrap(rc, "--resume=%s", c->resume_dir);
    }
    t->check_what = REPLICA_PARAMS;
    if (c->reducer.broadcast_buffers && model_buffer_floats(t->m) > 0)
        t->check_what |= REPLICA_BUFFERS; /* buffers are the same bits only after their broadcast */
    if ((rc = comm_barrier(comm)) < 0) /* every rank's clock starts here */
        return rc;
    timeline_start(t->tl);
    return 0;
}

/* ---- one step ------------------------------------------------------------------------------ */

/* The replica check of `what` after step t->step, the phase a failure of
 * this rank's own there names. Its verdict (ERR_STATE, lib/ddp/replica.h)
 * is every rank's, drawn from the hashes they all gathered: the job's, told
 * by no rank and blamed on none. */
static int train_check_replicas(struct train_run *t, unsigned what)
{
    char phase[64];
    snprintf(phase, sizeof phase, "checking the replicas after step %llu", (unsigned long long)t->step);
    comm_set_activity(t->comm, phase);
    int rc = replica_check(t->comm, t->m, t->step, what);
    return rc == ERR_STATE ? comm_fail_shared(t->comm, rc) : rc;
}

/* Takes the next batch through the prefetcher and gives it to the model.
 * 1 and *count, or ERR_STATE when the epoch ended early, or an error. */
static int train_fetch(struct train_run *t, int *count)
{
    uint64_t t0 = vclock_now_ns();
    struct prefetch_batch *b;
    int rc = prefetch_next(t->pf, &b);
    uint64_t t1 = vclock_now_ns();
    t->t.data += train_s(t0, t1);
    timeline_add(t->tl, TIMELINE_DATA, t->step, t0, t1);
    if (rc == 0)
        return err_set(ERR_STATE, "rank %d: the loader's epoch ended before the step's batches", t->rank);
    if (rc < 0)
        return rc;
    /* on the compute stream, which the prefetcher made wait for the batch's copy */
    rc = model_take_batch(t->m, b->data, b->labels, (int)b->count, (int64_t)b->number);
    *count = (int)b->count;
    int rr = prefetch_release(t->pf, b); /* queued: the buffer may be refilled once the compute stream is past it */
    rc = rc ? rc : rr;
    uint64_t t2 = vclock_now_ns();
    t->t.copy += train_s(t1, t2);
    timeline_add(t->tl, TIMELINE_COPY, t->step, t1, t2);
    return rc < 0 ? rc : 1;
}

/* Backward of micro-batch k of g: the reducer's buckets start as they fill
 * (overlap), or all of them after backward; with DDP the last micro-batch
 * then waits for them and averages. */
static int train_backward(struct train_run *t, int n, uint32_t k, uint32_t g)
{
    const struct train_config *c = t->c;
    uint64_t t0 = vclock_now_ns(), t1;
    int rc;
    if (!c->ddp || c->same_bits) {
        rc = model_backward(t->m, n, k > 0, NULL, NULL);
        if (rc == 0 && c->same_bits) /* the tree starts from the whole gradient: the host waits for it here */
            rc = model_sync(t->m);
        t1 = vclock_now_ns();
        t->t.backward += train_s(t0, t1);
        timeline_add(t->tl, TIMELINE_BACKWARD, t->step, t0, t1);
        if (rc < 0 || !c->same_bits)
            return rc;
        rc = tree_reduce_run(t->tree); /* every rank's sum, then the tree's upper levels */
        uint64_t t2 = vclock_now_ns();
        t->t.comm += train_s(t1, t2);
        timeline_add(t->tl, TIMELINE_COMM, t->step, t1, t2);
        return rc;
    }
    reducer_set_sync(t->r, k + 1 == g);
    if ((rc = reducer_prepare_backward(t->r)) < 0)
        return rc;
    rc = model_backward(t->m, n, k > 0, c->overlap ? reducer_ready_hook : NULL, t->r);
    t1 = vclock_now_ns();
    t->t.backward += train_s(t0, t1);
    timeline_add(t->tl, TIMELINE_BACKWARD, t->step, t0, t1);
    /* without overlap, every gradient is marked ready only now, in the order backward made them */
    for (int p = model_param_tensors(t->m) - 1; rc == 0 && !c->overlap && p >= 0; p--)
        rc = reducer_mark_ready(t->r, p);
    if (rc < 0) { /* wait for what did start, and keep the first error's message */
        char msg[1024];
        snprintf(msg, sizeof msg, "%s", err_msg());
        reducer_finish(t->r);
        err_set(rc, "%s", msg);
    } else {
        rc = reducer_finish(t->r);
    }
    uint64_t t2 = vclock_now_ns();
    t->t.comm += train_s(t1, t2);
    if (k + 1 == g)
        timeline_add(t->tl, TIMELINE_COMM, t->step, t1, t2);
    for (int b = 0; rc == 0 && k + 1 == g && timeline_wants(t->tl, t->step) && b < reducer_bucket_count(t->r); b++) {
        struct reducer_bucket_info bi;
        reducer_bucket_info(t->r, b, &bi);
        size_t width = c->reducer.compress == REDUCER_COMPRESS_NONE ? sizeof(float) : sizeof(uint16_t);
        if (bi.seq && bi.launch_ns >= t0)
            timeline_add_allreduce(t->tl, b, t->step, bi.launch_ns, bi.complete_ns, bi.seq, bi.count * width);
    }
    return rc;
}

/* One optimizer step over g micro-batches. */
static int train_step(struct train_run *t, uint32_t g)
{
    const struct train_config *c = t->c;
    char what[48]; /* the phase a failure or a watchdog names: the step this one becomes, 1-based as --fault's
                    * and the checkpoints' "after step K" */
    snprintf(what, sizeof what, "training step %llu", (unsigned long long)t->step + 1);
    comm_set_activity(t->comm, what);
    int rc = 0;
    for (uint32_t k = 0; rc == 0 && k < g; k++) {
        int n = 0;
        if ((rc = train_fetch(t, &n)) < 0)
            break;
        rc = 0;
        if (c->ddp) { /* the forward through the DDP wrapper: rebuild once, buffers from rank 0 */
            uint64_t t0 = vclock_now_ns();
            rc = t->r ? reducer_prepare_forward(t->r, 1) : 0;
            uint64_t t1 = vclock_now_ns();
            t->t.comm += train_s(t0, t1);
            timeline_add(t->tl, TIMELINE_COMM, t->step, t0, t1);
            if (rc == 0 && k == 0 && c->check) { /* the last step's parameters, these buffers */
                if ((rc = train_check_replicas(t, (unsigned)t->check_what)) == 0)
                    comm_set_activity(t->comm, what);
                uint64_t t2 = vclock_now_ns();
                t->t.check += train_s(t1, t2);
                timeline_add(t->tl, TIMELINE_CHECK, t->step, t1, t2);
            }
            if (rc < 0)
                break;
        }
        uint64_t f0 = vclock_now_ns();
        struct model_loss loss;
        rc = model_forward(t->m, n, MODEL_TRAIN);
        if (rc == 0)
            rc = model_loss(t->m, n, c->same_bits ? 1.0f / (float)t->world : 1.0f / (float)g, &loss);
        uint64_t f1 = vclock_now_ns();
        t->t.forward += train_s(f0, f1);
        timeline_add(t->tl, TIMELINE_FORWARD, t->step, f0, f1);
        if (rc < 0)
            break;
        t->loss_sum += loss.loss * n;
        t->correct += (uint64_t)loss.correct;
        t->samples += (uint64_t)n;
        rc = train_backward(t, n, k, g);
    }
    if (rc < 0)
        return rc;
    uint64_t o0 = vclock_now_ns();
    rc = optim_step(t->o, t->m);
    uint64_t o1 = vclock_now_ns();
    t->t.optim += train_s(o0, o1);
    timeline_add(t->tl, TIMELINE_OPTIM, t->step, o0, o1);
    if (rc < 0)
        return rc;
    t->step++;
    t->steps++;
    for (int i = 0; rc == 0 && i < c->nflips; i++) /* an injected fault: the next replica check must name it */
        if (c->flips[i].rank == t->rank && c->flips[i].step == t->step)
            rc = replica_flip(t->m, t->step, t->rank);
    return rc;
}

/* Rank 0 writes a checkpoint: the position is `batch` batches into `epoch`. */
static int train_save(struct train_run *t, uint64_t epoch, uint64_t batch)
{
    const struct train_config *c = t->c;
    if (t->rank != 0)
        return 0;
    uint64_t t0 = vclock_now_ns();
    char what[PATH_MAX + 64];
    snprintf(what, sizeof what, "saving a checkpoint to %s at step %llu", c->checkpoint_dir,
             (unsigned long long)t->step);
    comm_set_activity(t->comm, what);
    struct checkpoint_state s;
    train_state_of(t, epoch, batch, &s);
    int rc = checkpoint_save(c->checkpoint_dir, t->m, t->o, &s);
    if (rc < 0) /* the disk full, a file-size limit: the last checkpoint is still whole */
        err_wrap(rc, "--checkpoint=%s: saving step %llu", c->checkpoint_dir, (unsigned long long)t->step);
    if (rc == 0 && c->save_stall_s > 0) /* slow storage: the modelled time it costs, which the modelled
                                          * watchdog (chapter 6's save-timeout demo) sees; no real wait */
        vclock_advance_ns(vclock_ns_of_s(c->save_stall_s));
    uint64_t t1 = vclock_now_ns();
    timeline_add(t->tl, TIMELINE_SAVE, t->step - 1, t0, t1);
    if (rc < 0) /* the activity stays: it is the phase comm_abort tells the other ranks */
        return rc;
    comm_set_activity(t->comm, NULL);
    t->checkpoints++;
    t->saved_step = t->step;
    if (t->hooks && t->hooks->saved) {
        char path[PATH_MAX + 32];
        t->hooks->saved(t->hooks->user, checkpoint_path(c->checkpoint_dir, path, sizeof path), t->step, epoch, batch);
    }
    return 0;
}

/* ---- epochs -------------------------------------------------------------------------------- */

/* same_bits: each batch of idx[0 .. n) (batches of `batch`, the last one
 * shorter) reordered atom by atom: the rank's `atoms` atoms are its samples
 * j = t (mod atoms), atom t's samples j = t, t + atoms, ... in that order
 * (DistributedSampler's stride, one level down: TRAIN_SAME_BITS_ATOMS), and
 * the model computes a batch as `atoms` blocks of consecutive samples
 * (model_set_atoms). The global batch's samples stay the same; only the
 * order within a rank's batch changes. */
static int train_atoms_first(uint64_t *idx, uint64_t n, uint32_t batch, uint32_t atoms)
{
    uint64_t *held = malloc((size_t)batch * sizeof *held);
    if (!held)
        return err_set(ERR_NOMEM, "train: out of memory for a batch's indices");
    for (uint64_t at = 0; at < n; at += batch) {
        uint64_t count = n - at < batch ? n - at : batch, width = count / atoms;
        memcpy(held, idx + at, count * sizeof *idx);
        for (uint64_t j = 0; j < count; j++)
            idx[at + (j % atoms) * width + j / atoms] = held[j];
    }
    free(held);
    return 0;
}

/* This rank's indices of `epoch` from batch `first` on, into t->epoch_idx;
 * *total is the whole epoch's count. */
static int train_epoch_indices(struct train_run *t, uint64_t epoch, uint64_t first, uint64_t *count, uint64_t *total)
{
    const struct train_config *c = t->c;
    free(t->epoch_idx);
    t->epoch_idx = NULL;
    uint64_t *all = NULL, n = 0;
    int rc;
    if (c->indices) {
        if ((rc = c->indices(c->indices_user, t->rank, t->world, epoch, t->records, &all, &n)) < 0)
            return rc;
    } else {
        sampler_set_epoch(t->s, epoch);
        if ((rc = sampler_begin(t->s)) < 0)
            return rc;
        n = sampler_len(t->s);
        if (!(all = malloc((n ? n : 1) * sizeof *all)))
            return err_set(ERR_NOMEM, "train: out of memory for %llu indices", (unsigned long long)n);
        for (uint64_t k = 0; rc == 0 && k < n; k++)
            rc = sampler_get(t->s, k, &all[k]);
        if (rc < 0) {
            free(all);
            return rc;
        }
    }
    if (c->same_bits && (rc = train_atoms_first(all, n, c->batch, TRAIN_SAME_BITS_ATOMS / (uint32_t)t->world)) < 0) {
        free(all);
        return rc;
    }
    uint64_t skip = first * c->batch;
    skip = skip < n ? skip : n;
    memmove(all, all + skip, (size_t)(n - skip) * sizeof *all);
    t->epoch_idx = all;
    *count = n - skip;
    *total = n;
    return 0;
}

/* The test set's accuracy: the whole of it on rank 0, or every rank its
 * share (indices rank, rank + W, ...), the counts summed after. */
static int train_evaluate(struct train_run *t, uint64_t *correct, uint64_t *count)
{
    const struct train_config *c = t->c;
    *correct = *count = 0;
    int every = c->eval == TRAIN_EVAL_EVERY_RANK;
    if (!train_evaluates(c, t->rank))
        return 0;
    int rc = 0;
    /* Through the DDP wrapper, a forward broadcasts rank 0's buffers first (a
     * collective). In evaluation the buffers do not move, so one broadcast
     * before the pass gives the bits one per forward would. */
    if (t->r && c->eval != TRAIN_EVAL_RANK0_UNWRAPPED && (rc = reducer_prepare_forward(t->r, 0)) < 0)
        return rc;
    uint64_t n = dataset_info(c->test_set)->length, stride = every ? (uint64_t)t->world : 1;
    uint64_t first = every ? (uint64_t)t->rank : 0;
    uint32_t eb = c->eval_batch;
    uint64_t *idx = malloc(eb * sizeof *idx);
    uint8_t *bytes = malloc((size_t)eb * (size_t)c->spec.inputs);
    struct dataset_record *recs = malloc(eb * sizeof *recs);
    if (!idx || !bytes || !recs)
        rc = err_set(ERR_NOMEM, "train: out of memory for evaluation");
    for (uint64_t at = first; rc == 0 && at < n;) {
        uint32_t k = 0;
        for (; k < eb && at < n; k++, at += stride)
            idx[k] = at;
        rc = dataset_read_batch(c->test_set, idx, k, bytes, (uint64_t)c->spec.inputs, recs);
        for (uint32_t i = 0; rc == 0 && i < k; i++)
            t->labels[i] = recs[i].label;
        if (rc == 0)
            rc = model_upload_batch(t->m, bytes, NULL, t->labels, (int)k);
        if (rc == 0)
            rc = model_forward(t->m, (int)k, MODEL_EVAL);
        struct model_loss l;
        if (rc == 0)
            rc = model_loss(t->m, (int)k, 1.0f, &l);
        if (rc == 0) {
            *correct += (uint64_t)l.correct;
            *count += k;
        }
    }
    free(idx);
    free(bytes);
    free(recs);
    return rc;
}

/* The epoch's figures from every rank: one all-reduce of float64 sums, then
 * the evaluation. */
static int train_epoch_report(struct train_run *t, uint64_t epoch, uint64_t first, uint64_t batches, double seconds,
                              int stopped, struct train_epoch *e)
{
    const struct train_config *c = t->c;
    enum { S_LOSS, S_SAMPLES, S_CORRECT, S_STEPS, S_DATA, S_COPY, S_FWD, S_BWD, S_COMM, S_OPT, S_CHECK, S_STEP, S_N };
    double v[S_N] = {t->loss_sum, (double)t->samples, (double)t->correct, (double)t->steps, t->t.data, t->t.copy,
                     t->t.forward, t->t.backward, t->t.comm, t->t.optim, t->t.check, t->t.step};
    int rc = comm_allreduce(t->comm, v, v, S_N, COMM_FLOAT64, COMM_SUM);
    if (rc < 0)
        return rc;
    memset(e, 0, sizeof *e);
    e->epoch = epoch;
    e->first_batch = first;
    e->batches = batches;
    e->steps = t->steps;
    e->step_end = t->step;
    e->samples = (uint64_t)v[S_SAMPLES];
    e->loss = v[S_SAMPLES] > 0 ? v[S_LOSS] / v[S_SAMPLES] : 0;
    e->train_accuracy = v[S_SAMPLES] > 0 ? v[S_CORRECT] / v[S_SAMPLES] : 0;
    e->seconds = seconds;
    e->samples_per_s = seconds > 0 ? v[S_SAMPLES] / seconds : 0;
    e->lr = optim_lr_at(t->o, t->step ? t->step - 1 : 0);
    e->stopped = stopped;
    double per = v[S_STEPS] > 0 ? 1.0 / v[S_STEPS] : 0; /* steps summed over ranks: a mean per rank and step */
    e->per_step = (struct train_times){v[S_DATA] * per,  v[S_COPY] * per, v[S_FWD] * per,   v[S_BWD] * per,
                                       v[S_COMM] * per,  v[S_OPT] * per,  v[S_CHECK] * per, v[S_STEP] * per};
    uint64_t e0 = vclock_now_ns(), correct, count;
    char what[64];
    snprintf(what, sizeof what, "evaluating after epoch %llu", (unsigned long long)epoch + 1);
    comm_set_activity(t->comm, what);
    rc = train_evaluate(t, &correct, &count);
    if (rc == 0 && c->eval == TRAIN_EVAL_EVERY_RANK && c->test_set) {
        int64_t both[2] = {(int64_t)correct, (int64_t)count};
        rc = comm_allreduce(t->comm, both, both, 2, COMM_INT64, COMM_SUM);
        correct = (uint64_t)both[0], count = (uint64_t)both[1];
    }
    timeline_add(t->tl, TIMELINE_EVAL, t->step ? t->step - 1 : 0, e0, vclock_now_ns());
    if (rc < 0)
        return rc;
    e->evaluated = count > 0;
    e->test_correct = correct;
    e->test_count = count;
    e->test_accuracy = count ? (double)correct / (double)count : 0;
    return 0;
}

static void train_times_add(struct train_times *a, const struct train_times *b, double w)
{
    a->data += b->data * w, a->copy += b->copy * w, a->forward += b->forward * w, a->backward += b->backward * w;
    a->comm += b->comm * w, a->optim += b->optim * w, a->check += b->check * w, a->step += b->step * w;
}

/* One epoch from batch `first`. *stop is set when max_steps was reached. */
static int train_epoch(struct train_run *t, uint64_t epoch, uint64_t first, int *stop, struct train_epoch *e)
{
    const struct train_config *c = t->c;
    uint64_t count = 0, total = 0;
    char phase[48];
    snprintf(phase, sizeof phase, "starting epoch %llu", (unsigned long long)epoch + 1);
    comm_set_activity(t->comm, phase); /* not the last epoch's evaluation, which is over */
    int rc = train_epoch_indices(t, epoch, first, &count, &total);
    if (rc < 0)
        return rc;
    uint64_t nb = train_batches_of(c, total);
    struct index_array arr = {t->epoch_idx, count};
    struct loader_epoch le = {.epoch = epoch, .indices = index_stream_of_array(&arr), .batch_size = c->batch,
                              .drop_last = c->drop_last};
    if (first < nb && (rc = loader_start_epoch(t->L, &le)) < 0)
        return rc;
    t->loss_sum = 0;
    t->samples = t->correct = t->steps = 0;
    memset(&t->t, 0, sizeof t->t);
    uint64_t w0 = vclock_now_ns(), done = first;
    while (rc == 0 && done < nb && !*stop) {
        /* groups of `accumulate` counted from the epoch's start, so a resumed epoch cuts them alike */
        uint32_t g = (uint32_t)(nb - done < c->accumulate ? nb - done : c->accumulate);
        uint64_t s0 = vclock_now_ns();
        rc = train_step(t, g);
        t->t.step += train_s(s0, vclock_now_ns());
        if (rc < 0)
            break;
        done += g;
        *stop = c->max_steps && t->step >= c->max_steps;
        if (c->checkpoint_dir && c->checkpoint_every && t->step % c->checkpoint_every == 0 && !*stop)
            rc = train_save(t, epoch, done);
    }
    if (rc == 0 && first < nb && done == nb) { /* the loader must say the epoch is over now */
        struct prefetch_batch *b;
        int more = prefetch_next(t->pf, &b);
        if (more == 1) {
            prefetch_release(t->pf, b);
            rc = err_set(ERR_STATE, "rank %d: the loader has more batches than the epoch's %llu", t->rank,
                         (unsigned long long)nb);
        } else {
            rc = more;
        }
    }
    double seconds = train_s(w0, vclock_now_ns());
    if (rc < 0)
        return rc;
    if (*stop && done < nb)
        loader_stop(t->L);
    /* a full replica check after the epoch's last step, before anything reads the parameters */
    if (c->check && c->ddp && t->steps && (rc = train_check_replicas(t, REPLICA_PARAMS)) < 0)
        return rc;
    t->run_seconds += seconds;
    t->run_steps += t->steps;
    t->run_samples += t->samples;
    train_times_add(&t->run_t, &t->t, 1.0);
    if ((rc = train_epoch_report(t, epoch, first, done - first, seconds, *stop && done < nb, e)) < 0)
        return rc;
    /* the run's last checkpoint: where max_steps stopped it, or after its last epoch */
    if (c->checkpoint_dir && (*stop || epoch + 1 == c->epochs) && t->saved_step != t->step)
        rc = train_save(t, epoch, done);
    return rc;
}

/* The whole run's figures, summed over ranks like an epoch's. */
static int train_totals(struct train_run *t, struct train_result *out)
{
    double v[9] = {(double)t->run_steps, t->run_t.data,    t->run_t.copy,  t->run_t.forward, t->run_t.backward,
                   t->run_t.comm,        t->run_t.optim, t->run_t.check, t->run_t.step};
    int rc = comm_allreduce(t->comm, v, v, 9, COMM_FLOAT64, COMM_SUM);
    if (rc < 0)
        return rc;
    double per = v[0] > 0 ? 1.0 / v[0] : 0;
    out->per_step = (struct train_times){v[1] * per, v[2] * per, v[3] * per, v[4] * per,
                                         v[5] * per, v[6] * per, v[7] * per, v[8] * per};
    out->seconds = t->run_seconds;
    int64_t samples = (int64_t)t->run_samples;
    if ((rc = comm_allreduce(t->comm, &samples, &samples, 1, COMM_INT64, COMM_SUM)) < 0)
        return rc;
    out->samples = (uint64_t)samples;
    out->samples_per_s = out->seconds > 0 ? (double)samples / out->seconds : 0;
    return 0;
}

int train_rank(const struct train_config *c, comm_t *comm, const struct train_hooks *hooks, struct train_result *out)
{
    memset(out, 0, sizeof *out);
    struct train_run t;
    comm_set_activity(comm, "starting (its data, model, optimizer and loader)");
    struct checkpoint_state saved;
    int rc = train_open(&t, c, comm, hooks, &saved);
    /* A check every rank makes alike fails on every rank alike (a damaged --resume, a flag the data
     * cannot take): the job's verdict, said as it is, no rank blamed for it. A failure of one rank's
     * own (its memory, its node's copy of a file) is still that rank's, and every rank hears it here. */
    rc = comm_agree_failure(comm, rc);
    if (rc == 0)
        rc = train_start(&t, &saved);
    if (rc == 0 && t.rank == 0 && hooks && hooks->started) {
        uint64_t share = c->indices ? 0 : sampler_len(t.s), nb = train_batches_of(c, share);
        char plan[REDUCER_LAYOUT_MAX + 512], layout[REDUCER_LAYOUT_MAX] = "no DDP";
        if (t.r)
            reducer_layout_describe(t.r, layout, sizeof layout);
        if (t.tree)
            snprintf(layout, sizeof layout, "none (--same-bits: %d atoms a step, %d a rank, each rank's sum then the "
                     "ranks' in one fixed tree; %.1f KB gathered a step)", TRAIN_SAME_BITS_ATOMS,
                     TRAIN_SAME_BITS_ATOMS / t.world, (double)tree_reduce_bytes(t.tree) / 1e3);
        if (c->indices)
            snprintf(plan, sizeof plan, "each rank's indices from a custom sampler; buckets %s", layout);
        else
            snprintf(plan, sizeof plan, "each rank: %llu samples, %llu batches of %u, %llu optimizer steps per "
                     "epoch; buckets %s", (unsigned long long)share, (unsigned long long)nb, c->batch,
                     (unsigned long long)train_steps_of(c, nb), layout);
        struct train_epoch at = {.epoch = t.start_epoch, .first_batch = t.start_batch, .step_end = t.step};
        char init[PATH_MAX + sizeof t.init_note + 4] = "";
        if (c->init_path)
            snprintf(init, sizeof init, "%s%s%s%s", c->init_path, t.init_note[0] ? " (" : "", t.init_note,
                     t.init_note[0] ? ")" : "");
        hooks->started(hooks->user, c, c->resume_dir ? &at : NULL, plan, c->init_path ? init : NULL);
    }
    int stop = c->max_steps && t.step >= c->max_steps;
    for (uint64_t epoch = t.start_epoch; rc == 0 && epoch < c->epochs && !stop; epoch++) {
        struct train_epoch e;
        rc = train_epoch(&t, epoch, epoch == t.start_epoch ? t.start_batch : 0, &stop, &e);
        if (rc == 0) {
            out->last = e;
            out->epochs += !e.stopped;
            if (t.rank == 0 && hooks && hooks->epoch)
                hooks->epoch(hooks->user, &e);
        }
    }
    if (rc == 0)
        rc = train_totals(&t, out);
    if (rc == 0 && c->save_path && t.rank == 0) {
        char what[PATH_MAX + 32];
        snprintf(what, sizeof what, "saving the model to %s", c->save_path);
        comm_set_activity(comm, what);
        if ((rc = checkpoint_save_model(c->save_path, t.m, FSUTIL_DURABLE)) < 0)
            err_wrap(rc, "--save=%s", c->save_path);
        else
            comm_set_activity(comm, NULL);
    }
    if (rc == 0 && c->trace_steps)
        rc = timeline_gather(t.tl, comm, &out->timeline);
    out->steps = t.step;
    out->first_step = t.start_step;
    out->checkpoints = t.checkpoints;
    out->trace_dropped = timeline_dropped(t.tl);
    if (t.dev) {
        struct device_stats ds;
        device_stats(t.dev, &ds);
        memcpy(out->watched_copies, ds.watched_copies, sizeof out->watched_copies);
    }
    if (t.r) {
        out->buckets = reducer_bucket_count(t.r);
        out->reducer = reducer_get_stats(t.r);
        reducer_layout_describe(t.r, out->layout, sizeof out->layout);
    }
    /* A failure of this rank's own (a save, the loader, a read, memory) reaches every rank now, with the
     * phase it happened in: otherwise the others wait at their next collective for the watchdog, which
     * can only say that this rank never came. After a failed collective it does nothing. */
    if (rc < 0)
        rc = comm_abort(comm, rc);
    train_close(&t);
    comm_set_activity(comm, NULL);
    return rc;
}
