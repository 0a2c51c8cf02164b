/* test_device_ops: the device's compute (lib/transfer/device_ops.h) against
 * CPU twins written here, straightforward loops that share no code with
 * transfer/kernels.h: every kernel of KERNEL_LIST, sgemm in all four
 * transpose combinations with alpha, beta and leading dimensions larger than
 * the rows, memset and the device-to-device copy.
 *
 * Every buffer lives on the device, allocated exactly to the size the op
 * touches, filled by an H2D copy and read back by a D2H copy, as on a GPU.
 * Each kernel's declared spans (device_kernel_spans) must be exactly its
 * buffers with the roles the test states (read, written, updated in place):
 * the simulated device refuses a span past a buffer's end (ERR_RANGE), and a
 * span missing or too short is a hazard its use-before-ready detector would
 * not see. Buffers a kernel only reads must come back unchanged.
 *
 * On the simulated device the twins agree to the bit. DEVICE_OPS_BACKEND=cuda
 * runs the same tests on a GPU (make test-gpu; they skip, saying why, where
 * there is none), and then the comparisons take the tolerance stated with
 * each op, with its reason. The detector's tests are the simulator's and
 * skip there.
 */
#include "check.h"
#include "base/error.h"
#include "base/half.h"
#include "transfer/device.h"
#include "transfer/device_ops.h"
#include "transfer/hw.h"

#include <cblas.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A kernel added to KERNEL_LIST needs its test here. */
_Static_assert(KERNEL_COUNT == 18, "every kernel of KERNEL_LIST has a test in this file: add the new one's");

static const char *t_backend(void)
{
    const char *b = getenv("DEVICE_OPS_BACKEND");
    return b && *b ? b : "sim";
}

static int t_on_sim(void) { return strcmp(t_backend(), "sim") == 0; }

/* ---- the device, its buffers and the comparisons ------------------------------------------- */

struct t_rig {
    device_t *dev;
    device_stream_t *s;
};

/* 0, or 1 when the backend asked for has no device here (the test skips). */
static int t_open(struct t_rig *r)
{
    struct device_config cfg;
    device_config_default(&cfg);
    cfg.backend = t_backend();
    int rc = device_open(&cfg, &r->dev);
    if (rc == ERR_UNSUPPORTED && !t_on_sim())
        return 1;
    CHECK_OK(rc);
    CHECK_OK(device_stream_create(r->dev, "compute", &r->s));
    return 0;
}

static void t_close(struct t_rig *r)
{
    device_stream_destroy(r->s);
    device_close(r->dev);
}

enum t_role { T_READ, T_WRITE, T_UPDATE };
enum t_type { T_U8, T_U16, T_I32, T_I64, T_F32, T_F64, T_BYTES };

static const size_t t_type_size[] = {1, 2, 4, 8, 4, 8, 1};

/* One buffer of a case: `host` holds its first contents, then the twin's
 * result; `dev` is the device's copy, exactly `bytes` long. */
struct t_buf {
    const char *name;
    enum t_role role;
    enum t_type type;
    uint64_t count, bytes;
    void *host, *dev;
};

#define T_MAX_BUFS 8

/* A case: buffers on a device, its own (t_case_open) or one several cases
 * share (t_case_on). */
struct t_case {
    struct t_rig *rig, own;
    struct t_buf buf[T_MAX_BUFS];
    int nbuf;
};

static void t_case_on(struct t_case *c, struct t_rig *rig)
{
    memset(c, 0, sizeof *c);
    c->rig = rig;
}

/* 0, or 1 when the backend has no device here (the test skips). */
static int t_case_open(struct t_case *c)
{
    t_case_on(c, &c->own);
    return t_open(&c->own);
}

#define T_CASE_OPEN(c)                                                                                                 \
    do {                                                                                                               \
        if (t_case_open(c))                                                                                            \
            CHECK_SKIP("DEVICE_OPS_BACKEND=%s: %s", t_backend(), err_msg());                                          \
    } while (0)

/* A buffer of `count` elements: its host side, for the test to fill. */
static void *t_buf(struct t_case *c, const char *name, enum t_role role, enum t_type type, uint64_t count)
{
    CHECK(c->nbuf < T_MAX_BUFS);
    struct t_buf *b = &c->buf[c->nbuf++];
    *b = (struct t_buf){.name = name, .role = role, .type = type, .count = count,
                        .bytes = count * t_type_size[type]};
    b->host = calloc(1, b->bytes);
    CHECK(b->host);
    CHECK_OK(device_malloc(c->rig->dev, b->bytes, name, &b->dev));
    return b->host;
}

/* The device address of the buffer whose host side is `host`. */
static void *t_dev(struct t_case *c, const void *host)
{
    for (int i = 0; i < c->nbuf; i++)
        if (c->buf[i].host == host)
            return c->buf[i].dev;
    check_fail(__FILE__, __LINE__, "%p is no buffer of this case", host);
}

/* Frees the buffers, and the device when the case has its own. */
static void t_case_close(struct t_case *c)
{
    for (int i = 0; i < c->nbuf; i++) {
        device_free(c->rig->dev, c->buf[i].dev);
        free(c->buf[i].host);
    }
    c->nbuf = 0;
    if (c->rig == &c->own)
        t_close(&c->own);
}

static void t_upload(struct t_case *c)
{
    for (int i = 0; i < c->nbuf; i++)
        CHECK_OK(device_copy(c->rig->dev, c->buf[i].dev, c->buf[i].host, c->buf[i].bytes, DEVICE_H2D));
}

/* The bytes `spans` declare at `ptr` (0: none). */
static uint64_t t_declared(const struct device_span *spans, uint32_t n, const void *ptr)
{
    uint64_t bytes = 0;
    for (uint32_t i = 0; i < n; i++)
        if (spans[i].ptr == ptr)
            bytes += spans[i].bytes;
    return bytes;
}

/* The spans kernel `id` declares are the case's buffers, whole, each read
 * and written as its role says, and nothing else. */
static void t_check_spans(struct t_case *c, enum kernel_id id, uint64_t n, const union kernel_args *args)
{
    struct device_op op = {.kind = DEVICE_OP_KERNEL, .kernel = id, .n = n, .args = *args};
    device_kernel_spans(&op);
    uint32_t reads = 0, writes = 0;
    for (int i = 0; i < c->nbuf; i++) {
        const struct t_buf *b = &c->buf[i];
        uint64_t want_r = b->role != T_WRITE ? b->bytes : 0, want_w = b->role != T_READ ? b->bytes : 0;
        uint64_t got_r = t_declared(op.reads, op.nreads, b->dev), got_w = t_declared(op.writes, op.nwrites, b->dev);
        CHECK_MSG(got_r == want_r && got_w == want_w,
                  "kernel '%s': buffer '%s' (%llu bytes) declared read for %llu and written for %llu bytes, "
                  "expected %llu and %llu", device_kernel_name(id), b->name, (unsigned long long)b->bytes,
                  (unsigned long long)got_r, (unsigned long long)got_w, (unsigned long long)want_r,
                  (unsigned long long)want_w);
        reads += want_r != 0;
        writes += want_w != 0;
    }
    CHECK_MSG(op.nreads == reads && op.nwrites == writes,
              "kernel '%s' declares %u read and %u write spans; its buffers are %u and %u", device_kernel_name(id),
              op.nreads, op.nwrites, reads, writes);
}

/* Uploads every buffer, checks the spans, runs kernel `id` over n elements
 * and waits for it. The caller then runs its twin on the host buffers. */
static void t_run_kernel(struct t_case *c, enum kernel_id id, uint64_t n, const union kernel_args *args)
{
    t_upload(c);
    t_check_spans(c, id, n, args);
    CHECK_OK(device_kernel(c->rig->s, id, n, args, NULL, -1));
    CHECK_OK(device_stream_synchronize(c->rig->s));
}

/* How far a GPU's result may be from the twin's (the simulated device: 0,
 * the same bits). float: units in the last place; double: absolute. */
struct t_tol {
    int f32_ulps;
    double f64_abs;
};

static const struct t_tol t_exact = {0, 0};

/* The element-wise float kernels are exact on a GPU too: nvcc builds them
 * with -fmad=false (no fused multiply-add the source does not write), and
 * +, -, x, / and sqrtf are correctly rounded IEEE operations there
 * (-prec-div, -prec-sqrt); sums in double run in the same order on both. */
static struct t_tol t_tol_for(struct t_tol gpu) { return t_on_sim() ? t_exact : gpu; }

/* float's bits as an integer that orders like the values: neighbours differ by 1. */
static int64_t t_f32_order(float f)
{
    int32_t i;
    memcpy(&i, &f, sizeof i);
    return i < 0 ? (int64_t)INT32_MIN - i : i;
}

static void t_describe(enum t_type type, const void *p, uint64_t i, char *out, size_t len)
{
    const uint8_t *at = (const uint8_t *)p + i * t_type_size[type];
    switch (type) {
    case T_U8: snprintf(out, len, "%u", *at); break;
    case T_U16: { uint16_t v; memcpy(&v, at, 2); snprintf(out, len, "0x%04x", v); break; }
    case T_I32: { int32_t v; memcpy(&v, at, 4); snprintf(out, len, "%d", v); break; }
    case T_I64: { int64_t v; memcpy(&v, at, 8); snprintf(out, len, "%lld", (long long)v); break; }
    case T_F32: {
        float v;
        uint32_t u;
        memcpy(&v, at, 4);
        memcpy(&u, at, 4);
        snprintf(out, len, "%.9g (0x%08x)", v, u);
        break;
    }
    case T_F64: { double v; memcpy(&v, at, 8); snprintf(out, len, "%.17g", v); break; }
    case T_BYTES: snprintf(out, len, "0x%02x", *at); break;
    }
}

/* Element i agrees within tol: the same bits, or (a GPU) within tol. */
static int t_agrees(enum t_type type, const void *got, const void *want, uint64_t i, struct t_tol tol)
{
    size_t sz = t_type_size[type];
    const uint8_t *g = (const uint8_t *)got + i * sz, *w = (const uint8_t *)want + i * sz;
    if (memcmp(g, w, sz) == 0)
        return 1;
    if (type == T_F32 && tol.f32_ulps > 0) {
        float fg, fw;
        memcpy(&fg, g, 4);
        memcpy(&fw, w, 4);
        int64_t d = t_f32_order(fg) - t_f32_order(fw);
        return !isnan(fg) && !isnan(fw) && llabs(d) <= tol.f32_ulps;
    }
    if (type == T_F64 && tol.f64_abs > 0) {
        double dg, dw;
        memcpy(&dg, g, 8);
        memcpy(&dw, w, 8);
        return fabs(dg - dw) <= tol.f64_abs;
    }
    return 0;
}

/* Reads every buffer back and compares it with the twin's. */
static void t_check(struct t_case *c, struct t_tol tol)
{
    for (int k = 0; k < c->nbuf; k++) {
        const struct t_buf *b = &c->buf[k];
        void *got = malloc(b->bytes);
        CHECK(got);
        CHECK_OK(device_copy(c->rig->dev, got, b->dev, b->bytes, DEVICE_D2H));
        for (uint64_t i = 0; i < b->count; i++) {
            if (t_agrees(b->type, got, b->host, i, b->role == T_READ ? t_exact : tol))
                continue;
            char g[64], w[64];
            t_describe(b->type, got, i, g, sizeof g);
            t_describe(b->type, b->host, i, w, sizeof w);
            check_fail(__FILE__, __LINE__, "%s: buffer '%s'%s, element %llu: got %s, the twin's %s", t_backend(),
                       b->name, b->role == T_READ ? " (only read)" : "", (unsigned long long)i, g, w);
        }
        free(got);
    }
}

static void t_finish(struct t_case *c, struct t_tol tol)
{
    t_check(c, tol);
    t_case_close(c);
}

/* ---- data --------------------------------------------------------------------------------- */

static uint64_t t_state = 1;

static void t_seed(uint64_t seed) { t_state = seed * 0x9e3779b97f4a7c15ull + 1; }

/* Uniform in [lo, hi): xorshift64*, the top 24 bits. */
static float t_uniform(float lo, float hi)
{
    t_state ^= t_state >> 12;
    t_state ^= t_state << 25;
    t_state ^= t_state >> 27;
    uint64_t r = t_state * 0x2545f4914f6cdd1dull;
    return lo + (hi - lo) * (float)(r >> 40) * 0x1p-24f;
}

static void t_fill(float *x, uint64_t n, float lo, float hi)
{
    for (uint64_t i = 0; i < n; i++)
        x[i] = t_uniform(lo, hi);
}

/* The values an element-wise kernel must get right besides the ordinary
 * ones: both zeros, the smallest subnormals, the largest finite, infinities. */
static const float t_specials[] = {0.0f, -0.0f, 0x1p-149f, -0x1p-149f, FLT_MIN, -FLT_MIN, FLT_MAX, -FLT_MAX,
                                   INFINITY, -INFINITY};
#define T_NSPECIALS (sizeof t_specials / sizeof t_specials[0])

static void t_fill_specials(float *x, uint64_t n, float lo, float hi)
{
    t_fill(x, n, lo, hi);
    for (uint64_t i = 0; i < T_NSPECIALS && i * 97 < n; i++)
        x[i * 97] = t_specials[i];
}

static void t_fill_nan(float *x, uint64_t n)
{
    for (uint64_t i = 0; i < n; i++)
        x[i] = NAN;
}

/* ---- kernels: input and forward ----------------------------------------------------------- */

TEST(bytes_to_float)
{
    struct t_case c;
    T_CASE_OPEN(&c);
    const uint64_t n = 1000;
    uint8_t *src = t_buf(&c, "pixels", T_READ, T_U8, n);
    float *dst = t_buf(&c, "input", T_WRITE, T_F32, n);
    for (uint64_t i = 0; i < n; i++)
        src[i] = (uint8_t)(i * 37); /* every byte value */
    t_fill_nan(dst, n);
    union kernel_args a = {.bytes_to_float = {.dst = t_dev(&c, dst), .src = t_dev(&c, src)}};
    t_run_kernel(&c, KERNEL_bytes_to_float, n, &a);
    /* In double, then rounded: the same as float's correctly rounded
     * division, since 53 >= 2 x 24 + 2 bits make the double rounding
     * innocuous (see base/half.h). */
    for (uint64_t i = 0; i < n; i++)
        dst[i] = (float)((double)src[i] / 255.0);
    t_finish(&c, t_tol_for(t_exact));
}

TEST(bias_rows)
{
    struct t_case c;
    T_CASE_OPEN(&c);
    const uint32_t rows = 7, cols = 5; /* unequal, so a row taken for a column shows */
    float *z = t_buf(&c, "Z", T_WRITE, T_F32, rows * cols);
    float *bias = t_buf(&c, "bias", T_READ, T_F32, rows);
    t_seed(2);
    t_fill_nan(z, rows * cols);
    t_fill(bias, rows, -1, 1);
    union kernel_args a = {.bias_rows = {.z = t_dev(&c, z), .bias = t_dev(&c, bias), .cols = cols}};
    t_run_kernel(&c, KERNEL_bias_rows, rows * cols, &a);
    for (uint32_t j = 0; j < rows; j++)
        for (uint32_t b = 0; b < cols; b++)
            z[j * cols + b] = bias[j];
    t_finish(&c, t_tol_for(t_exact));
}

/* Past a million elements: a GPU's grid (at most 1024 blocks of 256
 * threads) strides over it several times. */
TEST(relu)
{
    struct t_case c;
    T_CASE_OPEN(&c);
    const uint64_t n = (1u << 20) + 7;
    float *z = t_buf(&c, "Z", T_UPDATE, T_F32, n);
    t_seed(3);
    t_fill_specials(z, n, -1, 1);
    union kernel_args a = {.relu = {.z = t_dev(&c, z)}};
    t_run_kernel(&c, KERNEL_relu, n, &a);
    for (uint64_t i = 0; i < n; i++)
        if (!(z[i] > 0)) /* -0 too: ReLU's output is +0 wherever it cuts */
            z[i] = 0.0f;
    t_finish(&c, t_tol_for(t_exact));
}

/* BatchNorm1d's statistics, in training (batch statistics, running ones
 * moved) and in evaluation (running ones applied, the batch not read). */
static void t_bn_stats(int train)
{
    struct t_case c;
    T_CASE_OPEN(&c);
    const uint32_t features = 6, batch = 9;
    const double momentum = 0.1, eps = 1e-5;
    float *z = train ? t_buf(&c, "Z", T_READ, T_F32, features * batch) : NULL;
    enum t_role running = train ? T_UPDATE : T_READ;
    float *rmean = t_buf(&c, "running mean", running, T_F32, features);
    float *rvar = t_buf(&c, "running var", running, T_F32, features);
    float *mean = t_buf(&c, "mean", T_WRITE, T_F32, features);
    float *invstd = t_buf(&c, "invstd", T_WRITE, T_F32, features);
    t_seed(4);
    if (z)
        t_fill(z, features * batch, -3, 5);
    t_fill(rmean, features, -0.5f, 0.5f);
    t_fill(rvar, features, 0.5f, 2);
    t_fill_nan(mean, features);
    t_fill_nan(invstd, features);
    union kernel_args a = {.bn_stats = {.z = z ? t_dev(&c, z) : NULL, .running_mean = t_dev(&c, rmean),
                                        .running_var = t_dev(&c, rvar), .mean = t_dev(&c, mean),
                                        .invstd = t_dev(&c, invstd), .batch = batch, .train = train,
                                        .momentum = momentum, .eps = eps}};
    t_run_kernel(&c, KERNEL_bn_stats, features, &a);
    for (uint32_t j = 0; j < features; j++) {
        double mu = rmean[j], var = rvar[j];
        if (train) { /* two passes in double; the biased variance normalises, the unbiased one is kept */
            double sum = 0, ss = 0;
            for (uint32_t b = 0; b < batch; b++)
                sum += z[j * batch + b];
            mu = sum / batch;
            for (uint32_t b = 0; b < batch; b++) {
                double d = z[j * batch + b] - mu;
                ss += d * d;
            }
            var = ss / batch;
            rmean[j] = (float)(momentum * mu + (1 - momentum) * rmean[j]);
            rvar[j] = (float)(momentum * (ss / (batch - 1)) + (1 - momentum) * rvar[j]);
        }
        mean[j] = (float)mu;
        invstd[j] = (float)(1.0 / sqrt(var + eps));
    }
    /* double +, x, / and sqrt are correctly rounded on a GPU as here, in the same order: exact */
    t_finish(&c, t_tol_for(t_exact));
}

TEST(bn_stats_train) { t_bn_stats(1); }
TEST(bn_stats_eval) { t_bn_stats(0); }

TEST(bn_relu)
{
    struct t_case c;
    T_CASE_OPEN(&c);
    const uint32_t features = 5, batch = 8;
    float *z = t_buf(&c, "Z", T_UPDATE, T_F32, features * batch);
    float *xhat = t_buf(&c, "xhat", T_WRITE, T_F32, features * batch);
    float *mean = t_buf(&c, "mean", T_READ, T_F32, features);
    float *invstd = t_buf(&c, "invstd", T_READ, T_F32, features);
    float *gamma = t_buf(&c, "gamma", T_READ, T_F32, features);
    float *beta = t_buf(&c, "beta", T_READ, T_F32, features);
    t_seed(5);
    t_fill(z, features * batch, -3, 3);
    t_fill_nan(xhat, features * batch);
    t_fill(mean, features, -1, 1);
    t_fill(invstd, features, 0.5f, 2);
    t_fill(gamma, features, 0.5f, 1.5f);
    t_fill(beta, features, -0.5f, 0.5f);
    union kernel_args a = {.bn_relu = {.z = t_dev(&c, z), .xhat = t_dev(&c, xhat), .mean = t_dev(&c, mean),
                                       .invstd = t_dev(&c, invstd), .gamma = t_dev(&c, gamma),
                                       .beta = t_dev(&c, beta), .batch = batch}};
    t_run_kernel(&c, KERNEL_bn_relu, features * batch, &a);
    for (uint32_t j = 0; j < features; j++)
        for (uint32_t b = 0; b < batch; b++) {
            float *zz = &z[j * batch + b];
            float x = (*zz - mean[j]) * invstd[j];
            float y = x * gamma[j] + beta[j];
            xhat[j * batch + b] = x;
            *zz = y > 0 ? y : 0.0f;
        }
    t_finish(&c, t_tol_for(t_exact));
}

/* ---- kernels: the loss ------------------------------------------------------------------------ */

/* Softmax cross-entropy, with the gradient (train) or without (dz NULL).
 * Samples 2 (two largest logits equal: the first is the prediction, the
 * label the second), 4 (label -1) and 7 (label = classes). */
static void t_softmax_xent(int train)
{
    struct t_case c;
    T_CASE_OPEN(&c);
    const uint32_t classes = 10, batch = 12;
    const double scale = 0.5 / batch;
    float *z = t_buf(&c, "logits", T_READ, T_F32, classes * batch);
    float *dz = train ? t_buf(&c, "dlogits", T_WRITE, T_F32, classes * batch) : NULL;
    int64_t *labels = t_buf(&c, "labels", T_READ, T_I64, batch);
    double *loss = t_buf(&c, "losses", T_WRITE, T_F64, batch);
    int32_t *correct = t_buf(&c, "correct", T_WRITE, T_I32, batch);
    t_seed(6);
    t_fill(z, classes * batch, -4, 4);
    for (uint32_t b = 0; b < batch; b++) {
        labels[b] = (int64_t)((b * 7) % classes);
        loss[b] = -99; /* what a bad label leaves alone */
        correct[b] = 99;
    }
    z[3 * batch + 2] = z[6 * batch + 2] = 9; /* sample 2: classes 3 and 6 tie above every other */
    labels[2] = 6;
    labels[4] = -1;
    labels[7] = classes;
    z[labels[5] * batch + 5] = 9; /* sample 5 predicted right */
    if (dz)
        t_fill_nan(dz, classes * batch);
    union kernel_args a = {.softmax_xent = {.z = t_dev(&c, z), .dz = dz ? t_dev(&c, dz) : NULL,
                                            .labels = t_dev(&c, labels), .loss = t_dev(&c, loss),
                                            .correct = t_dev(&c, correct), .batch = batch, .classes = classes,
                                            .grad_scale = scale}};
    t_run_kernel(&c, KERNEL_softmax_xent, batch, &a);
    for (uint32_t b = 0; b < batch; b++) {
        if (labels[b] < 0 || labels[b] >= classes) {
            correct[b] = -1;
            continue;
        }
        uint32_t arg = 0;
        for (uint32_t k = 1; k < classes; k++)
            if (z[k * batch + b] > z[arg * batch + b])
                arg = k;
        double top = z[arg * batch + b], sum = 0;
        for (uint32_t k = 0; k < classes; k++)
            sum += exp(z[k * batch + b] - top);
        double lse = top + log(sum);
        loss[b] = lse - z[labels[b] * batch + b];
        correct[b] = arg == labels[b];
        for (uint32_t k = 0; dz && k < classes; k++)
            dz[k * batch + b] = (float)((exp(z[k * batch + b] - lse) - (k == labels[b] ? 1 : 0)) * scale);
    }
    CHECK_EQ(correct[2], 0);
    CHECK_EQ(correct[5], 1);
    /* A GPU's exp and log in double are within 1 ulp (CUDA's documented
     * bound), glibc's within 1: each term of the sum (<= 10 terms in
     * [0, 1]) and the log may differ by 2 ulp, which leaves the loss (|lse|
     * below 7 here) within a few ulp of 8: 1e-13 is 100 of them. The
     * gradient is that double rounded to float: at most the neighbouring
     * float. The prediction compares floats only: exact. */
    t_finish(&c, t_tol_for((struct t_tol){.f32_ulps = 1, .f64_abs = 1e-13}));
}

TEST(softmax_xent_train) { t_softmax_xent(1); }
TEST(softmax_xent_eval) { t_softmax_xent(0); }

/* The losses summed in sample order; a bad label (correct -1) stops the sum
 * and is reported. */
static void t_loss_sum(int bad)
{
    struct t_case c;
    T_CASE_OPEN(&c);
    const uint32_t batch = 9;
    double *loss = t_buf(&c, "losses", T_READ, T_F64, batch);
    int32_t *correct = t_buf(&c, "correct", T_READ, T_I32, batch);
    int64_t *labels = t_buf(&c, "labels", T_READ, T_I64, batch);
    struct kernel_loss_result *out = t_buf(&c, "loss result", T_WRITE, T_BYTES, sizeof *out);
    t_seed(7);
    for (uint32_t b = 0; b < batch; b++) {
        loss[b] = t_uniform(0, 3) + 1e-9 * b; /* not representable in float: the sum is in double */
        correct[b] = (int32_t)(b % 3 == 0);
        labels[b] = b;
    }
    if (bad) {
        correct[3] = -1;
        labels[3] = 42;
    }
    memset(out, 0x5a, sizeof *out);
    union kernel_args a = {.loss_sum = {.loss = t_dev(&c, loss), .correct = t_dev(&c, correct),
                                        .labels = t_dev(&c, labels), .batch = batch, .out = t_dev(&c, out)}};
    t_run_kernel(&c, KERNEL_loss_sum, 1, &a);
    struct kernel_loss_result r = {.loss_sum = 0, .correct = 0, .bad_sample = -1, .bad_label = 0};
    for (uint32_t b = 0; b < batch && r.bad_sample < 0; b++) {
        if (correct[b] < 0) {
            r.bad_sample = b;
            r.bad_label = labels[b];
        } else {
            r.loss_sum += loss[b];
            r.correct += correct[b];
        }
    }
    *out = r;
    t_finish(&c, t_tol_for(t_exact)); /* one thread adds in sample order: the same bits everywhere */
}

TEST(loss_sum) { t_loss_sum(0); }
TEST(loss_sum_reports_a_bad_label) { t_loss_sum(1); }

/* ---- kernels: backward ------------------------------------------------------------------------- */

TEST(relu_backward)
{
    struct t_case c;
    T_CASE_OPEN(&c);
    const uint64_t n = 1000;
    float *d = t_buf(&c, "dZ", T_UPDATE, T_F32, n);
    float *act = t_buf(&c, "activations", T_READ, T_F32, n);
    t_seed(8);
    t_fill(d, n, -1, 1);
    t_fill_specials(act, n, -1, 1);
    union kernel_args a = {.relu_backward = {.d = t_dev(&c, d), .act = t_dev(&c, act)}};
    t_run_kernel(&c, KERNEL_relu_backward, n, &a);
    for (uint64_t i = 0; i < n; i++)
        if (!(act[i] > 0))
            d[i] = 0.0f;
    t_finish(&c, t_tol_for(t_exact));
}

/* The bias gradient: each row summed in double, stored or added. */
static void t_row_sum(int accumulate)
{
    struct t_case c;
    T_CASE_OPEN(&c);
    const uint32_t rows = 6, batch = 11;
    float *dst = t_buf(&c, "dbias", accumulate ? T_UPDATE : T_WRITE, T_F32, rows);
    float *d = t_buf(&c, "dZ", T_READ, T_F32, rows * batch);
    t_seed(9);
    t_fill(dst, rows, -1, 1);
    t_fill(d, rows * batch, -1, 1);
    union kernel_args a = {.row_sum = {.dst = t_dev(&c, dst), .d = t_dev(&c, d), .batch = batch,
                                       .accumulate = accumulate}};
    t_run_kernel(&c, KERNEL_row_sum, rows, &a);
    for (uint32_t j = 0; j < rows; j++) {
        double s = 0;
        for (uint32_t b = 0; b < batch; b++)
            s += d[j * batch + b];
        dst[j] = accumulate ? dst[j] + (float)s : (float)s;
    }
    t_finish(&c, t_tol_for(t_exact));
}

TEST(row_sum) { t_row_sum(0); }
TEST(row_sum_accumulating) { t_row_sum(1); }

/* The fixed tree, defined by its subtrees: the even slices' sum plus the
 * odd ones' (the split that gives rank r of W the slices t = r mod W), the
 * kernels' loop written another way. */
static float t_tree(const float v[8], uint32_t first, uint32_t n, uint32_t step)
{
    if (n == 1) /* n a power of two from at most 8 down: first stays below 8 */
        return first < 8 ? v[first] : NAN;
    return t_tree(v, first, n / 2, step * 2) + t_tree(v, first + step, n / 2, step * 2);
}

/* The bias gradient by atoms: each block of columns summed in double,
 * rounded, then the tree; for 1, 2, 4 and 8 atoms. */
static void t_row_sum_atoms(uint32_t atoms)
{
    struct t_case c;
    T_CASE_OPEN(&c);
    const uint32_t rows = 5, width = 3, batch = atoms * width;
    float *dst = t_buf(&c, "dbias", T_WRITE, T_F32, rows);
    float *d = t_buf(&c, "dZ", T_READ, T_F32, rows * batch);
    t_seed(19 + atoms);
    t_fill(dst, rows, -1, 1);
    t_fill(d, rows * batch, -1, 1);
    for (uint32_t k = 0; k < rows * batch; k++) /* each block's sum of another magnitude, 2^-24 to 2^24 */
        d[k] = ldexpf(d[k], (int)(((k % batch) / width * 7 + k / batch * 3) % 49) - 24);
    union kernel_args a = {.row_sum_atoms = {.dst = t_dev(&c, dst), .d = t_dev(&c, d), .batch = batch,
                                             .atoms = atoms}};
    t_run_kernel(&c, KERNEL_row_sum_atoms, rows, &a);
    for (uint32_t j = 0; j < rows; j++) {
        float v[8];
        for (uint32_t t = 0; t < atoms; t++) {
            double s = 0;
            for (uint32_t b = 0; b < width; b++)
                s += d[j * batch + t * width + b];
            v[t] = (float)s;
        }
        dst[j] = t_tree(v, 0, atoms, 1);
    }
    t_finish(&c, t_tol_for(t_exact));
}

TEST(row_sum_atoms) { for (uint32_t atoms = 1; atoms <= 8; atoms *= 2) t_row_sum_atoms(atoms); }

/* The tree over slices of a buffer, for 1, 2, 4 and 8 slices. */
static void t_tree_sum(uint32_t slices)
{
    struct t_case c;
    T_CASE_OPEN(&c);
    const uint64_t n = 7, stride = 9;
    float *dst = t_buf(&c, "sum", T_WRITE, T_F32, n);
    float *src = t_buf(&c, "slices", T_READ, T_F32, (slices - 1) * stride + n);
    t_seed(29 + slices);
    t_fill(dst, n, -1, 1);
    t_fill(src, (slices - 1) * stride + n, -1, 1);
    for (uint64_t k = 0; k < (slices - 1) * stride + n; k++) /* magnitudes 2^-24 to 2^24: any other order rounds
                                                                * differently somewhere */
        src[k] = ldexpf(src[k], (int)((k * 7) % 49) - 24);
    union kernel_args a = {.tree_sum = {.dst = t_dev(&c, dst), .src = t_dev(&c, src), .stride = stride,
                                        .slices = slices}};
    t_run_kernel(&c, KERNEL_tree_sum, n, &a);
    for (uint64_t i = 0; i < n; i++) {
        float v[8];
        for (uint32_t t = 0; t < slices; t++)
            v[t] = src[t * stride + i];
        dst[i] = t_tree(v, 0, slices, 1);
    }
    t_finish(&c, t_tol_for(t_exact));
}

TEST(tree_sum) { for (uint32_t slices = 1; slices <= 8; slices *= 2) t_tree_sum(slices); }

/* BatchNorm1d's backward: dgamma, dbeta (stored or added) and dZ in place. */
static void t_bn_backward(int accumulate)
{
    struct t_case c;
    T_CASE_OPEN(&c);
    const uint32_t features = 4, batch = 7;
    enum t_role grads = accumulate ? T_UPDATE : T_WRITE;
    float *d = t_buf(&c, "dY", T_UPDATE, T_F32, features * batch);
    float *xhat = t_buf(&c, "xhat", T_READ, T_F32, features * batch);
    float *gamma = t_buf(&c, "gamma", T_READ, T_F32, features);
    float *invstd = t_buf(&c, "invstd", T_READ, T_F32, features);
    float *dgamma = t_buf(&c, "dgamma", grads, T_F32, features);
    float *dbeta = t_buf(&c, "dbeta", grads, T_F32, features);
    t_seed(10);
    t_fill(d, features * batch, -1, 1);
    t_fill(xhat, features * batch, -2, 2);
    t_fill(gamma, features, 0.5f, 1.5f);
    t_fill(invstd, features, 0.5f, 2);
    t_fill(dgamma, features, -1, 1);
    t_fill(dbeta, features, -1, 1);
    union kernel_args a = {.bn_backward = {.d = t_dev(&c, d), .xhat = t_dev(&c, xhat), .gamma = t_dev(&c, gamma),
                                           .invstd = t_dev(&c, invstd), .dgamma = t_dev(&c, dgamma),
                                           .dbeta = t_dev(&c, dbeta), .batch = batch, .accumulate = accumulate}};
    t_run_kernel(&c, KERNEL_bn_backward, features, &a);
    for (uint32_t j = 0; j < features; j++) {
        float *dy = &d[j * batch];
        const float *xh = &xhat[j * batch];
        double sum_dy = 0, sum_dy_xhat = 0;
        for (uint32_t b = 0; b < batch; b++) {
            sum_dy += dy[b];
            sum_dy_xhat += (double)dy[b] * xh[b];
        }
        float db = (float)sum_dy, dg = (float)sum_dy_xhat;
        float k = gamma[j] * invstd[j] * (1.0f / (float)batch);
        for (uint32_t b = 0; b < batch; b++) /* dZ = gamma invstd / B (B dY - dbeta - xhat dgamma) */
            dy[b] = k * ((float)batch * dy[b] - db - xh[b] * dg);
        dbeta[j] = accumulate ? dbeta[j] + db : db;
        dgamma[j] = accumulate ? dgamma[j] + dg : dg;
    }
    t_finish(&c, t_tol_for(t_exact));
}

TEST(bn_backward) { t_bn_backward(0); }
TEST(bn_backward_accumulating) { t_bn_backward(1); }

/* ---- kernels: the optimizer ------------------------------------------------------------------- */

/* torch.optim.SGD's rule on one element (torch/optim/sgd.py):
 *   d = g + wd p;  buf = d on the first step, else momentum buf + (1 - dampening) d;
 *   d = nesterov ? d + momentum buf : buf;  p = p - lr d. */
static void t_sgd(int with_momentum, int first, int nesterov, float weight_decay)
{
    struct t_case c;
    T_CASE_OPEN(&c);
    const uint64_t n = 1000;
    const float lr = 0.05f, momentum = 0.9f, one_minus_dampening = 1 - 0.1f;
    float *p = t_buf(&c, "weights", T_UPDATE, T_F32, n);
    float *g = t_buf(&c, "gradient", T_READ, T_F32, n);
    float *buf = with_momentum ? t_buf(&c, "momentum", T_UPDATE, T_F32, n) : NULL;
    t_seed(11);
    t_fill(p, n, -1, 1);
    t_fill(g, n, -0.1f, 0.1f);
    if (buf)
        t_fill(buf, n, -0.1f, 0.1f);
    union kernel_args a = {.sgd = {.p = t_dev(&c, p), .g = t_dev(&c, g), .buf = buf ? t_dev(&c, buf) : NULL,
                                   .lr = lr, .momentum = momentum, .weight_decay = weight_decay,
                                   .one_minus_dampening = one_minus_dampening, .nesterov = nesterov,
                                   .first = first}};
    t_run_kernel(&c, KERNEL_sgd, n, &a);
    for (uint64_t i = 0; i < n; i++) {
        float step = g[i];
        if (weight_decay != 0)
            step += weight_decay * p[i];
        if (buf) {
            buf[i] = first ? step : momentum * buf[i] + one_minus_dampening * step;
            step = nesterov ? step + momentum * buf[i] : buf[i];
        }
        p[i] -= lr * step;
    }
    t_finish(&c, t_tol_for(t_exact));
}

TEST(sgd_plain) { t_sgd(0, 0, 0, 0); }
TEST(sgd_momentum_first_step_weight_decay) { t_sgd(1, 1, 0, 1e-2f); }
TEST(sgd_nesterov) { t_sgd(1, 0, 1, 0); }

/* torch.optim.Adam's rule on one element (torch/optim/adam.py, the
 * single-tensor path), step 3; the bias corrections in double as Python
 * computes them:
 *   d = g + wd p;  m = b1 m + (1 - b1) d;  v = b2 v + (1 - b2) d d;
 *   p = p + (-lr / (1 - b1^t)) m / (sqrt(v) / sqrt(1 - b2^t) + eps). */
static void t_adam(float weight_decay)
{
    struct t_case c;
    T_CASE_OPEN(&c);
    const uint64_t n = 1000;
    const double lr = 1e-3, beta1 = 0.9, beta2 = 0.999;
    const int t = 3;
    const float b1 = (float)beta1, b2 = (float)beta2, eps = 1e-8f;
    const float step_size = (float)(lr / (1 - pow(beta1, t))), bc2_sqrt = (float)sqrt(1 - pow(beta2, t));
    float *p = t_buf(&c, "weights", T_UPDATE, T_F32, n);
    float *g = t_buf(&c, "gradient", T_READ, T_F32, n);
    float *m1 = t_buf(&c, "exp_avg", T_UPDATE, T_F32, n);
    float *m2 = t_buf(&c, "exp_avg_sq", T_UPDATE, T_F32, n);
    t_seed(12);
    t_fill(p, n, -1, 1);
    t_fill(g, n, -0.1f, 0.1f);
    t_fill(m1, n, -0.01f, 0.01f);
    t_fill(m2, n, 0, 1e-4f);
    union kernel_args a = {.adam = {.p = t_dev(&c, p), .g = t_dev(&c, g), .m1 = t_dev(&c, m1), .m2 = t_dev(&c, m2),
                                    .beta1 = b1, .beta2 = b2, .one_minus_beta1 = 1 - b1, .one_minus_beta2 = 1 - b2,
                                    .weight_decay = weight_decay, .eps = eps, .step_size = step_size,
                                    .bc2_sqrt = bc2_sqrt}};
    t_run_kernel(&c, KERNEL_adam, n, &a);
    for (uint64_t i = 0; i < n; i++) {
        float d = weight_decay != 0 ? g[i] + weight_decay * p[i] : g[i];
        m1[i] = b1 * m1[i] + (1 - b1) * d;
        m2[i] = b2 * m2[i] + (1 - b2) * d * d;
        p[i] = p[i] + (-step_size * m1[i]) / (sqrtf(m2[i]) / bc2_sqrt + eps);
    }
    t_finish(&c, t_tol_for(t_exact));
}

TEST(adam) { t_adam(0); }
TEST(adam_weight_decay) { t_adam(1e-2f); }

/* device_kernel_flushing: the simulated device runs Adam with subnormals
 * flushed (FTZ and DAZ) and puts the CPU back as it was for the next op; a
 * GPU keeps subnormals. A moment of 2^-140 (subnormal) with a zero
 * gradient: flushed, it is 0; kept, it decays to 0.9 x 2^-140. */
TEST(adam_flushing_subnormals)
{
    struct t_case c;
    T_CASE_OPEN(&c);
    float *p = t_buf(&c, "weights", T_UPDATE, T_F32, 1);
    float *g = t_buf(&c, "gradient", T_READ, T_F32, 1);
    float *m1 = t_buf(&c, "exp_avg", T_UPDATE, T_F32, 1);
    float *m2 = t_buf(&c, "exp_avg_sq", T_UPDATE, T_F32, 1);
    float *x = t_buf(&c, "after", T_UPDATE, T_F32, 1);
    *p = 1;
    *m1 = 0x1p-140f;
    *x = 0x1p-140f;
    t_upload(&c);
    union kernel_args a = {.adam = {.p = t_dev(&c, p), .g = t_dev(&c, g), .m1 = t_dev(&c, m1), .m2 = t_dev(&c, m2),
                                    .beta1 = 0.9f, .beta2 = 0.999f, .one_minus_beta1 = 0.1f,
                                    .one_minus_beta2 = 0.001f, .eps = 1e-8f, .step_size = 1e-3f, .bc2_sqrt = 1}};
    CHECK_OK(device_kernel_flushing(c.rig->s, KERNEL_adam, 1, &a, NULL, -1));
    union kernel_args half = {.divide = {.x = t_dev(&c, x), .w = 2}}; /* not flushing: 2^-141 */
    CHECK_OK(device_kernel(c.rig->s, KERNEL_divide, 1, &half, NULL, -1));
    CHECK_OK(device_stream_synchronize(c.rig->s));
    float got_m1, got_x;
    CHECK_OK(device_copy(c.rig->dev, &got_m1, t_dev(&c, m1), sizeof got_m1, DEVICE_D2H));
    CHECK_OK(device_copy(c.rig->dev, &got_x, t_dev(&c, x), sizeof got_x, DEVICE_D2H));
    float kept = 0.9f * 0x1p-140f;
    CHECK_MSG(got_m1 == (t_on_sim() ? 0.0f : kept), "%s: Adam's moment of 2^-140 became %g", t_backend(),
              (double)got_m1);
    CHECK_MSG(got_x == 0x1p-141f, "%s: the next op flushed too: 2^-140 / 2 = %g", t_backend(), (double)got_x);
    t_case_close(&c);
}

/* ---- kernels: the reducer --------------------------------------------------------------------- */

TEST(divide)
{
    struct t_case c;
    T_CASE_OPEN(&c);
    const uint64_t n = 1000;
    const float w = 3; /* three ranks: most quotients are inexact */
    float *x = t_buf(&c, "gradient", T_UPDATE, T_F32, n);
    t_seed(13);
    t_fill_specials(x, n, -10, 10);
    union kernel_args a = {.divide = {.x = t_dev(&c, x), .w = w}};
    t_run_kernel(&c, KERNEL_divide, n, &a);
    for (uint64_t i = 0; i < n; i++)
        x[i] /= w;
    t_finish(&c, t_tol_for(t_exact));
}

/* fp16_compress_hook / bf16_compress_hook's rounding: 16(16(g) / w). The
 * conversions are base/half.h's (tests/unit/test_half.c pins them against
 * PyTorch's); what is checked here is the kernel's composition. */
static void t_pack16(int bf16)
{
    struct t_case c;
    T_CASE_OPEN(&c);
    const uint64_t n = 1000;
    const float w = 3;
    uint16_t *h = t_buf(&c, "packed", T_WRITE, T_U16, n);
    float *g = t_buf(&c, "gradient", T_READ, T_F32, n);
    t_seed(14);
    t_fill_specials(g, n, -1e5f, 1e5f); /* beyond float16's 65504 */
    for (uint64_t i = 1; i < n; i += 5)
        g[i] *= 1e-9f; /* float16's subnormals and below */
    g[3] = NAN;
    memset(h, 0xee, n * sizeof *h);
    union kernel_args a = {.pack16 = {.h = t_dev(&c, h), .g = t_dev(&c, g), .w = w, .bf16 = bf16}};
    t_run_kernel(&c, KERNEL_pack16, n, &a);
    for (uint64_t i = 0; i < n; i++)
        h[i] = bf16 ? half_bf16_from_float(half_bf16_to_float(half_bf16_from_float(g[i])) / w)
                    : half_from_float(half_to_float(half_from_float(g[i])) / w);
    t_finish(&c, t_tol_for(t_exact));
}

TEST(pack16_float16) { t_pack16(0); }
TEST(pack16_bfloat16) { t_pack16(1); }

/* Every 16-bit pattern widened. */
static void t_unpack16(int bf16)
{
    struct t_case c;
    T_CASE_OPEN(&c);
    const uint64_t n = 65536;
    float *g = t_buf(&c, "gradient", T_WRITE, T_F32, n);
    uint16_t *h = t_buf(&c, "packed", T_READ, T_U16, n);
    for (uint64_t i = 0; i < n; i++)
        h[i] = (uint16_t)i;
    t_fill_nan(g, n);
    union kernel_args a = {.unpack16 = {.g = t_dev(&c, g), .h = t_dev(&c, h), .bf16 = bf16}};
    t_run_kernel(&c, KERNEL_unpack16, n, &a);
    for (uint64_t i = 0; i < n; i++)
        g[i] = bf16 ? half_bf16_to_float(h[i]) : half_to_float(h[i]);
    t_finish(&c, t_tol_for(t_exact));
}

TEST(unpack16_float16) { t_unpack16(0); }
TEST(unpack16_bfloat16) { t_unpack16(1); }

/* ---- kernels: the replica check ------------------------------------------------------------- */

/* The words of chunks 0..n of x[0..count), on the host. */
static void t_hash_host(const float *x, uint64_t count, uint64_t *out)
{
    const struct kernel_hash_chunks a = {.out = out, .x = x, .count = count};
    for (uint64_t i = 0; i * KERNEL_HASH_CHUNK < count; i++)
        kernel_hash_chunks(&a, i);
}

/* The device's words are the host's, bit for bit (a GPU included: integer
 * arithmetic), over two whole chunks and a short third whose tail is not a
 * multiple of the 16 floats a block takes. */
TEST(hash_chunks)
{
    struct t_case c;
    T_CASE_OPEN(&c);
    const uint64_t count = 2 * KERNEL_HASH_CHUNK + 13, n = 3;
    float *x = t_buf(&c, "tensor", T_READ, T_F32, count);
    uint64_t *out = t_buf(&c, "hashes", T_WRITE, T_I64, n);
    t_seed(17);
    t_fill_specials(x, count, -1, 1);
    union kernel_args a = {.hash_chunks = {.out = t_dev(&c, out), .x = t_dev(&c, x), .count = count}};
    t_run_kernel(&c, KERNEL_hash_chunks, n, &a);
    t_hash_host(x, count, out);
    t_finish(&c, t_exact);
}

/* What the replica check relies on: any one bit of any element, in a lane
 * or in a chunk's tail, changes its chunk's word and no other, whatever the
 * floats it shares a lane with (a lane that offset the two floats apart lost
 * a bit beside the one value whose offset bits were 1); so do two signs
 * flipped together (an FNV lane over pairs of floats lost both: the top bit
 * of its product only ever moves itself); -0 is not 0; a tensor one float
 * shorter, or a chunk moved to another place, changes the words. */
TEST(hash_chunks_tells_replicas_apart)
{
    const uint64_t count = KERNEL_HASH_CHUNK + 11;
    float *x = malloc(2 * KERNEL_HASH_CHUNK * sizeof *x); /* room for two whole chunks at the end */
    CHECK(x);
    t_seed(19);
    t_fill(x, count, -1, 1);
    uint64_t ref[2], got[2];
    t_hash_host(x, count, ref);
    const uint64_t at[] = {0, 1, 7, 8, 555, KERNEL_HASH_CHUNK - 1, KERNEL_HASH_CHUNK, count - 1};
    for (size_t k = 0; k < sizeof at / sizeof *at; k++)
        for (int bit = 0; bit < 32; bit++) {
            uint32_t u = half_bits(x[at[k]]);
            x[at[k]] = half_float(u ^ 1u << bit);
            t_hash_host(x, count, got);
            x[at[k]] = half_float(u);
            uint64_t chunk = at[k] / KERNEL_HASH_CHUNK;
            CHECK_MSG(got[chunk] != ref[chunk] && got[1 - chunk] == ref[1 - chunk],
                      "bit %d of element %llu: chunk %llu's word %s, the other's %s", bit, (unsigned long long)at[k],
                      (unsigned long long)chunk, got[chunk] != ref[chunk] ? "changed" : "did not change",
                      got[1 - chunk] == ref[1 - chunk] ? "did not" : "did too");
        }
    /* beside floats whose bits meet the lanes' offsets: 0x7f4a7c14 made a lane of float l and float l + 8
     * offset by 0x9e3779b9 and 0x7f4a7c15 lose bit 0 of float l */
    const uint32_t hostile[] = {0x7f4a7c14u, 0x9e3779b8u, 0x7f4a7c15u, 0x9e3779b9u, 0xffffffffu, 0x80000000u, 0};
    for (size_t h = 0; h < sizeof hostile / sizeof *hostile; h++)
        for (int side = 0; side < 2; side++) {
            float saved[3] = {x[0], x[1], x[8]};
            x[side ? 1 : 8] = half_float(hostile[h]);
            x[side ? 8 : 1] = half_float(hostile[h]);
            uint64_t before[2];
            t_hash_host(x, count, before);
            for (int bit = 0; bit < 32; bit++) {
                uint32_t u = half_bits(x[0]);
                x[0] = half_float(u ^ 1u << bit);
                t_hash_host(x, count, got);
                x[0] = half_float(u);
                CHECK_MSG(got[0] != before[0], "bit %d of element 0 beside floats of bits 0x%08x: its word did not "
                          "change", bit, (unsigned)hostile[h]);
            }
            memcpy(&x[0], saved, 2 * sizeof *x);
            x[8] = saved[2];
        }
    /* two sign bits at once, in every pair of places a lane or a block shares */
    const uint64_t two[][2] = {{0, 1}, {6, 7}, {1, 9}, {8, 24}, {0, 8}, {3, 19},
                               {KERNEL_HASH_CHUNK - 16, KERNEL_HASH_CHUNK - 15}, {KERNEL_HASH_CHUNK - 16, KERNEL_HASH_CHUNK - 1}};
    for (size_t k = 0; k < sizeof two / sizeof *two; k++) {
        x[two[k][0]] = -x[two[k][0]];
        x[two[k][1]] = -x[two[k][1]];
        t_hash_host(x, count, got);
        x[two[k][0]] = -x[two[k][0]];
        x[two[k][1]] = -x[two[k][1]];
        CHECK_MSG(got[0] != ref[0], "the signs of elements %llu and %llu flipped together: chunk 0's word did not "
                  "change", (unsigned long long)two[k][0], (unsigned long long)two[k][1]);
    }
    float zeros[2] = {0.0f, 0.0f}, signed_zeros[2] = {0.0f, -0.0f};
    uint64_t hz, hs;
    t_hash_host(zeros, 2, &hz);
    t_hash_host(signed_zeros, 2, &hs);
    CHECK(hz != hs);
    t_hash_host(x, count - 1, got);
    CHECK_MSG(got[1] != ref[1], "a tensor one float shorter hashes alike");
    memcpy(x + KERNEL_HASH_CHUNK, x, KERNEL_HASH_CHUNK * sizeof *x); /* [a, a]: one chunk at two places */
    t_hash_host(x, 2 * KERNEL_HASH_CHUNK, got);
    CHECK_MSG(got[0] != got[1], "two equal chunks at two places hash alike");
    free(x);
}

/* ---- sgemm ------------------------------------------------------------------------------------- */

/* A column-major matrix of rows x cols stored with leading dimension ld:
 * as many floats as the op may touch, up to its last element. */
static uint64_t t_matrix_floats(int rows, int cols, int ld) { return (uint64_t)(cols - 1) * (uint64_t)ld + (uint64_t)rows; }

/* Random values, NaN in the padding rows (between rows and ld), which the
 * product must neither read nor write. */
static void t_fill_matrix(float *x, int rows, int cols, int ld)
{
    for (int j = 0; j < cols; j++)
        for (int i = 0; i < ld && (uint64_t)j * ld + i < t_matrix_floats(rows, cols, ld); i++)
            x[(uint64_t)j * ld + i] = i < rows ? t_uniform(-1, 1) : NAN;
}

static const char *t_op_name(enum device_transpose t) { return t == DEVICE_OP_T ? "T" : "N"; }

/* C = alpha op(A) op(B) + beta C with cuBLAS's arguments, against
 *   - a naive triple loop in double, within the error bound of a float sum
 *     of k products in any order (Higham, Accuracy and Stability of
 *     Numerical Algorithms, 3.1): |error| <= (k + 3) 2^-24 (|alpha| sum
 *     |a||b| + |beta c|); k for the sum, one rounding each for alpha, beta
 *     and the add, and the reference's own rounding to float. This is the
 *     tolerance on a GPU, where cuBLAS sums in its own order;
 *   - on the simulated device, to the bit, OpenBLAS's row-major call on the
 *     transposed problem: C^T = alpha op(B)^T op(A)^T + beta C^T, which is
 *     what the model relies on (its row-major products are the column-major
 *     products of the transposes).
 * beta = 0 puts NaN in C: BLAS writes C without reading it. */
static void t_gemm(struct t_rig *rig, enum device_transpose ta, enum device_transpose tb, int m, int n, int k, int pad,
                   float alpha, float beta)
{
    struct t_case c;
    t_case_on(&c, rig);
    int arows = ta == DEVICE_OP_N ? m : k, acols = ta == DEVICE_OP_N ? k : m;
    int brows = tb == DEVICE_OP_N ? k : n, bcols = tb == DEVICE_OP_N ? n : k;
    int lda = arows + pad, ldb = brows + pad, ldc = m + pad;
    float *a = t_buf(&c, "A", T_READ, T_F32, t_matrix_floats(arows, acols, lda));
    float *b = t_buf(&c, "B", T_READ, T_F32, t_matrix_floats(brows, bcols, ldb));
    uint64_t cn = t_matrix_floats(m, n, ldc);
    float *cm = t_buf(&c, "C", beta != 0 ? T_UPDATE : T_WRITE, T_F32, cn);
    t_fill_matrix(a, arows, acols, lda);
    t_fill_matrix(b, brows, bcols, ldb);
    t_fill_matrix(cm, m, n, ldc);
    if (beta == 0)
        t_fill_nan(cm, cn);
    t_upload(&c);
    struct device_gemm g = {.transa = ta, .transb = tb, .m = m, .n = n, .k = k, .alpha = alpha,
                            .a = t_dev(&c, a), .lda = lda, .b = t_dev(&c, b), .ldb = ldb, .beta = beta,
                            .c = t_dev(&c, cm), .ldc = ldc};
    CHECK_OK(device_sgemm(rig->s, &g, "test product", -1));
    CHECK_OK(device_stream_synchronize(rig->s));
    float *got = malloc(cn * sizeof *got), *blas = malloc(cn * sizeof *blas);
    CHECK(got && blas);
    CHECK_OK(device_copy(rig->dev, got, t_dev(&c, cm), cn * sizeof *got, DEVICE_D2H));
    memcpy(blas, cm, cn * sizeof *blas);
    cblas_sgemm(CblasRowMajor, tb == DEVICE_OP_T ? CblasTrans : CblasNoTrans,
                ta == DEVICE_OP_T ? CblasTrans : CblasNoTrans, n, m, k, alpha, b, ldb, a, lda, beta, blas, ldc);
    char what[128];
    snprintf(what, sizeof what, "%s: sgemm %s%s, m %d n %d k %d, leading dimensions +%d, alpha %g, beta %g",
             t_backend(), t_op_name(ta), t_op_name(tb), m, n, k, pad, (double)alpha, (double)beta);
    for (int j = 0; j < n; j++) {
        for (int i = 0; i < ldc && (uint64_t)j * ldc + i < cn; i++) {
            uint64_t at = (uint64_t)j * ldc + i;
            if (i >= m) { /* padding: untouched */
                CHECK_MSG(memcmp(&got[at], &cm[at], sizeof *got) == 0, "%s: C's padding at row %d, column %d "
                          "became %g", what, i, j, (double)got[at]);
                continue;
            }
            double dot = 0, mag = 0;
            for (int l = 0; l < k; l++) {
                double x = ta == DEVICE_OP_N ? a[(uint64_t)l * lda + i] : a[(uint64_t)i * lda + l];
                double y = tb == DEVICE_OP_N ? b[(uint64_t)j * ldb + l] : b[(uint64_t)l * ldb + j];
                dot += x * y;
                mag += fabs(x * y);
            }
            double want = alpha * dot + (beta != 0 ? (double)beta * cm[at] : 0);
            double tol = (k + 3) * 0x1p-24 * (fabs(alpha) * mag + (beta != 0 ? fabs((double)beta * cm[at]) : 0));
            CHECK_MSG(fabs(got[at] - (float)want) <= tol, "%s: C(%d, %d) = %.9g, the naive product %.9g +- %.3g",
                      what, i, j, (double)got[at], want, tol);
            if (t_on_sim())
                CHECK_MSG(memcmp(&got[at], &blas[at], sizeof *got) == 0, "%s: C(%d, %d) = %.9g, OpenBLAS's "
                          "row-major product of the transposes %.9g: not the same bits", what, i, j,
                          (double)got[at], (double)blas[at]);
        }
    }
    free(got);
    free(blas);
    t_case_close(&c);
}

/* Every transpose pair, alpha 1 and not, beta 0 (C NaN), 1 and not,
 * leading dimensions equal to the rows and 3 more, on a small problem and
 * on one past OpenBLAS's and cuBLAS's smallest blocks; m, n and k all
 * differ, so a dimension taken for another fails. */
TEST(device_sgemm_transposes_alpha_beta_leading_dimensions)
{
    struct t_case device; /* holds the device the products share */
    T_CASE_OPEN(&device);
    static const int sizes[][3] = {{5, 7, 9}, {67, 33, 130}};
    static const float alphas[] = {1, -1.5f}, betas[] = {0, 1, 0.5f};
    t_seed(15);
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++)
        for (int ta = 0; ta < 2; ta++)
            for (int tb = 0; tb < 2; tb++)
                for (int pad = 0; pad <= 3; pad += 3)
                    for (size_t x = 0; x < sizeof alphas / sizeof alphas[0]; x++)
                        for (size_t y = 0; y < sizeof betas / sizeof betas[0]; y++)
                            t_gemm(device.rig, (enum device_transpose)ta, (enum device_transpose)tb, sizes[s][0],
                                   sizes[s][1], sizes[s][2], pad, alphas[x], betas[y]);
    t_case_close(&device);
}

/* ---- batched sgemm ------------------------------------------------------------------------------ */

/* `count` products of one shape, A, B and C each `gap` floats apart (stride_b
 * 0 when shared_b: one B for all), as one batched op, against the same
 * products issued one by one as single ops on a copy of C. The simulated
 * device makes each product the very CBLAS call of its single op, so the two
 * C buffers, gaps and padding included, are the same bytes (memcmp). On a GPU
 * cublasSgemmStridedBatched may pick other kernels than cublasSgemm: each
 * element then takes twice the sgemm test's bound (both within it of the
 * exact value; inputs in [-1, 1], so sum |a||b| <= k), and what neither
 * writes (NaN gaps and padding) stays the same bits. Every buffer is exactly
 * the span from the first product to the end of the last, so on the
 * simulated device a span past it is ERR_RANGE. */
static void t_gemm_batched(struct t_rig *rig, enum device_transpose ta, enum device_transpose tb, int m, int n, int k,
                           int pad, int count, int gap, int shared_b, float alpha, float beta)
{
    struct t_case c;
    t_case_on(&c, rig);
    int arows = ta == DEVICE_OP_N ? m : k, acols = ta == DEVICE_OP_N ? k : m;
    int brows = tb == DEVICE_OP_N ? k : n, bcols = tb == DEVICE_OP_N ? n : k;
    int lda = arows + pad, ldb = brows + pad, ldc = m + pad;
    uint64_t one_a = t_matrix_floats(arows, acols, lda), one_b = t_matrix_floats(brows, bcols, ldb);
    uint64_t one_c = t_matrix_floats(m, n, ldc);
    int64_t sa = (int64_t)(one_a + gap), sb = shared_b ? 0 : (int64_t)(one_b + gap), sc = (int64_t)(one_c + gap);
    int products = count > 1 ? count : 1;
    uint64_t na = (uint64_t)(products - 1) * sa + one_a, nb = (uint64_t)(products - 1) * sb + one_b;
    uint64_t nc = (uint64_t)(products - 1) * sc + one_c;
    float *a = t_buf(&c, "A", T_READ, T_F32, na), *b = t_buf(&c, "B", T_READ, T_F32, nb);
    float *cb = t_buf(&c, "C batched", T_UPDATE, T_F32, nc), *cs = t_buf(&c, "C single", T_UPDATE, T_F32, nc);
    t_fill_nan(a, na);
    t_fill_nan(b, nb);
    t_fill_nan(cb, nc);
    for (int i = 0; i < products; i++) {
        t_fill_matrix(a + i * sa, arows, acols, lda);
        if (i == 0 || !shared_b)
            t_fill_matrix(b + i * sb, brows, bcols, ldb);
        if (beta != 0)
            t_fill_matrix(cb + i * sc, m, n, ldc);
    }
    memcpy(cs, cb, nc * sizeof *cs);
    t_upload(&c);
    float *da = t_dev(&c, a), *db = t_dev(&c, b), *dcb = t_dev(&c, cb), *dcs = t_dev(&c, cs);
    struct device_gemm g = {.transa = ta, .transb = tb, .m = m, .n = n, .k = k, .alpha = alpha, .a = da, .lda = lda,
                            .b = db, .ldb = ldb, .beta = beta, .c = dcb, .ldc = ldc, .count = count,
                            .stride_a = sa, .stride_b = sb, .stride_c = sc};
    CHECK_OK(device_sgemm(rig->s, &g, "batched product", -1));
    for (int i = 0; i < products; i++) {
        struct device_gemm one = {.transa = ta, .transb = tb, .m = m, .n = n, .k = k, .alpha = alpha,
                                  .a = da + i * sa, .lda = lda, .b = db + i * sb, .ldb = ldb, .beta = beta,
                                  .c = dcs + i * sc, .ldc = ldc};
        CHECK_OK(device_sgemm(rig->s, &one, "single product", i));
    }
    CHECK_OK(device_stream_synchronize(rig->s));
    float *got = malloc(nc * sizeof *got), *want = malloc(nc * sizeof *want);
    CHECK(got && want);
    CHECK_OK(device_copy(rig->dev, got, dcb, nc * sizeof *got, DEVICE_D2H));
    CHECK_OK(device_copy(rig->dev, want, dcs, nc * sizeof *want, DEVICE_D2H));
    char what[160];
    snprintf(what, sizeof what, "%s: %d products (count %d) of sgemm %s%s, m %d n %d k %d, ld +%d, gap %d%s, beta %g",
             t_backend(), products, count, t_op_name(ta), t_op_name(tb), m, n, k, pad, gap,
             shared_b ? ", B shared" : "", (double)beta);
    double tol = 2 * (k + 3) * 0x1p-24 * (fabs(alpha) * k + fabs(beta));
    for (uint64_t at = 0; at < nc; at++) {
        if (memcmp(&got[at], &want[at], sizeof *got) == 0)
            continue;
        CHECK_MSG(!t_on_sim() && isfinite(got[at]) && isfinite(want[at]) && fabs(got[at] - want[at]) <= tol,
                  "%s: C[%llu] (product %llu) = %.9g batched, %.9g as a single op%s", what, (unsigned long long)at,
                  (unsigned long long)(at / sc), (double)got[at], (double)want[at],
                  t_on_sim() ? ": not the same bits" : "");
    }
    free(got);
    free(want);
    t_case_close(&c);
}

/* Three products against three single ops, every transpose pair, leading
 * dimensions equal to the rows and 3 more, beta 0 (C NaN) and not, B apart
 * and shared (stride 0); small and past the libraries' smallest blocks. */
TEST(device_sgemm_batched_equals_its_single_products)
{
    struct t_case device;
    T_CASE_OPEN(&device);
    static const int sizes[][3] = {{5, 7, 9}, {67, 33, 130}};
    static const float betas[] = {0, 0.5f};
    t_seed(17);
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++)
        for (int ta = 0; ta < 2; ta++)
            for (int tb = 0; tb < 2; tb++)
                for (int pad = 0; pad <= 3; pad += 3)
                    for (size_t y = 0; y < sizeof betas / sizeof betas[0]; y++)
                        for (int shared_b = 0; shared_b < 2; shared_b++)
                            t_gemm_batched(device.rig, (enum device_transpose)ta, (enum device_transpose)tb,
                                           sizes[s][0], sizes[s][1], sizes[s][2], pad, 3, 5, shared_b, -1.5f,
                                           betas[y]);
    t_case_close(&device);
}

/* count 1 is a single product whatever the strides say (they are ignored,
 * and the buffers hold one product only: a span past them is ERR_RANGE). */
TEST(device_sgemm_batched_count_1_is_the_single_op)
{
    struct t_case device;
    T_CASE_OPEN(&device);
    t_seed(18);
    t_gemm_batched(device.rig, DEVICE_OP_N, DEVICE_OP_T, 67, 33, 130, 3, 1, 1000, 0, 1.0f, 1.0f);
    t_gemm_batched(device.rig, DEVICE_OP_T, DEVICE_OP_N, 5, 7, 9, 0, 1, 7, 0, -1.5f, 0.0f);
    t_case_close(&device);
}

/* Each bad batch argument is refused before anything runs, naming the op:
 * a negative count or stride, products whose C overlap (a GPU writes them
 * concurrently), and strides whose span wraps. */
TEST(device_sgemm_batched_refuses_bad_arguments)
{
    struct t_case c;
    T_CASE_OPEN(&c);
    float *x = t_buf(&c, "x", T_UPDATE, T_F32, 64);
    float *dx = t_dev(&c, x);
    const struct device_gemm ok = {.transa = DEVICE_OP_N, .transb = DEVICE_OP_N, .m = 2, .n = 2, .k = 2, .alpha = 1,
                                   .a = dx, .lda = 2, .b = dx + 16, .ldb = 2, .c = dx + 32, .ldc = 2, .count = 3,
                                   .stride_a = 4, .stride_b = 4, .stride_c = 4};
    struct device_gemm g = ok;
    g.count = -1;
    CHECK_ERR(device_sgemm(c.rig->s, &g, "atoms forward", -1), ERR_ARG,
              "sgemm 'atoms forward' of -1 products: count must be 0 or more");
    g = ok;
    g.stride_b = -4;
    CHECK_ERR(device_sgemm(c.rig->s, &g, "atoms forward", -1), ERR_ARG,
              "sgemm 'atoms forward': strides 4, -4, 4 of A, B, C: none may be negative");
    g = ok;
    g.count = 1; /* ignored strides still may not be negative */
    g.stride_c = -1;
    CHECK_ERR(device_sgemm(c.rig->s, &g, "atoms forward", -1), ERR_ARG, "none may be negative");
    g = ok;
    g.stride_c = 3;
    CHECK_ERR(device_sgemm(c.rig->s, &g, "atoms forward", -1), ERR_ARG,
              "sgemm 'atoms forward': stride_c 3 floats is less than one C (4 floats)");
    g = ok;
    g.stride_a = INT64_MAX / 2;
    CHECK_ERR(device_sgemm(c.rig->s, &g, "atoms forward", -1), ERR_ARG, "span more than 2^62 bytes of A");
    g = ok;
    CHECK_OK(device_sgemm(c.rig->s, &g, "atoms forward", -1));
    CHECK_OK(device_stream_synchronize(c.rig->s));
    t_case_close(&c);
}

/* ---- memset and the device-to-device copy -------------------------------------------------- */

/* Part of a buffer and a whole one: the bytes asked for, nothing around them. */
TEST(device_memset_and_copy_d2d)
{
    struct t_case c;
    T_CASE_OPEN(&c);
    const uint64_t n = 1000, whole = 37;
    uint8_t *x = t_buf(&c, "x", T_UPDATE, T_U8, n);
    uint8_t *y = t_buf(&c, "y", T_UPDATE, T_U8, n);
    uint8_t *z = t_buf(&c, "z", T_UPDATE, T_U8, whole);
    uint8_t *w = t_buf(&c, "w", T_UPDATE, T_U8, whole);
    for (uint64_t i = 0; i < n; i++) {
        x[i] = (uint8_t)(i * 7 + 1);
        y[i] = (uint8_t)(i * 13 + 2);
    }
    memset(w, 0x11, whole);
    t_upload(&c);
    CHECK_OK(device_memset_async(c.rig->s, (uint8_t *)t_dev(&c, x) + 100, 0xa5, 300));
    CHECK_OK(device_copy_d2d_async(c.rig->s, (uint8_t *)t_dev(&c, y) + 7, (uint8_t *)t_dev(&c, x) + 50, 500));
    CHECK_OK(device_memset_async(c.rig->s, t_dev(&c, z), 0, whole));
    CHECK_OK(device_copy_d2d_async(c.rig->s, t_dev(&c, w), t_dev(&c, y), whole));
    CHECK_OK(device_stream_synchronize(c.rig->s));
    memset(x + 100, 0xa5, 300);
    memcpy(y + 7, x + 50, 500);
    memset(z, 0, whole);
    memcpy(w, y, whole);
    t_finish(&c, t_exact); /* bytes moved, no arithmetic */
}

/* ---- the simulated device's checks --------------------------------------------------------- */

/* A span one byte past a buffer's end is refused, naming the buffer, before
 * anything runs: on a GPU it would write another buffer's memory. */
TEST(sim_refuses_an_op_past_a_buffer_end)
{
    if (!t_on_sim())
        CHECK_SKIP("the bounds check is the simulated device's; DEVICE_OPS_BACKEND=%s", t_backend());
    struct t_case c;
    T_CASE_OPEN(&c);
    float *x = t_buf(&c, "gradient bucket 0", T_UPDATE, T_F32, 10);
    union kernel_args a = {.divide = {.x = t_dev(&c, x), .w = 2}};
    CHECK_ERR(device_kernel(c.rig->s, KERNEL_divide, 11, &a, NULL, -1), ERR_RANGE,
              "44 bytes at offset 0 run past the end of device buffer 'gradient bucket 0' (40 bytes)");
    t_case_close(&c);
}

/* Bias written on stream 'compute', then the product that adds onto it
 * (beta = 1) issued on stream 'side': with an event recorded after the bias
 * and waited for on 'side' the product runs; without, the detector refuses
 * it, naming the buffer, both streams and both operations. */
/* The detector's two cases on a second stream, after the compute stream
 * wrote: `issue` runs an operation on stream `side` that reads what was
 * written, after waiting for an event recorded behind the writer
 * (with_event: it runs), or without (the detector refuses it, naming the
 * reader and the writer as `reader` and `writer` say). Closes the case. */
static void t_side_stream(struct t_case *c, int with_event, int (*issue)(device_stream_t *side, void *arg), void *arg,
                          const char *reader, const char *writer)
{
    device_stream_t *side;
    device_event_t *ready;
    CHECK_OK(device_stream_create(c->rig->dev, "side", &side));
    CHECK_OK(device_event_create(c->rig->dev, &ready));
    if (with_event) {
        CHECK_OK(device_event_record(ready, c->rig->s));
        CHECK_OK(device_stream_wait_event(side, ready));
        CHECK_OK(issue(side, arg));
        CHECK_OK(device_synchronize(c->rig->dev));
    } else {
        CHECK_ERR(issue(side, arg), ERR_STATE, "use before ready");
        const char *msg = err_msg();
        CHECK_CONTAINS(msg, reader);
        CHECK_CONTAINS(msg, writer);
    }
    device_event_destroy(ready);
    device_stream_destroy(side);
    t_case_close(c);
}

static int t_issue_fc1_forward(device_stream_t *side, void *g) { return device_sgemm(side, g, "fc1 forward", 3); }

static void t_second_stream(int with_event)
{
    if (!t_on_sim())
        CHECK_SKIP("the use-before-ready detector is the simulated device's; DEVICE_OPS_BACKEND=%s", t_backend());
    struct t_case c;
    T_CASE_OPEN(&c);
    const int m = 4, n = 3, k = 2;
    float *z = t_buf(&c, "fc1 activations", T_UPDATE, T_F32, m * n);
    float *bias = t_buf(&c, "fc1 bias", T_READ, T_F32, m);
    float *w = t_buf(&c, "fc1 weight", T_READ, T_F32, m * k);
    float *x = t_buf(&c, "input", T_READ, T_F32, k * n);
    t_seed(16);
    t_fill(bias, m, -1, 1);
    t_fill(w, m * k, -1, 1);
    t_fill(x, k * n, -1, 1);
    t_upload(&c);
    union kernel_args a = {.bias_rows = {.z = t_dev(&c, z), .bias = t_dev(&c, bias), .cols = (uint32_t)n}};
    CHECK_OK(device_kernel(c.rig->s, KERNEL_bias_rows, (uint64_t)m * n, &a, "fc1 bias", 3));
    /* Z is m x n column-major here: C = W X + C, W m x k, X k x n */
    struct device_gemm g = {.transa = DEVICE_OP_N, .transb = DEVICE_OP_N, .m = m, .n = n, .k = k, .alpha = 1,
                            .a = t_dev(&c, w), .lda = m, .b = t_dev(&c, x), .ldb = k, .beta = 1,
                            .c = t_dev(&c, z), .ldc = m};
    t_side_stream(&c, with_event, t_issue_fc1_forward, &g,
                  "kernel #2 'fc1 forward' (batch 3) on stream 'side' reads device buffer 'fc1 activations'",
                  "kernel #1 'fc1 bias' (batch 3) on stream 'compute' writes");
}

TEST(detector_second_stream_with_event_is_fine) { t_second_stream(1); }
TEST(detector_second_stream_without_event_is_caught) { t_second_stream(0); }

/* The rig of a virtual-time test (sim only: elsewhere device time is
 * measured) and the GPU profile whose peaks time it. 0, or nonzero when the
 * test cannot go on (skipped, or failed already). */
static int t_vtime_open(struct t_rig *r, const struct hw_profile **hw)
{
    if (!t_on_sim()) {
        check_skip("device time is measured, not modelled, on %s", t_backend());
        return 1;
    }
    if (t_open(r))
        return 1;
    CHECK_OK(hw_profile_find(DEVICE_GPU_DEFAULT, hw));
    return 0;
}

/* A product's three matrices of `bytes` each, a and b zeroed on r's stream. */
static void t_gemm_operands(struct t_rig *r, uint64_t bytes, float **a, float **b, float **c)
{
    CHECK_OK(device_malloc(r->dev, bytes, "a", (void **)a));
    CHECK_OK(device_malloc(r->dev, bytes, "b", (void **)b));
    CHECK_OK(device_malloc(r->dev, bytes, "c", (void **)c));
    CHECK_OK(device_memset_async(r->s, *a, 0, bytes));
    CHECK_OK(device_memset_async(r->s, *b, 0, bytes));
}

static void t_gemm_operands_free(struct t_rig *r, float *a, float *b, float *c)
{
    device_free(r->dev, a);
    device_free(r->dev, b);
    device_free(r->dev, c);
}

/* Virtual time: a device operation lasts what the modelled GPU's figures
 * say, never how long this CPU took. A 1024^3 matrix product is bound by its
 * flops (2 x 1024^3 at the profile's GEMM rate, hw_gemm_flops, plus a launch); a
 * memset by its bytes over the memory bandwidth, plus a launch; a marked
 * access (the host's work) by nothing. Exactly, in integer nanoseconds. */
TEST(vtime_device_ops_take_the_modelled_gpu_time)
{
    struct t_rig r;
    const struct hw_profile *hw;
    if (t_vtime_open(&r, &hw))
        return;
    const int n = 1024;
    device_event_t *e[4];
    for (int i = 0; i < 4; i++)
        CHECK_OK(device_event_create(r.dev, &e[i]));
    float *a, *b, *c;
    t_gemm_operands(&r, (uint64_t)n * n * 4, &a, &b, &c);
    CHECK_OK(device_event_record(e[0], r.s));
    struct device_gemm g = {.transa = DEVICE_OP_N, .transb = DEVICE_OP_N, .m = n, .n = n, .k = n, .alpha = 1.0f,
                            .a = a, .lda = n, .b = b, .ldb = n, .beta = 0.0f, .c = c, .ldc = n};
    CHECK_OK(device_sgemm(r.s, &g, "gemm", -1));
    CHECK_OK(device_event_record(e[1], r.s));
    CHECK_OK(device_memset_async(r.s, c, 0, (uint64_t)n * n * 4));
    CHECK_OK(device_event_record(e[2], r.s));
    struct device_span span = {c, (uint64_t)n * n * 4};
    CHECK_OK(device_mark_access(r.s, "host reads c", -1, &span, NULL));
    CHECK_OK(device_event_record(e[3], r.s));
    CHECK_OK(device_synchronize(r.dev));
    double gemm_s, memset_s, access_s;
    CHECK_OK(device_event_elapsed(e[0], e[1], &gemm_s));
    CHECK_OK(device_event_elapsed(e[1], e[2], &memset_s));
    CHECK_OK(device_event_elapsed(e[2], e[3], &access_s));
    double want_gemm = (double)llround((2.0 * n * n * n / hw_gemm_flops(hw) + 4e-6) * 1e9) * 1e-9;
    double want_memset = (double)llround(((double)n * n * 4 / hw->memory_bps + 4e-6) * 1e9) * 1e-9;
    CHECK_MSG(fabs(gemm_s - want_gemm) < 1e-12, "gemm: %.9f s of device time, the model says %.9f", gemm_s,
              want_gemm);
    CHECK_MSG(fabs(memset_s - want_memset) < 1e-12, "memset: %.9f s, the model says %.9f", memset_s, want_memset);
    CHECK(access_s == 0);
    for (int i = 0; i < 4; i++)
        device_event_destroy(e[i]);
    t_gemm_operands_free(&r, a, b, c);
    t_close(&r);
}

/* A batched product writes every product's C: a kernel on another stream
 * that reads the last product's C without waiting for an event is refused,
 * naming the batched op (its span runs from the first product's C to the end
 * of the last's); with the event it runs. */
static int t_issue_atoms_relu(device_stream_t *side, void *a)
{
    return device_kernel(side, KERNEL_relu, 4 * 3, a, "atoms relu", 3); /* the last product's m x n */
}

static void t_batched_second_stream(int with_event)
{
    if (!t_on_sim())
        CHECK_SKIP("the use-before-ready detector is the simulated device's; DEVICE_OPS_BACKEND=%s", t_backend());
    struct t_case c;
    T_CASE_OPEN(&c);
    const int m = 4, n = 3, k = 2, count = 3;
    float *w = t_buf(&c, "atom weights", T_READ, T_F32, count * m * k);
    float *x = t_buf(&c, "atom inputs", T_READ, T_F32, count * k * n);
    float *z = t_buf(&c, "atom activations", T_UPDATE, T_F32, count * m * n);
    t_seed(19);
    t_fill(w, count * m * k, -1, 1);
    t_fill(x, count * k * n, -1, 1);
    t_upload(&c);
    struct device_gemm g = {.transa = DEVICE_OP_N, .transb = DEVICE_OP_N, .m = m, .n = n, .k = k, .alpha = 1,
                            .a = t_dev(&c, w), .lda = m, .b = t_dev(&c, x), .ldb = k, .c = t_dev(&c, z), .ldc = m,
                            .count = count, .stride_a = m * k, .stride_b = k * n, .stride_c = m * n};
    CHECK_OK(device_sgemm(c.rig->s, &g, "atoms forward", 3));
    union kernel_args a = {.relu = {.z = (float *)t_dev(&c, z) + (count - 1) * m * n}};
    t_side_stream(&c, with_event, t_issue_atoms_relu, &a,
                  "'atoms relu' (batch 3) on stream 'side' reads device buffer 'atom activations'",
                  "'atoms forward' (batch 3) on stream 'compute' writes");
}

TEST(detector_batched_gemm_with_event_is_fine) { t_batched_second_stream(1); }
TEST(detector_batched_gemm_without_event_is_caught) { t_batched_second_stream(0); }

/* A batched product is one launch for count products: count times one
 * product's flops and bytes (the roofline), plus one DSIM launch, exactly. */
TEST(vtime_batched_gemm_is_count_products_one_launch)
{
    struct t_rig r;
    const struct hw_profile *hw;
    if (t_vtime_open(&r, &hw))
        return;
    const int n = 256, count = 3;
    const uint64_t bytes = (uint64_t)count * n * n * 4;
    device_event_t *e[2];
    for (int i = 0; i < 2; i++)
        CHECK_OK(device_event_create(r.dev, &e[i]));
    float *a, *b, *c;
    t_gemm_operands(&r, bytes, &a, &b, &c);
    CHECK_OK(device_event_record(e[0], r.s));
    struct device_gemm g = {.transa = DEVICE_OP_N, .transb = DEVICE_OP_N, .m = n, .n = n, .k = n, .alpha = 1.0f,
                            .a = a, .lda = n, .b = b, .ldb = n, .c = c, .ldc = n, .count = count,
                            .stride_a = (int64_t)n * n, .stride_b = (int64_t)n * n, .stride_c = (int64_t)n * n};
    CHECK_OK(device_sgemm(r.s, &g, "batched gemm", -1));
    CHECK_OK(device_event_record(e[1], r.s));
    CHECK_OK(device_synchronize(r.dev));
    double got;
    CHECK_OK(device_event_elapsed(e[0], e[1], &got));
    double flops_s = (double)count * 2.0 * n * n * n / hw_gemm_flops(hw);
    double bytes_s = (double)count * 3.0 * n * n * 4 / hw->memory_bps; /* A, B read; C written (beta 0) */
    double want = (double)llround(((flops_s > bytes_s ? flops_s : bytes_s) + 4e-6) * 1e9) * 1e-9;
    CHECK_MSG(fabs(got - want) < 1e-12, "%d products in one op: %.9f s of device time, the model says %.9f", count,
              got, want);
    for (int i = 0; i < 2; i++)
        device_event_destroy(e[i]);
    t_gemm_operands_free(&r, a, b, c);
    t_close(&r);
}
