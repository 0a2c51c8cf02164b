/* chapter-1: the dataset stage. Records by index, without loading the file.
 *
 * Where it sits: the first program of the course (read
 * chapters/01-dataset/README.md alongside). It opens a dataset through
 * lib/dataset/dataset.h (by default dataset_open_default(): Fashion-MNIST when
 * installed, else the synthetic stand-in),
 * shows what the open cost and what is on disk, and reads random records the
 * way a loader worker does. The flags look at one record (--get), validate
 * every record (--check), run the lesson's JSONL experiment (--experiment,
 * experiment.c) or a benchmark (--bench, bench_idx.c). The logic lives in the
 * modules; this file teaches and measures.
 */
#include "bench.h"
#include "experiment.h"

#include "base/cli.h"
#include "base/clock.h"
#include "dataset/dataset.h"
#include "dataset/dataset_default.h"
#include "dataset/dataset_idx.h"
#include "base/error.h"
#include "base/fsutil.h"
#include "base/plot.h"
#include "base/progress.h"

#include <ctype.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define CH1_DEMO_READS 100000u       /* random reads of the default run's demo */
#define CH1_HISTOGRAM_MAX 1000000u   /* the summary's label histogram looks at this many records at most */
#define CH1_CLASSES 10               /* MNIST and Fashion-MNIST both have 10 classes (labels 0..9) */
#define CH1_OUT_DIR PLOT_OUT_ROOT "/chapter-1"

/* Fashion-MNIST's class names, in label order (zalandoresearch/fashion-mnist, README "Labels"). */
static const char *const ch1_fashion_classes[CH1_CLASSES] = {
    "T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot",
};

struct ch1_args {
    const char *data;     /* NULL: the default (lib/dataset/dataset_default.h) */
    int get_set;
    uint64_t get;
    int check, experiment;
    const char *bench;    /* NULL, "all", or a name from ch1_benches */
    uint64_t lines, seed;
    const char *length_field;
    const char *out_dir;  /* --out: the experiment's CSV, PNG and SVG */
};

/* The JSONL index build, against wc -l (experiment.c owns the generated file). */
static int bench_jsonl(const struct bench_options *opt)
{
    return experiment_bench_index(opt->lines, opt->work_dir);
}

/* Every benchmark --bench can run; "all" runs them in this order. A new one
 * is one row here and its function in bench.h. */
static const struct {
    const char *name;
    const char *what;
    int (*run)(const struct bench_options *opt);
} ch1_benches[] = {
    {"idx", "random reads of records from mmapped IDX, one and a batch at a time, against memcpy", bench_idx},
    {"jsonl", "JSONL offset-index build in MB/s, against wc -l", bench_jsonl},
};
#define CH1_BENCHES (sizeof ch1_benches / sizeof ch1_benches[0])

static void ch1_usage(FILE *to)
{
    fprintf(to,
            "usage: chapter-1 [--data=PATH] [--get=I] [--check] [--experiment] [--plot] [--lines=N]\n"
            "                 [--seed=S] [--length-field=NAME] [--bench[=NAME]] [--help]\n"
            "\n"
            "Chapter 1, the dataset: records by index, without loading the file into memory.\n"
            "With no flags: open the dataset, print a summary (format, records, sizes on disk, time to\n"
            "open, labels) and time random reads of records, as a loader worker makes them.\n"
            "\n"
            "  --data=PATH          the dataset: an IDX images file (plain or .gz; its labels file is\n"
            "                       found beside it), a .jsonl file, a comma-separated shard list, or\n"
            "                       'synthetic'. Default: Fashion-MNIST's training images when the\n"
            "                       dataset-fashion-mnist package is installed, else synthetic\n"
            "  --get=I              print record I: its label, and the image as ASCII art (28x28) or\n"
            "                       its bytes as text or hex\n"
            "  --check              read and validate every record (sizes; labels 0..9 for IDX;\n"
            "                       JSON syntax and UTF-8 for JSONL); exit 0, or 1 with the first\n"
            "                       problem (file, line, byte offset)\n"
            "  --experiment, --plot the lesson's experiment: a generated JSONL file read three ways\n"
            "                       (load everything, chunks, mmap + offset index); table, CSV and\n"
            "                       plot into --out\n"
            "  --out=DIR            where the experiment's CSV, PNG and SVG go (default " CH1_OUT_DIR ")\n"
            "  --lines=N            lines of the JSONL file of the experiment and of the jsonl benchmark (default %u)\n"
            "  --seed=S             seed of the random reads and the generated data (default 0)\n"
            "  --length-field=NAME  JSONL: the integer field that gives a record's length (refused\n"
            "                       for IDX and synthetic data, whose records have no fields)\n"
            "  --bench[=NAME]       run one benchmark, or all of them (the default):\n",
            EXPERIMENT_DEFAULT_LINES);
    for (size_t i = 0; i < CH1_BENCHES; i++)
        fprintf(to, "                         %-6s %s\n", ch1_benches[i].name, ch1_benches[i].what);
    fprintf(to, "  --help               this text\n"
                "\n"
                "Errors exit 1 with 'chapter-1: <what, where>'; bad flags exit 2.\n");
}

static int ch1_parse(int argc, char **argv, struct ch1_args *a)
{
    enum { OPT_DATA = 1, OPT_GET, OPT_CHECK, OPT_EXPERIMENT, OPT_LINES, OPT_SEED, OPT_LENGTH, OPT_BENCH, OPT_OUT,
           OPT_HELP };
    static const struct option longopts[] = {
        {"data", required_argument, NULL, OPT_DATA},
        {"get", required_argument, NULL, OPT_GET},
        {"check", no_argument, NULL, OPT_CHECK},
        {"experiment", no_argument, NULL, OPT_EXPERIMENT},
        {"plot", no_argument, NULL, OPT_EXPERIMENT},
        {"lines", required_argument, NULL, OPT_LINES},
        {"seed", required_argument, NULL, OPT_SEED},
        {"length-field", required_argument, NULL, OPT_LENGTH},
        {"bench", optional_argument, NULL, OPT_BENCH},
        {"out", required_argument, NULL, OPT_OUT},
        {"help", no_argument, NULL, OPT_HELP},
        {NULL, 0, NULL, 0},
    };
    *a = (struct ch1_args){.lines = EXPERIMENT_DEFAULT_LINES, .out_dir = CH1_OUT_DIR};
    const char *bench_names[CH1_BENCHES + 2];
    for (size_t i = 0; i < CH1_BENCHES; i++)
        bench_names[i] = ch1_benches[i].name;
    bench_names[CH1_BENCHES] = "all";
    bench_names[CH1_BENCHES + 1] = NULL;
    int c, choice;
    struct cli_given given = {0};
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":", longopts, NULL)) != -1) {
        int rc = 0;
        cli_given_add(&given, c);
        switch (c) {
        case OPT_DATA: rc = cli_parse_text("data", optarg, "a path or 'synthetic'", &a->data); break;
        case OPT_GET: a->get_set = 1; rc = cli_parse_range("get", optarg, 0, UINT64_MAX, &a->get); break;
        case OPT_CHECK: a->check = 1; break;
        case OPT_EXPERIMENT: a->experiment = 1; break;
        case OPT_LINES: rc = cli_parse_range("lines", optarg, 1, UINT64_MAX, &a->lines); break;
        case OPT_SEED: rc = cli_parse_seed("seed", optarg, &a->seed); break;
        case OPT_LENGTH: rc = cli_parse_text("length-field", optarg, "a field name", &a->length_field); break;
        case OPT_BENCH:
            a->bench = "all";
            if (optarg && (rc = cli_parse_choice("bench", optarg, bench_names, &choice)) == 0)
                a->bench = bench_names[choice];
            break;
        case OPT_OUT: rc = cli_parse_text("out", optarg, "a directory", &a->out_dir); break;
        case OPT_HELP: ch1_usage(stdout); exit(CLI_EXIT_OK);
        default: rc = cli_getopt_error(c, argv[optind - 1], longopts);
        }
        if (rc < 0)
            return rc;
    }
    if (optind < argc)
        return err_set(ERR_ARG, "unexpected argument '%s'", argv[optind]);
    if (a->get_set + a->check + a->experiment + (a->bench != NULL) > 1)
        return err_set(ERR_ARG, "--get, --check, --experiment/--plot and --bench are separate runs: pick one");
    /* a flag the chosen run would ignore is refused: it asked for another run */
    int generates = a->experiment || (a->bench && strcmp(a->bench, "jsonl") == 0); /* reads only its own file */
    int sizes = a->experiment || (a->bench && strcmp(a->bench, "idx") != 0);      /* --lines sizes that file */
    int rc = a->experiment ? 0
                           : cli_refuse_given(&given, longopts, (const int[]){OPT_OUT, 0},
                                              "does nothing without --experiment (only the experiment writes files)");
    if (rc == 0 && !sizes)
        rc = cli_refuse_given(&given, longopts, (const int[]){OPT_LINES, 0},
                              "does nothing without --experiment or --bench=jsonl (it sizes the JSONL file they "
                              "generate)");
    if (rc == 0 && generates)
        rc = cli_refuse_given(&given, longopts, (const int[]){OPT_DATA, 0},
                              "does nothing with --experiment or --bench=jsonl (they read a JSONL file they generate)");
    if (rc == 0 && a->experiment && (rc = fsutil_check_output_dir(a->out_dir, "--out")) == 0)
        rc = plot_check(a->out_dir, EXPERIMENT_PLOT, "--out"); /* before the experiment's minutes, not after */
    return rc;
}

/* Where generated files go: $TMPDIR when set, else under build/. */
static const char *ch1_work_dir(char *buf, size_t cap)
{
    const char *tmp = getenv("TMPDIR");
    if (tmp && *tmp)
        snprintf(buf, cap, "%s/ddp-chapter-1", tmp);
    else
        snprintf(buf, cap, "build/tmp/chapter-1");
    return buf;
}

/* Opens the dataset, timing the open, and a buffer that holds any one record;
 * `why` (may be NULL) gets why this dataset. */
static int ch1_open(const struct ch1_args *a, dataset_t **ds, uint8_t **buf, double *seconds, char *why,
                    size_t why_len)
{
    struct dataset_options opt;
    dataset_options_default(&opt);
    opt.seed = a->seed;
    opt.length_field = a->length_field;
    double t0 = clock_now_s();
    int rc = a->data ? dataset_open(a->data, &opt, ds) : dataset_open_default(&opt, ds, why, why_len);
    *seconds = clock_now_s() - t0;
    if (a->data && why)
        snprintf(why, why_len, "from --data");
    if (rc < 0)
        return a->data ? err_wrap(rc, "--data") : rc;
    uint64_t cap = dataset_info(*ds)->max_record_bytes;
    if (!(*buf = malloc(cap ? cap : 1))) {
        dataset_close(*ds);
        return err_set(ERR_NOMEM, "out of memory for one record of %llu bytes", (unsigned long long)cap);
    }
    return 0;
}

static void ch1_close(dataset_t *ds, uint8_t *buf)
{
    free(buf);
    dataset_close(ds);
}

/* A label's name when the data is Fashion-MNIST, else "". */
static const char *ch1_class_name(const dataset_t *ds, int64_t label)
{
    return strstr(dataset_name(ds), "fashion") && label >= 0 && label < CH1_CLASSES ? ch1_fashion_classes[label]
                                                                                     : "";
}

/* ---- the default run: summary and random reads -------------------------- */

static void ch1_print_files(const dataset_t *ds)
{
    const struct dataset_idx_files *f = dataset_idx_files(ds);
    if (!f)
        return;
    printf("  images     %s: %llu bytes on disk\n", f->images, (unsigned long long)f->images_bytes);
    if (f->images_cache)
        printf("             mapped from its decompressed cache %s (%llu bytes)\n", f->images_cache,
               (unsigned long long)f->images_cache_bytes);
    if (f->labels)
        printf("  labels     %s: %llu bytes on disk\n", f->labels, (unsigned long long)f->labels_bytes);
    if (f->labels_cache)
        printf("             mapped from its decompressed cache %s (%llu bytes)\n", f->labels_cache,
               (unsigned long long)f->labels_cache_bytes);
}

static int ch1_print_labels(const dataset_t *ds, uint8_t *buf)
{
    const struct dataset_info *in = dataset_info(ds);
    if (!in->has_labels) {
        printf("  labels     none\n");
        return 0;
    }
    uint64_t n = in->length < CH1_HISTOGRAM_MAX ? in->length : CH1_HISTOGRAM_MAX, count[CH1_CLASSES + 1] = {0};
    for (uint64_t i = 0; i < n; i++) {
        struct dataset_record rec;
        int rc = dataset_read(ds, i, buf, in->max_record_bytes, &rec);
        if (rc < 0)
            return rc;
        count[rec.label >= 0 && rec.label < CH1_CLASSES ? rec.label : CH1_CLASSES]++;
    }
    printf("  labels     of %s%llu records:\n", n < in->length ? "the first " : "all ", (unsigned long long)n);
    for (int c = 0; c < CH1_CLASSES; c++)
        printf("             %d %-12s %8llu\n", c, ch1_class_name(ds, c), (unsigned long long)count[c]);
    if (count[CH1_CLASSES])
        printf("             other        %8llu\n", (unsigned long long)count[CH1_CLASSES]);
    return 0;
}

static int ch1_demo_reads(const struct ch1_args *a, const dataset_t *ds, uint8_t *buf)
{
    const struct dataset_info *in = dataset_info(ds);
    if (in->length == 0)
        return 0;
    uint64_t *idx = malloc(CH1_DEMO_READS * sizeof *idx);
    if (!idx)
        return err_set(ERR_NOMEM, "out of memory for %u indices", CH1_DEMO_READS);
    bench_fill_indices(idx, CH1_DEMO_READS, in->length, a->seed);
    struct dataset_record rec;
    int rc = 0;
    double t0 = clock_now_s();
    for (uint32_t i = 0; rc == 0 && i < CH1_DEMO_READS; i++)
        rc = dataset_read(ds, idx[i], buf, in->max_record_bytes, &rec);
    double secs = clock_now_s() - t0;
    if (rc == 0) {
        printf("\nrandom access: %u reads of random records (seed %llu), one thread: %.2f M records/s\n",
               CH1_DEMO_READS, (unsigned long long)a->seed, CH1_DEMO_READS / secs / 1e6);
        for (int i = 0; rc == 0 && i < 5; i++) {
            rc = dataset_read(ds, idx[i], buf, in->max_record_bytes, &rec);
            if (rc == 0)
                printf("  read %d: record %-8llu %llu bytes, label %lld %s\n", i, (unsigned long long)idx[i],
                       (unsigned long long)rec.bytes, (long long)rec.label, ch1_class_name(ds, rec.label));
        }
        printf("  (see one: --get=I; measure: make bench; the lesson's experiment: --experiment)\n");
    }
    free(idx);
    return rc;
}

static int ch1_summary(const struct ch1_args *a)
{
    dataset_t *ds;
    uint8_t *buf;
    double first, again;
    char why[768];
    int rc = ch1_open(a, &ds, &buf, &first, why, sizeof why);
    if (rc < 0)
        return rc;
    const struct dataset_idx_files *f = dataset_idx_files(ds);
    int built = f ? f->caches_built : 0;
    ch1_close(ds, buf);
    if ((rc = ch1_open(a, &ds, &buf, &again, NULL, 0)) < 0) /* the second open finds any cache the first one built */
        return rc;
    const struct dataset_info *in = dataset_info(ds);
    static const char *const kinds[] = {"synthetic", "IDX", "JSONL", "shards"};
    printf("dataset: %s (%s)\n", dataset_name(ds), why);
    printf("  format     %s, %llu records", kinds[in->kind], (unsigned long long)in->length);
    if (in->record_bytes)
        printf(" of %llu bytes", (unsigned long long)in->record_bytes);
    else
        printf(" of up to %llu bytes", (unsigned long long)in->max_record_bytes);
    if (in->rows)
        printf(" (%u x %u images)", in->rows, in->cols);
    printf("\n");
    ch1_print_files(ds);
    printf("  open       %.3f ms%s; opened again: %.3f ms\n", first * 1e3,
           built ? " (decompressed into the cache: the first open pays for gzip once)" : "", again * 1e3);
    rc = ch1_print_labels(ds, buf);
    if (rc == 0)
        rc = ch1_demo_reads(a, ds, buf);
    ch1_close(ds, buf);
    return rc;
}

/* ---- --get: one record ---------------------------------------------------- */

static void ch1_print_bytes(const uint8_t *b, uint64_t n, const struct dataset_info *in)
{
    /* An image: one character per pixel, darker glyphs for higher values, two
     * wide so the picture keeps its aspect ratio in a terminal. */
    static const char ramp[] = " .:-=+*#%@";
    if (in->rows && (uint64_t)in->rows * in->cols == n) {
        for (uint32_t r = 0; r < in->rows; r++) {
            for (uint32_t c = 0; c < in->cols; c++) {
                char g = ramp[b[(uint64_t)r * in->cols + c] * (sizeof ramp - 2) / 255];
                putchar(g);
                putchar(g);
            }
            putchar('\n');
        }
        return;
    }
    int text = 1;
    for (uint64_t i = 0; i < n && text; i++)
        text = isprint(b[i]) || isspace(b[i]) || b[i] >= 0x80; /* UTF-8 text passes too */
    if (text) {
        fwrite(b, 1, n, stdout);
        if (n && b[n - 1] != '\n')
            putchar('\n');
        return;
    }
    uint64_t shown = n < 512 ? n : 512; /* enough to recognise a record, short enough to read */
    for (uint64_t i = 0; i < shown; i += 16) {
        printf("%08llx ", (unsigned long long)i);
        for (uint64_t j = i; j < i + 16 && j < shown; j++)
            printf(" %02x", b[j]);
        putchar('\n');
    }
    if (shown < n)
        printf("... %llu more bytes\n", (unsigned long long)(n - shown));
}

static int ch1_get(const struct ch1_args *a, const dataset_t *ds, uint8_t *buf)
{
    const struct dataset_info *in = dataset_info(ds);
    struct dataset_record rec;
    int rc = dataset_read(ds, a->get, buf, in->max_record_bytes, &rec);
    if (rc == 0) {
        printf("record %llu of %s: %llu bytes", (unsigned long long)a->get, dataset_name(ds),
               (unsigned long long)rec.bytes);
        if (rec.length != rec.bytes)
            printf(", length %llu", (unsigned long long)rec.length);
        if (rec.label >= 0)
            printf(", label %lld %s", (long long)rec.label, ch1_class_name(ds, rec.label));
        printf("\n");
        ch1_print_bytes(buf, rec.bytes, in);
    }
    return rc;
}

/* ---- --check: every record -------------------------------------------------- */

static int ch1_check(const dataset_t *ds, uint8_t *buf)
{
    const struct dataset_info *in = dataset_info(ds);
    int rc = 0;
    progress_t bar;
    progress_begin(&bar, "check", in->length);
    for (uint64_t i = 0; rc == 0 && i < in->length; i++) {
        struct dataset_record rec;
        rc = dataset_read(ds, i, buf, in->max_record_bytes, &rec);
        if (rc == 0 && in->record_bytes && rec.bytes != in->record_bytes)
            rc = err_set(ERR_FORMAT, "%s: record %llu has %llu bytes, the dataset's records have %llu",
                         dataset_name(ds), (unsigned long long)i, (unsigned long long)rec.bytes,
                         (unsigned long long)in->record_bytes);
        if (rc == 0) /* JSON and UTF-8 for JSONL, labels for IDX, in shards as in files */
            rc = dataset_check_record(ds, i, CH1_CLASSES);
        progress_update(&bar, i);
    }
    progress_end(&bar, in->length);
    if (rc == 0)
        printf("check: %s: all %llu records OK (%s)\n", dataset_name(ds), (unsigned long long)in->length,
               in->has_labels ? "sizes, labels 0..9" : in->record_bytes ? "sizes" : "each one JSON, in UTF-8");
    return rc;
}

/* ---- --experiment and --bench ---------------------------------------------- */

static int ch1_experiment(const struct ch1_args *a)
{
    char work[4096];
    struct experiment_options opt = {
        .lines = a->lines,
        .work_dir = ch1_work_dir(work, sizeof work),
        .out_dir = a->out_dir,
        .seed = a->seed,
    };
    return experiment_run(&opt);
}

static int ch1_bench(const struct ch1_args *a)
{
    char work[4096];
    struct bench_options opt = {
        /* the benchmarks want real data when there is some; they generate their own otherwise */
        .data = a->data ? a->data : dataset_default_path(),
        .work_dir = ch1_work_dir(work, sizeof work),
        .seed = a->seed,
        .lines = a->lines,
    };
    for (size_t i = 0; i < CH1_BENCHES; i++) {
        if (strcmp(a->bench, "all") != 0 && strcmp(a->bench, ch1_benches[i].name) != 0)
            continue;
        int rc = ch1_benches[i].run(&opt);
        if (rc < 0)
            return err_wrap(rc, "bench %s", ch1_benches[i].name);
    }
    return 0;
}

int main(int argc, char **argv)
{
    struct ch1_args a;
    if (ch1_parse(argc, argv, &a) < 0)
        return cli_fail("chapter-1");
    int rc;
    if (a.experiment)
        rc = ch1_experiment(&a);
    else if (a.bench)
        rc = ch1_bench(&a);
    else {
        if (a.get_set || a.check) {
            dataset_t *ds;
            uint8_t *buf;
            double secs;
            rc = ch1_open(&a, &ds, &buf, &secs, NULL, 0);
            if (rc == 0) {
                rc = a.get_set ? ch1_get(&a, ds, buf) : ch1_check(ds, buf);
                ch1_close(ds, buf);
            }
        } else {
            rc = ch1_summary(&a);
        }
    }
    rc = cli_stdout_status(rc); /* a record printed by --get into a full disk is not a record */
    return rc < 0 ? cli_error("chapter-1") : CLI_EXIT_OK;
}
