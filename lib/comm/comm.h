/* comm: the one communicator interface of the project (chapter 5).
 *
 * Where it sits: at the end of a training step. After backward, every rank
 * holds its own gradient; comm_allreduce() (op COMM_AVG) leaves the same
 * averaged gradient on every rank. DDP (chapter 6, planned) launches one all-reduce per
 * bucket with comm_allreduce_start() while backward is still running, and
 * waits for them all before the optimizer step.
 *
 * Backends, chosen at run time by name (comm_config.backend):
 *
 *   "sim"   W rank threads in one process (sim/comm_sim*.c): ring, tree,
 *           naive and hierarchical (on the world's NODESxGPUS topology)
 *           algorithms over bounded per-link channels, a watchdog that
 *           names the missing ranks, an always-on fingerprint check, fault
 *           injection. Types: all of enum comm_dtype.
 *   "mpi"   one process per rank under mpirun (lib/comm/mpi/comm_mpi.c), one node
 *           or many. Fingerprint check as a debug mode. Types: all (float16
 *           and bfloat16 through a user-defined MPI sum).
 *   "nccl"  one GPU per rank (lib/comm/nccl/comm_nccl.cu): buffers are DEVICE
 *           pointers, collectives are ordered on a CUDA stream.
 *
 * A backend that was not built (no HAVE_MPI / HAVE_NCCL) answers
 * ERR_UNSUPPORTED from comm_open(). The core never includes MPI, NCCL or CUDA
 * headers: everything crosses this interface as plain pointers and numbers.
 *
 * Read first: comm_open(), then comm_allreduce_start() / comm_wait().
 *
 * Sequence numbers. Every collective call on a communicator (barrier included)
 * gets the next sequence number, starting at 1, and every message about a
 * collective names it: "collective #7 (allreduce sum, 1048576 x float32)". A
 * call that fails argument checks gets no number.
 *
 * Errors. Every function returns 0 or a negative ERR_* code with err_msg()
 * naming the rank and the collective. After a collective fails (timeout, peer
 * failure, mismatch), the communicator is broken: later calls return ERR_STATE
 * naming the collective that broke it; only comm_close() remains useful.
 *
 * Threads. A comm_t belongs to one rank and is used by one thread at a time.
 * Different ranks' communicators are used concurrently from different threads
 * (sim, nccl with launch=threads) or processes (mpi, nccl with launch=mpi/env).
 */
#ifndef DDP_COMM_H
#define DDP_COMM_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#include "base/clock.h" /* CLOCK_MIN_TIMEOUT_S; a C header without C++ guards of its own */

typedef struct comm comm_t;
typedef struct comm_request comm_request_t;
struct hw_profile; /* transfer/hw.h */
typedef struct comm_world comm_world_t;

/* Element types. float32 is supported by every backend; the others where the
 * backend's header comment says so (ERR_UNSUPPORTED otherwise). The 16-bit
 * floats (lib/base/half.h: IEEE binary16 and bfloat16, stored as uint16_t)
 * carry DDP's compressed gradients; a sum of two of them is the correctly
 * rounded 16-bit sum, as NCCL's, and COMM_AVG divides that sum by the world
 * size in the same precision. */
enum comm_dtype {
    COMM_FLOAT32,
    COMM_FLOAT64,
    COMM_INT32,
    COMM_INT64,
    COMM_FLOAT16,
    COMM_BFLOAT16,
    COMM_DTYPE_COUNT
};

/* Reduction operators. COMM_AVG is defined for floating-point types only
 * (ERR_ARG for integers). sim and mpi: the sum, then divided by the world size,
 * so every rank gets the same bits. nccl: ncclAvg, which for floats scales
 * each input by 1/W before summing (NCCL's ncclDevPreMulSum, src/enqueue.cc),
 * so its last bit can differ from sum-then-divide when W is not a power of two
 * (lib/comm/nccl/comm_nccl.h). */
enum comm_op { COMM_SUM, COMM_AVG, COMM_OP_COUNT };

/* The collectives. Counts follow NCCL's conventions (see comm_allreduce_start
 * and friends below). */
enum comm_coll {
    COMM_ALLREDUCE,
    COMM_BROADCAST,
    COMM_REDUCE_SCATTER,
    COMM_ALLGATHER,
    COMM_BARRIER,
    COMM_COLL_COUNT
};

/* Algorithms. The sim implements all of them; "default" lets the backend
 * choose (ring in the sim; the library's own choice for MPI and NCCL, which
 * ignore ring, tree and naive with no error, since their libraries choose for
 * themselves: NCCL_ALGO and Open MPI's coll_tuned MCA parameters set them
 * there).
 *
 * HIER, hierarchical all-reduce on the world's topology (struct
 * comm_world_options.node_size): reduce-scatter inside each node, all-reduce
 * across nodes among the ranks of one local index, each over its 1/GPUS
 * slice, all-gather inside each node. On one node, or one rank per node, it
 * is the flat ring (same bits). It applies to all-reduce only: broadcast,
 * reduce-scatter and all-gather run their flat algorithm under it. Only the
 * sim has it: mpi and nccl refuse it in comm_open (ERR_UNSUPPORTED), since
 * nothing there would run what was asked. */
enum comm_algo {
    COMM_ALGO_DEFAULT,
    COMM_ALGO_RING,
    COMM_ALGO_TREE,
    COMM_ALGO_NAIVE,
    COMM_ALGO_HIER,
    COMM_ALGO_COUNT
};

/* Consistency checks.
 *   NONE         nothing beyond the backend's own (the sim still fingerprints:
 *                its fingerprint check is always on);
 *   FINGERPRINT  before each collective, ranks compare (seq, collective, op,
 *                count, type, root); a mismatch is an error naming both ranks
 *                and the differing fields (as TORCH_DISTRIBUTED_DEBUG=DETAIL);
 *   RESULTS      FINGERPRINT, and after each collective the ranks compare a
 *                checksum of their results: every rank must end bit-identical
 *                (all-reduce, broadcast, all-gather). */
enum comm_check { COMM_CHECK_NONE, COMM_CHECK_FINGERPRINT, COMM_CHECK_RESULTS };

/* How the ranks of a job were started: the backend finds rank and world there.
 *   AUTO     the backend decides: sim -> THREADS; mpi -> MPI; nccl -> ENV when
 *            RANK and WORLD_SIZE are set, MPI when started by mpirun
 *            (OMPI_COMM_WORLD_SIZE / PMI_SIZE set), else THREADS;
 *   THREADS  one process, a thread per rank, all attached to one comm_world_t
 *            (comm_world_create) -- sim, and nccl with a thread per GPU;
 *   MPI      one process per rank under mpirun: rank and world from MPI
 *            (mpi; nccl broadcasts its unique id over MPI);
 *   ENV      one process per rank, torchrun-style: RANK, WORLD_SIZE,
 *            LOCAL_RANK, MASTER_ADDR, MASTER_PORT (nccl: id over TCP). */
enum comm_launch { COMM_LAUNCH_AUTO, COMM_LAUNCH_THREADS, COMM_LAUNCH_MPI, COMM_LAUNCH_ENV };

/* 30 s: short enough that a hung demo or test ends, long enough for 64 MiB
 * collectives on a loaded machine. PyTorch's NCCL process group defaults to
 * 10 minutes (pytorch/pytorch#110947). */
#define COMM_DEFAULT_TIMEOUT_S 30.0

/* The longest timeout comm_open accepts: 1e6 s (11.6 days), far past any
 * real collective, and small enough that a deadline in nanoseconds
 * (now + timeout x 1e9) stays far inside uint64_t. */
#define COMM_MAX_TIMEOUT_S 1e6

/* The shortest: 10 ms, every watchdog's floor (CLOCK_MIN_TIMEOUT_S in
 * lib/base/clock.h says why). */
#define COMM_MIN_TIMEOUT_S CLOCK_MIN_TIMEOUT_S

/* comm_config.timeout_s for "no watchdog": a collective waits as long as it
 * takes. Only the mpi backend accepts it (its blocking collectives then call
 * MPI's blocking functions, MPI_Allreduce and the rest, as a plain MPI
 * program would); sim and nccl answer ERR_UNSUPPORTED. */
#define COMM_NO_TIMEOUT (-1.0)

struct comm_config {
    const char *backend;     /* "sim" | "mpi" | "nccl" (required) */
    enum comm_launch launch; /* see above; AUTO is right almost always */
    int world;               /* THREADS: the world's size (or 0: take it from `shared`);
                              * MPI / ENV: 0, or the expected size (checked) */
    int rank;                /* THREADS: this thread's rank, 0 .. world-1;
                              * MPI / ENV: -1 (from the launcher), or expected */
    comm_world_t *shared;    /* THREADS: the object every rank thread attaches to */
    double timeout_s;        /* per collective, COMM_MIN_TIMEOUT_S .. COMM_MAX_TIMEOUT_S;
                              * 0 = COMM_DEFAULT_TIMEOUT_S; COMM_NO_TIMEOUT = none (mpi) */
    enum comm_algo algo;
    enum comm_check check;
    int device;              /* nccl: CUDA device ordinal; -1 = LOCAL_RANK
                              * (ENV), local rank (MPI) or rank (THREADS) */
    void *stream;            /* nccl: a cudaStream_t to order collectives on;
                              * NULL = the communicator creates its own */
    const struct hw_profile *modelled_hw; /* mpi beside a simulated device: each collective moves this
                              * rank's modelled clock (base/vclock.h) as the simulator's would, on
                              * this GPU system's links, one node (transfer/hw.h); NULL = it takes
                              * no modelled time (the wall clock's backends) */
};

/* Fills the defaults: backend "sim", launch AUTO, world 0, rank -1, no shared
 * world, timeout 0 (the default), algorithm DEFAULT, check NONE, device -1,
 * stream NULL. */
void comm_config_default(struct comm_config *cfg);

/* ---- worlds: the rendezvous of rank threads in one process ---------------- */

struct comm_world_options {
    int world;          /* rank threads that will attach (>= 1) */
    const char *faults; /* sim: fault injection spec (the --fault= grammar of
                         * sim/faults.h: "kill:2@3,delay:1@2:500"), NULL = none;
                         * ERR_UNSUPPORTED for other backends when not NULL */
    int first_device;   /* nccl: rank r uses CUDA device first_device + r */
    int node_size;      /* sim: ranks per node (GPUS of a NODESxGPUS topology, see
                         * comm_topology_parse): rank r sits on node r / node_size,
                         * local index r % node_size; world must be a multiple.
                         * 0 = one node of every rank (as node_size = world) */
    const struct hw_profile *hw; /* sim: the GPUs and links whose modelled time each collective
                         * takes (costmodel_from_hw on the topology above); NULL: the
                         * simulated device's default (DEVICE_GPU_DEFAULT, a100) */
    double hang_s;      /* sim: its watchdog is modelled; this is the wall-clock safety net
                         * for real hangs (a thread that never comes), seconds without
                         * progress; 0: max(60 s, 10 x the timeout). Tests shorten it */
};

/* Creates the shared object that `world` rank threads of backend `backend`
 * attach to (comm_config.shared). Create it once, before starting the
 * threads; destroy it after every rank has closed its communicator. Returns 0,
 * ERR_ARG (unknown backend, world < 1, bad fault spec: err_msg() shows where),
 * ERR_UNSUPPORTED (backend not built, or it has no thread mode: mpi) or
 * ERR_NOMEM. */
int comm_world_create(const char *backend, const struct comm_world_options *opt, comm_world_t **out);

/* After a failure: the world-level diagnosis (the watchdog's report, naming
 * the collective, the ranks that arrived and what each missing rank did last),
 * or "" when nothing failed. It outlives the failing ranks' own messages, so
 * a program can print the one report that explains them all. Never NULL. */
const char *comm_world_diagnosis(const comm_world_t *w);

/* A rank thread of the world failed after its communicator was closed, or
 * without one: breaks the world with `why` as its diagnosis, so every rank
 * still waiting in a collective, or starting one, fails at once (ERR_PEER)
 * instead of at the watchdog. The rank launcher (sim/launch.h) calls it for
 * every rank function that returns an error. Nothing happens when the world
 * already broke, when `rank` was killed by an injected fault (a dead rank
 * tells nobody: the watchdog names it), or for w NULL. */
void comm_world_abort(comm_world_t *w, int rank, const char *why);

/* Frees a world. NULL is a no-op. */
void comm_world_destroy(comm_world_t *w);

/* ---- communicators -------------------------------------------------------- */

/* Resolves `requested` for `backend` (AUTO -> what that backend would use in
 * this environment). Returns 0 and sets *out, ERR_ARG for an unknown backend,
 * ERR_UNSUPPORTED when the backend is not built or has no such launch mode. */
int comm_launch_resolve(const char *backend, enum comm_launch requested, enum comm_launch *out);

/* Opens this rank's communicator. Collective over the world: every rank must
 * call it (THREADS: each thread with its own rank). Returns 0 and sets *out,
 * or ERR_ARG (bad config), ERR_UNSUPPORTED ("this build has no MPI support"),
 * ERR_TIMEOUT (the other ranks never came), ERR_IO / ERR_PEER (the library
 * failed: its message is included). */
int comm_open(const struct comm_config *cfg, comm_t **out);

/* Closes a communicator. Wait for every collective you started first (the
 * sim still runs ones never waited for; other backends may abort them). In
 * the sim, this also tells the others that this rank has exited, which the
 * watchdog reports. NULL is a no-op. */
void comm_close(comm_t *c);

int comm_rank(const comm_t *c);
int comm_world(const comm_t *c);
const char *comm_backend_name(const comm_t *c);
/* 1 when the collectives read device memory directly (NCCL on a GPU, the
 * simulator's communicator on the simulated device); 0 when they take host
 * memory only (MPI), and a device's buffers must be staged through it. */
int comm_reads_device_memory(const comm_t *c);

/* The sequence number the next collective will get (1 for the first). */
uint64_t comm_next_seq(const comm_t *c);

/* ---- buffers: where the collectives' data lives ---------------------------
 * Host memory for sim and mpi, device memory for nccl. A program that must
 * run on every backend allocates and fills its buffers through these. */

/* Allocates `bytes` (any count, 0 included) for this communicator's
 * collectives. 0 and *out, or ERR_NOMEM. */
int comm_mem_alloc(comm_t *c, size_t bytes, void **out);
void comm_mem_free(comm_t *c, void *p);
/* Copies host -> communicator memory, and back. 0 or ERR_IO. */
int comm_mem_upload(comm_t *c, void *dst, const void *host_src, size_t bytes);
int comm_mem_download(comm_t *c, void *host_dst, const void *src, size_t bytes);

/* ---- collectives: asynchronous ---------------------------------------------
 * Each *_start() checks its arguments, takes the next sequence number, and
 * launches the collective; comm_wait() completes it. Collectives complete in
 * the order they were started, and every rank must start the same collectives
 * in the same order with the same count, type, op and root. Buffers must stay
 * valid and untouched until comm_wait() returns. Out-of-place buffers must not
 * overlap; in place is allowed as stated for each.
 *
 * How asynchronous: nccl returns once the work is queued on its stream; mpi
 * uses non-blocking MPI calls; the sim queues it on the rank's
 * "communication stream", run in order by the rank's thread in comm_wait
 * on the modelled clock (where the overlap is modelled, not run), by a
 * progress thread at once on the wall clock (sim/comm_sim.h). So on the
 * modelled clock a rank that has started a collective must reach its
 * comm_wait (or a blocking collective, comm_abort or comm_close) before its
 * peers can finish it: a rank that instead waits for a peer's word that
 * needs the collective done stalls until the watchdog, where NCCL's stream
 * would have gone on alone. The blocking forms may run the collective on
 * the caller's thread when nothing is queued before it (the sim does): same
 * order, less latency.
 *
 * On success *req is set; hand it to comm_wait() exactly once. On failure
 * *req is NULL and the error is returned here. */

/* recvbuf[i] = op over ranks of sendbuf[i], i < count. In place: send == recv. */
int comm_allreduce_start(comm_t *c, const void *sendbuf, void *recvbuf, size_t count, enum comm_dtype dtype,
                         enum comm_op op, comm_request_t **req);

/* buf (count elements) on every rank = buf on `root`. Always in place. */
int comm_broadcast_start(comm_t *c, void *buf, size_t count, enum comm_dtype dtype, int root, comm_request_t **req);

/* sendbuf holds world x recvcount elements; rank r's recvbuf (recvcount
 * elements) = op over ranks of block r of sendbuf. In place: recvbuf ==
 * sendbuf + r x recvcount elements (NCCL's convention). */
int comm_reduce_scatter_start(comm_t *c, const void *sendbuf, void *recvbuf, size_t recvcount,
                              enum comm_dtype dtype, enum comm_op op, comm_request_t **req);

/* recvbuf (world x sendcount elements) = every rank's sendbuf, in rank order.
 * In place: sendbuf == recvbuf + r x sendcount elements. */
int comm_allgather_start(comm_t *c, const void *sendbuf, void *recvbuf, size_t sendcount, enum comm_dtype dtype,
                         comm_request_t **req);

/* Completes when every rank has started it. */
int comm_barrier_start(comm_t *c, comm_request_t **req);

/* Waits for `req` to complete (at most the communicator's timeout, after
 * which the backend's watchdog reports and the communicator breaks), then
 * frees it. Returns the collective's result: 0, or ERR_TIMEOUT (this rank
 * waited too long: err_msg() is the diagnosis), ERR_PEER (another rank failed
 * or timed out first), ERR_STATE (fingerprint or result mismatch, with both
 * ranks and the fields named), ERR_IO (library error). */
int comm_wait(comm_request_t *req);

/* comm_wait(), and *done_ns (may be NULL) = the vclock time (base/vclock.h)
 * at which the collective completed: on the sim, its modelled end (the
 * latest of the ranks' arrivals, each the later of its issue time and its
 * communicator's previous end, plus the cost model's time for it: see
 * comm_sim.c), to which the waiting thread's clock then moves; else the
 * moment this wait saw it done. A timeline of overlap needs the first: a
 * bucket whose all-reduce finished under backward is only waited for after
 * it. */
int comm_wait_timed(comm_request_t *req, uint64_t *done_ns);

/* ---- collectives: blocking (start + wait) ---------------------------------- */
int comm_allreduce(comm_t *c, const void *sendbuf, void *recvbuf, size_t count, enum comm_dtype dtype, enum comm_op op);
int comm_broadcast(comm_t *c, void *buf, size_t count, enum comm_dtype dtype, int root);
int comm_reduce_scatter(comm_t *c, const void *sendbuf, void *recvbuf, size_t recvcount, enum comm_dtype dtype,
                        enum comm_op op);
int comm_allgather(comm_t *c, const void *sendbuf, void *recvbuf, size_t sendcount, enum comm_dtype dtype);
int comm_barrier(comm_t *c);

/* ---- diagnoses ----------------------------------------------------------- */

/* Says what this rank is doing between collectives ("saving checkpoint
 * ckpt/checkpoint.safetensors at step 12"), until the next call; NULL clears
 * it. A watchdog that gives up on this rank reports it: the sim's says "rank
 * 0: running its own code (saving checkpoint ...)", and comm_abort() names
 * it as the phase the rank failed in. No collective, no failure; backends
 * that cannot report it ignore it. */
void comm_set_activity(comm_t *c, const char *what);

struct costmodel; /* comm/costmodel.h */

/* The cost model this communicator charges its collectives on the modelled
 * clock (base/vclock.h): 1 with *out and *algo (the algorithm it prices them
 * as) filled; 0 when they take real time (NCCL; MPI without
 * comm_config.modelled_hw; any backend once the clock is the wall's). What a
 * timeline draws the links from, so that it draws what was charged. */
int comm_cost_model(const comm_t *c, struct costmodel *out, enum comm_algo *algo);

/* This rank failed in its own code (a save, its loader, a read, memory), not
 * in a collective: tells every rank of the communicator now, so that the
 * others do not wait for the watchdog and then blame the wrong rank. Call it
 * on the way out, before comm_close: `return comm_abort(c, rc);`.
 *
 * Every other rank's collective in progress, or its next one, fails at once
 * with ERR_PEER and "rank R failed while <activity>: <this rank's err_msg()>"
 * (the activity of comm_set_activity; "in its own code" when none was said).
 * sim: that message becomes the world's diagnosis, and the first collective
 * this rank never started fails on every rank, with every later one: the
 * ranks waiting at its rendezvous, or in an injected delay before it, wake.
 * The world does not break: the collectives this rank started complete
 * (they still run: at once, in comm_abort, or on its progress thread), as
 * sim/comm_sim.h says. mpi: the rank prints its own error first, then tells
 * every rank out of band (a message each rank's waits poll for, and
 * answer), waits here until the others have said theirs (a second at most),
 * and its comm_close ends the job (MPI_Abort). nccl: ncclCommAbort, and the
 * message over the launcher's channel (the world of rank threads, or the MPI
 * session).
 *
 * Returns `code`, with err_msg() as it was. After it the communicator is
 * broken (ERR_STATE). Call it before freeing the buffers of a collective
 * still in flight: mpi progresses MPI while it waits for the answers, and
 * never again after (a collective given up may still be posted, and MPI
 * would write into freed memory). Nothing happens when the job knows of
 * the failure already: after a collective that failed (every rank gets its
 * own error from it, or will), after comm_fail_shared() or
 * comm_agree_failure(), after an earlier comm_abort(), or for c NULL. A
 * collective that failed to start on this rank alone (out of memory, a
 * count MPI cannot take, an MPI call that failed) is this rank's failure:
 * the others are waiting in it, and comm_abort() tells them. */
int comm_abort(comm_t *c, int code);

/* A failure every rank reached alike, from data they all gathered (the
 * replica check's verdict, lib/ddp/replica.h): the job's, not this rank's,
 * and nobody needs telling. Marks the communicator broken by it (ERR_STATE
 * after), so comm_abort() does nothing and no rank is blamed; sim: the
 * verdict becomes the world's diagnosis, which the rank launcher prints
 * alone (sim/launch.h). Returns `code`, err_msg() unchanged. Nothing happens
 * when the communicator is already broken, or for c NULL. */
int comm_fail_shared(comm_t *c, int code);

/* After the checks every rank makes alike and before the collectives they
 * guard (a run's flags, the files they name, its memory): every rank calls it
 * with its own result, 0 or an ERR_* with err_msg() set. A collective (one
 * all-gather, and a broadcast when some rank failed), so every rank must call
 * it at the same point, failed or not. Returns 0 when every rank passed.
 * When every rank failed with the same message, that is the job's verdict:
 * as comm_fail_shared(), `rc` is returned with its message and no rank is
 * blamed. Otherwise each failure is its rank's own, and every rank learns the
 * lowest failed rank's, as comm_abort() would say it ("rank R failed while
 * <activity>: <its message>"): a failed rank returns `rc` with its own
 * message, a rank that passed ERR_PEER with that one, and the communicator is
 * broken with the job knowing (comm_abort() does nothing; sim: that message
 * is the world's diagnosis). A rank that cannot take part (out of memory)
 * returns that error for comm_abort() to tell; a failed exchange, its error. */
int comm_agree_failure(comm_t *c, int rc);

/* ---- names --------------------------------------------------------------- */
size_t comm_dtype_size(enum comm_dtype dtype);      /* bytes per element; 0 if invalid */
const char *comm_dtype_name(enum comm_dtype dtype); /* "float32" (nccl-tests says "float"), "float16", "bfloat16" */
const char *comm_op_name(enum comm_op op);          /* "sum", "avg" */
const char *comm_coll_name(enum comm_coll coll);    /* "allreduce", ... */
const char *comm_algo_name(enum comm_algo algo);    /* "default", "ring", "tree", "naive", "hier" */
/* Parse the names above ("float32"/"float", "float16"/"half", "sum", "ring",
 * ...). 0 or ERR_ARG. */
int comm_dtype_parse(const char *text, enum comm_dtype *out);
int comm_op_parse(const char *text, enum comm_op *out);
int comm_algo_parse(const char *text, enum comm_algo *out);

/* The most ranks a topology may hold: the simulator's largest world of rank
 * threads (LAUNCH_MAX_THREADS, sim/launch.h, which checks the two agree). */
#define COMM_TOPOLOGY_MAX_RANKS 1024

/* A topology "NODESxGPUS" ("2x8": 2 nodes of 8 GPUs, 16 ranks): both at
 * least 1, the product at most COMM_TOPOLOGY_MAX_RANKS, decimal digits only.
 * 0 and *nodes, *gpus set; ERR_ARG naming the text otherwise. */
int comm_topology_parse(const char *text, int *nodes, int *gpus);

/* The nccl-tests bus-bandwidth factor of a collective on `world` ranks:
 * busbw = algbw x factor, the fraction of the data each rank must send over
 * its busiest link, so numbers compare across world sizes. all-reduce
 * 2(W-1)/W, reduce-scatter and all-gather (W-1)/W, broadcast 1, barrier 0.
 * Source: NVIDIA/nccl-tests doc/PERFORMANCE.md. */
double comm_busbw_factor(enum comm_coll coll, int world);

#ifdef __cplusplus
}
#endif

#endif
