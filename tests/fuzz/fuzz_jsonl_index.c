/* fuzz_jsonl_index: libFuzzer target for the JSONL reader and its offset index
 * (lib/dataset/dataset_jsonl.c). `make fuzz`.
 *
 * The first byte of the input picks what the rest becomes:
 *   0  the index file (`fixed.jsonl.offsets`) beside a small valid data file:
 *      the header checks must reject it or accept it, never trust it blindly;
 *   1  the entries of an index whose header and sentinel are valid for that
 *      data file (so the fuzzer reaches past the header checks): damaged
 *      offsets must become read errors, never reads outside the data;
 *   2  a data file, indexed by byte lengths;
 *   3  a data file, indexed with the length field "n" (jansson on every line).
 * Whatever opens, every record is read and its length asked. It must never
 * crash, hang or read out of bounds.
 */
#include "dataset/dataset.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define FUZZ_HEADER_BYTES 72 /* sizeof(struct jsonl_header) in lib/dataset/dataset_jsonl.c */

static char fuzz_dir[256];
static uint8_t *fuzz_index;     /* the fixed data file's whole, valid index */
static size_t fuzz_index_bytes;

static const char fuzz_fixed[] = "{\"n\":1}\n\n{\"n\":22,\"t\":\"x\"}\r\n  \n{\"n\":3}";

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

static void fuzz_read_all(const char *name, const char *field)
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
        if (dataset_read(ds, i, buf, info->max_record_bytes, &rec) == 0 && rec.bytes > info->max_record_bytes)
            abort(); /* a record larger than the bound the index promised */
        dataset_length_of(ds, i, &len);
    }
    free(buf);
    dataset_close(ds);
}

static void fuzz_remove_dir(void)
{
    static const char *const names[] = {"fixed.jsonl", "fixed.jsonl.offsets", "data.jsonl", "data.jsonl.offsets"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        unlink(fuzz_path(names[i]));
    rmdir(fuzz_dir);
}

/* The fixed data file and a valid header for it, made once. */
static void fuzz_setup(void)
{
    const char *tmp = getenv("TMPDIR");
    snprintf(fuzz_dir, sizeof fuzz_dir, "%s/fuzz-jsonl-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(fuzz_dir))
        abort();
    atexit(fuzz_remove_dir);
    fuzz_write("fixed.jsonl", (const uint8_t *)fuzz_fixed, sizeof fuzz_fixed - 1);
    dataset_t *ds;
    if (dataset_open(fuzz_path("fixed.jsonl"), NULL, &ds) < 0)
        abort();
    dataset_close(ds);
    struct stat st;
    if (stat(fuzz_path("fixed.jsonl.offsets"), &st) != 0)
        abort();
    fuzz_index_bytes = (size_t)st.st_size;
    fuzz_index = malloc(fuzz_index_bytes);
    FILE *f = fopen(fuzz_path("fixed.jsonl.offsets"), "rb");
    if (!f || !fuzz_index || fread(fuzz_index, 1, fuzz_index_bytes, f) != fuzz_index_bytes)
        abort();
    fclose(f);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!fuzz_dir[0])
        fuzz_setup();
    if (size == 0)
        return 0;
    uint8_t mode = data[0] % 4;
    data++;
    size--;
    if (mode == 0) {
        fuzz_write("fixed.jsonl.offsets", data, size);
        fuzz_read_all("fixed.jsonl", NULL);
    } else if (mode == 1) {
        /* The header and the sentinel entry stay valid; the entries between
         * them are the fuzzer's. */
        uint8_t *index = malloc(fuzz_index_bytes);
        memcpy(index, fuzz_index, fuzz_index_bytes);
        for (size_t i = FUZZ_HEADER_BYTES; size && i < fuzz_index_bytes - 8; i++)
            index[i] = data[(i - FUZZ_HEADER_BYTES) % size];
        fuzz_write("fixed.jsonl.offsets", index, fuzz_index_bytes);
        free(index);
        fuzz_read_all("fixed.jsonl", NULL);
    } else {
        fuzz_write("data.jsonl", data, size);
        unlink(fuzz_path("data.jsonl.offsets"));
        fuzz_read_all("data.jsonl", mode == 3 ? "n" : NULL);
    }
    return 0;
}
