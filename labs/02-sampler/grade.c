/* grade.c: lab 2, the rank split of DistributedSampler (`make lab-2`).
 *
 * Your lib/sampler/sampler.c regions are graded against vectors printed by PyTorch
 * 1.13's torch.utils.data.DistributedSampler (after set_epoch), then against
 * the properties every correct split has. Read labs/02-sampler/README.md. */
#include "grader.h"

#include "base/error.h"
#include "sampler/sampler.h"

#include <stdlib.h>

#define MAX_RANKS 16
#define MAX_LEN 8

/* list(DistributedSampler(range(n), num_replicas=world, rank=r, shuffle=...,
 * seed=seed, drop_last=...)) after set_epoch(epoch), for every rank r. */
struct torch_case {
    uint64_t n;
    uint32_t world;
    uint64_t seed;
    uint64_t epoch;
    int shuffle, drop_last;
    uint64_t len;
    uint64_t want[MAX_RANKS][MAX_LEN];
};

static const struct torch_case golden = {10, 3, 0, 0, 1, 0, 4, {{4, 5, 0, 2}, {1, 3, 8, 4}, {7, 9, 6, 1}}};
static const struct torch_case later_epoch = {7, 2, 42, 3, 1, 0, 4, {{5, 1, 4, 0}, {3, 2, 6, 5}}};
static const struct torch_case drop_last_cases[] = {
    {20, 3, UINT64_MAX /* -1 */, 2, 1, 1, 6, {{5, 11, 1, 7, 16, 3}, {13, 19, 9, 0, 10, 6}, {2, 18, 4, 14, 15, 17}}},
    {10, 4, 0, 1, 1, 1, 2, {{5, 0}, {6, 8}, {1, 9}, {2, 3}}},
};
static const struct torch_case padding_cases[] = {
    {3, 5, 0, 0, 0, 0, 1, {{0}, {1}, {2}, {0}, {1}}},
    {5, 8, (1ull << 32) + 5, 1, 1, 0, 1, {{0}, {2}, {1}, {3}, {4}, {0}, {2}, {1}}},
    /* padding > n: the order repeats more than once (here 3 and 5 times) */
    {2, 7, 0, 0, 1, 0, 1, {{0}, {1}, {0}, {1}, {0}, {1}, {0}}},
    {2, 7, (1ull << 32) + 3, 5, 1, 0, 1, {{1}, {0}, {1}, {0}, {1}, {0}, {1}}},
    {3, 16, 7, 2, 1, 0, 1, {{1}, {0}, {2}, {1}, {0}, {2}, {1}, {0}, {2}, {1}, {0}, {2}, {1}, {0}, {2}, {1}}},
};

static sampler_t *make(uint64_t n, uint32_t world, uint32_t rank, uint64_t seed, int shuffle, int drop_last)
{
    struct sampler_options o = {.size = n, .world = world, .rank = rank, .seed = seed, .shuffle = shuffle,
                                .drop_last = drop_last, .mode = SAMPLER_TORCH, .randperm = SAMPLER_RANDPERM_AUTO};
    sampler_t *s;
    CHECK_OK(sampler_create(&o, &s));
    return s;
}

static void check_case(const struct torch_case *c)
{
    for (uint32_t r = 0; r < c->world; r++) {
        sampler_t *s = make(c->n, c->world, r, c->seed, c->shuffle, c->drop_last);
        sampler_set_epoch(s, c->epoch);
        CHECK_OK(sampler_begin(s));
        CHECK_MSG(sampler_len(s) == c->len, "n=%llu world=%u rank %u: num_samples %llu, PyTorch says %llu",
                  (unsigned long long)c->n, c->world, r, (unsigned long long)sampler_len(s),
                  (unsigned long long)c->len);
        for (uint64_t k = 0; k < c->len; k++) {
            uint64_t index;
            CHECK_OK(sampler_get(s, k, &index));
            CHECK_MSG(index == c->want[r][k], "n=%llu world=%u seed=%lld epoch=%llu rank %u: index %llu is %llu, "
                      "PyTorch gives %llu", (unsigned long long)c->n, c->world, (long long)c->seed,
                      (unsigned long long)c->epoch, r, (unsigned long long)k, (unsigned long long)index,
                      (unsigned long long)c->want[r][k]);
        }
        sampler_destroy(s);
    }
}

static void test_num_samples(void)
{
    static const struct { uint64_t n; uint32_t world; int drop_last; uint64_t want; } t[] = {
        {10, 3, 0, 4}, {10, 3, 1, 3}, {9, 3, 0, 3}, {9, 3, 1, 3}, {0, 4, 0, 0}, {0, 4, 1, 0},
        {3, 5, 0, 1},  {3, 5, 1, 0},  {1, 1, 0, 1}, {60000, 7, 0, 8572}, {60000, 7, 1, 8571},
        /* n + W - 1 would wrap to 0 here: the README's warning */
        {UINT64_MAX - 1, 3, 0, 6148914691236517205u}, {UINT64_MAX - 1, 3, 1, 6148914691236517204u},
    };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        sampler_t *s = make(t[i].n, t[i].world, 0, 0, 1, t[i].drop_last);
        CHECK_MSG(sampler_len(s) == t[i].want, "n=%llu world=%u drop_last=%d: num_samples %llu, want %llu",
                  (unsigned long long)t[i].n, t[i].world, t[i].drop_last, (unsigned long long)sampler_len(s),
                  (unsigned long long)t[i].want);
        sampler_destroy(s);
    }
}

static void test_strided_split(void)
{
    /* No shuffle, no padding: rank r gets r, r + W, r + 2W, ... */
    for (uint32_t r = 0; r < 3; r++) {
        sampler_t *s = make(12, 3, r, 0, 0, 0);
        CHECK_OK(sampler_begin(s));
        for (uint64_t k = 0; k < 4; k++) {
            uint64_t index;
            CHECK_OK(sampler_get(s, k, &index));
            CHECK_MSG(index == r + 3 * k, "no shuffle, rank %u of 3: index %llu is %llu, want %llu", r,
                      (unsigned long long)k, (unsigned long long)index, (unsigned long long)(r + 3 * k));
        }
        sampler_destroy(s);
    }
}

static void test_padding(void)
{
    for (size_t i = 0; i < sizeof padding_cases / sizeof padding_cases[0]; i++)
        check_case(&padding_cases[i]);
}

static void test_drop_last(void)
{
    for (size_t i = 0; i < sizeof drop_last_cases / sizeof drop_last_cases[0]; i++)
        check_case(&drop_last_cases[i]);
}

static void test_torch_golden(void) { check_case(&golden); }

static void test_epoch_changes_order(void) { check_case(&later_epoch); }

static void test_partition(void)
{
    /* Equal counts, no index outside the dataset, union complete, and the
     * repeats exactly the padding, over many sizes and worlds. */
    uint32_t *count = malloc(600 * sizeof *count);
    CHECK(count);
    for (uint64_t n = 0; n < 600; n += 37) {
        for (uint32_t world = 1; world <= 8; world++) {
            memset(count, 0, 600 * sizeof *count);
            uint64_t total = 0, covered = 0, len0 = 0;
            for (uint32_t r = 0; r < world; r++) {
                sampler_t *s = make(n, world, r, 5, 1, 0);
                sampler_set_epoch(s, 2);
                CHECK_OK(sampler_begin(s));
                if (r == 0)
                    len0 = sampler_len(s);
                CHECK_MSG(sampler_len(s) == len0, "n=%llu world=%u: rank %u has %llu indices, rank 0 %llu",
                          (unsigned long long)n, world, r, (unsigned long long)sampler_len(s),
                          (unsigned long long)len0);
                for (uint64_t k = 0; k < sampler_len(s); k++) {
                    uint64_t index;
                    CHECK_OK(sampler_get(s, k, &index));
                    CHECK_MSG(index < n, "n=%llu: index %llu is outside the dataset", (unsigned long long)n,
                              (unsigned long long)index);
                    covered += count[index]++ == 0;
                    total++;
                }
                sampler_destroy(s);
            }
            CHECK_MSG(covered == n, "n=%llu world=%u: the ranks cover %llu distinct indices", (unsigned long long)n,
                      world, (unsigned long long)covered);
            CHECK_MSG(total - n < world || n == 0, "n=%llu world=%u: %llu repeats, more than padding needs",
                      (unsigned long long)n, world, (unsigned long long)(total - n));
        }
    }
    free(count);
}

static const struct grade_test tests[] = {
    {"num-samples", 10, 10, test_num_samples},
    {"strided-split", 10, 10, test_strided_split},
    {"padding", 15, 10, test_padding},
    {"drop-last", 15, 10, test_drop_last},
    {"torch-golden-n10-w3", 20, 10, test_torch_golden},
    {"set-epoch-changes-order", 15, 10, test_epoch_changes_order},
    {"partition", 15, 20, test_partition},
};

int main(int argc, char **argv) { return GRADE_MAIN(argc, argv, tests); }
