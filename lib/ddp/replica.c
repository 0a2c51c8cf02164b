/* replica: the every-step check that all ranks hold the same model (see
 * replica.h). Read replica_check(). */
#include "ddp/replica.h"

#include "base/error.h"
#include "base/hash.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A 64-bit hash of a float array at memory speed: four independent
 * multiply-xor lanes over 8-byte words (one lane's multiply latency would
 * bound it at a quarter of that), mixed at the end. It only has to tell
 * replicas apart, not resist an attacker. */
static uint64_t replica_hash(const float *p, size_t n)
{
    const uint64_t prime = 0x100000001b3ull; /* FNV's 64-bit prime */
    uint64_t h[4] = {HASH_FNV1A_BASIS, HASH_FNV1A_BASIS ^ 1, HASH_FNV1A_BASIS ^ 2, HASH_FNV1A_BASIS ^ 3};
    const unsigned char *b = (const unsigned char *)p;
    size_t bytes = n * sizeof(float), i = 0;
    for (; i + 32 <= bytes; i += 32)
        for (int k = 0; k < 4; k++) {
            uint64_t w;
            memcpy(&w, b + i + 8 * (size_t)k, 8);
            h[k] = (h[k] ^ w) * prime;
        }
    uint64_t out = hash_fnv1a(h[0] ^ hash_mix64(h[1]) ^ hash_mix64(h[2] + 1) ^ hash_mix64(h[3] + 2), b + i, bytes - i);
    return hash_mix64(out ^ bytes);
}

/* The tensors compared, parameters then buffers: tensor t < model_param_tensors
 * is a parameter, the rest buffers. */
static int replica_tensors(const model_t *m) { return model_param_tensors(m) + model_buffer_tensors(m); }

static int replica_wanted(const model_t *m, int t, unsigned what)
{
    return t < model_param_tensors(m) ? (what & REPLICA_PARAMS) != 0 : (what & REPLICA_BUFFERS) != 0;
}

static const struct model_tensor *replica_tensor(const model_t *m, int t, const float **data)
{
    int np = model_param_tensors(m);
    const struct model_tensor *mt = t < np ? model_param(m, t) : model_buffer(m, t - np);
    *data = (t < np ? model_params_const(m) : model_buffers_const(m)) + mt->offset;
    return mt;
}

/* Tensor t differs between rank 0 and some rank: broadcast rank 0's copy,
 * find each rank's first differing element, share them, and describe the
 * lowest differing rank's. Always returns ERR_STATE (or a comm error). */
static int replica_locate(comm_t *comm, const model_t *m, uint64_t step, int t, const uint64_t *hashes, int nt)
{
    int W = comm_world(comm), rank = comm_rank(comm);
    const float *mine;
    const struct model_tensor *mt = replica_tensor(m, t, &mine);
    float *zero = malloc((mt->numel ? mt->numel : 1) * sizeof *zero);
    int64_t *found = calloc((size_t)W * 2, sizeof *found);
    if (!zero || !found) {
        free(zero);
        free(found);
        return err_set(ERR_NOMEM, "replica check: out of memory");
    }
    memcpy(zero, mine, mt->numel * sizeof *zero);
    int rc = comm_broadcast(comm, zero, mt->numel, COMM_FLOAT32, 0);
    int64_t me[2] = {-1, 0}; /* first differing element here, and its bits */
    for (size_t i = 0; rc == 0 && i < mt->numel; i++)
        if (memcmp(&zero[i], &mine[i], sizeof(float)) != 0) {
            uint32_t bits;
            memcpy(&bits, &mine[i], 4);
            me[0] = (int64_t)i;
            me[1] = bits;
            break;
        }
    if (rc == 0)
        rc = comm_allgather(comm, me, found, 2, COMM_INT64);
    if (rc == 0) {
        int q = 1;
        char others[128] = "";
        size_t n = 0;
        for (int k = 1; k < W; k++)
            if (hashes[(size_t)k * (size_t)nt + (size_t)t] != hashes[t] && n < sizeof others)
                n += (size_t)snprintf(others + n, sizeof others - n, "%s%d", n ? ", " : "", k);
        while (q < W && found[2 * q] < 0)
            q++;
        if (q == W) { /* the hashes differ but no element does: the check itself is broken */
            rc = err_set(ERR_STATE, "step %llu: rank %d: the replicas' hashes of %s differ, but no element does",
                         (unsigned long long)step, rank, mt->name);
        } else {
            size_t e = (size_t)found[2 * q];
            uint32_t bits = (uint32_t)found[2 * q + 1];
            float theirs;
            memcpy(&theirs, &bits, 4);
            char where[64] = "";
            if (mt->ndim == 2)
                snprintf(where, sizeof where, " (row %zu, column %zu)", e / (size_t)mt->shape[1],
                         e % (size_t)mt->shape[1]);
            rc = err_set(ERR_STATE, "step %llu: rank %d's %s differs from rank 0's at element %zu%s: %.9g on rank %d, "
                                    "%.9g on rank 0 (ranks differing in %s: %s)",
                         (unsigned long long)step, q, mt->name, e, where, theirs, q, zero[e], mt->name, others);
        }
    }
    free(zero);
    free(found);
    return rc;
}

int replica_check(comm_t *comm, const model_t *m, uint64_t step, unsigned what)
{
    int W = comm_world(comm), nt = replica_tensors(m);
    uint64_t *mine = malloc((size_t)nt * sizeof *mine), *all = malloc((size_t)nt * (size_t)W * sizeof *all);
    int rc = mine && all ? 0 : err_set(ERR_NOMEM, "replica check: out of memory");
    for (int t = 0; rc == 0 && t < nt; t++) {
        const float *data;
        const struct model_tensor *mt = replica_tensor(m, t, &data);
        mine[t] = replica_wanted(m, t, what) ? replica_hash(data, mt->numel) : 0;
    }
    if (rc == 0)
        rc = comm_allgather(comm, mine, all, (size_t)nt, COMM_INT64);
    /* the first tensor, in model order, where any rank differs from rank 0;
     * every rank sees the same table, so every rank takes the same branch */
    for (int t = 0; rc == 0 && t < nt; t++)
        for (int q = 1; q < W; q++)
            if (all[(size_t)q * (size_t)nt + (size_t)t] != all[t]) {
                rc = replica_locate(comm, m, step, t, all, nt);
                goto out;
            }
out:
    free(mine);
    free(all);
    return rc;
}
