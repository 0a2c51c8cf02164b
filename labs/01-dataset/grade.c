/* grade: lab 1's grader (`make lab-1`): your labs/01-dataset/dataset_jsonl.c
 * builds the JSONL offset index (region index-scan) and finds a record from
 * it (region record-lookup). Each test writes a small JSONL file, opens it
 * through dataset.h as any loader would, and compares every record with what
 * the file holds; others damage the index on disk, put an inaccessible page
 * right after the data, or count the heap. Read labs/01-dataset/README.md
 * first. */
#include "dataset/dataset.h"
#include "dataset/dataset_jsonl.h"
#include "base/error.h"
#include "grader.h"
#include "heap.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

/* ---- a guard page after every file the dataset maps -------------------------
 * A file whose size is a multiple of the page size ends exactly on a page
 * boundary, and what follows it in the address space is whatever the kernel
 * put there, often readable: a read one byte past the data goes unnoticed.
 * While lab_guard is set, this mmap(), which stands in for the C library's in
 * the whole grader (the dataset code calls it), maps every file right below an
 * inaccessible page, so such a read is a SIGSEGV. */
static int lab_guard;

void *mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
    if (!lab_guard || fd < 0 || addr != NULL)
        return (void *)syscall(SYS_mmap, addr, len, prot, flags, fd, off);
    size_t page = (size_t)sysconf(_SC_PAGESIZE), span = (len + page - 1) / page * page;
    char *area = (void *)syscall(SYS_mmap, NULL, span + page, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                                 -1, (off_t)0);
    if (area == MAP_FAILED)
        return MAP_FAILED;
    void *map = (void *)syscall(SYS_mmap, area, len, prot, flags | MAP_FIXED, fd, off);
    if (map == MAP_FAILED) {
        int e = errno;
        munmap(area, span + page);
        errno = e;
    }
    return map;
}

/* ---- a disk that is full for one write ---------------------------------------
 * While lab_write_fails is set, the next write() to a file (not stdin, stdout
 * or stderr) fails with ENOSPC, as on a disk that another job fills and frees
 * again; the writes after it succeed. This write() stands in for the C
 * library's in the whole grader, as mmap() above does. */
static int lab_write_fails, lab_write_failed;

ssize_t write(int fd, const void *buf, size_t n)
{
    if (lab_write_fails && fd > 2) {
        lab_write_fails = 0;
        lab_write_failed = 1;
        errno = ENOSPC;
        return -1;
    }
    return (ssize_t)syscall(SYS_write, fd, buf, n);
}

static const char *lab_path(const char *name)
{
    static char buf[4096];
    snprintf(buf, sizeof buf, "%s/%s", check_tmpdir(), name);
    return buf;
}

static void lab_write(const char *path, const char *text)
{
    FILE *f = fopen(path, "wb");
    CHECK_MSG(f != NULL, "cannot write %s", path);
    fputs(text, f);
    CHECK_EQ(fclose(f), 0);
}

/* Writes `text` to a file named `name`, opens it (with the length field
 * `field`, or NULL) as a loader would, and returns the dataset. */
static dataset_t *lab_open(const char *name, const char *text, const char *field)
{
    const char *path = lab_path(name);
    if (text)
        lab_write(path, text);
    struct dataset_options opt;
    dataset_options_default(&opt);
    opt.length_field = field;
    dataset_t *ds;
    CHECK_OK(dataset_open(path, &opt, &ds));
    return ds;
}

/* The records of file `name` holding `text` must be want[0..n), in order. */
static void lab_expect(const char *name, const char *text, const char *const *want, uint64_t n)
{
    dataset_t *ds = lab_open(name, text, NULL);
    CHECK_MSG(dataset_info(ds)->length == n, "expected %llu records, the index has %llu", (unsigned long long)n,
              (unsigned long long)dataset_info(ds)->length);
    /* max_record_bytes sizes the readers' buffers: at least the longest record, at most the file */
    size_t longest = 0;
    for (uint64_t i = 0; i < n; i++)
        longest = strlen(want[i]) > longest ? strlen(want[i]) : longest;
    uint64_t max = dataset_info(ds)->max_record_bytes;
    CHECK_MSG(max >= longest && max <= strlen(text), "max_record_bytes is %llu: the longest record has %zu bytes, "
              "the file %zu (it comes from the ends jsonl_builder_add was given)", (unsigned long long)max, longest,
              strlen(text));
    for (uint64_t i = 0; i < n; i++) {
        char buf[1024];
        struct dataset_record rec;
        CHECK_OK(dataset_read(ds, i, buf, sizeof buf, &rec));
        CHECK_MSG(rec.bytes == strlen(want[i]) && memcmp(buf, want[i], rec.bytes) == 0,
                  "record %llu: expected \"%s\" (%zu bytes), got \"%.*s\" (%llu bytes)", (unsigned long long)i,
                  want[i], strlen(want[i]), (int)(rec.bytes < sizeof buf ? rec.bytes : sizeof buf), buf,
                  (unsigned long long)rec.bytes);
    }
    dataset_close(ds);
}

static void test_counts_lines(void)
{
    dataset_t *ds = lab_open("count.jsonl", "{\"a\":1}\n{\"a\":2}\n{\"a\":3}\n{\"a\":4}\n", NULL);
    CHECK_EQ_U64(dataset_info(ds)->length, 4);
    dataset_close(ds);
}

static void test_record_bytes(void)
{
    static const char *const want[] = {"{\"x\":\"first\"}", "[1,2,3]", "\"a string\"", "{\"nested\":{\"y\":[true,null]}}"};
    lab_expect("bytes.jsonl", "{\"x\":\"first\"}\n[1,2,3]\n\"a string\"\n{\"nested\":{\"y\":[true,null]}}\n", want, 4);
}

static void test_crlf_line_ends(void)
{
    static const char *const want[] = {"{\"w\":\"windows\"}", "{\"w\":2}"};
    lab_expect("crlf.jsonl", "{\"w\":\"windows\"}\r\n{\"w\":2}\r\n", want, 2);
}

static void test_blank_lines_are_skipped(void)
{
    static const char *const want[] = {"{\"b\":1}", "{\"b\":2}", "{\"b\":3}"};
    lab_expect("blank.jsonl", "\n{\"b\":1}\n\n\n{\"b\":2}\n   \n\t\r\n{\"b\":3}\n\n", want, 3);
}

static void test_no_final_newline(void)
{
    static const char *const want[] = {"{\"n\":1}", "{\"n\":\"last\"}"};
    lab_expect("nofinal.jsonl", "{\"n\":1}\n{\"n\":\"last\"}", want, 2);
    static const char *const one[] = {"z"};
    lab_expect("nofinal.jsonl", "z", one, 1);
    /* the last line without a newline is blank: still not a record */
    lab_expect("nofinal.jsonl", "{\"n\":1}\n \t", want, 1);
}

/* Leading whitespace is part of the record: only trailing whitespace is trimmed. */
static void test_leading_whitespace_kept(void)
{
    static const char *const want[] = {"  {\"l\":1}", "\t[2]", "{\"l\":3}", " \r \"four\""};
    lab_expect("leading.jsonl", "  {\"l\":1}\n\t[2]\r\n{\"l\":3}\n \r \"four\"  \n", want, 4);
}

/* JSON's whitespace is space, tab, CR and LF (RFC 8259 section 2), not everything isspace() knows:
 * a vertical tab or a form feed is a byte of the record. */
static void test_only_json_whitespace(void)
{
    static const char *const want[] = {"{\"j\":1} \v", "\f", "{\"j\":3}"};
    lab_expect("jsonspace.jsonl", "{\"j\":1} \v \t\r\n\f\n\n{\"j\":3}\t \n", want, 3);
}

static void test_out_of_range(void)
{
    dataset_t *ds = lab_open("range.jsonl", "{\"r\":0}\n{\"r\":1}\n", NULL);
    char buf[64];
    struct dataset_record rec;
    CHECK_OK(dataset_read(ds, 1, buf, sizeof buf, &rec));
    CHECK_ERR(dataset_read(ds, 2, buf, sizeof buf, &rec), ERR_RANGE, "out of range");
    CHECK_ERR(dataset_read(ds, 0, buf, 3, &rec), ERR_RANGE, "the buffer only 3");
    dataset_close(ds);
}

/* With a length field its values go to a table beside the index, built from the records the
 * scan and the lookup find: the records read the same, each length is its record's, and a
 * record without the field fails the open, naming its line. */
static void test_length_field(void)
{
    static const char *const want[] = {"{\"num_tokens\":5,\"text\":\"a b c d e\"}", "{\"num_tokens\":2,\"text\":\"f g\"}",
                                       "{\"num_tokens\":7}"};
    const char *text = "{\"num_tokens\":5,\"text\":\"a b c d e\"}\n\n{\"num_tokens\":2,\"text\":\"f g\"}\r\n{\"num_tokens\":7}\n";
    lab_expect("tokens.jsonl", text, want, 3);
    dataset_t *ds = lab_open("tokens.jsonl", NULL, "num_tokens");
    static const uint64_t lengths[] = {5, 2, 7};
    for (uint64_t i = 0; i < 3; i++) {
        char buf[64];
        struct dataset_record rec;
        uint64_t len;
        CHECK_OK(dataset_length_of(ds, i, &len));
        CHECK_EQ_U64(len, lengths[i]);
        CHECK_OK(dataset_read(ds, i, buf, sizeof buf, &rec));
        CHECK_MSG(rec.bytes == strlen(want[i]) && memcmp(buf, want[i], rec.bytes) == 0,
                  "with the length field, record %llu: expected \"%s\", got \"%.*s\"", (unsigned long long)i, want[i],
                  (int)(rec.bytes < sizeof buf ? rec.bytes : sizeof buf), buf);
    }
    dataset_close(ds);

    /* a record whose field is missing, negative, a string or a fraction: never indexed with some length */
    static const char *const bad[] = {"\"text\":\"no field\"", "\"num_tokens\":-3", "\"num_tokens\":\"5\"",
                                      "\"num_tokens\":2.5"};
    struct dataset_options opt;
    dataset_options_default(&opt);
    opt.length_field = "num_tokens";
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char text[128];
        snprintf(text, sizeof text, "{\"num_tokens\":1}\n\n{%s}\n{\"num_tokens\":3}\n", bad[i]);
        lab_write(lab_path("badtokens.jsonl"), text);
        int rc = dataset_open(lab_path("badtokens.jsonl"), &opt, &ds);
        CHECK_MSG(rc == ERR_FORMAT && strstr(err_msg(), "line 3"), "a record {%s} on line 3, with the length field "
                  "num_tokens: expected the open to fail with ERR_FORMAT naming line 3, got %s: %s", bad[i],
                  err_name(rc), rc ? err_msg() : "the open succeeded");
    }
}

static void test_stale_index_is_rebuilt(void)
{
    dataset_close(lab_open("stale.jsonl", "{\"v\":1}\n{\"v\":2}\n", NULL));
    static const char *const want[] = {"{\"v\":\"changed\"}", "{\"v\":3}", "{\"v\":4}"};
    lab_expect("stale.jsonl", "{\"v\":\"changed\"}\n{\"v\":3}\n{\"v\":4}\n", want, 3);
}

/* Overwrites, in the index of `name`, the entry whose offset is `from` with the offset `to`,
 * under the tag of its position (lib/dataset/dataset_jsonl.h), as a careful hand edit would:
 * the tag check passes, and what the edit does to the span is the lookup's to handle. */
static void lab_edit_index(const char *name, uint64_t from, uint64_t to)
{
    char index[4200];
    snprintf(index, sizeof index, "%s.offsets", lab_path(name));
    int fd = open(index, O_RDWR);
    CHECK_MSG(fd >= 0, "cannot open the index %s", index);
    uint64_t word = ~from, i = 0;
    off_t at = (off_t)sizeof(struct jsonl_header);
    while (pread(fd, &word, sizeof word, at) == (ssize_t)sizeof word && (word & JSONL_VALUE_MASK) != from) {
        at += (off_t)sizeof word;
        i++;
    }
    CHECK_MSG((word & JSONL_VALUE_MASK) == from, "%s holds no entry %llu", index, (unsigned long long)from);
    word = jsonl_word(i, to);
    CHECK_EQ(pwrite(fd, &word, sizeof word, at), (ssize_t)sizeof word);
    close(fd);
}

/* Record `i` of a dataset whose index was damaged: an error (ERR_FORMAT), or the right record
 * `want` (an index found damaged and rebuilt), never a crash, a read outside the data, a wrong
 * record or a length no record has. An empty record is allowed only when `empty_ok`: the entry
 * was moved onto whitespace inside the data, and the span then holds nothing but whitespace. */
static void lab_expect_damaged(dataset_t *ds, uint64_t i, const char *want, int empty_ok)
{
    char buf[2048];
    struct dataset_record rec;
    int rc = dataset_read(ds, i, buf, sizeof buf, &rec);
    if (rc == ERR_FORMAT)
        return;
    CHECK_MSG(rc == 0, "record %llu of a damaged index: expected ERR_FORMAT, got %s: %s", (unsigned long long)i,
              err_name(rc), err_msg());
    CHECK_MSG((empty_ok && rec.bytes == 0) || (rec.bytes == strlen(want) && memcmp(buf, want, rec.bytes) == 0),
              "record %llu of a damaged index: %llu bytes \"%.*s\", neither an error nor the record",
              (unsigned long long)i, (unsigned long long)rec.bytes, (int)(rec.bytes < 60 ? rec.bytes : 60), buf);
}

/* An index can be damaged on disk while its header stays valid: a bad entry must not send a read
 * outside the data (check the span first), and trimming must stop at the span's start. */
static void test_damaged_index(void)
{
    /* record 0: 995 bytes at 0; a newline, a blank line "   " (996 to 998) and its newline;
     * record 1 at 1000, record 2 at 1008; the data ends at 1016 */
    char want0[996], text[1100];
    memset(want0, 'x', sizeof want0);
    memcpy(want0, "{\"d\":\"", 6);
    memcpy(want0 + 993, "\"}", 3);
    snprintf(text, sizeof text, "%s\n   \n{\"d\":1}\n{\"d\":2}\n", want0);
    const char *want[] = {want0, "{\"d\":1}", "{\"d\":2}"};
    char index[4200];
    snprintf(index, sizeof index, "%s.offsets", lab_path("damaged.jsonl"));
    for (int damage = 0; damage < 2; damage++) {
        unlink(index); /* a fresh index each time, whatever the clock's resolution */
        lab_expect("damaged.jsonl", text, want, 3);
        if (damage == 0) {
            lab_edit_index("damaged.jsonl", 1000, 1ull << 40); /* record 1 far past the data's end */
        } else {
            lab_edit_index("damaged.jsonl", 1008, 1000);
            lab_edit_index("damaged.jsonl", 1000, 996); /* record 1: only the blank line "   \n" */
        }
        dataset_t *ds = lab_open("damaged.jsonl", NULL, NULL);
        lab_expect_damaged(ds, 0, want[0], 0);
        lab_expect_damaged(ds, 1, want[1], damage == 1);
        dataset_close(ds);
    }
}

/* Writing the index fails once, in the middle of the scan (the builder writes
 * its words 65536 at a time): the build must stop with that error, and the
 * open then fails or builds the index again (in the cache directory). What it
 * must never do is go on indexing the records after the failure and serve an
 * index with a hole where the words that failed to reach the disk were. */
static void test_index_write_fails(void)
{
    const uint64_t n = 3 * 65536 + 100;
    char path[4096];
    snprintf(path, sizeof path, "%s", lab_path("full.jsonl"));
    FILE *f = fopen(path, "wb");
    CHECK(f != NULL);
    for (uint64_t i = 0; i < n; i++)
        fprintf(f, "%llu\n", (unsigned long long)i);
    CHECK_EQ(fclose(f), 0);
    CHECK_EQ(setenv("DDP_CACHE_DIR", lab_path("cache"), 1), 0);
    struct dataset_options opt;
    dataset_options_default(&opt);
    dataset_t *ds;
    lab_write_fails = 1;
    int rc = dataset_open(path, &opt, &ds);
    lab_write_fails = 0;
    CHECK_MSG(lab_write_failed, "grader: no write of the index was made to fail");
    if (rc != 0) { /* failing the open for a full disk is right too */
        CHECK_MSG(rc == ERR_IO, "opening with a write of the index failing: expected ERR_IO (or a rebuilt index), "
                  "got %s: %s", err_name(rc), err_msg());
        return;
    }
    char index[4200];
    snprintf(index, sizeof index, "%s.offsets", path);
    struct stat st;
    uint64_t want = sizeof(struct jsonl_header) + (n + 1) * sizeof(uint64_t);
    CHECK_MSG(stat(index, &st) != 0 || (uint64_t)st.st_size == want,
              "%s has %lld bytes for %llu records, %lld words too few: a write of the index failed (a full disk) and "
              "the scan went on indexing the records after it; return jsonl_builder_add's error at once", index,
              (long long)st.st_size, (unsigned long long)n, ((long long)want - (long long)st.st_size) / 8);
    CHECK_EQ_U64(dataset_info(ds)->length, n);
    for (uint64_t i = 0; i < n; i++) {
        char buf[32], text[32];
        struct dataset_record rec;
        int len = snprintf(text, sizeof text, "%llu", (unsigned long long)i);
        CHECK_OK(dataset_read(ds, i, buf, sizeof buf, &rec));
        CHECK_MSG(rec.bytes == (uint64_t)len && memcmp(buf, text, (size_t)len) == 0,
                  "after a failed index write, record %llu: expected \"%s\", got \"%.*s\"", (unsigned long long)i,
                  text, (int)rec.bytes, buf);
    }
    dataset_close(ds);
}

/* Files that end exactly on a page boundary, behind an inaccessible page (lab_guard): the last
 * line has no newline, or is blank. Neither the scan nor the lookup may read a byte past the end. */
static void test_no_read_past_the_end(void)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    char *text = malloc(2 * page + 1);
    CHECK(text != NULL);
    for (int last_blank = 0; last_blank < 2; last_blank++) {
        size_t used = 0;
        uint64_t records = 0;
        while (used + 40 < 2 * page)
            used += (size_t)snprintf(text + used, 2 * page + 1 - used, "{\"p\":%llu}\n", (unsigned long long)records++);
        if (last_blank) {
            memset(text + used, ' ', 2 * page - used);
        } else {
            memset(text + used, 'q', 2 * page - used); /* one more record, with no newline */
            text[used] = '"', text[2 * page - 1] = '"';
            records++;
        }
        text[2 * page] = '\0';
        lab_write(lab_path("edge.jsonl"), text);
        lab_guard = 1;
        dataset_t *ds = lab_open("edge.jsonl", NULL, NULL);
        CHECK_EQ_U64(dataset_info(ds)->length, records);
        char buf[128];
        struct dataset_record rec;
        for (uint64_t i = 0; i < records; i++)
            CHECK_OK(dataset_read(ds, i, buf, sizeof buf, &rec));
        if (!last_blank)
            CHECK_EQ_U64(rec.bytes, 2 * page - used);
        dataset_close(ds);
        lab_guard = 0;
    }
    free(text);
}

/* The index lives in a file, not on the heap: building and opening the index of 100000 records
 * leaves the heap where it was (no per-line copies, nothing kept per record). */
static void test_heap_stays_flat(void)
{
    if (!heap_measurable())
        CHECK_SKIP("the heap cannot be measured under a sanitizer");
    const char *path = lab_path("heap.jsonl");
    FILE *f = fopen(path, "wb");
    CHECK(f != NULL);
    for (int i = 0; i < 100000; i++)
        fprintf(f, "{\"h\":%d}\n", i);
    CHECK_EQ(fclose(f), 0);
    size_t before = heap_in_use();
    dataset_t *ds = lab_open("heap.jsonl", NULL, NULL);
    size_t grown = heap_in_use() - before;
    CHECK_MSG(grown < 64 * 1024, "opening a 100000-record file grew the heap by %zu bytes", grown);
    dataset_close(ds);
}

/* 300000 generated lines, blank lines and CRLF mixed in; every record checked. */
static void test_large_file(void)
{
    const char *path = lab_path("large.jsonl");
    FILE *f = fopen(path, "wb");
    CHECK(f != NULL);
    const uint64_t n = 300000;
    for (uint64_t i = 0; i < n; i++)
        fprintf(f, "{\"id\":%llu,\"pad\":\"%.*s\"}%s%s", (unsigned long long)i, (int)(i % 50),
                "..................................................", i % 3 ? "\n" : "\r\n", i % 7 ? "" : "\n");
    CHECK_EQ(fclose(f), 0);
    dataset_t *ds = lab_open("large.jsonl", NULL, NULL);
    CHECK_EQ_U64(dataset_info(ds)->length, n);
    for (uint64_t i = 0; i < n; i++) {
        char buf[128], want[128];
        struct dataset_record rec;
        int len = snprintf(want, sizeof want, "{\"id\":%llu,\"pad\":\"%.*s\"}", (unsigned long long)i, (int)(i % 50),
                           "..................................................");
        CHECK_OK(dataset_read(ds, i, buf, sizeof buf, &rec));
        CHECK_MSG(rec.bytes == (uint64_t)len && memcmp(buf, want, (size_t)len) == 0,
                  "record %llu: expected \"%s\", got \"%.*s\"", (unsigned long long)i, want, (int)rec.bytes, buf);
    }
    dataset_close(ds);
}

static const struct grade_test tests[] = {
    {"counts-lines", 10, 10, test_counts_lines},
    {"record-bytes", 15, 10, test_record_bytes},
    {"crlf-line-ends", 10, 10, test_crlf_line_ends},
    {"blank-lines-skipped", 10, 10, test_blank_lines_are_skipped},
    {"no-final-newline", 10, 10, test_no_final_newline},
    {"leading-whitespace-kept", 10, 10, test_leading_whitespace_kept},
    {"only-json-whitespace", 5, 10, test_only_json_whitespace},
    {"out-of-range", 5, 10, test_out_of_range},
    {"length-field", 10, 10, test_length_field},
    {"stale-index-rebuilt", 10, 10, test_stale_index_is_rebuilt},
    {"damaged-index", 10, 10, test_damaged_index},
    {"no-read-past-the-end", 10, 10, test_no_read_past_the_end},
    {"index-write-fails", 10, 20, test_index_write_fails},
    {"heap-stays-flat", 5, 10, test_heap_stays_flat},
    {"large-file", 20, 60, test_large_file},
};

int main(int argc, char **argv) { return GRADE_MAIN(argc, argv, tests); }
