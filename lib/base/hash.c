/* hash: FNV-1a and splitmix64 (read hash.h first). */
#include "base/hash.h"

#include <string.h>

#define HASH_SPLITMIX64_GAMMA 0x9e3779b97f4a7c15ull /* 2^64 / golden ratio, odd (Steele et al.) */

uint64_t hash_fnv1a(uint64_t h, const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * HASH_FNV1A_PRIME;
    return h;
}

uint64_t hash_fnv1a_words(uint64_t h, const void *p, size_t n)
{
    const unsigned char *b = p;
    size_t i = 0;
    for (uint64_t w; i + 8 <= n; i += 8) {
        memcpy(&w, b + i, 8); /* any alignment */
        h = (h ^ w) * HASH_FNV1A_PRIME;
    }
    return hash_fnv1a(h, b + i, n - i);
}

uint64_t hash_splitmix64(uint64_t x) { return hash_mix64(x + HASH_SPLITMIX64_GAMMA); }

uint64_t hash_splitmix64_next(uint64_t *state)
{
    uint64_t z = hash_splitmix64(*state);
    *state += HASH_SPLITMIX64_GAMMA;
    return z;
}
