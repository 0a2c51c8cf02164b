/* chapter6: what the parts of chapter 6's program share (see main.c).
 *
 * main.c     the flags: parse, validate, run
 * run.c      a training run on every rank (sim/launch.h + lib/ddp/train.h): the
 *            per-epoch table, the time breakdown, the trace and the Gantt chart
 * demos.c    --demo=NAME: the failure stories, each shown failing, then fixed
 * bench.c    --bench=accuracy|overhead|scaling|host: verdicts against the
 *            targets, the scaling table and the simulator's own cost
 * bench_model.c  --bench=model: one rank's step on one thread (bench.sh sets
 *            PyTorch beside it)
 *
 * The training loop itself is lib/ddp/train.c; this program teaches and
 * measures.
 */
#ifndef DDP_CHAPTER6_H
#define DDP_CHAPTER6_H

#include "base/plot.h"
#include "comm/comm.h"
#include "dataset/dataset.h"
#include "ddp/train.h"

#include <stdint.h>

#define CH6_PROG "chapter-6"
#define CH6_OUT_DIR PLOT_OUT_ROOT "/chapter-6"
#define CH6_GANTT_STEPS 4 /* steps of every rank the Gantt chart shows */

/* A run: the training configuration and how to launch and report it. */
struct ch6_run {
    struct train_config train;
    const char *backend;        /* communicator: "sim", "mpi" */
    int world;                  /* sim: rank threads */
    double timeout_s;           /* collective watchdog, 0: the communicator's default */
    const char *faults;         /* sim: faults to inject (sim/faults.h), NULL: none */
    const struct hw_profile *hw; /* sim: the GPU system whose links time the collectives (--hw), NULL: the
                                 * simulated device's default */
    int node_size;              /* sim: ranks per node of the modelled cluster (--topology), 0: one node */
    enum comm_algo algo;        /* sim: the all-reduce's algorithm (--algo), COMM_ALGO_DEFAULT: the ring */
    const char *trace_path;     /* --trace=FILE, NULL: none */
    const char *out_dir;        /* where the Gantt chart and the epochs' CSV go; NULL: nowhere */
    const char *gantt_name;     /* the Gantt chart's name in out_dir ("gantt": gantt.csv, .png, .svg); NULL: none */
    const char *gantt_what;     /* which run its title names; NULL: the run's ranks, batch and overlap */
    const char *epochs_name;    /* the per-epoch CSV's name in out_dir ("epochs"); NULL: none */
    int quiet;                  /* print nothing per epoch (demos, benches) */
    void (*on_epoch)(void *user, const struct train_epoch *e); /* also told each epoch (rank 0), may be NULL */
    void *on_epoch_user;
    const char *data_note;      /* which datasets, for the header */
};

/* What a run left, read on rank 0 after it. */
struct ch6_outcome {
    struct train_result result;
    double wall_s;
};

/* Opens the training set (`data`, or Fashion-MNIST, or its synthetic
 * stand-in) and the test set (`test`: a path, "none", or NULL for the one
 * beside the training set). *note says which, for the header. */
int ch6_open_data(const char *data, const char *test, dataset_t **train, dataset_t **test_set, char *note,
                  size_t note_len);

/* Runs `run` on every rank and fills *out (rank 0's view). Prints the
 * per-epoch table unless run->quiet; writes the trace and the Gantt chart
 * when asked. 0, or an ERR_* with err_msg() the job's diagnosis. */
int ch6_train(const struct ch6_run *run, struct ch6_outcome *out);

/* The defaults of the training recipe: lr, schedule, epochs, batch,
 * augmentation (see main.c's --help). */
void ch6_recipe(struct train_config *c);

/* The demos (demos.c): "all" or one name. 0 when each failed as it should
 * and its fixes ran; 1 otherwise. */
int ch6_demo(const struct ch6_run *base, const char *name);
extern const char *const ch6_demo_names[]; /* NULL-terminated, "all" last */

/* The benchmarks (bench.c): "accuracy", "overhead", "scaling", "host" or
 * "model". 0 when they ran. */
int ch6_bench(const struct ch6_run *base, const char *name, int quick);
extern const char *const ch6_bench_names[];

/* "12.3 ms", "845 us" into buf. */
const char *ch6_ms(double seconds, char *buf, size_t len);

#endif
