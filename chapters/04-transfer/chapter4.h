/* chapter4: what the parts of chapter 4's program share. Calls go one way:
 * main.c -> the sections -> common.c (bench.c also runs loop.c's loop and
 * sweep.c's copy trains; loop.c runs allreduce.c's all-reduce, whose names
 * main.c parses).
 *
 * main.c     parses the flags and dispatches to the sections below
 * common.c   what the sections share: the device, the gate, the plots
 * sweep.c    copy rate against size for every kind of host memory
 * pinning.c  what page-locking costs, per batch and with a pool
 * loop.c     a training loop: pageable, PyTorch's pin copy, a pinned ring; one
 *            buffer or two; and the overlap timeline
 * allreduce.c  --algo: the loop's gradient all-reduce on this GPU's host link
 * race.c     --demo=race: a loader slot handed back too early, caught
 * bench.c    --bench: the benchmarks' verdicts
 */
#ifndef DDP_CHAPTER4_H
#define DDP_CHAPTER4_H

#include "base/plot.h"
#include "comm/costmodel.h"
#include "transfer/device.h"
#include "transfer/link.h"
#include "transfer/pinned_pool.h"

#include <stdint.h>

#define CH4_OUT_DIR PLOT_OUT_ROOT "/chapter-4"

struct ch4_opts {
    const char *backend;        /* NULL: cuda when a GPU is found, else sim */
    struct link_profile link;   /* the sweep's link (sim) */
    struct link_profile loop_link; /* the loop's link (sim) */
    struct link_profile own_loop_link; /* ... were it the GPU's alone (--topology): the default compute */
    int node_gpus, host_links;  /* --topology's GPUs a node and --host-links; 0: not given */
    int nodes;                  /* --topology's nodes; 0: not given */
    int allreduce;              /* --algo given: each loop step ends with the gradients' all-reduce */
    enum comm_algo algo;        /* --algo's */
    int nvlink;                 /* the node's GPUs talk over NVLink (--hw's profile), not over PCIe */
    uint64_t grad_bytes;        /* --grad-bytes; 0: as large as a batch */
    uint64_t min_bytes, max_bytes; /* the sweep's sizes, times 4 per row */
    uint64_t pool_bytes;        /* the pinned pool's limit */
    const char *data;           /* the loop's dataset; NULL: dataset_open_default() */
    uint64_t batch, steps, warmup, workers;
    double compute_s;           /* the loop's compute per step; < 0: as long as the batch's copy */
    const char *out_dir;
};

/* Opens the device the options ask for, on `link` when it is the simulator. */
int ch4_device_open(const struct ch4_opts *o, const struct link_profile *link, device_t **out);

/* Holds stream s (a host function in stream order that waits) until
 * ch4_gate_release(): work queued behind it meanwhile then runs back to back,
 * so a measurement sees what the device does, not how fast this host issues
 * work (the simulator's pinned copies cost a system call each to issue, for
 * the detector). One gate at a time. */
int ch4_gate_hold(device_stream_t *s);
void ch4_gate_release(void);

/* A timed train of host-to-device copies (sweep.c): host memory of one kind
 * (pinned from `pool` when given, else from the device), a device buffer, a
 * stream and two events. */
struct ch4_train {
    device_t *dev;
    pinned_pool_t *pool;
    enum device_host_kind kind;
    void *host, *target;
    device_stream_t *s;
    device_event_t *e0, *e1;
};
int ch4_train_open(device_t *dev, pinned_pool_t *pool, enum device_host_kind kind, uint64_t bytes,
                   struct ch4_train *t);
void ch4_train_close(struct ch4_train *t);

/* Device seconds of n copies of `bytes` (each followed by one of `tail`
 * bytes, when not 0: a batch's labels), the host waiting for each (sync) or
 * all of them queued behind a gate first (async). */
int ch4_train_time(struct ch4_train *t, uint64_t bytes, uint64_t tail, uint64_t n, int async, double *seconds);

/* Renders gnuplot `script` over the CSV at csv_path into out_path.png and
 * .svg, giving it `title` (what the figure shows; NULL: none, see
 * plot_render_titled()), and says so; without gnuplot, says that instead and
 * returns 0. */
int ch4_plot(const char *script, const char *csv_path, const char *out_path, const char *title);

/* The sections of the lesson. Each prints its table and writes its CSV (and
 * plot) under o->out_dir; 0 or an error with err_msg(). */
int ch4_sweep(const struct ch4_opts *o);
int ch4_pinning(const struct ch4_opts *o);
int ch4_loop(const struct ch4_opts *o);
/* Opens and closes the loop's dataset and each of its rigs (the lesson's
 * rows, or with `bench` the one --bench times): a run refuses a bad --data or
 * a batch the pinned pool cannot hold before any section runs. 0 or an error. */
int ch4_loop_check(const struct ch4_opts *o, int bench);

/* --demo=race: 0 when the detector caught the early release and the fixed
 * loop ran clean. */
int ch4_demo_race(const struct ch4_opts *o);

/* --bench: prints the verdict lines; 0 when every benchmark ran (whatever
 * its verdict). */
int ch4_bench(const struct ch4_opts *o);

/* The loop of loop.c, for the bench: one configuration, its steady state. */
struct ch4_loop_result {
    double step_s;      /* device time per step (the compute stream's) */
    double host_step_s; /* the host's time per step: modelled on the simulator, the wall clock's on a GPU */
    double wait_s;      /* data-wait per step */
    double dma_s;       /* modelled (sim) or measured (cuda) copy engine time per batch */
    double host_copy_s; /* host memcpy per batch on the way (the driver's staging or the pin copy) */
    double compute_s;   /* the compute per step */
    double allreduce_s; /* the all-reduce's copies over the host link alone, modelled (--algo; else 0) */
    double allreduce_in_s; /* ... of them the ones into the GPU, on the batches' copy engine */
    double copies;      /* passes over each byte of a batch, counted */
    double hidden;      /* the share of the copy the step did not pay for */
    uint64_t batch_bytes;
};
/* --algo (allreduce.c): the gradients' all-reduce at the end of each loop
 * step, as the bytes of it that cross this GPU's host link. */
struct ch4_allreduce {
    device_t *dev;                      /* NULL: no --algo */
    uint64_t bytes;                     /* the gradients */
    uint64_t piece;                     /* the most one copy moves: NCCL's buffer, or the gradients */
    uint64_t in_bytes, out_bytes;       /* a step's traffic into the GPU and out of it */
    double in_s, out_s;                 /* their modelled seconds, each on its own */
    void *grads, *reduced;              /* device: what backward writes, what the optimizer reads */
    void *send, *recv;                  /* pinned host memory the traffic passes through */
    device_stream_t *to_host, *to_gpu;  /* a stream a direction */
    device_event_t *computed, *sent, *received;
};
/* --algo's names (NULL-terminated) and the algorithm the i-th names. */
const char *const *ch4_algo_choices(void);
enum comm_algo ch4_algo_of(int choice);
/* Opens what the all-reduce needs on dev (nothing without --algo: a->dev
 * stays NULL), its gradients --grad-bytes or else batch_bytes. 0 or an error. */
int ch4_allreduce_open(const struct ch4_opts *o, device_t *dev, uint64_t batch_bytes, struct ch4_allreduce *a);
void ch4_allreduce_close(struct ch4_allreduce *a);
/* The simulator copies the all-reduce's bytes for real: ERR_ARG naming the
 * flags when a step's would pass CH4_ALLREDUCE_MAX_STEP_BYTES either way
 * (naive on 64 GPUs moves 63 times the gradients), 0 otherwise. */
#define CH4_ALLREDUCE_MAX_STEP_BYTES (4ull << 30)
int ch4_allreduce_check(const struct ch4_opts *o, uint64_t batch_bytes);
/* Says what a step's all-reduce moves across this GPU's host link, and why. */
void ch4_allreduce_describe(const struct ch4_opts *o, uint64_t batch_bytes);
/* Queues a step's all-reduce behind what `compute` has queued, and makes
 * `compute` wait for it (the optimizer reads its result). 0 or an error. */
int ch4_allreduce_step(struct ch4_allreduce *a, device_stream_t *compute, int64_t batch);

enum ch4_ring { CH4_PAGEABLE, CH4_PIN_COPY, CH4_PINNED };
int ch4_loop_run(const struct ch4_opts *o, enum ch4_ring ring, uint32_t depth, struct ch4_loop_result *out);

#endif
