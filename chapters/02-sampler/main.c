/* chapter-2: the sampler. Which indices does each rank see in each epoch?
 *
 * By default it runs DistributedSampler on 4 rank threads for a few epochs
 * and checks the partition (sim/partition.h): shards disjoint apart from the padding
 * repeats, their union complete, equal counts on every rank, a new order each
 * epoch; then the token-budget batch sampler the same way (--sampler=KIND
 * checks one of them, or the Feistel mode).
 *
 * --print-indices is a contract with PyTorch: it prints exactly
 *     list(DistributedSampler(range(N), num_replicas=W, rank=R, shuffle=...,
 *                             seed=S, drop_last=...))   after set_epoch(E)
 * one index per line (tests/crosscheck/sampler_torch.sh checks it against torch).
 *
 * --plot is the plotted experiment: how much of a step is padding, for the
 * plain batch sampler and the token-budget one (padding.c), into --out.
 *
 * Read lib/sampler/sampler.h and lib/sampler/batch.h for the modules,
 * sim/partition.h for the checks; check.c prints them, bench.c is --bench.
 * The lesson is README.md next to this file.
 */
#include "chapter2.h"
#include "padding.h"

#include "base/cli.h"
#include "base/error.h"
#include "base/fsutil.h"
#include "base/mem.h"
#include "base/plot.h"
#include "sim/launch.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The check keeps every rank's indices of every epoch (sim/partition.h). */
#define CH2_MAX_EPOCHS 1000
/* --max-samples: a batch buffer of this many indices is allocated up front. */
#define CH2_MAX_BATCH (1 << 20)
/* --bench's default n: the headline case, 10 million records. */
#define CH2_BENCH_SIZE 10000000
/* --plot's default --out. */
#define CH2_OUT_DIR PLOT_OUT_ROOT "/chapter-2"

static void ch2_usage(void)
{
    printf("usage: chapter-2 [options]\n"
           "\n"
           "Checks on W rank threads that the sampler partitions the dataset, epoch by epoch.\n"
           "\n"
           "  --sampler=KIND          check only this one: distributed (PyTorch's DistributedSampler),\n"
           "                          feistel (O(1)-memory keyed bijection, not PyTorch's order) or\n"
           "                          dynamic (token-budget batches). Default: distributed, then dynamic\n"
           "  --data=SPEC             dataset: a path (IDX, .jsonl) or 'synthetic' (default:\n"
           "                          Fashion-MNIST when installed, else synthetic)\n"
           "  --length-field=NAME     JSONL: the integer field that gives a record's length (default:\n"
           "                          its bytes); the dynamic sampler batches by it\n"
           "  --size=N                use a synthetic dataset of N records\n"
           "  --world=W               ranks (default 4)\n"
           "  --rank=R                the rank for --print-indices and --bench (default 0)\n"
           "  --seed=S                shuffle seed, -2^63 .. 2^64-1 as in Python (default 0)\n"
           "  --epoch=E               the epoch for --print-indices (default 0)\n"
           "  --epochs=K              epochs to check (default 3)\n"
           "  --no-shuffle            keep the order 0 .. N-1\n"
           "  --drop-last             cut the tail instead of padding\n"
           "  --no-set-epoch          forget set_epoch(): watch the order stop changing\n"
           "  --randperm=ALGO         auto (PyTorch >= 2.6, default), swap (PyTorch <= 2.5 for every\n"
           "                          N) or inside-out\n"
           "  --print-indices         print rank R's indices of epoch E, one per line (dynamic: one\n"
           "                          batch per line)\n"
           "  --batch-size=B          with --print-indices: B indices per line, the batches\n"
           "                          DataLoader(batch_size=B, sampler=DistributedSampler(...)) gives\n"
           "  --bench                 time rank R's epoch, PyTorch-exact vs Feistel, with peak memory\n"
           "  --plot                  the padding of a step: plain batches against token-budget ones, at\n"
           "                          budgets of 1 to 256 longest records (CSV, PNG, SVG into --out)\n"
           "  --out=DIR               where --plot writes (default " CH2_OUT_DIR ")\n"
           "\n"
           "dynamic sampler:\n"
           "  --budget=T              tokens per batch (or records, --batch-type=example; default 4096)\n"
           "  --batch-type=TYPE       token (default) or example\n"
           "  --sort-size=S           records per rank in a sorting buffer (default 100)\n"
           "  --max-samples=B         batch_size_sample_max: records per batch, at most (default 256)\n"
           "  --max-token-length=L    skip longer records (default 1000, or the budget if smaller)\n"
           "  --start-step=K          resume at step K of the epoch\n"
           "  --min-length=A          synthetic record lengths from A ... (default 16)\n"
           "  --max-length=B          ... to B (default 1024)\n"
           "  --help                  this text\n"
           "\n"
           "Exit status: 0 every check passed, 1 a check failed or an error (named on stderr), 2 a bad flag.\n");
}

enum {
    OPT_SAMPLER = 256, OPT_DATA, OPT_LENGTH_FIELD, OPT_SIZE, OPT_WORLD, OPT_RANK, OPT_SEED, OPT_EPOCH, OPT_EPOCHS,
    OPT_NO_SHUFFLE, OPT_DROP_LAST, OPT_NO_SET_EPOCH, OPT_RANDPERM, OPT_PRINT, OPT_BENCH, OPT_BUDGET, OPT_BATCH_TYPE,
    OPT_SORT_SIZE, OPT_MAX_SAMPLES, OPT_MAX_TOKEN_LENGTH, OPT_START_STEP, OPT_MIN_LENGTH, OPT_MAX_LENGTH, OPT_HELP,
    OPT_BATCH_SIZE, OPT_PLOT, OPT_OUT,
};

static const struct option ch2_options[] = {
    {"sampler", required_argument, 0, OPT_SAMPLER},
    {"data", required_argument, 0, OPT_DATA},
    {"length-field", required_argument, 0, OPT_LENGTH_FIELD},
    {"size", required_argument, 0, OPT_SIZE},
    {"world", required_argument, 0, OPT_WORLD},
    {"rank", required_argument, 0, OPT_RANK},
    {"seed", required_argument, 0, OPT_SEED},
    {"epoch", required_argument, 0, OPT_EPOCH},
    {"epochs", required_argument, 0, OPT_EPOCHS},
    {"no-shuffle", no_argument, 0, OPT_NO_SHUFFLE},
    {"drop-last", no_argument, 0, OPT_DROP_LAST},
    {"no-set-epoch", no_argument, 0, OPT_NO_SET_EPOCH},
    {"randperm", required_argument, 0, OPT_RANDPERM},
    {"print-indices", no_argument, 0, OPT_PRINT},
    {"batch-size", required_argument, 0, OPT_BATCH_SIZE},
    {"bench", no_argument, 0, OPT_BENCH},
    {"plot", no_argument, 0, OPT_PLOT},
    {"out", required_argument, 0, OPT_OUT},
    {"budget", required_argument, 0, OPT_BUDGET},
    {"batch-type", required_argument, 0, OPT_BATCH_TYPE},
    {"sort-size", required_argument, 0, OPT_SORT_SIZE},
    {"max-samples", required_argument, 0, OPT_MAX_SAMPLES},
    {"max-token-length", required_argument, 0, OPT_MAX_TOKEN_LENGTH},
    {"start-step", required_argument, 0, OPT_START_STEP},
    {"min-length", required_argument, 0, OPT_MIN_LENGTH},
    {"max-length", required_argument, 0, OPT_MAX_LENGTH},
    {"help", no_argument, 0, OPT_HELP},
    {0, 0, 0, 0},
};

/* A flag that must fit in 32 bits and be at least `min`. */
static int ch2_parse_u32(const char *flag, const char *text, uint32_t min, uint32_t *out)
{
    uint64_t v;
    int rc = cli_parse_range(flag, text, min, UINT32_MAX, &v);
    if (rc == 0)
        *out = (uint32_t)v;
    return rc;
}

struct ch2_flags {
    const char *data, *length_field, *out_dir;
    uint64_t size, min_length, max_length;
    int size_set, max_token_length_set, print, bench, plot;
    int sampler_set; /* --sampler given: check that one; else distributed, then dynamic */
};

/* A flag the chosen run would ignore is refused: the user asked for another
 * run than the one that would happen. */
static int ch2_refuse_unused(const struct cli_given *g, const struct ch2_config *cfg, const struct ch2_flags *fl)
{
    static const int dynamic_only[] = {OPT_BUDGET, OPT_BATCH_TYPE, OPT_SORT_SIZE, OPT_MAX_SAMPLES,
                                       OPT_MAX_TOKEN_LENGTH, OPT_START_STEP, OPT_MIN_LENGTH, OPT_MAX_LENGTH,
                                       OPT_LENGTH_FIELD, 0};
    /* the token-budget sampler runs when asked for, and second in the lesson */
    int dynamic_runs = !fl->bench && !fl->plot && (cfg->sampler == CH2_DYNAMIC || (!fl->sampler_set && !fl->print));
    int rc = 0;
    if (fl->plot)
        rc = cli_refuse_given(g, ch2_options,
                              (const int[]){OPT_SAMPLER, OPT_PRINT, OPT_BENCH, OPT_EPOCHS, OPT_NO_SET_EPOCH, OPT_RANK,
                                            OPT_EPOCH, OPT_DROP_LAST, OPT_BUDGET, OPT_BATCH_TYPE, OPT_MAX_SAMPLES,
                                            OPT_MAX_TOKEN_LENGTH, OPT_START_STEP, OPT_BATCH_SIZE, 0},
                              "does nothing with --plot (it compares the samplers at its own budgets, epoch 0)");
    else
        rc = cli_refuse_given(g, ch2_options, (const int[]){OPT_OUT, 0},
                              "does nothing without --plot (only the plot writes files)");
    if (rc == 0 && fl->plot) /* before the samplers run, not after */
        rc = fsutil_check_output_dir(fl->out_dir, "--out");
    if (rc == 0 && fl->plot)
        rc = plot_check(fl->out_dir, CH2_PADDING_PLOT, "--out");
    if (rc == 0 && fl->plot && fl->data)
        rc = plot_check_input(fl->out_dir, CH2_PADDING_PLOT, fl->data, "--out");
    if (rc == 0 && !dynamic_runs && !fl->plot)
        rc = cli_refuse_given(g, ch2_options, dynamic_only,
                              "is for the token-budget sampler (--sampler=dynamic), which this run does not use");
    if (rc == 0 && fl->bench)
        rc = cli_refuse_given(g, ch2_options, (const int[]){OPT_PRINT, OPT_DATA, OPT_EPOCHS, OPT_NO_SET_EPOCH, 0},
                              "does nothing with --bench (it times epoch --epoch of rank --rank over --size records)");
    if (rc == 0 && fl->print)
        rc = cli_refuse_given(g, ch2_options, (const int[]){OPT_EPOCHS, OPT_NO_SET_EPOCH, 0},
                              "does nothing with --print-indices (it prints the one epoch --epoch)");
    if (rc == 0 && !fl->print && !fl->bench && !fl->plot)
        rc = cli_refuse_given(g, ch2_options, (const int[]){OPT_RANK, OPT_EPOCH, 0},
                              "does nothing in the partition check, which runs every rank from epoch 0 (it is for "
                              "--print-indices and --bench)");
    if (rc == 0 && !cfg->dist.shuffle)
        rc = cli_refuse_given(g, ch2_options, (const int[]){OPT_RANDPERM, 0},
                              "does nothing with --no-shuffle (nothing is permuted)");
    if (rc == 0 && fl->sampler_set && cfg->sampler == CH2_FEISTEL)
        rc = cli_refuse_given(g, ch2_options, (const int[]){OPT_RANDPERM, 0},
                              "does nothing with --sampler=feistel (its order is a keyed bijection, not "
                              "torch.randperm's)");
    if (rc == 0 && fl->data && strcmp(fl->data, "synthetic") != 0)
        rc = cli_refuse_given(g, ch2_options, (const int[]){OPT_SIZE, OPT_MIN_LENGTH, OPT_MAX_LENGTH, 0},
                              "does nothing with --data=FILE (the file has its own records; it is for synthetic data)");
    return rc;
}

static int ch2_parse(int argc, char **argv, struct ch2_config *cfg, struct ch2_flags *fl)
{
    static const char *const samplers[] = {"distributed", "feistel", "dynamic", NULL};
    static const char *const randperms[] = {"auto", "swap", "inside-out", NULL};
    static const char *const types[] = {"token", "example", NULL};
    int opt, choice, rc = 0;
    struct cli_given given = {0};
    opterr = 0;
    while (rc == 0 && (opt = getopt_long(argc, argv, ":", ch2_options, NULL)) != -1) {
        cli_given_add(&given, opt);
        switch (opt) {
        case OPT_SAMPLER:
            if ((rc = cli_parse_choice("sampler", optarg, samplers, &choice)) == 0)
                cfg->sampler = (enum ch2_sampler)choice;
            fl->sampler_set = 1;
            break;
        case OPT_DATA: rc = cli_parse_text("data", optarg, "a path or 'synthetic'", &fl->data); break;
        case OPT_LENGTH_FIELD: rc = cli_parse_text("length-field", optarg, "a field name", &fl->length_field); break;
        case OPT_SIZE: rc = cli_parse_range("size", optarg, 0, UINT64_MAX, &fl->size); fl->size_set = 1; break;
        case OPT_WORLD: rc = ch2_parse_u32("world", optarg, 1, &cfg->dist.world); break;
        case OPT_RANK: rc = ch2_parse_u32("rank", optarg, 0, &cfg->dist.rank); break;
        case OPT_SEED:
            rc = cli_parse_seed("seed", optarg, &cfg->dist.seed);
            cfg->seed_negative = optarg[0] == '-';
            break;
        case OPT_EPOCH: rc = cli_parse_range("epoch", optarg, 0, UINT64_MAX, &cfg->epoch); break;
        case OPT_EPOCHS: rc = cli_parse_range("epochs", optarg, 1, CH2_MAX_EPOCHS, &cfg->epochs); break;
        case OPT_NO_SHUFFLE: cfg->dist.shuffle = 0; break;
        case OPT_DROP_LAST: cfg->dist.drop_last = 1; break;
        case OPT_NO_SET_EPOCH: cfg->set_epoch = 0; break;
        case OPT_RANDPERM:
            if ((rc = cli_parse_choice("randperm", optarg, randperms, &choice)) == 0)
                cfg->dist.randperm = (enum sampler_randperm)choice;
            break;
        case OPT_PRINT: fl->print = 1; break;
        case OPT_BATCH_SIZE: rc = cli_parse_range("batch-size", optarg, 1, UINT64_MAX, &cfg->batch_size); break;
        case OPT_BENCH: fl->bench = 1; break;
        case OPT_PLOT: fl->plot = 1; break;
        case OPT_OUT: rc = cli_parse_text("out", optarg, "a directory", &fl->out_dir); break;
        case OPT_BUDGET: rc = cli_parse_range("budget", optarg, 1, UINT64_MAX, &cfg->dyn.budget); break;
        case OPT_BATCH_TYPE:
            if ((rc = cli_parse_choice("batch-type", optarg, types, &choice)) == 0)
                cfg->dyn.type = (enum batch_type)choice;
            break;
        case OPT_SORT_SIZE: rc = cli_parse_range("sort-size", optarg, 1, UINT64_MAX, &cfg->dyn.sort_size); break;
        case OPT_MAX_SAMPLES: rc = cli_parse_range("max-samples", optarg, 1, CH2_MAX_BATCH, &cfg->dyn.max_samples); break;
        case OPT_MAX_TOKEN_LENGTH:
            rc = cli_parse_range("max-token-length", optarg, 0, UINT64_MAX, &cfg->dyn.max_token_length);
            fl->max_token_length_set = 1;
            break;
        case OPT_START_STEP: rc = cli_parse_range("start-step", optarg, 0, UINT64_MAX, &cfg->dyn.start_step); break;
        case OPT_MIN_LENGTH: rc = cli_parse_range("min-length", optarg, 1, UINT64_MAX, &fl->min_length); break;
        case OPT_MAX_LENGTH: rc = cli_parse_range("max-length", optarg, 1, UINT64_MAX, &fl->max_length); break;
        case OPT_HELP: ch2_usage(); exit(CLI_EXIT_OK);
        default: rc = cli_getopt_error(opt, argv[optind - 1], ch2_options);
        }
    }
    if (rc == 0 && optind < argc)
        rc = err_set(ERR_ARG, "unexpected argument '%s'", argv[optind]);
    if (rc == 0 && fl->length_field && !fl->data)
        rc = err_set(ERR_ARG, "--length-field: needs --data=FILE.jsonl, whose records have fields");
    if (rc == 0 && cfg->dist.rank >= cfg->dist.world)
        rc = err_set(ERR_ARG, "--rank: %u is not below --world=%u", cfg->dist.rank, cfg->dist.world);
    if (rc == 0 && fl->min_length > fl->max_length)
        rc = err_set(ERR_ARG, "--min-length: need 1 <= %llu <= --max-length=%llu",
                     (unsigned long long)fl->min_length, (unsigned long long)fl->max_length);
    if (rc == 0 && cfg->dyn.type == BATCH_TOKEN && cfg->dyn.max_token_length > cfg->dyn.budget) {
        if (fl->max_token_length_set)
            rc = err_set(ERR_ARG, "--max-token-length: %llu is above --budget=%llu, so such a record fits no batch",
                         (unsigned long long)cfg->dyn.max_token_length, (unsigned long long)cfg->dyn.budget);
        else
            cfg->dyn.max_token_length = cfg->dyn.budget;
    }
    if (rc == 0 && cfg->batch_size && (!fl->print || cfg->sampler == CH2_DYNAMIC))
        rc = err_set(ERR_ARG, "--batch-size: groups what --print-indices prints for the distributed sampler "
                     "(the token-budget sampler makes its own batches)");
    if (rc == 0 && cfg->dist.drop_last && fl->sampler_set && cfg->sampler == CH2_DYNAMIC)
        rc = err_set(ERR_ARG, "--drop-last: the token-budget sampler has none; it pads its batches to a multiple "
                     "of --world instead");
    if (rc == 0 && !fl->print && !fl->bench && cfg->dist.world > LAUNCH_MAX_THREADS)
        rc = err_set(ERR_ARG, "--world: the check runs a thread per rank, at most %d (--print-indices takes any)",
                     LAUNCH_MAX_THREADS);
    if (rc == 0 && fl->bench && fl->sampler_set)
        rc = err_set(ERR_ARG, "--bench: times the distributed and feistel modes, both, whatever --sampler says; "
                     "drop --sampler");
    if (rc == 0)
        rc = ch2_refuse_unused(&given, cfg, fl);
    /* The dynamic sampler shares the distributed flags. */
    cfg->dyn.world = cfg->dist.world;
    cfg->dyn.rank = cfg->dist.rank;
    cfg->dyn.seed = cfg->dist.seed;
    cfg->dyn.shuffle = cfg->dist.shuffle;
    cfg->dyn.randperm = cfg->dist.randperm;
    return rc;
}

/* The dataset the flags name. Without --data and --size: Fashion-MNIST when it
 * opens (the distributed sampler), else a synthetic dataset of its shape; the
 * dynamic sampler's default is synthetic with variable lengths. */
static int ch2_open_dataset(const struct ch2_config *cfg, const struct ch2_flags *fl, dataset_t **ds)
{
    struct dataset_options opt;
    dataset_options_default(&opt);
    if (fl->size_set)
        opt.synthetic_records = fl->size;
    opt.length_field = fl->length_field;
    if (cfg->sampler == CH2_DYNAMIC) {
        opt.synthetic_min_bytes = fl->min_length;
        opt.synthetic_bytes = fl->max_length;
    }
    if (fl->data) {
        int rc = dataset_open(fl->data, &opt, ds);
        return rc < 0 ? err_wrap(rc, "--data") : 0;
    }
    if (!fl->size_set && cfg->sampler != CH2_DYNAMIC) {
        char why[768];
        int rc = dataset_open_default(&opt, ds, why, sizeof why);
        if (rc == 0 && dataset_info(*ds)->kind == DATASET_SYNTHETIC)
            printf("note: %s\n", why);
        return rc;
    }
    return dataset_open("synthetic", &opt, ds);
}

/* Writes n as decimal into buf (ending at buf[len]), returns where it starts. */
static char *ch2_utoa(uint64_t n, char *end)
{
    do {
        *--end = (char)('0' + n % 10);
        n /= 10;
    } while (n);
    return end;
}

/* One batch on one line, indices separated by spaces. */
static void ch2_print_batch(const uint64_t *batch, int64_t count)
{
    for (int64_t k = 0; k < count; k++)
        printf(k ? " %llu" : "%llu", (unsigned long long)batch[k]);
    putchar('\n');
}

static int ch2_print_distributed(const struct ch2_config *cfg, uint64_t size)
{
    struct sampler_options opt = cfg->dist;
    opt.size = size;
    opt.mode = cfg->sampler == CH2_FEISTEL ? SAMPLER_FEISTEL : SAMPLER_TORCH;
    sampler_t *s;
    int rc = sampler_create(&opt, &s);
    if (rc == 0) {
        sampler_set_epoch(s, cfg->epoch);
        rc = sampler_begin(s);
    }
    if (rc == 0 && cfg->batch_size) { /* DataLoader(batch_size=B, sampler=...): BatchSampler's batches */
        batch_sampler_t b;
        uint64_t *batch = NULL;
        /* no batch holds more than the epoch: B near 2^64 is one batch of them all, as in PyTorch,
         * not a B x 8-byte buffer (which wraps around 64 bits) */
        uint64_t most = cfg->batch_size < sampler_len(s) ? cfg->batch_size : sampler_len(s);
        size_t bytes;
        if ((rc = batch_sampler_init(&b, index_stream_of_sampler(s), cfg->batch_size, 0)) == 0 &&
            (rc = mem_check_array("--batch-size: a batch of indices", most ? most : 1, sizeof *batch, &bytes)) == 0 &&
            !(batch = malloc(bytes)))
            rc = err_set(ERR_NOMEM, "cannot allocate a batch of %llu indices", (unsigned long long)most);
        for (uint64_t i = 0; rc == 0 && i < batch_sampler_len(&b); i++) {
            int64_t count = batch_sampler_get(&b, i, batch);
            if (count < 0)
                rc = (int)count;
            else
                ch2_print_batch(batch, count);
        }
        free(batch);
        sampler_destroy(s);
        return rc;
    }
    char line[24];
    for (uint64_t k = 0; rc == 0 && k < sampler_len(s); k++) {
        uint64_t index;
        if ((rc = sampler_get(s, k, &index)) == 0) {
            line[sizeof line - 1] = '\n';
            char *start = ch2_utoa(index, line + sizeof line - 1);
            fwrite(start, 1, (size_t)(line + sizeof line - start), stdout);
        }
    }
    sampler_destroy(s);
    return rc;
}

static int ch2_print_dynamic(const struct ch2_config *cfg, const dataset_t *ds)
{
    batch_dynamic_t *d;
    int rc = batch_dynamic_create(ds, &cfg->dyn, &d);
    if (rc < 0)
        return rc;
    batch_dynamic_set_epoch(d, cfg->epoch);
    uint64_t *batch = NULL;
    if ((rc = batch_dynamic_begin(d)) == 0 && !(batch = malloc(cfg->dyn.max_samples * sizeof *batch)))
        rc = err_set(ERR_NOMEM, "cannot allocate a batch of %llu indices", (unsigned long long)cfg->dyn.max_samples);
    for (uint64_t step = 0; rc == 0 && step < batch_dynamic_len(d); step++) {
        int64_t count = batch_dynamic_get(d, step, batch);
        if (count < 0) {
            rc = (int)count;
            break;
        }
        ch2_print_batch(batch, count);
    }
    free(batch);
    batch_dynamic_destroy(d);
    return rc;
}

/* Opens the dataset for cfg->sampler and prints its indices (--print-indices)
 * or runs its partition check: 0 passed, 1 a check failed, < 0 an error. */
static int ch2_run(const struct ch2_config *cfg, const struct ch2_flags *fl)
{
    dataset_t *ds;
    int rc = ch2_open_dataset(cfg, fl, &ds);
    if (rc < 0)
        return rc;
    if (fl->print && cfg->sampler == CH2_DYNAMIC)
        rc = ch2_print_dynamic(cfg, ds);
    else if (fl->print)
        rc = ch2_print_distributed(cfg, dataset_info(ds)->length);
    else if (cfg->sampler == CH2_DYNAMIC)
        rc = ch2_check_dynamic(cfg, ds);
    else
        rc = ch2_check_distributed(cfg, ds);
    dataset_close(ds);
    return rc;
}

int main(int argc, char **argv)
{
    struct ch2_config cfg = {.epochs = 3, .set_epoch = 1};
    sampler_options_default(&cfg.dist);
    cfg.dist.world = 4;
    batch_dynamic_options_default(&cfg.dyn);
    cfg.dyn.max_token_length = 1000; /* with lengths up to 1024, a few records are skipped and counted */
    struct ch2_flags fl = {.min_length = 16, .max_length = 1024, .out_dir = CH2_OUT_DIR};
    if (ch2_parse(argc, argv, &cfg, &fl) < 0)
        return cli_fail("chapter-2");

    int rc;
    if (fl.plot) { /* variable lengths: the token-budget sampler's dataset */
        cfg.sampler = CH2_DYNAMIC;
        dataset_t *ds;
        if ((rc = ch2_open_dataset(&cfg, &fl, &ds)) == 0) {
            rc = ch2_padding_plot(ds, &cfg.dyn, fl.out_dir);
            dataset_close(ds);
        }
    } else if (fl.bench) {
        cfg.dist.size = fl.size_set ? fl.size : CH2_BENCH_SIZE;
        rc = ch2_bench(&cfg);
    } else if (fl.print && cfg.sampler != CH2_DYNAMIC && !fl.data) {
        /* The PyTorch contract needs no records, only N: range(N). */
        rc = ch2_print_distributed(&cfg, fl.size_set ? fl.size : 60000);
    } else if (fl.print || fl.sampler_set) {
        rc = ch2_run(&cfg, &fl);
    } else {
        /* The lesson: both samplers, each on the dataset it suits. */
        rc = ch2_run(&cfg, &fl);
        if (rc >= 0) {
            printf("\n");
            cfg.sampler = CH2_DYNAMIC;
            int dyn = ch2_run(&cfg, &fl);
            rc = dyn < 0 ? dyn : rc | dyn;
        }
    }
    rc = cli_stdout_status(rc);
    return rc < 0 ? cli_error("chapter-2") : rc; /* 1: a check failed, said on stdout */
}
