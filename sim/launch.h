/* launch: run one function on every rank of a job, whoever started the job.
 *
 * Where it sits: at the top of every chapter program that has ranks, between
 * its flags and its per-rank code. A data-parallel program is written once,
 * as "what rank r does", and runs in two worlds:
 *
 *   threads    this process is the whole job: launch_run() starts `world`
 *              threads, rank 0 .. world-1 (sim/ranks.h), and, when the job
 *              has a communicator, the comm_world_t they all attach to.
 *              This is the simulator (backend "sim", or none at all), and
 *              NCCL with a thread per GPU.
 *   processes  mpirun or torchrun started this process as one rank of the
 *              job: launch_run() calls the function once, in this thread.
 *              Rank and world come from the launcher (its environment, then
 *              the communicator); `world` in the config is not used.
 *
 * Which world a run is in is the communicator backend's decision
 * (comm_launch_resolve: "sim" -> threads, "mpi" -> processes, "nccl" -> by
 * the environment); a job without a communicator (config.backend NULL) is
 * always threads.
 *
 * Who prints. Every rank runs the same code. In the thread world the ranks
 * share this process's stdout, in the process world the launcher merges every
 * process's stdout: either way one rank should print the job's report. That
 * rank is rank 0: launch_prints(r) inside a rank function, launch_leader()
 * outside one (before or after launch_run(), in main).
 *
 * Errors. A rank function returns 0 or a negative ERR_* with err_set(), as a
 * rank process would exit. In the thread world a rank that returns an error
 * breaks the communicator world at once (comm_world_abort), so the ranks
 * still waiting for it fail now, with its message, not at their watchdog; in
 * the process world the rank function calls comm_abort() itself before it
 * closes its communicator. launch_run() returns the first failure with a
 * message the user can act on: the communicator world's diagnosis when it
 * has one (the simulator's watchdog names the late rank and what every rank
 * was doing; a failed rank's own message), else "rank R: <that rank's
 * message>".
 *
 * Read launch_run() first, then struct launch_rank.
 *
 *     static int train_rank(struct launch_rank *r) {
 *         comm_t *c;
 *         int rc = launch_comm_open(r, NULL, &c);   // rank r's communicator
 *         ...                                       // every rank's work
 *         if (launch_prints(r)) printf(...);        // rank 0 reports
 *         comm_close(c);
 *         return rc;
 *     }
 *     struct launch_config cfg = {.backend = "sim", .world = 4, .shared = &job};
 *     if (launch_run(&cfg, train_rank) < 0) fprintf(stderr, "%s\n", err_msg());
 */
#ifndef DDP_LAUNCH_H
#define DDP_LAUNCH_H

#include "comm/comm.h"
#include "sim/ranks.h"

struct launch_config {
    const char *backend; /* communicator backend ("sim", "mpi", "nccl"), or NULL: ranks without a
                          * communicator (always threads; launch_comm_open() refuses) */
    int world;           /* threads: how many ranks (1 .. LAUNCH_MAX_THREADS); processes: unused */
    const char *faults;  /* threads with "sim": faults to inject (sim/faults.h grammar), NULL for none */
    void *shared;        /* handed to every rank as launch_rank.shared */
    int node_size;       /* threads: ranks per node of the modelled topology
                          * (comm_world_options.node_size); 0 = one node */
    const struct hw_profile *hw; /* threads with "sim": the profile the collectives' modelled time comes from
                          * (comm_world_options.hw); NULL = the default */
};

/* Thread ranks one process may start: far more than a machine has cores, far
 * fewer than a typo ("--world=40000") would ask for. */
#define LAUNCH_MAX_THREADS 1024
_Static_assert(LAUNCH_MAX_THREADS == COMM_TOPOLOGY_MAX_RANKS, "a topology holds what the launcher can start");

/* What every rank function gets. */
struct launch_rank {
    int rank;                 /* this rank: 0 .. world-1; under a launcher, from its environment
                               * (OMPI_COMM_WORLD_RANK, PMI_RANK or RANK), -1 when it set none */
    int world;                /* the job's size; under a launcher from its environment, 0 when unset */
    int threads;              /* 1: the ranks are threads of this process; 0: one process per rank */
    void *shared;             /* launch_config.shared */
    const struct launch_config *cfg;
    comm_world_t *comm_world; /* threads with a backend: what rank communicators attach to; else NULL */
    ranks_t *group;           /* threads: ranks_aborted(group) says another rank failed; else NULL */
};

/* Runs fn on every rank of the job (see the top of this file) and returns 0
 * when every rank returned 0, else the first failure (its code; err_msg() as
 * described under Errors). Before starting anything: ERR_ARG for an unknown
 * backend, a thread world outside 1 .. LAUNCH_MAX_THREADS, or a process world
 * whose launcher variables launch_launcher_world() refuses; ERR_UNSUPPORTED
 * for a backend this build lacks (err_msg() says what to install). */
int launch_run(const struct launch_config *cfg, int (*fn)(struct launch_rank *r));

/* Whether a run with `backend` (NULL: none) has its ranks as threads of this
 * process (1) or as processes a launcher started (0); negative for an unknown
 * or unbuilt backend, as launch_run() would say. A program checks it before
 * running, e.g. to refuse --world=W where the launcher sets the world. */
int launch_threads(const char *backend);

/* Opens rank r's communicator on the run's backend: rank and shared world
 * from r, everything else (algorithm, checks, timeout, device) from *base, or
 * the defaults of comm_config_default() when base is NULL. Collective: every
 * rank must call it. The result of comm_open(); ERR_STATE when the run has no
 * backend; ERR_ARG when a launcher started this process into a job of W but
 * the communicator sees another world (MPI under torchrun: a world of 1 in
 * every process). */
int launch_comm_open(const struct launch_rank *r, const struct comm_config *base, comm_t **out);

/* Inside a rank function: non-zero on the rank that prints the job's report
 * (rank 0). */
int launch_prints(const struct launch_rank *r);

/* Outside rank functions: non-zero in the process that prints, i.e. the only
 * process of a thread job, or the process of rank 0 under mpirun/torchrun
 * (non-zero too where launch_launcher_world() refuses the variables). */
int launch_leader(void);

/* The launcher that started this process, from its variables: "mpirun",
 * "a PMI launcher (mpiexec, srun)", "torchrun"; NULL when none did. For a
 * report that says what runs. */
const char *launch_launcher_name(void);

/* Outside rank functions: the size of the job a launcher (mpirun, srun,
 * torchrun) started this process into, from its variables; 0 when none did.
 * A program that runs its ranks as threads refuses to run inside such a job
 * of more than one process: each would run the whole job. ERR_ARG, naming
 * the variables, when they cannot say: a rank without its world or the
 * reverse, not a number from 0 to 2^30, a rank not below its world, or two
 * launchers' variables for two places (torchrun started by mpirun or srun).
 * A program checks this before it runs, as it checks its flags. */
int launch_launcher_world(void);

#endif
