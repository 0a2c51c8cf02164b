/* launch: one rank function on every rank, as threads or as this process
 * (see launch.h). */
#include "sim/launch.h"

#include "base/cli.h"
#include "base/error.h"

#include <stdlib.h>
#include <string.h>

/* The launchers' own variables, most specific first: Open MPI's, PMI's
 * (MPICH, Slurm), torchrun's. Each row names this process's rank, the job's
 * size, and the launcher as a report says it. */
static const char *const launch_env[][3] = {
    {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "mpirun"},
    {"PMI_RANK", "PMI_SIZE", "a PMI launcher (mpiexec, srun)"},
    {"RANK", "WORLD_SIZE", "torchrun"},
};

/* The launcher variable `name` into *out: 0 when set, 1 when unset or
 * empty, ERR_ARG naming it when it is not a number from lo to 2^30. */
static int launch_env_int(const char *name, uint64_t lo, int *out)
{
    const char *v = getenv(name);
    if (!v || !*v)
        return 1;
    uint64_t n;
    int rc = cli_parse_env(name, v, lo, 1 << 30, &n);
    if (rc == 0)
        *out = (int)n;
    return rc;
}

/* This process's rank and world as its launcher set them, and the row of
 * launch_env that says so: 1, or 0 when no launcher's variable is set. A
 * launcher sets both of its variables, a rank below the world, and one
 * place for the process; anything else is ERR_ARG naming the variables,
 * never a guess: a process that took a stray RANK=1 for "not rank 0" would
 * leave its report unwritten, one that took the wrong one of two launchers
 * (torchrun started by mpirun) would run a job of the wrong size. */
static int launch_env_place(int *rank, int *world, const char *const **row)
{
    *rank = -1;
    *world = 0;
    *row = NULL;
    for (size_t i = 0; i < sizeof launch_env / sizeof launch_env[0]; i++) {
        const char *const *env = launch_env[i];
        int r = -1, w = 0, unset_r = launch_env_int(env[0], 0, &r), unset_w = launch_env_int(env[1], 1, &w);
        if (unset_r < 0 || unset_w < 0)
            return err_wrap(ERR_ARG, "%s's variables", env[2]);
        if (unset_r && unset_w)
            continue;
        if (unset_r || unset_w)
            return err_set(ERR_ARG, "%s=%s is set but %s is not (%s sets both)", env[unset_r ? 1 : 0],
                           getenv(env[unset_r ? 1 : 0]), env[unset_r ? 0 : 1], env[2]);
        if (r >= w)
            return err_set(ERR_ARG, "%s=%d is not below %s=%d", env[0], r, env[1], w);
        if (*row && (r != *rank || w != *world))
            return err_set(ERR_ARG, "%s=%d %s=%d (%s) and %s=%d %s=%d (%s) disagree: one of them did not start "
                           "this process; unset its variables", (*row)[0], *rank, (*row)[1], *world, (*row)[2],
                           env[0], r, env[1], w, env[2]);
        if (!*row) {
            *rank = r;
            *world = w;
            *row = env;
        }
    }
    return *row != NULL;
}

const char *launch_launcher_name(void)
{
    int rank, world;
    const char *const *row;
    return launch_env_place(&rank, &world, &row) > 0 ? row[2] : NULL;
}

int launch_leader(void)
{
    int rank, world;
    const char *const *row;
    return launch_env_place(&rank, &world, &row) > 0 ? rank == 0 : 1;
}

int launch_launcher_world(void)
{
    int rank, world;
    const char *const *row;
    int rc = launch_env_place(&rank, &world, &row);
    return rc < 0 ? rc : world;
}

int launch_prints(const struct launch_rank *r)
{
    return r->threads ? r->rank == 0 : launch_leader();
}

int launch_threads(const char *backend)
{
    if (!backend)
        return 1;
    enum comm_launch mode;
    int rc = comm_launch_resolve(backend, COMM_LAUNCH_AUTO, &mode);
    return rc < 0 ? rc : mode == COMM_LAUNCH_THREADS;
}

/* The thread world: each thread turns its rank_ctx into a launch_rank. */
struct launch_threads_job {
    const struct launch_config *cfg;
    int (*fn)(struct launch_rank *r);
    comm_world_t *comm_world;
};

static int launch_thread_main(struct rank_ctx *ctx)
{
    const struct launch_threads_job *job = ctx->shared;
    struct launch_rank r = {
        .rank = ctx->rank,
        .world = ctx->world,
        .threads = 1,
        .shared = job->cfg->shared,
        .cfg = job->cfg,
        .comm_world = job->comm_world,
        .group = ctx->group,
    };
    int rc = job->fn(&r);
    if (rc < 0 && job->comm_world) { /* the ranks still waiting for this one learn now, not at their watchdog */
        char why[1100];
        ranks_message(ctx->rank, err_msg(), why, sizeof why);
        comm_world_abort(job->comm_world, ctx->rank, why);
    }
    return rc;
}

int launch_run(const struct launch_config *cfg, int (*fn)(struct launch_rank *r))
{
    int threads = launch_threads(cfg->backend);
    if (threads < 0)
        return threads;
    if (!threads) { /* mpirun / torchrun started one process per rank: this is one of them */
        struct launch_rank r = {.threads = 0, .shared = cfg->shared, .cfg = cfg};
        const char *const *row;
        int rc = launch_env_place(&r.rank, &r.world, &row);
        return rc < 0 ? rc : fn(&r);
    }
    if (cfg->world < 1 || cfg->world > LAUNCH_MAX_THREADS)
        return err_set(ERR_ARG, "launch: a world of %d rank threads (1 .. %d)", cfg->world, LAUNCH_MAX_THREADS);
    struct launch_threads_job job = {.cfg = cfg, .fn = fn};
    int rc;
    if (cfg->backend) {
        struct comm_world_options wopt = {.world = cfg->world, .faults = cfg->faults, .node_size = cfg->node_size,
                                          .hw = cfg->hw};
        if ((rc = comm_world_create(cfg->backend, &wopt, &job.comm_world)) < 0)
            return rc;
    } else if (cfg->faults) {
        return err_set(ERR_ARG, "launch: faults need a communicator to fire in (no backend given)");
    }
    rc = ranks_run(cfg->world, launch_thread_main, &job, NULL, 0, NULL);
    if (rc < 0 && job.comm_world && *comm_world_diagnosis(job.comm_world)) /* the one report that explains all */
        err_set(rc, "%s", comm_world_diagnosis(job.comm_world));
    comm_world_destroy(job.comm_world);
    return rc;
}

int launch_comm_open(const struct launch_rank *r, const struct comm_config *base, comm_t **out)
{
    *out = NULL;
    if (!r->cfg->backend)
        return err_set(ERR_STATE, "launch: rank %d: this run has no communicator backend", r->rank);
    struct comm_config cfg;
    if (base)
        cfg = *base;
    else
        comm_config_default(&cfg);
    cfg.backend = r->cfg->backend;
    cfg.launch = COMM_LAUNCH_AUTO;
    cfg.shared = r->comm_world;
    cfg.rank = r->threads ? r->rank : -1; /* under a launcher the backend asks it */
    cfg.world = r->threads ? r->world : 0;
    int rc = comm_open(&cfg, out);
    /* The launcher's job and the communicator's must be one: MPI started by
     * torchrun is a world of 1 in every process, and each would train alone
     * while its report spoke for the job. */
    int got = rc == 0 ? comm_world(*out) : 0;
    if (rc == 0 && !r->threads && r->world > 0 && got != r->world) {
        comm_close(*out);
        *out = NULL;
        return err_set(ERR_ARG, "%s started this process as one of %d, but its %s communicator sees a world of %d, "
                                "so each process would run a job of its own: start MPI jobs with mpirun (torchrun's "
                                "processes meet over TCP, which only the nccl backend does)", launch_launcher_name(),
                       r->world, cfg.backend, got);
    }
    return rc;
}
