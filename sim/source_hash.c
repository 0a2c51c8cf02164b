/* source_hash: a copy's source, hashed block by block (see source_hash.h).
 * Read source_hash_group(). */
#include "sim/source_hash.h"

#include "base/hash.h"
#include "sim/device_exec.h"
#include "transfer/kernels.h"

#include <string.h>

/* Blocks hashed by one device_exec call, into a buffer on the stack. */
#define SOURCE_HASH_GROUP 64u

_Static_assert(SOURCE_HASH_BLOCK == KERNEL_HASH_CHUNK * sizeof(float), "a block is one chunk of the kernel's");

uint64_t source_hash_blocks(uint64_t bytes) { return bytes / SOURCE_HASH_BLOCK + (bytes % SOURCE_HASH_BLOCK != 0); }

/* The words of blocks [first, first + n) of src[0..bytes), n <= SOURCE_HASH_GROUP,
 * into out[0..n). Whole floats go through the device's kernel (its widest
 * clone) when src is a float's alignment, else FNV-1a over each block; the
 * last 1 to 3 bytes of an odd size are folded into their block's word with
 * FNV-1a. A word is only ever compared with the same block's later word, so
 * nothing needs to tell blocks apart. */
static void source_hash_group(const uint8_t *src, uint64_t bytes, uint64_t first, uint64_t n, uint64_t *out)
{
    uint64_t begin = first * SOURCE_HASH_BLOCK, end = begin + n * SOURCE_HASH_BLOCK;
    if (end > bytes)
        end = bytes;
    uint64_t floats = (end - begin) / sizeof(float), whole = 0;
    if ((uintptr_t)src % _Alignof(float) == 0 && floats) {
        whole = floats / KERNEL_HASH_CHUNK + (floats % KERNEL_HASH_CHUNK != 0);
        struct device_op op = {.kind = DEVICE_OP_KERNEL, .name = "hash a copy's source", .batch = -1,
                               .kernel = KERNEL_hash_chunks, .n = whole};
        op.args.hash_chunks = (struct kernel_hash_chunks){.out = out, .x = (const float *)(const void *)(src + begin),
                                                          .count = floats};
        device_exec(&op);
    } else {
        floats = 0;
    }
    for (uint64_t b = whole; b < n; b++) { /* unaligned, or the block of an odd size's last bytes alone */
        uint64_t at = begin + b * SOURCE_HASH_BLOCK, len = end - at < SOURCE_HASH_BLOCK ? end - at : SOURCE_HASH_BLOCK;
        out[b] = hash_fnv1a_words(HASH_FNV1A_BASIS, src + at, len);
    }
    uint64_t tail = begin + floats * sizeof(float);
    if (whole && whole == n && tail < end) /* 1 to 3 bytes after the last float, in the kernel's last block */
        out[whole - 1] = hash_fnv1a(out[whole - 1], src + tail, end - tail);
}

void source_hash_take(const void *src, uint64_t bytes, uint64_t *words)
{
    uint64_t blocks = source_hash_blocks(bytes);
    for (uint64_t b = 0; b < blocks; b += SOURCE_HASH_GROUP)
        source_hash_group(src, bytes, b, blocks - b < SOURCE_HASH_GROUP ? blocks - b : SOURCE_HASH_GROUP, words + b);
}

int64_t source_hash_first_change(const void *src, uint64_t bytes, const uint64_t *words)
{
    uint64_t blocks = source_hash_blocks(bytes), now[SOURCE_HASH_GROUP];
    for (uint64_t b = 0; b < blocks; b += SOURCE_HASH_GROUP) {
        uint64_t n = blocks - b < SOURCE_HASH_GROUP ? blocks - b : SOURCE_HASH_GROUP;
        source_hash_group(src, bytes, b, n, now);
        for (uint64_t i = 0; i < n; i++)
            if (now[i] != words[b + i])
                return (int64_t)(b + i);
    }
    return -1;
}
