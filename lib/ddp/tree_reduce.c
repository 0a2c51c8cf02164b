/* tree_reduce: the world-size-independent all-reduce of --same-bits (see
 * tree_reduce.h): all-gather, then the fixed tree on the device. */
#include "ddp/tree_reduce.h"

#include "base/error.h"
#include "transfer/device_ops.h"
#include "transfer/kernels.h"

#include <stdlib.h>

struct tree_reduce {
    comm_t *comm;
    model_t *m;
    device_t *dev;
    int world;
    size_t floats;  /* the gradient */
    float *gathered; /* device: world x floats */
    float *host;     /* mpi: pinned, world x floats, this rank's slice first copied in */
};

int tree_reduce_open(comm_t *comm, model_t *m, tree_reduce_t **out)
{
    *out = NULL;
    int world = comm_world(comm);
    if (world < 1 || world > KERNEL_TREE_MAX || (world & (world - 1)))
        return err_set(ERR_ARG, "tree_reduce: a world of %d ranks: the fixed tree takes 1, 2, 4 or 8", world);
    tree_reduce_t *t = calloc(1, sizeof *t);
    if (!t)
        return err_set(ERR_NOMEM, "tree_reduce: out of memory");
    *t = (struct tree_reduce){.comm = comm, .m = m, .dev = device_stream_device(model_stream(m)), .world = world,
                              .floats = model_param_floats(m)};
    uint64_t bytes = (uint64_t)world * t->floats * sizeof(float);
    int rc = 0;
    if (world > 1)
        rc = device_malloc(t->dev, bytes, "the gathered gradients", (void **)&t->gathered);
    if (rc == 0 && world > 1 && !comm_reads_device_memory(comm))
        rc = device_host_alloc(t->dev, DEVICE_HOST_PINNED, bytes, "the gathered gradients (host)", (void **)&t->host);
    if (rc < 0) {
        tree_reduce_close(t);
        return rc;
    }
    *out = t;
    return 0;
}

int tree_reduce_run(tree_reduce_t *t)
{
    if (t->world == 1) /* one rank holds every atom: its tree is the whole tree */
        return 0;
    float *grads = model_grads(t->m);
    size_t n = t->floats, rank = (size_t)comm_rank(t->comm);
    int rc = model_sync(t->m); /* backward has written the gradient */
    if (rc == 0 && !t->host)
        rc = comm_allgather(t->comm, grads, t->gathered, n, COMM_FLOAT32);
    else if (rc == 0) { /* a communicator of host memory: through the pinned buffer */
        rc = device_copy(t->dev, t->host + rank * n, grads, n * sizeof(float), DEVICE_D2H);
        if (rc == 0)
            rc = comm_allgather(t->comm, t->host + rank * n, t->host, n, COMM_FLOAT32);
        if (rc == 0)
            rc = device_copy(t->dev, t->gathered, t->host, (uint64_t)t->world * n * sizeof(float), DEVICE_H2D);
    }
    union kernel_args a = {.tree_sum = {.dst = grads, .src = t->gathered, .stride = n, .slices = (uint32_t)t->world}};
    return rc ? rc : device_kernel(model_stream(t->m), KERNEL_tree_sum, n, &a, "the ranks' tree", model_batch_number(t->m));
}

uint64_t tree_reduce_bytes(const tree_reduce_t *t) { return (uint64_t)(t->world - 1) * t->floats * sizeof(float); }

void tree_reduce_close(tree_reduce_t *t)
{
    if (!t)
        return;
    if (t->gathered)
        device_free(t->dev, t->gathered);
    if (t->host)
        device_host_free(t->dev, t->host);
    free(t);
}
