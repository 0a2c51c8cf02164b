/* bench: chapter 6's figures against its targets (--bench=NAME; bench.sh
 * runs them for `make bench`). Each comparison ends with a verdict line
 * (lib/base/verdict.h), its peer or limit measured in the same run:
 *
 *   accuracy  the recipe's test accuracy on 4 ranks against 0.89, and the
 *             accuracy curve at 1, 2 and 8 ranks, same global batch, against
 *             the 4-rank one (within 0.5 points every epoch)
 *   overhead  the DDP step on 8 modelled H100 SXM (one node) in the DDP
 *             paper's regime against one GPU alone (within 15 %)
 *   scaling   weak scaling on 1 to 64 modelled GPUs, ring and hier, overlap
 *             on and off, bucket caps: scaling.csv and .png (no target)
 *   host      the simulator's CPU per modelled step, 1 to 64 ranks
 *             (bench.sh sets one rank's step alone beside it)
 *   same-bits what --same-bits costs against the default mode at 1, 4 and 8
 *             ranks (within 1.5x); its curves are accuracy's
 *   model     one rank's step on one thread at batch 32, 64, 256: samples/s
 *             and the time inside the GEMMs (bench.sh sets PyTorch beside it)
 *
 * BENCH_QUICK=1 shrinks every run to seconds: the figures then mean nothing.
 */
#include "chapter6.h"

#include "base/clock.h"
#include "base/error.h"
#include "base/measure.h"
#include "base/verdict.h"
#include "bench_model.h"
#include "transfer/hw.h"

#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>

const char *const ch6_bench_names[] = {"accuracy", "overhead", "model", "scaling", "host", "same-bits", NULL};

#define CH6_TARGET_ACCURACY 0.89   /* the chapter's target at the default recipe */
#define CH6_TARGET_SPREAD 0.5      /* points: the curves at 1, 2, 4, 8 ranks agree within this */
#define CH6_TARGET_OVERHEAD 1.15   /* DDP's step against the no-DDP step, same per-rank work */
#define CH6_MAX_EPOCHS 1000

/* A quiet run of the recipe (the program's flags apply), on `world` ranks. */
static void ch6_bench_run(const struct ch6_run *base, struct ch6_run *run, int world)
{
    *run = *base;
    run->backend = "sim";
    run->world = world;
    run->quiet = 1;
    run->trace_path = NULL;
    run->out_dir = NULL;
    run->gantt_name = run->epochs_name = NULL;
    run->train.trace_steps = 0;
}

/* The test accuracy after each epoch of a run, into acc[0 .. epochs). */
struct ch6_curve {
    double acc[CH6_MAX_EPOCHS];
    uint64_t epochs;
    double seconds;
};

/* train: rank 0's epoch report, into the curve. */
static void ch6_curve_epoch(void *user, const struct train_epoch *e)
{
    struct ch6_curve *cv = user;
    if (e->epoch < CH6_MAX_EPOCHS) {
        cv->acc[e->epoch] = e->test_accuracy;
        cv->epochs = e->epoch + 1;
    }
}

/* The recipe's curves at 4, 1, 2 and 8 ranks (that order: the 4-rank one
 * is the reference), one global batch, into curves[0 .. 4); --same-bits
 * with same_bits. The largest difference from the reference's, in points,
 * into *spread. */
static int ch6_bench_curves(const struct ch6_run *base, int quick, int same_bits, struct ch6_curve *curves,
                            double *spread)
{
    static const int worlds[] = {4, 1, 2, 8};
    uint32_t global = base->train.batch * 4;
    for (int i = 0; i < 4; i++) {
        struct ch6_run run;
        ch6_bench_run(base, &run, worlds[i]);
        run.train.batch = global / (uint32_t)worlds[i];
        run.train.same_bits = same_bits;
        if (quick) {
            run.train.train_records = 4096;
            run.train.epochs = 1;
        }
        run.on_epoch = ch6_curve_epoch;
        run.on_epoch_user = &curves[i];
        struct ch6_outcome out;
        int rc = ch6_train(&run, &out);
        timeline_all_free(out.result.timeline);
        if (rc < 0)
            return rc;
        curves[i].seconds = out.wall_s;
        printf("  %s%d rank%s x batch %3u: test accuracy by epoch", same_bits ? "same-bits " : "", worlds[i],
               worlds[i] == 1 ? " " : "s", run.train.batch);
        for (uint64_t e = 0; e < curves[i].epochs; e++)
            printf(" %.4f", curves[i].acc[e]);
        printf("  (%.1f s)\n", out.wall_s);
        fflush(stdout);
    }
    *spread = 0;
    for (int i = 1; i < 4; i++)
        for (uint64_t e = 0; e < curves[0].epochs && e < curves[i].epochs; e++)
            *spread = fmax(*spread, 100 * fabs(curves[i].acc[e] - curves[0].acc[e]));
    return 0;
}

static int ch6_bench_accuracy(const struct ch6_run *base, int quick)
{
    static struct ch6_curve curves[4], same[4];
    printf("== chapter 6: accuracy, the recipe (%llu epochs, global batch %u) at 1, 2, 4 and 8 ranks\n",
           (unsigned long long)(quick ? 1 : base->train.epochs), base->train.batch * 4);
    if (!base->train.test_set) {
        verdict_print_not_run(stdout, "test accuracy at the default recipe", "the target", VERDICT_AT_MOST, 1,
                              "no test set");
        return 0;
    }
    double spread, same_spread;
    int rc = ch6_bench_curves(base, quick, 0, curves, &spread);
    if (rc == 0)
        rc = ch6_bench_curves(base, quick, 1, same, &same_spread);
    if (rc < 0)
        return rc;
    const struct ch6_curve *ref = &curves[0];
    double acc = ref->epochs ? ref->acc[ref->epochs - 1] : 0;
    char what[160];
    snprintf(what, sizeof what, "test error (1 - accuracy), recipe on 4 ranks, %llu epochs in %.0f s",
             (unsigned long long)ref->epochs, ref->seconds);
    struct verdict v = {.what = what, .figure = 100 * (1 - acc), .unit = "%", .peer = "the target's (accuracy 0.89)",
                        .peer_figure = 100 * (1 - CH6_TARGET_ACCURACY), .peer_unit = "%",
                        .ratio = (1 - acc) / (1 - CH6_TARGET_ACCURACY), .op = VERDICT_AT_MOST, .target = 1};
    verdict_print(stdout, &v);
    v = (struct verdict){.what = "largest accuracy difference from the 4-rank curve, 1 2 8 ranks, any epoch",
                         .figure = spread, .unit = "points", .peer = "the allowed spread",
                         .peer_figure = CH6_TARGET_SPREAD, .peer_unit = "points", .ratio = spread / CH6_TARGET_SPREAD,
                         .op = VERDICT_AT_MOST, .target = 1};
    verdict_print(stdout, &v);
    /* --same-bits: no spread at all (ratio 0 against the default mode's allowance; any point is a MISS) */
    v = (struct verdict){.what = "--same-bits: largest accuracy difference from the 4-rank curve, 1 2 8 ranks, any "
                                 "epoch",
                         .figure = same_spread, .unit = "points", .peer = "the default mode's allowance",
                         .peer_figure = CH6_TARGET_SPREAD, .peer_unit = "points",
                         .ratio = same_spread / CH6_TARGET_SPREAD, .op = VERDICT_AT_MOST, .target = 0};
    verdict_print(stdout, &v);
    return 0;
}

/* ---- scaling on the modelled cluster ------------------------------------------------------------ */

/* What one run of the scaling sweep gives: the modelled step, and what the
 * simulator spent on the host for it (measured: CPU seconds of this process
 * per step, all ranks' threads together, and wall seconds per step). */
struct ch6_point {
    double step_s, comm_s, cpu_s, wall_s;
    double grad_bytes; /* what DDP's reducer all-reduced a step (0 when it did not run) */
};

static double ch6_cpu_seconds(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + (double)ru.ru_stime.tv_sec +
           ((double)ru.ru_utime.tv_usec + (double)ru.ru_stime.tv_usec) * 1e-6;
}

static int ch6_point(const struct ch6_run *run, struct ch6_point *p)
{
    struct ch6_outcome out;
    double cpu0 = ch6_cpu_seconds();
    int rc = ch6_train(run, &out);
    double cpu = ch6_cpu_seconds() - cpu0;
    timeline_all_free(out.result.timeline);
    double steps = out.result.steps ? (double)out.result.steps : 1;
    const struct reducer_stats *r = &out.result.reducer;
    *p = (struct ch6_point){.step_s = out.result.per_step.step, .comm_s = out.result.per_step.comm,
                            .cpu_s = cpu / steps, .wall_s = out.wall_s / steps,
                            .grad_bytes = r->iterations ? (double)r->bytes_reduced / (double)r->iterations : 0};
    return rc;
}

/* A run of the sweep: `world` GPUs on nodes of up to 8, on `hw`. */
static void ch6_scaling_run(const struct ch6_run *base, struct ch6_run *run, const struct hw_profile *hw, int world,
                            int overlap, uint64_t steps)
{
    ch6_bench_run(base, run, world);
    struct train_config *c = &run->train;
    c->epochs = 100000;
    c->max_steps = steps;
    c->check = 0; /* the simulator's check, not DDP's cost */
    c->eval = TRAIN_EVAL_NONE;
    c->ddp = world > 1;
    c->overlap = overlap;
    run->timeout_s = 0;
    run->node_size = world < 8 ? world : 8;
    run->hw = hw;
    hw_host_link(hw, &c->link);
    c->gemm_flops = hw_gemm_flops(hw);
    c->gpu_memory_bps = hw->memory_bps;
}

/* The sweep's model: six hidden layers of 512, 6.9 MB of gradients in 14
 * tensors of up to 1 MiB, so that caps of 1 to 100 MB make 1 to 7 buckets and
 * overlap has layers to hide under; small enough that 64 ranks of it run in
 * seconds here. */
#define CH6_SCALING_HIDDEN "512,512,512,512,512,512"
#define CH6_SCALING_BATCH 128
static const int ch6_scaling_worlds[] = {1, 2, 4, 8, 16, 32, 64};
static const double ch6_bucket_caps_mb[] = {1, 2, 5, 10, 25, 50, 100};
#define CH6_COUNT(a) (sizeof(a) / sizeof((a)[0]))

/* One row of scaling.csv, and of the table. */
static void ch6_scaling_row(FILE *csv, const char *sweep, int world, const char *algo, int overlap, double cap_mb,
                            const struct ch6_point *p, const struct ch6_point *one)
{
    double eff = one->step_s / p->step_s;
    printf("  %-7s %3d GPUs %d node%s %-4s %-7s %5.0f MB  step %7.1f us  exposed comm %7.1f us  efficiency %5.1f %%\n",
           sweep, world, world > 8 ? world / 8 : 1, world > 8 ? "s" : " ", algo, overlap ? "overlap" : "after", cap_mb,
           p->step_s * 1e6, p->comm_s * 1e6, 100 * eff);
    fflush(stdout);
    if (csv)
        fprintf(csv, "%s,%d,%d,%s,%d,%g,%.3f,%.3f,%.4f,%.3f,%.3f\n", sweep, world, world > 8 ? world / 8 : 1, algo,
                overlap, cap_mb, p->step_s * 1e6, p->comm_s * 1e6, eff, p->cpu_s * 1e3, p->wall_s * 1e3);
}

/* --bench=scaling: DDP's weak scaling (the per-GPU batch fixed) on modelled
 * H100 SXM nodes of 8 GPUs, 1 to 64 GPUs, flat ring and hierarchical, with
 * and without overlap; then the bucket cap at 16 GPUs on 2 nodes. Every time
 * is modelled; the host columns of the CSV are measured. */
static int ch6_bench_scaling(const struct ch6_run *base, int quick)
{
    const struct hw_profile *hw;
    int rc = hw_profile_find("h100-sxm", &hw);
    uint64_t steps = quick ? 2 : 4;
    struct ch6_run run;
    ch6_scaling_run(base, &run, hw, 1, 1, steps);
    if (rc == 0)
        rc = model_spec_parse_hidden(&run.train.spec, CH6_SCALING_HIDDEN, "hidden");
    struct model_spec spec = run.train.spec;
    char csv_path[PLOT_PATH_MAX], out[PLOT_PATH_MAX];
    struct plot_csv csv = {0};
    if (rc == 0 && base->out_dir && plot_paths(base->out_dir, "scaling", csv_path, out) == 0 &&
        (rc = plot_csv_open(&csv, csv_path, "--out")) == 0)
        fprintf(csv.f, "sweep,gpus,nodes,algo,overlap,bucket_cap_mb,step_us,exposed_comm_us,efficiency,"
                       "host_cpu_ms_per_step,host_wall_ms_per_step\n");
    if (rc == 0)
        printf("== chapter 6: DDP's scaling on modelled %s nodes of 8 GPUs (%s inside, 8x InfiniBand NDR\n"
               "   between): MLP 784-%s-10 (hidden), batch %d per GPU, %llu steps a run; efficiency = 1 GPU's step / this "
               "step\n", hw->title, hw->peer, CH6_SCALING_HIDDEN, CH6_SCALING_BATCH, (unsigned long long)steps);
    struct ch6_point one = {0};
    static const enum comm_algo algos[] = {COMM_ALGO_RING, COMM_ALGO_HIER};
    for (size_t a = 0; rc == 0 && a < CH6_COUNT(algos); a++)
        for (int overlap = 1; rc == 0 && overlap >= 0; overlap--)
            for (size_t i = 0; rc == 0 && i < CH6_COUNT(ch6_scaling_worlds); i++) {
                int world = ch6_scaling_worlds[i];
                if (world == 1 && (a || !overlap))
                    continue; /* one GPU: no all-reduce to place */
                if (quick && world > 8)
                    break;
                ch6_scaling_run(base, &run, hw, world, overlap, steps);
                run.train.spec = spec;
                run.train.batch = CH6_SCALING_BATCH;
                run.algo = algos[a];
                struct ch6_point p;
                if ((rc = ch6_point(&run, &p)) < 0)
                    break;
                if (world == 1)
                    one = p;
                ch6_scaling_row(csv.f, "gpus", world, comm_algo_name(algos[a]), overlap,
                                run.train.reducer.bucket_cap_bytes / 1048576.0, &p, &one);
            }
    for (size_t i = 0; rc == 0 && i < CH6_COUNT(ch6_bucket_caps_mb); i++) {
        int world = quick ? 8 : 16;
        ch6_scaling_run(base, &run, hw, world, 1, steps);
        run.train.spec = spec;
        run.train.batch = CH6_SCALING_BATCH;
        run.algo = COMM_ALGO_HIER;
        run.train.reducer.bucket_cap_bytes = (size_t)(ch6_bucket_caps_mb[i] * 1048576);
        struct ch6_point p;
        if ((rc = ch6_point(&run, &p)) == 0)
            ch6_scaling_row(csv.f, "buckets", world, "hier", 1, ch6_bucket_caps_mb[i], &p, &one);
    }
    if (csv.f && (rc = plot_csv_close(&csv, rc)) == 0) {
        int r = plot_render("chapters/06-ddp/scaling.gp", csv_path, out, "--out");
        if (r == 0)
            printf("  the curves: %s.png and .svg (data: %s)\n", out, csv_path);
        else if (r != ERR_UNSUPPORTED)
            rc = r;
    }
    return rc;
}

/* The DDP paper's regime: a model whose arithmetic dwarfs its all-reduce.
 * This MLP holds 22.6 M parameters (ResNet-50 has 25.6 M) in layers of 16.8 MB
 * whose gradients come one after the other in backward; at a batch of 1024 a
 * modelled H100 computes for about 3.1 ms a step. 10 steps, so that the first
 * (the buckets in parameter order until they are rebuilt) weighs little. */
#define CH6_REGIME_HIDDEN "2048,2048,2048,2048,2048,2048"
#define CH6_REGIME_BATCH 1024

/* --bench=overhead: DDP's step on one modelled node of 8 H100 SXM, default
 * buckets, overlap on, against one GPU training alone on the same per-GPU
 * work; then the recipe's small MLP at batch 32, where nothing hides the
 * all-reduce (no target: the contrast). Modelled time: one run each. */
static int ch6_bench_overhead(const struct ch6_run *base, int quick)
{
    const struct hw_profile *hw;
    int rc = hw_profile_find("h100-sxm", &hw);
    struct {
        const char *hidden;
        uint32_t batch;
        double step[2]; /* alone, DDP */
    } models[] = {{CH6_REGIME_HIDDEN, quick ? 64 : CH6_REGIME_BATCH, {0}}, {"256,128", 32, {0}}};
    for (int m = 0; rc == 0 && m < 2; m++) {
        for (int ddp = 0; rc == 0 && ddp < 2; ddp++) {
            struct ch6_run run;
            ch6_scaling_run(base, &run, hw, ddp ? 8 : 1, 1, quick ? 2 : 10);
            run.train.batch = models[m].batch;
            struct ch6_point p;
            if ((rc = model_spec_parse_hidden(&run.train.spec, models[m].hidden, "hidden")) == 0 &&
                (rc = ch6_point(&run, &p)) == 0)
                models[m].step[ddp] = p.step_s;
        }
        if (rc < 0)
            break;
        char what[160];
        snprintf(what, sizeof what, "DDP step, 8 modelled H100 SXM on NVLink, MLP 784-%s-10 at batch %u, default "
                 "buckets, overlap", models[m].hidden, models[m].batch);
        struct verdict v = {.what = what, .figure = models[m].step[1] * 1e6, .unit = "us",
                            .peer = "1 GPU training alone, same per-GPU work", .peer_figure = models[m].step[0] * 1e6,
                            .peer_unit = "us", .ratio = models[m].step[1] / models[m].step[0],
                            .op = VERDICT_AT_MOST, .target = CH6_TARGET_OVERHEAD};
        if (m == 0)
            verdict_print(stdout, &v);
        else
            printf("  the recipe's MLP at batch 32, for contrast (no target): %.0f us against %.0f us alone, %.2fx: "
                   "its step is kernel launches, and nothing hides the all-reduce\n", v.figure, v.peer_figure, v.ratio);
    }
    return rc;
}

/* --bench=host's clock: the process's CPU seconds and the wall at the end
 * of each epoch, told on rank 0 (whose peers are within a step of it: every
 * step's all-reduce keeps them together). */
#define CH6_HOST_EPOCHS 6 /* one to warm up, five measured */
struct ch6_host_marks {
    double cpu[CH6_HOST_EPOCHS], wall[CH6_HOST_EPOCHS];
    uint64_t step[CH6_HOST_EPOCHS];
};

static void ch6_host_mark(void *user, const struct train_epoch *e)
{
    struct ch6_host_marks *m = user;
    if (e->epoch < CH6_HOST_EPOCHS) {
        m->cpu[e->epoch] = ch6_cpu_seconds();
        m->wall[e->epoch] = clock_now_s();
        m->step[e->epoch] = e->step_end;
    }
}

/* --bench=host: the simulator's own cost, measured on this host: CPU
 * seconds of the whole process per modelled step (every rank thread, loader
 * worker and engine together) and wall seconds, for the recipe on 1 to 64
 * ranks, in the steady state: one run each, its first epoch to warm up (set-
 * up, the first pages, the buckets' rebuild), then five epochs of up to 40
 * steps, each timed on its own; the best of the five, as bench_model takes
 * the best of its repetitions (a neighbour's burst on a shared host only
 * ever adds), and their median beside it. With bench_model's optimizer (SGD,
 * lr 0.01, momentum 0.9), so that the last line, for bench.sh, compares like
 * with like: W = 4's CPU per rank and step against bench_model's step. */
static int ch6_bench_host(const struct ch6_run *base, int quick)
{
    static const int worlds[] = {1, 2, 4, 8, 16, 32, 64};
    enum { MEASURED = CH6_HOST_EPOCHS - 1 };
    uint64_t records = dataset_info(base->train.train_set)->length, batch = base->train.batch;
    if (base->train.train_records && base->train.train_records < records)
        records = base->train.train_records;
    uint64_t longest = quick ? 2 : 40; /* steps an epoch */
    printf("== chapter 6: the simulator's host cost, the recipe (MLP 784-256-128-10, batch %u a rank) with SGD as "
           "bench_model's, per step in the steady state (after an epoch to warm up, %d epochs of up to %llu steps "
           "each timed: the best and the median), on this host (measured)\n", base->train.batch, MEASURED,
           (unsigned long long)longest);
    double four = 0;
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < sizeof worlds / sizeof worlds[0]; i++) {
        uint64_t w = (uint64_t)worlds[i], per_epoch = records / (w * batch);
        if (quick && w > 8)
            break;
        if (per_epoch > longest)
            per_epoch = longest;
        if (per_epoch < 2) {
            rc = err_set(ERR_ARG, "--bench=host: the training set's %llu records make fewer than 2 steps an epoch "
                         "at %d ranks of batch %u", (unsigned long long)records, worlds[i], base->train.batch);
            break;
        }
        struct ch6_host_marks marks;
        memset(&marks, 0, sizeof marks);
        struct ch6_run run;
        ch6_bench_run(base, &run, worlds[i]);
        optim_config_default(&run.train.optim, OPTIM_SGD);
        run.train.train_records = per_epoch * w * batch;
        run.train.drop_last = 1;
        run.train.epochs = CH6_HOST_EPOCHS;
        run.train.eval = TRAIN_EVAL_NONE;
        run.timeout_s = 0;
        run.on_epoch = ch6_host_mark;
        run.on_epoch_user = &marks;
        struct ch6_point p;
        if ((rc = ch6_point(&run, &p)) < 0)
            break;
        double cpu[MEASURED], wall[MEASURED];
        for (int e = 0; e < MEASURED; e++) {
            double steps = (double)(marks.step[e + 1] - marks.step[e]);
            cpu[e] = (marks.cpu[e + 1] - marks.cpu[e]) / steps;
            wall[e] = (marks.wall[e + 1] - marks.wall[e]) / steps;
        }
        measure_sort(cpu, MEASURED);
        measure_sort(wall, MEASURED);
        printf("  %2d rank%s  CPU %7.2f ms a modelled step (%4.0f us a rank; median %4.0f), wall %7.2f ms; "
               "modelled step %5.0f us (epochs of %llu steps)\n", worlds[i], worlds[i] == 1 ? " " : "s", cpu[0] * 1e3,
               cpu[0] * 1e6 / worlds[i], cpu[MEASURED / 2] * 1e6 / worlds[i], wall[0] * 1e3, p.step_s * 1e6,
               (unsigned long long)per_epoch);
        fflush(stdout);
        if (worlds[i] == 4)
            four = cpu[0] / 4;
    }
    if (rc == 0)
        printf("bench_host: world=4 cpu_us_per_rank_step=%.1f\n", four * 1e6);
    return rc;
}

/* --bench=same-bits: what the mode costs, the recipe at a global batch of
 * 4 x --batch on 1, 4 and 8 ranks: the modelled step against the default
 * mode's (within 1.5x at 1 and 4 ranks), the bytes each step's gradient
 * exchange moves per rank, and the simulator's CPU per step (measured). */
static int ch6_bench_same_bits(const struct ch6_run *base, int quick)
{
    static const int worlds[] = {1, 4, 8};
    uint32_t global = base->train.batch * 4;
    uint64_t steps = quick ? 5 : 100;
    printf("== chapter 6: what --same-bits costs, the recipe at a global batch of %u, %llu steps a run (the steps "
           "modelled, the CPU measured)\n", global, (unsigned long long)steps);
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < sizeof worlds / sizeof worlds[0]; i++) {
        struct ch6_point p[2];
        for (int mode = 0; rc == 0 && mode < 2; mode++) {
            struct ch6_run run;
            ch6_bench_run(base, &run, worlds[i]);
            run.train.batch = global / (uint32_t)worlds[i];
            run.train.same_bits = mode;
            run.train.epochs = 100000;
            run.train.max_steps = steps;
            run.train.check = 0; /* the simulator's check, not the mode's cost */
            run.train.eval = TRAIN_EVAL_NONE;
            rc = ch6_point(&run, &p[mode]);
        }
        if (rc < 0)
            break;
        int w = worlds[i];
        double grad = p[0].grad_bytes; /* the default mode's all-reduce: the whole gradient */
        printf("  %d rank%s: a step %.0f us by default, %.0f us with --same-bits (%.2fx); per rank and step the ring "
               "sends %.0f KB, the gather receives %.0f KB; CPU %.2f and %.2f ms a step\n", w, w == 1 ? " " : "s",
               p[0].step_s * 1e6, p[1].step_s * 1e6, p[1].step_s / p[0].step_s, grad * 2 * (w - 1) / w / 1e3,
               grad * (w - 1) / 1e3, p[0].cpu_s * 1e3, p[1].cpu_s * 1e3);
        fflush(stdout);
        if (w == 8)
            continue;
        char what[96];
        snprintf(what, sizeof what, "--same-bits step, recipe, %d rank%s, global batch %u", w, w == 1 ? "" : "s",
                 global);
        struct verdict v = {.what = what, .figure = p[1].step_s * 1e6, .unit = "us", .peer = "the default mode's step",
                            .peer_figure = p[0].step_s * 1e6, .peer_unit = "us", .ratio = p[1].step_s / p[0].step_s,
                            .op = VERDICT_AT_MOST, .target = 1.5};
        verdict_print(stdout, &v);
    }
    return rc;
}

int ch6_bench(const struct ch6_run *base, const char *name, int quick)
{
    if (strcmp(name, "accuracy") == 0)
        return ch6_bench_accuracy(base, quick);
    if (strcmp(name, "overhead") == 0)
        return ch6_bench_overhead(base, quick);
    if (strcmp(name, "scaling") == 0)
        return ch6_bench_scaling(base, quick);
    if (strcmp(name, "host") == 0)
        return ch6_bench_host(base, quick);
    if (strcmp(name, "same-bits") == 0)
        return ch6_bench_same_bits(base, quick);
    struct bench_model_options o;
    bench_model_defaults(&o);
    o.batches[0] = (int)base->train.batch;
    o.nbatches = 1;
    o.device = base->train.device;
    if (quick) {
        o.seconds = 0.02;
        o.repeats = 1;
    }
    return bench_model(&o);
}
