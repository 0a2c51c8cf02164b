/* comm_checks: rank 0's fingerprint and result checksum against everyone's
 * (see comm_checks.h). */
#include "comm/comm_checks.h"

#include "base/error.h"

#include <stdlib.h>

int comm_checks_fingerprint(comm_t *c, const struct comm_coll_desc *d, comm_checks_exchange_fn exchange)
{
    struct comm_fingerprint mine, *all = malloc((size_t)c->world * sizeof *all);
    if (!all)
        return err_set(ERR_NOMEM, "%s: rank %d: cannot allocate %d fingerprints", c->ops->name, c->rank, c->world);
    comm_fingerprint_of(d, &mine);
    int rc = exchange(c, &mine, all, sizeof mine, d, " (the fingerprint check)");
    for (int r = 1; rc == 0 && r < c->world; r++)
        if (comm_fingerprint_compare(0, &all[0], r, &all[r]) < 0)
            rc = err_wrap(ERR_STATE, "%s: rank %d", c->ops->name, c->rank);
    free(all);
    return rc;
}

int comm_checks_result_bytes(const struct comm_coll_desc *d, int world, size_t *bytes)
{
    if (d->coll != COMM_ALLREDUCE && d->coll != COMM_BROADCAST && d->coll != COMM_ALLGATHER)
        return 0;
    *bytes = (d->coll == COMM_ALLGATHER ? d->count * (size_t)world : d->count) * comm_dtype_size(d->dtype);
    return 1;
}

int comm_checks_results(comm_t *c, const struct comm_coll_desc *d, uint64_t mine, comm_checks_exchange_fn exchange)
{
    uint64_t *all = malloc((size_t)c->world * sizeof *all);
    if (!all)
        return err_set(ERR_NOMEM, "%s: rank %d: cannot allocate %d checksums", c->ops->name, c->rank, c->world);
    int rc = exchange(c, &mine, all, sizeof mine, d, " (the result check)");
    char desc[128];
    for (int r = 1; rc == 0 && r < c->world; r++)
        if (all[r] != all[0])
            rc = err_set(ERR_STATE,
                         "%s: rank %d: result check: after %s, rank %d's result differs from rank 0's (checksum "
                         "%016llx vs %016llx): the ranks no longer hold the same values",
                         c->ops->name, c->rank, comm_coll_describe(d, desc, sizeof desc), r,
                         (unsigned long long)all[r], (unsigned long long)all[0]);
    free(all);
    return rc;
}
