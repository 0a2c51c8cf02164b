/* comm: the communicator's front (see comm.h): argument checks, sequence
 * numbers, the broken state, dispatch to the backend's vtable
 * (comm_backend.h). Nothing here knows how data moves, nor which backends
 * exist: lib/backend_table.h finds one by name. */
#include "comm/comm.h"

#include "backend_table.h"
#include "base/error.h"
#include "base/hash.h"
#include "base/vclock.h"
#include "comm/comm_backend.h"
#include "comm/costmodel.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void comm_config_default(struct comm_config *cfg)
{
    *cfg = (struct comm_config){
        .backend = "sim",
        .launch = COMM_LAUNCH_AUTO,
        .world = 0,
        .rank = -1,
        .timeout_s = 0,
        .algo = COMM_ALGO_DEFAULT,
        .check = COMM_CHECK_NONE,
        .device = -1,
    };
}

/* ---- worlds ---------------------------------------------------------------- */

int comm_world_create(const char *backend, const struct comm_world_options *opt, comm_world_t **out)
{
    *out = NULL;
    const struct comm_backend_ops *ops;
    int rc = backend_table_comm(backend, &ops);
    if (rc < 0)
        return rc;
    if (!opt || opt->world < 1)
        return err_set(ERR_ARG, "comm: a %s world needs at least 1 rank, got %d", backend, opt ? opt->world : 0);
    if (!ops->world_create)
        return err_set(ERR_UNSUPPORTED, "comm: backend %s has no thread mode (start one process per rank)", backend);
    return ops->world_create(opt, out);
}

void comm_world_abort(comm_world_t *w, int rank, const char *why)
{
    if (w && ((struct comm_world_base *)w)->ops->world_abort)
        ((struct comm_world_base *)w)->ops->world_abort(w, rank, why);
}

const char *comm_world_diagnosis(const comm_world_t *w)
{
    return w ? ((const struct comm_world_base *)w)->diagnosis : "";
}

void comm_world_destroy(comm_world_t *w)
{
    if (w)
        ((struct comm_world_base *)w)->ops->world_destroy(w);
}

/* ---- communicators --------------------------------------------------------- */

int comm_launch_resolve(const char *backend, enum comm_launch requested, enum comm_launch *out)
{
    const struct comm_backend_ops *ops;
    int rc = backend_table_comm(backend, &ops);
    if (rc < 0)
        return rc;
    return ops->launch_resolve(requested, out);
}

int comm_open(const struct comm_config *cfg, comm_t **out)
{
    *out = NULL;
    if (!cfg)
        return err_set(ERR_ARG, "comm: no configuration");
    const struct comm_backend_ops *ops;
    int rc = backend_table_comm(cfg->backend, &ops);
    if (rc < 0)
        return rc;
    if (cfg->timeout_s == COMM_NO_TIMEOUT) {
        if (!ops->untimed)
            return err_set(ERR_UNSUPPORTED, "comm: backend %s always has a watchdog: give a timeout (%g .. %g s)",
                           ops->name, COMM_MIN_TIMEOUT_S, COMM_MAX_TIMEOUT_S);
    } else if (cfg->timeout_s != 0 && /* 0: the default */
               !(cfg->timeout_s >= COMM_MIN_TIMEOUT_S && cfg->timeout_s <= COMM_MAX_TIMEOUT_S)) { /* NaN too */
        return err_set(ERR_ARG, "comm: timeout must be %g .. %g s (or 0 for the default), got %g s%s",
                       COMM_MIN_TIMEOUT_S, COMM_MAX_TIMEOUT_S, cfg->timeout_s,
                       cfg->timeout_s > 0 && cfg->timeout_s < COMM_MIN_TIMEOUT_S
                           ? ": a shorter watchdog fires on ranks that are only waiting for a core" : "");
    }
    if ((unsigned)cfg->algo >= COMM_ALGO_COUNT || (unsigned)cfg->check > COMM_CHECK_RESULTS)
        return err_set(ERR_ARG, "comm: invalid algorithm or check mode");
    struct comm_config resolved = *cfg;
    rc = ops->launch_resolve(cfg->launch, &resolved.launch);
    if (rc < 0)
        return rc;
    if (resolved.launch == COMM_LAUNCH_THREADS) {
        if (!cfg->shared)
            return err_set(ERR_ARG, "comm: launch mode 'threads' needs the shared world of comm_world_create()");
        if (((struct comm_world_base *)cfg->shared)->ops != ops)
            return err_set(ERR_ARG, "comm: the shared world was created for backend %s, not %s",
                           ((struct comm_world_base *)cfg->shared)->ops->name, ops->name);
    }

    comm_t *c = calloc(1, sizeof *c);
    if (!c)
        return err_set(ERR_NOMEM, "comm: cannot allocate a communicator");
    c->ops = ops;
    c->rank = -1;
    c->next_seq = 1;
    c->timeout_s = cfg->timeout_s > 0 ? cfg->timeout_s : cfg->timeout_s == 0 ? COMM_DEFAULT_TIMEOUT_S : 0;
    c->algo = cfg->algo;
    c->check = cfg->check;
    rc = ops->open(c, &resolved);
    if (rc < 0) {
        free(c);
        return rc;
    }
    *out = c;
    return 0;
}

void comm_close(comm_t *c)
{
    if (!c)
        return;
    c->ops->close(c);
    free(c);
}

int comm_rank(const comm_t *c) { return c->rank; }
int comm_world(const comm_t *c) { return c->world; }
const char *comm_backend_name(const comm_t *c) { return c->ops->name; }
int comm_reads_device_memory(const comm_t *c) { return c->ops->mem_alloc != NULL || c->ops->device_memory; }
uint64_t comm_next_seq(const comm_t *c) { return c->next_seq; }

/* ---- buffers -------------------------------------------------------------- */

int comm_mem_alloc(comm_t *c, size_t bytes, void **out)
{
    if (c->ops->mem_alloc)
        return c->ops->mem_alloc(c, bytes, out);
    *out = malloc(bytes ? bytes : 1);
    if (!*out)
        return err_set(ERR_NOMEM, "comm: rank %d: cannot allocate %zu bytes", c->rank, bytes);
    return 0;
}

void comm_mem_free(comm_t *c, void *p)
{
    if (!p)
        return;
    if (c->ops->mem_free)
        c->ops->mem_free(c, p);
    else
        free(p);
}

int comm_mem_upload(comm_t *c, void *dst, const void *host_src, size_t bytes)
{
    if (c->ops->mem_copy)
        return c->ops->mem_copy(c, dst, host_src, bytes, 1);
    if (bytes)
        memcpy(dst, host_src, bytes);
    return 0;
}

int comm_mem_download(comm_t *c, void *host_dst, const void *src, size_t bytes)
{
    if (c->ops->mem_copy)
        return c->ops->mem_copy(c, host_dst, src, bytes, 0);
    if (bytes)
        memcpy(host_dst, src, bytes);
    return 0;
}

/* ---- collectives ------------------------------------------------------------ */

/* Checks what every collective shares; `total` is the largest element count
 * either buffer holds, so the byte size cannot overflow. */
static int comm_check_args(const comm_t *c, const struct comm_coll_desc *d, size_t total)
{
    const char *name = comm_coll_name(d->coll);
    if (c->broken)
        return err_set(ERR_STATE, "rank %d: %s: the communicator is broken by an earlier failure: %s", c->rank, name,
                       c->broken_msg);
    if ((unsigned)d->dtype >= COMM_DTYPE_COUNT)
        return err_set(ERR_ARG, "rank %d: %s: invalid type %d", c->rank, name, (int)d->dtype);
    if ((unsigned)d->op >= COMM_OP_COUNT)
        return err_set(ERR_ARG, "rank %d: %s: invalid op %d", c->rank, name, (int)d->op);
    if (d->op == COMM_AVG && (d->dtype == COMM_INT32 || d->dtype == COMM_INT64))
        return err_set(ERR_ARG, "rank %d: %s: avg is defined for floating-point types only, not %s", c->rank, name,
                       comm_dtype_name(d->dtype));
    if (total > SIZE_MAX / comm_dtype_size(d->dtype))
        return err_set(ERR_RANGE, "rank %d: %s: %zu elements of %s overflow the address space", c->rank, name, total,
                       comm_dtype_name(d->dtype));
    if (total > 0 && (!d->sendbuf || !d->recvbuf))
        return err_set(ERR_ARG, "rank %d: %s: NULL buffer with count %zu", c->rank, name, d->count);
    return 0;
}

/* Marks c broken by the failure `msg` describes; `job_knows`: every rank
 * learns of it without being told (see struct comm). */
static void comm_break(comm_t *c, int job_knows, const char *msg)
{
    c->broken = 1;
    c->job_knows = job_knows;
    snprintf(c->broken_msg, sizeof c->broken_msg, "%s", msg);
}

/* The one path of every collective: checks, sequence number, dispatch, and
 * the broken state after a failure. */
static int comm_start(comm_t *c, struct comm_coll_desc *d, size_t total, comm_request_t **req)
{
    *req = NULL;
    int rc = comm_check_args(c, d, total);
    if (rc < 0)
        return rc;
    comm_request_t *r = calloc(1, sizeof *r);
    if (!r) { /* the others will wait in this collective: comm_abort must tell them */
        rc = err_set(ERR_NOMEM, "rank %d: cannot allocate a request", c->rank);
        comm_break(c, 0, err_msg());
        return rc;
    }
    d->seq = c->next_seq++;
    r->comm = c;
    r->desc = *d;
    r->blocking = c->blocking;
    r->issue_ns = vclock_now_ns();
    rc = c->ops->start(c, r);
    if (rc == COMM_START_SKIPPED) {
        c->next_seq--;
        r->done = 1;
        r->status = 0;
        rc = 0;
    }
    if (rc < 0) {
        /* This rank never started it: the number goes back, so that a comm_abort names it as the
         * first collective this rank missed, and the others waiting in it fail at once. */
        c->next_seq--;
        comm_break(c, r->job_knows, err_msg());
        free(r);
        return rc;
    }
    *req = r;
    return 0;
}

int comm_wait(comm_request_t *req) { return comm_wait_timed(req, NULL); }

int comm_wait_timed(comm_request_t *req, uint64_t *done_ns)
{
    if (!req)
        return err_set(ERR_ARG, "comm_wait: NULL request");
    comm_t *c = req->comm;
    int rc;
    if (req->done) {
        rc = req->status;
        if (rc < 0)
            err_set(rc, "%s", req->err_buf);
    } else {
        rc = c->ops->wait(c, req);
    }
    if (req->done_ns) /* the modelled end: the host waited for it */
        vclock_wait_until_ns(req->done_ns);
    if (done_ns)
        *done_ns = req->done_ns ? req->done_ns : vclock_now_ns();
    if (rc < 0 && !c->broken) /* a collective that failed: every rank gets its own error from it */
        comm_break(c, 1, err_msg());
    free(req);
    return rc;
}

void comm_set_activity(comm_t *c, const char *what)
{
    if (!c)
        return;
    snprintf(c->activity, sizeof c->activity, "%s", what ? what : "");
    if (c->ops->activity)
        c->ops->activity(c, what);
}

int comm_cost_model(const comm_t *c, struct costmodel *out, enum comm_algo *algo)
{
    const struct costmodel *m = c && c->ops->cost_model && !vclock_is_wall() ? c->ops->cost_model(c, algo) : NULL;
    if (m)
        *out = *m;
    return m != NULL;
}

/* How every rank hears of this rank's own failure: "rank R failed while
 * <activity>: <reason>". */
static void comm_failure_story(const comm_t *c, const char *reason, char *buf, size_t len)
{
    snprintf(buf, len, "rank %d failed %s%s: %s", c->rank, c->activity[0] ? "while " : "in its own code",
             c->activity, reason);
}

int comm_abort(comm_t *c, int code)
{
    if (!c || c->job_knows) /* a failed collective, a shared verdict, or told already: every rank knows */
        return code;
    char reason[1024], msg[COMM_STORY_BYTES];
    snprintf(reason, sizeof reason, "%s", err_msg());
    comm_failure_story(c, reason, msg, sizeof msg);
    comm_break(c, 1, msg);
    if (c->ops->abort)
        c->ops->abort(c, msg);
    return err_set(code, "%s", reason); /* the backend's calls may have left messages of their own */
}

/* A failure every rank knows of, `msg` being what the job's report says:
 * broken, nobody told. */
static void comm_settle(comm_t *c, const char *msg)
{
    comm_break(c, 1, msg);
    if (c->ops->settled)
        c->ops->settled(c, msg);
}

int comm_fail_shared(comm_t *c, int code)
{
    if (c && !c->broken)
        comm_settle(c, err_msg());
    return code;
}

int comm_agree_failure(comm_t *c, int rc)
{
    char mine[1024] = ""; /* this rank's message, whatever the exchange leaves in err_msg() */
    if (rc < 0)
        snprintf(mine, sizeof mine, "%s", err_msg());
    int W = c->world;
    int64_t me[2] = {rc < 0 ? rc : 0, rc < 0 ? (int64_t)hash_fnv1a(HASH_FNV1A_BASIS, mine, strlen(mine)) : 0};
    int64_t *all = malloc((size_t)W * sizeof me);
    if (!all) /* this rank cannot take part: its own failure, for comm_abort to tell the ranks waiting in it */
        return err_set(ERR_NOMEM, "rank %d: cannot gather %d ranks' results", c->rank, W);
    int xrc = comm_allgather(c, me, all, 2, COMM_INT64);
    int failed = 0, first = -1, alike = 1;
    for (int r = 0; xrc == 0 && r < W; r++) {
        if (all[2 * r] == 0)
            continue;
        failed++;
        first = first < 0 ? r : first;
        alike &= all[2 * r] == all[2 * first] && all[2 * r + 1] == all[2 * first + 1];
    }
    free(all);
    if (xrc < 0 || failed == 0)
        return xrc;
    if (failed == W && alike) { /* the job's verdict: said as it is, by every rank, blaming none */
        comm_settle(c, mine);
        return err_set(rc, "%s", mine);
    }
    /* Each failure is its rank's own: the lowest failed rank's story reaches every rank. */
    union {
        int64_t words[COMM_STORY_BYTES / sizeof(int64_t)];
        char text[COMM_STORY_BYTES];
    } story;
    memset(&story, 0, sizeof story);
    if (c->rank == first)
        comm_failure_story(c, mine, story.text, sizeof story.text);
    if ((xrc = comm_broadcast(c, story.words, sizeof story.words / sizeof story.words[0], COMM_INT64, first)) < 0)
        return xrc;
    story.text[sizeof story.text - 1] = '\0';
    size_t n = strlen(story.text);
    if (failed > 1)
        snprintf(story.text + n, sizeof story.text - n, " (and %d other rank%s failed)", failed - 1,
                 failed > 2 ? "s" : "");
    comm_settle(c, story.text);
    return rc < 0 ? err_set(rc, "%s", mine) : err_set(ERR_PEER, "%s", story.text);
}

int comm_allreduce_start(comm_t *c, const void *sendbuf, void *recvbuf, size_t count, enum comm_dtype dtype,
                         enum comm_op op, comm_request_t **req)
{
    struct comm_coll_desc d = {.coll = COMM_ALLREDUCE, .op = op, .dtype = dtype, .count = count, .root = -1,
                               .sendbuf = sendbuf, .recvbuf = recvbuf};
    return comm_start(c, &d, count, req);
}

int comm_broadcast_start(comm_t *c, void *buf, size_t count, enum comm_dtype dtype, int root, comm_request_t **req)
{
    *req = NULL;
    if (root < 0 || root >= c->world)
        return err_set(ERR_ARG, "rank %d: broadcast: root %d is not a rank of a world of %d", c->rank, root, c->world);
    struct comm_coll_desc d = {.coll = COMM_BROADCAST, .op = COMM_SUM, .dtype = dtype, .count = count, .root = root,
                               .sendbuf = buf, .recvbuf = buf};
    return comm_start(c, &d, count, req);
}

/* count x world elements, or SIZE_MAX when that overflows (then caught). */
static size_t comm_times_world(size_t count, int world)
{
    return count > SIZE_MAX / (size_t)world ? SIZE_MAX : count * (size_t)world;
}

int comm_reduce_scatter_start(comm_t *c, const void *sendbuf, void *recvbuf, size_t recvcount,
                              enum comm_dtype dtype, enum comm_op op, comm_request_t **req)
{
    struct comm_coll_desc d = {.coll = COMM_REDUCE_SCATTER, .op = op, .dtype = dtype, .count = recvcount,
                               .root = -1, .sendbuf = sendbuf, .recvbuf = recvbuf};
    return comm_start(c, &d, comm_times_world(recvcount, c->world), req);
}

int comm_allgather_start(comm_t *c, const void *sendbuf, void *recvbuf, size_t sendcount, enum comm_dtype dtype,
                         comm_request_t **req)
{
    struct comm_coll_desc d = {.coll = COMM_ALLGATHER, .op = COMM_SUM, .dtype = dtype, .count = sendcount,
                               .root = -1, .sendbuf = sendbuf, .recvbuf = recvbuf};
    return comm_start(c, &d, comm_times_world(sendcount, c->world), req);
}

int comm_barrier_start(comm_t *c, comm_request_t **req)
{
    struct comm_coll_desc d = {.coll = COMM_BARRIER, .op = COMM_SUM, .dtype = COMM_FLOAT32, .root = -1};
    return comm_start(c, &d, 0, req);
}

/* The blocking forms: start, then wait when the start succeeded. */
#define COMM_BLOCKING(start_call)                                                 \
    do {                                                                          \
        comm_request_t *req = NULL;                                               \
        c->blocking = 1;                                                          \
        int rc_ = (start_call);                                                   \
        c->blocking = 0;                                                          \
        return rc_ < 0 ? rc_ : comm_wait(req);                                    \
    } while (0)

int comm_allreduce(comm_t *c, const void *sendbuf, void *recvbuf, size_t count, enum comm_dtype dtype, enum comm_op op)
{
    COMM_BLOCKING(comm_allreduce_start(c, sendbuf, recvbuf, count, dtype, op, &req));
}

int comm_broadcast(comm_t *c, void *buf, size_t count, enum comm_dtype dtype, int root)
{
    COMM_BLOCKING(comm_broadcast_start(c, buf, count, dtype, root, &req));
}

int comm_reduce_scatter(comm_t *c, const void *sendbuf, void *recvbuf, size_t recvcount, enum comm_dtype dtype,
                        enum comm_op op)
{
    COMM_BLOCKING(comm_reduce_scatter_start(c, sendbuf, recvbuf, recvcount, dtype, op, &req));
}

int comm_allgather(comm_t *c, const void *sendbuf, void *recvbuf, size_t sendcount, enum comm_dtype dtype)
{
    COMM_BLOCKING(comm_allgather_start(c, sendbuf, recvbuf, sendcount, dtype, &req));
}

int comm_barrier(comm_t *c)
{
    COMM_BLOCKING(comm_barrier_start(c, &req));
}
