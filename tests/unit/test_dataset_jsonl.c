/* test_dataset_jsonl: the JSONL format and shard lists (lib/dataset/dataset_jsonl.c,
 * lib/dataset/dataset_shards.c): what a record is (CRLF, blank lines, no final
 * newline), length fields, the offset index's binding to its data (stale,
 * foreign, truncated, corrupt indexes), the global index over shards, and
 * that reading costs no heap. */
#include "check.h"
#include "dataset/dataset.h"
#include "dataset/dataset_jsonl.h"
#include "base/error.h"
#include "base/hash.h"
#include "heap.h"
#include "isolate.h"

#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
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

/* Record i's batching length must be `want`. */
static void expect_length(dataset_t *ds, uint64_t i, uint64_t want)
{
    uint64_t len;
    CHECK_OK(dataset_length_of(ds, i, &len));
    CHECK_EQ_U64(len, want);
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

/* A path longer than the dataset's short name (256 bytes) still opens, and
 * messages name it whole. */
TEST(jsonl_long_paths)
{
    char dir[1024], path[1100];
    snprintf(dir, sizeof dir, "%s/%0200d/%0200d", check_tmpdir(), 0, 0);
    CHECK_EQ(system((snprintf(path, sizeof path, "mkdir -p '%s'", dir), path)), 0);
    snprintf(path, sizeof path, "%s/long.jsonl", dir);
    write_file(path, "{\"n\":1}\nnot json\n");
    dataset_t *ds = open_jsonl(path, NULL);
    check_record(ds, 1, "not json", BYTES);
    char needle[1200];
    snprintf(needle, sizeof needle, "%s: record 1 (line 2, byte offset 8): not valid JSON", path);
    CHECK_ERR(dataset_check_record(ds, 1, 0), ERR_FORMAT, needle);
    dataset_close(ds);
}

TEST(jsonl_length_field_is_parsed_once_and_stored)
{
    const char *path = tmp_path("tokens.jsonl");
    write_file(path, "{\"id\":0,\"num_tokens\":7}\n\n{\"num_tokens\":0,\"text\":\"a\\nb\"}\r\n{\"num_tokens\":123456789012}");
    dataset_t *ds = open_jsonl(path, "num_tokens");
    CHECK_EQ_U64(dataset_info(ds)->length, 3);
    check_record(ds, 0, "{\"id\":0,\"num_tokens\":7}", 7);
    expect_length(ds, 1, 0);
    expect_length(ds, 2, 123456789012ull);
    dataset_close(ds);
    /* The same data without a length field: byte lengths, the same index. */
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
    /* The offset index is whole and kept; the length table failed, and nothing of it is left. */
    CHECK(access(tmp_path("bad.jsonl.offsets"), F_OK) == 0);
    CHECK(access(tmp_path("bad.jsonl.lengths.n"), F_OK) != 0);
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
    /* A valid header over a damaged word: record 2's offset far past the data. */
    int fd = open(tmp_path("body.jsonl.offsets"), O_RDWR);
    CHECK(fd >= 0);
    uint64_t bad = 1ull << 40;
    CHECK_EQ(pwrite(fd, &bad, sizeof bad, sizeof(struct jsonl_header) + 2 * 8), (ssize_t)sizeof bad);
    close(fd);
    dataset_t *ds = open_jsonl(path, "v");
    char buf[64];
    struct dataset_record rec;
    CHECK_ERR(dataset_read(ds, 2, buf, sizeof buf, &rec), ERR_FORMAT, "body.jsonl.offsets: record 2: entry");
    CHECK_ERR(dataset_read(ds, 1, buf, sizeof buf, &rec), ERR_FORMAT, "delete the index to rebuild it");
    check_record(ds, 3, "{\"v\":3}", 3);
    dataset_close(ds);
}

/* Overwrites word `i` of a sidecar file (offsets or lengths) with `word`. */
static void poke_word(const char *sidecar, uint64_t i, uint64_t word)
{
    int fd = open(sidecar, O_RDWR);
    CHECK_MSG(fd >= 0, "cannot open %s", sidecar);
    CHECK_EQ(pwrite(fd, &word, sizeof word, (off_t)(sizeof(struct jsonl_header) + i * 8)), (ssize_t)sizeof word);
    close(fd);
}

static uint64_t peek_word(const char *sidecar, uint64_t i)
{
    int fd = open(sidecar, O_RDONLY);
    uint64_t word = 0;
    CHECK(fd >= 0 && pread(fd, &word, sizeof word, (off_t)(sizeof(struct jsonl_header) + i * 8)) == sizeof word);
    close(fd);
    return word;
}

/* Record i of the moved-offset test data, as written below. */
static const char *const moved_records[] = {"{\"a\":1}", "  [2, 3]", "\"four\"", "{\"e\":5}", "6"};
#define MOVED_RECORDS 5

/* Every record that reads must be the record of its index: it may fail, never lie. */
static void check_never_wrong(const char *path, const char *context)
{
    dataset_t *ds = open_jsonl(path, NULL);
    CHECK_EQ_U64(dataset_info(ds)->length, MOVED_RECORDS);
    for (uint64_t i = 0; i < MOVED_RECORDS; i++) {
        char buf[64];
        struct dataset_record rec;
        if (dataset_read(ds, i, buf, sizeof buf, &rec) == 0)
            CHECK_MSG(rec.bytes == strlen(moved_records[i]) && memcmp(buf, moved_records[i], rec.bytes) == 0,
                      "%s: record %llu read as '%.*s'", context, (unsigned long long)i, (int)rec.bytes, buf);
        uint64_t len;
        if (dataset_length_of(ds, i, &len) == 0)
            CHECK_MSG(len == strlen(moved_records[i]), "%s: record %llu has length %llu", context,
                      (unsigned long long)i, (unsigned long long)len);
    }
    dataset_close(ds);
}

/* An offset moved anywhere inside the data, even with the tag of its new
 * value forged, never serves another record: the per-read line checks alone
 * refuse it. Tried for every record and every byte position. */
TEST(jsonl_moved_offset_never_serves_a_wrong_record)
{
    const char *path = tmp_path("moved.jsonl");
    const char *text = "{\"a\":1}\n  [2, 3]\r\n\n \n\"four\"\n\n{\"e\":5}\n6";
    write_file(path, text);
    check_never_wrong(path, "intact");
    const char *index = tmp_path("moved.jsonl.offsets");
    uint64_t size = strlen(text);
    for (uint64_t i = 0; i <= MOVED_RECORDS; i++) {
        uint64_t good = peek_word(index, i);
        for (uint64_t x = 0; x <= size; x++) {
            char context[64];
            snprintf(context, sizeof context, "word %llu moved to %llu", (unsigned long long)i, (unsigned long long)x);
            poke_word(index, i, jsonl_word(i, x));
            if (i < MOVED_RECORDS) /* the sentinel's move is caught at open: the index is rebuilt */
                check_never_wrong(path, context);
            poke_word(index, i, good);
        }
        poke_word(index, i, good);
    }
}

/* Words shifted by one position (one deleted, the last duplicated), as a bad
 * edit or a torn copy leaves them: the shifted ones lose their tags. */
TEST(jsonl_shifted_index_words_are_refused)
{
    const char *path = tmp_path("shifted.jsonl");
    write_counting_file(path, 0, 40);
    check_counting_file(path, 0, 40);
    const char *index = tmp_path("shifted.jsonl.offsets");
    for (uint64_t i = 10; i < 39; i++)
        poke_word(index, i, peek_word(index, i + 1));
    dataset_t *ds = open_jsonl(path, "v");
    for (uint64_t i = 0; i < 40; i++) {
        char buf[64], want[32];
        struct dataset_record rec;
        snprintf(want, sizeof want, "{\"v\":%llu}", (unsigned long long)i);
        if (i < 9 || i == 39) { /* 9 spans two lines, 10..38 lost their tags, 39 and the sentinel stayed */
            check_record(ds, i, want, i);
        } else {
            CHECK_ERR(dataset_read(ds, i, buf, sizeof buf, &rec), ERR_FORMAT, "shifted.jsonl.offsets: record");
        }
    }
    dataset_close(ds);
    /* The length table's words too. */
    const char *lengths = tmp_path("shifted.jsonl.lengths.v");
    poke_word(lengths, 5, peek_word(lengths, 6));
    ds = open_jsonl(path, "v");
    uint64_t len;
    CHECK_ERR(dataset_length_of(ds, 5, &len), ERR_FORMAT, "shifted.jsonl.lengths.v: record 5: its length word");
    CHECK_OK(dataset_length_of(ds, 6, &len));
    CHECK_EQ_U64(len, 6);
    dataset_close(ds);
}

/* Opening a FIFO for reading waits for a writer: it must fail at once instead,
 * as data and as the sidecar index someone left in the index's place; and the
 * FIFO is never replaced by a file (fsutil.h): the index goes to the cache. */
TEST(jsonl_fifo_is_refused_not_waited_on)
{
    const char *fifo = tmp_path("fifo.jsonl");
    CHECK_EQ(mkfifo(fifo, 0600), 0);
    CHECK_ERR(open_jsonl_rc(fifo, NULL), ERR_IO, "fifo.jsonl: not a regular file (a FIFO)");
    const char *path = tmp_path("fifo_index.jsonl");
    write_counting_file(path, 0, 3);
    CHECK_EQ(mkfifo(tmp_path("fifo_index.jsonl.offsets"), 0600), 0);
    setenv("DDP_CACHE_DIR", tmp_path("fifo-cache"), 1);
    check_counting_file(path, 0, 3); /* indexed in the cache */
    struct stat st;
    CHECK_EQ(stat(tmp_path("fifo_index.jsonl.offsets"), &st), 0);
    CHECK(S_ISFIFO(st.st_mode));
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

/* ---- --check: every record is JSON, in UTF-8 ----------------------------------- */

/* Writes `n` bytes (NULs allowed) to `path`. */
static void write_bytes(const char *path, const char *bytes, size_t n)
{
    FILE *f = fopen(path, "wb");
    CHECK(f && fwrite(bytes, 1, n, f) == n);
    CHECK_EQ(fclose(f), 0);
}

/* Data whose record `bad` (of 3) is `line`: dataset_check_record() must refuse
 * exactly that record, naming the file, its line, its byte offset and where
 * in it the JSON breaks. */
static void check_bad_record(const char *name, const char *line, size_t n, const char *why)
{
    char text[256];
    size_t len = 0;
    len += (size_t)sprintf(text, "{\"ok\":1}\n\n");
    memcpy(text + len, line, n);
    len += n;
    len += (size_t)sprintf(text + len, "\n[\"ok\"]\n");
    const char *path = tmp_path(name);
    write_bytes(path, text, len);
    dataset_t *ds = open_jsonl(path, NULL); /* opening parses nothing: it opens */
    CHECK_OK(dataset_check_record(ds, 0, 0));
    CHECK_OK(dataset_check_record(ds, 2, 0));
    char needle[512];
    snprintf(needle, sizeof needle, "%s: record 1 (line 3, byte offset 10): not valid JSON: ", path);
    CHECK_ERR(dataset_check_record(ds, 1, 0), ERR_FORMAT, needle);
    CHECK_CONTAINS(err_msg(), why);
    dataset_close(ds);
}

TEST(jsonl_check_refuses_what_is_not_json)
{
    check_bad_record("check_random.jsonl", "\x8f\x01zq\x93", 5, "near byte offset 10");
    check_bad_record("check_nul.jsonl", "\0\0\0\0", 4, "invalid token");
    check_bad_record("check_nul_in_string.jsonl", "{\"a\":\"x\0y\"}", 11, "control character 0x0");
    check_bad_record("check_utf8.jsonl", "{\"a\":\"\xc3\x28\"}", 10, "near byte offset 16");
    check_bad_record("check_overlong.jsonl", "\"\xc0\xaf\"", 4, "unable to decode byte 0xc0");
    check_bad_record("check_surrogate.jsonl", "\"\xed\xa0\x80\"", 5, "unable to decode byte 0xed");
    check_bad_record("check_cut.jsonl", "{\"text\":\"half a rec", 19, "premature end of input");
    check_bad_record("check_two_values.jsonl", "{} {}", 5, "end of file expected");
    check_bad_record("check_trailing_comma.jsonl", "[1,2,]", 6, "unexpected token near ']'");
    check_bad_record("check_cr_inside.jsonl", "{\"a\":1}\r{\"b\":2}", 15, "end of file expected");
}

TEST(jsonl_check_accepts_every_json_value)
{
    const char *path = tmp_path("check_good.jsonl");
    const char *text = "{\"a\":[1,2.5e-3,-0,true,false,null]}\r\n\"\\u0000 and \\u00e9 and \xc3\xa9 and \xf0\x9f\x98\x80\"\n"
                       "18446744073709551616\n  [ ]  \n{\"id\":123456789012345678901234567890,\"nested\":{\"\":{}}}\n"
                       "\"\\ud83d\\ude00\"\n-1.0E+400000\n";
    write_file(path, text);
    dataset_t *ds = open_jsonl(path, NULL);
    CHECK_EQ_U64(dataset_info(ds)->length, 7);
    for (uint64_t i = 0; i < 6; i++)
        CHECK_OK(dataset_check_record(ds, i, 0));
    /* A number past a double's range is valid JSON that jansson cannot hold:
     * the one place we are stricter than RFC 8259 (it allows such limits, section 6). */
    CHECK_ERR(dataset_check_record(ds, 6, 0), ERR_FORMAT, "real number overflow");
    dataset_close(ds);
}

/* A length field parses every record once: a big integer elsewhere in a
 * record does not hide the field, and each problem names record, line, byte. */
TEST(jsonl_length_field_next_to_big_integers)
{
    const char *path = tmp_path("bigint.jsonl");
    write_file(path, "{\"id\":18446744073709551615,\"n\":4}\n{\"n\":18446744073709551615}\n");
    struct dataset_options opt;
    dataset_options_default(&opt);
    opt.length_field = "n";
    dataset_t *ds;
    CHECK_ERR(dataset_open(path, &opt, &ds), ERR_FORMAT,
              "bigint.jsonl: record 1 (line 2, byte offset 34): the length field is not an integer below 2^53");
    write_file(path, "{\"id\":18446744073709551615,\"n\":4}\n{\"n\":281474976710656}\n");
    CHECK_ERR(dataset_open(path, &opt, &ds), ERR_FORMAT, "past 2^48 - 1");
    write_file(path, "{\"id\":18446744073709551615,\"n\":4}\n{\"n\":281474976710655}\n");
    ds = open_jsonl(path, "n");
    expect_length(ds, 0, 4);
    expect_length(ds, 1, 281474976710655ull);
    dataset_close(ds);
}

/* ---- one index, one length table per field ------------------------------------- */

static void file_id(const char *path, struct stat *st) { CHECK_MSG(stat(path, st) == 0, "%s is missing", path); }

static int same_file(const struct stat *a, const struct stat *b)
{
    return a->st_ino == b->st_ino && a->st_mtim.tv_sec == b->st_mtim.tv_sec && a->st_mtim.tv_nsec == b->st_mtim.tv_nsec;
}

TEST(jsonl_switching_length_fields_builds_nothing_twice)
{
    char path[4096];
    snprintf(path, sizeof path, "%s", tmp_path("switch.jsonl"));
    FILE *f = fopen(path, "wb");
    for (int i = 0; i < 1000; i++)
        fprintf(f, "{\"a\":%d,\"b\":%d,\"weird key/\":%d}\n", i, 2 * i, 3 * i);
    CHECK_EQ(fclose(f), 0);
    dataset_close(open_jsonl(path, "a"));
    dataset_close(open_jsonl(path, "b"));
    dataset_close(open_jsonl(path, "weird key/"));
    struct stat index, a, b, weird, again;
    file_id(tmp_path("switch.jsonl.offsets"), &index);
    file_id(tmp_path("switch.jsonl.lengths.a"), &a);
    file_id(tmp_path("switch.jsonl.lengths.b"), &b);
    char hashed[64];
    snprintf(hashed, sizeof hashed, "switch.jsonl.lengths.x%016llx",
             (unsigned long long)hash_fnv1a(HASH_FNV1A_BASIS, "weird key/", 10));
    file_id(tmp_path(hashed), &weird);
    for (int round = 0; round < 3; round++) {
        const char *fields[] = {NULL, "a", "b", "weird key/"};
        for (int k = 0; k < 4; k++) {
            dataset_t *ds = open_jsonl(path, fields[k]);
            uint64_t len;
            CHECK_OK(dataset_length_of(ds, 999, &len));
            CHECK_EQ_U64(len, k == 0 ? strlen("{\"a\":999,\"b\":1998,\"weird key/\":2997}") : 999ull * (uint64_t)k);
            dataset_close(ds);
        }
    }
    file_id(tmp_path("switch.jsonl.offsets"), &again);
    CHECK_MSG(same_file(&index, &again), "the offset index was rebuilt");
    file_id(tmp_path("switch.jsonl.lengths.a"), &again);
    CHECK_MSG(same_file(&a, &again), "the length table of \"a\" was rebuilt");
    file_id(tmp_path("switch.jsonl.lengths.b"), &again);
    CHECK_MSG(same_file(&b, &again), "the length table of \"b\" was rebuilt");
    file_id(tmp_path(hashed), &again);
    CHECK_MSG(same_file(&weird, &again), "the length table of \"weird key/\" was rebuilt");
}

/* Processes opening one new file at once, with and without length fields:
 * each builds or finds the sidecars, and each maps what it built itself, so
 * none sees another's half-renamed file ("the index just built is unreadable"). */
TEST(jsonl_concurrent_opens_with_different_fields)
{
    enum { ROUNDS = 12, PROCS = 4, LINES = 20000 };
    for (int round = 0; round < ROUNDS; round++) {
        char name[64];
        snprintf(name, sizeof name, "race-%d.jsonl", round);
        const char *path = tmp_path(name);
        FILE *f = fopen(path, "wb");
        for (int i = 0; i < LINES; i++)
            fprintf(f, "{\"v\":%d,\"w\":%d}\n", i, i + 1);
        CHECK_EQ(fclose(f), 0);
        pid_t kids[PROCS];
        for (int k = 0; k < PROCS; k++) {
            kids[k] = fork();
            CHECK(kids[k] >= 0);
            if (kids[k] == 0) {
                const char *fields[] = {NULL, "v", "w", "v"};
                struct dataset_options opt;
                dataset_options_default(&opt);
                opt.length_field = fields[k];
                dataset_t *ds;
                uint64_t len = 0;
                if (dataset_open(path, &opt, &ds) < 0) {
                    fprintf(stderr, "process %d (field %s): %s\n", k, fields[k] ? fields[k] : "none", err_msg());
                    _exit(1);
                }
                int bad = dataset_info(ds)->length != LINES || dataset_length_of(ds, LINES - 1, &len) < 0 ||
                          len != (k == 0 ? strlen("{\"v\":19999,\"w\":20000}") : k == 2 ? LINES : LINES - 1);
                dataset_close(ds);
                _exit(bad ? 2 : 0);
            }
        }
        for (int k = 0; k < PROCS; k++) {
            int status;
            CHECK_EQ(waitpid(kids[k], &status, 0), kids[k]);
            CHECK_MSG(WIFEXITED(status) && WEXITSTATUS(status) == 0, "round %d, process %d: status %#x", round, k,
                      status);
        }
    }
}

/* ---- a file truncated while mapped is named ------------------------------------- */

static dataset_t *shrinking;
static char shrinking_path[4096];

static void read_a_truncated_record(void)
{
    CHECK_EQ(truncate(shrinking_path, 100), 0);
    char buf[64];
    struct dataset_record rec;
    dataset_read(shrinking, 2999, buf, sizeof buf, &rec); /* its page is gone: SIGBUS */
}

TEST(jsonl_data_truncated_while_mapped_is_named)
{
    snprintf(shrinking_path, sizeof shrinking_path, "%s", tmp_path("shrinks.jsonl"));
    write_counting_file(shrinking_path, 0, 3000);
    shrinking = open_jsonl(shrinking_path, NULL);
    char said[4096];
    CHECK(!isolate_run(read_a_truncated_record, 20, said, sizeof said)); /* in a child, which says how it ended */
    CHECK_CONTAINS(said, "shrinks.jsonl: truncated while mapped: it had ");
    CHECK_CONTAINS(said, " bytes when it was opened and has 100 now");
    CHECK_CONTAINS(said, "rename it over the old");
    CHECK_CONTAINS(said, "[exited with status 1]");
    dataset_close(shrinking);
}
