/* device_ops: the front of the device's compute (see device_ops.h): argument
 * checks, the memory each operation touches, counts, dispatch to the
 * backend's run(). Nothing here computes. Read device_kernel_spans(): it is
 * what the simulated device's detector checks every operation against. */
#include "transfer/device_ops.h"

#include "base/error.h"
#include "transfer/device_backend.h"

#include <string.h>

#define DEVICE_KERNEL_NAME(name) #name,
static const char *const device_kernel_names[] = {KERNEL_LIST(DEVICE_KERNEL_NAME)};
#undef DEVICE_KERNEL_NAME

const char *device_kernel_name(enum kernel_id id)
{
    return (unsigned)id < KERNEL_COUNT ? device_kernel_names[id] : "invalid";
}

static void device_op_read(struct device_op *op, const void *p, uint64_t bytes)
{
    if (p && bytes)
        op->reads[op->nreads++] = (struct device_span){p, bytes};
}

static void device_op_write(struct device_op *op, const void *p, uint64_t bytes)
{
    if (p && bytes)
        op->writes[op->nwrites++] = (struct device_span){p, bytes};
}

/* Both: a kernel that updates in place. */
static void device_op_update(struct device_op *op, const void *p, uint64_t bytes)
{
    device_op_read(op, p, bytes);
    device_op_write(op, p, bytes);
}

void device_kernel_spans(struct device_op *op)
{
    const union kernel_args *a = &op->args;
    uint64_t n = op->n, f = sizeof(float);
    op->nreads = op->nwrites = 0;
    switch (op->kernel) {
    case KERNEL_bytes_to_float:
        device_op_read(op, a->bytes_to_float.src, n);
        device_op_write(op, a->bytes_to_float.dst, n * f);
        break;
    case KERNEL_bias_rows:
        device_op_read(op, a->bias_rows.bias, a->bias_rows.cols ? n / a->bias_rows.cols * f : 0);
        device_op_write(op, a->bias_rows.z, n * f);
        break;
    case KERNEL_relu: device_op_update(op, a->relu.z, n * f); break;
    case KERNEL_bn_stats: {
        const struct kernel_bn_stats *k = &a->bn_stats;
        if (k->train) {
            device_op_read(op, k->z, n * k->batch * f);
            device_op_update(op, k->running_mean, n * f);
            device_op_update(op, k->running_var, n * f);
        } else {
            device_op_read(op, k->running_mean, n * f);
            device_op_read(op, k->running_var, n * f);
        }
        device_op_write(op, k->mean, n * f);
        device_op_write(op, k->invstd, n * f);
        break;
    }
    case KERNEL_bn_relu: {
        const struct kernel_bn_relu *k = &a->bn_relu;
        uint64_t rows = k->batch ? n / k->batch : 0;
        device_op_update(op, k->z, n * f);
        device_op_read(op, k->mean, rows * f);
        device_op_read(op, k->invstd, rows * f);
        device_op_read(op, k->gamma, rows * f);
        device_op_read(op, k->beta, rows * f);
        device_op_write(op, k->xhat, n * f);
        break;
    }
    case KERNEL_softmax_xent: {
        const struct kernel_softmax_xent *k = &a->softmax_xent;
        uint64_t logits = (uint64_t)k->classes * k->batch * f;
        device_op_read(op, k->z, logits);
        device_op_read(op, k->labels, n * sizeof(int64_t));
        device_op_write(op, k->dz, logits);
        device_op_write(op, k->loss, n * sizeof(double));
        device_op_write(op, k->correct, n * sizeof(int32_t));
        break;
    }
    case KERNEL_loss_sum: {
        const struct kernel_loss_sum *k = &a->loss_sum;
        device_op_read(op, k->loss, (uint64_t)k->batch * sizeof(double));
        device_op_read(op, k->correct, (uint64_t)k->batch * sizeof(int32_t));
        device_op_read(op, k->labels, (uint64_t)k->batch * sizeof(int64_t));
        device_op_write(op, k->out, sizeof *k->out);
        break;
    }
    case KERNEL_relu_backward:
        device_op_update(op, a->relu_backward.d, n * f);
        device_op_read(op, a->relu_backward.act, n * f);
        break;
    case KERNEL_row_sum:
        device_op_read(op, a->row_sum.d, n * a->row_sum.batch * f);
        if (a->row_sum.accumulate)
            device_op_update(op, a->row_sum.dst, n * f);
        else
            device_op_write(op, a->row_sum.dst, n * f);
        break;
    case KERNEL_bn_backward: {
        const struct kernel_bn_backward *k = &a->bn_backward;
        device_op_update(op, k->d, n * k->batch * f);
        device_op_read(op, k->xhat, n * k->batch * f);
        device_op_read(op, k->gamma, n * f);
        device_op_read(op, k->invstd, n * f);
        if (k->accumulate) {
            device_op_update(op, k->dgamma, n * f);
            device_op_update(op, k->dbeta, n * f);
        } else {
            device_op_write(op, k->dgamma, n * f);
            device_op_write(op, k->dbeta, n * f);
        }
        break;
    }
    case KERNEL_sgd:
        device_op_update(op, a->sgd.p, n * f);
        device_op_read(op, a->sgd.g, n * f);
        device_op_update(op, a->sgd.buf, n * f);
        break;
    case KERNEL_adam:
        device_op_update(op, a->adam.p, n * f);
        device_op_read(op, a->adam.g, n * f);
        device_op_update(op, a->adam.m1, n * f);
        device_op_update(op, a->adam.m2, n * f);
        break;
    case KERNEL_divide: device_op_update(op, a->divide.x, n * f); break;
    case KERNEL_pack16:
        device_op_read(op, a->pack16.g, n * f);
        device_op_write(op, a->pack16.h, n * sizeof(uint16_t));
        break;
    case KERNEL_unpack16:
        device_op_read(op, a->unpack16.h, n * sizeof(uint16_t));
        device_op_write(op, a->unpack16.g, n * f);
        break;
    case KERNEL_row_sum_atoms:
        device_op_read(op, a->row_sum_atoms.d, n * a->row_sum_atoms.batch * f);
        device_op_write(op, a->row_sum_atoms.dst, n * f);
        break;
    case KERNEL_tree_sum:
        device_op_read(op, a->tree_sum.src, ((a->tree_sum.slices - 1) * a->tree_sum.stride + n) * f);
        device_op_write(op, a->tree_sum.dst, n * f);
        break;
    case KERNEL_hash_chunks:
        device_op_read(op, a->hash_chunks.x, a->hash_chunks.count * f);
        device_op_write(op, a->hash_chunks.out, n * sizeof(uint64_t));
        break;
    case KERNEL_COUNT: break;
    }
}

/* Dispatch, once the op is whole. */
static int device_op_run(device_stream_t *s, const struct device_op *op)
{
    device_t *dev = s->dev;
    if (!dev->ops->run)
        return err_set(ERR_UNSUPPORTED, "%s: the %s backend runs no operations", dev->name, dev->ops->name);
    int rc = dev->ops->run(s, op);
    if (rc == 0)
        __atomic_fetch_add(&dev->kernels, 1, __ATOMIC_RELAXED);
    return rc;
}

/* A column-major matrix of `rows` x `cols` stored with leading dimension ld:
 * its last element is at (cols - 1) ld + rows - 1. */
static uint64_t device_matrix_bytes(int rows, int cols, int ld)
{
    return ((uint64_t)(cols - 1) * (uint64_t)ld + (uint64_t)rows) * sizeof(float);
}

/* The rows and columns op(A) and op(B) are stored as. */
static void device_gemm_shapes(const struct device_gemm *g, int *arows, int *acols, int *brows, int *bcols)
{
    *arows = g->transa == DEVICE_OP_N ? g->m : g->k;
    *acols = g->transa == DEVICE_OP_N ? g->k : g->m;
    *brows = g->transb == DEVICE_OP_N ? g->k : g->n;
    *bcols = g->transb == DEVICE_OP_N ? g->n : g->k;
}

uint64_t device_gemm_product_bytes(const struct device_gemm *g)
{
    int arows, acols, brows, bcols;
    device_gemm_shapes(g, &arows, &acols, &brows, &bcols);
    uint64_t cbytes = device_matrix_bytes(g->m, g->n, g->ldc);
    return device_matrix_bytes(arows, acols, g->lda) + device_matrix_bytes(brows, bcols, g->ldb) +
           (g->beta != 0.0f ? cbytes : 0) + cbytes;
}

/* Bytes from the first product's matrix to the end of the last one's: one
 * matrix of `one` bytes, then count - 1 strides of `stride` floats. A span
 * past 2^62 bytes is refused: no device holds it, and the sum cannot wrap. */
static int device_batch_span(const char *dn, const char *name, const char *which, int count, int64_t stride,
                             uint64_t one, uint64_t *out)
{
    uint64_t steps;
    if (__builtin_mul_overflow((uint64_t)(count - 1), (uint64_t)stride, &steps) ||
        __builtin_mul_overflow(steps, (uint64_t)sizeof(float), &steps) || steps > (1ull << 62) - one)
        return err_set(ERR_ARG, "%s: sgemm '%s': %d products %lld floats apart span more than 2^62 bytes of %s", dn,
                       name, count, (long long)stride, which);
    *out = steps + one;
    return 0;
}

int device_sgemm(device_stream_t *s, const struct device_gemm *g, const char *name, int64_t batch)
{
    const char *dn = s->dev->name;
    if (g->m < 1 || g->n < 1 || g->k < 1)
        return err_set(ERR_ARG, "%s: sgemm '%s' of %d x %d x %d: every dimension must be at least 1", dn, name, g->m,
                       g->n, g->k);
    int arows, acols, brows, bcols;
    device_gemm_shapes(g, &arows, &acols, &brows, &bcols);
    if (g->lda < arows || g->ldb < brows || g->ldc < g->m)
        return err_set(ERR_ARG, "%s: sgemm '%s': leading dimensions %d, %d, %d below the rows stored (%d, %d, %d)",
                       dn, name, g->lda, g->ldb, g->ldc, arows, brows, g->m);
    if (!g->a || !g->b || !g->c)
        return err_set(ERR_ARG, "%s: sgemm '%s' with a NULL matrix", dn, name);
    if (g->count < 0)
        return err_set(ERR_ARG, "%s: sgemm '%s' of %d products: count must be 0 or more (0 and 1: one product)", dn,
                       name, g->count);
    if (g->stride_a < 0 || g->stride_b < 0 || g->stride_c < 0)
        return err_set(ERR_ARG, "%s: sgemm '%s': strides %lld, %lld, %lld of A, B, C: none may be negative", dn, name,
                       (long long)g->stride_a, (long long)g->stride_b, (long long)g->stride_c);
    uint64_t abytes = device_matrix_bytes(arows, acols, g->lda), bbytes = device_matrix_bytes(brows, bcols, g->ldb);
    uint64_t cbytes = device_matrix_bytes(g->m, g->n, g->ldc);
    if (g->count > 1) {
        /* each product's C whole before the next, or side by side within the leading dimension (column
         * blocks of one matrix: the atoms of a batch) */
        int side_by_side = g->stride_c >= g->m && (uint64_t)(g->count - 1) * (uint64_t)g->stride_c + (uint64_t)g->m <=
                                                      (uint64_t)g->ldc;
        if ((uint64_t)g->stride_c * sizeof(float) < cbytes && !side_by_side)
            return err_set(ERR_ARG, "%s: sgemm '%s': stride_c %lld floats is less than one C (%llu floats): the %d "
                           "products would write each other's C", dn, name, (long long)g->stride_c,
                           (unsigned long long)(cbytes / sizeof(float)), g->count);
        int rc = device_batch_span(dn, name, "A", g->count, g->stride_a, abytes, &abytes);
        if (rc == 0)
            rc = device_batch_span(dn, name, "B", g->count, g->stride_b, bbytes, &bbytes);
        if (rc == 0)
            rc = device_batch_span(dn, name, "C", g->count, g->stride_c, cbytes, &cbytes);
        if (rc)
            return rc;
    }
    /* A batched op's spans run from its first product's matrices to the end of its last's. */
    struct device_op op = {.kind = DEVICE_OP_GEMM, .name = name, .batch = batch, .gemm = *g};
    device_op_read(&op, g->a, abytes);
    device_op_read(&op, g->b, bbytes);
    if (g->beta != 0.0f)
        device_op_read(&op, g->c, cbytes);
    device_op_write(&op, g->c, cbytes);
    return device_op_run(s, &op);
}

static int device_kernel_op(device_stream_t *s, enum kernel_id id, uint64_t n, const union kernel_args *args,
                            const char *name, int64_t batch, int flush)
{
    if ((unsigned)id >= KERNEL_COUNT)
        return err_set(ERR_ARG, "%s: kernel %d does not exist", s->dev->name, (int)id);
    if (n == 0)
        return err_set(ERR_ARG, "%s: kernel '%s' over 0 elements", s->dev->name, name ? name : device_kernel_name(id));
    uint32_t tree = id == KERNEL_tree_sum ? args->tree_sum.slices : id == KERNEL_row_sum_atoms ? args->row_sum_atoms.atoms : 1;
    if (tree == 0 || tree > KERNEL_TREE_MAX || (tree & (tree - 1)) ||
        (id == KERNEL_row_sum_atoms && args->row_sum_atoms.batch % tree))
        return err_set(ERR_ARG, "%s: kernel '%s' over %u slices: a power of two up to %d%s", s->dev->name,
                       device_kernel_name(id), tree, KERNEL_TREE_MAX,
                       id == KERNEL_row_sum_atoms ? " that divides the batch" : "");
    struct device_op op = {.kind = DEVICE_OP_KERNEL, .name = name ? name : device_kernel_name(id), .batch = batch,
                           .kernel = id, .n = n, .args = *args, .flush_subnormals = flush};
    device_kernel_spans(&op);
    return device_op_run(s, &op);
}

int device_kernel(device_stream_t *s, enum kernel_id id, uint64_t n, const union kernel_args *args, const char *name,
                  int64_t batch)
{
    return device_kernel_op(s, id, n, args, name, batch, 0);
}

int device_kernel_flushing(device_stream_t *s, enum kernel_id id, uint64_t n, const union kernel_args *args,
                           const char *name, int64_t batch)
{
    return device_kernel_op(s, id, n, args, name, batch, 1);
}

int device_memset_async(device_stream_t *s, void *dst, int value, uint64_t bytes)
{
    if (!dst || bytes == 0)
        return err_set(ERR_ARG, "%s: memset of %llu bytes at %p", s->dev->name, (unsigned long long)bytes, dst);
    struct device_op op = {.kind = DEVICE_OP_MEMSET, .name = "memset", .batch = -1, .dst = dst, .bytes = bytes,
                           .value = value};
    device_op_write(&op, dst, bytes);
    return device_op_run(s, &op);
}

int device_copy_d2d_async(device_stream_t *s, void *dst, const void *src, uint64_t bytes)
{
    if (!dst || !src || bytes == 0)
        return err_set(ERR_ARG, "%s: device-to-device copy of %llu bytes", s->dev->name, (unsigned long long)bytes);
    struct device_op op = {.kind = DEVICE_OP_COPY_D2D, .name = "copy D2D", .batch = -1, .dst = dst, .src = src,
                           .bytes = bytes};
    device_op_read(&op, src, bytes);
    device_op_write(&op, dst, bytes);
    return device_op_run(s, &op);
}

int device_mark_access(device_stream_t *s, const char *name, int64_t batch, const struct device_span *reads,
                       const struct device_span *writes)
{
    struct device_op op = {.kind = DEVICE_OP_ACCESS, .name = name, .batch = batch};
    if (reads)
        device_op_read(&op, reads->ptr, reads->bytes);
    if (writes)
        device_op_write(&op, writes->ptr, writes->bytes);
    return device_op_run(s, &op);
}
