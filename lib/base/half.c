/* half: float16 and bfloat16 conversions (see half.h). Bit manipulation on
 * the float32 pattern; the only arithmetic is one float32 addition that
 * rounds float16 subnormals, relying on the FPU's round-to-nearest-even.
 * Checked against torch 1.13's tensor.to() over all 2^32 float32 patterns
 * when written: every float16 equal; bfloat16 equal except NaN, where torch's
 * vectorized path gives 0xffff and its scalar path, like ours, 0x7fc0. */
#include "base/half.h"

#include <string.h>

static uint32_t half_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static float half_float(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

uint16_t half_from_float(float f)
{
    uint32_t u = half_bits(f);
    uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
    uint32_t a = u & 0x7fffffffu;
    if (a > 0x7f800000u) /* NaN: the quiet NaN, sign kept, as c10::Half */
        return sign | 0x7e00u;
    if (a >= 0x477ff000u) /* 65520 and up (inf included) round to infinity: 65504 is the largest finite */
        return sign | 0x7c00u;
    if (a < 0x38800000u) {
        /* Below 2^-14, the smallest normal: a subnormal (or zero) counts
         * multiples of 2^-24. Adding 0.5, whose float32 ulp is 2^-24, makes
         * the FPU round |f| to such a multiple; the count is then the low
         * bits of the sum. 1024 multiples is 2^-14 itself, whose bits 0x0400
         * are exactly right. */
        float sum = half_float(a) + 0.5f;
        return sign | (uint16_t)(half_bits(sum) - half_bits(0.5f));
    }
    /* Normal: rebias the exponent (127 - 15 = 112), keep the top 10 fraction
     * bits, round on the 13 dropped ones; a carry out of the fraction moves
     * into the exponent, which is what rounding up must do. */
    uint32_t r = a - (112u << 23);
    r += 0xfffu + ((r >> 13) & 1u);
    return sign | (uint16_t)(r >> 13);
}

float half_to_float(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
    if (e == 0x1f) /* infinity; a NaN keeps its payload and comes out quiet, as torch's c10::Half gives it */
        return half_float(sign | 0x7f800000u | (m << 13) | (m ? 0x400000u : 0));
    if (e != 0)
        return half_float(sign | ((e + 112) << 23) | (m << 13));
    /* zero or subnormal: m x 2^-24, exact in float32 */
    return half_float(sign | half_bits((float)m * 0x1p-24f));
}

uint16_t half_bf16_from_float(float f)
{
    uint32_t u = half_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) /* NaN: c10::BFloat16's quiet NaN */
        return 0x7fc0u;
    /* round to nearest even on the 16 dropped bits; an overflow to the
     * exponent's all-ones pattern is infinity, as it should be */
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

float half_bf16_to_float(uint16_t h) { return half_float((uint32_t)h << 16); }

void half_from_floats(uint16_t *dst, const float *src, size_t n)
{
    for (size_t i = 0; i < n; i++)
        dst[i] = half_from_float(src[i]);
}

void half_to_floats(float *dst, const uint16_t *src, size_t n)
{
    for (size_t i = 0; i < n; i++)
        dst[i] = half_to_float(src[i]);
}

void half_bf16_from_floats(uint16_t *dst, const float *src, size_t n)
{
    for (size_t i = 0; i < n; i++)
        dst[i] = half_bf16_from_float(src[i]);
}

void half_bf16_to_floats(float *dst, const uint16_t *src, size_t n)
{
    for (size_t i = 0; i < n; i++)
        dst[i] = half_bf16_to_float(src[i]);
}
