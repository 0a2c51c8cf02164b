/* rng: MT19937, bit-identical to PyTorch's CPU generator (torch.Generator()).
 *
 * Where it sits: under the sampler (chapter 2). DistributedSampler seeds a
 * fresh generator with seed + epoch and draws torch.randperm from it; to give
 * the same indices as PyTorch we need the same 32-bit stream. PyTorch's
 * generator is at::mt19937 (aten/src/ATen/core/MT19937RNGEngine.h): the
 * reference MT19937 of Matsumoto and Nishimura (1998), seeded with the
 * standard recurrence from the low 32 bits of the 64-bit seed, and
 * CPUGeneratorImpl::random64() glues two draws with the first as the high word.
 * So std::mt19937(s) and torch.Generator().manual_seed(s) agree for s < 2^32.
 */
#ifndef DDP_RNG_H
#define DDP_RNG_H

#include <stdint.h>

#define RNG_STATE_WORDS 624 /* MT19937's state: 624 words of 32 bits */

typedef struct rng {
    uint32_t state[RNG_STATE_WORDS];
    int next; /* index of the next word to temper; RNG_STATE_WORDS: regenerate first */
} rng_t;

/* Seeds like torch.Generator.manual_seed(seed): only the low 32 bits count, so
 * the seed values -1 and 2^64-1 (same bits) and 5 and 2^32+5 give the same stream.
 * Never fails. */
void rng_seed(rng_t *g, uint64_t seed);

/* The next 32-bit draw (CPUGeneratorImpl::random()). */
uint32_t rng_random(rng_t *g);

/* Two draws, the first as the high word (CPUGeneratorImpl::random64()). */
uint64_t rng_random64(rng_t *g);

/* Fills out[0..count) with the next `count` 32-bit draws, in order: the same
 * as calling rng_random() `count` times, faster (the sampler's hot loop). */
void rng_fill(rng_t *g, uint32_t *out, uint64_t count);

#endif
