/* Lab file generated from lib/ddp/reducer_ready.c by labs/labgen.awk: write the LAB regions (see labs/06-ddp/README.md). */
#include "lab_todo.h"
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
    /* LAB prepare: your code here (see labs/06-ddp/README.md). */
    return LAB_TODO("prepare");
    r->in_backward = 1;
    return 0;
}

/* Starts every bucket that is full, in bucket order, stopping at the first
 * one that still waits for a gradient. */
static int reducer_launch_ready(reducer_t *r)
{
    /* LAB launch-in-order: your code here (see labs/06-ddp/README.md). */
    return LAB_TODO("launch-in-order");
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
    /* LAB mark-ready: your code here (see labs/06-ddp/README.md). */
    return LAB_TODO("mark-ready");
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
    /* LAB launch: your code here (see labs/06-ddp/README.md). */
    return LAB_TODO("launch");
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
    /* LAB wait-all: your code here (see labs/06-ddp/README.md). */
    return LAB_TODO("wait-all");
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
