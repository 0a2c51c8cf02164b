/* comm_names: the communicator's vocabulary (see comm.h): type, op,
 * collective and algorithm names, their parsers, the description every
 * message about a collective starts with, and nccl-tests' bus-bandwidth
 * factors. */
#include "comm/comm.h"

#include "comm/comm_backend.h"
#include "base/error.h"

#include <stdio.h>
#include <string.h>

static const char *const dtype_names[COMM_DTYPE_COUNT] = {"float32", "float64", "int32", "int64", "float16",
                                                          "bfloat16"};
static const size_t dtype_sizes[COMM_DTYPE_COUNT] = {4, 8, 4, 8, 2, 2};
static const char *const op_names[COMM_OP_COUNT] = {"sum", "avg"};
static const char *const coll_names[COMM_COLL_COUNT] = {"allreduce", "broadcast", "reduce_scatter", "allgather",
                                                        "barrier"};
static const char *const algo_names[COMM_ALGO_COUNT] = {"default", "ring", "tree", "naive"};

size_t comm_dtype_size(enum comm_dtype dtype)
{
    return (unsigned)dtype < COMM_DTYPE_COUNT ? dtype_sizes[dtype] : 0;
}

const char *comm_dtype_name(enum comm_dtype dtype)
{
    return (unsigned)dtype < COMM_DTYPE_COUNT ? dtype_names[dtype] : "invalid-type";
}

const char *comm_op_name(enum comm_op op) { return (unsigned)op < COMM_OP_COUNT ? op_names[op] : "invalid-op"; }

const char *comm_coll_name(enum comm_coll coll)
{
    return (unsigned)coll < COMM_COLL_COUNT ? coll_names[coll] : "invalid-collective";
}

const char *comm_algo_name(enum comm_algo algo)
{
    return (unsigned)algo < COMM_ALGO_COUNT ? algo_names[algo] : "invalid-algorithm";
}

/* Index of `text` in `names`, or -1. */
static int comm_name_index(const char *const *names, int n, const char *text)
{
    for (int i = 0; i < n; i++)
        if (strcmp(names[i], text) == 0)
            return i;
    return -1;
}

int comm_dtype_parse(const char *text, enum comm_dtype *out)
{
    /* nccl-tests spells them "float", "double", "int32", "int64", "half", "bfloat16" */
    static const char *const aliases[COMM_DTYPE_COUNT] = {"float", "double", "int", "long", "half", "bf16"};
    int i = comm_name_index(dtype_names, COMM_DTYPE_COUNT, text);
    if (i < 0)
        i = comm_name_index(aliases, COMM_DTYPE_COUNT, text);
    if (i < 0)
        return err_set(ERR_ARG, "unknown type '%s' (float32, float64, int32, int64, float16, bfloat16)", text);
    *out = (enum comm_dtype)i;
    return 0;
}

int comm_op_parse(const char *text, enum comm_op *out)
{
    int i = comm_name_index(op_names, COMM_OP_COUNT, text);
    if (i < 0)
        return err_set(ERR_ARG, "unknown op '%s' (sum, avg)", text);
    *out = (enum comm_op)i;
    return 0;
}

int comm_algo_parse(const char *text, enum comm_algo *out)
{
    int i = comm_name_index(algo_names, COMM_ALGO_COUNT, text);
    if (i < 0)
        return err_set(ERR_ARG, "unknown algorithm '%s' (ring, tree, naive)", text);
    *out = (enum comm_algo)i;
    return 0;
}

double comm_busbw_factor(enum comm_coll coll, int world)
{
    if (world < 1)
        return 0;
    switch (coll) {
    case COMM_ALLREDUCE: return 2.0 * (world - 1) / world;
    case COMM_REDUCE_SCATTER:
    case COMM_ALLGATHER: return (double)(world - 1) / world;
    case COMM_BROADCAST: return 1.0;
    default: return 0;
    }
}

const char *comm_coll_describe(const struct comm_coll_desc *d, char *buf, size_t len)
{
    switch (d->coll) {
    case COMM_BARRIER:
        snprintf(buf, len, "collective #%llu (barrier)", (unsigned long long)d->seq);
        break;
    case COMM_BROADCAST:
        snprintf(buf, len, "collective #%llu (broadcast from rank %d, %zu x %s)", (unsigned long long)d->seq, d->root,
                 d->count, comm_dtype_name(d->dtype));
        break;
    case COMM_ALLGATHER:
        snprintf(buf, len, "collective #%llu (allgather, %zu x %s per rank)", (unsigned long long)d->seq, d->count,
                 comm_dtype_name(d->dtype));
        break;
    default:
        snprintf(buf, len, "collective #%llu (%s %s, %zu x %s)", (unsigned long long)d->seq, comm_coll_name(d->coll),
                 comm_op_name(d->op), d->count, comm_dtype_name(d->dtype));
    }
    return buf;
}
