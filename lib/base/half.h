/* half: the two 16-bit floating-point formats gradients travel in when they
 * are compressed, and their conversions to and from float32.
 *
 * Where it sits: under the communicator (chapter 5), which sums float16 and
 * bfloat16 buffers element by element, and DDP's compression hook (chapter
 * 6), which rounds a bucket of float32 gradients to 16 bits before the
 * all-reduce and widens the result after it.
 *
 * - float16 (IEEE 754 binary16): 1 sign, 5 exponent, 10 fraction bits; range
 *   about 6e-8 (subnormal) to 65504, 11 significant bits.
 * - bfloat16 (the top half of a float32): 1 sign, 8 exponent, 7 fraction
 *   bits; float32's range with 8 significant bits.
 *
 * Both narrowings round to nearest, ties to even, as PyTorch's
 * tensor.to(torch.float16 / torch.bfloat16) does on the CPU (c10/util/Half.h,
 * c10/util/BFloat16.h): a float32 above the largest finite value (after
 * rounding) becomes infinity, and every NaN becomes the one quiet NaN PyTorch
 * produces (0x7e00, 0x7fc0). Widening is exact, except that a signaling
 * float16 NaN comes out quiet (its payload kept), as torch's does.
 *
 * Arithmetic on 16-bit values is done by widening to float32, computing and
 * narrowing once. For +, -, x and / that is the correctly rounded 16-bit
 * result: float32's 24 significant bits are at least 2p + 2 for p = 11 and
 * p = 8, so the double rounding is innocuous (S. A. Figueroa, "When is double
 * rounding innocuous?", SIGNUM Newsletter 30(3), 1995). So our sums equal a
 * native half-precision add, as NCCL's.
 */
#ifndef DDP_HALF_H
#define DDP_HALF_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "base/kernel_fn.h"

/* The four scalar conversions are inline, written once for gcc and nvcc
 * (base/kernel_fn.h): the device's compression kernels round exactly as the
 * host does. Bit manipulation on the float32 pattern; the only arithmetic is
 * one float32 addition that rounds float16 subnormals, relying on the FPU's
 * round-to-nearest-even. */
KERNEL_FN uint32_t half_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

KERNEL_FN float half_float(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

KERNEL_FN uint16_t half_from_float(float f)
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

KERNEL_FN float half_to_float(uint16_t h)
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

KERNEL_FN uint16_t half_bf16_from_float(float f)
{
    uint32_t u = half_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) /* NaN: c10::BFloat16's quiet NaN */
        return 0x7fc0u;
    /* round to nearest even on the 16 dropped bits; an overflow to the
     * exponent's all-ones pattern is infinity, as it should be */
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

KERNEL_FN float half_bf16_to_float(uint16_t h) { return half_float((uint32_t)h << 16); }


/* The same over arrays: dst[i] = conversion of src[i], i < n. dst and src
 * must not overlap. Never fail. */
void half_from_floats(uint16_t *dst, const float *src, size_t n);
void half_to_floats(float *dst, const uint16_t *src, size_t n);
void half_bf16_from_floats(uint16_t *dst, const float *src, size_t n);
void half_bf16_to_floats(float *dst, const uint16_t *src, size_t n);

#endif
