/* fuzz_jsonl_index: libFuzzer target for the JSONL reader, its offset index
 * and its length tables (lib/dataset/dataset_jsonl.c, the files described in
 * lib/dataset/dataset_jsonl.h). `make fuzz`.
 *
 * The first byte of the input picks what the rest becomes:
 *   0  the index file (`fixed.jsonl.offsets`) beside a small valid data file:
 *      the header checks must reject it or accept it, never trust it blindly;
 *   1  the words of an index whose header and sentinel are valid for that
 *      data file (so the fuzzer reaches past the header checks), as raw
 *      bytes: a word that lost its tag must be refused;
 *   2  the same, but each 8 input bytes are an offset that gets the tag of
 *      its position, as a careful forger would write it: the per-read line
 *      checks alone must then keep every read inside one line of the data;
 *   3  the words of the length table of field "n" for that data file;
 *   4  a data file, indexed by byte lengths, every record then checked as JSON
 *      (dataset_check_record(): jansson on every record);
 *   5  a data file, indexed with the length field "n" (jansson on every line).
 * Whatever opens, every record is read and its length asked. It must never
 * crash, hang or read out of bounds, and a record of the fixed file that
 * reads must be one of its records, never a piece of one or two joined. (That
 * it is the record of its index too is tested in test_dataset_jsonl.c, for
 * every moved offset and for shifted words: here the fuzzer's comparison
 * tracing can learn tags and checksums, as a forger could, and shift them.)
 */
#include "dataset/dataset.h"
#include "dataset/dataset_jsonl.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char fuzz_dir[256];
static uint8_t *fuzz_index, *fuzz_lengths; /* the fixed data file's whole, valid index and length table */
static size_t fuzz_index_bytes, fuzz_lengths_bytes;

static const char fuzz_fixed[] = "{\"n\":1}\n\n{\"n\":22,\"t\":\"x\"}\r\n  \n{\"n\":3}";
static const char *const fuzz_records[] = {"{\"n\":1}", "{\"n\":22,\"t\":\"x\"}", "{\"n\":3}"}; /* what it holds */
#define FUZZ_RECORDS 3

static const char *fuzz_path(const char *name)
{
    static char path[512];
    snprintf(path, sizeof path, "%s/%s", fuzz_dir, name);
    return path;
}

static void fuzz_write(const char *name, const uint8_t *data, size_t size)
{
    FILE *f = fopen(fuzz_path(name), "wb");
    if (!f || fwrite(data, 1, size, f) != size) {
        perror(fuzz_path(name));
        abort();
    }
    fclose(f);
}

static uint8_t *fuzz_slurp(const char *name, size_t *bytes)
{
    struct stat st;
    if (stat(fuzz_path(name), &st) != 0)
        abort();
    *bytes = (size_t)st.st_size;
    uint8_t *p = malloc(*bytes);
    FILE *f = fopen(fuzz_path(name), "rb");
    if (!f || !p || fread(p, 1, *bytes, f) != *bytes)
        abort();
    fclose(f);
    return p;
}

/* Opens `name` and reads every record; `fixed`: they must be fuzz_records. */
static void fuzz_read_all(const char *name, const char *field, int fixed, int check)
{
    struct dataset_options opt;
    dataset_options_default(&opt);
    opt.length_field = field;
    dataset_t *ds;
    if (dataset_open(fuzz_path(name), &opt, &ds) < 0)
        return;
    const struct dataset_info *info = dataset_info(ds);
    uint8_t *buf = malloc(info->max_record_bytes + 1);
    for (uint64_t i = 0; buf && i < info->length; i++) {
        struct dataset_record rec;
        uint64_t len;
        int read = dataset_read(ds, i, buf, info->max_record_bytes, &rec) == 0;
        if (read && rec.bytes > info->max_record_bytes)
            abort(); /* a record larger than the bound the index promised */
        int known = 0;
        for (int k = 0; read && fixed && k < FUZZ_RECORDS; k++)
            known |= rec.bytes == strlen(fuzz_records[k]) && memcmp(buf, fuzz_records[k], rec.bytes) == 0;
        if (read && fixed && !known)
            abort(); /* not one of the data's records */
        dataset_length_of(ds, i, &len);
        if (check)
            dataset_check_record(ds, i, 0);
    }
    free(buf);
    dataset_close(ds);
}

static void fuzz_remove_dir(void)
{
    static const char *const names[] = {"fixed.jsonl", "fixed.jsonl.offsets", "fixed.jsonl.lengths.n",
                                        "data.jsonl", "data.jsonl.offsets", "data.jsonl.lengths.n"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        unlink(fuzz_path(names[i]));
    rmdir(fuzz_dir);
}

/* The fixed data file and its valid sidecars, made once. */
static void fuzz_setup(void)
{
    const char *tmp = getenv("TMPDIR");
    snprintf(fuzz_dir, sizeof fuzz_dir, "%s/fuzz-jsonl-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(fuzz_dir))
        abort();
    atexit(fuzz_remove_dir);
    fuzz_write("fixed.jsonl", (const uint8_t *)fuzz_fixed, sizeof fuzz_fixed - 1);
    struct dataset_options opt;
    dataset_options_default(&opt);
    opt.length_field = "n";
    dataset_t *ds;
    if (dataset_open(fuzz_path("fixed.jsonl"), &opt, &ds) < 0)
        abort();
    dataset_close(ds);
    fuzz_index = fuzz_slurp("fixed.jsonl.offsets", &fuzz_index_bytes);
    fuzz_lengths = fuzz_slurp("fixed.jsonl.lengths.n", &fuzz_lengths_bytes);
}

/* Writes `name` as the valid `good` file with the words from byte `from` up
 * to byte `to` replaced by the fuzzer's bytes (raw), or by offsets given the
 * tags of their positions (tagged). */
static void fuzz_write_words(const char *name, const uint8_t *good, size_t bytes, size_t to, const uint8_t *data,
                             size_t size, int tagged)
{
    uint8_t *file = malloc(bytes);
    memcpy(file, good, bytes);
    const size_t from = sizeof(struct jsonl_header);
    if (size && !tagged) {
        for (size_t i = from; i < to; i++)
            file[i] = data[(i - from) % size];
    } else if (size) {
        for (size_t w = 0; from + 8 * w < to; w++) {
            uint64_t offset = 0;
            for (size_t b = 0; b < 8; b++)
                offset = offset << 8 | data[(8 * w + b) % size];
            uint64_t word = jsonl_word(w, offset % (sizeof fuzz_fixed + 2)); /* offsets near the data */
            memcpy(file + from + 8 * w, &word, 8);
        }
    }
    fuzz_write(name, file, bytes);
    free(file);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!fuzz_dir[0])
        fuzz_setup();
    if (size == 0)
        return 0;
    uint8_t mode = data[0] % 6;
    data++;
    size--;
    /* The tests below may rewrite the fixed sidecars: put the good ones back. */
    fuzz_write("fixed.jsonl.offsets", fuzz_index, fuzz_index_bytes);
    fuzz_write("fixed.jsonl.lengths.n", fuzz_lengths, fuzz_lengths_bytes);
    if (mode == 0) {
        fuzz_write("fixed.jsonl.offsets", data, size);
        fuzz_read_all("fixed.jsonl", NULL, 1, 0);
    } else if (mode == 1 || mode == 2) { /* the sentinel stays valid */
        fuzz_write_words("fixed.jsonl.offsets", fuzz_index, fuzz_index_bytes, fuzz_index_bytes - 8, data, size,
                         mode == 2);
        fuzz_read_all("fixed.jsonl", mode == 1 ? NULL : "n", 1, 0);
    } else if (mode == 3) {
        fuzz_write_words("fixed.jsonl.lengths.n", fuzz_lengths, fuzz_lengths_bytes, fuzz_lengths_bytes, data, size,
                         0);
        fuzz_read_all("fixed.jsonl", "n", 1, 0);
    } else {
        fuzz_write("data.jsonl", data, size);
        unlink(fuzz_path("data.jsonl.offsets"));
        unlink(fuzz_path("data.jsonl.lengths.n"));
        fuzz_read_all("data.jsonl", mode == 5 ? "n" : NULL, 0, mode == 4);
    }
    return 0;
}
