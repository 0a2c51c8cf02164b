/* comm_checks: fingerprints and result checksums compared across ranks, and
 * the majority vote that says who differs (see comm_checks.h). */
#include "comm/comm_checks.h"

#include "base/error.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

/* ---- the vote -------------------------------------------------------------- */

static int checks_same_fingerprint(const void *values, int a, int b)
{
    const struct comm_fingerprint *x = (const struct comm_fingerprint *)values + a,
                                  *y = (const struct comm_fingerprint *)values + b;
    return x->seq == y->seq && x->count == y->count && x->coll == y->coll && x->op == y->op &&
           x->dtype == y->dtype && x->root == y->root;
}

static int checks_same_checksum(const void *values, int a, int b)
{
    return ((const uint64_t *)values)[a] == ((const uint64_t *)values)[b];
}

/* Boyer and Moore's majority vote (one pass finds the only value that can
 * hold a majority, a second counts it): linear in the world, so it costs
 * nothing at thousands of MPI ranks. */
void comm_checks_vote(const void *values, int world, comm_checks_same_fn same, struct comm_checks_verdict *v)
{
    int candidate = 0, lead = 0;
    for (int r = 0; r < world; r++) {
        if (lead == 0)
            candidate = r, lead = 1;
        else
            lead += same(values, candidate, r) ? 1 : -1;
    }
    int agree = 0, lowest = -1;
    for (int r = 0; r < world; r++)
        if (same(values, candidate, r)) {
            agree++;
            if (lowest < 0)
                lowest = r;
        }
    v->majority = 2 * agree > world;
    v->ref = v->majority ? lowest : 0;
    v->agree = 0;
    v->odd = -1;
    int listed = 0, odd_count = 0;
    size_t used = 0;
    for (int r = 0; r < world; r++) {
        if (same(values, v->ref, r)) {
            v->agree++;
            continue;
        }
        if (v->odd < 0)
            v->odd = r;
        odd_count++;
    }
    /* "rank 3" / "ranks 1 and 5" / "ranks 1, 5 and 6", the first 8 named */
    v->odd_ranks[0] = '\0';
    for (int r = 0; r < world && listed < 8; r++) {
        if (same(values, v->ref, r))
            continue;
        const char *sep = listed == 0 ? (odd_count == 1 ? "rank " : "ranks ")
                          : listed == odd_count - 1 ? " and " : ", ";
        used += (size_t)snprintf(v->odd_ranks + used, sizeof v->odd_ranks - used, "%s%d", sep, r);
        listed++;
    }
    if (listed < odd_count)
        snprintf(v->odd_ranks + used, sizeof v->odd_ranks - used, " and %d more", odd_count - listed);
}

void comm_checks_no_majority(int world, const char *what, char *buf, size_t len)
{
    if (world == 2)
        snprintf(buf, len, "; with two ranks there is no majority to tell which one is wrong");
    else
        snprintf(buf, len, "; no %s is shared by a majority of the %d ranks, so none can be called the wrong one",
                 what, world);
}

/* ---- fingerprints ------------------------------------------------------------ */

/* "#2 allreduce sum 1024 x float32" (root added for broadcast) */
static void checks_fingerprint_text(const struct comm_fingerprint *f, char *buf, size_t len)
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

/* "collective, count": the fields in which a and b differ. */
static void checks_fingerprint_fields(const struct comm_fingerprint *a, const struct comm_fingerprint *b, char *buf,
                                      size_t len)
{
    size_t n = 0;
    buf[0] = '\0';
#define CHECKS_FIELD(cond, name)                                                             \
    if (cond)                                                                                \
        n += (size_t)snprintf(buf + n, len - n, "%s" name, n ? ", " : "")
    CHECKS_FIELD(a->seq != b->seq, "sequence number");
    CHECKS_FIELD(a->coll != b->coll, "collective");
    CHECKS_FIELD(a->op != b->op, "op");
    CHECKS_FIELD(a->count != b->count, "count");
    CHECKS_FIELD(a->dtype != b->dtype, "type");
    CHECKS_FIELD(a->root != b->root, "root");
#undef CHECKS_FIELD
}

int comm_checks_compare_fingerprints(const struct comm_fingerprint *fps, int world)
{
    struct comm_checks_verdict v;
    comm_checks_vote(fps, world, checks_same_fingerprint, &v);
    if (v.odd < 0)
        return 0;
    const struct comm_fingerprint *ref = &fps[v.ref], *odd = &fps[v.odd];
    char tref[128], todd[128], fields[96], why[128];
    checks_fingerprint_text(ref, tref, sizeof tref);
    checks_fingerprint_text(odd, todd, sizeof todd);
    checks_fingerprint_fields(ref, odd, fields, sizeof fields);
    unsigned long long seq = ref->seq < odd->seq ? ref->seq : odd->seq;
    if (v.majority && v.agree == world - 1)
        return err_set(ERR_STATE, "fingerprint mismatch before collective #%llu: rank %d called %s, the other %d "
                       "ranks called %s (differs: %s)", seq, v.odd, todd, v.agree, tref, fields);
    if (v.majority)
        return err_set(ERR_STATE, "fingerprint mismatch before collective #%llu: %s called something else than the "
                       "other %d ranks, which called %s; rank %d called %s (differs: %s)", seq, v.odd_ranks, v.agree,
                       tref, v.odd, todd, fields);
    comm_checks_no_majority(world, "call", why, sizeof why);
    return err_set(ERR_STATE, "fingerprint mismatch before collective #%llu: rank %d called %s, rank %d called %s "
                   "(differs: %s)%s", seq, v.ref, tref, v.odd, todd, fields, why);
}

/* ---- results ------------------------------------------------------------------ */

int comm_checks_compare_results(const struct comm_coll_desc *d, const uint64_t *sums, int world,
                                comm_checks_detail_fn detail, const void *ctx)
{
    struct comm_checks_verdict v;
    comm_checks_vote(sums, world, checks_same_checksum, &v);
    if (v.odd < 0)
        return 0;
    char desc[128], where[192] = "", why[128] = "";
    comm_coll_describe(d, desc, sizeof desc);
    if (detail) {
        where[0] = ';', where[1] = ' ';
        detail(ctx, v.odd, v.ref, where + 2, sizeof where - 2);
    }
    uint64_t odd = sums[v.odd], ref = sums[v.ref];
    if (v.majority && v.agree == world - 1)
        return err_set(ERR_STATE, "result check: after %s, rank %d's result differs from the other %d ranks', which "
                       "agree (checksum %016" PRIx64 " vs %016" PRIx64 "%s): the ranks no longer hold the same values",
                       desc, v.odd, v.agree, odd, ref, where);
    if (v.majority)
        return err_set(ERR_STATE, "result check: after %s, %s hold results that differ from the one the other %d "
                       "ranks agree on (rank %d: checksum %016" PRIx64 " vs %016" PRIx64 "%s): the ranks no longer "
                       "hold the same values", desc, v.odd_ranks, v.agree, v.odd, odd, ref, where);
    comm_checks_no_majority(world, "result", why, sizeof why);
    return err_set(ERR_STATE, "result check: after %s, rank %d's result differs from rank %d's (checksum %016" PRIx64
                   " vs %016" PRIx64 "%s): the ranks no longer hold the same values%s", desc, v.odd, v.ref, odd, ref,
                   where, why);
}

/* ---- the process backends ------------------------------------------------------- */

int comm_checks_fingerprint(comm_t *c, const struct comm_coll_desc *d, comm_checks_exchange_fn exchange)
{
    struct comm_fingerprint mine, *all = malloc((size_t)c->world * sizeof *all);
    if (!all)
        return err_set(ERR_NOMEM, "%s: rank %d: cannot allocate %d fingerprints", c->ops->name, c->rank, c->world);
    comm_fingerprint_of(d, &mine);
    int rc = exchange(c, &mine, all, sizeof mine, d, " (the fingerprint check)");
    if (rc == 0 && comm_checks_compare_fingerprints(all, c->world) < 0)
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
    if (rc == 0 && comm_checks_compare_results(d, all, c->world, NULL, NULL) < 0)
        rc = err_wrap(ERR_STATE, "%s: rank %d", c->ops->name, c->rank);
    free(all);
    return rc;
}
