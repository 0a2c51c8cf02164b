/* reducer: everything around the per-backward logic of reducer_ready.c (see
 * reducer.h): the shape check and broadcasts at open, PyTorch's bucket
 * assignment and the one rebuild, the gradient layout that makes each bucket
 * a slice, the buffer broadcast before forward, compression, and the layout
 * text checkpoints keep. Read reducer_open(), then reducer_assign(). */
#include "ddp/reducer_impl.h"

#include "base/error.h"
#include "transfer/device_ops.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void reducer_config_default(struct reducer_config *c)
{
    memset(c, 0, sizeof *c);
    c->first_bucket_bytes = REDUCER_FIRST_BUCKET_BYTES;
    c->bucket_cap_bytes = REDUCER_BUCKET_CAP_BYTES;
    c->broadcast_buffers = 1;
    c->rebuild_buckets = 1;
    c->compress = REDUCER_COMPRESS_NONE;
}

static const char *const reducer_compress_names[] = {"none", "fp16", "bf16"};

const char *reducer_compress_name(enum reducer_compress c)
{
    return (unsigned)c < 3 ? reducer_compress_names[c] : "invalid";
}

int reducer_compress_parse(const char *flag, const char *text, enum reducer_compress *out)
{
    for (int i = 0; i < 3; i++)
        if (strcmp(text, reducer_compress_names[i]) == 0) {
            *out = (enum reducer_compress)i;
            return 0;
        }
    return err_set(ERR_ARG, "%s=%s: unknown compression (none, fp16, bf16)", flag, text);
}

/* ---- buckets ---------------------------------------------------------------------------- */

static void reducer_free_buckets(reducer_t *r)
{
    device_t *dev = device_stream_device(model_stream(r->model));
    for (int b = 0; b < r->nbuckets; b++) {
        free(r->buckets[b].params);
        device_free(dev, r->buckets[b].half);
    }
    free(r->buckets);
    r->buckets = NULL;
    r->nbuckets = 0;
}

/* Makes the buckets `groups` (parameter indices, bucket after bucket; group g
 * is params[start[g] .. start[g+1])) the reducer's, and lays the gradients
 * out in that order so each bucket is one slice. 0, ERR_NOMEM. */
static int reducer_set_buckets(reducer_t *r, const int *params, const int *start, int ngroups, const size_t *limits)
{
    device_t *dev = device_stream_device(model_stream(r->model));
    struct reducer_bucket *nb = calloc((size_t)ngroups, sizeof *nb);
    size_t *offsets = calloc((size_t)r->nparams, sizeof *offsets);
    int rc = nb && offsets ? 0 : err_set(ERR_NOMEM, "reducer: out of memory for %d buckets", ngroups);
    size_t off = 0;
    for (int g = 0; rc == 0 && g < ngroups; g++) {
        struct reducer_bucket *bk = &nb[g];
        bk->nparams = start[g + 1] - start[g];
        bk->offset = off;
        bk->limit = limits[g];
        if (!(bk->params = malloc((size_t)bk->nparams * sizeof *bk->params))) {
            rc = err_set(ERR_NOMEM, "reducer: out of memory for bucket %d", g);
            break;
        }
        for (int k = 0; k < bk->nparams; k++) {
            int p = params[start[g] + k];
            bk->params[k] = p;
            offsets[p] = off;
            off += model_param(r->model, p)->numel;
        }
        bk->count = off - bk->offset;
        if (r->cfg.compress != REDUCER_COMPRESS_NONE &&
            (rc = device_malloc(dev, (bk->count ? bk->count : 1) * 2, "a bucket's 16-bit copy", (void **)&bk->half)) < 0)
            break;
    }
    if (rc == 0)
        rc = model_set_grad_layout(r->model, offsets);
    free(offsets);
    if (rc < 0) {
        for (int g = 0; nb && g < ngroups; g++) {
            free(nb[g].params);
            device_free(dev, nb[g].half);
        }
        free(nb);
        return rc;
    }
    reducer_free_buckets(r);
    r->buckets = nb;
    r->nbuckets = ngroups;
    for (int b = 0; b < ngroups; b++)
        for (int k = 0; k < nb[b].nparams; k++)
            r->bucket_of[nb[b].params[k]] = b;
    return 0;
}

/* PyTorch's compute_bucket_assignment_by_size (reducer.cpp), for one dtype
 * and device: walk the parameters in `order`, adding each gradient's bytes to
 * the open bucket, and close the bucket as soon as it holds at least its
 * limit: limits[0] for the first bucket, limits[1] for every later one. A
 * bucket can therefore exceed its limit by its last gradient. Fills start[]
 * (ngroups + 1 entries) and each group's limit; returns ngroups. */
static int reducer_assign(const reducer_t *r, const int *order, int *start, size_t *limits)
{
    int ngroups = 0;
    size_t bytes = 0, limit = r->cfg.first_bucket_bytes;
    start[0] = 0;
    for (int k = 0; k < r->nparams; k++) {
        bytes += model_param(r->model, order[k])->numel * sizeof(float);
        if (bytes >= limit) {
            limits[ngroups] = limit;
            start[++ngroups] = k + 1;
            bytes = 0;
            limit = r->cfg.bucket_cap_bytes;
        }
    }
    if (start[ngroups] < r->nparams) {
        limits[ngroups] = limit;
        start[++ngroups] = r->nparams;
    }
    return ngroups;
}

/* The first buckets, as DistributedDataParallel builds them: assigned in
 * definition order (so the small first bucket holds the first layers), then
 * the list reversed (distributed.py: "reverse list of buckets because we want
 * to approximate the order in which their gradients are produced"). Inside
 * a bucket the parameters keep definition order. */
static int reducer_initial_buckets(reducer_t *r)
{
    int n = r->nparams;
    int *order = malloc((size_t)n * sizeof *order), *start = malloc((size_t)(n + 1) * sizeof *start);
    int *params = malloc((size_t)n * sizeof *params), *rstart = malloc((size_t)(n + 1) * sizeof *rstart);
    size_t *limits = malloc((size_t)n * sizeof *limits), *rlimits = malloc((size_t)n * sizeof *rlimits);
    int rc = order && start && params && rstart && limits && rlimits ? 0
                                                                     : err_set(ERR_NOMEM, "reducer: out of memory");
    if (rc == 0) {
        for (int k = 0; k < n; k++)
            order[k] = k;
        int g = reducer_assign(r, order, start, limits), k = 0;
        rstart[0] = 0;
        for (int i = 0; i < g; i++) { /* group g-1-i becomes bucket i */
            int src = g - 1 - i;
            for (int j = start[src]; j < start[src + 1]; j++)
                params[k++] = order[j];
            rstart[i + 1] = k;
            rlimits[i] = limits[src];
        }
        rc = reducer_set_buckets(r, params, rstart, g, rlimits);
    }
    free(order);
    free(start);
    free(params);
    free(rstart);
    free(limits);
    free(rlimits);
    return rc;
}

/* The rebuild: buckets assigned walking `order` (the ready order), kept in
 * that order (PyTorch passes tensor_indices, so it does not sort). */
static int reducer_buckets_from_order(reducer_t *r, const int *order)
{
    int *start = malloc((size_t)(r->nparams + 1) * sizeof *start);
    size_t *limits = malloc((size_t)r->nparams * sizeof *limits);
    int rc = start && limits ? 0 : err_set(ERR_NOMEM, "reducer: out of memory");
    if (rc == 0)
        rc = reducer_set_buckets(r, order, start, reducer_assign(r, order, start, limits), limits);
    free(start);
    free(limits);
    return rc;
}

/* A broadcast from rank 0 of `count` floats of the model's device memory at
 * dev, once the model's stream has written them: in place, or through the
 * pinned staging memory for a host-memory communicator. */
static int reducer_broadcast_floats(reducer_t *r, float *dev, size_t count)
{
    device_t *d = device_stream_device(model_stream(r->model));
    int rc = model_sync(r->model);
    if (rc < 0 || count == 0)
        return rc;
    if (!r->staging)
        return comm_broadcast(r->comm, dev, count, COMM_FLOAT32, 0);
    if ((rc = device_stream_synchronize(r->comm_stream)) == 0 && /* its last copies out of staging are done */
        (rc = device_copy(d, r->staging, dev, count * sizeof(float), DEVICE_D2H)) == 0 &&
        (rc = comm_broadcast(r->comm, r->staging, count, COMM_FLOAT32, 0)) == 0)
        rc = device_copy(d, dev, r->staging, count * sizeof(float), DEVICE_H2D);
    return rc;
}

/* ---- open: the shape check and the broadcasts -------------------------------------------- */

/* What each rank tells the others about one parameter (int64 words, so one
 * all-gather carries it on every backend). */
enum { RD_INDEX, RD_NDIM, RD_DIM0, RD_DIM1, RD_NAME, RD_WORDS = RD_NAME + MODEL_NAME_MAX / 8 };

static void reducer_describe_param(const model_t *m, int p, int64_t *w)
{
    const struct model_tensor *t = model_param(m, p);
    memset(w, 0, RD_WORDS * sizeof *w);
    w[RD_INDEX] = p;
    w[RD_NDIM] = t->ndim;
    w[RD_DIM0] = t->shape[0];
    w[RD_DIM1] = t->ndim > 1 ? t->shape[1] : 0;
    memcpy(&w[RD_NAME], t->name, MODEL_NAME_MAX - 1);
}

static const char *reducer_shape_text(const int64_t *w, char *buf, size_t len)
{
    char name[MODEL_NAME_MAX];
    memcpy(name, &w[RD_NAME], MODEL_NAME_MAX);
    name[MODEL_NAME_MAX - 1] = '\0';
    if (w[RD_NDIM] > 1)
        snprintf(buf, len, "%s [%lld, %lld]", name, (long long)w[RD_DIM0], (long long)w[RD_DIM1]);
    else
        snprintf(buf, len, "%s [%lld]", name, (long long)w[RD_DIM0]);
    return buf;
}

/* DDP's _verify_param_shape_across_processes, made to fail on every rank
 * alike: all-gather the parameter counts; broadcast rank 0's descriptions;
 * each rank compares with its own and all-gathers its first difference, so
 * every rank can name the same rank and parameter instead of the others
 * walking into a broadcast of the wrong size. */
static int reducer_check_shapes(reducer_t *r)
{
    int W = r->world, rank = comm_rank(r->comm), n = r->nparams, rc;
    int64_t mine = n, *counts = calloc((size_t)W, sizeof *counts);
    int64_t *desc = calloc((size_t)n * RD_WORDS, sizeof *desc), *diff = calloc((size_t)W * RD_WORDS, sizeof *diff);
    int64_t own[RD_WORDS];
    if (!counts || !desc || !diff) {
        rc = err_set(ERR_NOMEM, "reducer: out of memory");
        goto out;
    }
    if ((rc = comm_allgather(r->comm, &mine, counts, 1, COMM_INT64)) < 0)
        goto out;
    for (int q = 1; q < W; q++)
        if (counts[q] != counts[0]) {
            rc = err_set(ERR_STATE, "rank %d: DDP needs the same model on every rank, but rank %d has %lld "
                                    "parameters and rank 0 has %lld", rank, q, (long long)counts[q],
                         (long long)counts[0]);
            goto out;
        }
    for (int p = 0; p < n; p++)
        reducer_describe_param(r->model, p, desc + (size_t)p * RD_WORDS);
    if ((rc = comm_broadcast(r->comm, desc, (size_t)n * RD_WORDS, COMM_INT64, 0)) < 0)
        goto out;
    int64_t first[RD_WORDS] = {-1};
    for (int p = 0; p < n && first[RD_INDEX] < 0; p++) {
        reducer_describe_param(r->model, p, own);
        if (memcmp(own, desc + (size_t)p * RD_WORDS, sizeof own) != 0)
            memcpy(first, own, sizeof own);
    }
    if ((rc = comm_allgather(r->comm, first, diff, RD_WORDS, COMM_INT64)) < 0)
        goto out;
    for (int q = 1; q < W; q++) {
        const int64_t *d = diff + (size_t)q * RD_WORDS;
        if (d[RD_INDEX] < 0)
            continue;
        char theirs[96], zero[96];
        rc = err_set(ERR_STATE, "rank %d: DDP needs the same model on every rank, but parameter %lld differs: rank "
                                "%d has %s, rank 0 has %s", rank, (long long)d[RD_INDEX], q,
                     reducer_shape_text(d, theirs, sizeof theirs),
                     reducer_shape_text(desc + (size_t)d[RD_INDEX] * RD_WORDS, zero, sizeof zero));
        goto out;
    }
out:
    free(counts);
    free(desc);
    free(diff);
    return rc;
}

int reducer_open(const struct reducer_config *cfg, comm_t *comm, model_t *m, reducer_t **out)
{
    *out = NULL;
    if (cfg->first_bucket_bytes == 0 || cfg->bucket_cap_bytes == 0)
        return err_set(ERR_ARG, "reducer: bucket limits must be positive (first %zu bytes, cap %zu bytes)",
                       cfg->first_bucket_bytes, cfg->bucket_cap_bytes);
    if ((unsigned)cfg->compress > REDUCER_COMPRESS_BF16)
        return err_set(ERR_ARG, "reducer: unknown compression %d", (int)cfg->compress);
    reducer_t *r = calloc(1, sizeof *r);
    if (!r)
        return err_set(ERR_NOMEM, "reducer: out of memory");
    r->cfg = *cfg;
    r->comm = comm;
    r->model = m;
    r->world = comm_world(comm);
    r->nparams = model_param_tensors(m);
    r->sync = 1;
    int rc = 0;
    r->bucket_of = calloc((size_t)r->nparams, sizeof *r->bucket_of);
    r->marked = calloc((size_t)r->nparams, 1);
    r->ready = calloc((size_t)r->nparams, sizeof *r->ready);
    r->reduced = calloc((size_t)r->nparams, sizeof *r->reduced);
    if (cfg->rebuild_buckets)
        r->ready_order = calloc((size_t)r->nparams, sizeof *r->ready_order);
    if (!r->bucket_of || !r->marked || !r->ready || !r->reduced || (cfg->rebuild_buckets && !r->ready_order))
        rc = err_set(ERR_NOMEM, "reducer: out of memory");
    device_t *dev = device_stream_device(model_stream(m));
    if (rc == 0)
        rc = device_stream_create(dev, "communication", &r->comm_stream);
    for (int b = 0; rc == 0 && b < r->nparams; b++)
        if ((rc = device_event_create(dev, &r->ready[b])) == 0)
            rc = device_event_create(dev, &r->reduced[b]);
    if (rc == 0)
        rc = reducer_check_shapes(r);
    size_t most = model_param_floats(m) > model_buffer_floats(m) ? model_param_floats(m) : model_buffer_floats(m);
    if (rc == 0 && !comm_reads_device_memory(comm) && /* MPI: every bucket and broadcast through pinned memory */
        (rc = device_host_alloc(dev, DEVICE_HOST_PINNED, (most ? most : 1) * sizeof(float), "reducer staging",
                                &r->staging)) == 0)
        rc = device_event_create(dev, &r->staged);
    /* _sync_module_states: rank 0's parameters and buffers everywhere */
    if (rc == 0)
        rc = reducer_broadcast_floats(r, model_params(m), model_param_floats(m));
    if (rc == 0)
        rc = reducer_broadcast_floats(r, model_buffers(m), model_buffer_floats(m));
    if (rc == 0)
        rc = reducer_initial_buckets(r);
    if (rc < 0) {
        reducer_close(r);
        return rc;
    }
    *out = r;
    return 0;
}

void reducer_close(reducer_t *r)
{
    if (!r)
        return;
    for (int b = 0; b < r->nbuckets; b++) /* a failed step may leave some in flight */
        if (r->buckets[b].req)
            comm_wait(r->buckets[b].req);
    if (r->comm_stream)
        device_stream_synchronize(r->comm_stream);
    reducer_free_buckets(r);
    for (int b = 0; b < r->nparams && r->ready; b++)
        device_event_destroy(r->ready[b]);
    for (int b = 0; b < r->nparams && r->reduced; b++)
        device_event_destroy(r->reduced[b]);
    device_stream_destroy(r->comm_stream);
    device_event_destroy(r->staged);
    if (r->staging)
        device_host_free(device_stream_device(model_stream(r->model)), r->staging);
    free(r->ready);
    free(r->reduced);
    free(r->bucket_of);
    free(r->marked);
    free(r->ready_order);
    free(r);
}

/* ---- forward, sync, the one-call backward ----------------------------------------------- */

int reducer_prepare_forward(reducer_t *r, int grad_enabled)
{
    int rc;
    if (grad_enabled && r->rebuild_due) {
        /* rank 0's ready order decides, so every rank builds the same buckets
         * (PyTorch's sync_bucket_indices) */
        int32_t *order = malloc((size_t)r->nparams * sizeof *order);
        int *as_int = malloc((size_t)r->nparams * sizeof *as_int);
        unsigned char *seen = calloc((size_t)r->nparams, 1);
        rc = order && as_int && seen ? 0 : err_set(ERR_NOMEM, "reducer: out of memory");
        for (int k = 0; rc == 0 && k < r->nparams; k++)
            order[k] = r->ready_order[k];
        if (rc == 0)
            rc = comm_broadcast(r->comm, order, (size_t)r->nparams, COMM_INT32, 0);
        for (int k = 0; rc == 0 && k < r->nparams; k++) {
            if (order[k] < 0 || order[k] >= r->nparams || seen[order[k]])
                rc = err_set(ERR_STATE, "rank %d: rank 0's gradient ready order is not a permutation of the "
                                        "parameters (entry %d is %d)", comm_rank(r->comm), k, (int)order[k]);
            else
                seen[order[k]] = 1;
            as_int[k] = order[k];
        }
        if (rc == 0)
            rc = reducer_buckets_from_order(r, as_int);
        free(order);
        free(as_int);
        free(seen);
        if (rc < 0)
            return rc;
        free(r->ready_order);
        r->ready_order = NULL;
        r->rebuild_due = 0;
        r->stats.rebuilt = 1;
    }
    if (!r->cfg.broadcast_buffers || model_buffer_floats(r->model) == 0)
        return 0;
    return reducer_broadcast_floats(r, model_buffers(r->model), model_buffer_floats(r->model));
}

void reducer_set_sync(reducer_t *r, int sync) { r->sync = sync != 0; }

int reducer_backward(reducer_t *r, int batch, int accumulate)
{
    int rc = reducer_prepare_backward(r);
    if (rc < 0)
        return rc;
    rc = model_backward(r->model, batch, accumulate, reducer_ready_hook, r);
    if (rc < 0) {
        /* wait for what did start, keep the backward's message */
        char msg[1024];
        snprintf(msg, sizeof msg, "%s", err_msg());
        reducer_finish(r);
        return err_set(rc, "%s", msg);
    }
    return reducer_finish(r);
}

/* ---- the all-reduce's two ends ------------------------------------------------------------ */

static void reducer_keep_error(reducer_t *r, int rc)
{
    if (rc < 0 && r->device_rc == 0)
        r->device_rc = rc;
}

/* A kernel of the reducer's on the model's stream; a failure is kept for
 * reducer_finish to report (the lab's calls have no error to return). */
static void reducer_kernel(reducer_t *r, enum kernel_id id, uint64_t n, const union kernel_args *a, const char *name)
{
    if (n)
        reducer_keep_error(r, device_kernel(model_stream(r->model), id, n, a, name, model_batch_number(r->model)));
}

/* ---- the streams and events of an all-reduce --------------------------------------------- */

/* The memory bucket bk's all-reduce reads and writes. */
static struct device_span reducer_comm_span(const reducer_t *r, struct reducer_bucket *bk)
{
    if (r->cfg.compress != REDUCER_COMPRESS_NONE)
        return (struct device_span){bk->half, bk->count * sizeof(uint16_t)};
    return (struct device_span){model_grads(r->model) + bk->offset, bk->count * sizeof(float)};
}

static int reducer_bucket_index(const reducer_t *r, const struct reducer_bucket *bk)
{
    return (int)(bk - r->buckets);
}

void *reducer_comm_buffer(reducer_t *r, struct reducer_bucket *bk)
{
    if (r->staging)
        return (float *)r->staging + bk->offset; /* the 16-bit copy fits in the float slot */
    return (void *)reducer_comm_span(r, bk).ptr;
}

int reducer_comm_begin(reducer_t *r, struct reducer_bucket *bk)
{
    int b = reducer_bucket_index(r, bk);
    struct device_span span = reducer_comm_span(r, bk);
    int rc = device_event_record(r->ready[b], model_stream(r->model));
    if (rc == 0 && !(r->cfg.unordered & REDUCER_UNORDERED_READY))
        rc = device_stream_wait_event(r->comm_stream, r->ready[b]);
    /* queued before the host's wait below, which would order them whatever the events say */
    if (rc == 0 && r->staging) { /* MPI: the bucket copied to pinned host memory, on the communication stream */
        rc = device_copy_async(r->comm_stream, reducer_comm_buffer(r, bk), span.ptr, span.bytes, DEVICE_D2H,
                               model_batch_number(r->model));
        if (rc == 0)
            rc = device_event_record(r->staged, r->comm_stream);
        return rc ? rc : device_event_synchronize(r->staged);
    }
    if (rc == 0)
        rc = device_mark_access(r->comm_stream, "all-reduce", model_batch_number(r->model), &span, &span);
    if (rc == 0)
        rc = device_event_synchronize(r->ready[b]);
    return rc;
}

int reducer_comm_end(reducer_t *r, struct reducer_bucket *bk)
{
    int b = reducer_bucket_index(r, bk);
    struct device_span span = reducer_comm_span(r, bk);
    int rc = r->staging ? device_copy_async(r->comm_stream, (void *)span.ptr, reducer_comm_buffer(r, bk), span.bytes,
                                            DEVICE_H2D, model_batch_number(r->model))
                        : device_mark_access(r->comm_stream, "all-reduce result", model_batch_number(r->model), NULL,
                                             &span);
    if (rc == 0)
        rc = device_event_record(r->reduced[b], r->comm_stream);
    if (rc == 0 && !(r->cfg.unordered & REDUCER_UNORDERED_REDUCED))
        rc = device_stream_wait_event(model_stream(r->model), r->reduced[b]);
    return rc;
}

void reducer_bucket_compress(reducer_t *r, struct reducer_bucket *bk)
{
    union kernel_args a = {.pack16 = {.h = bk->half, .g = model_grads(r->model) + bk->offset, .w = (float)r->world,
                                      .bf16 = r->cfg.compress == REDUCER_COMPRESS_BF16}};
    reducer_kernel(r, KERNEL_pack16, bk->count, &a, "compress a bucket");
    reducer_keep_error(r, reducer_comm_begin(r, bk)); /* the communicator reads the 16-bit copy next */
}

void reducer_bucket_average(reducer_t *r, struct reducer_bucket *bk)
{
    float *g = model_grads(r->model) + bk->offset;
    union kernel_args a;
    if (r->cfg.compress == REDUCER_COMPRESS_NONE) {
        a.divide = (struct kernel_divide){.x = g, .w = (float)r->world};
        reducer_kernel(r, KERNEL_divide, bk->count, &a, "average a bucket");
    } else {
        a.unpack16 = (struct kernel_unpack16){.g = g, .h = bk->half, .bf16 = r->cfg.compress == REDUCER_COMPRESS_BF16};
        reducer_kernel(r, KERNEL_unpack16, bk->count, &a, "widen a bucket");
    }
}

const char *reducer_unready_names(const reducer_t *r, char *buf, size_t len)
{
    size_t n = 0;
    buf[0] = '\0';
    for (int p = 0; p < r->nparams && n < len; p++)
        if (!r->marked[p])
            n += (size_t)snprintf(buf + n, len - n, "%s%s", n ? ", " : "", model_param(r->model, p)->name);
    return buf;
}

/* ---- what it did ------------------------------------------------------------------------------ */

int reducer_bucket_count(const reducer_t *r) { return r->nbuckets; }
struct reducer_stats reducer_get_stats(const reducer_t *r) { return r->stats; }

void reducer_bucket_info(const reducer_t *r, int b, struct reducer_bucket_info *out)
{
    const struct reducer_bucket *bk = &r->buckets[b];
    *out = (struct reducer_bucket_info){.nparams = bk->nparams, .params = bk->params, .offset = bk->offset,
                                        .count = bk->count, .limit = bk->limit, .seq = bk->seq,
                                        .ready_ns = bk->ready_ns, .launch_ns = bk->launch_ns, .complete_ns = bk->complete_ns,
                                        .done_ns = bk->done_ns};
}

int reducer_in_flight(const reducer_t *r)
{
    int n = 0;
    for (int b = 0; b < r->nbuckets; b++)
        n += r->buckets[b].req != NULL;
    return n;
}

/* The layout the pending rebuild will make from this rank's ready order (on
 * rank 0, the order its broadcast will carry), as reducer_layout_describe
 * writes it. Returns buf, or NULL when out of memory. */
static const char *reducer_describe_pending(const reducer_t *r, char *buf, size_t len)
{
    int *start = malloc((size_t)(r->nparams + 1) * sizeof *start);
    size_t *limits = malloc((size_t)r->nparams * sizeof *limits);
    const char *out = NULL;
    if (start && limits) {
        int g = reducer_assign(r, r->ready_order, start, limits);
        size_t n = (size_t)snprintf(buf, len, "rebuilt:");
        for (int b = 0; b < g && n < len; b++) {
            if (b)
                n += (size_t)snprintf(buf + n, len - n, " |");
            for (int k = start[b]; k < start[b + 1] && n < len; k++)
                n += (size_t)snprintf(buf + n, len - n, " %s", model_param(r->model, r->ready_order[k])->name);
        }
        out = buf;
    }
    free(start);
    free(limits);
    return out;
}

const char *reducer_layout_describe(const reducer_t *r, char *buf, size_t len)
{
    /* Between the first iteration and the next forward the rebuild is due:
     * what follows (and what a checkpoint must restore) is the rebuilt layout. */
    if (r->rebuild_due && r->ready_order && reducer_describe_pending(r, buf, len))
        return buf;
    size_t n = (size_t)snprintf(buf, len, "%s:", r->stats.rebuilt ? "rebuilt" : "initial");
    for (int b = 0; b < r->nbuckets && n < len; b++) {
        if (b)
            n += (size_t)snprintf(buf + n, len - n, " |");
        for (int k = 0; k < r->buckets[b].nparams && n < len; k++)
            n += (size_t)snprintf(buf + n, len - n, " %s", model_param(r->model, r->buckets[b].params[k])->name);
    }
    return buf;
}

int reducer_layout_restore(reducer_t *r, const char *text)
{
    if (r->in_backward)
        return err_set(ERR_STATE, "bucket layout: cannot change inside a backward");
    int n = r->nparams, rebuilt;
    if (strncmp(text, "rebuilt:", 8) == 0)
        rebuilt = 1;
    else if (strncmp(text, "initial:", 8) == 0)
        rebuilt = 0;
    else
        return err_set(ERR_FORMAT, "bucket layout \"%.40s\": does not start with \"rebuilt:\" or \"initial:\"", text);
    int *params = malloc((size_t)n * sizeof *params), *start = malloc((size_t)(n + 1) * sizeof *start);
    size_t *limits = malloc((size_t)n * sizeof *limits);
    unsigned char *seen = calloc((size_t)n, 1);
    int rc = params && start && limits && seen ? 0 : err_set(ERR_NOMEM, "reducer: out of memory");
    int k = 0, g = 0;
    const char *p = text + 8;
    if (rc == 0)
        start[0] = 0;
    while (rc == 0 && *p) {
        while (*p == ' ')
            p++;
        size_t len = strcspn(p, " |");
        if (*p == '|' || *p == '\0') {
            if (k == start[g])
                rc = err_set(ERR_FORMAT, "bucket layout: bucket %d is empty", g);
            else if (g < n) {
                limits[g] = g ? r->cfg.bucket_cap_bytes : r->cfg.first_bucket_bytes;
                start[++g] = k;
            }
            if (*p)
                p++;
            continue;
        }
        char name[MODEL_NAME_MAX];
        int idx = len < sizeof name ? (memcpy(name, p, len), name[len] = '\0', model_param_find(r->model, name)) : -1;
        if (idx < 0)
            rc = err_set(ERR_FORMAT, "bucket layout: \"%.*s\" is not a parameter of this model", (int)len, p);
        else if (seen[idx])
            rc = err_set(ERR_FORMAT, "bucket layout: %s appears twice", name);
        else {
            seen[idx] = 1;
            params[k++] = idx;
        }
        p += len;
    }
    if (rc == 0 && k > start[g]) {
        limits[g] = g ? r->cfg.bucket_cap_bytes : r->cfg.first_bucket_bytes;
        start[++g] = k;
    }
    for (int q = 0; rc == 0 && q < n; q++)
        if (!seen[q])
            rc = err_set(ERR_FORMAT, "bucket layout: %s is in no bucket", model_param(r->model, q)->name);
    if (rc == 0)
        rc = reducer_set_buckets(r, params, start, g, limits);
    if (rc == 0 && rebuilt) { /* final: no rebuild after this one */
        free(r->ready_order);
        r->ready_order = NULL;
        r->rebuild_due = 0;
        r->stats.rebuilt = 1;
    }
    free(params);
    free(start);
    free(limits);
    free(seen);
    return rc;
}
