/* comm_mpi: the MPI backend (see comm_mpi.h): one process per rank under
 * mpirun, every collective a non-blocking MPI call polled with MPI_Test;
 * without a watchdog (COMM_NO_TIMEOUT) the blocking forms call MPI's
 * blocking functions (MPI_Allreduce, ...) instead, see mpi_start().
 *
 * Read in this order: the session (MPI_Init once per process, shared with the
 * NCCL backend), mpi_poll() (how a wait becomes a timeout instead of a hang),
 * mpi_start() / mpi_wait() (one collective), then the two debug checks.
 *
 * Why non-blocking calls: comm.h promises start-then-wait, so DDP can launch a
 * bucket's all-reduce and go on with backward. Open MPI progresses a
 * non-blocking collective only inside MPI calls (there is no progress thread
 * by default), so the overlap is real only as far as the program calls
 * comm_wait or other MPI functions; the results are the same either way. On
 * a 2-core machine, MPI_Iallreduce of 64 MiB took the same time as MPI_Allreduce.
 *
 * Timeouts. MPI cannot cancel a collective (MPI_Cancel is for point-to-point
 * receives only; MPI-3.1 section 3.8.4), so a rank that waits past the
 * communicator's timeout returns ERR_TIMEOUT naming the collective, marks the
 * communicator, and comm_close() then calls MPI_Abort: the alternative,
 * MPI_Finalize, would wait forever for the rank that never came. mpirun then
 * ends every process of the job with a non-zero status.
 *
 * Who is missing. Before it gives up, a rank whose wait expired takes a
 * census (mpi_census()): it asks every other rank, over a side
 * communicator, where it is. A rank answers while it waits in any
 * collective of ours (every wait polls, and answers between polls), so the
 * ranks that answer are named with the collective they wait in, and a rank
 * that does not answer within a second is named as the one missing: it is in
 * none of our collectives (in its own code, stopped, finished, or dead). This
 * is the simulator's watchdog report, as far as processes can know it.
 *
 * The start and the end. MPI_Init_thread, MPI_Comm_split_type, MPI_Comm_dup
 * and MPI_Finalize wait for every rank of the job and take no timeout, so a
 * rank stopped (SIGSTOP, a frozen node) before the job's first collective or
 * after its last one used to hold the others there forever: no collective of
 * ours was waiting, so no watchdog fired (under load a job's start lasts
 * seconds, so a rank stopped 4 s in could still hold the job 20 s later;
 * so could one stopped at a short run's end). Now each of those calls
 * runs under the guard (mpi_guard_arm), and comm_close() of a healthy
 * communicator ends with a barrier under the watchdog, census included, so a
 * rank stopped before the job's end is named like one stopped in the middle.
 * One window is left, and no rank can close it: a rank stopped inside
 * MPI_Finalize after its synchronization, when every other rank has finished
 * and exited: only mpirun is still there, and it waits for its child.
 *
 * A rank that fails in its own code (comm_abort: rank 0 cannot save) prints
 * its error and sends it to every rank on the session communicator; every
 * wait polls for it, so the others' collectives fail at once with "rank 0
 * failed while saving ...", instead of at the watchdog with rank 0 "missing".
 * Each other rank prints its line and answers the moment it hears, inside
 * that wait; the failed rank waits for the answers inside comm_abort (a
 * second at most), and its comm_close ends the job with MPI_Abort.
 *
 * The order keeps MPI out of freed memory. MPI cannot cancel a collective,
 * so one a rank gives up (DDP's other buckets, after the first failed) stays
 * posted, and the caller frees its buffers before comm_close (reducer_close).
 * MPI writes into a posted collective's buffers only when progressed, inside
 * an MPI call. So every call a failure needs is made while the caller still
 * holds those buffers: the answer inside the wait that heard the notice,
 * the wait for the answers inside comm_abort, which callers make before
 * they free. A comm_close that ends the job then calls MPI_Abort alone: the
 * failed rank has had its answers, and a rank that answered only sleeps,
 * giving the failed rank time to end the job first.
 *
 * Modelled time (comm_config.modelled_hw: processes on simulated devices).
 * Each collective then moves the rank's modelled clock as the simulator's
 * communicator does (sim/comm_sim.c): it starts when the last rank issued it
 * or when the one before ended, whichever is later, and lasts what the cost
 * model charges (costmodel_coll_ns). The latest issue time comes from an
 * MPI_Iallreduce (MAX) posted just before the collective, in the same order
 * on every rank; a wait works the ends out in issue order (mpi_clock_resolve).
 *
 * Errors. Every communicator is a duplicate of MPI_COMM_WORLD with the
 * MPI_ERRORS_RETURN handler, so a failing call comes back here and is reported
 * with its name, the rank and MPI_Error_string() instead of MPI's default
 * (abort with a generic message).
 */
#include "comm/mpi/comm_mpi.h"

#include "base/clock.h"
#include "comm/comm_checks.h"
#include "comm/costmodel_hw.h"
#include "base/error.h"

#include <limits.h>
#include <mpi.h>
#include <stddef.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* ---- the guard: MPI's own waits under the watchdog ------------------------ */

/* MPI_Init_thread waits for the slowest process of the job to start (exec,
 * libraries, its data), which on a loaded machine takes seconds (4 and 8
 * processes spent 0.6 to 1.7 s in it on a 2-core machine at load average
 * 12): the guard gives every call at least this long, even under a shorter
 * collective timeout such as the tests' 1 s. */
#define MPI_GUARD_MIN_S 10.0

static pthread_once_t mpi_guard_once = PTHREAD_ONCE_INIT;
static pthread_mutex_t mpi_guard_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t mpi_guard_cond;
static uint64_t mpi_guard_deadline; /* clock_now_ns() time; 0: disarmed */
static char mpi_guard_msg[512];

/* The guard thread: asleep while disarmed; past an armed deadline it says
 * which call waited and ends the process. */
static void *mpi_guard_main(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&mpi_guard_lock);
    for (;;) {
        if (mpi_guard_deadline == 0) {
            pthread_cond_wait(&mpi_guard_cond, &mpi_guard_lock);
        } else if (clock_now_ns() >= mpi_guard_deadline) {
            /* write(2), not stdio: the thread inside MPI may hold stdio's locks */
            ssize_t n = write(STDERR_FILENO, mpi_guard_msg, strlen(mpi_guard_msg));
            (void)n;
            _exit(1);
        } else {
            struct timespec ts = {.tv_sec = (time_t)(mpi_guard_deadline / 1000000000u),
                                  .tv_nsec = (long)(mpi_guard_deadline % 1000000000u)};
            pthread_cond_timedwait(&mpi_guard_cond, &mpi_guard_lock, &ts);
        }
    }
    return NULL;
}

static void mpi_guard_start(void)
{
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC); /* the clock of clock_now_ns() */
    pthread_cond_init(&mpi_guard_cond, &attr);
    pthread_condattr_destroy(&attr);
    pthread_t t;
    if (pthread_create(&t, NULL, mpi_guard_main, NULL) == 0)
        pthread_detach(t);
}

/* This process's rank before MPI can say it: the launcher's variable. */
static const char *mpi_env_rank(void)
{
    const char *r = getenv("OMPI_COMM_WORLD_RANK");
    r = r ? r : getenv("PMI_RANK");
    return r ? r : "?";
}

/* What a rank that has not come to a guarded call may be doing: the job's
 * start, or its end. A program opens its data before its communicator
 * (chapter 6 does), so a rank still reading it is only late, not lost. */
#define MPI_GUARD_AT_START "still starting (opening its data, on a slow disk or a loaded machine), or stopped, frozen or dead"
#define MPI_GUARD_AT_END "still finishing its own work, or stopped, frozen or dead"

/* Arms the guard before `call`, a blocking MPI call that waits for every rank
 * of the job: if it has not returned after max(timeout_s, MPI_GUARD_MIN_S),
 * the guard prints why and ends this process with status 1, and mpirun ends
 * the job (a process exited with a non-zero status), the stopped rank
 * included. The one rank known to be waiting is this one: MPI names none
 * of the others, so the message says what a missing rank may be doing
 * (`late`) without naming it. timeout_s 0 (no watchdog): no guard. */
static void mpi_guard_arm(double timeout_s, const char *call, const char *late)
{
    if (timeout_s <= 0)
        return;
    pthread_once(&mpi_guard_once, mpi_guard_start);
    double limit = timeout_s > MPI_GUARD_MIN_S ? timeout_s : MPI_GUARD_MIN_S;
    pthread_mutex_lock(&mpi_guard_lock);
    snprintf(mpi_guard_msg, sizeof mpi_guard_msg,
             "mpi: rank %s has waited %g s in %s (the longer of the timeout, %g s, and %g s) for every rank of the "
             "job, and some rank has not come: %s; MPI does not say which. Ending this process, and with it the "
             "job\n",
             mpi_env_rank(), limit, call, timeout_s, MPI_GUARD_MIN_S, late);
    mpi_guard_deadline = clock_deadline_s(limit);
    pthread_cond_signal(&mpi_guard_cond);
    pthread_mutex_unlock(&mpi_guard_lock);
}

static void mpi_guard_disarm(void)
{
    pthread_mutex_lock(&mpi_guard_lock);
    mpi_guard_deadline = 0;
    pthread_mutex_unlock(&mpi_guard_lock);
}

/* ---- the session: MPI_Init once, MPI_Finalize after the last user -------- */

static int mpi_sessions;          /* begin() calls not yet ended */
static int mpi_we_initialized;    /* we called MPI_Init, so we finalize */
static int mpi_stuck;             /* a session broadcast never completed */
static double mpi_session_timeout; /* the first begin's: the guard's for MPI_Finalize */
static MPI_Comm mpi_session_comm = MPI_COMM_NULL; /* for comm_mpi_bcast_bytes and failure notices */
/* MPI has no 16-bit float types (MPI-4.0 has none either), so float16 and
 * bfloat16 travel as MPI_UINT16_T and are summed by these user-defined ops,
 * created with the session and freed before MPI_Finalize. */
static MPI_Op mpi_sum_float16 = MPI_OP_NULL, mpi_sum_bfloat16 = MPI_OP_NULL;

/* Sets the message for a failed MPI call and returns ERR_IO. */
static int mpi_fail(int mpi_rc, const char *call, int rank, const char *what)
{
    char text[MPI_MAX_ERROR_STRING] = "";
    int len = 0;
    if (MPI_Error_string(mpi_rc, text, &len) != MPI_SUCCESS)
        snprintf(text, sizeof text, "MPI error code %d", mpi_rc);
    return err_set(ERR_IO, "mpi: rank %d: %s%s%s failed: %s", rank, what, what[0] ? ": " : "", call, text);
}

/* MPI_User_function: inout[i] = in[i] + inout[i], in the 16-bit type (the
 * sum is commutative, so the order of the operands does not matter). */
static void mpi_sum_float16_fn(void *in, void *inout, int *len, MPI_Datatype *type)
{
    (void)type;
    comm_reduce_sum(COMM_FLOAT16, inout, in, (size_t)*len);
}

static void mpi_sum_bfloat16_fn(void *in, void *inout, int *len, MPI_Datatype *type)
{
    (void)type;
    comm_reduce_sum(COMM_BFLOAT16, inout, in, (size_t)*len);
}

/* A duplicate of MPI_COMM_WORLD whose errors return to us (MPI_Comm_dup
 * waits for every rank: under the guard). */
static int mpi_comm_dup_returning(int rank, double timeout_s, MPI_Comm *out)
{
    mpi_guard_arm(timeout_s, "MPI_Comm_dup", MPI_GUARD_AT_START);
    int rc = MPI_Comm_dup(MPI_COMM_WORLD, out);
    mpi_guard_disarm();
    if (rc != MPI_SUCCESS)
        return mpi_fail(rc, "MPI_Comm_dup", rank, "");
    rc = MPI_Comm_set_errhandler(*out, MPI_ERRORS_RETURN);
    if (rc != MPI_SUCCESS) {
        MPI_Comm_free(out);
        return mpi_fail(rc, "MPI_Comm_set_errhandler", rank, "");
    }
    return 0;
}

int comm_mpi_session_begin(double timeout_s, struct comm_mpi_place *out)
{
    int initialized = 0, finalized = 0;
    MPI_Finalized(&finalized);
    if (finalized)
        return err_set(ERR_STATE, "mpi: MPI was already finalized in this process; it cannot be started twice");
    MPI_Initialized(&initialized);
    if (!initialized) {
        /* SERIALIZED: any thread may call, one at a time (comm.h's rule) */
        int provided = 0;
        mpi_guard_arm(timeout_s, "MPI_Init_thread", MPI_GUARD_AT_START);
        int rc = MPI_Init_thread(NULL, NULL, MPI_THREAD_SERIALIZED, &provided);
        mpi_guard_disarm();
        if (rc != MPI_SUCCESS)
            return mpi_fail(rc, "MPI_Init_thread", -1, "");
        mpi_we_initialized = 1;
    }
    int rank = 0, world = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &world);
    /* The node-local rank picks the GPU (NCCL); MPI-3's shared-memory split
     * finds it with any launcher, where OMPI_COMM_WORLD_LOCAL_RANK is Open
     * MPI's alone. */
    MPI_Comm node;
    mpi_guard_arm(timeout_s, "MPI_Comm_split_type", MPI_GUARD_AT_START);
    int rc = MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node);
    mpi_guard_disarm();
    if (rc != MPI_SUCCESS)
        return mpi_fail(rc, "MPI_Comm_split_type", rank, "finding the ranks of this node");
    *out = (struct comm_mpi_place){.rank = rank, .world = world};
    MPI_Comm_rank(node, &out->local_rank);
    MPI_Comm_size(node, &out->local_world);
    MPI_Comm_free(&node);
    if (mpi_sessions == 0) {
        mpi_session_timeout = timeout_s;
        rc = mpi_comm_dup_returning(rank, timeout_s, &mpi_session_comm);
        if (rc < 0)
            return rc;
        if ((rc = MPI_Op_create(mpi_sum_float16_fn, 1, &mpi_sum_float16)) != MPI_SUCCESS ||
            (rc = MPI_Op_create(mpi_sum_bfloat16_fn, 1, &mpi_sum_bfloat16)) != MPI_SUCCESS)
            return mpi_fail(rc, "MPI_Op_create", rank, "the 16-bit float sums");
    }
    mpi_sessions++;
    return 0;
}

void comm_mpi_session_end(int abort_job)
{
    if (abort_job || mpi_stuck) {
        fflush(NULL);
        MPI_Abort(MPI_COMM_WORLD, 1);
        abort(); /* MPI_Abort does not return; if it did, do not go on */
    }
    if (mpi_sessions == 0 || --mpi_sessions > 0)
        return;
    MPI_Comm_free(&mpi_session_comm);
    if (mpi_sum_float16 != MPI_OP_NULL)
        MPI_Op_free(&mpi_sum_float16);
    if (mpi_sum_bfloat16 != MPI_OP_NULL)
        MPI_Op_free(&mpi_sum_bfloat16);
    if (mpi_we_initialized) {
        mpi_guard_arm(mpi_session_timeout, "MPI_Finalize", MPI_GUARD_AT_END);
        MPI_Finalize();
        mpi_guard_disarm();
    }
}

/* ---- failure notices: comm_abort between processes ---------------------------- */

#define MPI_TAG_FAILED 101 /* a rank's own failure (struct mpi_notice), to every other rank */
#define MPI_TAG_HEARD 102  /* from a rank that heard it and said so, to the failed rank */
#define MPI_NOTICE_BYTES 1536

/* How long the failed rank waits for every other rank's answer (MPI_TAG_HEARD,
 * or a notice of its own), and a rank that answered sends it. */
#define MPI_NOTICE_WAIT_NS 1000000000ull

/* A failure notice: the message, and the first collective the failed rank
 * never started (those before it can still complete without it). */
struct mpi_notice {
    uint64_t seq;
    char text[MPI_NOTICE_BYTES - sizeof(uint64_t)];
};

int comm_mpi_session_tell_failure(uint64_t seq, const char *msg)
{
    /* static: the sends read it after this returns; one failure per process is told */
    static struct mpi_notice notice;
    if (mpi_sessions == 0)
        return err_set(ERR_STATE, "mpi: a failure notice without an MPI session");
    if (notice.text[0])
        return 0;
    notice.seq = seq;
    snprintf(notice.text, sizeof notice.text, "%s", msg[0] ? msg : "a rank failed");
    int rank = 0, world = 1, bytes = (int)(offsetof(struct mpi_notice, text) + strlen(notice.text) + 1);
    MPI_Comm_rank(mpi_session_comm, &rank);
    MPI_Comm_size(mpi_session_comm, &world);
    for (int r = 0; r < world; r++) {
        MPI_Request q;
        int rc = r == rank ? MPI_SUCCESS
                           : MPI_Isend(&notice, bytes, MPI_BYTE, r, MPI_TAG_FAILED, mpi_session_comm, &q);
        if (rc != MPI_SUCCESS)
            return mpi_fail(rc, "MPI_Isend", rank, "telling the other ranks of a failure");
        if (r != rank)
            MPI_Request_free(&q); /* MPI completes it in the background, as this rank goes on calling MPI */
    }
    return 0;
}

/* Takes one message of `tag` waiting on the session communicator: 1 with
 * it in *out (may be NULL) and its sender in *from, or 0. */
static int mpi_notice_take(int tag, struct mpi_notice *out, int *from)
{
    int got = 0;
    MPI_Status st;
    struct mpi_notice n = {0};
    if (MPI_Iprobe(MPI_ANY_SOURCE, tag, mpi_session_comm, &got, &st) != MPI_SUCCESS || !got ||
        MPI_Recv(&n, (int)sizeof n, MPI_BYTE, st.MPI_SOURCE, tag, mpi_session_comm, MPI_STATUS_IGNORE) != MPI_SUCCESS)
        return 0;
    n.text[sizeof n.text - 1] = '\0';
    if (out)
        *out = n;
    *from = st.MPI_SOURCE;
    return 1;
}

int comm_mpi_session_heard_failure(char *buf, size_t len, int *from, uint64_t *seq)
{
    struct mpi_notice n;
    if (mpi_sessions == 0 || !mpi_notice_take(MPI_TAG_FAILED, &n, from))
        return 0;
    snprintf(buf, len, "%s", n.text);
    *seq = n.seq;
    return 1;
}

/* ---- waiting with a deadline ------------------------------------------------ */

struct mpi_comm;
static void mpi_census_answer(struct mpi_comm *mc);
static int mpi_heard_failure(struct mpi_comm *mc, uint64_t seq);

/* mpi_poll's answers besides MPI's own codes (which are never negative). */
#define MPI_POLL_TIMEOUT (-1) /* the deadline passed; the request is still posted */
#define MPI_POLL_FAILED (-2)  /* another rank failed in its own code: its notice is in mc */

/* Polls `req` with MPI_Test until it completes or clock_now_ns() passes
 * `deadline_ns`. MPI_Wait would be simpler but cannot time out. Each turn,
 * when `mc` is a communicator of ours, answers the census questions of ranks
 * whose own wait expired and looks for the failure notice of a rank that
 * never started collective `seq`; and yields the core: under `mpirun
 * --oversubscribe` the rank we wait for may need it. Returns MPI_SUCCESS, an
 * MPI error code, MPI_POLL_TIMEOUT or MPI_POLL_FAILED (the request is still
 * posted after either). */
static int mpi_poll(MPI_Request *req, uint64_t deadline_ns, struct mpi_comm *mc, uint64_t seq)
{
    for (;;) {
        int done = 0, rc = MPI_Test(req, &done, MPI_STATUS_IGNORE);
        if (rc != MPI_SUCCESS || done)
            return rc;
        if (mc) {
            mpi_census_answer(mc);
            if (mpi_heard_failure(mc, seq))
                return MPI_POLL_FAILED;
        }
        if (clock_now_ns() > deadline_ns)
            return MPI_POLL_TIMEOUT;
        sched_yield();
    }
}

/* 0 s: no watchdog (COMM_NO_TIMEOUT), so no deadline */
static uint64_t mpi_deadline(double timeout_s)
{
    return timeout_s > 0 ? clock_deadline_s(timeout_s) : UINT64_MAX;
}

int comm_mpi_bcast_bytes(void *buf, size_t bytes, int root, double timeout_s)
{
    int rank = 0;
    if (mpi_sessions == 0)
        return err_set(ERR_STATE, "mpi: broadcast of %zu bytes without an MPI session", bytes);
    MPI_Comm_rank(mpi_session_comm, &rank);
    if (bytes > INT_MAX)
        return err_set(ERR_RANGE, "mpi: rank %d: cannot broadcast %zu bytes in one call", rank, bytes);
    MPI_Request req;
    int rc = MPI_Ibcast(buf, (int)bytes, MPI_BYTE, root, mpi_session_comm, &req);
    if (rc != MPI_SUCCESS)
        return mpi_fail(rc, "MPI_Ibcast", rank, "broadcasting the bootstrap id");
    rc = mpi_poll(&req, mpi_deadline(timeout_s), NULL, 0);
    if (rc == MPI_SUCCESS)
        return 0;
    mpi_stuck = 1; /* the broadcast may still be posted: the session must end in MPI_Abort */
    if (rc == MPI_POLL_TIMEOUT)
        return err_set(ERR_TIMEOUT, "mpi: rank %d: the broadcast of %zu bytes from rank %d did not complete within %g s "
                       "(a rank never got there); ending the session aborts the job", rank, bytes, root, timeout_s);
    return mpi_fail(rc, "MPI_Test", rank, "broadcasting the bootstrap id");
}

/* ---- the backend ------------------------------------------------------------ */

/* What a rank tells a census: the collective it waits in (and which part of
 * it), and the last one it completed. Plain integers, sent as bytes between
 * processes of one build. */
struct mpi_whereabouts {
    struct comm_fingerprint at, last;
    int32_t phase;    /* enum mpi_phase */
    int32_t has_last; /* `last` is set */
};

/* Which part of a collective a rank waits in; MPI_PHASE_CLOSE: in no
 * collective, at comm_close's final barrier. */
enum mpi_phase { MPI_PHASE_COLLECTIVE, MPI_PHASE_FINGERPRINT, MPI_PHASE_RESULT, MPI_PHASE_CLOSE, MPI_PHASE_COUNT };

/* One collective's modelled clock (see "Modelled time" above). */
struct mpi_clock {
    struct mpi_clock *next;     /* the next one posted */
    MPI_Request r;              /* the MAX of every rank's issue time */
    uint64_t issue, latest;     /* this rank's issue time; every rank's latest */
    uint64_t cost_ns;           /* what the model charges the collective */
    uint64_t end_ns;            /* its modelled end, once resolved */
    int resolved, waited;       /* end_ns known; its collective's wait has taken it */
    struct comm_coll_desc d;    /* the collective, for messages */
};

struct mpi_comm {
    MPI_Comm comm;     /* our own duplicate: its collectives match only ours */
    MPI_Comm census;   /* another: a timed-out rank's "where are you?" (mpi_census), and the final barrier */
    int abort_on_close; /* a collective is stuck in MPI, or a rank failed: close must abort */
    int failed_self;    /* this rank failed (comm_abort): it told the others, and ends the job at close */
    int failed_from;    /* the rank whose failure notice came, or -1 */
    uint64_t failed_seq; /* the first collective it never started */
    char failed_msg[MPI_NOTICE_BYTES]; /* its message */
    const char *last_call; /* comm_mpi_last_call() */
    struct mpi_whereabouts here; /* this rank's answer to a census */
    int modelled;               /* comm_config.modelled_hw was given: the collectives take modelled time */
    struct costmodel model;     /* ... priced from it */
    enum comm_algo algo;        /* ... as this algorithm (the configuration's; Open MPI picks its own) */
    uint64_t free_ns;           /* the modelled end of the last collective resolved */
    struct mpi_clock *clocks;   /* the clocks not yet both resolved and waited for, oldest first */
};

/* A failure notice just heard: this rank says why it will stop, and answers
 * the failed rank (MPI_TAG_HEARD), which ends the job once every rank has
 * said its line. Now, from inside a wait or a start: the buffers of every
 * collective this rank has posted are still the caller's, so the progress
 * the send needs cannot write into freed memory. After this rank gives up
 * (comm_close, mpi_close), MPI is not progressed again. */
static void mpi_answer(struct mpi_comm *mc)
{
    int rank = -1, done = 0;
    MPI_Comm_rank(mc->comm, &rank);
    fprintf(stderr, "mpi: rank %d: aborting the MPI job after: %s\n", rank, mc->failed_msg);
    fflush(stderr);
    MPI_Request q;
    if (MPI_Isend(NULL, 0, MPI_CHAR, mc->failed_from, MPI_TAG_HEARD, mpi_session_comm, &q) != MPI_SUCCESS)
        return;
    for (uint64_t until = clock_deadline_ns(MPI_NOTICE_WAIT_NS); !done && clock_now_ns() < until;)
        if (MPI_Test(&q, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS)
            return;
    if (!done) /* the failed rank is stopped too: MPI_Abort takes the send back */
        MPI_Request_free(&q);
}

/* Whether collective `seq` cannot complete because a rank that never
 * started it failed (its notice is then in mc). The collectives the failed
 * rank started go on: they complete without it, and where every rank judges
 * alike (the replica check), every rank reaches its own verdict. */
static int mpi_heard_failure(struct mpi_comm *mc, uint64_t seq)
{
    if (mc->failed_from < 0) {
        if (!comm_mpi_session_heard_failure(mc->failed_msg, sizeof mc->failed_msg, &mc->failed_from,
                                            &mc->failed_seq))
            return 0;
        mpi_answer(mc);
    }
    return seq >= mc->failed_seq;
}

/* ---- the census: who is where, after a wait expired ---------------------------- */

#define MPI_CENSUS_ASK 1
#define MPI_CENSUS_TELL 2
#define MPI_CENSUS_WAIT_NS 1000000000ull /* 1 s: a waiting rank answers within a poll turn */

/* Answers every pending question: this rank is waiting (it is polling). */
static void mpi_census_answer(struct mpi_comm *mc)
{
    for (;;) {
        int asked = 0;
        MPI_Status st;
        if (MPI_Iprobe(MPI_ANY_SOURCE, MPI_CENSUS_ASK, mc->census, &asked, &st) != MPI_SUCCESS || !asked)
            return;
        char question;
        if (MPI_Recv(&question, 1, MPI_BYTE, st.MPI_SOURCE, MPI_CENSUS_ASK, mc->census, MPI_STATUS_IGNORE) !=
            MPI_SUCCESS)
            return;
        /* the asker posted its receive before asking, so this send completes */
        MPI_Send(&mc->here, (int)sizeof mc->here, MPI_BYTE, st.MPI_SOURCE, MPI_CENSUS_TELL, mc->census);
    }
}

/* "collective #3 (allreduce sum, 16 x float32)" from a fingerprint. */
static const char *mpi_fp_describe(const struct comm_fingerprint *fp, char *buf, size_t len)
{
    struct comm_coll_desc d = {.seq = fp->seq, .coll = (enum comm_coll)fp->coll, .op = (enum comm_op)fp->op,
                               .dtype = (enum comm_dtype)fp->dtype, .count = (size_t)fp->count, .root = fp->root};
    return comm_coll_describe(&d, buf, len);
}

/* Where a census answer says a rank waits: "collective #3 (allreduce sum,
 * 16 x float32) (its fingerprint check)", or "comm_close's final barrier". */
static const char *mpi_place_describe(const struct mpi_whereabouts *t, char *buf, size_t len)
{
    static const char *const parts[MPI_PHASE_COUNT] = {"", " (its fingerprint check)", " (its result check)", ""};
    if (t->phase == MPI_PHASE_CLOSE) {
        snprintf(buf, len, "comm_close's final barrier (done with its collectives)");
        return buf;
    }
    char d[128];
    snprintf(buf, len, "%s%s", mpi_fp_describe(&t->at, d, sizeof d),
             parts[t->phase >= 0 && t->phase < MPI_PHASE_COUNT ? t->phase : 0]);
    return buf;
}

/* Asks every other rank where it is, waits up to MPI_CENSUS_WAIT_NS for the
 * answers (answering the others' questions meanwhile), and writes the report:
 * who waits in this collective too, who waits elsewhere, who did not answer.
 * On any MPI failure it says the census could not be taken. */
static void mpi_census(comm_t *c, char *report, size_t len)
{
    struct mpi_comm *mc = c->impl;
    int W = c->world;
    struct mpi_whereabouts *told = calloc((size_t)W, sizeof *told);
    MPI_Request *recvs = malloc((size_t)W * sizeof *recvs), *asks = malloc((size_t)W * sizeof *asks);
    int *answered = calloc((size_t)W, sizeof *answered);
    if (!told || !recvs || !asks || !answered) {
        snprintf(report, len, "\n  (no census of the other ranks: out of memory)");
        goto out;
    }
    char question = '?';
    int ok = 1;
    for (int r = 0; r < W; r++) {
        recvs[r] = asks[r] = MPI_REQUEST_NULL;
        answered[r] = r == c->rank;
        if (r != c->rank)
            ok &= MPI_Irecv(&told[r], (int)sizeof told[r], MPI_BYTE, r, MPI_CENSUS_TELL, mc->census, &recvs[r]) ==
                      MPI_SUCCESS &&
                  MPI_Isend(&question, 1, MPI_BYTE, r, MPI_CENSUS_ASK, mc->census, &asks[r]) == MPI_SUCCESS;
    }
    uint64_t until = clock_deadline_ns(MPI_CENSUS_WAIT_NS);
    for (int pending = W - 1; ok && pending > 0 && clock_now_ns() < until;) {
        for (int r = 0; r < W; r++) {
            int done = 0;
            if (!answered[r] && MPI_Test(&recvs[r], &done, MPI_STATUS_IGNORE) == MPI_SUCCESS && done)
                answered[r] = 1, pending--;
        }
        mpi_census_answer(mc);
        sched_yield();
    }
    if (!ok) {
        snprintf(report, len, "\n  (no census of the other ranks: an MPI call failed)");
        goto out;
    }
    char too[256] = "", elsewhere[1024] = "", silent[1024] = "", desc[192], last[160];
    size_t nt = 0, ne = 0, ns = 0;
    int ntoo = 0;
    for (int r = 0; r < W; r++) {
        if (r == c->rank)
            continue;
        if (!answered[r]) {
            MPI_Cancel(&recvs[r]); /* a receive may be cancelled; the question to r is left to MPI_Abort */
            MPI_Wait(&recvs[r], MPI_STATUS_IGNORE);
            ns += (size_t)snprintf(silent + ns, ns < sizeof silent ? sizeof silent - ns : 0,
                                   "\n  rank %d: did not answer within %g s: it is in no collective of this "
                                   "communicator (running its own code, stopped, finished, or dead)",
                                   r, MPI_CENSUS_WAIT_NS / 1e9);
            continue;
        }
        const struct mpi_whereabouts *t = &told[r];
        if (memcmp(&t->at, &mc->here.at, sizeof t->at) == 0 && t->phase == mc->here.phase) {
            nt += (size_t)snprintf(too + nt, nt < sizeof too ? sizeof too - nt : 0, "%s%d", nt ? ", " : "", r);
            ntoo++;
            continue;
        }
        snprintf(last, sizeof last, "%s", "has completed no collective");
        if (t->has_last) {
            char d2[128];
            snprintf(last, sizeof last, "last completed %s", mpi_fp_describe(&t->last, d2, sizeof d2));
        }
        ne += (size_t)snprintf(elsewhere + ne, ne < sizeof elsewhere ? sizeof elsewhere - ne : 0,
                               "\n  rank %d: waiting at %s instead; %s", r, mpi_place_describe(t, desc, sizeof desc),
                               last);
    }
    for (int r = 0; r < W; r++)
        if (asks[r] != MPI_REQUEST_NULL)
            MPI_Request_free(&asks[r]);
    /* Is this rank the odd one? Then the others' common place says more than
     * a list of everyone as "missing". */
    int best = -1, best_count = 0;
    for (int r = 0; r < W; r++) {
        if (r == c->rank || !answered[r] || (memcmp(&told[r].at, &mc->here.at, sizeof told[r].at) == 0 &&
                                             told[r].phase == mc->here.phase))
            continue;
        int count = 0;
        for (int q = 0; q < W; q++)
            count += q != c->rank && answered[q] && memcmp(&told[q].at, &told[r].at, sizeof told[r].at) == 0 &&
                     told[q].phase == told[r].phase;
        if (count > best_count)
            best = r, best_count = count;
    }
    int n = 0;
    if (2 * best_count > W)
        n = snprintf(report, len, "\n  this rank is the odd one: %d of the %d ranks wait at %s", best_count, W,
                     mpi_place_describe(&told[best], desc, sizeof desc));
    if (n >= 0 && (size_t)n < len)
        n += snprintf(report + n, len - (size_t)n, "\n  waiting in it too: %s%s",
                      ntoo == 0 ? "no other rank" : ntoo == 1 ? "rank " : "ranks ", too);
    if ((ns || ne) && n >= 0 && (size_t)n < len)
        snprintf(report + n, len - (size_t)n, "\n  missing:%s%s", silent, elsewhere);
out:
    free(told);
    free(recvs);
    free(asks);
    free(answered);
}

struct mpi_req {
    MPI_Request r;
    const char *call; /* the MPI function that posted it, for messages */
    void *tmp;        /* in-place reduce-scatter: the result before its copy */
    struct mpi_clock *clock; /* its modelled clock; NULL: none */
};

static MPI_Datatype mpi_type(enum comm_dtype dtype)
{
    switch (dtype) {
    case COMM_FLOAT64: return MPI_DOUBLE;
    case COMM_INT32: return MPI_INT32_T;
    case COMM_INT64: return MPI_INT64_T;
    case COMM_FLOAT16:
    case COMM_BFLOAT16: return MPI_UINT16_T; /* summed by mpi_sum_op() */
    default: return MPI_FLOAT;
    }
}

static MPI_Op mpi_sum_op(enum comm_dtype dtype)
{
    return dtype == COMM_FLOAT16 ? mpi_sum_float16 : dtype == COMM_BFLOAT16 ? mpi_sum_bfloat16 : MPI_SUM;
}

static int mpi_launch_resolve(enum comm_launch requested, enum comm_launch *out)
{
    if (requested != COMM_LAUNCH_AUTO && requested != COMM_LAUNCH_MPI)
        return err_set(ERR_UNSUPPORTED, "mpi: ranks are processes started by mpirun (launch mode 'mpi' only)");
    *out = COMM_LAUNCH_MPI;
    return 0;
}

static int mpi_open(comm_t *c, const struct comm_config *cfg)
{
    if (cfg->algo == COMM_ALGO_HIER) /* Open MPI picks its own algorithm: hier would not run as asked */
        return err_set(ERR_UNSUPPORTED, "mpi: algorithm hier is the simulator's (--backend=sim); Open MPI chooses "
                       "its own (coll_tuned MCA parameters)");
    struct comm_mpi_place at;
    int rc = comm_mpi_session_begin(c->timeout_s, &at);
    if (rc < 0)
        return rc;
    if ((cfg->world != 0 && cfg->world != at.world) || (cfg->rank >= 0 && cfg->rank != at.rank)) {
        comm_mpi_session_end(0);
        return err_set(ERR_ARG, "mpi: this process is rank %d of %d (from mpirun), but the configuration asks for "
                       "rank %d of %d", at.rank, at.world, cfg->rank, cfg->world);
    }
    struct mpi_comm *mc = calloc(1, sizeof *mc);
    if (!mc) {
        comm_mpi_session_end(0);
        return err_set(ERR_NOMEM, "mpi: rank %d: cannot allocate its communicator", at.rank);
    }
    mc->failed_from = -1;
    rc = mpi_comm_dup_returning(at.rank, c->timeout_s, &mc->comm);
    if (rc == 0 && (rc = mpi_comm_dup_returning(at.rank, c->timeout_s, &mc->census)) < 0)
        MPI_Comm_free(&mc->comm);
    if (rc < 0) {
        free(mc);
        comm_mpi_session_end(0);
        return rc;
    }
    c->rank = at.rank;
    c->world = at.world;
    c->impl = mc;
    if (cfg->modelled_hw) {
        mc->modelled = 1;
        costmodel_from_hw(&mc->model, cfg->modelled_hw);
        mc->algo = cfg->algo;
    }
    return 0;
}

/* Waits for a posted request under the communicator's timeout. On a timeout,
 * a failure notice or an MPI error the communicator must abort at close: the
 * request may still be posted, and MPI offers no way to take it back. d NULL:
 * comm_close's final barrier. */
static int mpi_finish(comm_t *c, MPI_Request *r, const char *call, const struct comm_coll_desc *d,
                      const char *phase)
{
    struct mpi_comm *mc = c->impl;
    char desc[128] = "comm_close's final barrier";
    if (d) {
        comm_fingerprint_of(d, &mc->here.at);
        comm_coll_describe(d, desc, sizeof desc);
    } else {
        memset(&mc->here.at, 0, sizeof mc->here.at);
    }
    mc->here.phase = !d ? MPI_PHASE_CLOSE : strstr(phase, "fingerprint") ? MPI_PHASE_FINGERPRINT
                     : strstr(phase, "result")                       ? MPI_PHASE_RESULT
                                                                     : MPI_PHASE_COLLECTIVE;
    int rc = mpi_poll(r, mpi_deadline(c->timeout_s), mc, d ? d->seq : UINT64_MAX);
    if (rc == MPI_SUCCESS)
        return 0;
    mc->abort_on_close = 1;
    if (rc == MPI_POLL_FAILED)
        return err_set(ERR_PEER, "mpi: rank %d: %s%s: %s", c->rank, desc, phase, mc->failed_msg);
    if (rc == MPI_POLL_TIMEOUT) {
        char census[3072];
        mpi_census(c, census, sizeof census);
        return err_set(ERR_TIMEOUT,
                       "mpi: rank %d: %s: %s%s did not complete within %g s%s\n"
                       "MPI cannot cancel a collective: closing the communicator aborts the job (MPI_Abort)",
                       c->rank, desc, call, phase, c->timeout_s, census);
    }
    return mpi_fail(rc, call, c->rank, desc);
}

/* Posts collective d's modelled clock, before the collective itself: the
 * MAX of every rank's issue time. 0, or ERR_NOMEM / ERR_IO. */
static int mpi_clock_post(comm_t *c, const comm_request_t *req, struct mpi_clock **out)
{
    struct mpi_comm *mc = c->impl;
    struct mpi_clock *k = calloc(1, sizeof *k);
    if (!k)
        return err_set(ERR_NOMEM, "mpi: rank %d: cannot allocate a modelled clock", c->rank);
    k->issue = req->issue_ns;
    k->cost_ns = costmodel_coll_ns(&mc->model, &req->desc, mc->algo, c->world);
    k->d = req->desc;
    int rc = MPI_Iallreduce(&k->issue, &k->latest, 1, MPI_UINT64_T, MPI_MAX, mc->comm, &k->r);
    if (rc != MPI_SUCCESS) {
        char desc[128];
        free(k);
        mc->abort_on_close = 1;
        return mpi_fail(rc, "MPI_Iallreduce", c->rank, comm_coll_describe(&req->desc, desc, sizeof desc));
    }
    struct mpi_clock **tail = &mc->clocks;
    while (*tail)
        tail = &(*tail)->next;
    *tail = k;
    *out = k;
    return 0;
}

/* Works out the modelled ends of every clock up to k, in issue order (a
 * collective starts when the last rank issued it or when the one before
 * ended), and gives req k's end; frees the clocks both resolved and waited
 * for. 0, or mpi_finish's error. */
static int mpi_clock_resolve(comm_t *c, struct mpi_clock *k, comm_request_t *req)
{
    struct mpi_comm *mc = c->impl;
    for (struct mpi_clock *p = mc->clocks; p; p = p->next) {
        if (!p->resolved) {
            int rc = mpi_finish(c, &p->r, "MPI_Iallreduce", &p->d, " (the modelled clock's issue times)");
            if (rc < 0)
                return rc;
            uint64_t start = p->latest > mc->free_ns ? p->latest : mc->free_ns;
            p->end_ns = p->cost_ns > UINT64_MAX - start ? UINT64_MAX : start + p->cost_ns;
            mc->free_ns = p->end_ns;
            p->resolved = 1;
        }
        if (p == k)
            break;
    }
    req->done_ns = k->end_ns;
    k->waited = 1;
    while (mc->clocks && mc->clocks->resolved && mc->clocks->waited) {
        struct mpi_clock *done = mc->clocks;
        mc->clocks = done->next;
        free(done);
    }
    return 0;
}

/* The end of a healthy communicator: a barrier under the watchdog, census
 * included, on the census communicator (so it never meets a collective of
 * the job's own, on mc->comm). A rank stopped before the job's end is named
 * here as anywhere else, and a rank that failed after the job's last
 * collective (rank 0's final save) is heard here. 0 or an ERR_*. */
static int mpi_close_barrier(comm_t *c)
{
    struct mpi_comm *mc = c->impl;
    MPI_Request r;
    int rc = MPI_Ibarrier(mc->census, &r);
    if (rc != MPI_SUCCESS)
        return mpi_fail(rc, "MPI_Ibarrier", c->rank, "comm_close's final barrier");
    return mpi_finish(c, &r, "MPI_Ibarrier", NULL, "");
}

/* Up to MPI_NOTICE_WAIT_NS, until every other rank has answered this rank's
 * failure notice: said so (MPI_TAG_HEARD) or failed itself (its own notice).
 * Then MPI_Abort ends no rank before it said which rank failed. */
static void mpi_wait_answers(comm_t *c)
{
    unsigned char *answered = calloc((size_t)c->world, 1);
    if (!answered)
        return;
    int pending = c->world - 1, from;
    for (uint64_t until = clock_deadline_ns(MPI_NOTICE_WAIT_NS); pending > 0 && clock_now_ns() < until;) {
        int got = mpi_notice_take(MPI_TAG_HEARD, NULL, &from) || mpi_notice_take(MPI_TAG_FAILED, NULL, &from);
        if (got && from != c->rank && !answered[from])
            answered[from] = 1, pending--;
        if (!got)
            sched_yield();
    }
    free(answered);
}

/* When the job must end (a timeout, a failure heard or this rank's own),
 * close calls no MPI function but MPI_Abort. A collective this rank gave up
 * may still be posted, its buffers freed by the caller since (DDP's buckets,
 * reducer_close), and any progress (MPI_Test, a probe, a send) could let MPI
 * write what it still receives into them. Nothing is left to say by then: a
 * rank that heard a failure answered when it heard it (mpi_answer), and the
 * failed rank awaited the answers in comm_abort (mpi_abort). A rank that
 * heard one gives the failed rank up to twice that wait to end the job,
 * asleep, and ends it itself after (the failed rank may be stopped too). */
static void mpi_close(comm_t *c)
{
    struct mpi_comm *mc = c->impl;
    if (!mc->abort_on_close && c->timeout_s > 0 && mpi_close_barrier(c) < 0)
        snprintf(c->broken_msg, sizeof c->broken_msg, "%s", err_msg());
    if (!mc->abort_on_close) {
        MPI_Comm_free(&mc->comm);
        MPI_Comm_free(&mc->census);
    } else if (mc->failed_self) { /* its own error is out, and the answers to it are in */
    } else if (mc->failed_from >= 0) { /* its line is out: said when it heard */
        clock_sleep_ns(2 * MPI_NOTICE_WAIT_NS);
    } else {
        fprintf(stderr, "mpi: rank %d: aborting the MPI job after: %s\n", c->rank, c->broken_msg);
        fflush(stderr);
    }
    int abort_job = mc->abort_on_close;
    while (!abort_job && mc->clocks) { /* aborting, MPI may still write into a posted one: kept, as q->tmp */
        struct mpi_clock *k = mc->clocks;
        mc->clocks = k->next;
        free(k);
    }
    free(mc);
    comm_mpi_session_end(abort_job);
}

/* comm_abort: this rank failed in its own code. Its own error goes out first,
 * then the notice to every rank, whose waits poll for it; then it waits for
 * their answers here, while the caller still holds the buffers of whatever
 * it has posted (comm.h: comm_abort comes before they are freed). */
static void mpi_abort(comm_t *c, const char *msg)
{
    struct mpi_comm *mc = c->impl;
    fprintf(stderr, "mpi: %s\n", msg);
    fflush(stderr);
    mc->abort_on_close = 1;
    mc->failed_self = comm_mpi_session_tell_failure(c->next_seq, msg) == 0;
    if (mc->failed_self)
        mpi_wait_answers(c);
    else /* nobody was told: the others' watchdogs will name this rank */
        fprintf(stderr, "mpi: rank %d: %s\n", c->rank, err_msg());
}

/* The debug checks' all-gather (comm_checks.h): `bytes` from every rank
 * into all[] (world x bytes). Every rank sees every value, so all find the
 * same mismatch and none posts the collective: the job stays consistent. */
static int mpi_exchange(comm_t *c, const void *mine, void *all, size_t bytes, const struct comm_coll_desc *d,
                        const char *phase)
{
    struct mpi_comm *mc = c->impl;
    MPI_Request r;
    int rc = MPI_Iallgather(mine, (int)bytes, MPI_BYTE, all, (int)bytes, MPI_BYTE, mc->comm, &r);
    if (rc != MPI_SUCCESS) {
        char desc[128];
        mc->abort_on_close = 1;
        return mpi_fail(rc, "MPI_Iallgather", c->rank, comm_coll_describe(d, desc, sizeof desc));
    }
    return mpi_finish(c, &r, "MPI_Iallgather", d, phase);
}

/* Do [a, a+na) and [b, b+nb) share a byte? */
static int mpi_overlap(const void *a, size_t na, const void *b, size_t nb)
{
    uintptr_t x = (uintptr_t)a, y = (uintptr_t)b;
    return na && nb && x < y + nb && y < x + na;
}

/* Calls the collective's MPI function: the non-blocking one (MPI_Iallreduce,
 * ..., request in q->r), or with `blocking` the blocking one (MPI_Allreduce,
 * ..., done on return, q->r = MPI_REQUEST_NULL). */
static int mpi_post(comm_t *c, const struct comm_coll_desc *d, struct mpi_req *q, int blocking)
{
    MPI_Comm comm = ((struct mpi_comm *)c->impl)->comm;
    MPI_Datatype t = mpi_type(d->dtype);
    int n = (int)d->count;
    size_t es = comm_dtype_size(d->dtype), bytes = d->count * es;
    const void *send = d->sendbuf == d->recvbuf ? MPI_IN_PLACE : d->sendbuf;
    q->r = MPI_REQUEST_NULL;
    switch (d->coll) {
    case COMM_ALLREDUCE:
        q->call = blocking ? "MPI_Allreduce" : "MPI_Iallreduce";
        return blocking ? MPI_Allreduce(send, d->recvbuf, n, t, mpi_sum_op(d->dtype), comm)
                        : MPI_Iallreduce(send, d->recvbuf, n, t, mpi_sum_op(d->dtype), comm, &q->r);
    case COMM_BROADCAST:
        q->call = blocking ? "MPI_Bcast" : "MPI_Ibcast";
        return blocking ? MPI_Bcast(d->recvbuf, n, t, d->root, comm)
                        : MPI_Ibcast(d->recvbuf, n, t, d->root, comm, &q->r);
    case COMM_REDUCE_SCATTER: {
        /* NCCL's in-place form (recv inside send) is not MPI's (MPI_IN_PLACE
         * leaves the result at the start of the buffer, over block 0), so an
         * overlapping call reduces into a temporary and copies at the end. */
        void *out = d->recvbuf;
        if (mpi_overlap(d->sendbuf, bytes * (size_t)c->world, d->recvbuf, bytes)) {
            if (!(q->tmp = malloc(bytes)))
                return MPI_ERR_NO_MEM;
            out = q->tmp;
        }
        q->call = blocking ? "MPI_Reduce_scatter_block" : "MPI_Ireduce_scatter_block";
        return blocking ? MPI_Reduce_scatter_block(d->sendbuf, out, n, t, mpi_sum_op(d->dtype), comm)
                        : MPI_Ireduce_scatter_block(d->sendbuf, out, n, t, mpi_sum_op(d->dtype), comm, &q->r);
    }
    case COMM_ALLGATHER:
        /* here the conventions agree: in place means my block of recvbuf */
        send = (const char *)d->recvbuf + (size_t)c->rank * bytes == d->sendbuf && bytes ? MPI_IN_PLACE : d->sendbuf;
        q->call = blocking ? "MPI_Allgather" : "MPI_Iallgather";
        return blocking ? MPI_Allgather(send, n, t, d->recvbuf, n, t, comm)
                        : MPI_Iallgather(send, n, t, d->recvbuf, n, t, comm, &q->r);
    default:
        q->call = blocking ? "MPI_Barrier" : "MPI_Ibarrier";
        return blocking ? MPI_Barrier(comm) : MPI_Ibarrier(comm, &q->r);
    }
}

/* After MPI finished the collective: the in-place copy, the average's
 * division, the result check; frees q. */
static int mpi_complete(comm_t *c, const struct comm_coll_desc *d, struct mpi_req *q)
{
    if (q->tmp)
        memcpy(d->recvbuf, q->tmp, d->count * comm_dtype_size(d->dtype));
    free(q->tmp);
    free(q);
    if (d->op == COMM_AVG && (d->coll == COMM_ALLREDUCE || d->coll == COMM_REDUCE_SCATTER))
        comm_reduce_divide(d->dtype, d->recvbuf, d->count, c->world);
    size_t bytes;
    int rc = 0;
    if (c->check == COMM_CHECK_RESULTS && comm_checks_result_bytes(d, c->world, &bytes))
        rc = comm_checks_results(c, d, comm_checksum(d->recvbuf, bytes), mpi_exchange);
    if (rc == 0) { /* what a census hears from this rank from now on */
        struct mpi_comm *mc = c->impl;
        comm_fingerprint_of(d, &mc->here.last);
        mc->here.has_last = 1;
    }
    return rc;
}

/* Without a watchdog (c->timeout_s == 0, COMM_NO_TIMEOUT) a blocking
 * collective (comm_allreduce, ...) calls MPI's blocking function directly and
 * completes inside start(): the same call path as a plain MPI program, so
 * `make bench` compares against MPI_Allreduce itself. With a timeout, or for
 * comm_*_start, it posts the non-blocking call and wait() polls it. */
static int mpi_start(comm_t *c, comm_request_t *req)
{
    struct mpi_comm *mc = c->impl;
    const struct comm_coll_desc *d = &req->desc;
    char desc[128];
    if (mpi_heard_failure(mc, d->seq)) { /* a rank failed before it started this one: the job is over */
        mc->abort_on_close = 1;
        req->job_knows = 1;
        return err_set(ERR_PEER, "mpi: rank %d: %s: %s", c->rank, comm_coll_describe(d, desc, sizeof desc),
                       mc->failed_msg);
    }
    if (d->count > INT_MAX)
        return err_set(ERR_RANGE, "mpi: rank %d: %s: MPI counts are int: at most %d elements per call", c->rank,
                       comm_coll_describe(d, desc, sizeof desc), INT_MAX);
    if (c->check >= COMM_CHECK_FINGERPRINT) {
        int rc = comm_checks_fingerprint(c, d, mpi_exchange);
        if (rc < 0) { /* a mismatch every rank finds, or the exchange's own failure */
            req->job_knows = 1;
            return rc;
        }
    }
    struct mpi_req *q = calloc(1, sizeof *q);
    if (!q)
        return err_set(ERR_NOMEM, "mpi: rank %d: cannot allocate a request", c->rank);
    int rc;
    if (mc->modelled && (rc = mpi_clock_post(c, req, &q->clock)) < 0) {
        free(q);
        return rc;
    }
    int blocking = req->blocking && c->timeout_s == 0;
    rc = mpi_post(c, d, q, blocking);
    mc->last_call = q->call;
    if (rc != MPI_SUCCESS) {
        mc->abort_on_close = 1;
        mpi_fail(rc, q->call ? q->call : "MPI", c->rank, comm_coll_describe(d, desc, sizeof desc));
        free(q->tmp);
        free(q);
        return ERR_IO;
    }
    if (blocking) {
        struct mpi_clock *clock = q->clock;
        req->status = mpi_complete(c, d, q);
        if (req->status == 0 && clock)
            req->status = mpi_clock_resolve(c, clock, req);
        if (req->status < 0)
            snprintf(req->err_buf, sizeof req->err_buf, "%s", err_msg());
        req->done = 1;
        return 0;
    }
    req->impl = q;
    return 0;
}

static int mpi_wait(comm_t *c, comm_request_t *req)
{
    struct mpi_req *q = req->impl;
    if (((struct mpi_comm *)c->impl)->abort_on_close) {
        /* an earlier collective failed: this one cannot complete either, and waiting out the
         * timeout (and a census) again for each request still posted only delays the end */
        char desc[128];
        free(q); /* q->tmp may still be written by the posted call: keep it until MPI_Abort */
        return err_set(ERR_PEER, "mpi: rank %d: %s: abandoned: an earlier failure broke the communicator: %s",
                       c->rank, comm_coll_describe(&req->desc, desc, sizeof desc), c->broken_msg);
    }
    int rc = mpi_finish(c, &q->r, q->call, &req->desc, "");
    if (rc < 0) {
        /* q->tmp may still be written by the posted call: keep it until MPI_Abort */
        free(q);
        return rc;
    }
    struct mpi_clock *clock = q->clock;
    rc = mpi_complete(c, &req->desc, q);
    return rc == 0 && clock ? mpi_clock_resolve(c, clock, req) : rc;
}

const char *comm_mpi_last_call(const comm_t *c)
{
    const char *call = ((const struct mpi_comm *)c->impl)->last_call;
    return call ? call : "";
}

static const struct costmodel *mpi_cost_model(const comm_t *c, enum comm_algo *algo)
{
    const struct mpi_comm *mc = c->impl;
    *algo = mc->algo;
    return mc->modelled ? &mc->model : NULL;
}

const struct comm_backend_ops comm_backend_mpi = {
    .name = "mpi",
    .untimed = 1,
    .launch_resolve = mpi_launch_resolve,
    .open = mpi_open,
    .close = mpi_close,
    .start = mpi_start,
    .wait = mpi_wait,
    .abort = mpi_abort,
    .cost_model = mpi_cost_model,
};
