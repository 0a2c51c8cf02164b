/* ranks: the simulator's base. W ranks as threads of one process.
 *
 * Where it sits: under every simulated chapter. The partition check
 * (sim/partition.h) runs one DistributedSampler per rank thread; the communicator
 * (sim/comm_sim.c) and the rank launcher (sim/launch.h) build on the same
 * group. A rank's
 * function returns 0 or a negative ERR_* with err_msg() set, exactly like a
 * real rank process would exit; ranks_run() carries the first failure out,
 * naming the rank that raised it, so "rank 2: sampler: ..." reaches the user.
 */
#ifndef DDP_RANKS_H
#define DDP_RANKS_H

#include <stddef.h>

typedef struct ranks ranks_t;

struct rank_ctx {
    int rank;       /* 0 .. world-1 */
    int world;      /* number of ranks */
    void *shared;   /* the one object every rank was given */
    void *local;    /* this rank's own slot of the `locals` array, or NULL */
    ranks_t *group; /* for ranks_abort() / ranks_aborted() */
};

struct ranks_outcome {
    int rank; /* the rank whose failure came first, -1 when all succeeded */
    int code; /* its ERR_* code, 0 when all succeeded */
};

/* Runs fn on `world` threads (rank 0 .. world-1) and joins them. `locals`, when
 * not NULL, is an array of `world` objects of `local_size` bytes each; rank r
 * gets the r-th. Returns 0 when every rank returned 0; otherwise the first
 * failing rank's code, with err_msg() = "rank R: <that rank's message>" in the
 * caller's thread and *outcome (may be NULL) naming it. ERR_ARG for world < 1. */
int ranks_run(int world, int (*fn)(struct rank_ctx *ctx), void *shared, void *locals, size_t local_size,
              struct ranks_outcome *outcome);

/* "rank R: <msg>" into out, or msg alone when it names rank R already
 * ("rank 2: sampler: ..."): how a rank's failure is told outside it. */
void ranks_message(int rank, const char *msg, char *out, size_t len);

/* Marks the group failed from inside a rank (also done automatically when a
 * rank's fn returns an error), so the others can stop instead of waiting. */
void ranks_abort(ranks_t *group);

/* Non-zero once any rank has failed or called ranks_abort(). */
int ranks_aborted(const ranks_t *group);

#endif
