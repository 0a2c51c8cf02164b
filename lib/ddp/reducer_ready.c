/* reducer_ready: the heart of the reducer, run inside every backward. A
 * gradient is marked ready; when that completes its bucket, the bucket's
 * all-reduce starts (buckets strictly in bucket order); before the optimizer
 * steps, every all-reduce is waited for and averaged. Lab 6 has learners
 * write the LAB regions below (labs/06-ddp/README.md).
 *
 * Where it sits: model_backward() calls reducer_ready_hook() for each
 * parameter as its gradient becomes final (lib/ddp/model.h); reducer.c built
 * the buckets (struct reducer_bucket in reducer_impl.h: which parameters, the
 * slice of the gradient buffer they share, how many are still pending).
 *
 * Why strictly in order: the communicator requires every rank to start the
 * same collectives in the same order (lib/comm/comm.h). Gradients may become
 * ready in a different order on different ranks (PyTorch's autograd runs
 * independent branches in any order), so a rank must not start bucket 2
 * before bucket 1 just because bucket 2 filled first: bucket 2 waits, and
 * starts right after bucket 1. Otherwise one rank sums bucket 2 against
 * another rank's bucket 1: garbage, or a fingerprint mismatch, or a hang.
 *
 * Read reducer_mark_ready(), then reducer_finish().
 */
#include "ddp/reducer_impl.h"

#include "base/vclock.h"
#include "base/error.h"

#include <stdio.h>

int reducer_prepare_backward(reducer_t *r)
{
    if (reducer_in_flight(r) > 0)
        return err_set(ERR_STATE, "rank %d: a backward starts while %d all-reduces of the previous one were never "
                                  "waited for (call reducer_finish before the next step)",
                       comm_rank(r->comm), reducer_in_flight(r));
    if (r->ready_order && !r->rebuild_due)
        r->nready = 0; /* record this backward's order afresh: a failed one leaves half an order */
    // LAB:BEGIN prepare
    /* A new backward: every bucket waits for all its gradients again. */
    for (int b = 0; b < r->nbuckets; b++)
        r->buckets[b].pending = r->buckets[b].nparams;
    for (int p = 0; p < r->nparams; p++)
        r->marked[p] = 0;
    r->next_bucket = 0;
    // LAB:STUB return LAB_TODO("prepare");
    // LAB:END
    r->in_backward = 1;
    return 0;
}

/* Starts every bucket that is full, in bucket order, stopping at the first
 * one that still waits for a gradient. */
static int reducer_launch_ready(reducer_t *r)
{
    // LAB:BEGIN launch-in-order
    while (r->next_bucket < r->nbuckets && r->buckets[r->next_bucket].pending == 0) {
        int rc = reducer_bucket_launch(r, r->next_bucket);
        if (rc < 0)
            return rc;
        r->next_bucket++;
    }
    return 0;
    // LAB:STUB return LAB_TODO("launch-in-order");
    // LAB:END
}

int reducer_mark_ready(reducer_t *r, int p)
{
    if (p < 0 || p >= r->nparams)
        return err_set(ERR_ARG, "rank %d: parameter %d marked ready: the model has %d", comm_rank(r->comm), p,
                       r->nparams);
    if (!r->in_backward)
        return err_set(ERR_STATE, "rank %d: %s marked ready outside a backward (call reducer_prepare_backward "
                                  "first)", comm_rank(r->comm), model_param(r->model, p)->name);
    /* the first reducing backward's order, for the rebuild (reducer.c) */
    if (r->sync && r->ready_order && !r->marked[p] && r->nready < r->nparams)
        r->ready_order[r->nready++] = p;
    // LAB:BEGIN mark-ready
    if (r->marked[p])
        return err_set(ERR_STATE, "rank %d: %s was marked ready twice in this backward", comm_rank(r->comm),
                       model_param(r->model, p)->name);
    r->marked[p] = 1;
    if (!r->sync)
        return 0; /* no_sync: the gradient only accumulates locally */
    struct reducer_bucket *bk = &r->buckets[r->bucket_of[p]];
    if (--bk->pending > 0)
        return 0;
    bk->ready_ns = vclock_now_ns();
    return reducer_launch_ready(r);
    // LAB:STUB return LAB_TODO("mark-ready");
    // LAB:END
}

int reducer_ready_hook(void *arg, int param) { return reducer_mark_ready(arg, param); }

int reducer_bucket_launch(reducer_t *r, int b)
{
    struct reducer_bucket *bk = &r->buckets[b];
    /* the communicator reads the bucket's gradients next (compressed: its 16-bit copy, whose
     * kernel orders itself the same way, reducer_bucket_compress) */
    int ordered = r->cfg.compress == REDUCER_COMPRESS_NONE ? reducer_comm_begin(r, bk) : 0;
    if (ordered < 0)
        return ordered;
    bk->seq = comm_next_seq(r->comm);
    bk->launch_ns = vclock_now_ns();
    // LAB:BEGIN launch
    /* The bucket's all-reduce, in place on its slice of the gradient buffer
     * (or on its 16-bit copy, compressed), summing: the average is taken
     * after the wait. reducer_comm_buffer says where the communicator finds
     * it: the device buffer itself, or its copy in pinned host memory. */
    int rc;
    if (r->cfg.compress == REDUCER_COMPRESS_NONE) {
        void *slice = reducer_comm_buffer(r, bk);
        rc = comm_allreduce_start(r->comm, slice, slice, bk->count, COMM_FLOAT32, COMM_SUM, &bk->req);
    } else {
        reducer_bucket_compress(r, bk);
        void *half = reducer_comm_buffer(r, bk);
        enum comm_dtype t = r->cfg.compress == REDUCER_COMPRESS_FP16 ? COMM_FLOAT16 : COMM_BFLOAT16;
        rc = comm_allreduce_start(r->comm, half, half, bk->count, t, COMM_SUM, &bk->req);
    }
    if (rc < 0)
        return rc;
    // LAB:STUB return LAB_TODO("launch");
    // LAB:END
    size_t full = bk->count * sizeof(float);
    size_t sent = r->cfg.compress == REDUCER_COMPRESS_NONE ? full : bk->count * sizeof(uint16_t);
    r->stats.buckets_launched++;
    r->stats.bytes_reduced += sent;
    r->stats.bytes_saved += full - sent;
    return 0;
}

/* Waits for bucket b's all-reduce if it has one in flight; 0 or its error. */
static int reducer_bucket_wait(reducer_t *r, int b)
{
    struct reducer_bucket *bk = &r->buckets[b];
    if (!bk->req)
        return 0;
    int rc = comm_wait_timed(bk->req, &bk->complete_ns);
    bk->req = NULL;
    bk->done_ns = vclock_now_ns();
    if (rc == 0) /* the compute stream reads the result only after this */
        rc = reducer_comm_end(r, bk);
    return rc;
}

int reducer_finish(reducer_t *r)
{
    if (!r->in_backward)
        return err_set(ERR_STATE, "rank %d: reducer_finish without reducer_prepare_backward", comm_rank(r->comm));
    r->in_backward = 0;
    if (!r->sync)
        return 0;
    int rc = 0;
    // LAB:BEGIN wait-all
    /* Every started bucket is waited for and averaged before the optimizer
     * may read the gradients, even after an error, so nothing stays in
     * flight. */
    for (int b = 0; b < r->nbuckets; b++) {
        int launched = r->buckets[b].req != NULL;
        int w = reducer_bucket_wait(r, b);
        if (w < 0 && rc == 0)
            rc = w;
        if (w == 0 && launched)
            reducer_bucket_average(r, &r->buckets[b]);
    }
    if (rc == 0 && r->next_bucket < r->nbuckets) {
        char names[512];
        rc = err_set(ERR_STATE, "rank %d: backward ended with %d of %d buckets never started: no gradient was "
                                "marked ready for %s",
                     comm_rank(r->comm), r->nbuckets - r->next_bucket, r->nbuckets,
                     reducer_unready_names(r, names, sizeof names));
    }
    // LAB:STUB return LAB_TODO("wait-all");
    // LAB:END
    if (rc == 0 && r->device_rc < 0)
        rc = r->device_rc;
    r->device_rc = 0;
    if (rc == 0) {
        r->stats.iterations++;
        if (r->ready_order && r->nready == r->nparams)
            r->rebuild_due = 1;
    }
    return rc;
}
