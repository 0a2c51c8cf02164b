/* test_hash: lib/hash gives the published values, so every index, cache name
 * and checksum written with it keeps its bits. FNV-1a vectors from the FNV
 * reference's test suite; splitmix64's stream for seed 0 from Vigna's
 * splitmix64.c (also java.util.SplittableRandom's mix); the word-wise checksum
 * value was computed independently (Python, little-endian words). */
#include "check.h"
#include "base/hash.h"

TEST(hash_fnv1a_reference_vectors)
{
    CHECK_EQ_U64(hash_fnv1a(HASH_FNV1A_BASIS, "", 0), 0xcbf29ce484222325ull);
    CHECK_EQ_U64(hash_fnv1a(HASH_FNV1A_BASIS, "a", 1), 0xaf63dc4c8601ec8cull);
    CHECK_EQ_U64(hash_fnv1a(HASH_FNV1A_BASIS, "foobar", 6), 0x85944171f73967e8ull);
}

TEST(hash_fnv1a_continues)
{
    CHECK_EQ_U64(hash_fnv1a(hash_fnv1a(HASH_FNV1A_BASIS, "foo", 3), "bar", 3), 0x85944171f73967e8ull);
}

TEST(hash_fnv1a_words_then_tail)
{
    const char *s = "0123456789abc"; /* one word, then five bytes */
    uint64_t want = 0x48c004cb0e3d6b8cull;
    uint64_t one = 1;
    if (*(const unsigned char *)&one == 1) /* the value above is for little-endian words */
        CHECK_EQ_U64(hash_fnv1a_words(HASH_FNV1A_BASIS, s, 13), want);
    /* Under eight bytes it is plain FNV-1a; and any alignment reads the same. */
    CHECK_EQ_U64(hash_fnv1a_words(HASH_FNV1A_BASIS, "foobar", 6), 0x85944171f73967e8ull);
    char buf[32];
    for (int i = 0; i < 13; i++)
        buf[i + 3] = s[i];
    CHECK_EQ_U64(hash_fnv1a_words(HASH_FNV1A_BASIS, buf + 3, 13), hash_fnv1a_words(HASH_FNV1A_BASIS, s, 13));
}

TEST(hash_splitmix64_stream)
{
    uint64_t state = 0;
    CHECK_EQ_U64(hash_splitmix64_next(&state), 0xe220a8397b1dcdafull);
    CHECK_EQ_U64(hash_splitmix64_next(&state), 0x6e789e6aa1b965f4ull);
    CHECK_EQ_U64(hash_splitmix64_next(&state), 0x06c45d188009454full);
    CHECK_EQ_U64(hash_splitmix64(0), 0xe220a8397b1dcdafull);
}

TEST(hash_mix64_is_splitmix64_without_the_increment)
{
    CHECK_EQ_U64(hash_mix64(0x9e3779b97f4a7c15ull), 0xe220a8397b1dcdafull);
    CHECK_EQ_U64(hash_mix64(0), 0); /* a bijection that fixes 0: why splitmix64 adds first */
}
