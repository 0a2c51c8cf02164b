/* fuzz_idx_header: libFuzzer target for the IDX reader (lib/dataset/dataset_idx.c).
 *
 * The input becomes a file on disk, opened through dataset_open() the way a
 * user's path would be: header parse, dimension arithmetic, the size checks,
 * the gzip cache (inputs starting 1f 8b are inflated by zlib) and, for inputs
 * whose first byte N is below 0x40, the next N bytes as the images file and
 * the rest as the labels file beside it. Whatever it opens, it reads the first and last
 * record. It must never crash, hang or read out of bounds. `make fuzz`.
 */
#include "dataset/dataset.h"

#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char fuzz_dir[256];

static void fuzz_write(const char *name, const uint8_t *data, size_t size)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", fuzz_dir, name);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(data, 1, size, f) != size) {
        perror(path);
        abort();
    }
    fclose(f);
}

/* Removes every file of the run (inputs, caches), so runs do not see each other. */
static void fuzz_clean(void)
{
    DIR *dir = opendir(fuzz_dir);
    struct dirent *e;
    char path[512];
    while (dir && (e = readdir(dir)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        snprintf(path, sizeof path, "%s/%s", fuzz_dir, e->d_name);
        unlink(path);
    }
    if (dir)
        closedir(dir);
}

static void fuzz_remove_dir(void)
{
    fuzz_clean();
    rmdir(fuzz_dir);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!fuzz_dir[0]) {
        const char *tmp = getenv("TMPDIR");
        snprintf(fuzz_dir, sizeof fuzz_dir, "%s/fuzz-idx-XXXXXX", tmp && *tmp ? tmp : "/tmp");
        if (!mkdtemp(fuzz_dir))
            abort();
        atexit(fuzz_remove_dir);
    }
    if (size >= 1 && data[0] < 0x40) {
        size_t n = data[0] < size - 1 ? data[0] : size - 1;
        fuzz_write("f-images-idx3-ubyte", data + 1, n);
        fuzz_write("f-labels-idx1-ubyte", data + 1 + n, size - 1 - n);
    } else {
        fuzz_write("f-images-idx3-ubyte", data, size);
    }
    char path[512];
    snprintf(path, sizeof path, "%s/f-images-idx3-ubyte", fuzz_dir);
    dataset_t *ds;
    if (dataset_open(path, NULL, &ds) == 0) {
        const struct dataset_info *in = dataset_info(ds);
        /* a record is never larger than the file that holds it: a few KiB here */
        uint64_t cap = in->max_record_bytes;
        uint8_t *buf = malloc(cap ? cap : 1);
        struct dataset_record rec;
        if (buf && in->length) {
            if (dataset_read(ds, 0, buf, cap, &rec) != 0 || dataset_read(ds, in->length - 1, buf, cap, &rec) != 0)
                abort(); /* a dataset that opened must serve its records */
            if (rec.bytes != in->record_bytes || (in->has_labels && (rec.label < 0 || rec.label > 255)))
                abort();
        }
        free(buf);
        dataset_close(ds);
    }
    fuzz_clean();
    return 0;
}
