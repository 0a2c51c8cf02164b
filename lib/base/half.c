/* half: float16 and bfloat16 conversions over arrays (see half.h, which
 * holds the scalar ones). Checked against torch 1.13's tensor.to() over all
 * 2^32 float32 patterns when written: every float16 equal; bfloat16 equal
 * except NaN, where torch's vectorized path gives 0xffff and its scalar path,
 * like ours, 0x7fc0. */
#include "base/half.h"

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
