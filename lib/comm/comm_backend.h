/* comm_backend: what a communicator backend implements (sim, mpi, nccl).
 *
 * Where it sits: between lib/comm/comm.c (the front: argument checks, sequence
 * numbers, the broken state, dispatch) and the backends, which the front
 * finds by name in lib/backend_table.h:
 *
 *   sim/comm_sim.c               comm_backend_sim   (always built)
 *   lib/comm/mpi/comm_mpi.c      comm_backend_mpi   (when HAVE_MPI)
 *   lib/comm/nccl/comm_nccl.cu   comm_backend_nccl  (when HAVE_NCCL; extern "C")
 *
 * The front has already checked every argument a backend receives: the
 * backend never sees a NULL buffer with count > 0, an out-of-range root or an
 * invalid enum, and it gets the sequence number in the descriptor. A backend
 * reports failure like every module (negative ERR_*, err_set()), naming the
 * rank and the collective with comm_coll_describe(). The front prefixes
 * nothing, so the backend's message is what the user reads.
 *
 * Read first: struct comm_backend_ops.
 */
#ifndef DDP_COMM_BACKEND_H
#define DDP_COMM_BACKEND_H

#include "comm/comm.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* One collective, as the front hands it to the backend. `count` follows the
 * public functions: allreduce and broadcast: elements of each buffer;
 * reduce_scatter: recvcount; allgather: sendcount; barrier: 0. For broadcast,
 * sendbuf == recvbuf == the buffer. `root` is -1 except for broadcast; `op`
 * is COMM_SUM for collectives that do not reduce. */
struct comm_coll_desc {
    uint64_t seq;
    enum comm_coll coll;
    enum comm_op op;
    enum comm_dtype dtype;
    size_t count;
    int root;
    const void *sendbuf;
    void *recvbuf;
};

/* What the fingerprint check compares across ranks before a collective (the
 * fields of TORCH_DISTRIBUTED_DEBUG=DETAIL's check: sequence number, op,
 * count, type, root). Plain integers so it can travel over MPI as bytes. */
struct comm_fingerprint {
    uint64_t seq;
    uint64_t count;
    int32_t coll, op, dtype, root;
};

/* The longest failure message ranks pass around: "rank R failed while
 * <activity>: <its error>", a shared verdict, the broken state's. */
#define COMM_STORY_BYTES 1536

/* The communicator: the front's part (read-only for backends except `impl`)
 * and the backend's private state. */
struct comm {
    const struct comm_backend_ops *ops;
    int rank, world;
    uint64_t next_seq;     /* the number the next collective gets */
    double timeout_s;      /* resolved: seconds, or 0 = no watchdog (COMM_NO_TIMEOUT; untimed backends only) */
    enum comm_algo algo;
    enum comm_check check;
    int broken;            /* set by the front after a failure: collectives refuse (ERR_STATE) */
    int job_knows;         /* ... and every rank knows of it without being told: a failed collective (each
                            * rank gets its own error from it), a shared verdict (comm_fail_shared,
                            * comm_agree_failure) or this rank's comm_abort. 0 after a start that failed on
                            * this rank alone: comm_abort then tells the others, who wait in it */
    int blocking;          /* the front is inside a blocking form (comm_allreduce, ...) */
    char broken_msg[COMM_STORY_BYTES]; /* the message of that failure */
    char activity[160];    /* comm_set_activity's, "" when unsaid: the phase comm_abort names */
    void *impl;            /* the backend's state */
};

/* An outstanding collective. The front allocates it, the backend may hang
 * its state on `impl` in start() and must release it in wait(). */
struct comm_request {
    comm_t *comm;
    struct comm_coll_desc desc;
    int blocking; /* the caller waits right after start(): a backend may
                   * then complete it inside start() (the sim does) */
    int done;    /* the backend completed it inside start() ... */
    int status;  /* ... with this result (0 or ERR_*, message in err_buf) */
    int job_knows; /* start() failed in a way every rank learns without being told (another rank's
                    * failure notice, a fingerprint mismatch every rank finds): set before returning
                    * the error, so comm_abort tells nobody; left 0, the failure is this rank's own */
    char err_buf[512];
    uint64_t issue_ns; /* the issuing thread's vclock_now_ns() when it was started */
    uint64_t done_ns; /* vclock time when the collective completed, if the backend knows
                       * it (the sim: its modelled end, see comm_sim.c); 0: the front
                       * takes the waiting thread's vclock_now_ns() when comm_wait() saw it */
    void *impl;
};

/* Return value of start() meaning "this call never happened": the sim's
 * skip fault (a rank that has one batch fewer never issues the call). The
 * front gives the sequence number back and completes the request with 0. */
#define COMM_START_SKIPPED 1

struct comm_backend_ops {
    const char *name; /* "sim", "mpi", "nccl" */

    /* Which launch mode `requested` (possibly AUTO) means in this
     * environment; ERR_UNSUPPORTED for modes the backend lacks. */
    int (*launch_resolve)(enum comm_launch requested, enum comm_launch *out);

    /* Thread mode only (NULL when the backend has none). world_create()
     * returns a comm_world_t whose first member is `struct comm_world_base`. */
    int (*world_create)(const struct comm_world_options *opt, comm_world_t **out);
    void (*world_destroy)(comm_world_t *w);

    /* Sets c->rank, c->world and c->impl from cfg (launch already resolved
     * in cfg->launch, timeout already resolved in c->timeout_s). */
    int (*open)(comm_t *c, const struct comm_config *cfg);
    void (*close)(comm_t *c);

    /* Launches req->desc. May complete it at once (set req->done, status,
     * err_buf); otherwise wait() completes it. Returns 0, COMM_START_SKIPPED,
     * or a negative ERR_* (the collective failed at launch). */
    int (*start)(comm_t *c, comm_request_t *req);
    /* Completes a request that start() left pending. 0 or ERR_*. */
    int (*wait)(comm_t *c, comm_request_t *req);

    /* Memory for collectives (NULL: host malloc/memcpy, which the front does). */
    int (*mem_alloc)(comm_t *c, size_t bytes, void **out);
    void (*mem_free)(comm_t *c, void *p);
    int (*mem_copy)(comm_t *c, void *dst, const void *src, size_t bytes, int to_device);

    /* Accepts COMM_NO_TIMEOUT: then c->timeout_s == 0 and waits have no
     * watchdog (mpi). Last, so positional initializers may leave it out. */
    int untimed;

    /* What the rank does between collectives, for the backend's diagnoses
     * (comm_set_activity; `what` NULL clears it). NULL when the backend has
     * no use for it. After `untimed`, for the same reason. */
    void (*activity)(comm_t *c, const char *what);

    /* comm_abort: tell every other rank that this one failed, `msg` being
     * "rank R failed while ...: ..." (the front has marked c broken). The
     * others' waits must end with ERR_PEER and msg. */
    void (*abort)(comm_t *c, const char *msg);
    /* comm_world_abort, thread mode only (NULL otherwise): the same for a
     * rank whose communicator is closed; `msg` is the world's diagnosis. */
    void (*world_abort)(comm_world_t *w, int rank, const char *msg);
    /* comm_fail_shared, comm_agree_failure: every rank knows of the failure
     * and reports it itself, so nobody is told; `msg` (the same on every
     * rank) is what the job's report says. NULL where each process prints
     * its own (mpi, nccl); sim: the world's diagnosis. */
    void (*settled)(comm_t *c, const char *msg);

    /* The collectives read a device's memory directly: NCCL the GPU's (it
     * has mem_alloc, and counts as such without this), the simulator's the
     * simulated device's, which is host memory. 0: host memory only (MPI),
     * so a device buffer must be staged through host memory. */
    int device_memory;

    /* comm_cost_model: the model whose time the collectives take on the
     * modelled clock, *algo the algorithm it prices them as; NULL (the
     * function or its result) when they take real time. */
    const struct costmodel *(*cost_model)(const comm_t *c, enum comm_algo *algo);
};

/* Every comm_world_t starts with this, so the front can find its backend.
 * struct comm_world itself is never defined: each backend defines its own
 * world struct with this as its first member and casts (comm_world_t *). */
struct comm_world_base {
    const struct comm_backend_ops *ops;
    char diagnosis[2048]; /* comm_world_diagnosis(); "" until something fails */
};

/* The backends' vtables are declared by their own small headers
 * (sim/comm_sim.h, lib/comm/mpi/comm_mpi.h, lib/comm/nccl/comm_nccl.h), which
 * must not include MPI, CUDA or NCCL headers; lib/backend_table.c, the one
 * file that names them, includes those of the backends this build has, so a
 * backend not built answers ERR_UNSUPPORTED. */

/* ---- helpers every backend uses ------------------------------------------- */

/* "collective #7 (allreduce sum, 1048576 x float32)" into buf; returns buf. */
const char *comm_coll_describe(const struct comm_coll_desc *d, char *buf, size_t len);

/* The fingerprint of a collective. */
void comm_fingerprint_of(const struct comm_coll_desc *d, struct comm_fingerprint *fp);

/* dst[i] = dst[i] + src[i] for i < count, in `dtype`. The one reduction
 * kernel of the CPU backends (sim, mpi's checks): float addition in one fixed
 * order per element, so results depend only on the order the caller chose. */
void comm_reduce_sum(enum comm_dtype dtype, void *dst, const void *src, size_t count);

/* out[i] = a[i] + b[i]: the fused receive-reduce of a ring step. out may
 * equal a or b. */
void comm_reduce_sum3(enum comm_dtype dtype, void *out, const void *a, const void *b, size_t count);

/* buf[i] /= world (floating types): COMM_AVG's final step. */
void comm_reduce_divide(enum comm_dtype dtype, void *buf, size_t count, int world);

/* A 64-bit checksum of bytes (FNV-1a over 8-byte words), for the cross-rank
 * result check. */
uint64_t comm_checksum(const void *buf, size_t bytes);

#ifdef __cplusplus
}
#endif

#endif
