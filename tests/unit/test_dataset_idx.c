/* test_dataset_idx: the IDX format (lib/dataset/dataset_idx.c).
 *
 * Golden records of the real Fashion-MNIST (when the Debian package is
 * installed), round trips through dataset_idx_write(), plain and gzipped files
 * giving the same bytes, the gzip cache being reused, and rebuilt when stale
 * or cut short, batch reads equal to record reads, concurrent
 * readers, and a heap that does not grow with the number of records read. Bad files are tested from the command line in
 * tests/programs/dataset_idx_bad_input.sh.
 */
#include "check.h"
#include "dataset/dataset.h"
#include "dataset/dataset_idx.h"
#include "base/error.h"
#include "heap.h"

#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

#define FASHION_DIR "/usr/share/datasets/fashion-mnist"

/* Caches of the installed files go to the test's own directory, not ~/.cache. */
static void use_test_cache_dir(void)
{
    char dir[512];
    snprintf(dir, sizeof dir, "%s/xdg-cache", check_tmpdir());
    setenv("XDG_CACHE_HOME", dir, 1);
    unsetenv("DDP_CACHE_DIR"); /* it would come first (lib/dataset/cache_dir.h) */
}

static dataset_t *open_synthetic(uint64_t records)
{
    struct dataset_options opt;
    dataset_options_default(&opt);
    opt.synthetic_records = records;
    opt.seed = 7;
    dataset_t *ds;
    CHECK_OK(dataset_open("synthetic", &opt, &ds));
    return ds;
}

/* Writes synthetic records as DIR/NAME-images-idx3-ubyte and its labels; returns the images path. */
static char *write_idx_pair(const char *name, uint64_t records)
{
    static char images[512];
    char labels[512];
    snprintf(images, sizeof images, "%s/%s-images-idx3-ubyte", check_tmpdir(), name);
    snprintf(labels, sizeof labels, "%s/%s-labels-idx1-ubyte", check_tmpdir(), name);
    dataset_t *syn = open_synthetic(records);
    CHECK_OK(dataset_idx_write(syn, 28, 28, images, labels));
    dataset_close(syn);
    return images;
}

/* gzip SRC into SRC.gz with zlib's own gzip writer. */
static void gzip_file(const char *src)
{
    char dst[600];
    snprintf(dst, sizeof dst, "%s.gz", src);
    FILE *in = fopen(src, "rb");
    gzFile out = gzopen(dst, "wb6");
    CHECK(in && out);
    char buf[65536];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, in)) > 0)
        CHECK_EQ(gzwrite(out, buf, (unsigned)n), (long long)n);
    fclose(in);
    CHECK_EQ(gzclose(out), Z_OK);
}

/* Every record and label of a and b are equal. */
static void check_same_records(const dataset_t *a, const dataset_t *b)
{
    CHECK_EQ_U64(dataset_info(a)->length, dataset_info(b)->length);
    uint8_t x[784], y[784];
    for (uint64_t i = 0; i < dataset_info(a)->length; i++) {
        struct dataset_record ra, rb;
        CHECK_OK(dataset_read(a, i, x, sizeof x, &ra));
        CHECK_OK(dataset_read(b, i, y, sizeof y, &rb));
        CHECK_EQ(ra.bytes, rb.bytes);
        CHECK_EQ(ra.label, rb.label);
        CHECK_MSG(memcmp(x, y, ra.bytes) == 0, "record %llu differs", (unsigned long long)i);
    }
}

TEST(fashion_mnist_golden_records)
{
    if (access(FASHION_DIR "/train-images-idx3-ubyte.gz", R_OK) != 0)
        CHECK_SKIP("Fashion-MNIST is not installed (apt-get install dataset-fashion-mnist)");
    use_test_cache_dir();
    dataset_t *ds;
    CHECK_OK(dataset_open(FASHION_DIR "/train-images-idx3-ubyte.gz", NULL, &ds));
    const struct dataset_info *in = dataset_info(ds);
    CHECK_EQ_U64(in->length, 60000);
    CHECK_EQ_U64(in->record_bytes, 784);
    CHECK_EQ(in->rows, 28);
    CHECK_EQ(in->cols, 28);
    CHECK(in->has_labels);
    /* The first ten training labels and CRC-32s of records 0 and 59999, computed
     * independently with Python's gzip and zlib modules. */
    static const int64_t first_labels[10] = {9, 0, 0, 3, 0, 2, 7, 2, 5, 5};
    uint8_t img[784];
    struct dataset_record rec;
    for (int i = 0; i < 10; i++) {
        CHECK_OK(dataset_read(ds, (uint64_t)i, img, sizeof img, &rec));
        CHECK_EQ(rec.label, first_labels[i]);
    }
    CHECK_OK(dataset_read(ds, 0, img, sizeof img, &rec));
    CHECK_EQ_U64(crc32(0, img, 784), 4067475125u);
    CHECK_OK(dataset_read(ds, 59999, img, sizeof img, &rec));
    CHECK_EQ_U64(crc32(0, img, 784), 0x6d595368u);
    const struct dataset_idx_files *f = dataset_idx_files(ds);
    CHECK(f != NULL);
    CHECK_CONTAINS(f->labels, "train-labels-idx1-ubyte.gz");
    CHECK_EQ_U64(f->images_cache_bytes, 64 + 16 + 60000 * 784); /* cache header, IDX header, records */
    dataset_close(ds);

    CHECK_OK(dataset_open(FASHION_DIR "/t10k-images-idx3-ubyte.gz", NULL, &ds));
    CHECK_EQ_U64(dataset_info(ds)->length, 10000);
    CHECK_OK(dataset_read(ds, 0, img, sizeof img, &rec));
    CHECK_EQ(rec.label, 9);
    dataset_close(ds);
}

TEST(write_then_read_round_trips)
{
    char *path = write_idx_pair("round", 1000);
    dataset_t *idx, *syn = open_synthetic(1000);
    CHECK_OK(dataset_open(path, NULL, &idx));
    CHECK_EQ(dataset_info(idx)->kind, DATASET_IDX);
    CHECK_EQ(dataset_info(idx)->has_labels, 1);
    char name[4200];
    snprintf(name, sizeof name, "idx:%s", path); /* the path as given */
    CHECK_STR(dataset_name(idx), name);
    check_same_records(idx, syn);
    struct dataset_record rec;
    uint8_t small[10];
    CHECK_ERR(dataset_read(idx, 1, small, sizeof small, &rec), ERR_RANGE, "record 1 has 784 bytes");
    CHECK_ERR(dataset_read(idx, 1000, small, sizeof small, &rec), ERR_RANGE, "record 1000 is out of range");
    dataset_close(idx);
    dataset_close(syn);
}

/* dataset_read_batch() of `count` indices with rows `stride` bytes apart gives
 * each row exactly what dataset_read() gives, and leaves the bytes of a row
 * past its record as they were (0xA5). */
static void check_batch_matches_reads(const dataset_t *ds, const uint64_t *idx, uint32_t count, uint64_t stride)
{
    uint64_t n = dataset_info(ds)->record_bytes;
    uint8_t *rows = malloc(count * stride), one[784];
    struct dataset_record *recs = malloc(count * sizeof *recs);
    CHECK(rows && recs && n <= sizeof one);
    memset(rows, 0xA5, count * stride);
    CHECK_OK(dataset_read_batch(ds, idx, count, rows, stride, recs));
    for (uint32_t i = 0; i < count; i++) {
        struct dataset_record rec;
        CHECK_OK(dataset_read(ds, idx[i], one, sizeof one, &rec));
        CHECK_EQ_U64(recs[i].bytes, rec.bytes);
        CHECK_EQ_U64(recs[i].length, rec.length);
        CHECK_EQ(recs[i].label, rec.label);
        CHECK_MSG(memcmp(rows + i * stride, one, n) == 0, "row %u (record %llu) differs from dataset_read()", i,
                  (unsigned long long)idx[i]);
        for (uint64_t b = n; b < stride; b++)
            CHECK_MSG(rows[i * stride + b] == 0xA5, "row %u: byte %llu past the record was written", i,
                      (unsigned long long)b);
    }
    free(rows);
    free(recs);
}

static dataset_t *open_idx_pair(const char *name, uint64_t records)
{
    dataset_t *ds;
    CHECK_OK(dataset_open(write_idx_pair(name, records), NULL, &ds));
    return ds;
}

TEST(batch_read_equals_one_record_at_a_time)
{
    dataset_t *ds = open_idx_pair("batch", 1000);
    /* 300 indices in a scrambled order, with repeats and both ends. */
    uint64_t idx[300];
    for (uint32_t i = 0; i < 300; i++)
        idx[i] = (i * 7919u + 13u) % 1000;
    idx[0] = 999;
    idx[299] = 0;
    check_batch_matches_reads(ds, idx, 300, 784);      /* rows packed, as collate stacks them */
    check_batch_matches_reads(ds, idx, 300, 784 + 17); /* rows wider than the record */
    check_batch_matches_reads(ds, idx + 5, 1, 784);    /* a batch of one */
    CHECK_OK(dataset_read_batch(ds, NULL, 0, NULL, 784, NULL)); /* count 0 touches nothing */
    dataset_close(ds);
}

TEST(batch_read_refuses_before_writing_anything)
{
    dataset_t *ds = open_idx_pair("batchbad", 100);
    uint64_t idx[20];
    for (uint32_t i = 0; i < 20; i++)
        idx[i] = i * 5;
    idx[13] = 100; /* one past the end, in the middle of the batch */
    uint8_t rows[20 * 784];
    struct dataset_record recs[20];
    memset(rows, 0xA5, sizeof rows);
    memset(recs, 0xA5, sizeof recs);
    CHECK_ERR(dataset_read_batch(ds, idx, 20, rows, 784, recs), ERR_RANGE,
              "/batchbad-images-idx3-ubyte: record 100 at position 13 of the batch is out of range "
              "(the dataset has 100 records)");
    idx[13] = 13;
    CHECK_ERR(dataset_read_batch(ds, idx, 20, rows, 700, recs), ERR_RANGE,
              "record 0 at position 0 of the batch has 784 bytes, a row only 700");
    for (size_t b = 0; b < sizeof rows; b++)
        CHECK_MSG(rows[b] == 0xA5, "byte %zu of the rows was written by a refused batch", b);
    for (size_t b = 0; b < sizeof recs; b++)
        CHECK_MSG(((const uint8_t *)recs)[b] == 0xA5, "byte %zu of recs was written by a refused batch", b);
    dataset_close(ds);
}

TEST(plain_and_gzipped_give_identical_bytes)
{
    char *path = write_idx_pair("gz", 3000);
    char images[512], gz[600], labels[512];
    snprintf(images, sizeof images, "%s", path);
    snprintf(labels, sizeof labels, "%s/gz-labels-idx1-ubyte", check_tmpdir());
    gzip_file(images);
    gzip_file(labels);
    snprintf(gz, sizeof gz, "%s.gz", images);
    dataset_t *plain, *zipped;
    CHECK_OK(dataset_open(images, NULL, &plain));
    CHECK_OK(dataset_open(gz, NULL, &zipped));
    CHECK(dataset_idx_files(plain)->images_cache == NULL);
    /* the gzipped images find the gzipped labels first */
    CHECK_CONTAINS(dataset_idx_files(zipped)->labels, "gz-labels-idx1-ubyte.gz");
    CHECK_CONTAINS(dataset_idx_files(zipped)->images_cache, "gz-images-idx3-ubyte.gz.ddpcache");
    check_same_records(plain, zipped);
    dataset_close(plain);
    dataset_close(zipped);
}

static int open_count_built(const char *path)
{
    dataset_t *ds;
    CHECK_OK(dataset_open(path, NULL, &ds));
    int built = dataset_idx_files(ds)->caches_built;
    uint8_t img[784];
    struct dataset_record rec;
    CHECK_OK(dataset_read(ds, 41, img, sizeof img, &rec));
    dataset_close(ds);
    return built;
}

TEST(gzip_cache_is_reused_and_rebuilt_when_stale)
{
    char *path = write_idx_pair("cache", 500);
    char gz[600], cache[700];
    gzip_file(path);
    snprintf(gz, sizeof gz, "%s.gz", path);
    snprintf(cache, sizeof cache, "%s.ddpcache", gz);
    unlink(path); /* only the gzipped images remain; labels stay plain */
    CHECK_EQ(open_count_built(gz), 1);
    CHECK_EQ(open_count_built(gz), 0); /* reused */

    /* the source changes (new mtime): the cache is stale and rebuilt */
    struct timespec times[2] = {{.tv_nsec = UTIME_OMIT}, {.tv_sec = 1000000000, .tv_nsec = 5}};
    CHECK(utimensat(AT_FDCWD, gz, times, 0) == 0);
    CHECK_EQ(open_count_built(gz), 1);
    CHECK_EQ(open_count_built(gz), 0);

    /* the cache is cut short (a disk filled up, someone truncated it): rebuilt */
    struct stat st;
    CHECK(stat(cache, &st) == 0);
    CHECK(truncate(cache, st.st_size - 100) == 0);
    CHECK_EQ(open_count_built(gz), 1);

    /* the cache is not a cache: rebuilt, not trusted */
    FILE *f = fopen(cache, "r+b");
    CHECK(f != NULL);
    fputs("garbage!", f);
    fclose(f);
    CHECK_EQ(open_count_built(gz), 1);

    /* and after all that, the bytes are still the synthetic ones */
    dataset_t *ds, *syn = open_synthetic(500);
    CHECK_OK(dataset_open(gz, NULL, &ds));
    check_same_records(ds, syn);
    dataset_close(ds);
    dataset_close(syn);
    /* no temporary file is left behind */
    char cmd[800];
    snprintf(cmd, sizeof cmd, "ls '%s' | grep -q tmp-", check_tmpdir());
    CHECK(system(cmd) != 0);
}

/* Processes decompressing one gzipped file at once: each maps the cache it
 * wrote itself, and all read the same records. */
TEST(gzip_cache_built_by_processes_at_once)
{
    char *path = write_idx_pair("racing", 3000);
    char gz[600], cache[700];
    gzip_file(path);
    snprintf(gz, sizeof gz, "%s.gz", path);
    snprintf(cache, sizeof cache, "%s.ddpcache", gz);
    for (int round = 0; round < 6; round++) {
        unlink(cache);
        pid_t kids[4];
        for (int k = 0; k < 4; k++) {
            if ((kids[k] = fork()) == 0) {
                dataset_t *ds, *syn = open_synthetic(3000);
                if (dataset_open(gz, NULL, &ds) < 0) {
                    fprintf(stderr, "process %d: %s\n", k, err_msg());
                    _exit(1);
                }
                uint8_t a[784], b[784];
                struct dataset_record ra, rb;
                int bad = dataset_read(ds, 2999, a, sizeof a, &ra) < 0 || dataset_read(syn, 2999, b, sizeof b, &rb) < 0 ||
                          memcmp(a, b, sizeof a) != 0;
                _exit(bad ? 2 : 0);
            }
        }
        for (int k = 0; k < 4; k++) {
            int status;
            CHECK_EQ(waitpid(kids[k], &status, 0), kids[k]);
            CHECK_MSG(WIFEXITED(status) && WEXITSTATUS(status) == 0, "round %d, process %d: status %#x", round, k,
                      status);
        }
    }
}

TEST(other_idx_tensors_are_records_along_dimension_0)
{
    /* an idx2 of 32-bit ints, 3 records of 2 ints, no labels beside it */
    char path[512];
    snprintf(path, sizeof path, "%s/ints.idx", check_tmpdir());
    static const uint8_t file[] = {0, 0, 0x0C, 2, 0, 0, 0, 3, 0, 0, 0, 2,
                                   0, 0, 0, 1, 0, 0, 0, 2, 0, 0, 0, 3, 0, 0, 0, 4, 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 6};
    FILE *f = fopen(path, "wb");
    CHECK(f && fwrite(file, 1, sizeof file, f) == sizeof file);
    fclose(f);
    dataset_t *ds;
    CHECK_OK(dataset_open(path, NULL, &ds));
    CHECK_EQ_U64(dataset_info(ds)->length, 3);
    CHECK_EQ_U64(dataset_info(ds)->record_bytes, 8);
    CHECK_EQ(dataset_info(ds)->has_labels, 0);
    uint8_t rec8[8];
    struct dataset_record rec;
    CHECK_OK(dataset_read(ds, 2, rec8, sizeof rec8, &rec));
    CHECK_EQ(rec.label, -1);
    CHECK(memcmp(rec8, file + 12 + 16, 8) == 0); /* raw big-endian bytes, as stored */
    dataset_close(ds);

    /* a labels file on its own: one-byte records that are their own labels */
    char *images = write_idx_pair("alone", 20);
    char labels[512];
    snprintf(labels, sizeof labels, "%.*s", (int)(strlen(images) - strlen("images-idx3-ubyte")), images);
    strcat(labels, "labels-idx1-ubyte");
    dataset_t *l, *full;
    CHECK_OK(dataset_open(labels, NULL, &l));
    CHECK_OK(dataset_open(images, NULL, &full));
    CHECK_EQ_U64(dataset_info(l)->record_bytes, 1);
    for (uint64_t i = 0; i < 20; i++) {
        uint8_t img[784];
        struct dataset_record a, b;
        CHECK_OK(dataset_read(l, i, img, sizeof img, &a));
        CHECK_OK(dataset_read(full, i, img, sizeof img, &b));
        CHECK_EQ(a.label, b.label);
    }
    dataset_close(l);
    dataset_close(full);
}

TEST(write_refuses_what_idx_cannot_hold)
{
    struct dataset_options opt;
    dataset_options_default(&opt);
    opt.synthetic_records = 10;
    opt.synthetic_min_bytes = 5; /* variable-size records */
    dataset_t *syn;
    CHECK_OK(dataset_open("synthetic", &opt, &syn));
    char path[512];
    snprintf(path, sizeof path, "%s/var-images-idx3-ubyte", check_tmpdir());
    CHECK_ERR(dataset_idx_write(syn, 28, 28, path, NULL), ERR_ARG, "variable-size records");
    CHECK(access(path, F_OK) != 0);
    dataset_close(syn);
}

struct reader {
    const dataset_t *ds, *ref;
    int failures;
};

static void *read_everything(void *arg)
{
    struct reader *r = arg;
    uint8_t x[784], y[784];
    /* each thread walks the records from a different start, so they overlap */
    uint64_t n = dataset_info(r->ds)->length, start = (uint64_t)(uintptr_t)r % n;
    for (uint64_t k = 0; k < n; k++) {
        uint64_t i = (start + k) % n;
        struct dataset_record a, b;
        if (dataset_read(r->ds, i, x, sizeof x, &a) || dataset_read(r->ref, i, y, sizeof y, &b) ||
            a.label != b.label || memcmp(x, y, 784) != 0)
            r->failures++;
    }
    return NULL;
}

TEST(concurrent_readers_see_the_same_records)
{
    char *path = write_idx_pair("threads", 2000);
    char gz[600];
    gzip_file(path);
    snprintf(gz, sizeof gz, "%s.gz", path);
    dataset_t *ds, *ref = open_synthetic(2000);
    CHECK_OK(dataset_open(gz, NULL, &ds));
    enum { THREADS = 4 };
    pthread_t t[THREADS];
    struct reader r[THREADS];
    for (int i = 0; i < THREADS; i++) {
        r[i] = (struct reader){.ds = ds, .ref = ref};
        CHECK(pthread_create(&t[i], NULL, read_everything, &r[i]) == 0);
    }
    for (int i = 0; i < THREADS; i++) {
        pthread_join(t[i], NULL);
        CHECK_EQ(r[i].failures, 0);
    }
    dataset_close(ds);
    dataset_close(ref);
}

/* Heap bytes in use after opening `path`, minus before (the dataset's own heap). */
static size_t heap_of_open(const char *path, dataset_t **ds)
{
    size_t before = heap_in_use();
    CHECK_OK(dataset_open(path, NULL, ds));
    return heap_in_use() - before;
}

TEST(heap_does_not_grow_with_records)
{
    if (!heap_measurable())
        CHECK_SKIP("a sanitizer replaces malloc, so mallinfo2 says nothing");
    char small[512], gz[600];
    snprintf(small, sizeof small, "%s", write_idx_pair("heap-small", 100));
    char *path = write_idx_pair("heap", 20000);
    gzip_file(path);
    snprintf(gz, sizeof gz, "%s.gz", path);
    dataset_t *ds;
    size_t small_heap = heap_of_open(small, &ds);
    dataset_close(ds);
    const char *paths[2] = {path, gz};
    for (int p = 0; p < 2; p++) {
        /* opening 200 times the records costs the same heap ... */
        CHECK_EQ_U64(heap_of_open(paths[p], &ds), small_heap);
        /* ... and reading every record allocates nothing */
        uint8_t img[784];
        struct dataset_record rec;
        size_t before = heap_in_use();
        for (uint64_t i = 0; i < 20000; i++)
            CHECK_OK(dataset_read(ds, i, img, sizeof img, &rec));
        CHECK_EQ_U64(heap_in_use(), before);
        dataset_close(ds);
    }
}
