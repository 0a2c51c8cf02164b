/* comm_sim: the thread simulator's communicator (backend "sim"), chapter 5.
 *
 * Where it sits: behind lib/comm/comm.h, for programs whose ranks are threads of
 * one process. Read comm.h first; this header is what the simulator's own
 * files share (comm_sim.c: worlds, rendezvous, watchdog, fingerprint and
 * result checks, faults; comm_sim_algos.c: how the bytes move), plus the few
 * simulator-only queries tests and labs use.
 *
 * A collective on rank r goes (on the thread that runs rank r's queue, see
 * struct sim_comm):
 *   1. faults due before it (sim/faults.h): kill, skip, delay;
 *   2. rendezvous: every rank posts its fingerprint; the last to arrive
 *      compares them all (always on, like TORCH_DISTRIBUTED_DEBUG=DETAIL);
 *      the watchdog is modelled: a rank arriving at modelled time a waits
 *      until a + timeout, and once every rank has arrived or is gone
 *      (killed, or closed and its thread ended) a deadline passed with a
 *      rank missing fires the earliest one's watchdog: it writes the
 *      diagnosis (who arrived by then, and what each other rank was doing
 *      then), breaks the world and every waiting thread returns. The wall
 *      clock only ends real hangs (sim_wall_margin_s);
 *   3. the data phase: ring, tree or naive, over bounded channels (an
 *      all-gather of a few words was already copied at the rendezvous:
 *      SIM_ALLGATHER_DIRECT_BYTES);
 *   4. with COMM_CHECK_RESULTS, a second rendezvous compares checksums of
 *      the results (after any flip fault), naming the rank that differs.
 * A rank that fails in its own code (comm_abort, or the rank launcher's
 * comm_world_abort) leaves its message as the world's diagnosis, and every
 * collective it never started fails at once: its rendezvous (the ranks
 * waiting there, or in an injected delay before it, wake) and every later
 * one. The collectives it did start complete: they still run (on its
 * progress thread, or on its own in comm_abort), so the others end them with
 * the result, and with the same verdict where every rank judges alike (the
 * replica check). Such a verdict, which every rank reached
 * (comm_fail_shared, comm_agree_failure), is recorded the same way, the same
 * message from every rank, so the diagnosis blames no rank for it.
 */
#ifndef DDP_COMM_SIM_H
#define DDP_COMM_SIM_H

#include "sim/channel.h"
#include "comm/comm_backend.h"
#include "comm/costmodel.h"
#include "sim/faults.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

/* Link buffers: 4 slots of 256 KiB per directed link. NCCL's default is a
 * 4 MiB buffer (DEFAULT_BUFFSIZE, src/init.cc; NCCL_BUFFSIZE changes it)
 * split in NCCL_STEPS = 8 slots (src/include/device.h); we keep
 * fewer, larger slots because a thread hand-off costs far more than a GPU
 * flag write, and 1 MiB per link keeps an 8-rank mesh small. */
#define SIM_SLOTS 4
#define SIM_SLOT_BYTES (256u << 10)

/* The backend's vtable, for lib/backend_table.c. */
extern const struct comm_backend_ops comm_backend_sim;

/* What a rank is doing, as the watchdog reports it. */
enum sim_rank_state {
    SIM_NOT_OPENED, /* has not opened its communicator */
    SIM_RUNNING,    /* in its own code, between collectives */
    SIM_DELAYED,    /* in an injected delay */
    SIM_WAITING,    /* arrived at a collective's rendezvous */
    SIM_MOVING,     /* in a collective's data phase */
    SIM_EXITED,     /* closed its communicator */
    SIM_KILLED,     /* killed by a fault */
};

/* Activity changes a rank keeps for the modelled watchdog: a rank says a
 * few per step (train.c), and a deadline is at most one timeout back. */
#define SIM_ACTIVITY_MARKS 8

struct sim_rank {
    enum sim_rank_state state;
    int arrived;                /* at the current rendezvous */
    struct comm_coll_desc at;   /* the collective it is in */
    struct comm_coll_desc last; /* the last one it completed */
    int has_last;
    struct comm_fingerprint fp;
    uint64_t checksum;          /* of its result, for COMM_CHECK_RESULTS */
    const void *result;
    size_t result_bytes;
    char note[128];             /* the fault behind a KILLED / DELAYED state */
    char activity[160];         /* what it does between collectives (comm_set_activity), "" if unsaid */
    uint64_t arrive_ns;         /* modelled: when it reached the current collective (its issue time, or
                                 * its communicator's previous end if later, plus any injected delay) */
    uint64_t timeout_ns;        /* modelled: its communicator's watchdog timeout ... */
    double timeout_s;           /* ... as configured, for the report */
    const char *phase;          /* the rendezvous it waits at ("start", "result check") */
    uint64_t delay_from_ns, delay_to_ns; /* modelled: its last injected delay (the note says which) */
    struct sim_activity_mark {  /* what it said it was doing, and since when (its modelled clock), so that
                                 * the watchdog tells what it did at a modelled deadline now past */
        uint64_t since_ns;
        char text[160];
    } marks[SIM_ACTIVITY_MARKS];
    unsigned nmarks;            /* marks recorded since open (the last SIM_ACTIVITY_MARKS kept) */
    int ended;                  /* the thread that opened its communicator has ended: it comes no more */
};

struct sim_world {
    struct comm_world_base base; /* first: see comm_backend.h */
    int world;
    int node_size;        /* ranks per node (comm_world_options.node_size; world when one node) */
    double hang_s;        /* comm_world_options.hang_s: the wall-clock safety net, 0 for the default */
    struct fault *faults;
    int nfaults;
    pthread_mutex_t lock;
    pthread_cond_t cond;  /* rendezvous progress, breaks, delays */
    atomic_int broken;    /* set once, by the first failure */
    int aborted;          /* a rank failed in its own code (comm_abort, comm_world_abort) ... */
    uint64_t abort_seq;   /* ... before it started this collective: from it on, every rendezvous fails (w->lock) */
    uint64_t gen;         /* rendezvous generation */
    int count;            /* ranks arrived at this generation */
    int rdv_rc;           /* the last rendezvous's verdict ... */
    char rdv_msg[1024];   /* ... and its message */
    uint64_t rdv_end_ns;  /* ... and, at a collective's start, its modelled end (vclock ns) */
    struct costmodel model; /* what each collective costs in modelled time (comm_world_options.hw) */
    int algo_set;
    enum comm_algo algo;  /* every rank must use the same */
    int wd_fired;         /* the modelled watchdog fired (w->lock) ... */
    int wd_rank;          /* ... on this rank, whose deadline came first ... */
    uint64_t wd_gen;      /* ... at this rendezvous generation */
    struct sim_rank *ranks;
    channel_t *chans;     /* [src * world + dst], initialized on first use */
    unsigned char *chan_ready;
};

/* One queued collective (comm_request_t.impl). */
struct sim_req {
    comm_request_t *req;
    struct sim_req *next;
    int finished;  /* set by the thread that ran it ... */
    int status;    /* ... with this result */
    char msg[1024];
};

/* A rank's communicator state (comm_t.impl). *_start() queues the
 * collective and returns, so that a rank's own thread goes on computing
 * (DDP's backward) while its earlier buckets are all-reduced, as with NCCL's
 * stream; the queue runs in order. Who runs it depends on the clock:
 * - modelled (the simulated device): the rank's own thread, when it waits
 *   for an entry (comm_wait runs the queue up to it), closes or aborts. In
 *   modelled time nothing changes: each collective still starts at its
 *   issue time (or its rank's previous collective's end) and ends when the
 *   cost model says, so it overlaps backward exactly as it would on its own
 *   thread; only the bytes move later on the host, without the two thread
 *   hand-offs a collective on another thread costs (3 to 7 % of the
 *   simulator's CPU at 4 ranks on 2 cores, a quarter of its context
 *   switches);
 * - the wall clock (a real GPU under the thread communicator): a progress
 *   thread, its "communication stream", started with the first queued
 *   collective, runs each as soon as it is queued, since there the time the
 *   bytes move is the time measured. */
struct sim_comm {
    struct sim_world *w;
    comm_t *c;
    uint64_t bytes_sent;     /* through channels, since open (the thread running the queue) */
    int killed;              /* a kill fault fired (the thread running the queue) */
    uint64_t free_ns;        /* modelled: when this rank's last collective ended (the thread running it) */
    int has_progress;        /* the progress thread was started (the wall clock's) */
    pthread_t progress;
    pthread_mutex_t qlock;
    pthread_cond_t qcond;    /* queue grew, an entry finished, or stop */
    struct sim_req *head, *tail;
    int stopping;
};

/* The data phase of one collective on one rank. */
struct sim_exec {
    struct sim_world *w;
    struct sim_comm *sc;
    int rank, world;
    enum comm_algo algo; /* resolved: never DEFAULT */
    const struct comm_coll_desc *d;
    uint64_t deadline_ns; /* wall clock: the safety net for real hangs (sim_wall_margin_s) */
};

/* Runs the data phase of x->d (not barrier) with x->algo. 0, or an ERR_*
 * after breaking the world with a diagnosis (sim_world_fail). */
int sim_algo_run(struct sim_exec *x);

/* All-gathers whose whole result is at most this many bytes skip the ring:
 * the last rank to reach the start rendezvous copies every rank's block into
 * every rank's result (sim_allgather_direct). The replica check's two tiny
 * all-gathers each step would otherwise cost W - 1 thread hand-offs on every
 * rank for a few words; the ring stays the path of real payloads. */
#define SIM_ALLGATHER_DIRECT_BYTES 4096u

/* Whether collective d on `world` ranks is such an all-gather. */
int sim_allgather_is_direct(const struct comm_coll_desc *d, int world);

/* Fills every rank's result of the all-gather under way from every rank's
 * posted block (w->ranks[q].at); runs in the last rank to arrive at the
 * start rendezvous, w->lock held and every other rank waiting there, after
 * the fingerprints agreed. */
void sim_allgather_direct(struct sim_world *w);

/* The channel src -> dst, created on first use. 0 or ERR_NOMEM. */
int sim_channel(struct sim_world *w, int src, int dst, channel_t **out);

/* Records `msg` as the world's diagnosis (first failure wins), breaks the
 * world and wakes every waiting thread. Returns `code` with err_msg() set to
 * msg, so failure sites read `return sim_world_fail(w, ERR_TIMEOUT, ...)`. */
int sim_world_fail(struct sim_world *w, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* What rank r is doing, for diagnoses: "exited (closed its communicator);
 * last completed collective #5 (allreduce sum, 1024 x float32)". Call with
 * w->lock held. */
void sim_rank_story(const struct sim_world *w, int r, char *buf, size_t len);

/* Bytes this rank has sent through the simulator's channels since
 * comm_open (0 for other backends): the ring's 2(W-1)/W x S shows here.
 * Read it when no collective of this rank is in flight. */
uint64_t comm_sim_bytes_sent(const comm_t *c);

#endif
