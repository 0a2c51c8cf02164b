/* sweep: the benchmark table of chapter 5, in the layout of nccl-tests'
 * all_reduce_perf (NVIDIA/nccl-tests, src/common.cu: the size, count, type,
 * redop, root columns, then time / algbw / busbw / #wrong out of place and in
 * place, then "# Out of bounds values" and a "# Avg bus bandwidth" line
 * averaging every busbw printed), so our rows read like the ones engineers already know. Two
 * columns are ours, at the end: the cost model's time and bus bandwidth.
 *
 * Times are averaged over ranks, as nccl-tests does by default (-a 1);
 * algbw = size / time in GB/s (1e9 bytes); busbw = algbw x 2(W-1)/W.
 *
 * On the simulator the times are modelled (DESIGN.md, "Virtual time"): the
 * rank's vclock before and after its all-reduces, each of which ends at the
 * latest arrival plus the cost model's time for the --hw profile (the
 * default GPU's without it), the --topology and the algorithm run. The same
 * bytes on any machine under any load; #wrong still checks the real bits.
 * With mpi and nccl, and for --memory-bound, the wall clock: measured.
 */
#include "chapter5.h"

#include "base/clock.h"
#include "base/vclock.h"
#include "base/error.h"
#include "base/plot.h"
#include "base/progress.h"
#include "sim/launch.h"
#include "transfer/device.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Shared by the rank threads: written by rank 0 only (the totals), read by
 * nobody else while they run. The cost model is not here: each rank fits
 * its own copy (sweep_fit_alpha), so no thread reads what another writes. */
struct sweep_job {
    struct ch5_job base; /* first: see chapter5.h */
    uint64_t wrong;
    uint64_t bad_checks; /* nccl-tests' "Out of bounds values": checks (rank x row x place) with a wrong element */
    double last_time_s; /* the last row's out-of-place time */
    int modelled;       /* times from the ranks' vclocks (the simulator), not the wall clock */
    FILE *csv;
};

/* Rank r's input: small integers, so every sum is exact in float32 and
 * #wrong can demand exact equality whatever the reduction order. */
static float sweep_value(int r, size_t i) { return (float)((i * 7 + (size_t)r * 3) % 11) - 5.0f; }

/* An all-reduce of a few doubles living on the host, through comm memory
 * (device memory under nccl): averages times, sums wrong counts. */
static int sweep_host_allreduce(comm_t *c, void *dev, double *vals, size_t n, enum comm_op op)
{
    int rc;
    if ((rc = comm_mem_upload(c, dev, vals, n * sizeof *vals)) < 0 ||
        (rc = comm_allreduce(c, dev, dev, n, COMM_FLOAT64, op)) < 0)
        return rc;
    return comm_mem_download(c, vals, dev, n * sizeof *vals);
}

static int sweep_fill(comm_t *c, float *host, void *dev, size_t count)
{
    for (size_t i = 0; i < count; i++)
        host[i] = sweep_value(comm_rank(c), i);
    return comm_mem_upload(c, dev, host, count * sizeof *host);
}

/* This rank's clock, seconds: modelled (its vclock, which each all-reduce
 * moves to that collective's modelled end) or the wall clock. */
static double sweep_clock_s(int modelled) { return modelled ? vclock_now_s() : clock_now_s(); }

/* Seconds per all-reduce of send -> recv, after `warmup` untimed ones. */
static int sweep_time(comm_t *c, int modelled, const void *send, void *recv, size_t count, enum comm_op op,
                      int warmup, int iters, double *seconds)
{
    int rc;
    for (int i = 0; i < warmup; i++)
        if ((rc = comm_allreduce(c, send, recv, count, COMM_FLOAT32, op)) < 0)
            return rc;
    if ((rc = comm_barrier(c)) < 0)
        return rc;
    double t0 = sweep_clock_s(modelled);
    for (int i = 0; i < iters; i++)
        if ((rc = comm_allreduce(c, send, recv, count, COMM_FLOAT32, op)) < 0)
            return rc;
    *seconds = (sweep_clock_s(modelled) - t0) / iters;
    return 0;
}

/* Elements of recv (downloaded into host) that are not the exact expected result. */
static int sweep_count_wrong(comm_t *c, float *host, const void *recv, size_t count, enum comm_op op, uint64_t *wrong)
{
    int rc = comm_mem_download(c, host, recv, count * sizeof *host);
    if (rc < 0)
        return rc;
    int W = comm_world(c);
    *wrong = 0;
    for (size_t i = 0; i < count; i++) {
        float want = 0;
        for (int r = 0; r < W; r++)
            want += sweep_value(r, i);
        if (op == COMM_AVG) /* an average may round differently where a library pre-divides: allow 1e-6 */
            *wrong += fabsf(host[i] - want / (float)W) > 1e-6f * fmaxf(1.0f, fabsf(want));
        else
            *wrong += host[i] != want;
    }
    return 0;
}

/* nccl-tests' time format: fewer decimals as the number grows */
static void sweep_format_time(double us, char *buf, size_t len)
{
    snprintf(buf, len, us >= 10000.0 ? "%7.0f" : us >= 100.0 ? "%7.1f" : "%7.2f", us);
}

static void sweep_header(const struct sweep_job *j, const struct costmodel *model, int world)
{
    const struct ch5_opts *o = j->base.opt;
    char timeout[24] = "none"; /* --timeout=0: no watchdog, blocking MPI calls */
    if (o->timeout_s != COMM_NO_TIMEOUT)
        snprintf(timeout, sizeof timeout, "%g s", o->timeout_s > 0 ? o->timeout_s : COMM_DEFAULT_TIMEOUT_S);
    char topology[32] = ""; /* --topology: NODESxGPUS */
    if (o->node_size > 0)
        snprintf(topology, sizeof topology, "  topology %dx%d", world / o->node_size, o->node_size);
    printf("# backend %s  world %d%s  algo %s  minBytes %llu  maxBytes %llu  step: %llu(factor)  warmup iters: %d  "
           "iters: %d  check: %d  timeout: %s\n",
           o->backend, world, topology, comm_algo_name(j->base.comm.algo), (unsigned long long)o->min_bytes,
           (unsigned long long)o->max_bytes, (unsigned long long)o->step_factor, o->warmup, o->iters, o->check,
           timeout);
    char gamma[48] = "0 (adding costs no more than copying here)";
    if (model->gamma_s_per_b > 0)
        snprintf(gamma, sizeof gamma, "%.3f GB/s", 1e-9 / model->gamma_s_per_b);
    char cores[24] = "a GPU each (--hw)"; /* cores 0: one each */
    if (model->cores > 0)
        snprintf(cores, sizeof cores, "%d cores", model->cores);
    char across[96] = ""; /* a topology of several nodes with its own network figures (--hw) */
    if (model->beta_inter_s_per_b > 0 && o->node_size > 0 && o->node_size < world)
        snprintf(across, sizeof across, "; across nodes alpha %.2f us, beta %.3f GB/s a port",
                 model->alpha_inter_s * 1e6, 1e-9 / model->beta_inter_s_per_b);
    printf("# model: alpha %.2f us/message, beta %.3f GB/s per link, gamma %s, segment %.0f KiB, %s%s\n",
           model->alpha_s * 1e6, 1e-9 / model->beta_s_per_b, gamma, model->segment_bytes / 1024, cores, across);
    /* whose time the table is: the simulator's modelled clock, or this host's wall clock */
    if (j->modelled) {
        const struct hw_profile *hw = o->hw;
        if (!hw && hw_profile_find(DEVICE_GPU_DEFAULT, &hw) < 0)
            hw = NULL;
        printf("# time: modelled on %s%s: each all-reduce ends at its last arrival + the cost model, the same "
               "on any host; model column: %s\n",
               hw ? hw->title : DEVICE_GPU_DEFAULT, o->hw ? "" : " (the default profile; --hw picks another)",
               o->hw ? "the formula alone, no arrivals" : "the formula on this machine's figures (above)");
    } else {
        printf("# time: measured on this host (wall clock)\n");
    }
    printf("#\n#%60s%-35s%-32s%s\n", "", "out-of-place", "in-place", "model");
    printf("#%11s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s  %9s  %7s\n", "size", "count", "type",
           "redop", "root", "time", "algbw", "busbw", "#wrong", "time", "algbw", "busbw", "#wrong", "time", "busbw");
    printf("#%11s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s  %9s  %7s\n", "(B)", "(elements)", "",
           "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)");
}

/* One row: measures out of place and in place, checks, averages over ranks, prints on rank 0. */
static int sweep_row(struct sweep_job *j, const struct costmodel *model, comm_t *c, void *send, void *recv,
                     void *scratch, float *host, size_t count, double *busbw_sum)
{
    const struct ch5_opts *o = j->base.opt;
    int rc, W = comm_world(c);
    double t[2];
    uint64_t wrong[2];
    /* out of place, then in place (recv reduced onto itself: with sum, every
     * element grows W-fold per call and reaches inf after ~128/log2(W) calls;
     * the time does not depend on the values, and #wrong below is measured
     * on fresh input) */
    if ((rc = sweep_fill(c, host, send, count)) < 0 ||
        (rc = sweep_time(c, j->modelled, send, recv, count, o->op, o->warmup, o->iters, &t[0])) < 0 ||
        (rc = sweep_time(c, j->modelled, recv, recv, count, o->op, o->warmup, o->iters, &t[1])) < 0)
        return rc;
    /* #wrong: one more collective of each kind on fresh input, checked element by element */
    if ((rc = comm_allreduce(c, send, recv, count, COMM_FLOAT32, o->op)) < 0 ||
        (rc = sweep_count_wrong(c, host, recv, count, o->op, &wrong[0])) < 0 ||
        (rc = sweep_fill(c, host, recv, count)) < 0 ||
        (rc = comm_allreduce(c, recv, recv, count, COMM_FLOAT32, o->op)) < 0 ||
        (rc = sweep_count_wrong(c, host, recv, count, o->op, &wrong[1])) < 0)
        return rc;
    double agg[4] = {t[0], t[1], 0, 0};
    double wr[3] = {(double)wrong[0], (double)wrong[1], (double)(wrong[0] > 0) + (wrong[1] > 0)};
    if ((rc = sweep_host_allreduce(c, scratch, agg, 2, COMM_AVG)) < 0 ||
        (rc = sweep_host_allreduce(c, scratch, wr, 3, COMM_SUM)) < 0)
        return rc;
    if (comm_rank(c) != 0)
        return 0;
    j->last_time_s = agg[0];
    j->wrong += (uint64_t)(wr[0] + wr[1]);
    j->bad_checks += (uint64_t)wr[2];
    if (o->quiet)
        return 0;
    double bytes = (double)count * 4, factor = comm_busbw_factor(COMM_ALLREDUCE, W);
    double model_s = costmodel_allreduce(model, j->base.comm.algo, W, bytes);
    double algbw[2], busbw[2];
    char tstr[2][16];
    for (int k = 0; k < 2; k++) {
        algbw[k] = bytes / agg[k] / 1e9;
        busbw[k] = algbw[k] * factor;
        *busbw_sum += busbw[k];
        sweep_format_time(agg[k] * 1e6, tstr[k], sizeof tstr[k]);
    }
    double model_busbw = model_s > 0 ? bytes / model_s / 1e9 * factor : 0;
    printf("%12.0f  %12zu  %8s  %6s  %6d  %7s  %6.2f  %6.2f  %6.0f  %7s  %6.2f  %6.2f  %6.0f  %9.1f  %7.2f\n", bytes,
           count, "float", comm_op_name(o->op), -1, tstr[0], algbw[0], busbw[0], wr[0], tstr[1], algbw[1], busbw[1],
           wr[1], model_s * 1e6, model_busbw);
    fflush(stdout);
    if (j->csv)
        fprintf(j->csv, "%s,%s,%d,%.0f,%zu,%.3f,%.4f,%.4f,%.3f,%.4f,%.4f,%.0f,%.3f,%.4f\n", o->backend,
                comm_algo_name(j->base.comm.algo), W, bytes, count, agg[0] * 1e6, algbw[0], busbw[0], agg[1] * 1e6,
                algbw[1], busbw[1], wr[0] + wr[1], model_s * 1e6, model_busbw);
    return 0;
}

/* alpha from the time of a 4-byte all-reduce, which is all latency: the
 * model is linear in alpha there, so alpha = time / (the model's time with
 * alpha = 1 s and free bandwidth). Every rank fits its own copy of the model
 * from the same averaged time (the ranks are threads: one shared model
 * written by rank 0 while the others read it was a data race). */
static int sweep_fit_alpha(const struct sweep_job *j, comm_t *c, void *buf, void *scratch, struct costmodel *model)
{
    double t[1];
    /* this host's wall clock even on the simulator: the model column is the textbook
     * formula on this machine's figures unless --hw gives a system's (then nothing is fitted) */
    if (j->base.opt->alpha_given)
        return 0;
    int rc = sweep_time(c, 0, buf, buf, 1, COMM_SUM, 5, 50, &t[0]);
    if (rc < 0 || (rc = sweep_host_allreduce(c, scratch, t, 1, COMM_AVG)) < 0)
        return rc;
    struct costmodel unit = *model;
    unit.alpha_s = 1;
    unit.beta_s_per_b = unit.gamma_s_per_b = 0;
    double per_alpha = costmodel_allreduce(&unit, j->base.comm.algo, comm_world(c), 4);
    model->alpha_s = per_alpha > 0 ? t[0] / per_alpha : 0;
    return 0;
}

/* The size after `bytes`, or 0 past max-bytes; never wraps around, however
 * large the factor. main.c made sure min-bytes >= 4 (one element) and
 * min <= max, so the table has a row. */
static uint64_t sweep_next(const struct ch5_opts *o, uint64_t bytes)
{
    return bytes > o->max_bytes / o->step_factor ? 0 : bytes * o->step_factor;
}

static int sweep_rank(struct launch_rank *r)
{
    struct sweep_job *j = r->shared;
    const struct ch5_opts *o = j->base.opt;
    comm_t *c;
    int rc = launch_comm_open(r, &j->base.comm, &c);
    if (rc < 0)
        return rc;
    int lead = comm_rank(c) == 0 && !o->quiet; /* rank 0 prints */
    size_t maxcount = (size_t)(o->max_bytes / 4);
    void *send = NULL, *recv = NULL, *scratch = NULL;
    float *host = malloc((maxcount + 1) * sizeof *host);
    if (!host)
        rc = err_set(ERR_NOMEM, "cannot allocate %zu bytes for checking", maxcount * 4);
    if (rc == 0 && (rc = comm_mem_alloc(c, maxcount * 4, &send)) == 0 &&
        (rc = comm_mem_alloc(c, maxcount * 4, &recv)) == 0)
        rc = comm_mem_alloc(c, 4 * sizeof(double), &scratch);
    struct costmodel model = o->model;
    if (rc == 0)
        rc = sweep_fit_alpha(j, c, recv, scratch, &model);
    if (rc == 0 && lead)
        sweep_header(j, &model, comm_world(c));

    progress_t bar;
    uint64_t rows = 0, total = 0;
    for (uint64_t b = o->min_bytes; b; b = sweep_next(o, b))
        total++;
    if (lead)
        progress_begin(&bar, "all-reduce sweep", total);
    double busbw_sum = 0;
    for (uint64_t bytes = o->min_bytes; rc == 0 && bytes; bytes = sweep_next(o, bytes)) {
        rc = sweep_row(j, &model, c, send, recv, scratch, host, (size_t)(bytes / 4), &busbw_sum);
        rows++;
        if (lead)
            progress_update(&bar, rows);
    }
    if (lead) {
        progress_end(&bar, rows);
        if (rc == 0) {
            /* nccl-tests' summary line, word for word (src/common.cu): its
             * number counts the checks that found a wrong element, one per
             * rank, size and place; the #wrong columns count elements */
            printf("# Out of bounds values : %llu %s\n", (unsigned long long)j->bad_checks,
                   j->bad_checks ? "FAILED" : "OK");
            printf("# Avg bus bandwidth    : %g\n#\n", rows ? busbw_sum / (2.0 * (double)rows) : 0.0);
        }
    }
    if (rc < 0) /* out of memory, say: the others learn now, not at their watchdog */
        rc = comm_abort(c, rc);
    comm_mem_free(c, send);
    comm_mem_free(c, recv);
    comm_mem_free(c, scratch);
    free(host);
    comm_close(c);
    return rc;
}

int ch5_sweep(struct ch5_opts *opt, uint64_t *wrong_total, double *last_time_s)
{
    *wrong_total = 0;
    struct plot_csv csv = {.f = NULL};
    int rc = 0;
    if (opt->csv_path && launch_leader()) {
        if ((rc = plot_csv_open(&csv, opt->csv_path, "--out")) < 0)
            return rc;
        fprintf(csv.f, "backend,algo,world,bytes,count,time_us,algbw,busbw,time_ip_us,algbw_ip,busbw_ip,wrong,"
                       "model_us,model_busbw\n");
    }
    for (int a = 0; a < opt->nalgos && rc == 0; a++) {
        struct sweep_job j = {.base.opt = opt, .csv = csv.f};
        /* the simulator's ranks keep modelled time; real backends (and --memory-bound) are timed */
        j.modelled = strcmp(opt->backend, "sim") == 0 && !opt->wall_clock && !vclock_is_wall();
        comm_config_default(&j.base.comm);
        j.base.comm.algo = opt->algos[a];
        j.base.comm.timeout_s = opt->timeout_s;
        j.base.comm.check = opt->check ? COMM_CHECK_RESULTS : COMM_CHECK_NONE;
        struct launch_config run = {.backend = opt->backend, .world = opt->world, .shared = &j,
                                    .node_size = opt->node_size, .hw = opt->hw};
        rc = launch_run(&run, sweep_rank);
        *wrong_total += j.wrong;
        if (last_time_s)
            *last_time_s = j.last_time_s;
    }
    int written = csv.f != NULL;
    if (written)
        rc = plot_csv_close(&csv, rc);
    if (written && rc == 0)
        printf("# data: %s\n", opt->csv_path);
    return rc;
}
