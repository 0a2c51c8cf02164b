/* hash: the two small non-cryptographic hashes the project uses everywhere.
 *
 * Where it sits: under the datasets (index and cache file names, the JSONL
 * index's checksums, synthetic records), the communication checks (a checksum
 * of every collective's buffer) and the chapter 1 benchmarks (random indices).
 * One copy, so a file written by one module and checked by another always
 * agrees on the bits.
 *
 * - FNV-1a, 64 bits (Fowler, Noll, Vo; offset basis and prime from the FNV
 *   reference, http://www.isthe.com/chongo/tech/comp/fnv/): tells two files,
 *   paths or buffers apart; no defence against an attacker.
 * - splitmix64 (Steele, Lea, Flood, "Fast splittable pseudorandom number
 *   generators", OOPSLA 2014): a well-mixed 64-bit function of a counter, used
 *   as a hash and as a seeded generator.
 */
#ifndef DDP_HASH_H
#define DDP_HASH_H

#include "base/kernel_fn.h"

#include <stddef.h>
#include <stdint.h>

#define HASH_FNV1A_BASIS 0xcbf29ce484222325ull /* FNV-1a's 64-bit offset basis: hash of nothing */
#define HASH_FNV1A_PRIME 0x100000001b3ull      /* FNV's 64-bit prime, 2^40 + 2^8 + 0xb3 */

/* FNV-1a of bytes p[0..n), continuing from `h`: pass HASH_FNV1A_BASIS to
 * start; hash_fnv1a(hash_fnv1a(B, a, n), b, m) is the hash of a then b.
 * Never fails; n == 0 returns h. */
uint64_t hash_fnv1a(uint64_t h, const void *p, size_t n);

/* FNV-1a's step applied to native-endian 8-byte words, then to the 0..7 bytes
 * left over, continuing from `h`. Not the same value as hash_fnv1a() of the
 * same bytes; eight times fewer multiplies, for checksums that must run at
 * memory speed. Never fails. */
uint64_t hash_fnv1a_words(uint64_t h, const void *p, size_t n);

/* splitmix64's finaliser alone (two multiply-xorshift rounds): a bijection
 * of 64-bit words that spreads every input bit over the output. Never fails.
 * A kernel function: the device's hash of a replica (transfer/kernels.h)
 * mixes with it too. */
KERNEL_FN uint64_t hash_mix64(uint64_t x)
{
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull; /* Stafford's "Mix13" constants, as in Vigna's splitmix64.c */
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

/* splitmix64's output for state `x`: hash_mix64(x + 0x9e3779b97f4a7c15). A pure function, so f(seed ^ f(i)) names record i of a seeded
 * stream without any state. */
uint64_t hash_splitmix64(uint64_t x);

/* The generator: returns hash_splitmix64(*state) and advances *state by the
 * golden-ratio increment, so successive calls give splitmix64's stream. */
uint64_t hash_splitmix64_next(uint64_t *state);

#endif
