/* replica: the every-step check that all ranks hold the same model (see
 * replica.h). Read replica_check(). */
#include "ddp/replica.h"

#include "base/error.h"
#include "base/hash.h"
#include "comm/comm_checks.h"
#include "transfer/device_ops.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The tensors compared, parameters then buffers: tensor t < model_param_tensors
 * is a parameter, the rest buffers. */
static int replica_tensors(const model_t *m) { return model_param_tensors(m) + model_buffer_tensors(m); }

static int replica_wanted(const model_t *m, int t, unsigned what)
{
    return t < model_param_tensors(m) ? (what & REPLICA_PARAMS) != 0 : (what & REPLICA_BUFFERS) != 0;
}

/* Tensor t, the part of the model it lives in, and its values on the device. */
static const struct model_tensor *replica_tensor(model_t *m, int t, enum model_part *part, const float **device)
{
    int np = model_param_tensors(m);
    const struct model_tensor *mt = t < np ? model_param(m, t) : model_buffer(m, t - np);
    *part = t < np ? MODEL_PARAMS : MODEL_BUFFERS;
    *device = (t < np ? model_params(m) : model_buffers(m)) + mt->offset;
    return mt;
}

/* mine[t]: the hash of each wanted tensor (0 for the others). The device
 * hashes every chunk of KERNEL_HASH_CHUNK floats into the model's words for
 * it (model_check_words), after everything the compute stream has queued;
 * the host receives those words through one copy and folds each tensor's
 * into one. */
static int replica_hashes(model_t *m, unsigned what, uint64_t *mine)
{
    int nt = replica_tensors(m), rc = 0;
    uint64_t total = 0;
    for (int t = 0; t < nt; t++) {
        enum model_part part;
        const float *data;
        total += replica_wanted(m, t, what) ? model_tensor_chunks(replica_tensor(m, t, &part, &data)) : 0;
    }
    memset(mine, 0, (size_t)nt * sizeof *mine);
    if (total == 0)
        return 0;
    device_stream_t *s = model_stream(m);
    device_t *dev = device_stream_device(s);
    uint64_t *words = malloc(total * sizeof *words), *on_device = model_check_words(m);
    if (!words)
        return err_set(ERR_NOMEM, "replica check: out of memory");
    uint64_t at = 0;
    for (int t = 0; rc == 0 && t < nt; t++) {
        enum model_part part;
        const float *data;
        const struct model_tensor *mt = replica_tensor(m, t, &part, &data);
        if (!replica_wanted(m, t, what) || mt->numel == 0)
            continue;
        union kernel_args a = {.hash_chunks = {.out = on_device + at, .x = data, .count = mt->numel}};
        rc = device_kernel(s, KERNEL_hash_chunks, model_tensor_chunks(mt), &a, NULL, model_batch_number(m));
        at += model_tensor_chunks(mt);
    }
    if (rc == 0)
        rc = model_sync(m);
    if (rc == 0)
        rc = device_copy(dev, words, on_device, total * sizeof *words, DEVICE_D2H);
    at = 0;
    for (int t = 0; rc == 0 && t < nt; t++) {
        enum model_part part;
        const float *data;
        const struct model_tensor *mt = replica_tensor(m, t, &part, &data);
        if (!replica_wanted(m, t, what))
            continue;
        mine[t] = hash_mix64(hash_fnv1a_words(HASH_FNV1A_BASIS, words + at, model_tensor_chunks(mt) * sizeof *words));
        at += model_tensor_chunks(mt);
    }
    free(words);
    return rc;
}

/* ---- the votes: comm_checks_vote over the gathered tables ---------------------------------- */

/* Every rank's hash of each of nt tensors, rank q's at all[q * nt]; `t` is
 * the tensor voted on. */
struct replica_column {
    const uint64_t *all;
    int nt, t;
};

static int replica_same_tensor(const void *values, int a, int b)
{
    const struct replica_column *c = values;
    return c->all[(size_t)a * (size_t)c->nt + (size_t)c->t] == c->all[(size_t)b * (size_t)c->nt + (size_t)c->t];
}

static int replica_same_word(const void *values, int a, int b)
{
    return ((const uint64_t *)values)[a] == ((const uint64_t *)values)[b];
}

/* ---- naming the difference ---------------------------------------------------------------- */

/* "fc2.weight[13,40]" (PyTorch's indexing of a 2-D tensor) or "fc3.bias[7]". */
static const char *replica_element_name(const struct model_tensor *mt, size_t e, char *buf, size_t len)
{
    if (mt->ndim == 2)
        snprintf(buf, len, "%s[%zu,%zu]", mt->name, e / (size_t)mt->shape[1], e % (size_t)mt->shape[1]);
    else
        snprintf(buf, len, "%s[%zu]", mt->name, e);
    return buf;
}

/* Tensor t differs across ranks, as the vote v over its hashes says: the
 * reference rank (the majority's, or rank 0 without one) broadcasts its copy,
 * each rank finds its first element that differs from it, those are shared,
 * and every rank words the same verdict about the first odd rank's. Always
 * returns ERR_STATE (or a comm error). */
static int replica_locate(comm_t *comm, model_t *m, uint64_t step, int t, const struct comm_checks_verdict *v)
{
    int W = comm_world(comm), rank = comm_rank(comm);
    enum model_part part;
    const float *data;
    const struct model_tensor *mt = replica_tensor(m, t, &part, &data);
    size_t floats = mt->numel ? mt->numel : 1;
    float *mine = malloc(floats * sizeof *mine), *ref = malloc(floats * sizeof *ref);
    int64_t *found = calloc((size_t)W * 2, sizeof *found);
    if (!mine || !ref || !found) {
        free(mine);
        free(ref);
        free(found);
        return err_set(ERR_NOMEM, "replica check: out of memory");
    }
    int rc = model_read(m, part, mt->offset, mt->numel, mine); /* this rank's copy, off the device */
    if (rc == 0) {
        memcpy(ref, mine, mt->numel * sizeof *ref);
        rc = comm_broadcast(comm, ref, mt->numel, COMM_FLOAT32, v->ref);
    }
    int64_t me[2] = {-1, 0}; /* first element that differs from the reference here, and its bits */
    for (size_t i = 0; rc == 0 && i < mt->numel; i++)
        if (memcmp(&ref[i], &mine[i], sizeof(float)) != 0) {
            uint32_t bits;
            memcpy(&bits, &mine[i], 4);
            me[0] = (int64_t)i;
            me[1] = bits;
            break;
        }
    if (rc == 0)
        rc = comm_allgather(comm, me, found, 2, COMM_INT64);
    if (rc == 0) {
        int q = v->odd;
        if (found[2 * q] < 0) { /* its hash differs but no element does: the check itself is broken */
            rc = err_set(ERR_STATE, "step %llu: rank %d: the replicas' hashes of %s say rank %d differs, but no "
                                    "element does", (unsigned long long)step, rank, mt->name, q);
        } else {
            size_t e = (size_t)found[2 * q];
            uint32_t bits = (uint32_t)found[2 * q + 1];
            float odd;
            memcpy(&odd, &bits, 4);
            char at[MODEL_NAME_MAX + 48], why[160];
            replica_element_name(mt, e, at, sizeof at);
            if (v->majority && v->agree == W - 1)
                rc = err_set(ERR_STATE, "step %llu: rank %d differs from the other %d ranks in %s: %.9g on rank %d, "
                                        "%.9g on the others", (unsigned long long)step, q, v->agree, at, odd, q,
                             ref[e]);
            else if (v->majority)
                rc = err_set(ERR_STATE, "step %llu: %s differ from the other %d ranks in %s, rank %d first in %s: "
                                        "%.9g on rank %d, %.9g on the others", (unsigned long long)step,
                             v->odd_ranks, v->agree, mt->name, q, at, odd, q, ref[e]);
            else {
                char copy[MODEL_NAME_MAX + 16];
                snprintf(copy, sizeof copy, "copy of %s", mt->name);
                comm_checks_no_majority(W, copy, why, sizeof why);
                rc = err_set(ERR_STATE, "step %llu: rank %d and rank %d hold different %s, first in %s: %.9g on "
                                        "rank %d, %.9g on rank %d%s", (unsigned long long)step, v->ref, q, mt->name,
                             at, ref[e], v->ref, odd, q, why);
            }
        }
    }
    free(mine);
    free(ref);
    free(found);
    return rc;
}

/* The tables differ: some rank received another copy of every rank's hashes
 * than the others did (a bit flipped in what the all-gather gave it). The
 * vote v over the tables' own hashes says whose copy is the odd one. */
static int replica_damaged_table(int W, uint64_t step, const struct comm_checks_verdict *v)
{
    if (v->majority)
        return err_set(ERR_STATE, "step %llu: %s received a copy of the replicas' hashes that differs from the one "
                                  "the other %d ranks received: a bit changed in what the check's all-gather gave "
                                  "%s, not in the parameters (which were not compared)", (unsigned long long)step,
                       v->odd_ranks, v->agree, v->odd_ranks);
    char why[160];
    comm_checks_no_majority(W, "copy of the hashes", why, sizeof why);
    return err_set(ERR_STATE, "step %llu: rank %d and rank %d received different copies of the replicas' hashes "
                              "(a bit changed in what the check's all-gather gave one of them; the parameters were "
                              "not compared)%s", (unsigned long long)step, v->ref, v->odd, why);
}

int replica_check(comm_t *comm, model_t *m, uint64_t step, unsigned what)
{
    int W = comm_world(comm), nt = replica_tensors(m);
    uint64_t *mine = malloc((size_t)nt * sizeof *mine), *all = malloc((size_t)nt * (size_t)W * sizeof *all),
             *tables = malloc((size_t)W * sizeof *tables);
    int rc = mine && all && tables ? replica_hashes(m, what, mine) : err_set(ERR_NOMEM, "replica check: out of memory");
    if (rc == 0)
        rc = comm_allgather(comm, mine, all, (size_t)nt, COMM_INT64);
    /* Each rank decides from its own copy of the table, and the decision
     * picks the next collective (none, or the two that locate): a rank whose
     * copy differs would go its own way and meet the others' next all-reduce
     * with a broadcast. So the ranks first agree that they hold one table. */
    struct comm_checks_verdict v;
    uint64_t table = 0;
    if (rc == 0) {
        table = hash_fnv1a_words(HASH_FNV1A_BASIS, all, (size_t)nt * (size_t)W * sizeof *all);
        rc = comm_allgather(comm, &table, tables, 1, COMM_INT64);
    }
    if (rc == 0) {
        comm_checks_vote(tables, W, replica_same_word, &v);
        if (v.odd >= 0)
            rc = replica_damaged_table(W, step, &v);
    }
    /* the first tensor, in model order, on which the ranks differ; the rank
     * the others disagree with is named by their majority, rank 0 included */
    for (int t = 0; rc == 0 && t < nt; t++) {
        struct replica_column col = {all, nt, t};
        comm_checks_vote(&col, W, replica_same_tensor, &v);
        if (v.odd >= 0)
            rc = replica_locate(comm, m, step, t, &v);
    }
    free(mine);
    free(all);
    free(tables);
    return rc;
}

/* ---- the fault it catches ------------------------------------------------------------------ */

int replica_flip(model_t *m, uint64_t step, int rank)
{
    const struct model_tensor *bias = model_param(m, model_param_tensors(m) - 1);
    size_t at = bias->offset + step % bias->numel;
    float x;
    int rc = model_read(m, MODEL_PARAMS, at, 1, &x); /* the element travels to the host and back */
    if (rc < 0)
        return rc;
    uint32_t bits;
    memcpy(&bits, &x, 4);
    int bit = (bits & 0x7f800000u) ? 22 : 30; /* a zero or subnormal: bit 22 would leave it below any rounding */
    bits ^= 1u << bit | ((uint32_t)rank & 0x3fffffu); /* the rank below bit 22: two ranks never alike */
    memcpy(&x, &bits, 4);
    return model_write(m, MODEL_PARAMS, at, 1, &x);
}
