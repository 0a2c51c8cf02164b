/* bench: chapter 6's figures against its targets (--bench=NAME; bench.sh
 * runs them for `make bench`). Each comparison ends with a verdict line
 * (lib/base/verdict.h), its peer or limit measured in the same run:
 *
 *   accuracy  the recipe's test accuracy on 4 ranks against 0.89, and the
 *             accuracy curve at 1, 2 and 8 ranks, same global batch, against
 *             the 4-rank one (within 0.5 points every epoch)
 *   overhead  the DDP step on 4 simulated ranks against the same ranks
 *             training alone on the same per-rank work (within 15 %)
 *   model     one rank's step on one thread at batch 32, 64, 256: samples/s
 *             and the time inside the GEMMs (bench.sh sets PyTorch beside it)
 *
 * BENCH_QUICK=1 shrinks every run to seconds: the figures then mean nothing.
 */
#include "chapter6.h"

#include "base/error.h"
#include "base/verdict.h"
#include "bench_model.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

const char *const ch6_bench_names[] = {"accuracy", "overhead", "model", NULL};

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

static int ch6_bench_accuracy(const struct ch6_run *base, int quick)
{
    static const int worlds[] = {4, 1, 2, 8};
    uint32_t global = base->train.batch * 4;
    static struct ch6_curve curves[4];
    printf("== chapter 6: accuracy, the recipe (%llu epochs, global batch %u) at 1, 2, 4 and 8 ranks\n",
           (unsigned long long)(quick ? 1 : base->train.epochs), global);
    if (!base->train.test_set) {
        verdict_print_not_run(stdout, "test accuracy at the default recipe", "the target", VERDICT_AT_MOST, 1,
                              "no test set");
        return 0;
    }
    for (int i = 0; i < 4; i++) {
        struct ch6_run run;
        ch6_bench_run(base, &run, worlds[i]);
        run.train.batch = global / (uint32_t)worlds[i];
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
        printf("  %d rank%s x batch %3u: test accuracy by epoch", worlds[i], worlds[i] == 1 ? " " : "s",
               run.train.batch);
        for (uint64_t e = 0; e < curves[i].epochs; e++)
            printf(" %.4f", curves[i].acc[e]);
        printf("  (%.1f s)\n", out.wall_s);
        fflush(stdout);
    }
    const struct ch6_curve *ref = &curves[0];
    double acc = ref->epochs ? ref->acc[ref->epochs - 1] : 0, spread = 0;
    for (int i = 1; i < 4; i++)
        for (uint64_t e = 0; e < ref->epochs && e < curves[i].epochs; e++)
            spread = fmax(spread, 100 * fabs(curves[i].acc[e] - ref->acc[e]));
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
    return 0;
}

/* The mean step time of one run. */
static int ch6_step_time(const struct ch6_run *run, double *step_s)
{
    struct ch6_outcome out;
    int rc = ch6_train(run, &out);
    timeline_all_free(out.result.timeline);
    *step_s = out.result.per_step.step;
    return rc;
}

static int ch6_bench_overhead(const struct ch6_run *base, int quick)
{
    struct ch6_run ddp, alone;
    ch6_bench_run(base, &ddp, 4);
    struct train_config *c = &ddp.train;
    c->epochs = 1;
    c->max_steps = quick ? 20 : 300;
    c->check = 0; /* a simulator's check, not DDP's cost */
    c->eval = TRAIN_EVAL_NONE;
    c->reducer.first_bucket_bytes = 64 << 10; /* buckets that overlap backward: fc3 and fc2 under fc1's */
    c->reducer.bucket_cap_bytes = 256 << 10;
    alone = ddp;
    alone.train.ddp = 0;
    printf("== chapter 6: DDP's overhead, 4 simulated ranks, batch %u each, %llu steps; best of 3 runs each\n",
           c->batch, (unsigned long long)c->max_steps);
    double best_ddp = INFINITY, best_alone = INFINITY;
    for (int rep = 0; rep < (quick ? 1 : 3); rep++) { /* alternate, so load from others hits both alike */
        double s;
        int rc = ch6_step_time(&alone, &s);
        if (rc < 0)
            return rc;
        best_alone = fmin(best_alone, s);
        if ((rc = ch6_step_time(&ddp, &s)) < 0)
            return rc;
        best_ddp = fmin(best_ddp, s);
    }
    struct verdict v = {.what = "DDP step, 4 ranks, buckets overlapping backward", .figure = best_ddp * 1e3,
                        .unit = "ms", .peer = "the same ranks training alone (no all-reduce)",
                        .peer_figure = best_alone * 1e3, .peer_unit = "ms", .ratio = best_ddp / best_alone,
                        .op = VERDICT_AT_MOST, .target = CH6_TARGET_OVERHEAD};
    verdict_print(stdout, &v);
    return 0;
}

int ch6_bench(const struct ch6_run *base, const char *name, int quick)
{
    if (strcmp(name, "accuracy") == 0)
        return ch6_bench_accuracy(base, quick);
    if (strcmp(name, "overhead") == 0)
        return ch6_bench_overhead(base, quick);
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
