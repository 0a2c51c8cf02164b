/* rng: MT19937 as PyTorch's CPU generator runs it (see rng.h). The constants
 * are the reference implementation's (Matsumoto and Nishimura, mt19937ar.c):
 * matrix A = 0x9908b0df, tempering masks 0x9d2c5680 / 0xefc60000, and the
 * seeding multiplier 1812433253 (Knuth, TAOCP vol. 2, 3rd ed., p. 106). */
#include "base/rng.h"

#include <string.h>

#define RNG_SHIFT 397 /* M: the middle word of the recurrence */

void rng_seed(rng_t *g, uint64_t seed)
{
    g->state[0] = (uint32_t)seed; /* at::mt19937::init_with_uint32 keeps the low 32 bits */
    for (uint32_t j = 1; j < RNG_STATE_WORDS; j++)
        g->state[j] = 1812433253u * (g->state[j - 1] ^ (g->state[j - 1] >> 30)) + j;
    g->next = RNG_STATE_WORDS;
}

/* Four words at a time with GCC/Clang vector extensions (plain scalar code on
 * a machine without SIMD). The recurrence reads words 1 and 397 (or 397 - 624,
 * already regenerated) places ahead, never inside its own group of four, so
 * updating four at once gives the reference's exact sequence. */
typedef uint32_t rng_v4 __attribute__((vector_size(16)));

static inline rng_v4 rng_load4(const uint32_t *p)
{
    rng_v4 v;
    memcpy(&v, p, sizeof v);
    return v;
}

static inline void rng_store4(uint32_t *p, rng_v4 v) { memcpy(p, &v, sizeof v); }

static inline uint32_t rng_twist_word(uint32_t upper, uint32_t lower, uint32_t far)
{
    uint32_t y = (upper & 0x80000000u) | (lower & 0x7fffffffu);
    return far ^ (y >> 1) ^ (-(y & 1u) & 0x9908b0dfu); /* a mask, not a branch: the low bit is random */
}

static inline rng_v4 rng_twist4(rng_v4 upper, rng_v4 lower, rng_v4 far)
{
    rng_v4 y = (upper & 0x80000000u) | (lower & 0x7fffffffu);
    return far ^ (y >> 1) ^ (-(y & 1u) & 0x9908b0dfu);
}

/* Regenerates all 624 words at once, as the reference code does. */
static void rng_twist(rng_t *g)
{
    uint32_t *s = g->state;
    const int split = RNG_STATE_WORDS - RNG_SHIFT; /* 227: from here the far word wraps around */
    int k = 0;
    for (; k + 4 <= split; k += 4)
        rng_store4(s + k, rng_twist4(rng_load4(s + k), rng_load4(s + k + 1), rng_load4(s + k + RNG_SHIFT)));
    for (; k < split; k++)
        s[k] = rng_twist_word(s[k], s[k + 1], s[k + RNG_SHIFT]);
    for (; k + 4 <= RNG_STATE_WORDS - 1; k += 4)
        rng_store4(s + k, rng_twist4(rng_load4(s + k), rng_load4(s + k + 1), rng_load4(s + k - split)));
    for (; k < RNG_STATE_WORDS - 1; k++)
        s[k] = rng_twist_word(s[k], s[k + 1], s[k - split]);
    s[k] = rng_twist_word(s[k], s[0], s[RNG_SHIFT - 1]);
    g->next = 0;
}

static inline uint32_t rng_temper(uint32_t y)
{
    y ^= y >> 11;
    y ^= (y << 7) & 0x9d2c5680u;
    y ^= (y << 15) & 0xefc60000u;
    return y ^ (y >> 18);
}

static inline rng_v4 rng_temper4(rng_v4 y)
{
    y ^= y >> 11;
    y ^= (y << 7) & 0x9d2c5680u;
    y ^= (y << 15) & 0xefc60000u;
    return y ^ (y >> 18);
}

uint32_t rng_random(rng_t *g)
{
    if (g->next >= RNG_STATE_WORDS)
        rng_twist(g);
    return rng_temper(g->state[g->next++]);
}

uint64_t rng_random64(rng_t *g)
{
    uint64_t hi = rng_random(g);
    return hi << 32 | rng_random(g);
}

void rng_fill(rng_t *g, uint32_t *out, uint64_t count)
{
    while (count > 0) {
        if (g->next >= RNG_STATE_WORDS)
            rng_twist(g);
        uint64_t run = (uint64_t)(RNG_STATE_WORDS - g->next);
        if (run > count)
            run = count;
        const uint32_t *s = g->state + g->next;
        uint64_t k = 0;
        for (; k + 4 <= run; k += 4)
            rng_store4(out + k, rng_temper4(rng_load4(s + k)));
        for (; k < run; k++)
            out[k] = rng_temper(s[k]);
        g->next += (int)run;
        out += run;
        count -= run;
    }
}
