/* ranks: start, join and report W rank threads (see ranks.h). */
#include "sim/ranks.h"

#include "base/error.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct ranks {
    int (*fn)(struct rank_ctx *ctx);
    atomic_int aborted;
    pthread_mutex_t lock; /* guards the first failure below */
    int first_rank, first_code;
    char first_msg[1024];
};

struct rank_thread {
    pthread_t thread;
    struct rank_ctx ctx;
};

void ranks_message(int rank, const char *msg, char *out, size_t len)
{
    char who[32];
    snprintf(who, sizeof who, "rank %d: ", rank);
    snprintf(out, len, "%s%s", strncmp(msg, who, strlen(who)) == 0 ? "" : who, msg);
}

void ranks_abort(ranks_t *group) { atomic_store(&group->aborted, 1); }

int ranks_aborted(const ranks_t *group) { return atomic_load(&((ranks_t *)group)->aborted); }

/* A rank thread, and every thread it starts (they inherit the policy: its
 * loader workers, its device's engines, its communicator's progress thread
 * where it has one), runs under SCHED_BATCH: a thread it wakes does not
 * preempt it, so a rank handing a ring slot or a batch to another goes on to
 * its next piece of work instead of switching away at once. With W ranks'
 * threads on fewer cores, measured at 4 ranks on 2 cores of an AMD EPYC: a
 * third fewer context switches, 4 % less CPU a step (chapter 6's
 * --bench=host). No privilege is needed; where it is refused anyway, the
 * thread keeps the normal policy. */
static void ranks_batch_policy(void)
{
#if defined(SCHED_BATCH)
    struct sched_param none = {.sched_priority = 0};
    (void)pthread_setschedparam(pthread_self(), SCHED_BATCH, &none);
#endif
}

static void *ranks_main(void *arg)
{
    struct rank_thread *t = arg;
    ranks_t *g = t->ctx.group;
    err_clear();
    ranks_batch_policy();
    int rc = g->fn(&t->ctx);
    if (rc < 0) {
        pthread_mutex_lock(&g->lock);
        if (g->first_rank < 0) {
            g->first_rank = t->ctx.rank;
            g->first_code = rc;
            snprintf(g->first_msg, sizeof g->first_msg, "%s", err_msg());
        }
        pthread_mutex_unlock(&g->lock);
        ranks_abort(g);
    }
    return NULL;
}

int ranks_run(int world, int (*fn)(struct rank_ctx *ctx), void *shared, void *locals, size_t local_size,
              struct ranks_outcome *outcome)
{
    if (outcome)
        *outcome = (struct ranks_outcome){.rank = -1, .code = 0};
    if (world < 1)
        return err_set(ERR_ARG, "ranks: world size must be at least 1, got %d", world);
    ranks_t group = {.fn = fn, .first_rank = -1};
    atomic_init(&group.aborted, 0);
    pthread_mutex_init(&group.lock, NULL);
    struct rank_thread *threads = calloc((size_t)world, sizeof *threads);
    if (!threads)
        return err_set(ERR_NOMEM, "ranks: cannot allocate %d rank threads", world);

    int started = 0, rc = 0;
    for (; started < world; started++) {
        struct rank_thread *t = &threads[started];
        t->ctx = (struct rank_ctx){
            .rank = started,
            .world = world,
            .shared = shared,
            .local = locals ? (char *)locals + (size_t)started * local_size : NULL,
            .group = &group,
        };
        if (pthread_create(&t->thread, NULL, ranks_main, t) != 0) {
            ranks_abort(&group);
            rc = err_set(ERR_NOMEM, "ranks: cannot start the thread of rank %d (of %d)", started, world);
            break;
        }
    }
    for (int r = 0; r < started; r++)
        pthread_join(threads[r].thread, NULL);
    free(threads);
    pthread_mutex_destroy(&group.lock);

    if (group.first_rank >= 0) {
        char msg[sizeof group.first_msg + 32];
        ranks_message(group.first_rank, group.first_msg, msg, sizeof msg);
        rc = err_set(group.first_code, "%s", msg);
        if (outcome)
            *outcome = (struct ranks_outcome){.rank = group.first_rank, .code = group.first_code};
    }
    return rc;
}
