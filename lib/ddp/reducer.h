/* reducer: DistributedDataParallel's gradient reducer. It keeps W replicas
 * of the model identical: the parameters start from rank 0's, and after
 * every backward each rank holds the average of all ranks' gradients.
 *
 * Where it sits: between the model's backward (lib/ddp/model.h), which tells
 * it as each parameter's gradient becomes final, and the optimizer
 * (lib/ddp/optim.h), over the communicator (lib/comm/comm.h). It follows
 * PyTorch's reducer (torch/csrc/distributed/c10d/reducer.cpp and
 * torch/nn/parallel/distributed.py, 1.13), read from its source:
 *
 * - Open: the ranks compare their parameters' shapes (a mismatch names the
 *   rank and the parameter), then rank 0's parameters and buffers are
 *   broadcast to all (PyTorch's _sync_module_states).
 * - Buckets: gradients are grouped so that one all-reduce carries many. The
 *   first assignment walks the parameters in definition order, closing a
 *   bucket once it holds at least its limit: first_bucket_bytes for the first
 *   (PyTorch: 1 MiB, dist._DEFAULT_FIRST_BUCKET_BYTES), bucket_cap_bytes for
 *   the others (25 MiB, DDP's bucket_cap_mb); then the bucket list is reversed,
 *   since the last layers' gradients are ready first. After the first
 *   iteration the buckets are rebuilt once, walking the parameters in the
 *   order their gradients actually became ready on rank 0 (broadcast, so all
 *   ranks agree), with the same two limits: now the small bucket is the first
 *   to go. With the defaults the 235k-parameter MLP (940 KB) is one bucket.
 * - Views: a bucket is a slice of the model's gradient buffer, not a copy:
 *   the reducer lays the gradients out so that each bucket is contiguous
 *   (model_set_grad_layout), as gradient_as_bucket_view=True makes each
 *   .grad a view into its bucket.
 * - Overlap: when the last gradient of a bucket is marked ready during
 *   backward, its all-reduce starts (comm_allreduce_start) while backward
 *   goes on; buckets always start in bucket order, so every rank issues the
 *   same collectives in the same order even if its gradients become ready in
 *   another order (a later bucket that is ready waits for the earlier ones).
 *   reducer_finish() waits for all of them before the optimizer may step.
 * - Averaging: the all-reduce sums (COMM_SUM) and reducer_finish() divides
 *   each element by W afterwards. PyTorch divides each gradient by W before
 *   the sum instead (mark_variable_ready_dense), and NCCL's ncclAvg does the
 *   same. For W a power of two both are exact scalings and give the same
 *   bits. For other W, g/W is rounded once per rank and the rounded parts are
 *   summed, so the result can differ in its last bits from the correctly
 *   rounded sum/W that dividing afterwards gives, and from one backend to
 *   another; dividing after the sum is also what the sim and MPI backends'
 *   COMM_AVG do, so the average's bits do not depend on who divides.
 * - no_sync: reducer_set_sync(r, 0) turns communication off: backward only
 *   accumulates locally (model_backward with accumulate = 1), as inside
 *   PyTorch's no_sync() context, until a backward with sync on reduces the
 *   accumulated gradients.
 * - Compression: compress = FP16 or BF16 is PyTorch's fp16_compress_hook
 *   (bf16_compress_hook): the bucket is rounded to 16 bits and divided by W
 *   there (before the sum, so that it cannot overflow float16's 65504), the
 *   16-bit buffer is all-reduced, and the result widened back into the
 *   gradient slice. Half the bytes cross the network; the gradients lose
 *   precision (float16: 11 significant bits; bfloat16: 8).
 * - broadcast_buffers: before each forward through the DDP wrapper
 *   (reducer_prepare_forward), rank 0's buffers (BatchNorm running
 *   statistics) overwrite every other rank's. It is a collective: a rank that
 *   runs a forward through the wrapper alone (evaluation on rank 0 only)
 *   issues a broadcast the others never issue, which hangs a real job.
 *   num_batches_tracked is not broadcast: every rank counts the same training
 *   forwards, and it only matters for momentum=None, which we do not have.
 *
 * Streams and events, as PyTorch's reducer runs them with NCCL. The
 * gradients are written on the compute stream (the model's); the all-reduces
 * run on a communication stream of the reducer's. When a bucket's last
 * gradient is ready an event is recorded on the compute stream and the
 * communication stream waits for it; when the all-reduce is done an event is
 * recorded on the communication stream and the compute stream waits for it
 * before the average (and the optimizer after it) reads the bucket. A
 * communicator the host drives (the simulator's, MPI) starts once the host
 * has seen the ready event, and its work is marked on the communication
 * stream (device_mark_access), so the simulated device's detector checks
 * both events every step: leave one out (reducer_config.unordered) and it
 * names the bucket's buffer, both streams and the operation.
 *
 * One step (reducer_backward() does the middle three calls):
 *
 *     reducer_prepare_forward(r, 1);                     rebuild once; broadcast buffers
 *     model_forward(m, B, MODEL_TRAIN); model_loss(...);
 *     reducer_prepare_backward(r);
 *     model_backward(m, B, 0, reducer_ready_hook, r);    buckets start as they fill
 *     reducer_finish(r);                                 wait for all, average
 *     optim_step(o, m);
 *
 * Read reducer_open(), then reducer_ready.c (readiness, launch, wait), which
 * is also lab 6.
 */
#ifndef DDP_REDUCER_H
#define DDP_REDUCER_H

#include "comm/comm.h"
#include "ddp/model.h"

#include <stddef.h>
#include <stdint.h>

#define REDUCER_FIRST_BUCKET_BYTES ((size_t)1 << 20) /* torch.distributed._DEFAULT_FIRST_BUCKET_BYTES */
#define REDUCER_BUCKET_CAP_BYTES ((size_t)25 << 20)  /* DistributedDataParallel(bucket_cap_mb=25) */
#define REDUCER_LAYOUT_MAX 4096                      /* longest reducer_layout_describe() text */

enum reducer_compress { REDUCER_COMPRESS_NONE, REDUCER_COMPRESS_FP16, REDUCER_COMPRESS_BF16 };

/* Faults, to watch the simulated device's detector name them: an event the
 * reducer leaves out of its schedule. */
enum {
    REDUCER_UNORDERED_READY = 1,   /* the all-reduce does not wait for its bucket's gradients */
    REDUCER_UNORDERED_REDUCED = 2, /* the compute stream does not wait for the all-reduce */
};

struct reducer_config {
    size_t first_bucket_bytes; /* REDUCER_FIRST_BUCKET_BYTES */
    size_t bucket_cap_bytes;   /* REDUCER_BUCKET_CAP_BYTES */
    int broadcast_buffers;     /* 1, as PyTorch */
    int rebuild_buckets;       /* 1: rebuild once after the first iteration, as PyTorch */
    enum reducer_compress compress;
    unsigned unordered;        /* REDUCER_UNORDERED_*: 0, always, but to break the schedule on purpose */
};

void reducer_config_default(struct reducer_config *c);

/* "none", "fp16", "bf16". 0 or ERR_ARG naming `flag`. */
int reducer_compress_parse(const char *flag, const char *text, enum reducer_compress *out);
const char *reducer_compress_name(enum reducer_compress c);

typedef struct reducer reducer_t;

/* Collective over the world: checks that every rank's model has the same
 * parameters (count, names and shapes; a mismatch fails on every rank with
 * ERR_STATE naming the first rank that differs from rank 0 and the
 * parameter), broadcasts rank 0's parameters and buffers, and builds the
 * first buckets, laying out the model's gradients accordingly. 0, ERR_ARG
 * (bad configuration), ERR_STATE, ERR_NOMEM, or the communicator's error. */
int reducer_open(const struct reducer_config *cfg, comm_t *comm, model_t *m, reducer_t **out);

/* Frees the reducer. Finish (or fail) the last backward first. NULL is a no-op. */
void reducer_close(reducer_t *r);

/* Before each forward through the DDP wrapper. With grad_enabled (a training
 * forward) and the first iteration's order recorded, rebuilds the buckets,
 * once (one broadcast of rank 0's order). Then, with broadcast_buffers and a
 * model that has buffers, broadcasts rank 0's buffers (one collective, in
 * evaluation too, as PyTorch's forward does). 0 or the communicator's error. */
int reducer_prepare_forward(reducer_t *r, int grad_enabled);

/* sync = 0: the following backwards do not communicate (PyTorch's no_sync());
 * 1 (the default): the next backward reduces. */
void reducer_set_sync(reducer_t *r, int sync);

/* Starts an iteration's bookkeeping: every bucket waits for all its
 * gradients again. 0, or ERR_STATE when the previous backward was not
 * finished (all-reduces still in flight). */
int reducer_prepare_backward(reducer_t *r);

/* Parameter `param`'s gradient is final for this backward: when it completes
 * its bucket, that bucket (and any ready ones after it) starts its
 * all-reduce. Without sync it only records the order. 0, or ERR_STATE
 * ("fc1.bias was marked ready twice in this backward"), ERR_ARG (no such
 * parameter), or the communicator's error from the launch. */
int reducer_mark_ready(reducer_t *r, int param);

/* reducer_mark_ready as a model_ready_fn: pass the reducer as `arg`. */
int reducer_ready_hook(void *arg, int param);

/* Waits for every bucket's all-reduce and averages (or widens, with
 * compression) into the gradient buffer: after it, every rank's gradients
 * are the same bits. Without sync it returns at once. 0, ERR_STATE naming
 * the parameters whose gradients never became ready (after waiting for the
 * buckets that did start), or the communicator's error (ERR_TIMEOUT,
 * ERR_PEER, ...). */
int reducer_finish(reducer_t *r);

/* prepare_backward, model_backward(m, batch, accumulate, hook), finish. */
int reducer_backward(reducer_t *r, int batch, int accumulate);

/* ---- what it did, for tests, timelines and the lesson ------------------------ */

struct reducer_bucket_info {
    int nparams;             /* parameters in the bucket ... */
    const int *params;       /* ... their indices, in bucket order */
    size_t offset, count;    /* the slice of the gradient buffer, in floats */
    size_t limit;            /* the size limit it was built under, bytes */
    uint64_t seq;            /* sequence number of its last all-reduce, 0 if none yet */
    uint64_t ready_ns;       /* vclock_now_ns() (base/vclock.h: modelled on the simulator) when its last
                              * gradient became ready */
    uint64_t launch_ns;      /* ... when its all-reduce started */
    uint64_t complete_ns;    /* ... when the all-reduce completed (comm_wait_timed) */
    uint64_t done_ns;        /* ... when reducer_finish's wait for it returned */
};

struct reducer_stats {
    uint64_t iterations;     /* backwards that reduced */
    uint64_t buckets_launched;
    uint64_t bytes_reduced;  /* payload of all all-reduces (16-bit when compressed) */
    uint64_t bytes_saved;    /* payload compression did not send */
    int rebuilt;             /* the buckets were rebuilt (or restored from a layout) */
};

int reducer_bucket_count(const reducer_t *r);
void reducer_bucket_info(const reducer_t *r, int bucket, struct reducer_bucket_info *out);
struct reducer_stats reducer_get_stats(const reducer_t *r);
/* Buckets whose all-reduce was started and not yet waited for. */
int reducer_in_flight(const reducer_t *r);

/* The bucket layout as text, "rebuilt: fc3.bias fc3.weight | fc2.bias ...",
 * for checkpoints: resuming with another layout sums in another order and
 * would not continue bit for bit. Between the first iteration and the next
 * forward it is the layout the due rebuild will make (from this rank's ready
 * order: rank 0's is the one the rebuild broadcasts), since that is the one
 * the next step uses. Returns buf. */
const char *reducer_layout_describe(const reducer_t *r, char *buf, size_t len);
/* Restores a layout described by reducer_layout_describe (every parameter
 * exactly once), marking the buckets rebuilt. Local, not collective: every
 * rank restores the same text. 0 or ERR_FORMAT saying what is wrong. */
int reducer_layout_restore(reducer_t *r, const char *text);

#endif
