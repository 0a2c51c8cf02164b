/* grade: lab 1's grader (`make lab-1`): your labs/01-dataset/dataset_jsonl.c
 * builds the JSONL offset index (region index-scan) and finds a record from
 * it (region record-lookup). Each test writes a small JSONL file, opens it
 * through dataset.h as any loader would, and compares every record with what
 * the file holds. Read labs/01-dataset/README.md first. */
#include "dataset/dataset.h"
#include "base/error.h"
#include "grader.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

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
    for (uint64_t i = 0; i < n; i++) {
        char buf[256];
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

static void test_length_field(void)
{
    static const char *const want[] = {"{\"num_tokens\":5,\"text\":\"a b c d e\"}", "{\"num_tokens\":2,\"text\":\"f g\"}"};
    const char *text = "{\"num_tokens\":5,\"text\":\"a b c d e\"}\n\n{\"num_tokens\":2,\"text\":\"f g\"}\r\n";
    lab_expect("tokens.jsonl", text, want, 2);
    dataset_t *ds = lab_open("tokens.jsonl", NULL, "num_tokens");
    uint64_t len;
    CHECK_OK(dataset_length_of(ds, 0, &len));
    CHECK_EQ_U64(len, 5);
    CHECK_OK(dataset_length_of(ds, 1, &len));
    CHECK_EQ_U64(len, 2);
    dataset_close(ds);
}

static void test_stale_index_is_rebuilt(void)
{
    dataset_close(lab_open("stale.jsonl", "{\"v\":1}\n{\"v\":2}\n", NULL));
    static const char *const want[] = {"{\"v\":\"changed\"}", "{\"v\":3}", "{\"v\":4}"};
    lab_expect("stale.jsonl", "{\"v\":\"changed\"}\n{\"v\":3}\n{\"v\":4}\n", want, 3);
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
    {"out-of-range", 5, 10, test_out_of_range},
    {"length-field", 10, 10, test_length_field},
    {"stale-index-rebuilt", 10, 10, test_stale_index_is_rebuilt},
    {"large-file", 20, 60, test_large_file},
};

int main(int argc, char **argv) { return GRADE_MAIN(argc, argv, tests); }
