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

uint16_t half_from_float(float f);
float half_to_float(uint16_t h);
uint16_t half_bf16_from_float(float f);
float half_bf16_to_float(uint16_t h);

/* The same over arrays: dst[i] = conversion of src[i], i < n. dst and src
 * must not overlap. Never fail. */
void half_from_floats(uint16_t *dst, const float *src, size_t n);
void half_to_floats(float *dst, const uint16_t *src, size_t n);
void half_bf16_from_floats(uint16_t *dst, const float *src, size_t n);
void half_bf16_to_floats(float *dst, const uint16_t *src, size_t n);

#endif
