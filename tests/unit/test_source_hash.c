/* test_source_hash: the bytes check of an in-flight copy's source
 * (sim/source_hash.h), driven directly.
 *
 * For sources of every awkward size (a byte, the sizes around a 4 KiB block
 * and around a group of the kernel's blocks, odd tails) at every alignment
 * of a float, a byte changed anywhere (the first, the last, either side of
 * each block boundary, the odd tail) is found in its own block, and nothing
 * is found when nothing changed; a bit flipped beside hostile neighbours
 * (the replica hash's old weak case) is seen.
 */
#include "check.h"
#include "base/hash.h"
#include "sim/source_hash.h"

#include <stdlib.h>
#include <string.h>

/* Bytes no two blocks share (a generator's, not a pattern's: a pattern of
 * period 512 would make every block alike, and a swap no change at all). */
static void test_fill(uint8_t *p, uint64_t n, uint64_t seed)
{
    for (uint64_t i = 0; i < n; i++)
        p[i] = (uint8_t)(hash_splitmix64(seed << 40 ^ i) >> 56);
}

/* Changes byte `at` of src[0..bytes) (bit `bit`), expects its block, puts it back. */
static void test_change(uint8_t *src, uint64_t bytes, const uint64_t *words, uint64_t at, int bit)
{
    src[at] ^= (uint8_t)(1u << bit);
    int64_t got = source_hash_first_change(src, bytes, words);
    CHECK_MSG(got == (int64_t)(at / SOURCE_HASH_BLOCK), "%llu bytes at alignment %u: bit %d of byte %llu changed, "
              "found block %lld", (unsigned long long)bytes, (unsigned)((uintptr_t)src % 4), bit,
              (unsigned long long)at, (long long)got);
    src[at] ^= (uint8_t)(1u << bit);
}

TEST(source_hash_finds_the_block_of_any_changed_byte)
{
    static const uint64_t sizes[] = {1, 3, 4, 5, 7, 4095, 4096, 4097, 4099, 8192, 8195, 64 * 4096, 64 * 4096 + 1,
                                     65 * 4096 + 3, 300001};
    uint8_t *buf = malloc(300001 + 8);
    CHECK(buf != NULL);
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++)
        for (unsigned align = 0; align < 4; align++) {
            uint64_t bytes = sizes[k];
            uint8_t *src = buf + align;
            test_fill(src, bytes, k);
            uint64_t blocks = source_hash_blocks(bytes);
            CHECK_EQ_U64(blocks, (bytes + 4095) / 4096);
            uint64_t *words = malloc(blocks * sizeof *words), *again = malloc(blocks * sizeof *again);
            CHECK(words && again);
            source_hash_take(src, bytes, words);
            source_hash_take(src, bytes, again);
            CHECK(memcmp(words, again, blocks * sizeof *words) == 0);
            CHECK_EQ(source_hash_first_change(src, bytes, words), -1);
            test_change(src, bytes, words, 0, 0);
            test_change(src, bytes, words, bytes - 1, 7);
            for (uint64_t b = SOURCE_HASH_BLOCK; b < bytes; b += SOURCE_HASH_BLOCK) {
                test_change(src, bytes, words, b - 1, 3);
                test_change(src, bytes, words, b, 0);
            }
            for (uint64_t t = bytes & ~(uint64_t)3; t < bytes; t++) /* the bytes after the last whole float */
                test_change(src, bytes, words, t, 5);
            CHECK_EQ(source_hash_first_change(src, bytes, words), -1);
            free(words);
            free(again);
        }
    free(buf);
}

/* The replica hash's lane pairs two floats in one 64-bit word; a bit of one
 * flipped beside a partner of any bits is still a change (the hostile
 * partners of test_kernels' case, here in a copy's bytes). */
TEST(source_hash_a_bit_beside_hostile_neighbours_is_seen)
{
    static const uint32_t partners[] = {0x7f4a7c14u, 0x7f4a7c15u, 0x9e3779b9u, 0xffffffffu, 0u, 0x80000000u};
    uint32_t src[1024];
    uint64_t words[1];
    for (size_t p = 0; p < sizeof partners / sizeof partners[0]; p++)
        for (int bit = 0; bit < 32; bit++) {
            for (int i = 0; i < 1024; i++)
                src[i] = partners[p];
            source_hash_take(src, sizeof src, words);
            src[0] ^= 1u << bit;
            CHECK_MSG(source_hash_first_change(src, sizeof src, words) == 0, "bit %d beside %08x", bit, partners[p]);
        }
}
