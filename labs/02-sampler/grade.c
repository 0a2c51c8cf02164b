/* grade.c: lab 2, the rank split of DistributedSampler (`make lab-2`).
 *
 * Your lib/sampler/sampler.c regions are graded against vectors printed by PyTorch
 * 1.13's torch.utils.data.DistributedSampler (after set_epoch), then against
 * the properties every correct split has, the randperm option, positions near
 * 2^64, and a heap that does not grow from epoch to epoch. Read
 * labs/02-sampler/README.md. */
#include "grader.h"
#include "heap.h"

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

static sampler_t *make_with(const struct sampler_options *o)
{
    sampler_t *s;
    CHECK_OK(sampler_create(o, &s));
    return s;
}

static sampler_t *make(uint64_t n, uint32_t world, uint32_t rank, uint64_t seed, int shuffle, int drop_last)
{
    struct sampler_options o = {.size = n, .world = world, .rank = rank, .seed = seed, .shuffle = shuffle,
                                .drop_last = drop_last, .mode = SAMPLER_TORCH, .randperm = SAMPLER_RANDPERM_AUTO};
    return make_with(&o);
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

/* The randperm option picks torch.randperm's algorithm (PyTorch <= 2.5 or >= 2.6 at large n): the
 * shuffle must pass it on. Each rank's indices are the strided split of sampler_randperm's order. */
static void test_randperm_option(void)
{
    const uint64_t n = 1000, seed = 11, epoch = 4;
    const uint32_t world = 3;
    const enum sampler_randperm algos[] = {SAMPLER_RANDPERM_SWAP, SAMPLER_RANDPERM_INSIDE_OUT};
    sampler_seq_t order[2];
    for (int a = 0; a < 2; a++)
        CHECK_OK(sampler_randperm(n, seed + epoch, algos[a], &order[a]));
    CHECK_MSG(memcmp(order[0].u32, order[1].u32, n * sizeof *order[0].u32) != 0, "the two algorithms agree");
    for (int a = 0; a < 2; a++) {
        for (uint32_t r = 0; r < world; r++) {
            struct sampler_options o = {.size = n, .world = world, .rank = r, .seed = seed, .shuffle = 1,
                                        .mode = SAMPLER_TORCH, .randperm = algos[a]};
            sampler_t *s = make_with(&o);
            sampler_set_epoch(s, epoch);
            CHECK_OK(sampler_begin(s));
            for (uint64_t k = 0; k < sampler_len(s); k++) {
                uint64_t index, want = sampler_seq_at(&order[a], (r + k * world) % n);
                CHECK_OK(sampler_get(s, k, &index));
                CHECK_MSG(index == want, "randperm option %s, rank %u: index %llu is %llu, want %llu (was the "
                          "option passed on to sampler_randperm?)", a ? "INSIDE_OUT" : "SWAP", r,
                          (unsigned long long)k, (unsigned long long)index, (unsigned long long)want);
            }
            sampler_destroy(s);
        }
        sampler_seq_free(&order[a]);
    }
}

/* n near 2^64: the O(1)-memory mode (SAMPLER_FEISTEL) splits and pads exactly as the torch mode
 * does, and without shuffling its index is the position itself, so positions can be checked where
 * rank + k x W no longer fits in 32 bits, and where the padding wraps at the very top. */
static void test_huge_n(void)
{
    static const struct { uint64_t n; uint32_t world; } t[] = {
        {UINT64_MAX - 1, 3}, {(1ull << 40) + 3, 8}, {(1ull << 33) + 1, 65536}, {UINT64_MAX / 7, 7},
    };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        for (uint32_t r = 0; r < t[i].world; r += t[i].world > 8 ? t[i].world / 4 - 1 : 1) {
            struct sampler_options o = {.size = t[i].n, .world = t[i].world, .rank = r, .shuffle = 0,
                                        .mode = SAMPLER_FEISTEL};
            sampler_t *s = make_with(&o);
            CHECK_OK(sampler_begin(s));
            uint64_t len = sampler_len(s);
            const uint64_t ks[] = {0, 1, len / 3, len / 2 + 1, len - 2, len - 1};
            for (size_t j = 0; j < sizeof ks / sizeof ks[0]; j++) {
                unsigned __int128 pos = (unsigned __int128)r + (unsigned __int128)ks[j] * t[i].world;
                uint64_t index, want = (uint64_t)(pos % t[i].n);
                CHECK_OK(sampler_get(s, ks[j], &index));
                CHECK_MSG(index == want, "n=%llu world=%u rank %u, no shuffle: index %llu is %llu, want %llu",
                          (unsigned long long)t[i].n, t[i].world, r, (unsigned long long)ks[j],
                          (unsigned long long)index, (unsigned long long)want);
            }
            sampler_destroy(s);
        }
    }
}

/* Every epoch's order replaces the last: the heap must not grow epoch after epoch. */
static void test_no_leak_across_epochs(void)
{
    if (!heap_measurable())
        CHECK_SKIP("the heap cannot be measured under a sanitizer");
    const uint64_t n = 100000;
    sampler_t *s = make(n, 4, 1, 3, 1, 0);
    size_t after_first = 0;
    for (uint64_t epoch = 0; epoch < 12; epoch++) {
        sampler_set_epoch(s, epoch);
        CHECK_OK(sampler_begin(s));
        if (epoch == 1)
            after_first = heap_in_use();
    }
    size_t grown = heap_in_use() - after_first;
    CHECK_MSG(heap_in_use() <= after_first + n, "the heap grew by %zu bytes over 10 epochs of n=%llu: something "
              "allocated per epoch is never freed", grown, (unsigned long long)n);
    sampler_destroy(s);
}

static const struct grade_test tests[] = {
    {"num-samples", 10, 10, test_num_samples},
    {"strided-split", 10, 10, test_strided_split},
    {"padding", 15, 10, test_padding},
    {"drop-last", 15, 10, test_drop_last},
    {"torch-golden-n10-w3", 20, 10, test_torch_golden},
    {"set-epoch-changes-order", 15, 10, test_epoch_changes_order},
    {"partition", 15, 20, test_partition},
    {"randperm-option", 10, 10, test_randperm_option},
    {"huge-n", 10, 10, test_huge_n},
    {"no-leak-across-epochs", 10, 10, test_no_leak_across_epochs},
};

int main(int argc, char **argv) { return GRADE_MAIN(argc, argv, tests); }
