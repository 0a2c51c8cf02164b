/* fuzz_safetensors: libFuzzer target for the safetensors reader
 * (lib/ddp/safetensors.c), the parser every --init, --resume and checkpoint
 * goes through. The input becomes a file; whatever opens must have tensors
 * that lie inside the file and tile its data section, and reading each one
 * (as its own dtype and shape) must succeed. It must never crash, hang or
 * read out of bounds. `make fuzz`.
 */
#include "ddp/safetensors.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char fuzz_path[256];

static void fuzz_remove(void) { unlink(fuzz_path); }

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!fuzz_path[0]) {
        const char *tmp = getenv("TMPDIR");
        snprintf(fuzz_path, sizeof fuzz_path, "%s/fuzz-safetensors-%d", tmp && *tmp ? tmp : "/tmp", (int)getpid());
        atexit(fuzz_remove);
    }
    FILE *f = fopen(fuzz_path, "wb");
    if (!f || fwrite(data, 1, size, f) != size)
        abort();
    fclose(f);
    safetensors_t *st;
    if (safetensors_open(fuzz_path, &st) != 0)
        return 0;
    size_t total = 0;
    for (size_t i = 0; i < safetensors_count(st); i++) {
        const struct safetensors_tensor *t = safetensors_at(st, i);
        if (t->bytes > size)
            abort();
        total += t->bytes;
        void *buf = malloc(t->bytes ? t->bytes : 1);
        if (!buf || safetensors_read(st, t->name, t->dtype, t->ndim, t->shape, buf) != 0)
            abort(); /* a tensor the reader accepted must read back as itself */
        free(buf);
    }
    if (total > size)
        abort(); /* the tensors tile the data: never more bytes than the file */
    safetensors_close(st);
    return 0;
}
