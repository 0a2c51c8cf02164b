/* comm_names: the communicator's vocabulary (see comm.h): type, op,
 * collective and algorithm names, their parsers, the topology's text
 * ("2x8"), the description every
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
static const char *const algo_names[COMM_ALGO_COUNT] = {"default", "ring", "tree", "naive", "hier"};

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
        return err_set(ERR_ARG, "unknown algorithm '%s' (ring, tree, naive, hier)", text);
    *out = (enum comm_algo)i;
    return 0;
}

/* A decimal count 1 .. COMM_TOPOLOGY_MAX_RANKS at *p, advancing *p; -1 if none. */
static int comm_topology_count(const char **p)
{
    long v = 0;
    const char *s = *p;
    while (*s >= '0' && *s <= '9' && v <= COMM_TOPOLOGY_MAX_RANKS)
        v = v * 10 + (*s++ - '0');
    if (s == *p || v < 1 || v > COMM_TOPOLOGY_MAX_RANKS)
        return -1;
    *p = s;
    return (int)v;
}

int comm_topology_parse(const char *text, int *nodes, int *gpus)
{
    const char *p = text ? text : "";
    int n = comm_topology_count(&p), g = -1;
    if (n > 0 && *p == 'x') {
        p++;
        g = comm_topology_count(&p);
    }
    if (n < 1 || g < 1 || *p != '\0')
        return err_set(ERR_ARG, "topology '%s': expected NODESxGPUS, two whole numbers from 1 (e.g. 2x8: 2 nodes "
                       "of 8 GPUs)", text ? text : "");
    if ((long)n * g > COMM_TOPOLOGY_MAX_RANKS)
        return err_set(ERR_ARG, "topology '%s': %d x %d = %ld ranks, more than the %d the simulator starts", text, n,
                       g, (long)n * g, COMM_TOPOLOGY_MAX_RANKS);
    *nodes = n;
    *gpus = g;
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
