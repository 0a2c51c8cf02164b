/* comm_reduce: the arithmetic and the checks shared by the CPU backends (see
 * comm_backend.h): the element-wise sum in each type, the average's final
 * division, the fingerprint compared before each collective and the checksum
 * compared after it. */
#include "comm/comm_backend.h"

#include "base/error.h"
#include "base/half.h"
#include "base/hash.h"

#include <stdio.h>
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

/* "allreduce sum 1024 x float32" (root added for broadcast) */
static void comm_fingerprint_text(const struct comm_fingerprint *f, char *buf, size_t len)
{
    int n = snprintf(buf, len, "#%llu %s", (unsigned long long)f->seq, comm_coll_name((enum comm_coll)f->coll));
    if (f->coll == COMM_ALLREDUCE || f->coll == COMM_REDUCE_SCATTER)
        n += snprintf(buf + n, len - (size_t)n, " %s", comm_op_name((enum comm_op)f->op));
    if (f->coll != COMM_BARRIER)
        n += snprintf(buf + n, len - (size_t)n, " %llu x %s", (unsigned long long)f->count,
                      comm_dtype_name((enum comm_dtype)f->dtype));
    if (f->coll == COMM_BROADCAST)
        snprintf(buf + n, len - (size_t)n, " root %d", f->root);
}

int comm_fingerprint_compare(int rank_a, const struct comm_fingerprint *a, int rank_b,
                             const struct comm_fingerprint *b)
{
    char fields[96] = "";
    size_t n = 0;
#define COMM_FP_FIELD(cond, name)                                                            \
    if (cond)                                                                                \
        n += (size_t)snprintf(fields + n, sizeof fields - n, "%s" name, n ? ", " : "")
    COMM_FP_FIELD(a->seq != b->seq, "sequence number");
    COMM_FP_FIELD(a->coll != b->coll, "collective");
    COMM_FP_FIELD(a->op != b->op, "op");
    COMM_FP_FIELD(a->count != b->count, "count");
    COMM_FP_FIELD(a->dtype != b->dtype, "type");
    COMM_FP_FIELD(a->root != b->root, "root");
#undef COMM_FP_FIELD
    if (n == 0)
        return 0;
    char ta[128], tb[128];
    comm_fingerprint_text(a, ta, sizeof ta);
    comm_fingerprint_text(b, tb, sizeof tb);
    return err_set(ERR_STATE,
                   "fingerprint mismatch before collective #%llu: rank %d called %s, rank %d called %s "
                   "(differs: %s)",
                   (unsigned long long)(a->seq < b->seq ? a->seq : b->seq), rank_a, ta, rank_b, tb, fields);
}
