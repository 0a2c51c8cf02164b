/* comm_reduce: the arithmetic shared by the CPU backends (see
 * comm_backend.h): the element-wise sum in each type, the average's final
 * division, and what the cross-rank checks compare (comm_checks.h): the
 * fingerprint of a collective and the checksum of its result. */
#include "comm/comm_backend.h"

#include "base/half.h"
#include "base/hash.h"

#include <string.h>

/* One loop per type; `restrict` is not claimed because in-place calls alias. */
#define COMM_SUM3_LOOP(T)                                                       \
    do {                                                                        \
        T *o_ = out;                                                            \
        const T *a_ = a, *b_ = b;                                               \
        for (size_t i_ = 0; i_ < count; i_++)                                   \
            o_[i_] = a_[i_] + b_[i_];                                           \
    } while (0)

/* The 16-bit floats: widen, add in float32, narrow once (correctly rounded,
 * see lib/base/half.h). */
#define COMM_SUM3_HALF_LOOP(widen, narrow)                                      \
    do {                                                                        \
        uint16_t *o_ = out;                                                     \
        const uint16_t *a_ = a, *b_ = b;                                        \
        for (size_t i_ = 0; i_ < count; i_++)                                   \
            o_[i_] = narrow(widen(a_[i_]) + widen(b_[i_]));                     \
    } while (0)

void comm_reduce_sum3(enum comm_dtype dtype, void *out, const void *a, const void *b, size_t count)
{
    switch (dtype) {
    case COMM_FLOAT32: COMM_SUM3_LOOP(float); break;
    case COMM_FLOAT64: COMM_SUM3_LOOP(double); break;
    /* integers wrap as two's complement, as in NCCL and MPI on every platform we build for */
    case COMM_INT32: COMM_SUM3_LOOP(uint32_t); break;
    case COMM_INT64: COMM_SUM3_LOOP(uint64_t); break;
    case COMM_FLOAT16: COMM_SUM3_HALF_LOOP(half_to_float, half_from_float); break;
    case COMM_BFLOAT16: COMM_SUM3_HALF_LOOP(half_bf16_to_float, half_bf16_from_float); break;
    default: break;
    }
}

void comm_reduce_sum(enum comm_dtype dtype, void *dst, const void *src, size_t count)
{
    comm_reduce_sum3(dtype, dst, dst, src, count);
}

void comm_reduce_divide(enum comm_dtype dtype, void *buf, size_t count, int world)
{
    if (dtype == COMM_FLOAT32) {
        float *p = buf, w = (float)world;
        for (size_t i = 0; i < count; i++)
            p[i] /= w;
    } else if (dtype == COMM_FLOAT64) {
        double *p = buf, w = world;
        for (size_t i = 0; i < count; i++)
            p[i] /= w;
    } else if (dtype == COMM_FLOAT16) {
        uint16_t *p = buf;
        for (size_t i = 0; i < count; i++)
            p[i] = half_from_float(half_to_float(p[i]) / (float)world);
    } else if (dtype == COMM_BFLOAT16) {
        uint16_t *p = buf;
        for (size_t i = 0; i < count; i++)
            p[i] = half_bf16_from_float(half_bf16_to_float(p[i]) / (float)world);
    }
}

uint64_t comm_checksum(const void *buf, size_t bytes)
{
    /* FNV-1a over 8-byte words rather than bytes: the check runs after every
     * collective, so it must go at memory speed; any flipped bit still
     * changes the sum. */
    return hash_fnv1a_words(HASH_FNV1A_BASIS, buf, bytes);
}

void comm_fingerprint_of(const struct comm_coll_desc *d, struct comm_fingerprint *fp)
{
    memset(fp, 0, sizeof *fp);
    fp->seq = d->seq;
    fp->count = d->count;
    fp->coll = d->coll;
    fp->op = d->op;
    fp->dtype = d->dtype;
    fp->root = d->root;
}
