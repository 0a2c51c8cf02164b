/* chapter5: what the chapter-5 program's files share. main.c parses the
 * flags and calls the others; sweep.c is the nccl-tests-style benchmark;
 * demos.c the fault stories; links.c which link is busy when in one
 * modelled all-reduce (--links); calibrate.c measures the cost model's
 * parameters and the memory bound (which runs a sweep); launch_check.c the
 * torchrun rendezvous check. Calls go one way: main.c -> the others,
 * calibrate.c -> sweep.c; the ranks are started by sim/launch.h. */
#ifndef DDP_CHAPTER5_H
#define DDP_CHAPTER5_H

#include "comm/comm.h"
#include "comm/costmodel.h"
#include "transfer/hw.h"

#include <stdint.h>
#include <stdio.h>

struct ch5_opts {
    const char *backend;
    int world;
    int node_size;            /* --topology=NODESxGPUS: GPUS, ranks per node; 0 = one node */
    uint64_t min_bytes, max_bytes, step_factor;
    enum comm_algo algos[4];
    int nalgos;
    enum comm_op op;
    int iters, warmup;
    int check;                /* --check: the simulator's cross-rank result check */
    double timeout_s;
    const char *fault;        /* --fault=SPEC */
    struct costmodel model;
    int alpha_given;          /* --alpha-us given: do not fit it */
    const struct hw_profile *hw; /* --hw: the model priced from this GPU system, not measured; NULL: none */
    const char *csv_path;     /* the sweep's CSV, NULL = none */
    int quiet;                /* the sweep prints nothing (bench.sh's repeated trials) */
    int wall_clock;           /* time the sweep with the wall clock even on the simulator
                               * (--memory-bound: this host's memory traffic is the point) */
};

/* What every rank function gets as launch_rank.shared: the run's options and
 * the communicator settings of its ranks (backend and rank are the
 * launcher's), first in each job struct of sweep.c and demos.c. */
struct ch5_job {
    const struct ch5_opts *opt;
    struct comm_config comm; /* algo, check, timeout: for launch_comm_open() */
};

/* --launch-check (launch_check.c): this process is one rank started
 * torchrun-style; meet rank 0 over the TCP rendezvous within timeout_s and
 * print the token it sent. ifname (--ifname, NULL: every interface): the
 * one interface rank 0 listens on. 0 or ERR_*. */
int ch5_launch_check(double timeout_s, const char *ifname);

/* The nccl-tests table for each algorithm in opt (sweep.c). 0 or ERR_*;
 * *wrong_total counts wrong elements over the whole run; *last_time_s (may
 * be NULL) gets the last row's out-of-place time, averaged over ranks. */
int ch5_sweep(struct ch5_opts *opt, uint64_t *wrong_total, double *last_time_s);

/* Fills opt->model's beta, gamma and cores from this machine (calibrate.c);
 * alpha is fitted per run by the sweep unless given. Prints what it did.
 * With opt->hw, measures nothing and says where the model's figures came from. */
void ch5_calibrate(struct ch5_opts *opt, FILE *out);

/* Memory-bandwidth bound of the sim ring all-reduce (bench.sh): measures
 * memcpy, runs the all-reduce, prints both and the ratio (calibrate.c). */
int ch5_memory_bound(struct ch5_opts *opt);

/* --links=SIZE (links.c): one all-reduce of `bytes` on opt's modelled
 * topology (opt->model priced from opt->hw, which is set), for each of opt->algos (ring or hier): the phases and how busy
 * each link class is in them, printed; the spans written to csv_path and
 * drawn at plot_path (PNG and SVG; without gnuplot, the CSV alone). 0 or
 * ERR_* (ERR_ARG for tree or naive, or a world of one rank). */
int ch5_links(const struct ch5_opts *opt, uint64_t bytes, const char *csv_path, const char *plot_path);

/* The fault demos (demos.c). `name` is a demo or "all"; `lesson` = 1 when
 * run as part of the default lesson: an expected failure is then the lesson
 * and counts as success. Returns the number of unexpected outcomes, or
 * ERR_ARG for an unknown name. */
int ch5_demos(const struct ch5_opts *opt, const char *name, int lesson);

/* The names --demo takes, "all" last, into names[0 .. max-1], NULL-terminated. */
void ch5_demo_names(const char **names, int max);

/* --fault=SPEC on the training-loop workload. 0 when it survived. */
int ch5_fault_run(const struct ch5_opts *opt);

#endif
