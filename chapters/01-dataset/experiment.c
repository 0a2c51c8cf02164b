/* experiment: "two hundred million lines in a JSONL index exhaust RAM: what do
 * I do?" (see experiment.h). The lesson is README.md's last part, "The
 * 200-million-line JSONL question".
 *
 * The experiment generates a JSONL corpus ({"id":..,"text":"..","num_tokens":..}
 * per line, deterministic from the seed), then runs each way of reading it in
 * its own child process (lib/base/measure.h), so that the kernel's accounting
 * of that child (its peak resident set) is the strategy's honest one:
 *
 *   load-all      every line into a malloc'd string, pointers in a growing
 *                 array: what `lines = open(f).readlines()` does in Python
 *   streaming     a fixed 1 MiB buffer and a forward scan; random access
 *                 means rescanning from the start
 *   index (build) lib/dataset/dataset_jsonl.c, no index yet: one scan builds it,
 *                 then reads are mmapped lookups
 *   index (reuse) the same, the index already on disk: open is two mmaps
 *
 * Every strategy reads the same random indices; the first few records' bytes
 * are hashed and must agree across strategies (the "agree" column), so a fast
 * wrong answer cannot win.
 */
#include "experiment.h"

#include "base/clock.h"
#include "dataset/dataset.h"
#include "base/error.h"
#include "base/fsutil.h"
#include "base/hash.h"
#include "base/measure.h"
#include "base/plot.h"
#include "base/progress.h"
#include "base/units.h"
#include "base/verdict.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define READ_BUDGET_S 2.0     /* random reads per strategy: as many as fit in 2 s */
#define READ_MAX 4000000u     /* ... or this many, whichever comes first */
#define AGREE_READS 4u        /* records hashed to check that strategies agree */
#define STREAM_BUF (1u << 20) /* the streaming reader's one buffer */
#define RECORD_MAX 4096u      /* generated lines are shorter than this */

/* splitmix64 (hash.h) generates the corpus and the random indices; the same
 * seed gives the same file and the same reads. */
static uint64_t random_index(uint64_t seed, uint64_t k, uint64_t lines)
{
    return hash_splitmix64(seed ^ hash_splitmix64(k + 1)) % lines;
}

/* ---- the corpus --------------------------------------------------------------- */

static const char *const words[] = {
    "the",   "data",    "loader", "reads",  "a",      "record", "from",   "disk",    "and",   "every",  "rank",
    "sees",  "its",     "own",    "shard",  "of",     "each",   "epoch",  "while",   "GPU",   "waits",  "for",
    "batch", "tokens",  "model",  "learns", "slowly", "when",   "memory", "runs",    "out",   "index",  "maps",
    "file",  "offsets", "into",   "page",   "cache",  "lines",  "are",    "cheap",   "until", "there",  "two",
    "million", "hundred", "JSON", "text",   "with",   "one",    "field",  "length",  "is",    "not",    "free",
    "sample", "shuffle", "seed",  "all",    "reduce", "sum",    "over",   "ring",    "fast"};
#define WORD_COUNT (sizeof words / sizeof words[0])

/* Writes line `id` (with its newline) into out; returns its length. */
static size_t corpus_line(uint64_t seed, uint64_t id, char *out)
{
    uint64_t r = hash_splitmix64(seed ^ hash_splitmix64(id));
    unsigned n = 4 + (unsigned)(r % 33); /* 4 to 36 words: ~150-byte lines, like short chat turns */
    char text[RECORD_MAX];
    size_t t = 0;
    for (unsigned w = 0; w < n; w++) {
        r = hash_splitmix64(r);
        const char *word = words[r % WORD_COUNT];
        size_t len = strlen(word);
        if (w)
            text[t++] = ' ';
        memcpy(text + t, word, len);
        t += len;
    }
    return (size_t)sprintf(out, "{\"id\":%llu,\"text\":\"%.*s\",\"num_tokens\":%u}\n", (unsigned long long)id, (int)t,
                           text, n);
}

/* The bytes of the corpus of `lines` lines, estimated before writing any:
 * the mean of every part of a line but its id over the first 64 Ki lines
 * (they do not depend on the id), plus the ids' digits counted exactly. Long
 * double: 2^64 - 1 lines must be said to need more than 2^64 bytes, not wrap
 * around to a small number. */
static long double corpus_bytes_estimate(uint64_t lines, uint64_t seed)
{
    char line[RECORD_MAX + 128], id[24];
    uint64_t sample = lines < 65536 ? lines : 65536, rest = 0;
    for (uint64_t i = 0; i < sample; i++)
        rest += corpus_line(seed, i, line) - (size_t)sprintf(id, "%llu", (unsigned long long)i);
    long double total = (long double)rest / (long double)sample * (long double)lines;
    uint64_t from = 0, to = 10;
    for (unsigned digits = 1;; digits++, from = to, to *= 10) { /* the ids in [from, to) have `digits` digits */
        if (to >= lines || to > UINT64_MAX / 10) {
            total += (long double)(lines - from) * digits + (to < lines ? (long double)(lines - to) : 0);
            return total;
        }
        total += (long double)(to - from) * digits;
    }
}

/* Refuses, before a byte is written, a corpus of `lines` lines (unless it is
 * there already) with its offset index (and length table, `with_lengths`)
 * that cannot fit in the file system of `path`, saying what they need and
 * what is free. */
static int corpus_check_space(uint64_t lines, uint64_t seed, const char *path, int with_lengths)
{
    long double index = ((long double)lines + 1) * 8 * (with_lengths ? 2 : 1) + 144, corpus = 0;
    if (access(path, R_OK) != 0)
        corpus = corpus_bytes_estimate(lines, seed);
    char what[160], human[32];
    if (corpus + index >= 18446744073709551615.0L)
        return err_set(ERR_RANGE, "the JSONL corpus of %llu lines needs more than %s: try fewer --lines (the default "
                       "is %u)", (unsigned long long)lines, units_format_bytes(UINT64_MAX, human, sizeof human),
                       EXPERIMENT_DEFAULT_LINES);
    snprintf(what, sizeof what, "the JSONL corpus of %llu lines (%s) and its index%s", (unsigned long long)lines,
             corpus > 0 ? units_format_bytes((uint64_t)corpus, human, sizeof human) : "already written",
             with_lengths ? " and length table" : "");
    return fsutil_check_space(path, (uint64_t)(corpus + index), what);
}

/* work_dir/jsonl-LINES-SEED.jsonl, generated unless it is already there. It is
 * written under a temporary name and renamed (fsutil.h), so an interrupted run
 * never leaves a short file that a later run would take for the real one. */
static int corpus_make(uint64_t lines, uint64_t seed, const char *work_dir, int with_lengths, char *path, size_t len)
{
    if (snprintf(path, len, "%s/jsonl-%llu-%llu.jsonl", work_dir, (unsigned long long)lines,
                 (unsigned long long)seed) >= (int)len)
        return err_set(ERR_ARG, "%s: path too long", work_dir);
    int rc = corpus_check_space(lines, seed, path, with_lengths);
    if (rc < 0)
        return rc;
    if ((rc = fsutil_mkdir_p(work_dir)) < 0)
        return rc;
    if (access(path, R_OK) == 0)
        return 0;
    struct fsutil_tmp t;
    if ((rc = fsutil_tmp_open(&t, path, NULL)) < 0)
        return rc;
    char *buf = malloc(STREAM_BUF);
    if (!buf)
        rc = err_set(ERR_NOMEM, "out of memory for a %u-byte write buffer", STREAM_BUF);
    progress_t p;
    progress_begin(&p, "generating the JSONL corpus", lines);
    size_t used = 0;
    for (uint64_t i = 0; rc == 0 && i < lines; i++) {
        if (STREAM_BUF - used < RECORD_MAX + 128) {
            rc = fsutil_write_all(t.fd, buf, used, t.final);
            used = 0;
        }
        used += corpus_line(seed, i, buf + used);
        if ((i & 0xffff) == 0)
            progress_update(&p, i);
    }
    if (rc == 0)
        rc = fsutil_write_all(t.fd, buf, used, t.final);
    progress_end(&p, lines);
    free(buf);
    return fsutil_tmp_finish(&t, rc, 0);
}

/* ---- one strategy, measured in a child ----------------------------------------- */

struct result {
    double first_sample_s; /* start to the first random record in hand */
    double reads_per_s;    /* random reads, after the first */
    uint64_t reads;
    uint64_t agree_hash; /* FNV-1a of the first AGREE_READS records */
    uint64_t anon_kib, file_kib; /* RssAnon and RssFile at the end (/proc/self/status) */
    uint64_t peak_kib;           /* the child's peak resident set (measure_in_child) */
};

/* A strategy: prepare, then read record `index` into buf (RECORD_MAX bytes);
 * returns its length or a negative ERR_*. */
struct strategy {
    const char *name;
    int (*open)(void **state, const char *path);
    long (*read)(void *state, uint64_t index, char *buf);
};

static void rss_now(uint64_t *anon_kib, uint64_t *file_kib)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    *anon_kib = *file_kib = 0;
    while (f && fgets(line, sizeof line, f)) {
        unsigned long long v;
        if (sscanf(line, "RssAnon: %llu", &v) == 1)
            *anon_kib = v;
        else if (sscanf(line, "RssFile: %llu", &v) == 1)
            *file_kib = v;
    }
    if (f)
        fclose(f);
}

/* What one child process measures. */
struct strategy_call {
    const struct strategy *s;
    const char *path;
    uint64_t lines, seed;
};

/* Runs in the child: open, then random reads for READ_BUDGET_S. 0 or ERR_*. */
static int strategy_measure(void *arg, void *out)
{
    const struct strategy_call *call = arg;
    const struct strategy *s = call->s;
    struct result *r = out;
    static char buf[RECORD_MAX];
    void *state = NULL;
    double t0 = clock_now_s();
    int rc = s->open(&state, call->path);
    long len = rc < 0 ? rc : s->read(state, random_index(call->seed, 0, call->lines), buf);
    if (len < 0)
        return (int)len;
    r->first_sample_s = clock_now_s() - t0;
    r->agree_hash = hash_fnv1a(HASH_FNV1A_BASIS, buf, (size_t)len);
    double t1 = clock_now_s(), now = t1;
    uint64_t k = 1;
    for (; k < READ_MAX && (k < AGREE_READS || now - t1 < READ_BUDGET_S); k++) {
        len = s->read(state, random_index(call->seed, k, call->lines), buf);
        if (len < 0)
            return (int)len;
        if (k < AGREE_READS)
            r->agree_hash = hash_fnv1a(r->agree_hash, buf, (size_t)len);
        if ((k & 63) == 0 || k < 1024)
            now = clock_now_s();
    }
    now = clock_now_s();
    r->reads = k - 1;
    r->reads_per_s = (double)r->reads / (now - t1);
    rss_now(&r->anon_kib, &r->file_kib);
    return 0; /* the process ends here: what the strategy holds goes with it */
}

/* Measures `s` in a child process: its result and its own peak RSS. */
static int strategy_run(const struct strategy *s, const char *path, uint64_t lines, uint64_t seed, struct result *r)
{
    memset(r, 0, sizeof *r);
    struct strategy_call call = {.s = s, .path = path, .lines = lines, .seed = seed};
    int rc = measure_in_child(strategy_measure, &call, r, sizeof *r, &r->peak_kib);
    return rc < 0 ? err_wrap(rc, "strategy %s", s->name) : 0;
}

/* ---- (a) load everything -------------------------------------------------------- */

struct load_all {
    char **line;
    size_t *len;
};

static int load_all_open(void **state, const char *path)
{
    int fd;
    int rc = fsutil_open_read(path, NULL, &fd, NULL); /* a FIFO in the corpus's place is refused, not waited on */
    if (rc < 0)
        return rc;
    FILE *f = fdopen(fd, "rb");
    if (!f) {
        close(fd);
        return err_set(ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    }
    struct load_all *a = calloc(1, sizeof *a);
    size_t n = 0, cap = 0;
    char *line = NULL;
    size_t line_cap = 0;
    ssize_t got;
    while ((got = getline(&line, &line_cap, f)) > 0) {
        while (got > 0 && (line[got - 1] == '\n' || line[got - 1] == '\r'))
            got--;
        if (n == cap) { /* grows by doubling, as a Python list over-allocates */
            cap = cap ? 2 * cap : 1024;
            a->line = realloc(a->line, cap * sizeof *a->line);
            a->len = realloc(a->len, cap * sizeof *a->len);
            if (!a->line || !a->len)
                return err_set(ERR_NOMEM, "load-all: out of memory at line %zu", n);
        }
        a->line[n] = malloc((size_t)got + 1);
        if (!a->line[n])
            return err_set(ERR_NOMEM, "load-all: out of memory at line %zu", n);
        memcpy(a->line[n], line, (size_t)got);
        a->line[n][got] = '\0';
        a->len[n++] = (size_t)got;
    }
    free(line);
    fclose(f);
    *state = a;
    return 0;
}

static long load_all_read(void *state, uint64_t index, char *buf)
{
    struct load_all *a = state;
    memcpy(buf, a->line[index], a->len[index]);
    return (long)a->len[index];
}

/* ---- (b) streaming: one buffer, forward only ------------------------------------ */

struct stream {
    int fd;
    char *buf;
    size_t len, pos; /* bytes in buf, and the next unread one */
    uint64_t line;   /* the line that starts at buf[pos] */
};

static int stream_open(void **state, const char *path)
{
    struct stream *s = calloc(1, sizeof *s);
    char *buf = malloc(STREAM_BUF);
    if (!s || !buf) {
        free(s);
        free(buf);
        return err_set(ERR_NOMEM, "streaming: cannot allocate a %u-byte buffer", STREAM_BUF);
    }
    s->buf = buf;
    int rc = fsutil_open_read(path, NULL, &s->fd, NULL);
    if (rc < 0) {
        free(buf);
        free(s);
        return rc;
    }
    *state = s;
    return 0;
}

static int stream_fill(struct stream *s)
{
    ssize_t n = read(s->fd, s->buf, STREAM_BUF);
    if (n < 0)
        return err_set(ERR_IO, "streaming: read: %s", strerror(errno));
    s->len = (size_t)n;
    s->pos = 0;
    return n > 0;
}

static long stream_read(void *state, uint64_t index, char *out)
{
    struct stream *s = state;
    if (index < s->line) { /* behind us: the only way back is the start */
        lseek(s->fd, 0, SEEK_SET);
        s->len = s->pos = 0;
        s->line = 0;
    }
    long len = 0;
    for (;;) {
        if (s->pos == s->len) {
            int rc = stream_fill(s);
            if (rc <= 0)
                return rc < 0 ? rc : err_set(ERR_RANGE, "streaming: line %llu is past the end", (unsigned long long)index);
        }
        char *nl = memchr(s->buf + s->pos, '\n', s->len - s->pos);
        size_t end = nl ? (size_t)(nl - s->buf) : s->len;
        if (s->line == index) {
            memcpy(out + len, s->buf + s->pos, end - s->pos);
            len += (long)(end - s->pos);
        }
        s->pos = nl ? end + 1 : end;
        if (nl && s->line++ == index)
            return len;
    }
}

/* ---- (c) mmap + offset index: the dataset module -------------------------------- */

static int index_open(void **state, const char *path)
{
    dataset_t *ds;
    int rc = dataset_open(path, NULL, &ds);
    *state = ds;
    return rc;
}

static int index_open_cold(void **state, const char *path)
{
    char index[4200];
    snprintf(index, sizeof index, "%s.offsets", path);
    unlink(index);
    return index_open(state, path);
}

static long index_read(void *state, uint64_t index, char *buf)
{
    struct dataset_record rec;
    int rc = dataset_read(state, index, buf, RECORD_MAX, &rec);
    return rc < 0 ? rc : (long)rec.bytes;
}

static const struct strategy strategies[] = {
    {"load-all", load_all_open, load_all_read},
    {"streaming", stream_open, stream_read},
    {"index (build)", index_open_cold, index_read},
    {"index (reuse)", index_open, index_read},
};
#define STRATEGIES (sizeof strategies / sizeof strategies[0])

/* ---- the lesson ------------------------------------------------------------------ */

static double mib(uint64_t kib) { return (double)kib / 1024.0; }

static void print_extrapolation(uint64_t lines, uint64_t file_bytes, const struct result *r)
{
    const double target = 200e6;
    double per_line = (double)file_bytes / (double)lines;
    double load_all_per_line = (double)r[0].anon_kib * 1024.0 / (double)lines;
    printf("\nExtrapolated to 200 M lines (this run: %.1f bytes/line):\n", per_line);
    printf("  the file:            200e6 x %.1f B            = %6.1f GB on disk\n", per_line, target * per_line / 1e9);
    printf("  load-all heap:       200e6 x %.1f B (measured)  = %6.1f GB of RAM, before any training starts\n",
           load_all_per_line, target * load_all_per_line / 1e9);
    printf("    (CPython: at least 49 B of str header + 8 B of list slot on top of each line's bytes)\n");
    printf("  offset index:        200e6 x 8 B               = %6.1f GB on disk, mmapped: page cache, not heap\n",
           target * 8 / 1e9);
    printf("    (16 B/line = %.1f GB with the num_tokens length stored for token-budget batching)\n", target * 16 / 1e9);
    printf("  index heap:          O(1): %.1f MiB resident anonymous memory here, whatever the line count\n",
           mib(r[3].anon_kib));
}

int experiment_run(const struct experiment_options *opt)
{
    uint64_t lines = opt->lines ? opt->lines : EXPERIMENT_DEFAULT_LINES;
    char path[4096];
    int rc = corpus_make(lines, opt->seed, opt->work_dir, 0, path, sizeof path);
    if (rc < 0)
        return rc;
    struct stat st;
    if (stat(path, &st) != 0)
        return err_set(ERR_IO, "%s: cannot stat: %s", path, strerror(errno));
    printf("JSONL corpus: %s, %llu lines, %.1f MiB\n", path, (unsigned long long)lines, (double)st.st_size / 1048576.0);
    printf("Each strategy runs in its own process; the same %u records are checked to agree.\n\n", AGREE_READS);
    printf("%-14s %12s %12s %12s %15s %16s %10s %6s\n", "strategy", "peak RSS MiB", "heap MiB", "file MiB",
           "first sample ms", "random reads/s", "reads", "agree");
    struct result r[STRATEGIES];
    for (size_t i = 0; i < STRATEGIES; i++) {
        rc = strategy_run(&strategies[i], path, lines, opt->seed, &r[i]);
        if (rc < 0)
            return rc;
        printf("%-14s %12.1f %12.1f %12.1f %15.3f %16.0f %10llu %6s\n", strategies[i].name, mib(r[i].peak_kib),
               mib(r[i].anon_kib), mib(r[i].file_kib), r[i].first_sample_s * 1e3, r[i].reads_per_s,
               (unsigned long long)r[i].reads, r[i].agree_hash == r[0].agree_hash ? "yes" : "NO");
        fflush(stdout);
    }
    print_extrapolation(lines, (uint64_t)st.st_size, r);

    char csv[PLOT_PATH_MAX], out[PLOT_PATH_MAX];
    if (plot_paths(opt->out_dir, EXPERIMENT_PLOT, csv, out) < 0)
        return err_wrap(ERR_ARG, "--out");
    struct plot_csv f;
    if ((rc = plot_csv_open(&f, csv, "--out")) < 0)
        return rc;
    fprintf(f.f, "strategy,peak_rss_mib,heap_mib,file_mib,first_sample_s,random_reads_per_s,reads,agree,lines,file_mib_on_disk\n");
    for (size_t i = 0; i < STRATEGIES; i++)
        fprintf(f.f, "%s,%.2f,%.2f,%.2f,%.6f,%.1f,%llu,%d,%llu,%.2f\n", strategies[i].name, mib(r[i].peak_kib),
                mib(r[i].anon_kib), mib(r[i].file_kib), r[i].first_sample_s, r[i].reads_per_s,
                (unsigned long long)r[i].reads, r[i].agree_hash == r[0].agree_hash, (unsigned long long)lines,
                (double)st.st_size / 1048576.0);
    if ((rc = plot_csv_close(&f, 0)) < 0)
        return rc;
    for (size_t i = 1; i < STRATEGIES; i++)
        if (r[i].agree_hash != r[0].agree_hash)
            return err_set(ERR_FORMAT, "strategy %s read other bytes than load-all for the same indices",
                           strategies[i].name);
    fflush(stdout);
    rc = plot_render("chapters/01-dataset/plot.gp", csv, out, "--out");
    if (rc == ERR_UNSUPPORTED) {
        printf("\n%s\n", err_msg());
        return 0;
    }
    if (rc < 0)
        return rc;
    printf("\nwrote %s, %s.png, %s.svg\n", csv, out, out);
    return 0;
}

/* ---- the benchmark: index build against wc -l ---------------------------------------- */

static int bench_wc(const char *path, double *seconds)
{
    double t0 = clock_now_s();
    pid_t pid = fork();
    if (pid < 0)
        return err_set(ERR_IO, "fork: %s", strerror(errno));
    if (pid == 0) {
        int null = open("/dev/null", O_WRONLY);
        if (null >= 0)
            dup2(null, STDOUT_FILENO);
        execlp("wc", "wc", "-l", path, (char *)NULL);
        _exit(127);
    }
    int status;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    *seconds = clock_now_s() - t0;
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        return err_set(ERR_IO, "wc -l %s failed (status %#x)", path, status);
    return 0;
}

/* One open of `path`, by byte lengths or with the length field `field`, after
 * removing the sidecar `<path><drop>` (NULL: none) so that the open builds it. */
static int bench_open(const char *path, const char *field, const char *drop, double *seconds)
{
    char sidecar[4200];
    if (drop) {
        snprintf(sidecar, sizeof sidecar, "%s%s", path, drop);
        unlink(sidecar);
    }
    struct dataset_options opt;
    dataset_options_default(&opt);
    opt.length_field = field;
    double t0 = clock_now_s();
    dataset_t *ds;
    int rc = dataset_open(path, &opt, &ds);
    *seconds = clock_now_s() - t0;
    dataset_close(ds);
    return rc;
}

int experiment_bench_index(uint64_t lines, const char *work_dir)
{
    char path[4096];
    int rc = corpus_make(lines ? lines : EXPERIMENT_DEFAULT_LINES, 0, work_dir, 1, path, sizeof path);
    if (rc < 0)
        return rc;
    struct stat st;
    if (stat(path, &st) != 0)
        return err_set(ERR_IO, "%s: cannot stat: %s", path, strerror(errno));
    double best_build = 1e300, best_wc = 1e300;
    for (int run = 0; run < 3; run++) { /* alternated, so both see the same page cache and load */
        double s = 0;
        if ((rc = bench_wc(path, &s)) < 0)
            return rc;
        best_wc = s < best_wc ? s : best_wc;
        if ((rc = bench_open(path, NULL, ".offsets", &s)) < 0)
            return rc;
        best_build = s < best_build ? s : best_build;
    }
    double parsed, with, without; /* a length table costs jansson on every line, once; then switching is free */
    if ((rc = bench_open(path, "num_tokens", ".lengths.num_tokens", &parsed)) < 0 ||
        (rc = bench_open(path, "num_tokens", NULL, &with)) < 0 || (rc = bench_open(path, NULL, NULL, &without)) < 0)
        return rc;
    double mb = (double)st.st_size / 1e6, build = mb / best_build, wc = mb / best_wc, ratio = build / wc;
    printf("jsonl index build: %s (%.1f MB), best of 3\n", path, mb);
    printf("  %-34s %9.1f MB/s\n", "offset index build", build);
    printf("  %-34s %9.1f MB/s\n", "wc -l (same file, same run)", wc);
    printf("  %-34s %9.1f MB/s (one run; the table then holds num_tokens)\n", "length table (jansson, every line)",
           mb / parsed);
    printf("  %-34s %9.3f ms with num_tokens, %.3f ms without (both sidecars exist: nothing is rebuilt)\n",
           "then opening", with * 1e3, without * 1e3);
    struct verdict v = {.what = "JSONL offset-index build", .figure = build, .unit = "MB/s",
                        .peer = "wc -l, same file, same run", .peer_figure = wc, .peer_unit = "MB/s",
                        .ratio = ratio, .op = VERDICT_AT_LEAST, .target = 0.5};
    rc = verdict_print(stdout, &v);
    return rc < 0 ? rc : 0;
}
