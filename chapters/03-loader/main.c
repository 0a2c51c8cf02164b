/* chapter-3: the worker loader. When does the trainer starve, and how many
 * workers does it take to feed it?
 *
 * Where it sits: the third program of the course (read
 * chapters/03-loader/README.md alongside), and the first where the stages
 * meet: it opens a dataset (chapter 1; Fashion-MNIST when installed, else
 * the synthetic stand-in of the same shape), takes rank R's indices of each
 * epoch from chapter 2's DistributedSampler (--world, --rank, --seed; the
 * defaults give one rank the whole dataset, shuffled anew every epoch), puts
 * lib/loader/loader.h's ring of worker threads behind them, and plays a
 * trainer whose step takes --step-ms (the GPU's compute: the trainer's thread
 * only waits). Each sample costs --work-us of CPU to "decode" (a spin in a per-sample
 * transform, like a JPEG decode would). The default run sweeps the number of
 * workers against that cost: table, CSV, PNG and SVG. --bench loads whole
 * epochs as fast as it can and prints samples/s, MB/s and the data-wait.
 * The logic lives in lib/loader/loader.c; this file teaches and measures.
 */
#include "base/cli.h"
#include "base/clock.h"
#include "base/error.h"
#include "base/fsutil.h"
#include "base/measure.h"
#include "base/mem.h"
#include "base/plot.h"
#include "base/progress.h"
#include "dataset/dataset.h"
#include "dataset/dataset_default.h"
#include "loader/loader.h"
#include "sampler/batch.h"
#include "sampler/sampler.h"

#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define CH3_OUT_DIR PLOT_OUT_ROOT "/chapter-3"
#define CH3_PLOT "loader_sweep" /* the experiment's CSV, PNG and SVG in --out */
#define CH3_MAX_LIST 16
/* A trainer "starves" when it waits for data more than this share of its time. */
#define CH3_STARVING 0.10

struct ch3_args {
    const char *data;
    uint64_t batch, prefetch, epochs, warmup, batches, step_us;
    uint64_t slot_bytes; /* --slot-bytes: a padded batch's cap; 0: the loader sizes the slots */
    uint64_t world, rank, seed; /* the DistributedSampler the indices come from */
    uint64_t workers[CH3_MAX_LIST], work_us[CH3_MAX_LIST];
    int nworkers, nwork;
    int bench, memcpy_too, out_of_order;
    const char *out_dir;
};

static void ch3_usage(FILE *to)
{
    fprintf(to,
            "usage: chapter-3 [--workers=LIST] [--work-us=LIST] [--step-ms=MS] [--batches=N] [--batch=N]\n"
            "                 [--prefetch=N] [--slot-bytes=SIZE] [--data=PATH] [--world=W --rank=R] [--seed=S]\n"
            "                 [--out=DIR] [--plot]\n"
            "       chapter-3 --bench [--data=PATH] [--batch=256] [--workers=K] [--prefetch=2] [--epochs=1]\n"
            "                 [--warmup=0] [--work-us=US] [--step-ms=MS] [--out-of-order] [--memcpy]\n"
            "\n"
            "Chapter 3, the worker loader: K threads collate batches into a bounded ring ahead of the\n"
            "trainer, delivered in order. With no flags (or --plot): the lesson's experiment. For each\n"
            "per-sample decode cost and each worker count, a trainer whose step takes --step-ms runs\n"
            "--batches steps; the table shows its data-wait fraction (the share of time it starved),\n"
            "its throughput and the memory the ring holds. CSV, PNG and SVG go to --out.\n"
            "\n"
            "  --data=PATH      dataset (an IDX images file, .jsonl, or 'synthetic'); default:\n"
            "                   Fashion-MNIST's training images if installed, else synthetic 60000x784\n"
            "  --world=W        the trainer is rank R of W: its indices are the DistributedSampler's\n"
            "  --rank=R         share (chapter 2), shuffled anew each epoch (default 1 and 0: all of them)\n"
            "  --seed=S         the sampler's shuffle seed, as in chapter 2 (default 0)\n"
            "  --workers=LIST   worker threads, comma-separated (experiment default 0,1,2,4,8;\n"
            "                   --bench takes one value, default 0). 0 loads in the trainer's thread\n"
            "  --work-us=LIST   CPU microseconds of decode per sample (experiment default 0,10,25,60;\n"
            "                   --bench default 0)\n"
            "  --step-ms=MS     the simulated training step (experiment default 4; --bench default 0)\n"
            "  --batches=N      steps per experiment setting (default 24)\n"
            "  --batch=N        samples per batch (default 256)\n"
            "  --prefetch=N     batches in flight per worker (default 2, PyTorch's prefetch_factor)\n"
            "  --slot-bytes=SIZE  the most bytes a batch may take (K, M, G). Default: --batch records\n"
            "                   of the longest one; with variable-length records every row is padded\n"
            "                   to the batch's longest, so one long record sizes every slot: SIZE caps\n"
            "                   them, and a batch that needs more fails, naming itself\n"
            "  --epochs=N       --bench: epochs to load and time (default 1)\n"
            "  --warmup=N       --bench: untimed epochs first (page faults, thread start; default 0)\n"
            "  --out-of-order   --bench: deliver batches as they finish\n"
            "  --memcpy         --bench: also measure memcpy of the same bytes, one thread, same run\n"
            "  --bench          load whole epochs; the last line gives samples/s, MB/s, data-wait\n"
            "  --out=DIR        where CSV, PNG and SVG go (default " CH3_OUT_DIR ")\n"
            "  --plot           the experiment (the default run), for `make plots`\n"
            "  --help           this text\n");
}

static int ch3_parse(int argc, char **argv, struct ch3_args *a)
{
    enum { O_DATA = 1, O_WORKERS, O_WORK, O_STEP, O_BATCHES, O_BATCH, O_PREFETCH, O_EPOCHS, O_WARMUP, O_OUT, O_PLOT,
           O_BENCH, O_MEMCPY, O_OOO, O_WORLD, O_RANK, O_SEED, O_SLOT };
    static const struct option opts[] = {
        {"data", required_argument, 0, O_DATA},       {"workers", required_argument, 0, O_WORKERS},
        {"work-us", required_argument, 0, O_WORK},    {"step-ms", required_argument, 0, O_STEP},
        {"batches", required_argument, 0, O_BATCHES}, {"batch", required_argument, 0, O_BATCH},
        {"prefetch", required_argument, 0, O_PREFETCH}, {"epochs", required_argument, 0, O_EPOCHS},
        {"warmup", required_argument, 0, O_WARMUP},   {"out", required_argument, 0, O_OUT},
        {"plot", no_argument, 0, O_PLOT},             {"bench", no_argument, 0, O_BENCH},
        {"memcpy", no_argument, 0, O_MEMCPY},         {"out-of-order", no_argument, 0, O_OOO},
        {"world", required_argument, 0, O_WORLD},     {"rank", required_argument, 0, O_RANK},
        {"seed", required_argument, 0, O_SEED},       {"slot-bytes", required_argument, 0, O_SLOT},
        {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0},
    };
    int step_set = 0, rc = 0, c;
    double step_ms = 0;
    struct cli_given given = {0};
    opterr = 0;
    while (rc == 0 && (c = getopt_long(argc, argv, ":", opts, NULL)) != -1) {
        cli_given_add(&given, c);
        switch (c) {
        case O_DATA: rc = cli_parse_text("data", optarg, "a path or 'synthetic'", &a->data); break;
        case O_WORKERS: rc = cli_parse_list("workers", optarg, 0, 256, a->workers, CH3_MAX_LIST, &a->nworkers); break;
        case O_WORK: rc = cli_parse_list("work-us", optarg, 0, 1000000, a->work_us, CH3_MAX_LIST, &a->nwork); break;
        case O_STEP:
            rc = cli_parse_double_range("step-ms", optarg, 0, 60000, &step_ms);
            if (rc == 0 && step_ms > 0 && step_ms < 0.001) /* the step sleeps whole microseconds: not 0 */
                rc = err_set(ERR_ARG, "--step-ms: 0, or 0.001 (1 us, the step's resolution) to 60000, got '%s'",
                             optarg);
            step_set = 1;
            break;
        /* with --batch <= 2^20 and --batches <= 2^30, batch x batches stays far below 2^64 */
        case O_BATCHES: rc = cli_parse_range("batches", optarg, 1, 1u << 30, &a->batches); break;
        case O_BATCH: rc = cli_parse_range("batch", optarg, 1, 1u << 20, &a->batch); break;
        case O_PREFETCH: rc = cli_parse_range("prefetch", optarg, 1, 64, &a->prefetch); break;
        case O_EPOCHS: rc = cli_parse_range("epochs", optarg, 1, 1000, &a->epochs); break;
        case O_WARMUP: rc = cli_parse_range("warmup", optarg, 0, 1000, &a->warmup); break;
        case O_OUT: rc = cli_parse_text("out", optarg, "a directory", &a->out_dir); break;
        case O_PLOT: break; /* the default run is the plotted experiment */
        case O_BENCH: a->bench = 1; break;
        case O_MEMCPY: a->memcpy_too = 1; break;
        case O_OOO: a->out_of_order = 1; break;
        case O_WORLD: rc = cli_parse_range("world", optarg, 1, UINT32_MAX, &a->world); break;
        case O_RANK: rc = cli_parse_range("rank", optarg, 0, UINT64_MAX, &a->rank); break;
        case O_SEED: rc = cli_parse_seed("seed", optarg, &a->seed); break;
        case O_SLOT:
            rc = cli_parse_bytes("slot-bytes", optarg, 1, UINT64_MAX, &a->slot_bytes);
            break;
        case 'h': ch3_usage(stdout); exit(CLI_EXIT_OK);
        default: rc = cli_getopt_error(c, argv[optind - 1], opts);
        }
    }
    if (rc == 0 && optind < argc)
        rc = err_set(ERR_ARG, "unexpected argument '%s'", argv[optind]);
    if (rc == 0 && a->rank >= a->world)
        rc = err_set(ERR_ARG, "--rank: %llu is not below --world=%llu", (unsigned long long)a->rank,
                     (unsigned long long)a->world);
    if (rc == 0 && a->bench && (a->nworkers > 1 || a->nwork > 1))
        rc = err_set(ERR_ARG, "--bench takes one --workers and one --work-us value");
    /* a flag the chosen run would ignore is refused: it asked for another run */
    if (rc == 0 && !a->bench)
        rc = cli_refuse_given(&given, opts, (const int[]){O_EPOCHS, O_WARMUP, O_OOO, O_MEMCPY, 0},
                              "does nothing without --bench (the experiment runs --batches steps, in order)");
    if (rc == 0 && a->bench)
        rc = cli_refuse_given(&given, opts, (const int[]){O_BATCHES, O_OUT, O_PLOT, 0},
                              "does nothing with --bench (it belongs to the experiment, the default run)");
    if (rc == 0 && !a->bench) /* before the sweep, not after it */
        rc = fsutil_check_output_dir(a->out_dir, "--out");
    if (rc == 0 && !a->bench)
        rc = plot_check(a->out_dir, CH3_PLOT, "--out");
    if (rc == 0 && !a->bench && a->data)
        rc = plot_check_input(a->out_dir, CH3_PLOT, a->data, "--out");
    if (rc)
        return rc;
    if (!a->nworkers) { /* defaults depend on the mode */
        static const uint64_t sweep[] = {0, 1, 2, 4, 8};
        a->nworkers = a->bench ? 1 : 5;
        memcpy(a->workers, sweep, sizeof sweep);
    }
    if (!a->nwork) {
        static const uint64_t costs[] = {0, 10, 25, 60};
        a->nwork = a->bench ? 1 : 4;
        memcpy(a->work_us, costs, sizeof costs);
    }
    a->step_us = step_set ? (uint64_t)llround(step_ms * 1000) : a->bench ? 0 : 4000;
    return 0;
}

/* The data: --data, else dataset_open_default(). The loader needs at least one record. */
static int ch3_open_data(const char *data, dataset_t **ds)
{
    if (!data) {
        char why[768];
        int rc = dataset_open_default(NULL, ds, why, sizeof why);
        if (rc == 0 && dataset_info(*ds)->kind == DATASET_SYNTHETIC)
            printf("(%s)\n", why);
        return rc;
    }
    int rc = dataset_open(data, NULL, ds);
    if (rc < 0)
        return err_wrap(rc, "--data");
    if (dataset_info(*ds)->length == 0) { /* nothing to batch: say so, rather than run empty steps */
        dataset_close(*ds);
        *ds = NULL;
        return err_set(ERR_ARG, "--data: %s: the dataset has 0 records; the loader needs at least one", data);
    }
    return rc;
}

/* Rank a->rank's DistributedSampler over ds (PyTorch's defaults: shuffled,
 * padded), at epoch 0. */
static int ch3_sampler(const dataset_t *ds, const struct ch3_args *a, sampler_t **out)
{
    struct sampler_options so;
    sampler_options_default(&so);
    so.size = dataset_info(ds)->length;
    so.world = (uint32_t)a->world;
    so.rank = (uint32_t)a->rank;
    so.seed = a->seed;
    return sampler_create(&so, out);
}

/* The per-sample "decode": burns work_ns of CPU, as a real decoder would. */
static int ch3_decode(void *user, const struct loader_sample *s, void *data, uint64_t bytes)
{
    (void)s, (void)data, (void)bytes;
    clock_spin_ns(*(const uint64_t *)user);
    return 0;
}

struct ch3_run {
    uint32_t workers;
    uint64_t work_ns, step_ns, warmup, epochs;
    uint64_t steps;         /* the trainer stops an epoch after this many batches; 0: the whole epoch */
    int out_of_order;
    struct loader_stats st; /* of the last epoch */
    double samples_per_s, bytes_per_s, wait_fraction; /* over all epochs */
    /* Per step, over all epochs: the trainer's whole step, the part spent in
     * loader_next(), and the rest (its compute: the nominal step plus however
     * long the sleep overslept on a busy machine). step = wait + compute. */
    double step_s, wait_s, compute_s;
};

/* Loads warmup + epochs epochs of the sampler's indices, playing a trainer
 * whose step takes step_ns and that stops after `steps` batches (a run
 * shorter than an epoch); the last `epochs` are measured. 0 or a negative
 * ERR_*. */
static int ch3_run_loader(const dataset_t *ds, const struct ch3_args *a, struct ch3_run *r)
{
    struct loader_options opt;
    loader_options_default(&opt);
    opt.workers = r->workers;
    opt.prefetch = (uint32_t)a->prefetch;
    opt.max_batch = (uint32_t)a->batch;
    opt.slot_bytes = a->slot_bytes;
    opt.out_of_order = r->out_of_order;
    if (dataset_info(ds)->record_bytes == 0) /* JSONL: rows padded to the batch's longest record */
        opt.collate = loader_collate_pad;
    if (r->work_ns) {
        opt.transform = ch3_decode;
        opt.transform_user = &r->work_ns;
    }
    sampler_t *s;
    int rc = ch3_sampler(ds, a, &s);
    if (rc)
        return rc;
    loader_t *L;
    if ((rc = loader_open(ds, &opt, &L)) < 0) {
        sampler_destroy(s);
        return rc;
    }
    double elapsed = 0, wait = 0, samples = 0, bytes = 0, batches = 0;
    for (uint64_t e = 0; rc == 0 && e < r->warmup + r->epochs; e++) {
        sampler_set_epoch(s, e); /* as a training loop must, or every epoch repeats the order */
        if ((rc = sampler_begin(s)) < 0)
            break;
        struct loader_epoch ep = {.epoch = e, .indices = index_stream_of_sampler(s), .batch_size = (uint32_t)a->batch};
        /* The trainer's own clock: from the epoch's start to the end of its last step. */
        uint64_t t0 = clock_now_ns();
        rc = loader_start_epoch(L, &ep);
        struct loader_batch *b;
        for (uint64_t step = 0; rc == 0 && (!r->steps || step < r->steps); step++) {
            if ((rc = loader_next(L, &b)) != 1)
                break; /* 0: the epoch is done; < 0: err_msg() says why */
            if (r->step_ns)
                clock_sleep_ns(r->step_ns); /* the GPU computes; this thread waits for it */
            loader_release(L, b);
            rc = 0;
        }
        double took = (double)(clock_now_ns() - t0) * 1e-9;
        loader_stats(L, &r->st);
        if (e < r->warmup)
            continue;
        elapsed += took;
        wait += r->st.wait_s;
        samples += (double)r->st.samples;
        bytes += (double)r->st.bytes;
        batches += (double)r->st.batches;
    }
    r->samples_per_s = elapsed > 0 ? samples / elapsed : 0;
    r->bytes_per_s = elapsed > 0 ? bytes / elapsed : 0;
    r->wait_fraction = elapsed > 0 ? wait / elapsed : 0;
    r->step_s = batches > 0 ? elapsed / batches : 0;
    r->wait_s = batches > 0 ? wait / batches : 0;
    r->compute_s = r->step_s - r->wait_s;
    loader_close(L);
    sampler_destroy(s);
    return rc;
}

/* One thread's memcpy of as many records of the same size, in the sampler's
 * order (its epoch 0), from a copy in memory (not the file) into a
 * batch-sized buffer (lib/base/measure.h's gather), one trial per timed
 * epoch: the reference the loader's bytes/s is compared with. Not a bound: K
 * workers may beat one thread's copy. Bytes per second over all the trials,
 * as the loader's figure is over all its epochs. */
static int ch3_memcpy_bps(const dataset_t *ds, const struct ch3_args *a, double *bps)
{
    sampler_t *s;
    int rc = ch3_sampler(ds, a, &s);
    if (rc < 0)
        return rc;
    uint64_t count = sampler_len(s), *order = NULL;
    size_t bytes;
    if ((rc = mem_check_array("the epoch's order", count ? count : 1, sizeof *order, &bytes)) == 0 &&
        !(order = malloc(bytes)))
        rc = err_set(ERR_NOMEM, "out of memory for %llu indices", (unsigned long long)count);
    if (rc == 0)
        rc = sampler_begin(s);
    for (uint64_t k = 0; rc == 0 && k < count; k++)
        rc = sampler_get(s, k, &order[k]);
    struct measure_bandwidth bw;
    if (rc == 0 && (rc = measure_gather(dataset_info(ds)->max_record_bytes, dataset_info(ds)->length, order, count,
                                        a->batch, (int)a->epochs, MEASURE_WALL, &bw)) == 0)
        *bps = bw.mean_bps;
    free(order);
    sampler_destroy(s);
    return rc;
}

/* How the ring's slots were sized, said when it matters: with variable-length
 * records the automatic slot holds --batch rows padded to the longest record,
 * so one long record sizes the whole ring; --slot-bytes caps it. */
static void ch3_say_slot_sizing(const dataset_t *ds, const struct ch3_args *a)
{
    const struct dataset_info *in = dataset_info(ds);
    if (in->record_bytes)
        return;
    if (a->slot_bytes)
        printf("slots capped by --slot-bytes=%llu: a batch whose rows, padded to its longest record, need more "
               "fails, naming itself\n", (unsigned long long)a->slot_bytes);
    else
        printf("slots sized for %llu records padded to the longest record (%llu bytes; variable-length records): "
               "--slot-bytes caps them\n", (unsigned long long)a->batch, (unsigned long long)in->max_record_bytes);
}

static int ch3_bench(const dataset_t *ds, const struct ch3_args *a)
{
    struct ch3_run r = {
        .workers = (uint32_t)a->workers[0], .work_ns = a->work_us[0] * 1000, .step_ns = a->step_us * 1000,
        .warmup = a->warmup, .epochs = a->epochs, .out_of_order = a->out_of_order,
    };
    int rc = ch3_run_loader(ds, a, &r);
    if (rc)
        return rc;
    char extra[64] = "";
    if (a->memcpy_too) {
        double m = 0;
        if ((rc = ch3_memcpy_bps(ds, a, &m)) < 0)
            return err_wrap(rc, "--memcpy");
        printf("memcpy of as many records, same order, one thread: %.1f MB/s\n", m / 1e6);
        snprintf(extra, sizeof extra, " memcpy-MB/s=%.1f", m / 1e6);
    }
    printf("loader memory: %u slots x %.2f MiB = %.2f MiB\n", r.st.slots, (double)r.st.slot_bytes / (1 << 20),
           (double)r.st.memory_bytes / (1 << 20));
    ch3_say_slot_sizing(ds, a);
    printf("loader bench: data=%s workers=%u prefetch=%llu batch=%llu epochs=%llu warmup=%llu samples/s=%.0f MB/s=%.1f "
           "data-wait=%.3f%s\n",
           dataset_name(ds), r.workers, (unsigned long long)a->prefetch, (unsigned long long)a->batch,
           (unsigned long long)a->epochs, (unsigned long long)a->warmup, r.samples_per_s, r.bytes_per_s / 1e6,
           r.wait_fraction, extra);
    return 0;
}

/* The table's and the CSV's headers, written once the first setting ran, so
 * that a run failing on its first setting prints no half-made table. 0 and
 * *csv open, or an error. */
static int ch3_table_begin(const dataset_t *ds, const struct ch3_args *a, uint64_t steps, long cores,
                           const char *csv_path, struct plot_csv *csv)
{
    int rc = plot_csv_open(csv, csv_path, "--out");
    if (rc < 0)
        return rc;
    fprintf(csv->f, "work_us,workers,slots,memory_bytes,samples_per_s,step_ms,wait_fraction,max_wait_ms,compute_ms,"
                    "wait_ms,nominal_step_ms,starving\n");
    printf("%s: %llu steps of %llu samples, a nominal training step of %.1f ms, prefetch %llu, %ld CPU cores\n",
           dataset_name(ds), (unsigned long long)steps, (unsigned long long)a->batch,
           (double)a->step_us / 1000, (unsigned long long)a->prefetch, cores);
    ch3_say_slot_sizing(ds, a);
    printf("\n%8s %8s %6s %10s %11s %9s %9s %9s %10s %9s\n", "decode", "workers", "slots", "memory", "samples/s",
           "step", "compute", "wait", "data-wait", "");
    return 0;
}

/* The lesson: workers × decode cost against a fixed step. */
static int ch3_experiment(const dataset_t *ds, const struct ch3_args *a)
{
    uint64_t n = dataset_info(ds)->length;
    sampler_t *probe; /* --batches steps, or as many whole batches as this rank's epoch has (at least one) */
    int rc = ch3_sampler(ds, a, &probe);
    if (rc < 0)
        return rc;
    uint64_t per_rank = sampler_len(probe), steps = per_rank / a->batch ? per_rank / a->batch : 1;
    sampler_destroy(probe);
    if (steps > a->batches)
        steps = a->batches;
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    /* Touch every record once, so the first setting does not pay the mapping's
     * page faults alone (a real trainer pays them in its first epoch only). */
    uint8_t *scratch = malloc(dataset_info(ds)->max_record_bytes);
    for (uint64_t i = 0; scratch && i < n; i++) {
        struct dataset_record rec;
        rc = dataset_read(ds, i, scratch, dataset_info(ds)->max_record_bytes, &rec);
        if (rc) {
            free(scratch);
            return rc;
        }
    }
    free(scratch);
    char csv_path[PLOT_PATH_MAX], out_path[PLOT_PATH_MAX];
    if (plot_paths(a->out_dir, CH3_PLOT, csv_path, out_path) < 0)
        return err_wrap(ERR_ARG, "--out");
    struct plot_csv csv = {.f = NULL};
    progress_t prog;
    progress_begin(&prog, "sweep", (uint64_t)a->nwork * a->nworkers);
    int overslept = 0;
    for (int w = 0; rc == 0 && w < a->nwork; w++) {
        int enough = -1, relapse = -1; /* the first worker count that feeds, the first after it that starves */
        for (int k = 0; rc == 0 && k < a->nworkers; k++) {
            struct ch3_run r = {.workers = (uint32_t)a->workers[k], .work_ns = a->work_us[w] * 1000,
                                .step_ns = a->step_us * 1000, .steps = steps, .epochs = 1};
            rc = ch3_run_loader(ds, a, &r);
            if (rc == 0 && !csv.f)
                rc = ch3_table_begin(ds, a, steps, cores, csv_path, &csv);
            if (rc)
                break;
            /* data-wait = wait / step = wait / (wait + compute): the verdict,
             * the table and the CSV all come from these three numbers. */
            int starving = r.wait_fraction > CH3_STARVING;
            if (!starving && enough < 0)
                enough = (int)r.workers;
            else if (starving && enough >= 0 && relapse < 0)
                relapse = (int)r.workers;
            /* The sleep standing in for the GPU overslept by more than 10 %. */
            overslept |= a->step_us && r.compute_s * 1e6 > 1.1 * (double)a->step_us + 100;
            printf("%5llu us %8u %6u %6.1f MiB %11.0f %6.2f ms %6.2f ms %6.2f ms %9.1f%% %9s\n",
                   (unsigned long long)a->work_us[w], r.workers, r.st.slots, (double)r.st.memory_bytes / (1 << 20),
                   r.samples_per_s, r.step_s * 1e3, r.compute_s * 1e3, r.wait_s * 1e3, 100 * r.wait_fraction,
                   !a->step_us ? "no step" : starving ? "STARVING" : "fed");
            fprintf(csv.f, "%llu,%u,%u,%llu,%.1f,%.4f,%.4f,%.4f,%.4f,%.4f,%.4f,%d\n", (unsigned long long)a->work_us[w],
                    r.workers, r.st.slots, (unsigned long long)r.st.memory_bytes, r.samples_per_s, r.step_s * 1e3,
                    r.wait_fraction, r.st.max_wait_s * 1e3, r.compute_s * 1e3, r.wait_s * 1e3,
                    (double)a->step_us / 1e3, starving);
            progress_update(&prog, (uint64_t)w * a->nworkers + k + 1);
        }
        if (rc)
            break;
        double need = (double)(a->work_us[w] * a->batch) / (double)(a->step_us ? a->step_us : 1);
        if (a->step_us == 0)
            printf("  -> %llu us/sample: no training step, so the trainer only ever waits for data: read samples/s\n\n",
                   (unsigned long long)a->work_us[w]);
        else if (enough >= 0 && relapse >= 0)
            printf("  -> %llu us/sample: fed by %d worker%s, starving again at %d: more workers than cores\n"
                   "     take CPU from the trainer (decode needs %.1f cores' worth per step, this machine has %ld)\n\n",
                   (unsigned long long)a->work_us[w], enough, enough == 1 ? "" : "s", relapse, need, cores);
        else if (enough >= 0)
            printf("  -> %llu us/sample: fed from %d worker%s on (decode needs %.1f cores' worth per step)\n\n",
                   (unsigned long long)a->work_us[w], enough, enough == 1 ? "" : "s", need);
        else
            printf("  -> %llu us/sample: starves at every worker count (decode needs %.1f cores per step, "
                   "this machine has %ld)\n\n", (unsigned long long)a->work_us[w], need, cores);
    }
    progress_end(&prog, (uint64_t)a->nwork * a->nworkers);
    if (csv.f)
        rc = plot_csv_close(&csv, rc);
    if (rc)
        return rc;
    printf("step = the trainer's time per step = compute + wait. compute is the simulated step as measured: above\n"
           "the nominal %.1f ms when its sleep oversleeps. data-wait = wait / step: above %.0f %%, STARVING.\n",
           (double)a->step_us / 1000, 100 * CH3_STARVING);
    if (overslept)
        printf("(some steps took over 10 %% more than the nominal %.1f ms: when its sleep ended, the trainer's\n"
               "thread waited for a core the workers or other programs held; that time is compute, not data-wait)\n",
               (double)a->step_us / 1000);
    printf("memory: the ring holds max(workers,1) x prefetch slots of batch x record bytes; it grows with\n"
           "workers, not with the dataset.\n");
    printf("wrote %s\n", csv_path);
    rc = plot_render("chapters/03-loader/plot.gp", csv_path, out_path, "--out");
    if (rc == ERR_UNSUPPORTED) {
        printf("(%s)\n", err_msg());
        return 0;
    }
    if (rc == 0)
        printf("wrote %s.png and %s.svg\n", out_path, out_path);
    return rc;
}

int main(int argc, char **argv)
{
    struct ch3_args a = {.batch = 256, .prefetch = 2, .epochs = 1, .batches = 24, .world = 1, .out_dir = CH3_OUT_DIR};
    if (ch3_parse(argc, argv, &a))
        return cli_fail("chapter-3");
    dataset_t *ds;
    int rc = ch3_open_data(a.data, &ds);
    if (rc == 0) {
        rc = a.bench ? ch3_bench(ds, &a) : ch3_experiment(ds, &a);
        dataset_close(ds);
    }
    rc = cli_stdout_status(rc); /* the bench's last line is what scripts read */
    return rc ? cli_error("chapter-3") : CLI_EXIT_OK;
}
