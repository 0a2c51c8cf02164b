/* kernels: the per-element bodies of every kernel the device runs for
 * chapter 6's model, optimizer, reducer and replica check, written once for
 * both compilers.
 *
 * Where it sits: under the device operations (transfer/device_ops.h). The
 * simulated device (sim/device_sim.c) runs a kernel as a loop over its
 * elements, for i in 0..n, calling the body; the GPU (lib/transfer/cuda/
 * device_cuda.cu, built by nvcc with -fmad=false so that no multiply-add is
 * fused behind the source's back) runs one thread per element calling the
 * same body. The arithmetic a GPU runs is therefore the arithmetic `make
 * test` checks here, operation for operation; what may still differ is the
 * math library's exp, log and sqrt in double (glibc against CUDA's, each
 * within an ulp or two) and the matrix products (OpenBLAS against cuBLAS sum
 * in different orders): tests/unit/test_device_ops.c states those
 * tolerances, and runs on a GPU under make test-gpu.
 *
 * Each kernel is a struct of arguments and a body kernel_NAME(args, i); the
 * list KERNEL_LIST names them all, so that each backend turns the list into
 * its loops or its CUDA kernels without naming one kernel twice. "Element"
 * is whatever one thread does: one float for element-wise kernels, one row
 * (a feature over the batch) for the sums, one sample for the loss, the
 * whole batch (n = 1) for the ordered sum of the losses, which must add in
 * one order to give one result.
 *
 * Layouts are the model's (lib/ddp/model.c): activations feature-major,
 * [features x batch], so row j, column b is x[j * batch + b].
 *
 * Doubles: the sums over a batch (BatchNorm's statistics, the bias gradient,
 * the loss) accumulate in double, as PyTorch's CPU kernels do; so do they on
 * a GPU (slower, and still the same order, hence the same bits).
 */
#ifndef DDP_KERNELS_H
#define DDP_KERNELS_H

#include "base/half.h"
#include "base/hash.h"
#include "base/kernel_fn.h"

#include <math.h>
#include <stdint.h>

/* ---- input ------------------------------------------------------------------------------ */

/* dst[i] = src[i] / 255: torchvision's ToTensor (a byte tensor's .float().div(255),
 * one correctly rounded division). n = the batch's bytes. */
struct kernel_bytes_to_float {
    float *dst;
    const uint8_t *src;
};
KERNEL_FN void kernel_bytes_to_float(const struct kernel_bytes_to_float *a, uint64_t i)
{
    a->dst[i] = (float)a->src[i] / 255.0f;
}

/* ---- forward ----------------------------------------------------------------------------- */

/* z[j, b] = bias[j]: Z starts as the bias in every column and the product
 * adds onto it (beta = 1), as torch's addmm copies the bias into its output
 * first. n = rows x cols, at most 2^32 (the model's widest layer by its
 * largest batch, 2^16 x 2^16), so the row is a 32-bit division: several
 * times cheaper than a 64-bit one on a CPU, and native on a GPU. */
struct kernel_bias_rows {
    float *z;
    const float *bias;
    uint32_t cols;
};
KERNEL_FN void kernel_bias_rows(const struct kernel_bias_rows *a, uint64_t i)
{
    a->z[i] = a->bias[(uint32_t)i / a->cols];
}

/* ReLU in place. n = elements. */
struct kernel_relu {
    float *z;
};
KERNEL_FN void kernel_relu(const struct kernel_relu *a, uint64_t i) { a->z[i] = a->z[i] > 0.0f ? a->z[i] : 0.0f; }

/* BatchNorm1d's statistics of feature j (n = features). TRAIN: the batch's
 * mean and biased variance normalise; the running statistics move by
 * `momentum` towards the mean and the unbiased variance, all in double as
 * PyTorch's CPU kernel accumulates (batch_norm_cpu_collect_stats and
 * update_stats in aten's Normalization.cpp). EVAL: the running statistics
 * normalise, untouched. Either way mean[j] and invstd[j] are what
 * kernel_bn_relu applies, rounded to float. */
struct kernel_bn_stats {
    const float *z;
    float *running_mean, *running_var;
    float *mean, *invstd;
    uint32_t batch;
    int train;
    double momentum, eps;
};
KERNEL_FN void kernel_bn_stats(const struct kernel_bn_stats *a, uint64_t j)
{
    const float *z = a->z + j * a->batch;
    double mean, invstd;
    if (a->train) {
        double sum = 0, sq = 0;
        for (uint32_t b = 0; b < a->batch; b++)
            sum += z[b];
        mean = sum / a->batch;
        for (uint32_t b = 0; b < a->batch; b++)
            sq += (z[b] - mean) * (z[b] - mean);
        invstd = 1.0 / sqrt(sq / a->batch + a->eps);
        a->running_mean[j] = (float)(a->momentum * mean + (1 - a->momentum) * a->running_mean[j]);
        a->running_var[j] = (float)(a->momentum * (sq / (a->batch - 1)) + (1 - a->momentum) * a->running_var[j]);
    } else {
        mean = a->running_mean[j];
        invstd = 1.0 / sqrt((double)a->running_var[j] + a->eps);
    }
    a->mean[j] = (float)mean;
    a->invstd[j] = (float)invstd;
}

/* BatchNorm1d's normalisation and affine map, then ReLU, in place, keeping
 * xhat = (z - mean) invstd for backward. n = features x batch. */
struct kernel_bn_relu {
    float *z, *xhat;
    const float *mean, *invstd, *gamma, *beta;
    uint32_t batch;
};
KERNEL_FN void kernel_bn_relu(const struct kernel_bn_relu *a, uint64_t i)
{
    uint64_t j = i / a->batch;
    float x = (a->z[i] - a->mean[j]) * a->invstd[j];
    float y = x * a->gamma[j] + a->beta[j];
    a->xhat[i] = x;
    a->z[i] = y > 0.0f ? y : 0.0f;
}

/* ---- the loss ------------------------------------------------------------------------------ */

/* Sample b's softmax cross-entropy (n = batch): log-sum-exp around the
 * largest logit, in double; the loss, whether the first largest logit is the
 * label (torch.argmax's choice), and the gradient of scale x mean loss with
 * respect to the logits, scale (softmax - onehot) / B, into dz (NULL:
 * evaluation, no gradient). A label outside 0..classes-1 gives correct[b] =
 * -1 and nothing else, for kernel_loss_sum to report. */
struct kernel_softmax_xent {
    const float *z;
    float *dz;
    const int64_t *labels;
    double *loss;
    int32_t *correct;
    uint32_t batch, classes;
    double grad_scale; /* scale / batch */
};
KERNEL_FN void kernel_softmax_xent(const struct kernel_softmax_xent *a, uint64_t b)
{
    const float *z = a->z;
    uint64_t B = a->batch;
    int64_t y = a->labels[b];
    if (y < 0 || y >= (int64_t)a->classes) {
        a->correct[b] = -1;
        return;
    }
    uint32_t best = 0;
    for (uint32_t c = 1; c < a->classes; c++)
        if (z[c * B + b] > z[best * B + b])
            best = c;
    double top = z[best * B + b], sum = 0;
    for (uint32_t c = 0; c < a->classes; c++)
        sum += exp(z[c * B + b] - top);
    double lse = top + log(sum);
    a->loss[b] = lse - z[(uint64_t)y * B + b];
    a->correct[b] = best == (uint32_t)y;
    if (a->dz)
        for (uint32_t c = 0; c < a->classes; c++)
            a->dz[c * B + b] = (float)((exp(z[c * B + b] - lse) - (c == (uint32_t)y)) * a->grad_scale);
}

/* What the host copies back after a loss: the losses summed in sample order,
 * the correct count, and the first sample with a bad label (-1: none). */
struct kernel_loss_result {
    double loss_sum;
    int64_t correct;
    int64_t bad_sample, bad_label;
};

/* One thread (n = 1): the batch's losses summed in sample order, so the sum
 * is one number on every device. */
struct kernel_loss_sum {
    const double *loss;
    const int32_t *correct;
    const int64_t *labels;
    uint32_t batch;
    struct kernel_loss_result *out;
};
KERNEL_FN void kernel_loss_sum(const struct kernel_loss_sum *a, uint64_t i)
{
    (void)i;
    struct kernel_loss_result r = {0, 0, -1, 0};
    for (uint32_t b = 0; b < a->batch; b++) {
        if (a->correct[b] < 0) {
            r.bad_sample = b;
            r.bad_label = a->labels[b];
            break;
        }
        r.loss_sum += a->loss[b];
        r.correct += a->correct[b];
    }
    *a->out = r;
}

/* ---- backward ------------------------------------------------------------------------------- */

/* Through ReLU: the gradient passes where the activation is positive (it is
 * exactly 0 where ReLU cut). n = elements. */
struct kernel_relu_backward {
    float *d;
    const float *act;
};
KERNEL_FN void kernel_relu_backward(const struct kernel_relu_backward *a, uint64_t i)
{
    a->d[i] = a->act[i] > 0.0f ? a->d[i] : 0.0f;
}

/* dst[j] (+)= the sum of row j of d [rows x batch], summed in double: the
 * bias gradient. n = rows. */
struct kernel_row_sum {
    float *dst;
    const float *d;
    uint32_t batch;
    int accumulate;
};
KERNEL_FN void kernel_row_sum(const struct kernel_row_sum *a, uint64_t j)
{
    const float *row = a->d + j * a->batch;
    double s = 0;
    for (uint32_t b = 0; b < a->batch; b++)
        s += row[b];
    a->dst[j] = a->accumulate ? a->dst[j] + (float)s : (float)s;
}

/* ---- sums that do not depend on the world size (--same-bits) ------------------------------------ */

/* The most slices a fixed tree adds: the atoms of a global batch
 * (lib/ddp/train.h, TRAIN_SAME_BITS_ATOMS). */
#define KERNEL_TREE_MAX 8

/* The fixed tree over `slices` values (a power of two, at most
 * KERNEL_TREE_MAX): v[t] += v[t + s] for t < s, s = slices/2, ..., 1, and
 * the result is v[0]. Its top level adds the even slices' sum to the odd
 * ones', the next level splits by the next bit, and so on: the tree whose
 * subtrees are the slices t = r (mod W), for every power of two W, which is
 * what lets W ranks each add their own slices and the all-reduce add the
 * ranks' sums in the same tree. v is modified. */
KERNEL_FN float kernel_tree(float *v, uint32_t slices)
{
    for (uint32_t s = slices / 2; s >= 1; s /= 2)
        for (uint32_t t = 0; t < s; t++)
            v[t] = v[t] + v[t + s];
    return v[0];
}

/* dst[i] = the fixed tree over src[t x stride + i], t < slices. n = elements. */
struct kernel_tree_sum {
    float *dst;
    const float *src;
    uint64_t stride;
    uint32_t slices;
};
KERNEL_FN void kernel_tree_sum(const struct kernel_tree_sum *a, uint64_t i)
{
    float v[KERNEL_TREE_MAX];
    for (uint32_t t = 0; t < a->slices; t++)
        v[t] = a->src[t * a->stride + i];
    a->dst[i] = kernel_tree(v, a->slices);
}

/* The bias gradient by atoms: row j of d [rows x batch] is `atoms` blocks
 * of batch / atoms columns; each block is summed in double and rounded to
 * float, as one rank holding that atom alone would, then the blocks go
 * through the fixed tree. n = rows. */
struct kernel_row_sum_atoms {
    float *dst;
    const float *d;
    uint32_t batch;
    uint32_t atoms;
};
KERNEL_FN void kernel_row_sum_atoms(const struct kernel_row_sum_atoms *a, uint64_t j)
{
    float v[KERNEL_TREE_MAX];
    uint32_t width = a->batch / a->atoms;
    for (uint32_t t = 0; t < a->atoms; t++) {
        const float *block = a->d + j * a->batch + t * width;
        double s = 0;
        for (uint32_t b = 0; b < width; b++)
            s += block[b];
        v[t] = (float)s;
    }
    a->dst[j] = kernel_tree(v, a->atoms);
}

/* BatchNorm1d's backward for feature j (n = features), in place on dY:
 *     dgamma = sum dY xhat,  dbeta = sum dY   (double, then float)
 *     dZ = gamma invstd / B (B dY - dbeta - xhat dgamma). */
struct kernel_bn_backward {
    float *d;
    const float *xhat, *gamma, *invstd;
    float *dgamma, *dbeta;
    uint32_t batch;
    int accumulate;
};
KERNEL_FN void kernel_bn_backward(const struct kernel_bn_backward *a, uint64_t j)
{
    float *dy = a->d + j * a->batch;
    const float *xh = a->xhat + j * a->batch;
    double sb = 0, sg = 0;
    for (uint32_t b = 0; b < a->batch; b++) {
        sb += dy[b];
        sg += (double)dy[b] * xh[b];
    }
    float inv_b = 1.0f / (float)a->batch, bf = (float)a->batch;
    float fb = (float)sb, fg = (float)sg, k = a->gamma[j] * a->invstd[j] * inv_b;
    for (uint32_t b = 0; b < a->batch; b++)
        dy[b] = k * (bf * dy[b] - fb - xh[b] * fg);
    a->dbeta[j] = a->accumulate ? a->dbeta[j] + fb : fb;
    a->dgamma[j] = a->accumulate ? a->dgamma[j] + fg : fg;
}

/* ---- the optimizer (lib/ddp/optim.h has the rules and their sources) ----------------------- */

/* SGD on one element: weight decay, momentum (the buffer starts as the
 * gradient on the first step), Nesterov, each operation rounded once in the
 * order written. buf NULL: no momentum. n = the tensor's elements. */
struct kernel_sgd {
    float *p;
    const float *g;
    float *buf;
    float lr, momentum, weight_decay, one_minus_dampening;
    int nesterov, first;
};
KERNEL_FN void kernel_sgd(const struct kernel_sgd *a, uint64_t i)
{
    float d = a->g[i];
    if (a->weight_decay != 0)
        d = d + a->weight_decay * a->p[i];
    if (a->buf) {
        float b = a->first ? d : a->momentum * a->buf[i] + a->one_minus_dampening * d;
        a->buf[i] = b;
        d = a->nesterov ? d + a->momentum * b : b;
    }
    a->p[i] = a->p[i] - a->lr * d;
}

/* Adam on one element; the scalars (step size lr / (1 - beta1^t) and
 * sqrt(1 - beta2^t)) come from the host, computed in double as Python does. */
struct kernel_adam {
    float *p;
    const float *g;
    float *m1, *m2;
    float beta1, beta2, one_minus_beta1, one_minus_beta2, weight_decay, eps, step_size, bc2_sqrt;
};
KERNEL_FN void kernel_adam(const struct kernel_adam *a, uint64_t i)
{
    float d = a->g[i];
    if (a->weight_decay != 0)
        d = d + a->weight_decay * a->p[i];
    float m = a->beta1 * a->m1[i] + a->one_minus_beta1 * d;
    float v = a->beta2 * a->m2[i] + a->one_minus_beta2 * d * d;
    a->m1[i] = m;
    a->m2[i] = v;
    float denom = sqrtf(v) / a->bc2_sqrt + a->eps;
    a->p[i] = a->p[i] + (-a->step_size * m) / denom; /* torch's addcdiv_: p + value * m / denom */
}

/* ---- the reducer ------------------------------------------------------------------------------- */

/* x[i] = x[i] / w: the sum of W ranks' gradients made their average. */
struct kernel_divide {
    float *x;
    float w;
};
KERNEL_FN void kernel_divide(const struct kernel_divide *a, uint64_t i) { a->x[i] = a->x[i] / a->w; }

/* PyTorch's fp16_compress_hook (bf16_compress_hook): the gradient rounded to
 * 16 bits, then divided by W there, h = 16(16(g) / w), before the sum, so
 * that the sum cannot overflow float16's 65504. */
struct kernel_pack16 {
    uint16_t *h;
    const float *g;
    float w;
    int bf16;
};
KERNEL_FN void kernel_pack16(const struct kernel_pack16 *a, uint64_t i)
{
    if (a->bf16)
        a->h[i] = half_bf16_from_float(half_bf16_to_float(half_bf16_from_float(a->g[i])) / a->w);
    else
        a->h[i] = half_from_float(half_to_float(half_from_float(a->g[i])) / a->w);
}

/* The all-reduced 16-bit values widened back into the gradient. */
struct kernel_unpack16 {
    float *g;
    const uint16_t *h;
    int bf16;
};
KERNEL_FN void kernel_unpack16(const struct kernel_unpack16 *a, uint64_t i)
{
    a->g[i] = a->bf16 ? half_bf16_to_float(a->h[i]) : half_to_float(a->h[i]);
}

/* ---- the replica check ------------------------------------------------------------------------- */

/* The replica check's hash of a tensor (lib/ddp/replica.c), one 64-bit word
 * per chunk of KERNEL_HASH_CHUNK floats, so that a GPU hashes the chunks in
 * parallel and the host receives a few words per tensor, not the tensor.
 * Chunk i of x[0..count) in blocks of 16 floats, with the accumulation of
 * XXH3 (Yann Collet's xxHash: a sum of 32 x 32-bit products, each lane 64
 * bits wide): lane l takes floats 2l and 2l + 1 of a block as one 64-bit
 * word w (float 2l in the low half, as a little-endian load reads them, which
 * every CPU and GPU this runs on is), offset by a constant, and adds to its
 * sum w + lo(w) * hi(w). One bit k of a half flipped moves w and that half
 * by the same +-2^k (times 2^32 in w for the high half), so the lane's sum
 * moves by +-2^k (1 + hi(w)) or +-2^k (2^32 + lo(w)), in size above 0 and
 * under 2^64: never 0 modulo 2^64.
 * Each of the eight sums, offset by its lane's multiple of the golden ratio,
 * goes through splitmix64's finaliser (eight at once, not one after
 * another), the tail (under 16 floats) through FNV-1a's multiply one float
 * at a time, and the finaliser takes the chunk's number and length last, so
 * that a chunk cut short or swapped with another changes its word.
 * Bits, not values: -0 differs from 0, and a NaN from every other NaN. It
 * only has to tell replicas apart, not resist an attacker.
 * Its multiplies are 32 by 32 bits into 64 on the two halves of one word,
 * which is what every vector width's multiply does (SSE2's pmuludq to
 * AVX-512's vpmuludq): the simulated device hashes loaded vectors as they
 * are, with no shuffle. Measured on a 2-core AMD EPYC, the recipe's 235146
 * floats in cache: 15 us in the AVX2 clone (and in the AVX-512 one, which
 * GCC gives 256-bit vectors); pairing float l with float l + 8 instead, which
 * needs the halves moved into place first, took 26 us.
 * n = chunks, ceil(count / KERNEL_HASH_CHUNK). */
#define KERNEL_HASH_CHUNK 1024u
#define KERNEL_HASH_LANES 8u
struct kernel_hash_chunks {
    uint64_t *out;
    const float *x;
    uint64_t count;
};
KERNEL_FN void kernel_hash_chunks(const struct kernel_hash_chunks *a, uint64_t i)
{
    uint64_t begin = i * KERNEL_HASH_CHUNK, j = begin;
    uint64_t end = a->count - begin < KERNEL_HASH_CHUNK ? a->count : begin + KERNEL_HASH_CHUNK;
    uint64_t acc[KERNEL_HASH_LANES] = {0};
    for (; j + 2 * KERNEL_HASH_LANES <= end; j += 2 * KERNEL_HASH_LANES)
        for (unsigned l = 0; l < KERNEL_HASH_LANES; l++) {
            uint64_t w;
            memcpy(&w, a->x + j + 2 * l, sizeof w);
            w ^= 0x7f4a7c159e3779b9ull;
            acc[l] += w + (w & 0xffffffffu) * (w >> 32);
        }
    uint64_t t = HASH_FNV1A_BASIS;
    for (unsigned l = 0; l < KERNEL_HASH_LANES; l++) /* independent finalisers, not a chain of eight */
        t ^= hash_mix64(acc[l] + (l + 1) * 0x9e3779b97f4a7c15ull);
    for (; j < end; j++)
        t = (t ^ half_bits(a->x[j])) * HASH_FNV1A_PRIME;
    a->out[i] = hash_mix64(t ^ i << 32 ^ (end - begin));
}

/* Every kernel, for the backends' loops and launches: X(name). */
#define KERNEL_LIST(X)                                                                                                 \
    X(bytes_to_float)                                                                                                  \
    X(bias_rows)                                                                                                       \
    X(relu)                                                                                                            \
    X(bn_stats)                                                                                                        \
    X(bn_relu)                                                                                                         \
    X(softmax_xent)                                                                                                    \
    X(loss_sum)                                                                                                        \
    X(relu_backward)                                                                                                   \
    X(row_sum)                                                                                                         \
    X(row_sum_atoms)                                                                                                   \
    X(tree_sum)                                                                                                        \
    X(bn_backward)                                                                                                     \
    X(sgd)                                                                                                             \
    X(adam)                                                                                                            \
    X(divide)                                                                                                          \
    X(pack16)                                                                                                          \
    X(unpack16)                                                                                                        \
    X(hash_chunks)

#define KERNEL_ID(name) KERNEL_##name,
enum kernel_id { KERNEL_LIST(KERNEL_ID) KERNEL_COUNT };
#undef KERNEL_ID

#define KERNEL_ARGS(name) struct kernel_##name name;
union kernel_args {
    KERNEL_LIST(KERNEL_ARGS)
};
#undef KERNEL_ARGS

#endif
