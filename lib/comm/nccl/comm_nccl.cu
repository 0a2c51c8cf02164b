/* nccl_comm: the NCCL backend (see nccl_comm.h): one rank per GPU, every
 * collective queued on a CUDA stream, every wait bounded by the timeout.
 *
 * Read in this order: how a rank finds its id and GPU (nccl_open and the three
 * launch modes), nccl_settle() and nccl_poll() (how waiting becomes a timeout
 * and ncclCommAbort instead of a hang), nccl_start() / nccl_wait(), then the
 * debug checks, which move their few bytes through NCCL itself.
 *
 * Non-blocking communicators (ncclConfig_t.blocking = 0, NCCL >= 2.14): any
 * NCCL call may return ncclInProgress and finish in the background;
 * ncclCommGetAsyncError says when. Without them, ncclCommInitRank waits
 * forever for a rank that never starts, and only a watchdog thread could get
 * out (which is what PyTorch's ProcessGroupNCCL does).
 *
 * The ncclUniqueId is 128 opaque bytes made by rank 0 (ncclGetUniqueId: it
 * holds the address where rank 0's NCCL bootstrap listens); every rank must
 * get the same bytes before ncclCommInitRankConfig. How it travels is the
 * only difference between the launch modes. NCCL's own variables (NCCL_DEBUG,
 * NCCL_SOCKET_IFNAME, ...) are read by NCCL and pass through untouched.
 */
#include "comm/nccl/comm_nccl.h"

#include "comm/comm_checks.h"
extern "C" { /* the core's C headers without C++ guards of their own */
#include "base/clock.h"
#include "base/error.h"
}
#include "comm/rendezvous.h"
#ifdef HAVE_MPI
#include "comm/mpi/comm_mpi.h"
#endif

#include <cuda_runtime.h>
#include <nccl.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if NCCL_VERSION_CODE < NCCL_VERSION(2, 14, 0)
#error "the NCCL backend needs NCCL 2.14 or newer (non-blocking communicators, for timeouts)"
#endif

/* The thread-per-GPU world: what the rank threads of one process share. */
struct nccl_world {
    struct comm_world_base base;
    int world;
    int first_device;
    ncclUniqueId id;
    pthread_mutex_t lock;    /* guards failed_msg */
    char failed_msg[1536];   /* comm_abort's or comm_world_abort's message, "" until a rank failed */
};

struct nccl_comm {
    ncclComm_t comm;
    cudaStream_t stream;
    int own_stream;
    int device;
    struct nccl_world *w; /* launch THREADS: the world, where a failed rank leaves its message */
    int mpi_session; /* began an MPI session (launch MPI): end it at close; failure notices travel there */
    int aborted;     /* ncclCommAbort was called: nothing more to free in NCCL */
    void *scratch;   /* device: the checks' exchanges and the barrier's float */
    char *staging;   /* pinned host: the checks' bytes on their way in and out */
};

struct nccl_req {
    cudaEvent_t done; /* recorded on the stream after the collective */
};

/* ---- messages ---------------------------------------------------------------- */

static int nccl_cuda_fail(cudaError_t e, const char *call, int rank, int device, const char *what)
{
    return err_set(ERR_IO, "nccl: rank %d (GPU %d): %s%s%s failed: %s (%s)", rank, device, what, what[0] ? ": " : "",
                   call, cudaGetErrorName(e), cudaGetErrorString(e));
}

static int nccl_fail(ncclResult_t r, const char *call, int rank, int device, ncclComm_t comm, const char *what)
{
    const char *last = comm ? ncclGetLastError(comm) : "";
    return err_set(ERR_IO, "nccl: rank %d (GPU %d): %s%s%s failed: %s%s%s", rank, device, what, what[0] ? ": " : "",
                   call, ncclGetErrorString(r), last && last[0] ? ": " : "", last ? last : "");
}

/* ---- devices ------------------------------------------------------------------- */

/* The number of CUDA devices; a machine with none (or no driver) gets a clear
 * ERR_UNSUPPORTED instead of a CUDA error later. */
static int nccl_device_count(int *n)
{
    *n = 0;
    cudaError_t e = cudaGetDeviceCount(n);
    if (e != cudaSuccess || *n == 0) {
        cudaGetLastError(); /* clear the sticky error for whoever comes next */
        return err_set(ERR_UNSUPPORTED, "nccl: no CUDA device found (cudaGetDeviceCount: %s); run --backend=sim or "
                       "--backend=mpi on this machine", e != cudaSuccess ? cudaGetErrorString(e) : "0 devices");
    }
    return 0;
}

/* ---- waiting with a deadline ----------------------------------------------------- */

/* Turns an ncclInProgress answer into the final one, polling
 * ncclCommGetAsyncError until deadline_ns. Sets *timed_out when the call was
 * still in progress then. */
static ncclResult_t nccl_settle(ncclComm_t comm, ncclResult_t r, uint64_t deadline_ns, int *timed_out)
{
    *timed_out = 0;
    while (r == ncclInProgress) {
        if (clock_now_ns() > deadline_ns) {
            *timed_out = 1;
            return r;
        }
        sched_yield();
        ncclResult_t q = ncclCommGetAsyncError(comm, &r);
        if (q != ncclSuccess)
            return q;
    }
    return r;
}

/* Aborts the communicator: its kernels stop, its peers see an error, and
 * nothing of it may be used again. */
static void nccl_abort(struct nccl_comm *nc)
{
    if (!nc->aborted && nc->comm)
        ncclCommAbort(nc->comm);
    nc->aborted = 1;
}

/* Whether another rank failed in its own code (comm_abort), and its message:
 * from the world of rank threads, or from the MPI session's notices. A
 * torchrun-style launch has no channel for it: its peers learn from NCCL's
 * own error when this rank's connections close, or from their watchdog. */
static int nccl_heard_failure(struct nccl_comm *nc, char *buf, size_t len)
{
    int heard = 0;
    if (nc->w) {
        pthread_mutex_lock(&nc->w->lock);
        heard = nc->w->failed_msg[0] != '\0';
        if (heard)
            snprintf(buf, len, "%s", nc->w->failed_msg);
        pthread_mutex_unlock(&nc->w->lock);
    }
#ifdef HAVE_MPI
    int from;
    uint64_t seq; /* every collective ends: the failed rank's communicator is aborted */
    if (!heard && nc->mpi_session)
        heard = comm_mpi_session_heard_failure(buf, len, &from, &seq);
#endif
    return heard;
}

/* Another rank failed: this rank's communicator is aborted too (its kernels
 * may wait for that rank's data), and the error names the failed rank. */
static int nccl_peer_failed(comm_t *c, const struct comm_coll_desc *d, const char *phase, const char *msg)
{
    struct nccl_comm *nc = (struct nccl_comm *)c->impl;
    char desc[128];
    nccl_abort(nc);
    return err_set(ERR_PEER, "nccl: rank %d (GPU %d): %s%s: %s", c->rank, nc->device,
                   comm_coll_describe(d, desc, sizeof desc), phase, msg);
}

/* Waits for `done` (an event after the collective d) until the timeout. An
 * asynchronous NCCL error (a peer died, a link broke) or the timeout aborts
 * the communicator. `phase` says which part of the collective waited. */
static int nccl_poll(comm_t *c, cudaEvent_t done, const struct comm_coll_desc *d, const char *phase)
{
    struct nccl_comm *nc = (struct nccl_comm *)c->impl;
    uint64_t deadline = clock_deadline_s(c->timeout_s);
    char desc[128], failed[1536];
    for (;;) {
        cudaError_t e = cudaEventQuery(done);
        if (e == cudaSuccess)
            return 0;
        if (nccl_heard_failure(nc, failed, sizeof failed))
            return nccl_peer_failed(c, d, phase, failed);
        if (e != cudaErrorNotReady)
            return nccl_cuda_fail(e, "cudaEventQuery", c->rank, nc->device, comm_coll_describe(d, desc, sizeof desc));
        ncclResult_t async = ncclSuccess;
        ncclCommGetAsyncError(nc->comm, &async);
        if (async != ncclSuccess && async != ncclInProgress) {
            nccl_fail(async, "the communicator", c->rank, nc->device, nc->comm, comm_coll_describe(d, desc, sizeof desc));
            nccl_abort(nc);
            return err_wrap(ERR_PEER, "NCCL reported an asynchronous error (a peer failed or a link broke); the "
                            "communicator was aborted");
        }
        if (clock_now_ns() > deadline) {
            nccl_abort(nc);
            return err_set(ERR_TIMEOUT,
                           "nccl: rank %d (GPU %d): %s%s did not complete within %g s: some rank never launched it, "
                           "or launched a different collective (run with the fingerprint check to tell). The "
                           "communicator was aborted (ncclCommAbort) and cannot be used again",
                           c->rank, nc->device, comm_coll_describe(d, desc, sizeof desc), phase, c->timeout_s);
        }
        sched_yield();
    }
}

/* Records an event on the stream and polls it. */
static int nccl_sync(comm_t *c, const struct comm_coll_desc *d, const char *phase)
{
    struct nccl_comm *nc = (struct nccl_comm *)c->impl;
    cudaEvent_t ev;
    cudaError_t e = cudaEventCreateWithFlags(&ev, cudaEventDisableTiming);
    if (e == cudaSuccess && (e = cudaEventRecord(ev, nc->stream)) != cudaSuccess)
        cudaEventDestroy(ev);
    if (e != cudaSuccess)
        return nccl_cuda_fail(e, "cudaEventRecord", c->rank, nc->device, phase);
    int rc = nccl_poll(c, ev, d, phase);
    cudaEventDestroy(ev);
    return rc;
}

/* ---- the thread-per-GPU world ---------------------------------------------------------- */

static int nccl_world_create(const struct comm_world_options *opt, comm_world_t **out)
{
    if (opt->faults)
        return err_set(ERR_UNSUPPORTED, "nccl: fault injection is the simulator's (--backend=sim)");
    int ndev, rc = nccl_device_count(&ndev);
    if (rc < 0)
        return rc;
    if (opt->first_device < 0 || opt->first_device + opt->world > ndev)
        return err_set(ERR_ARG, "nccl: a world of %d ranks from GPU %d needs GPUs %d..%d; this machine has %d "
                       "(NCCL wants one GPU per rank)", opt->world, opt->first_device, opt->first_device,
                       opt->first_device + opt->world - 1, ndev);
    struct nccl_world *w = (struct nccl_world *)calloc(1, sizeof *w);
    if (!w)
        return err_set(ERR_NOMEM, "nccl: cannot allocate a world");
    w->base.ops = &comm_backend_nccl;
    w->world = opt->world;
    w->first_device = opt->first_device;
    ncclResult_t r = ncclGetUniqueId(&w->id);
    if (r != ncclSuccess) {
        free(w);
        return nccl_fail(r, "ncclGetUniqueId", 0, opt->first_device, NULL, "creating the world");
    }
    pthread_mutex_init(&w->lock, NULL);
    *out = (comm_world_t *)w;
    return 0;
}

static void nccl_world_destroy(comm_world_t *cw)
{
    struct nccl_world *w = (struct nccl_world *)cw;
    pthread_mutex_destroy(&w->lock);
    free(w);
}

/* comm_world_abort: the first failure's message, for every rank's waits. */
static void nccl_world_abort(comm_world_t *cw, int rank, const char *msg)
{
    (void)rank; /* NCCL has no injected faults: every failed rank tells */
    struct nccl_world *w = (struct nccl_world *)cw;
    pthread_mutex_lock(&w->lock);
    if (!w->failed_msg[0])
        snprintf(w->failed_msg, sizeof w->failed_msg, "%s", msg);
    pthread_mutex_unlock(&w->lock);
}

/* ---- opening: the three ways to find rank, world, GPU and id ------------------------------ */

static int nccl_launch_resolve(enum comm_launch requested, enum comm_launch *out)
{
    enum comm_launch l = requested;
    if (l == COMM_LAUNCH_AUTO) {
        const char *mpi_world = getenv("OMPI_COMM_WORLD_SIZE") ? getenv("OMPI_COMM_WORLD_SIZE") : getenv("PMI_SIZE");
        l = getenv("RANK") && getenv("WORLD_SIZE") ? COMM_LAUNCH_ENV
            : mpi_world                           ? COMM_LAUNCH_MPI
                                                  : COMM_LAUNCH_THREADS;
    }
#ifndef HAVE_MPI
    if (l == COMM_LAUNCH_MPI)
        return err_set(ERR_UNSUPPORTED, "nccl: started by mpirun, but this build has no MPI to broadcast the NCCL id "
                       "(rebuild with libopenmpi-dev, or start the ranks torchrun-style)");
#endif
    *out = l;
    return 0;
}

/* Where this rank sits and the id it joins with. */
struct nccl_place {
    int rank, world, device;
    ncclUniqueId id;
};

/* rank 0 makes the id; `share` then gives it to every rank. */
static int nccl_make_id(struct nccl_place *p)
{
    ncclResult_t r = p->rank == 0 ? ncclGetUniqueId(&p->id) : ncclSuccess;
    return r == ncclSuccess ? 0 : nccl_fail(r, "ncclGetUniqueId", p->rank, p->device, NULL, "");
}

static int nccl_place_find(comm_t *c, const struct comm_config *cfg, struct nccl_comm *nc, struct nccl_place *p)
{
    int rc;
    switch (cfg->launch) {
    case COMM_LAUNCH_THREADS: {
        struct nccl_world *w = (struct nccl_world *)cfg->shared;
        if (cfg->rank < 0 || cfg->rank >= w->world)
            return err_set(ERR_ARG, "nccl: rank %d is not in a world of %d", cfg->rank, w->world);
        nc->w = w;
        p->rank = cfg->rank;
        p->world = w->world;
        p->device = cfg->device >= 0 ? cfg->device : w->first_device + cfg->rank;
        p->id = w->id;
        return 0;
    }
    case COMM_LAUNCH_MPI: {
#ifdef HAVE_MPI
        struct comm_mpi_place at;
        if ((rc = comm_mpi_session_begin(c->timeout_s, &at)) < 0)
            return rc;
        nc->mpi_session = 1;
        p->rank = at.rank;
        p->world = at.world;
        p->device = cfg->device >= 0 ? cfg->device : at.local_rank;
        if ((rc = nccl_make_id(p)) < 0)
            return rc;
        return comm_mpi_bcast_bytes(&p->id, sizeof p->id, 0, c->timeout_s);
#else
        return err_set(ERR_UNSUPPORTED, "nccl: this build has no MPI");
#endif
    }
    default: {
        struct rendezvous_env env;
        if ((rc = rendezvous_env_read(&env)) < 0)
            return err_wrap(rc, "nccl: torchrun-style launch");
        p->rank = env.rank;
        p->world = env.world;
        p->device = cfg->device >= 0 ? cfg->device : env.local_rank;
        if ((rc = nccl_make_id(p)) < 0)
            return rc;
        return rendezvous_bcast(&env, &p->id, sizeof p->id, c->timeout_s);
    }
    }
}

static void nccl_release(struct nccl_comm *nc)
{
    if (nc->scratch)
        cudaFree(nc->scratch);
    if (nc->staging)
        cudaFreeHost(nc->staging);
    if (nc->own_stream && nc->stream)
        cudaStreamDestroy(nc->stream);
#ifdef HAVE_MPI
    if (nc->mpi_session)
        comm_mpi_session_end(0);
#endif
    free(nc);
}

/* The checks exchange one fingerprint (32 bytes) per rank. */
#define NCCL_SCRATCH_PER_RANK sizeof(struct comm_fingerprint)

static int nccl_open(comm_t *c, const struct comm_config *cfg)
{
    if (cfg->algo == COMM_ALGO_HIER) /* NCCL picks its own algorithm: hier would not run as asked */
        return err_set(ERR_UNSUPPORTED, "nccl: algorithm hier is the simulator's (--backend=sim); NCCL chooses its "
                       "own (NCCL_ALGO)");
    int ndev, rc = nccl_device_count(&ndev);
    if (rc < 0)
        return rc;
    struct nccl_comm *nc = (struct nccl_comm *)calloc(1, sizeof *nc);
    if (!nc)
        return err_set(ERR_NOMEM, "nccl: cannot allocate a communicator");
    struct nccl_place p;
    memset(&p, 0, sizeof p);
    if ((rc = nccl_place_find(c, cfg, nc, &p)) < 0) {
        nccl_release(nc);
        return rc;
    }
    nc->device = p.device;
    if (cfg->launch != COMM_LAUNCH_THREADS &&
        ((cfg->world != 0 && cfg->world != p.world) || (cfg->rank >= 0 && cfg->rank != p.rank)))
        rc = err_set(ERR_ARG, "nccl: this process is rank %d of %d (from the launcher), but the configuration asks "
                     "for rank %d of %d", p.rank, p.world, cfg->rank, cfg->world);
    else if (p.device < 0 || p.device >= ndev)
        rc = err_set(ERR_ARG, "nccl: rank %d wants GPU %d, but this node has %d (one rank per GPU: start at most %d "
                     "ranks per node)", p.rank, p.device, ndev, ndev);
    cudaError_t e = cudaSuccess;
    if (rc == 0 && (e = cudaSetDevice(p.device)) != cudaSuccess)
        rc = nccl_cuda_fail(e, "cudaSetDevice", p.rank, p.device, "opening");
    if (rc == 0 && cfg->stream) {
        nc->stream = (cudaStream_t)cfg->stream;
    } else if (rc == 0) { /* non-blocking: never serialized behind the legacy default stream */
        e = cudaStreamCreateWithFlags(&nc->stream, cudaStreamNonBlocking);
        nc->own_stream = e == cudaSuccess;
        if (e != cudaSuccess)
            rc = nccl_cuda_fail(e, "cudaStreamCreateWithFlags", p.rank, p.device, "opening");
    }
    if (rc == 0 && (e = cudaMalloc(&nc->scratch, (size_t)p.world * NCCL_SCRATCH_PER_RANK)) != cudaSuccess)
        rc = nccl_cuda_fail(e, "cudaMalloc", p.rank, p.device, "opening");
    if (rc == 0 && (e = cudaMallocHost(&nc->staging, (size_t)(p.world + 1) * NCCL_SCRATCH_PER_RANK)) != cudaSuccess)
        rc = nccl_cuda_fail(e, "cudaMallocHost", p.rank, p.device, "opening");
    if (rc == 0) {
        ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
        config.blocking = 0;
        int timed_out = 0;
        ncclResult_t r = ncclCommInitRankConfig(&nc->comm, p.world, p.id, p.rank, &config);
        if (nc->comm)
            r = nccl_settle(nc->comm, r, clock_deadline_s(c->timeout_s), &timed_out);
        if (r != ncclSuccess) {
            rc = timed_out ? err_set(ERR_TIMEOUT, "nccl: rank %d (GPU %d): ncclCommInitRankConfig did not complete "
                                     "within %g s: not every one of the %d ranks joined", p.rank, p.device,
                                     c->timeout_s, p.world)
                           : nccl_fail(r, "ncclCommInitRankConfig", p.rank, p.device, nc->comm, "opening");
            nccl_abort(nc);
        }
    }
    if (rc < 0) {
        nccl_release(nc);
        return rc;
    }
    if (p.world == 1)
        fprintf(stderr, "nccl: world 1: NCCL's all-reduce on one GPU is only a copy (no data crosses a link); "
                        "its bandwidth is device memory's. Use 2 or more GPUs to measure communication.\n");
    c->rank = p.rank;
    c->world = p.world;
    c->impl = nc;
    return 0;
}

static void nccl_close(comm_t *c)
{
    struct nccl_comm *nc = (struct nccl_comm *)c->impl;
    cudaSetDevice(nc->device);
    if (!nc->aborted && c->broken)
        nccl_abort(nc); /* a failed collective may still be queued: do not wait for it */
    if (!nc->aborted) {
        /* ncclCommFinalize flushes work and may need the peers: bounded too */
        int timed_out;
        ncclResult_t r = nccl_settle(nc->comm, ncclCommFinalize(nc->comm), clock_deadline_s(c->timeout_s), &timed_out);
        if (r == ncclSuccess)
            ncclCommDestroy(nc->comm);
        else
            nccl_abort(nc);
    }
    nccl_release(nc);
}

/* ---- collectives ------------------------------------------------------------------------------ */

static ncclDataType_t nccl_type(enum comm_dtype dtype)
{
    switch (dtype) {
    case COMM_FLOAT64: return ncclFloat64;
    case COMM_INT32: return ncclInt32;
    case COMM_INT64: return ncclInt64;
    case COMM_FLOAT16: return ncclFloat16;
    case COMM_BFLOAT16: return ncclBfloat16;
    default: return ncclFloat32;
    }
}

/* Queues d on the stream; *call names the NCCL function for messages. */
static ncclResult_t nccl_post(comm_t *c, const struct comm_coll_desc *d, const char **call)
{
    struct nccl_comm *nc = (struct nccl_comm *)c->impl;
    ncclDataType_t t = nccl_type(d->dtype);
    ncclRedOp_t op = d->op == COMM_AVG ? ncclAvg : ncclSum;
    switch (d->coll) {
    case COMM_ALLREDUCE:
        *call = "ncclAllReduce";
        return ncclAllReduce(d->sendbuf, d->recvbuf, d->count, t, op, nc->comm, nc->stream);
    case COMM_BROADCAST:
        *call = "ncclBroadcast";
        return ncclBroadcast(d->recvbuf, d->recvbuf, d->count, t, d->root, nc->comm, nc->stream);
    case COMM_REDUCE_SCATTER: /* NCCL's in-place convention is comm.h's */
        *call = "ncclReduceScatter";
        return ncclReduceScatter(d->sendbuf, d->recvbuf, d->count, t, op, nc->comm, nc->stream);
    case COMM_ALLGATHER:
        *call = "ncclAllGather";
        return ncclAllGather(d->sendbuf, d->recvbuf, d->count, t, nc->comm, nc->stream);
    default: /* NCCL has no barrier: all-reduce one float, as torch.distributed.barrier does on NCCL */
        *call = "ncclAllReduce (barrier)";
        return ncclAllReduce(nc->scratch, nc->scratch, 1, ncclFloat32, ncclSum, nc->comm, nc->stream);
    }
}

/* Settles an NCCL call's answer under the timeout; aborts on failure. */
static int nccl_check_call(comm_t *c, ncclResult_t r, const char *call, const struct comm_coll_desc *d)
{
    struct nccl_comm *nc = (struct nccl_comm *)c->impl;
    int timed_out;
    char desc[128];
    r = nccl_settle(nc->comm, r, clock_deadline_s(c->timeout_s), &timed_out);
    if (r == ncclSuccess)
        return 0;
    int rc = timed_out ? err_set(ERR_TIMEOUT, "nccl: rank %d (GPU %d): %s: %s still in progress after %g s; the "
                                 "communicator was aborted", c->rank, nc->device,
                                 comm_coll_describe(d, desc, sizeof desc), call, c->timeout_s)
                       : nccl_fail(r, call, c->rank, nc->device, nc->comm, comm_coll_describe(d, desc, sizeof desc));
    nccl_abort(nc);
    return rc;
}

/* The debug checks' all-gather (comm_checks.h): `bytes` (at most
 * NCCL_SCRATCH_PER_RANK) from every rank into all[], through the device
 * scratch buffer, under the timeout. The host side is pinned staging memory,
 * so both copies are truly asynchronous: a copy from pageable memory may wait
 * for the stream, i.e. for a collective that never completes, past any
 * timeout. Staging: my bytes first, then the world's. */
static int nccl_exchange(comm_t *c, const void *mine, void *all, size_t bytes, const struct comm_coll_desc *d,
                         const char *phase)
{
    struct nccl_comm *nc = (struct nccl_comm *)c->impl;
    char *slot = (char *)nc->scratch + (size_t)c->rank * bytes, *gathered = nc->staging + NCCL_SCRATCH_PER_RANK;
    memcpy(nc->staging, mine, bytes);
    cudaError_t e = cudaMemcpyAsync(slot, nc->staging, bytes, cudaMemcpyHostToDevice, nc->stream);
    if (e != cudaSuccess)
        return nccl_cuda_fail(e, "cudaMemcpyAsync", c->rank, nc->device, phase);
    int rc = nccl_check_call(c, ncclAllGather(slot, nc->scratch, bytes, ncclUint8, nc->comm, nc->stream),
                             "ncclAllGather", d);
    if (rc == 0 && (e = cudaMemcpyAsync(gathered, nc->scratch, (size_t)c->world * bytes, cudaMemcpyDeviceToHost,
                                        nc->stream)) != cudaSuccess)
        rc = nccl_cuda_fail(e, "cudaMemcpyAsync", c->rank, nc->device, phase);
    if (rc == 0 && (rc = nccl_sync(c, d, phase)) == 0)
        memcpy(all, gathered, (size_t)c->world * bytes);
    return rc;
}

/* COMM_CHECK_RESULTS: the result is hashed on the host, so downloaded first
 * (a debug mode), then compared across ranks (comm_checks.h). */
static int nccl_check_results(comm_t *c, const struct comm_coll_desc *d)
{
    size_t bytes;
    if (!comm_checks_result_bytes(d, c->world, &bytes))
        return 0;
    void *host = malloc(bytes ? bytes : 1);
    if (!host)
        return err_set(ERR_NOMEM, "nccl: rank %d: cannot allocate %zu bytes for the result check", c->rank, bytes);
    cudaError_t e = bytes ? cudaMemcpy(host, d->recvbuf, bytes, cudaMemcpyDeviceToHost) : cudaSuccess;
    int rc = e == cudaSuccess ? comm_checks_results(c, d, comm_checksum(host, bytes), nccl_exchange)
                              : nccl_cuda_fail(e, "cudaMemcpy", c->rank, ((struct nccl_comm *)c->impl)->device,
                                               "the result check");
    free(host);
    return rc;
}

static int nccl_start(comm_t *c, comm_request_t *req)
{
    struct nccl_comm *nc = (struct nccl_comm *)c->impl;
    const struct comm_coll_desc *d = &req->desc;
    cudaError_t e = cudaSetDevice(nc->device); /* the calling thread may be new */
    if (e != cudaSuccess)
        return nccl_cuda_fail(e, "cudaSetDevice", c->rank, nc->device, "");
    char failed[1536];
    if (nccl_heard_failure(nc, failed, sizeof failed)) { /* another rank failed while this one computed */
        req->job_knows = 1;
        return nccl_peer_failed(c, d, "", failed);
    }
    int rc = c->check >= COMM_CHECK_FINGERPRINT ? comm_checks_fingerprint(c, d, nccl_exchange) : 0;
    req->job_knows = rc < 0; /* a mismatch every rank finds, or the exchange's own failure */
    const char *call = "";
    if (rc == 0)
        rc = nccl_check_call(c, nccl_post(c, d, &call), call, d);
    if (rc < 0)
        return rc;
    struct nccl_req *q = (struct nccl_req *)calloc(1, sizeof *q);
    if (!q)
        return err_set(ERR_NOMEM, "nccl: rank %d: cannot allocate a request", c->rank);
    if ((e = cudaEventCreateWithFlags(&q->done, cudaEventDisableTiming)) == cudaSuccess &&
        (e = cudaEventRecord(q->done, nc->stream)) != cudaSuccess)
        cudaEventDestroy(q->done);
    if (e != cudaSuccess) {
        free(q);
        return nccl_cuda_fail(e, "cudaEventRecord", c->rank, nc->device, call);
    }
    req->impl = q;
    return 0;
}

static int nccl_wait(comm_t *c, comm_request_t *req)
{
    struct nccl_req *q = (struct nccl_req *)req->impl;
    int rc = nccl_poll(c, q->done, &req->desc, "");
    cudaEventDestroy(q->done);
    free(q);
    if (rc == 0 && c->check == COMM_CHECK_RESULTS)
        rc = nccl_check_results(c, &req->desc);
    return rc;
}

/* ---- device memory ---------------------------------------------------------------------------- */

static int nccl_mem_alloc(comm_t *c, size_t bytes, void **out)
{
    struct nccl_comm *nc = (struct nccl_comm *)c->impl;
    cudaError_t e = cudaSetDevice(nc->device);
    if (e == cudaSuccess)
        e = cudaMalloc(out, bytes ? bytes : 1);
    if (e != cudaSuccess) {
        *out = NULL;
        return err_set(ERR_NOMEM, "nccl: rank %d (GPU %d): cudaMalloc of %zu bytes failed: %s", c->rank, nc->device,
                       bytes, cudaGetErrorString(e));
    }
    return 0;
}

static void nccl_mem_free(comm_t *c, void *p)
{
    cudaSetDevice(((struct nccl_comm *)c->impl)->device);
    cudaFree(p);
}

/* Copies on the communicator's stream, so an upload is ordered before the
 * next collective and a download after the last one, then waits for it. */
static int nccl_mem_copy(comm_t *c, void *dst, const void *src, size_t bytes, int to_device)
{
    struct nccl_comm *nc = (struct nccl_comm *)c->impl;
    if (bytes == 0)
        return 0;
    cudaError_t e = cudaSetDevice(nc->device);
    if (e == cudaSuccess)
        e = cudaMemcpyAsync(dst, src, bytes, to_device ? cudaMemcpyHostToDevice : cudaMemcpyDeviceToHost, nc->stream);
    if (e == cudaSuccess)
        e = cudaStreamSynchronize(nc->stream);
    return e == cudaSuccess ? 0
                            : nccl_cuda_fail(e, "cudaMemcpyAsync", c->rank, nc->device,
                                             to_device ? "uploading to the GPU" : "downloading from the GPU");
}

/* comm_abort: this rank's kernels stop (ncclCommAbort), and the others hear
 * of it through the launcher's channel (nccl_heard_failure). Not yet run on
 * GPUs: it compiles on a machine without a GPU, which cannot run it. */
static void nccl_abort_op(comm_t *c, const char *msg)
{
    struct nccl_comm *nc = (struct nccl_comm *)c->impl;
    cudaSetDevice(nc->device);
    nccl_abort(nc);
    if (nc->w)
        nccl_world_abort((comm_world_t *)nc->w, c->rank, msg);
#ifdef HAVE_MPI
    if (nc->mpi_session && comm_mpi_session_tell_failure(c->next_seq, msg) < 0)
        fprintf(stderr, "nccl: rank %d: the other ranks were not told of its failure: %s\n", c->rank, err_msg());
#endif
}

/* Positional: C++17 has no designated initializers. The order is
 * struct comm_backend_ops's. */
const struct comm_backend_ops comm_backend_nccl = {
    "nccl",
    nccl_launch_resolve,
    nccl_world_create,
    nccl_world_destroy,
    nccl_open,
    nccl_close,
    nccl_start,
    nccl_wait,
    nccl_mem_alloc,
    nccl_mem_free,
    nccl_mem_copy,
    0, /* untimed: never; every NCCL wait has its watchdog (nccl_poll) */
    0, /* activity: NCCL's watchdog reports only its own rank's view */
    nccl_abort_op,
    nccl_world_abort,
    0, /* settled: nothing kept; each rank reports a shared failure with its own error */
    1, /* device_memory: the GPU's */
    0, /* cost_model: NCCL's collectives take the GPU's real time */
};
