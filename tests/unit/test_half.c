/* test_half: lib/base/half's float16 and bfloat16 conversions equal
 * PyTorch's (NaNs included, both ways), and a sum computed by widening, adding in float32 and narrowing
 * is the correctly rounded 16-bit sum (the claim the communicator's
 * half-precision reduction rests on). The vectors were printed by torch 1.13:
 *     u = np.array([bits], dtype=np.uint32); f = torch.from_numpy(u.view(np.float32))
 *     f.to(torch.float16).view(torch.int16), f.to(torch.bfloat16).view(torch.int16)
 */
#include "check.h"
#include "base/half.h"
#include "base/hash.h"

#include <math.h>

static float bits_float(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

struct half_vector {
    uint32_t f32;
    uint16_t f16, bf16;
};

static const struct half_vector torch_vectors[] = {
    {0x00000000u, 0x0000u, 0x0000u}, /* 0.0 */
    {0x80000000u, 0x8000u, 0x8000u}, /* -0.0 */
    {0x3f800000u, 0x3c00u, 0x3f80u}, /* 1.0 */
    {0xbf800000u, 0xbc00u, 0xbf80u}, /* -1.0 */
    {0x477fe000u, 0x7bffu, 0x4780u}, /* 65504, the largest float16 */
    {0x477fefffu, 0x7bffu, 0x4780u}, /* just below the tie with 65536 */
    {0x477ff000u, 0x7c00u, 0x4780u}, /* 65520: the tie rounds to even, infinity */
    {0x7f7fffffu, 0x7c00u, 0x7f80u}, /* FLT_MAX: bfloat16 rounds it to infinity too */
    {0x7f800000u, 0x7c00u, 0x7f80u}, /* inf */
    {0xff800000u, 0xfc00u, 0xff80u}, /* -inf */
    {0x7fc00000u, 0x7e00u, 0x7fc0u}, /* NaN (torch's vector path gives 0xffff for bfloat16, its scalar path 0x7fc0) */
    {0x38800000u, 0x0400u, 0x3880u}, /* 2^-14, the smallest normal float16 */
    {0x387fffffu, 0x0400u, 0x3880u}, /* the largest subnormal-range float rounds up to it */
    {0x33800000u, 0x0001u, 0x3380u}, /* 2^-24, the smallest subnormal */
    {0x33000000u, 0x0000u, 0x3300u}, /* 2^-25: the tie rounds to even, zero */
    {0x33000001u, 0x0001u, 0x3300u}, /* just above the tie */
    {0x337fffffu, 0x0001u, 0x3380u},
    {0x00000001u, 0x0000u, 0x0000u}, /* the smallest float32 subnormal */
    {0x3f801000u, 0x3c00u, 0x3f80u}, /* 1 + 2^-11: tie, to even (down) */
    {0x3f803000u, 0x3c02u, 0x3f80u}, /* 1 + 3 x 2^-11: tie, to even (up) */
    {0x3f800fffu, 0x3c00u, 0x3f80u},
    {0x3f801001u, 0x3c01u, 0x3f80u},
    {0x40490fdbu, 0x4248u, 0x4049u}, /* pi */
    {0x3dcccccdu, 0x2e66u, 0x3dcdu}, /* 0.1 */
    {0x3f808000u, 0x3c04u, 0x3f80u}, /* bfloat16 tie, to even (down) */
    {0x3f818000u, 0x3c0cu, 0x3f82u}, /* bfloat16 tie, to even (up) */
    {0x7f7f8000u, 0x7c00u, 0x7f80u}, /* bfloat16 tie at the top: infinity */
    {0x7f7f7fffu, 0x7c00u, 0x7f7fu},
    {0x00800000u, 0x0000u, 0x0080u}, /* FLT_MIN */
    {0x007fffffu, 0x0000u, 0x0080u},
};

TEST(half_narrowing_matches_torch)
{
    for (size_t i = 0; i < sizeof torch_vectors / sizeof torch_vectors[0]; i++) {
        const struct half_vector *v = &torch_vectors[i];
        float f = bits_float(v->f32);
        CHECK_MSG(half_from_float(f) == v->f16, "float16 of 0x%08x: expected 0x%04x, got 0x%04x", v->f32, v->f16,
                  half_from_float(f));
        CHECK_MSG(half_bf16_from_float(f) == v->bf16, "bfloat16 of 0x%08x: expected 0x%04x, got 0x%04x", v->f32,
                  v->bf16, half_bf16_from_float(f));
    }
}

/* Widening NaNs, as torch 1.13 printed them (h.to(torch.float32).view(torch.int32), one element and a
 * thousand alike, its scalar and vector paths): float16 quiets a signaling NaN, keeping the payload;
 * bfloat16 is a shift, and keeps even a signaling NaN as it is. */
TEST(half_widening_nans_matches_torch)
{
    static const struct {
        int bf16;
        uint16_t h;
        uint32_t f32;
    } v[] = {{0, 0x7c01u, 0x7fc02000u}, {0, 0xfc01u, 0xffc02000u}, {0, 0x7d00u, 0x7fe00000u},
             {0, 0x7e00u, 0x7fc00000u}, {0, 0x7c00u, 0x7f800000u}, {1, 0x7f81u, 0x7f810000u},
             {1, 0xff81u, 0xff810000u}, {1, 0x7fc0u, 0x7fc00000u}};
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
        float f = v[i].bf16 ? half_bf16_to_float(v[i].h) : half_to_float(v[i].h);
        uint32_t u;
        memcpy(&u, &f, sizeof u);
        CHECK_MSG(u == v[i].f32, "%s 0x%04x widens to 0x%08x, torch gives 0x%08x", v[i].bf16 ? "bfloat16" : "float16",
                  v[i].h, u, v[i].f32);
    }
}

TEST(half_every_value_round_trips)
{
    for (uint32_t h = 0; h < 65536; h++) {
        float f = half_to_float((uint16_t)h), g = half_bf16_to_float((uint16_t)h);
        int f_nan = (h & 0x7c00u) == 0x7c00u && (h & 0x3ffu), g_nan = (h & 0x7f80u) == 0x7f80u && (h & 0x7fu);
        CHECK_MSG(f_nan ? isnan(f) : half_from_float(f) == h, "float16 0x%04x -> %g does not come back", h, f);
        CHECK_MSG(g_nan ? isnan(g) : half_bf16_from_float(g) == h, "bfloat16 0x%04x -> %g does not come back", h, g);
    }
    CHECK(half_to_float(0x0001u) == 0x1p-24f);
    CHECK(half_to_float(0x7bffu) == 65504.0f);
    CHECK(half_to_float(0xfc00u) == -INFINITY);
}

TEST(half_arrays_equal_scalars)
{
    float src[1000], back[1000];
    uint16_t a[1000], b[1000];
    uint64_t state = 7;
    for (int i = 0; i < 1000; i++)
        src[i] = bits_float((uint32_t)hash_splitmix64_next(&state));
    half_from_floats(a, src, 1000);
    half_bf16_from_floats(b, src, 1000);
    for (int i = 0; i < 1000; i++) {
        CHECK_EQ(a[i], half_from_float(src[i]));
        CHECK_EQ(b[i], half_bf16_from_float(src[i]));
    }
    half_to_floats(back, a, 1000);
    for (int i = 0; i < 1000; i++)
        CHECK(memcmp(&back[i], &(float){half_to_float(a[i])}, 4) == 0);
    half_bf16_to_floats(back, b, 1000);
    for (int i = 0; i < 1000; i++)
        CHECK(memcmp(&back[i], &(float){half_bf16_to_float(b[i])}, 4) == 0);
}

/* The float16 nearest to x (exact in double), ties to even, by search over
 * the finite values: the definition, with no rounding trick. */
static uint16_t nearest_half(double x)
{
    uint16_t best = 0;
    double best_d = INFINITY;
    for (uint32_t h = 0; h < 0x7c00u; h++) { /* positive finite values, in increasing order */
        double d = fabs(fabs(x) - (double)half_to_float((uint16_t)h));
        if (d < best_d || (d == best_d && !(h & 1u))) {
            best = (uint16_t)h;
            best_d = d;
        }
    }
    if (fabs(x) >= 65520.0)
        best = 0x7c00u;
    return (uint16_t)(best | (x < 0 ? 0x8000u : 0));
}

TEST(half_float32_sum_is_the_correctly_rounded_sum)
{
    uint64_t state = 11;
    for (int i = 0; i < 300; i++) {
        uint16_t a = (uint16_t)(hash_splitmix64_next(&state) & 0x7bffu), b = (uint16_t)hash_splitmix64_next(&state);
        if ((b & 0x7c00u) == 0x7c00u)
            continue;
        if (i % 3 == 0) /* near each other: cancellation and ties */
            b = (uint16_t)((a ^ 0x8000u) + (hash_splitmix64_next(&state) & 7));
        double exact = (double)half_to_float(a) + (double)half_to_float(b);
        uint16_t got = half_from_float(half_to_float(a) + half_to_float(b));
        uint16_t want = nearest_half(exact);
        if (exact == 0)
            want = 0; /* x + (-x) is +0 in round-to-nearest */
        CHECK_MSG(got == want, "0x%04x + 0x%04x: expected 0x%04x, got 0x%04x", a, b, want, got);
    }
}
