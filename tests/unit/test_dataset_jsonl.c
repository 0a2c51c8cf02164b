/* test_dataset_jsonl: the JSONL format and shard lists (lib/dataset/dataset_jsonl.c,
 * lib/dataset/dataset_shards.c): what a record is (CRLF, blank lines, no final
 * newline), length fields, the offset index's binding to its data (stale,
 * foreign, truncated, corrupt indexes), the global index over shards, and
 * that reading costs no heap. */
#include "check.h"
#include "dataset/dataset.h"
#include "base/error.h"
#include "heap.h"

#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *tmp_path(const char *name)
{
    static char buf[4][4096];
    static int next;
    char *p = buf[next++ % 4];
    snprintf(p, 4096, "%s/%s", check_tmpdir(), name);
    return p;
}

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "wb");
    CHECK_MSG(f != NULL, "cannot write %s", path);
    CHECK_EQ(fwrite(text, 1, strlen(text), f), strlen(text));
    CHECK_EQ(fclose(f), 0);
}

static uint64_t file_size(const char *path)
{
    struct stat st;
    CHECK_EQ(stat(path, &st), 0);
    return (uint64_t)st.st_size;
}

/* Record i must read back as `want`, with batching length `length` (BYTES: its byte count). */
#define BYTES UINT64_MAX
static void check_record(dataset_t *ds, uint64_t i, const char *want, uint64_t length)
{
    char buf[256];
    struct dataset_record rec;
    CHECK_OK(dataset_read(ds, i, buf, sizeof buf, &rec));
    CHECK_EQ_U64(rec.bytes, strlen(want));
    CHECK_MSG(memcmp(buf, want, rec.bytes) == 0, "record %llu: expected '%s', got '%.*s'", (unsigned long long)i,
              want, (int)rec.bytes, buf);
    CHECK_EQ_U64(rec.length, length == BYTES ? strlen(want) : length);
    CHECK_EQ(rec.label, -1);
    uint64_t len;
    CHECK_OK(dataset_length_of(ds, i, &len));
    CHECK_EQ_U64(len, rec.length);
    CHECK(rec.bytes <= dataset_info(ds)->max_record_bytes);
}

static dataset_t *open_jsonl(const char *path, const char *field)
{
    struct dataset_options opt;
    dataset_options_default(&opt);
    opt.length_field = field;
    dataset_t *ds;
    CHECK_OK(dataset_open(path, &opt, &ds));
    return ds;
}

static int open_jsonl_rc(const char *path, const char *field)
{
    struct dataset_options opt;
    dataset_options_default(&opt);
    opt.length_field = field;
    dataset_t *ds = NULL;
    int rc = dataset_open(path, &opt, &ds);
    CHECK(rc < 0 ? ds == NULL : ds != NULL);
    dataset_close(ds);
    return rc;
}

TEST(jsonl_records_crlf_blank_lines_and_no_final_newline)
{
    const char *path = tmp_path("mixed.jsonl");
    write_file(path, "\n{\"a\":1}\n\n{\"b\": 22}\r\n  \r\n\t\n{\"c\":3}  \n [4]\n{\"d\":5}");
    dataset_t *ds = open_jsonl(path, NULL);
    CHECK_EQ(dataset_info(ds)->kind, DATASET_JSONL);
    CHECK_EQ_U64(dataset_info(ds)->length, 5);
    CHECK_EQ_U64(dataset_info(ds)->record_bytes, 0);
    CHECK_EQ(dataset_info(ds)->has_labels, 0);
    check_record(ds, 0, "{\"a\":1}", BYTES);
    check_record(ds, 1, "{\"b\": 22}", BYTES); /* CRLF: the \r goes with the line end */
    check_record(ds, 2, "{\"c\":3}", BYTES);   /* trailing JSON whitespace goes too */
    check_record(ds, 3, " [4]", BYTES);        /* leading whitespace stays */
    check_record(ds, 4, "{\"d\":5}", BYTES);   /* the last line, without a newline */
    struct dataset_record rec;
    char buf[8];
    CHECK_ERR(dataset_read(ds, 5, buf, sizeof buf, &rec), ERR_RANGE, "record 5 is out of range");
    CHECK_ERR(dataset_read(ds, 1, buf, 4, &rec), ERR_RANGE, "record 1 has 9 bytes, the buffer only 4");
    dataset_close(ds);
    CHECK_CONTAINS(tmp_path("mixed.jsonl.offsets"), ".offsets");
    CHECK(access(tmp_path("mixed.jsonl.offsets"), R_OK) == 0);
}

TEST(jsonl_one_line_files)
{
    const char *path = tmp_path("one.jsonl");
    write_file(path, "x");
    dataset_t *ds = open_jsonl(path, NULL);
    CHECK_EQ_U64(dataset_info(ds)->length, 1);
    check_record(ds, 0, "x", BYTES);
    dataset_close(ds);
    write_file(path, "{}\r\n");
    ds = open_jsonl(path, NULL);
    CHECK_EQ_U64(dataset_info(ds)->length, 1);
    check_record(ds, 0, "{}", BYTES);
    dataset_close(ds);
}

TEST(jsonl_length_field_is_parsed_once_and_stored)
{
    const char *path = tmp_path("tokens.jsonl");
    write_file(path, "{\"id\":0,\"num_tokens\":7}\n\n{\"num_tokens\":0,\"text\":\"a\\nb\"}\r\n{\"num_tokens\":123456789012}");
    dataset_t *ds = open_jsonl(path, "num_tokens");
    CHECK_EQ_U64(dataset_info(ds)->length, 3);
    check_record(ds, 0, "{\"id\":0,\"num_tokens\":7}", 7);
    uint64_t len;
    CHECK_OK(dataset_length_of(ds, 1, &len));
    CHECK_EQ_U64(len, 0);
    CHECK_OK(dataset_length_of(ds, 2, &len));
    CHECK_EQ_U64(len, 123456789012ull);
    dataset_close(ds);
    /* The same data without a length field: byte lengths, a rebuilt index. */
    ds = open_jsonl(path, NULL);
    check_record(ds, 0, "{\"id\":0,\"num_tokens\":7}", BYTES);
    dataset_close(ds);
}

TEST(jsonl_bad_lines_name_record_line_and_byte)
{
    const char *path = tmp_path("bad.jsonl");
    write_file(path, "{\"n\":1}\n\n{\"n\":2,}\n");
    CHECK_ERR(open_jsonl_rc(path, "n"), ERR_FORMAT, "bad.jsonl: record 1 (line 3, byte offset 9)");
    CHECK_ERR(open_jsonl_rc(path, "n"), ERR_FORMAT, "length field \"n\"");
    CHECK(access(tmp_path("bad.jsonl.offsets"), F_OK) != 0); /* nothing half-built is left */
    write_file(path, "{\"n\":1}\n{\"m\":2}\n");
    CHECK_ERR(open_jsonl_rc(path, "n"), ERR_FORMAT, "record 1 (line 2, byte offset 8): the length field is missing");
    write_file(path, "{\"n\":\"7\"}\n");
    CHECK_ERR(open_jsonl_rc(path, "n"), ERR_FORMAT, "record 0 (line 1, byte offset 0): the length field is not an integer");
    write_file(path, "{\"n\":-1}\n");
    CHECK_ERR(open_jsonl_rc(path, "n"), ERR_FORMAT, "negative");
    write_file(path, "[1,2]\n");
    CHECK_ERR(open_jsonl_rc(path, "n"), ERR_FORMAT, "not a JSON object");
    CHECK_OK(open_jsonl_rc(path, NULL)); /* without a length field, nothing is parsed */
}

TEST(jsonl_missing_directory_empty_and_blank_files)
{
    CHECK_ERR(open_jsonl_rc(tmp_path("absent.jsonl"), NULL), ERR_IO, "absent.jsonl: cannot open");
    const char *dir = tmp_path("dir.jsonl");
    CHECK_EQ(mkdir(dir, 0755), 0);
    CHECK_ERR(open_jsonl_rc(dir, NULL), ERR_IO, "dir.jsonl: not a regular file (a directory)");
    const char *path = tmp_path("empty.jsonl");
    write_file(path, "");
    CHECK_ERR(open_jsonl_rc(path, NULL), ERR_FORMAT, "empty.jsonl: the file is empty");
    write_file(path, "\n \r\n\n");
    CHECK_ERR(open_jsonl_rc(path, NULL), ERR_FORMAT, "no records (5 bytes, only blank lines)");
}

/* Opens `path` and checks its records are "{"v":FIRST}", "{"v":FIRST+1}", ... */
static void check_counting_file(const char *path, int first, int count)
{
    dataset_t *ds = open_jsonl(path, "v");
    CHECK_EQ_U64(dataset_info(ds)->length, (uint64_t)count);
    for (int i = 0; i < count; i++) {
        char want[32];
        snprintf(want, sizeof want, "{\"v\":%d}", first + i);
        check_record(ds, (uint64_t)i, want, (uint64_t)(first + i));
    }
    dataset_close(ds);
}

static void write_counting_file(const char *path, int first, int count)
{
    FILE *f = fopen(path, "wb");
    CHECK(f != NULL);
    for (int i = 0; i < count; i++)
        fprintf(f, "{\"v\":%d}\n", first + i);
    CHECK_EQ(fclose(f), 0);
}

TEST(jsonl_stale_index_is_rebuilt)
{
    const char *path = tmp_path("stale.jsonl");
    write_counting_file(path, 10, 50);
    check_counting_file(path, 10, 50);
    /* Same size, other content, mtime put back: the head checksum differs. */
    struct stat before;
    CHECK_EQ(stat(path, &before), 0);
    write_counting_file(path, 20, 50);
    struct timespec times[2] = {before.st_atim, before.st_mtim};
    CHECK_EQ(utimensat(AT_FDCWD, path, times, 0), 0);
    check_counting_file(path, 20, 50);
    /* Appended records: the size differs. */
    FILE *f = fopen(path, "ab");
    fputs("{\"v\":70}\n", f);
    fclose(f);
    dataset_t *ds = open_jsonl(path, "v");
    CHECK_EQ_U64(dataset_info(ds)->length, 51);
    check_record(ds, 50, "{\"v\":70}", 70);
    dataset_close(ds);
}

static void copy_file(const char *from, const char *to)
{
    FILE *in = fopen(from, "rb"), *out = fopen(to, "wb");
    CHECK(in && out);
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, in)) > 0)
        CHECK_EQ(fwrite(buf, 1, n, out), n);
    fclose(in);
    CHECK_EQ(fclose(out), 0);
}

TEST(jsonl_foreign_truncated_and_garbage_indexes_are_rebuilt)
{
    const char *a = tmp_path("a.jsonl"), *b = tmp_path("b.jsonl");
    write_counting_file(a, 0, 30);
    write_counting_file(b, 100, 40);
    check_counting_file(a, 0, 30);
    check_counting_file(b, 100, 40);
    const char *ai = tmp_path("a.jsonl.offsets"), *bi = tmp_path("b.jsonl.offsets");
    uint64_t good = file_size(ai);
    copy_file(bi, ai); /* another file's index */
    check_counting_file(a, 0, 30);
    CHECK_EQ_U64(file_size(ai), good);
    CHECK_EQ(truncate(ai, (off_t)good - 8), 0); /* truncated */
    check_counting_file(a, 0, 30);
    CHECK_EQ_U64(file_size(ai), good);
    CHECK_EQ(truncate(ai, 10), 0); /* truncated inside the header */
    check_counting_file(a, 0, 30);
    write_file(ai, "not an index at all, just text that is long enough to look like a header to a careless reader");
    check_counting_file(a, 0, 30);
    CHECK_EQ_U64(file_size(ai), good);
}

TEST(jsonl_corrupt_index_body_is_an_error_not_a_crash)
{
    const char *path = tmp_path("body.jsonl");
    write_counting_file(path, 0, 5);
    check_counting_file(path, 0, 5);
    /* A valid header over a damaged entry: record 2's offset far past the data. */
    int fd = open(tmp_path("body.jsonl.offsets"), O_RDWR);
    CHECK(fd >= 0);
    uint64_t bad = 1ull << 40;
    CHECK_EQ(pwrite(fd, &bad, sizeof bad, 72 + 2 * 16), (ssize_t)sizeof bad);
    close(fd);
    dataset_t *ds = open_jsonl(path, "v");
    char buf[64];
    struct dataset_record rec;
    CHECK_ERR(dataset_read(ds, 2, buf, sizeof buf, &rec), ERR_FORMAT, "body.jsonl.offsets: record 2: entry");
    CHECK_ERR(dataset_read(ds, 1, buf, sizeof buf, &rec), ERR_FORMAT, "delete the index to rebuild it");
    check_record(ds, 3, "{\"v\":3}", 3);
    dataset_close(ds);
}

/* Opening a FIFO for reading waits for a writer: it must fail at once instead,
 * as data and as the sidecar index someone left in the index's place. */
TEST(jsonl_fifo_is_refused_not_waited_on)
{
    const char *fifo = tmp_path("fifo.jsonl");
    CHECK_EQ(mkfifo(fifo, 0600), 0);
    CHECK_ERR(open_jsonl_rc(fifo, NULL), ERR_IO, "fifo.jsonl: not a regular file (a FIFO)");
    const char *path = tmp_path("fifo_index.jsonl");
    write_counting_file(path, 0, 3);
    CHECK_EQ(mkfifo(tmp_path("fifo_index.jsonl.offsets"), 0600), 0);
    check_counting_file(path, 0, 3); /* rebuilt over the FIFO */
    struct stat st;
    CHECK_EQ(stat(tmp_path("fifo_index.jsonl.offsets"), &st), 0);
    CHECK(S_ISREG(st.st_mode));
}

TEST(jsonl_index_goes_to_the_cache_when_it_cannot_go_beside)
{
    const char *path = tmp_path("cached.jsonl");
    write_counting_file(path, 0, 3);
    CHECK_EQ(mkdir(tmp_path("cached.jsonl.offsets"), 0755), 0); /* the spot is taken */
    setenv("DDP_CACHE_DIR", tmp_path("cache/ddp"), 1);
    check_counting_file(path, 0, 3);
    check_counting_file(path, 0, 3); /* the second open finds it there */
}

TEST(jsonl_input_files_are_never_modified)
{
    const char *path = tmp_path("ro.jsonl");
    write_file(path, "{\"n\":1}\r\n\n{\"n\":2}");
    struct stat before, after;
    CHECK_EQ(stat(path, &before), 0);
    dataset_close(open_jsonl(path, "n"));
    dataset_close(open_jsonl(path, NULL));
    CHECK_EQ(open_jsonl_rc(path, "missing"), ERR_FORMAT);
    CHECK_EQ(stat(path, &after), 0);
    CHECK_EQ_U64(after.st_size, before.st_size);
    CHECK(after.st_mtim.tv_sec == before.st_mtim.tv_sec && after.st_mtim.tv_nsec == before.st_mtim.tv_nsec);
    FILE *f = fopen(path, "rb");
    char buf[64] = {0};
    CHECK_EQ(fread(buf, 1, sizeof buf, f), 17);
    fclose(f);
    CHECK(memcmp(buf, "{\"n\":1}\r\n\n{\"n\":2}", 17) == 0);
}

TEST(shards_one_global_index_over_files)
{
    const char *a = tmp_path("s0.jsonl"), *b = tmp_path("s1.jsonl"), *c = tmp_path("s2.jsonl");
    write_counting_file(a, 0, 3);
    write_counting_file(b, 3, 1);
    write_counting_file(c, 4, 5);
    char spec[3 * 4096 + 3];
    snprintf(spec, sizeof spec, "%s,%s,%s", a, b, c);
    dataset_t *ds = open_jsonl(spec, "v");
    CHECK_EQ(dataset_info(ds)->kind, DATASET_SHARDS);
    CHECK_EQ_U64(dataset_info(ds)->length, 9);
    CHECK_EQ_U64(dataset_info(ds)->record_bytes, 0);
    for (int i = 0; i < 9; i++) {
        char want[32];
        snprintf(want, sizeof want, "{\"v\":%d}", i);
        check_record(ds, (uint64_t)i, want, (uint64_t)i);
    }
    char small[4];
    struct dataset_record rec;
    CHECK_ERR(dataset_read(ds, 6, small, sizeof small, &rec), ERR_RANGE,
              "record 6 (shard 2, local record 2): jsonl:");
    CHECK_CONTAINS(err_msg(), "s2.jsonl: record 2 has 7 bytes");
    CHECK_ERR(dataset_read(ds, 9, small, sizeof small, &rec), ERR_RANGE, "record 9 is out of range");
    dataset_close(ds);
}

/* JSONL has no read_batch of its own: dataset_read_batch() loops over its
 * reads, with the same contract as IDX's prefetching one. */
TEST(jsonl_batch_read_falls_back_to_record_reads)
{
    const char *path = tmp_path("batch.jsonl");
    write_file(path, "{\"a\":1}\n{\"bb\":22}\n{\"ccc\":333}\n{\"d\":4}\n");
    dataset_t *ds = open_jsonl(path, NULL);
    const char *want[4] = {"{\"a\":1}", "{\"bb\":22}", "{\"ccc\":333}", "{\"d\":4}"};
    const uint64_t idx[5] = {2, 0, 3, 1, 2};
    char rows[5][16];
    struct dataset_record recs[5];
    memset(rows, '#', sizeof rows);
    CHECK_OK(dataset_read_batch(ds, idx, 5, rows, sizeof rows[0], recs));
    for (int i = 0; i < 5; i++) {
        CHECK_EQ_U64(recs[i].bytes, strlen(want[idx[i]]));
        CHECK_EQ_U64(recs[i].length, recs[i].bytes);
        CHECK_EQ(recs[i].label, -1);
        CHECK_MSG(memcmp(rows[i], want[idx[i]], recs[i].bytes) == 0, "row %d: got '%.*s'", i, (int)recs[i].bytes,
                  rows[i]);
        CHECK_EQ(rows[i][recs[i].bytes], '#'); /* the rest of the row is left as it was */
    }
    /* An index past the end is refused before anything is read. */
    const uint64_t bad[3] = {0, 4, 1};
    memset(rows, '#', sizeof rows);
    CHECK_ERR(dataset_read_batch(ds, bad, 3, rows, sizeof rows[0], recs), ERR_RANGE,
              "record 4 at position 1 of the batch is out of range");
    CHECK_EQ(rows[0][0], '#');
    /* A record too long for its row: the rows before it are read, it and the
     * rows after it are not. */
    const uint64_t longer[3] = {0, 2, 3}; /* record 2 has 11 bytes */
    CHECK_ERR(dataset_read_batch(ds, longer, 3, rows, 10, recs), ERR_RANGE,
              "position 1 of the batch: jsonl:");
    CHECK_CONTAINS(err_msg(), "batch.jsonl: record 2 has 11 bytes, the buffer only 10");
    CHECK(memcmp(rows[0], want[0], strlen(want[0])) == 0);
    const char *after = (const char *)rows + 10;
    for (int b = 0; b < 20; b++)
        CHECK_MSG(after[b] == '#', "byte %d after the failing row's start was written", b);
    CHECK_OK(dataset_read_batch(ds, NULL, 0, NULL, 0, NULL));
    dataset_close(ds);
}

TEST(shards_must_agree_and_exist)
{
    const char *a = tmp_path("t0.jsonl");
    write_counting_file(a, 0, 3);
    char spec[4200];
    snprintf(spec, sizeof spec, "%s,synthetic", a);
    CHECK_ERR(open_jsonl_rc(spec, NULL), ERR_FORMAT, "shards disagree on the record size: shard 0");
    CHECK_CONTAINS(err_msg(), "variable-size records, shard 1 (synthetic:60000) has 784-byte records;");
    snprintf(spec, sizeof spec, "%s,%s", a, tmp_path("t1.jsonl"));
    CHECK_ERR(open_jsonl_rc(spec, NULL), ERR_IO, "shard 1: ");
    CHECK_CONTAINS(err_msg(), "t1.jsonl: cannot open");
    snprintf(spec, sizeof spec, "%s,,%s", a, a);
    CHECK_ERR(open_jsonl_rc(spec, NULL), ERR_ARG, "shard 1 of");
    CHECK_OK(open_jsonl_rc("synthetic,synthetic", NULL));
}

/* ---- reading costs no heap, from any number of threads ---------------------- */

TEST(jsonl_heap_does_not_grow_with_records_or_reads)
{
    if (!heap_measurable())
        CHECK_SKIP("a sanitizer replaces malloc, so mallinfo2 says nothing");
    const char *small = tmp_path("heap_small.jsonl"), *large = tmp_path("heap_large.jsonl");
    write_counting_file(small, 0, 10);
    write_counting_file(large, 0, 200000);
    dataset_close(open_jsonl(small, "v")); /* builds both indexes, warms malloc */
    dataset_close(open_jsonl(large, "v"));
    size_t base = heap_in_use();
    dataset_t *s = open_jsonl(small, "v");
    size_t with_small = heap_in_use() - base;
    dataset_t *l = open_jsonl(large, "v");
    size_t with_large = heap_in_use() - base - with_small;
    CHECK_EQ(with_large, with_small); /* O(1) heap: the index lives in the page cache */
    size_t before_reads = heap_in_use();
    char buf[64];
    struct dataset_record rec;
    for (uint64_t i = 0; i < 200000; i++)
        CHECK_OK(dataset_read(l, (i * 7919) % 200000, buf, sizeof buf, &rec));
    CHECK_EQ(heap_in_use(), before_reads);
    dataset_close(s);
    dataset_close(l);
}

struct reader {
    dataset_t *ds;
    int thread;
    int bad;
};

static void *reader_run(void *arg)
{
    struct reader *r = arg;
    uint64_t n = dataset_info(r->ds)->length;
    for (uint64_t k = 0; k < n; k++) {
        uint64_t i = (k * 31 + (uint64_t)r->thread * 1000) % n;
        char buf[64], want[32];
        struct dataset_record rec;
        snprintf(want, sizeof want, "{\"v\":%llu}", (unsigned long long)i);
        if (dataset_read(r->ds, i, buf, sizeof buf, &rec) < 0 || rec.bytes != strlen(want) ||
            memcmp(buf, want, rec.bytes) != 0 || rec.length != i)
            r->bad++;
    }
    return NULL;
}

TEST(jsonl_reads_from_many_threads)
{
    const char *path = tmp_path("threads.jsonl");
    write_counting_file(path, 0, 5000);
    dataset_t *ds = open_jsonl(path, "v");
    pthread_t t[4];
    struct reader r[4];
    for (int i = 0; i < 4; i++) {
        r[i] = (struct reader){ds, i, 0};
        CHECK_EQ(pthread_create(&t[i], NULL, reader_run, &r[i]), 0);
    }
    for (int i = 0; i < 4; i++) {
        pthread_join(t[i], NULL);
        CHECK_EQ(r[i].bad, 0);
    }
    dataset_close(ds);
}
