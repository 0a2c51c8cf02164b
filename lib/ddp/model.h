/* model: the multilayer perceptron chapter 6 trains on every rank, its
 * parameters in one flat device buffer and its gradients in another (as
 * llm.c does), forward, softmax cross-entropy and backward as device
 * operations (transfer/device_ops.h) on one stream.
 *
 * Where it sits: after the loader and the copy engine have delivered a batch
 * to the device (chapters 3 and 4), before the reducer (lib/ddp/reducer.h)
 * averages the gradients across ranks and the optimizer (lib/ddp/optim.h)
 * steps. Read model_create(), then the data flow of one step:
 *
 *     model_take_batch(m, bytes, labels, B, k);      on the device: bytes / 255, as torchvision's ToTensor
 *     model_forward(m, B, MODEL_TRAIN);
 *     model_loss(m, B, 1.0f, &loss);                 mean cross-entropy, and d loss / d logits
 *     model_backward(m, B, 0, ready, arg);           layer by layer, last first: ready(arg, t)
 *                                                    as each parameter's gradient is final
 *
 * One code path, any device. Every number of the model lives in device
 * memory and every computation on it is a device operation issued on the
 * model's stream: a matrix product (cuBLAS on a GPU, CBLAS on the simulated
 * device, with the same column-major arguments) or a kernel whose body
 * nvcc and gcc both compile (transfer/kernels.h). The host sees the numbers
 * only through copies: model_read / model_write (checkpoints, --init,
 * --save, the replica check) and the loss's few bytes. Nothing here knows
 * which device it runs on.
 *
 * The network is PyTorch's
 *
 *     fc1 = nn.Linear(inputs, hidden[0]); [bn1 = nn.BatchNorm1d(hidden[0])]; ReLU
 *     fc2 = ...                                                    ...; ReLU
 *     fcL = nn.Linear(hidden[L-2], classes)
 *
 * with its names and layouts: fc1.weight [out, in], fc1.bias [out],
 * bn1.weight, bn1.bias (parameters), bn1.running_mean, bn1.running_var (float
 * buffers) and bn1.num_batches_tracked (an int64 counter). The parameter
 * buffer holds the parameters in named_parameters() order, each row-major,
 * so a slice of it is exactly a PyTorch tensor's storage.
 *
 * The gradient buffer has the same size, but its layout belongs to the
 * reducer: by default parameter t's gradient sits at the parameter's own
 * offset; DDP moves them so that each bucket is one contiguous slice
 * (model_set_grad_layout), as PyTorch's gradient_as_bucket_view makes each
 * .grad a view into its bucket. Always reach a gradient through
 * model_grad(m, t).
 *
 * Numerics. A row-major product C = op(A) op(B) is issued as the
 * column-major product C^T = op(B)^T op(A)^T, which is exactly what
 * OpenBLAS's row-major interface does inside (interface/gemm.c swaps the
 * operands), so the simulated device runs the same BLAS kernel on the same
 * operands as a row-major cblas_sgemm, bit for bit. Activations are kept
 * feature-major, [features x batch]: with a batch of 32 to 64, OpenBLAS runs
 * the products 20 to 40 % faster that way than batch-major (measured on an
 * AVX-512 Xeon, OpenBLAS 0.3.21). Every kernel runs its element in a fixed
 * order, so a run is bit-reproducible on one machine with one OpenBLAS kernel
 * set (OPENBLAS_CORETYPE); different CPUs may pick different kernels and
 * round differently, and a pre-activation within rounding of 0 then goes to
 * the other side of ReLU. Against PyTorch the results agree to float32
 * tolerance, not bit for bit: the products sum in different orders, and
 * torch fuses some multiply-adds (see tests/crosscheck/step_reference.py).
 *
 * Threads: a model_t belongs to one rank thread; different ranks' models run
 * concurrently, each on its own device (or stream).
 */
#ifndef DDP_MODEL_H
#define DDP_MODEL_H

#include "transfer/device.h"

#include <stddef.h>
#include <stdint.h>

#define MODEL_MAX_HIDDEN 8          /* hidden layers at most */
#define MODEL_MAX_WIDTH (1 << 16)   /* widest layer (inputs included) */
#define MODEL_MAX_BATCH (1 << 16)   /* largest batch a model is created for */
#define MODEL_NAME_MAX 32           /* "fc9.weight", "bn8.num_batches_tracked" */
/* parameters: weight and bias of every Linear, weight and bias of every BatchNorm1d */
#define MODEL_MAX_TENSORS (4 * MODEL_MAX_HIDDEN + 2)

/* PyTorch's BatchNorm1d defaults (torch/nn/modules/batchnorm.py). */
#define MODEL_BN_MOMENTUM 0.1
#define MODEL_BN_EPS 1e-5

struct model_spec {
    int inputs;                   /* 784: a 28 x 28 image */
    int classes;                  /* 10 */
    int hidden[MODEL_MAX_HIDDEN]; /* widths of the hidden layers */
    int nhidden;                  /* 0 .. MODEL_MAX_HIDDEN */
    int batchnorm;                /* a BatchNorm1d after each hidden Linear */
};

/* 784-256-128-10, no BatchNorm. */
void model_spec_default(struct model_spec *s);

/* Parses a --hidden list ("256,128") into s->hidden / s->nhidden, strictly
 * (cli_parse_list). 0, or ERR_ARG naming `flag`, a flag's name without its
 * "--" ("--hidden: expected a comma-separated list of 1 to 65536, got '0'"). */
int model_spec_parse_hidden(struct model_spec *s, const char *text, const char *flag);

/* Checks a spec: widths 1..MODEL_MAX_WIDTH, classes >= 2, nhidden in range.
 * 0 or ERR_ARG naming the field. */
int model_spec_check(const struct model_spec *s);

/* The parameters a model of this spec has, in floats (235146 by default). */
uint64_t model_spec_param_floats(const struct model_spec *s);

/* "784-256-128-10" or "784-256-128-10 with BatchNorm1d"; returns buf. */
const char *model_spec_describe(const struct model_spec *s, char *buf, size_t len);

/* One named tensor: a parameter (offset into the parameter buffer) or a float
 * buffer (offset into the buffer of buffers). */
struct model_tensor {
    char name[MODEL_NAME_MAX]; /* "fc1.weight" */
    int ndim;                  /* 1 or 2 */
    int64_t shape[2];          /* [out, in] or [n] */
    size_t numel;
    size_t offset;             /* in floats */
};

typedef struct model model_t;

/* Called by model_backward when parameter `tensor`'s gradient is final;
 * return 0 to go on, or a negative ERR_* to stop backward with that error. */
typedef int (*model_ready_fn)(void *arg, int tensor);

enum model_mode { MODEL_TRAIN, MODEL_EVAL };

struct model_loss {
    double loss;  /* mean cross-entropy over the batch */
    int correct;  /* samples whose largest logit is their label (the first largest, as torch.argmax) */
};

/* What the matrix products took since model_timing_reset (the simulated
 * device times them; a GPU leaves 0). */
struct model_timing {
    uint64_t gemm_ns;  /* wall time inside cblas_sgemm */
    uint64_t gemm_calls;
};

/* Creates a model of `spec` for batches of 1..max_batch samples in the
 * memory of `stream`'s device, every operation on `stream` (the compute
 * stream), parameters zero (call model_init or load them). Returns 0,
 * ERR_ARG (bad spec or batch, err_msg() names it) or ERR_NOMEM (naming the
 * size the device would not give). */
int model_create(const struct model_spec *spec, int max_batch, device_stream_t *stream, model_t **out);
/* Waits for the model's stream, then frees its device memory. */
void model_destroy(model_t *m);

/* The stream every operation of the model runs on. */
device_stream_t *model_stream(const model_t *m);

/* The batch the last model_take_batch gave (its number names it in the
 * device's messages), -1 after a batch from the host. */
int64_t model_batch_number(const model_t *m);

const struct model_spec *model_get_spec(const model_t *m);

/* PyTorch's default initialisation, bit for bit what
 *     torch.manual_seed(seed); model = MLP(...)
 * gives: each Linear's weight U(-b, b) with b = 1/sqrt(in) (kaiming_uniform_
 * with a = sqrt(5)) then its bias U(-1/sqrt(in), 1/sqrt(in)), in layer order,
 * from one MT19937 stream (lib/base/rng.h); BatchNorm weight 1, bias 0,
 * running mean 0, variance 1, num_batches_tracked 0; drawn on the host and
 * copied to the device. 0, or ERR_NOMEM, or the device's error. */
int model_init(model_t *m, uint64_t seed);

/* ---- parameters, gradients, buffers -------------------------------------- */

/* Pointers below are device memory: pass them to device operations, or read
 * and write them through model_read / model_write. */

int model_param_tensors(const model_t *m);                    /* how many parameters */
const struct model_tensor *model_param(const model_t *m, int t);
size_t model_param_floats(const model_t *m);                  /* total floats: 235146 by default */
float *model_params(model_t *m);
/* Index of the parameter or buffer called `name`, or -1. */
int model_param_find(const model_t *m, const char *name);
int model_buffer_find(const model_t *m, const char *name);

float *model_grads(model_t *m);                               /* the whole gradient buffer */
float *model_grad(model_t *m, int t);                         /* parameter t's gradient */
size_t model_grad_offset(const model_t *m, int t);
/* Moves the gradients: parameter t's now starts at offsets[t]. The new
 * layout must tile [0, model_param_floats) exactly (no gap, no overlap);
 * current gradient values move with their parameter. 0, or ERR_ARG naming
 * the parameter that overlaps or the gap; ERR_NOMEM. */
int model_set_grad_layout(model_t *m, const size_t *offsets);

int model_buffer_tensors(const model_t *m);                   /* running_mean and running_var per BatchNorm1d */
const struct model_tensor *model_buffer(const model_t *m, int b);
size_t model_buffer_floats(const model_t *m);
float *model_buffers(model_t *m);
/* Device memory for the replica check (ddp/replica.h): one word per chunk
 * of KERNEL_HASH_CHUNK floats of every parameter and buffer tensor, each
 * tensor's chunks rounded up (model_tensor_chunks), model_check_chunks
 * words in all. The model keeps it, so that the check allocates and frees
 * nothing each step (a free waits for the whole device). */
uint64_t model_tensor_chunks(const struct model_tensor *t);
uint64_t model_check_chunks(const model_t *m);
uint64_t *model_check_words(model_t *m);
/* bn*.num_batches_tracked: one counter for all the model's BatchNorm1d
 * layers, which always see the same batches. */
int64_t model_batches_tracked(const model_t *m);
void model_set_batches_tracked(model_t *m, int64_t n);

/* ---- the host's view: copies -------------------------------------------------- */

enum model_part { MODEL_PARAMS, MODEL_GRADS, MODEL_BUFFERS };

/* Copies `count` floats of a part from float `offset` on, after everything
 * the model's stream was given: host <- device (model_read), device <- host
 * (model_write, ordered before what the stream is given next). 0, ERR_RANGE
 * past the part's end, or the device's error. */
int model_read(const model_t *m, enum model_part part, size_t offset, size_t count, float *host);
int model_write(model_t *m, enum model_part part, size_t offset, size_t count, const float *host);

/* Waits for everything issued on the model's stream. */
int model_sync(const model_t *m);

/* Computes every batch by `atoms` atoms (0: off; else a power of two up to
 * KERNEL_TREE_MAX), for gradients whose bits do not depend on how a global
 * batch is split over ranks (train.h, same_bits): a batch of B samples is
 * `atoms` blocks of B / atoms consecutive samples; every matrix product runs
 * block by block with the shapes of one block (one device operation of
 * `atoms` products), each block's weight and bias gradients are computed
 * alone and then added in the fixed tree of kernel_tree (transfer/kernels.h).
 * Every batch must then split evenly; backward cannot accumulate, and
 * BatchNorm is refused. 0, ERR_ARG, or ERR_NOMEM (the atoms' gradient
 * buffer: atoms x the largest weight). */
int model_set_atoms(model_t *m, int atoms);

/* ---- one step --------------------------------------------------------------- */

/* The input buffer on the device, max_batch x inputs floats, batch-major
 * (sample b's features at [b * inputs]), and the labels, max_batch int64. */
float *model_input(model_t *m);
int64_t *model_labels(model_t *m);

/* A batch already on the device (the prefetcher's copy): input[i] =
 * bytes[i] / 255 for batch x inputs bytes (torchvision's ToTensor: byte
 * tensor .float().div(255), one correctly rounded division), and the labels
 * copied beside it, both on the model's stream; `number` names the batch in
 * messages. 0, or ERR_ARG for a batch outside 1..max_batch. */
int model_take_batch(model_t *m, const uint8_t *bytes, const int64_t *labels, int batch, int64_t number);

/* A batch from host memory (evaluation, tests): copied to the device, then
 * as model_take_batch. bytes NULL: `input` (batch x inputs floats) is the
 * input itself. labels may be NULL (the model's labels stay). */
int model_upload_batch(model_t *m, const uint8_t *bytes, const float *input, const int64_t *labels, int batch);

/* Forward on the first `batch` samples of the input buffer. TRAIN: BatchNorm
 * normalises with the batch's statistics (biased variance) and updates its
 * running mean and variance (unbiased variance, momentum 0.1); EVAL: with the
 * running statistics. 0, or ERR_ARG (batch out of range, or a batch of 1 in
 * TRAIN mode with BatchNorm: "Expected more than 1 value per channel", as
 * PyTorch says). */
int model_forward(model_t *m, int batch, enum model_mode mode);

/* Layer l's output in the last forward, copied to `host`: feature-major,
 * [out x batch] (unit j of sample b at host[j * batch + b]); a hidden
 * layer's after its ReLU (which units ReLU passed depends on how their sums
 * were rounded where a pre-activation is within rounding of 0: the PyTorch
 * cross-check reads them, tests/unit/test_torch_cases.c), the last layer's
 * the logits. One copy per layer. 0, ERR_ARG (no such layer), ERR_STATE (no
 * forward ran), or the device's error. */
int model_read_layer(const model_t *m, int l, float *host);

/* Mean softmax cross-entropy of the last forward against the model's labels
 * (the batch's), and the gradient of scale x loss with respect to the logits, which the next
 * model_backward starts from (scale 1 for a plain step; 1/K to average K
 * accumulated micro-batches, as dividing the loss by K does in PyTorch).
 * 0, or ERR_RANGE naming the sample whose label is outside 0..classes-1;
 * ERR_STATE if no forward ran with this batch. */
int model_loss(model_t *m, int batch, float scale, struct model_loss *out);

/* Backward through the last forward (TRAIN) from the loss gradient. With
 * accumulate = 0 the gradients are overwritten; with 1 they are added to what
 * the gradient buffer holds (PyTorch's .grad accumulation, for no_sync).
 * Layers go last to first, and a layer's gradients are ready when its whole
 * backward is done (as PyTorch accumulates a Linear's .grad after its
 * backward node, input gradient included), bias before weight, so `ready`
 * fires in exactly the reverse of parameter order: fcL.bias, fcL.weight,
 * bnL-1.bias, bnL-1.weight, ..., fc1.bias, fc1.weight. From its ready call
 * on, nothing in this backward reads that parameter again. `ready` may be
 * NULL. 0, ERR_STATE (no TRAIN forward or loss before it), or the error
 * `ready` returned. */
int model_backward(model_t *m, int batch, int accumulate, model_ready_fn ready, void *arg);

/* ---- measurement -------------------------------------------------------------- */

/* model_timing_reset zeroes the counters. */
void model_timing_reset(model_t *m);
struct model_timing model_timing_get(const model_t *m);

/* "OpenBLAS 0.3.21 ... core SkylakeX": the library's build and the kernel set
 * it chose for this CPU; when it fell back to a generic core on a CPU with
 * AVX2 (an OpenBLAS older than the CPU), a hint to set OPENBLAS_CORETYPE.
 * Returns buf. */
const char *model_blas_describe(char *buf, size_t len);

#endif
