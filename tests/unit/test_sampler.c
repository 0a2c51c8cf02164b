/* test_sampler: lib/sampler and lib/batch. PyTorch's golden vectors (printed
 * by torch 1.13), torch.randperm's two algorithms against plain
 * implementations written here, the Feistel bijection, and the properties of
 * the fixed and token-budget batch samplers. tests/crosscheck/sampler_torch.sh adds the
 * wide cross-check against a live torch. */
#include "sampler/batch.h"
#include "check.h"
#include "base/error.h"
#include "sim/ranks.h"
#include "base/rng.h"
#include "sampler/sampler.h"

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

/* ---- helpers ------------------------------------------------------------------ */

/* Rank `rank`'s indices of epoch `epoch` into out (capacity cap); returns the count. */
static uint64_t take(uint64_t n, uint32_t world, uint32_t rank, uint64_t seed, uint64_t epoch, int shuffle,
                     int drop_last, enum sampler_mode mode, uint64_t *out, uint64_t cap)
{
    struct sampler_options o = {.size = n, .world = world, .rank = rank, .seed = seed, .shuffle = shuffle,
                                .drop_last = drop_last, .mode = mode, .randperm = SAMPLER_RANDPERM_AUTO};
    sampler_t *s;
    CHECK_OK(sampler_create(&o, &s));
    sampler_set_epoch(s, epoch);
    CHECK_OK(sampler_begin(s));
    uint64_t len = sampler_len(s);
    CHECK(len <= cap);
    for (uint64_t k = 0; k < len; k++)
        CHECK_OK(sampler_get(s, k, &out[k]));
    sampler_destroy(s);
    return len;
}

/* Forward Fisher-Yates as randperm_cpu writes it, one draw at a time. */
static void naive_swap(uint64_t *r, uint64_t n, uint64_t seed)
{
    rng_t g;
    rng_seed(&g, seed);
    for (uint64_t i = 0; i < n; i++)
        r[i] = i;
    for (uint64_t i = 0; i + 1 < n; i++) {
        uint64_t z = rng_random(&g) % (n - i), t = r[i];
        r[i] = r[i + z];
        r[i + z] = t;
    }
}

/* Inside-out Fisher-Yates as PyTorch >= 2.6 writes it for large n. */
static void naive_inside_out(uint32_t *r, uint64_t n, uint64_t seed)
{
    rng_t g;
    rng_seed(&g, seed);
    for (uint64_t i = 0; i < n; i++) {
        uint64_t z = rng_random64(&g) % (i + 1);
        r[i] = r[z];
        r[z] = (uint32_t)i;
    }
}

static void check_permutation(const sampler_seq_t *p, uint64_t n)
{
    CHECK_EQ_U64(p->count, n);
    uint8_t *seen = calloc(n / 8 + 1, 1);
    CHECK(seen);
    for (uint64_t i = 0; i < n; i++) {
        uint64_t v = sampler_seq_at(p, i);
        CHECK_MSG(v < n && !(seen[v / 8] & (1u << (v % 8))), "entry %llu = %llu repeats or is out of range",
                  (unsigned long long)i, (unsigned long long)v);
        seen[v / 8] |= (uint8_t)(1u << (v % 8));
    }
    free(seen);
}

/* ---- DistributedSampler -------------------------------------------------------- */

TEST(sampler_golden_n10_w3)
{
    /* list(DistributedSampler(range(10), num_replicas=3, rank=r, seed=0)) */
    static const uint64_t want[3][4] = {{4, 5, 0, 2}, {1, 3, 8, 4}, {7, 9, 6, 1}};
    uint64_t got[4];
    for (uint32_t r = 0; r < 3; r++) {
        CHECK_EQ(take(10, 3, r, 0, 0, 1, 0, SAMPLER_TORCH, got, 4), 4);
        for (int k = 0; k < 4; k++)
            CHECK_EQ_U64(got[k], want[r][k]);
    }
}

TEST(sampler_golden_edges)
{
    /* torch 1.13: n=3, W=16 pads from the start over and over; drop_last with
     * n < W gives nothing; seed 2^32+5 equals seed 5 (low 32 bits). */
    uint64_t got[8];
    CHECK_EQ(take(3, 16, 14, 0, 0, 0, 0, SAMPLER_TORCH, got, 8), 1);
    CHECK_EQ_U64(got[0], 2); /* position 14 of 0,1,2,0,1,2,... */
    CHECK_EQ(take(3, 16, 0, 0, 0, 1, 1, SAMPLER_TORCH, got, 8), 0);
    CHECK_EQ(take(0, 4, 3, 0, 0, 1, 0, SAMPLER_TORCH, got, 8), 0);
    CHECK_EQ(take(11, 4, 3, 0, 0, 1, 1, SAMPLER_TORCH, got, 8), 2);
    uint64_t other[8];
    take(12, 3, 1, 5, 2, 1, 0, SAMPLER_TORCH, got, 8);
    take(12, 3, 1, (1ull << 32) + 5, 2, 1, 0, SAMPLER_TORCH, other, 8);
    for (int k = 0; k < 4; k++)
        CHECK_EQ_U64(got[k], other[k]);
}

TEST(sampler_randperm_matches_torch)
{
    /* torch.randperm(12, generator=torch.Generator().manual_seed(s)).tolist() */
    static const uint64_t seed7[12] = {3, 4, 0, 5, 7, 9, 11, 6, 8, 1, 10, 2};
    static const uint64_t seed_minus1[12] = {3, 1, 8, 9, 2, 6, 10, 11, 0, 5, 7, 4};
    sampler_seq_t p;
    CHECK_OK(sampler_randperm(12, 7, SAMPLER_RANDPERM_AUTO, &p));
    CHECK(p.u32 != NULL);
    for (int i = 0; i < 12; i++)
        CHECK_EQ_U64(sampler_seq_at(&p, i), seed7[i]);
    sampler_seq_free(&p);
    CHECK_OK(sampler_randperm(12, UINT64_MAX, SAMPLER_RANDPERM_AUTO, &p));
    for (int i = 0; i < 12; i++)
        CHECK_EQ_U64(sampler_seq_at(&p, i), seed_minus1[i]);
    sampler_seq_free(&p);
}

TEST(sampler_randperm_swap_equals_plain_loop)
{
    /* The blocked, prefetching kernel against the textbook loop, across block
     * boundaries (1024 draws) and for the sizes with nothing to swap. */
    static const uint64_t sizes[] = {0, 1, 2, 3, 1023, 1024, 1025, 4097, 100003};
    uint64_t *want = malloc(100003 * sizeof *want);
    CHECK(want);
    for (size_t t = 0; t < sizeof sizes / sizeof sizes[0]; t++) {
        for (uint64_t seed = 0; seed < 3; seed++) {
            sampler_seq_t p;
            CHECK_OK(sampler_randperm(sizes[t], seed * 977, SAMPLER_RANDPERM_SWAP, &p));
            naive_swap(want, sizes[t], seed * 977);
            for (uint64_t i = 0; i < sizes[t]; i++)
                CHECK_EQ_U64(sampler_seq_at(&p, i), want[i]);
            sampler_seq_free(&p);
        }
    }
    free(want);
}

TEST(sampler_randperm_inside_out_equals_plain_loop)
{
    /* The large-n algorithm (PyTorch >= 2.6, n >= UINT32_MAX / 20) forced on
     * small n, where PyTorch 1.13 cannot check it, against a plain loop. */
    static const uint64_t sizes[] = {0, 1, 2, 5, 1024, 1025, 70001};
    uint32_t *want = malloc(70001 * sizeof *want);
    CHECK(want);
    for (size_t t = 0; t < sizeof sizes / sizeof sizes[0]; t++) {
        sampler_seq_t p, again;
        CHECK_OK(sampler_randperm(sizes[t], 42, SAMPLER_RANDPERM_INSIDE_OUT, &p));
        CHECK_OK(sampler_randperm(sizes[t], 42, SAMPLER_RANDPERM_INSIDE_OUT, &again));
        naive_inside_out(want, sizes[t], 42);
        check_permutation(&p, sizes[t]);
        for (uint64_t i = 0; i < sizes[t]; i++) {
            CHECK_EQ_U64(sampler_seq_at(&p, i), want[i]);
            CHECK_EQ_U64(sampler_seq_at(&again, i), want[i]);
        }
        sampler_seq_free(&p);
        sampler_seq_free(&again);
    }
    free(want);
}

/* PyTorch's switch (randperm_cpu, from 2.6 on): the swap below n =
 * UINT32_MAX / 20, inside-out from there; the forced choices whatever n. */
TEST(sampler_randperm_auto_switches_at_the_threshold)
{
    CHECK_EQ_U64(SAMPLER_RANDPERM_THRESHOLD, 214748364);
    CHECK_EQ(sampler_pick_randperm(0, SAMPLER_RANDPERM_AUTO), SAMPLER_RANDPERM_SWAP);
    CHECK_EQ(sampler_pick_randperm(SAMPLER_RANDPERM_THRESHOLD - 1, SAMPLER_RANDPERM_AUTO), SAMPLER_RANDPERM_SWAP);
    CHECK_EQ(sampler_pick_randperm(SAMPLER_RANDPERM_THRESHOLD, SAMPLER_RANDPERM_AUTO), SAMPLER_RANDPERM_INSIDE_OUT);
    CHECK_EQ(sampler_pick_randperm(UINT64_MAX, SAMPLER_RANDPERM_AUTO), SAMPLER_RANDPERM_INSIDE_OUT);
    CHECK_EQ(sampler_pick_randperm(UINT64_MAX, SAMPLER_RANDPERM_SWAP), SAMPLER_RANDPERM_SWAP);
    CHECK_EQ(sampler_pick_randperm(1, SAMPLER_RANDPERM_INSIDE_OUT), SAMPLER_RANDPERM_INSIDE_OUT);
}

/* The real switch: n = UINT32_MAX / 20 takes the inside-out branch under
 * SAMPLER_RANDPERM_AUTO (860 MB of 32-bit entries, half a minute): the test
 * above checks the choice, this one that sampler_randperm follows it at the
 * real size. `make stress` runs it (tests/stress/randperm_threshold.sh sets
 * DDP_STRESS). Too big under the sanitizers, which test the same kernels on
 * small n above. */
#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
/* A digest of a permutation that depends on every entry and its place. */
static uint64_t digest(const uint32_t *r, uint64_t n)
{
    uint64_t h = 1469598103934665603ull; /* FNV-1a's offset basis */
    for (uint64_t i = 0; i < n; i++)
        h = (h ^ r[i]) * 1099511628211ull;
    return h;
}

TEST(sampler_randperm_large_n_branch)
{
    if (!getenv("DDP_STRESS"))
        CHECK_SKIP("860 MB and half a minute: make stress runs it");
    const uint64_t n = SAMPLER_RANDPERM_THRESHOLD;
    sampler_seq_t p;
    CHECK_OK(sampler_randperm(n, 3, SAMPLER_RANDPERM_AUTO, &p));
    check_permutation(&p, n);
    uint64_t got = digest(p.u32, n);
    naive_inside_out(p.u32, n, 3); /* the same buffer, to stay at 860 MB */
    CHECK_EQ_U64(got, digest(p.u32, n));
    sampler_seq_free(&p);
}
#endif

TEST(sampler_partition_properties)
{
    /* Every rank the same count; union = everything (padded) or exactly
     * total_size distinct indices (drop_last); repeats = the padding. */
    static const uint64_t sizes[] = {0, 1, 7, 10, 64, 1001};
    uint64_t *got = malloc(2000 * sizeof *got);
    uint32_t *count = malloc(1001 * sizeof *count);
    CHECK(got && count);
    for (size_t t = 0; t < sizeof sizes / sizeof sizes[0]; t++) {
        const uint64_t n = sizes[t];
        for (uint32_t w = 1; w <= 9; w += 4) {
            for (int drop_last = 0; drop_last < 2; drop_last++) {
                for (int mode = 0; mode < 2; mode++) {
                    memset(count, 0, 1001 * sizeof *count);
                    uint64_t len0 = 0, covered = 0, total = 0;
                    for (uint32_t r = 0; r < w; r++) {
                        uint64_t len = take(n, w, r, 9, 4, 1, drop_last, (enum sampler_mode)mode, got, 2000);
                        if (r == 0)
                            len0 = len;
                        CHECK_EQ_U64(len, len0);
                        for (uint64_t k = 0; k < len; k++) {
                            CHECK(got[k] < n);
                            covered += count[got[k]]++ == 0;
                        }
                        total += len;
                    }
                    CHECK_EQ_U64(len0, drop_last ? n / w : (n + w - 1) / w);
                    CHECK_EQ_U64(covered, drop_last ? total : n);
                }
            }
        }
    }
    free(got);
    free(count);
}

TEST(sampler_rejects_bad_arguments)
{
    struct sampler_options o = {.size = 10, .world = 4, .rank = 4, .shuffle = 1};
    sampler_t *s;
    CHECK_ERR(sampler_create(&o, &s), ERR_ARG, "invalid rank 4");
    o.world = 0;
    CHECK_ERR(sampler_create(&o, &s), ERR_ARG, "at least 1");
    o.world = 4;
    o.rank = 0;
    CHECK_OK(sampler_create(&o, &s));
    uint64_t index;
    CHECK_ERR(sampler_get(s, 0, &index), ERR_STATE, "sampler_begin");
    CHECK_OK(sampler_begin(s));
    CHECK_ERR(sampler_get(s, 3, &index), ERR_RANGE, "index 3");
    sampler_destroy(s);
}

/* Sends stderr to a file of the test's directory; returns the real stderr's
 * descriptor for stderr_restore(). */
static int stderr_capture(char *path, size_t cap)
{
    fflush(stderr);
    int saved = dup(STDERR_FILENO);
    CHECK(saved >= 0);
    snprintf(path, cap, "%s/stderr.txt", check_tmpdir());
    CHECK(freopen(path, "w", stderr) != NULL);
    return saved;
}

/* Puts the real stderr back (so that a failing CHECK is seen) and reads what
 * was captured into text. */
static void stderr_restore(int saved, const char *path, char *text, size_t cap)
{
    fflush(stderr);
    CHECK(dup2(saved, STDERR_FILENO) == STDERR_FILENO);
    close(saved);
    FILE *f = fopen(path, "r");
    CHECK(f);
    size_t got = fread(text, 1, cap - 1, f);
    text[got] = '\0';
    fclose(f);
}

/* Exactly one warning line, starting with who, that names the trap. */
static void check_one_warning(const char *text, const char *who)
{
    char head[64];
    snprintf(head, sizeof head, "%s: warning: rank ", who);
    const char *at = strstr(text, head);
    CHECK_MSG(at == text, "stderr does not start with '%s': '%s'", head, text);
    CHECK_CONTAINS(text, "without set_epoch()");
    CHECK_MSG(strstr(at + 1, head) == NULL, "more than one warning: '%s'", text);
}

TEST(sampler_warns_once_without_set_epoch)
{
    char path[512], text[1024];
    int saved = stderr_capture(path, sizeof path);
    struct sampler_options o;
    sampler_options_default(&o);
    o.size = 100;
    sampler_t *s;
    CHECK_OK(sampler_create(&o, &s));
    sampler_set_epoch(s, 0);
    CHECK_OK(sampler_begin(s));
    sampler_set_epoch(s, 1);
    CHECK_OK(sampler_begin(s));
    CHECK_EQ(sampler_warned(s), 0);
    CHECK_OK(sampler_begin(s)); /* epoch 1 again: the trap */
    int warned = sampler_warned(s);
    sampler_set_epoch(s, 1);
    CHECK_OK(sampler_begin(s)); /* set_epoch with the same value is no new epoch; still one warning */
    stderr_restore(saved, path, text, sizeof text);
    CHECK_EQ(warned, 1);
    check_one_warning(text, "sampler");
    sampler_destroy(s);
}

TEST(sampler_feistel_is_a_bijection)
{
    static const uint64_t sizes[] = {1, 2, 3, 5, 1000, 65536, 1000003};
    for (size_t t = 0; t < sizeof sizes / sizeof sizes[0]; t++) {
        sampler_feistel_t f, g;
        sampler_feistel_init(&f, sizes[t], 11);
        sampler_feistel_init(&g, sizes[t], 12);
        sampler_seq_t p;
        CHECK_OK(sampler_seq_alloc(&p, sizes[t], sizes[t] - 1));
        uint64_t moved = 0, differ = 0;
        for (uint64_t x = 0; x < sizes[t]; x++) {
            p.u32[x] = (uint32_t)sampler_feistel_at(&f, x);
            moved += p.u32[x] != x;
            differ += p.u32[x] != sampler_feistel_at(&g, x);
        }
        check_permutation(&p, sizes[t]);
        if (sizes[t] >= 1000) { /* a real shuffle, and the key matters */
            CHECK(moved > sizes[t] * 9 / 10);
            CHECK(differ > sizes[t] * 9 / 10);
        }
        sampler_seq_free(&p);
    }
    /* Any 64-bit n works without memory: spot-check range and determinism. */
    sampler_feistel_t big;
    sampler_feistel_init(&big, UINT64_MAX - 5, 1);
    for (uint64_t x = UINT64_MAX - 10; x < UINT64_MAX - 5; x++) {
        uint64_t y = sampler_feistel_at(&big, x);
        CHECK(y < UINT64_MAX - 5);
        CHECK_EQ_U64(sampler_feistel_at(&big, x), y);
    }
}

/* ---- batch samplers ------------------------------------------------------------- */

TEST(batch_sampler_fixed_sizes)
{
    struct sampler_options o;
    sampler_options_default(&o);
    o.size = 10;
    o.world = 3;
    sampler_t *s;
    CHECK_OK(sampler_create(&o, &s));
    CHECK_OK(sampler_begin(s)); /* rank 0 of 3: [4, 5, 0, 2] */
    batch_sampler_t b;
    CHECK_ERR(batch_sampler_init(&b, index_stream_of_sampler(s), 0, 0), ERR_ARG, "batch_size");
    CHECK_ERR(batch_sampler_init(&b, (struct index_stream){0}, 3, 0), ERR_ARG, "no len or get");
    CHECK_OK(batch_sampler_init(&b, index_stream_of_sampler(s), 3, 0));
    CHECK_EQ(batch_sampler_len(&b), 2);
    uint64_t out[3];
    CHECK_EQ(batch_sampler_get(&b, 0, out), 3);
    CHECK_EQ(out[0], 4);
    CHECK_EQ(out[2], 0);
    CHECK_EQ(batch_sampler_get(&b, 1, out), 1);
    CHECK_EQ(out[0], 2);
    CHECK_ERR(batch_sampler_get(&b, 2, out), ERR_RANGE, "batch 2");
    CHECK_OK(batch_sampler_init(&b, index_stream_of_sampler(s), 3, 1));
    CHECK_EQ(batch_sampler_len(&b), 1);
    sampler_destroy(s);
}

/* Any stream, as PyTorch's BatchSampler takes any Sampler: here an array,
 * BatchSampler([9, 7, 5, 3, 1, 0, 2], batch_size=3, drop_last=False). */
TEST(batch_sampler_over_an_array)
{
    const uint64_t order[] = {9, 7, 5, 3, 1, 0, 2};
    struct index_array a = {order, 7};
    batch_sampler_t b;
    CHECK_OK(batch_sampler_init(&b, index_stream_of_array(&a), 3, 0));
    CHECK_EQ(batch_sampler_len(&b), 3);
    uint64_t out[3];
    CHECK_EQ(batch_sampler_get(&b, 1, out), 3);
    CHECK(out[0] == 3 && out[1] == 1 && out[2] == 0);
    CHECK_EQ(batch_sampler_get(&b, 2, out), 1);
    CHECK_EQ(out[0], 2);
    CHECK_OK(batch_sampler_init(&b, index_stream_of_array(&a), 3, 1));
    CHECK_EQ(batch_sampler_len(&b), 2);
    CHECK_ERR(batch_sampler_get(&b, 2, out), ERR_RANGE, "batch 2 is past the 2 batches");
}

static dataset_t *open_lengths(uint64_t records, uint64_t min, uint64_t max)
{
    /* Lengths from min to max bytes: a variable-length dataset to batch by tokens. */
    struct dataset_options opt = {.synthetic_records = records, .synthetic_bytes = max, .synthetic_min_bytes = min};
    dataset_t *ds;
    CHECK_OK(dataset_open("synthetic", &opt, &ds));
    return ds;
}

/* One rank's whole epoch: indices into items, batch sizes into sizes. */
static uint64_t run_dynamic(const dataset_t *ds, const struct batch_dynamic_options *o, uint64_t epoch,
                            uint64_t *items, uint64_t *sizes, uint64_t *placed)
{
    batch_dynamic_t *d;
    CHECK_OK(batch_dynamic_create(ds, o, &d));
    batch_dynamic_set_epoch(d, epoch);
    CHECK_OK(batch_dynamic_begin(d));
    uint64_t steps = batch_dynamic_len(d);
    *placed = 0;
    for (uint64_t s = 0; s < steps; s++) {
        int64_t c = batch_dynamic_get(d, s, items + *placed);
        CHECK(c > 0);
        sizes[s] = (uint64_t)c;
        *placed += (uint64_t)c;
    }
    uint64_t extra[512];
    CHECK_ERR(batch_dynamic_get(d, steps, extra), ERR_RANGE, "past the");
    batch_dynamic_destroy(d);
    return steps;
}

TEST(batch_dynamic_properties)
{
    const uint64_t n = 5000;
    dataset_t *ds = open_lengths(n, 10, 700);
    uint64_t *items = malloc(2 * n * sizeof *items), *sizes = malloc(2 * n * sizeof *sizes);
    uint32_t *count = calloc(n, sizeof *count);
    CHECK(items && sizes && count);
    for (int type = 0; type < 2; type++) {
        struct batch_dynamic_options o;
        batch_dynamic_options_default(&o);
        o.world = 3;
        o.seed = 77;
        o.sort_size = 50;
        o.budget = type == BATCH_TOKEN ? 2000 : 7;
        o.max_samples = 5;
        o.max_token_length = 600;
        o.type = (enum batch_type)type;
        memset(count, 0, n * sizeof *count);
        uint64_t steps0 = 0, total = 0;
        for (uint32_t r = 0; r < o.world; r++) {
            o.rank = r;
            uint64_t placed, steps = run_dynamic(ds, &o, 2, items, sizes, &placed);
            if (r == 0)
                steps0 = steps;
            CHECK_EQ_U64(steps, steps0); /* equal batch counts on every rank */
            const uint64_t *b = items;
            for (uint64_t s = 0; s < steps; b += sizes[s], s++) {
                uint64_t longest = 0;
                for (uint64_t k = 0; k < sizes[s]; k++) {
                    uint64_t len;
                    CHECK_OK(dataset_length_of(ds, b[k], &len));
                    CHECK(len <= o.max_token_length);
                    longest = len > longest ? len : longest;
                    count[b[k]]++;
                }
                CHECK(sizes[s] <= o.max_samples);
                CHECK(type == BATCH_TOKEN ? longest * sizes[s] <= o.budget : sizes[s] <= o.budget);
            }
            total += placed;
        }
        uint64_t kept = 0;
        for (uint64_t i = 0; i < n; i++) { /* every non-skipped index appears */
            uint64_t len;
            CHECK_OK(dataset_length_of(ds, i, &len));
            CHECK_MSG((len > o.max_token_length) == (count[i] == 0), "record %llu (length %llu) seen %u times",
                      (unsigned long long)i, (unsigned long long)len, count[i]);
            kept += len <= o.max_token_length;
        }
        CHECK(total >= kept);
    }
    free(items);
    free(sizes);
    free(count);
    dataset_close(ds);
}

/* The whole epoch's batch list, in deal order, from an independent Python
 * model of the dynamic sampler (tests/crosscheck/dynamic_reference.py, which
 * tests/crosscheck/dynamic_reference.sh also runs live: torch.randperm for the order,
 * Python's stable sort per buffer, "grow while longest x (count + 1) <= budget and
 * count < max_samples", repeats drawn with random64() % real from an MT19937
 * seeded with seed + epoch) over open_lengths(60, 5, 60), whose lengths are
 * 28 19 9 60 40 26 38 26 11 59 60 27 48 25 41 52 34 45 16 47 7 29 11 39 12 14
 * 38 44 23 38 56 51 16 25 47 47 22 44 49 10 37 37 49 35 48 12 43 37 43 39 37 8
 * 29 39 17 60 31 18 51 45. Rank r's step s must be global batch s x W + r. */
struct dynamic_golden {
    uint64_t seed, epoch, budget, max_samples, max_token_length;
    enum batch_type type;
    uint64_t batches, padded, skipped;
    int64_t want[20][8]; /* each batch ends with -1 */
};

static const struct dynamic_golden dynamic_goldens[] = {
    /* W=4, sort_size 4 (buffers of 16), 5 records over 55 skipped, 17 batches + 3 repeats */
    {9, 1, 150, 6, 55, BATCH_TOKEN, 20, 3, 5,
     {{20, 24, 13, 33, 52, -1}, {16, 41, 14, -1}, {48, 46, 17, -1}, {59, 44, 38, -1}, {51, 2, 39, 22, 7, -1},
      {11, 43, 47, -1}, {29, 37, 34, -1}, {42, 58, -1}, {54, 57, 36, 28, 21, -1}, {56, 40, 26, -1},
      {53, 23, 49, -1}, {4, 19, 35, -1}, {12, 31, -1}, {8, 45, 25, 32, 18, 1, -1}, {5, 0, 50, -1}, {6, 27, -1},
      {15, -1}, {11, 43, 47, -1}, {53, 23, 49, -1}, {15, -1}}},
    /* W=4, 7 records per batch by count: 11 batches + 1 repeat */
    {5, 0, 7, 7, 0, BATCH_EXAMPLE, 12, 1, 0,
     {{51, 2, 39, 24, 54, 1, 7, -1}, {11, 16, 40, 23, 48, 35, 31, -1}, {10, 3, -1}, {8, 45, 32, 13, 0, 21, 56, -1},
      {43, 49, 14, 27, 37, 59, 19, -1}, {34, 38, -1}, {22, 25, 18, 36, 5, 52, 41, -1},
      {26, 6, 4, 46, 44, 42, 30, -1}, {9, 55, -1}, {20, 57, 28, 33, 47, 50, 29, -1}, {53, 17, 12, 58, 15, -1},
      {10, 3, -1}}},
};

TEST(batch_dynamic_matches_reference)
{
    dataset_t *ds = open_lengths(60, 5, 60);
    for (size_t c = 0; c < sizeof dynamic_goldens / sizeof dynamic_goldens[0]; c++) {
        const struct dynamic_golden *g = &dynamic_goldens[c];
        struct batch_dynamic_options o;
        batch_dynamic_options_default(&o);
        o.world = 4;
        o.seed = g->seed;
        o.sort_size = 4;
        o.budget = g->budget;
        o.max_samples = g->max_samples;
        o.max_token_length = g->max_token_length;
        o.type = g->type;
        for (uint32_t r = 0; r < o.world; r++) {
            o.rank = r;
            batch_dynamic_t *d;
            CHECK_OK(batch_dynamic_create(ds, &o, &d));
            batch_dynamic_set_epoch(d, g->epoch);
            CHECK_OK(batch_dynamic_begin(d));
            struct batch_dynamic_stats st = batch_dynamic_stats(d);
            CHECK_EQ_U64(st.batches, g->batches);
            CHECK_EQ_U64(st.padded_batches, g->padded);
            CHECK_EQ_U64(st.skipped, g->skipped);
            CHECK_EQ_U64(batch_dynamic_len(d), g->batches / o.world);
            for (uint64_t step = 0; step < batch_dynamic_len(d); step++) {
                const int64_t *want = g->want[step * o.world + r];
                uint64_t got[8];
                int64_t count = batch_dynamic_get(d, step, got);
                int64_t k = 0;
                while (want[k] >= 0 && k < count && got[k] == (uint64_t)want[k])
                    k++;
                CHECK_MSG(k == count && want[k] < 0,
                          "case %zu rank %u step %llu: batch differs from the reference at entry %lld", c, r,
                          (unsigned long long)step, (long long)k);
            }
            batch_dynamic_destroy(d);
        }
    }
    dataset_close(ds);
}

TEST(batch_dynamic_resumes_at_start_step)
{
    const uint64_t n = 3000;
    dataset_t *ds = open_lengths(n, 5, 300);
    uint64_t *items = malloc(2 * n * sizeof *items), *sizes = malloc(2 * n * sizeof *sizes);
    uint64_t *items2 = malloc(2 * n * sizeof *items2), *sizes2 = malloc(2 * n * sizeof *sizes2);
    CHECK(items && sizes && items2 && sizes2);
    struct batch_dynamic_options o;
    batch_dynamic_options_default(&o);
    o.world = 4;
    o.rank = 2;
    o.budget = 1200;
    uint64_t placed, placed2, steps = run_dynamic(ds, &o, 1, items, sizes, &placed);
    CHECK(steps > 10);
    for (uint64_t start = 1; start <= steps; start += steps / 3) {
        o.start_step = start;
        uint64_t steps2 = run_dynamic(ds, &o, 1, items2, sizes2, &placed2);
        CHECK_EQ_U64(steps2, steps - start);
        uint64_t skip = 0;
        for (uint64_t s = 0; s < start; s++)
            skip += sizes[s];
        CHECK_EQ_U64(placed2, placed - skip);
        for (uint64_t s = 0; s < steps2; s++)
            CHECK_EQ_U64(sizes2[s], sizes[start + s]);
        for (uint64_t k = 0; k < placed2; k++)
            CHECK_EQ_U64(items2[k], items[skip + k]);
    }
    o.start_step = steps + 5;
    CHECK_EQ_U64(run_dynamic(ds, &o, 1, items2, sizes2, &placed2), 0);
    free(items);
    free(sizes);
    free(items2);
    free(sizes2);
    dataset_close(ds);
}

TEST(batch_padding_counts_real_and_padded)
{
    /* Four JSONL records of 7, 9, 11 and 2 bytes (their lengths: no length field). */
    const char *path = check_tmp_path("lengths.jsonl");
    FILE *f = fopen(path, "w");
    CHECK(f != NULL);
    fputs("{\"a\":1}\n{\"a\":123}\n{\"a\":12345}\n{}\n", f);
    CHECK_OK(fclose(f));
    dataset_t *ds;
    CHECK_OK(dataset_open(path, NULL, &ds));
    struct batch_padding p = {0};
    uint64_t longest = 0;
    CHECK_OK(batch_padding_add(&p, ds, (const uint64_t[]){0, 1, 2}, 3, &longest));
    CHECK_EQ_U64(longest, 11);
    CHECK(p.batches == 1 && p.real == 27 && p.padded == 33); /* 7 + 9 + 11 real, 3 x 11 padded */
    CHECK_OK(batch_padding_add(&p, ds, (const uint64_t[]){3}, 1, NULL));
    CHECK(p.batches == 2 && p.real == 29 && p.padded == 35);
    /* the same two batches as a stream: the same sums */
    const uint64_t indices[] = {0, 1, 2, 3}, offsets[] = {0, 3, 4};
    struct batch_array a = {indices, offsets, 2};
    struct batch_padding q = {0};
    CHECK_OK(batch_padding_add_stream(&q, ds, batch_stream_of_array(&a)));
    CHECK(q.batches == 2 && q.real == 29 && q.padded == 35);
    CHECK_ERR(batch_padding_add(&q, ds, (const uint64_t[]){9}, 1, NULL), ERR_RANGE, "9");
    dataset_close(ds);
}

TEST(batch_dynamic_rejects_bad_options)
{
    dataset_t *ds = open_lengths(10, 5, 30);
    struct batch_dynamic_options o;
    batch_dynamic_options_default(&o);
    batch_dynamic_t *d;
    o.max_token_length = o.budget + 1;
    CHECK_ERR(batch_dynamic_create(ds, &o, &d), ERR_ARG, "max_token_length");
    batch_dynamic_options_default(&o);
    o.sort_size = 0;
    CHECK_ERR(batch_dynamic_create(ds, &o, &d), ERR_ARG, "sort_size");
    batch_dynamic_options_default(&o);
    o.rank = 1;
    CHECK_ERR(batch_dynamic_create(ds, &o, &d), ERR_ARG, "invalid rank");
    batch_dynamic_options_default(&o);
    CHECK_OK(batch_dynamic_create(ds, &o, &d));
    uint64_t out[256];
    CHECK_ERR(batch_dynamic_get(d, 0, out), ERR_STATE, "batch_dynamic_begin");
    batch_dynamic_destroy(d);
    dataset_close(ds);
}

TEST(batch_dynamic_warns_once_without_set_epoch)
{
    char path[512], text[1024];
    int saved = stderr_capture(path, sizeof path);
    dataset_t *ds = open_lengths(200, 5, 30);
    struct batch_dynamic_options o;
    batch_dynamic_options_default(&o);
    batch_dynamic_t *d;
    CHECK_OK(batch_dynamic_create(ds, &o, &d));
    CHECK_OK(batch_dynamic_begin(d));
    batch_dynamic_set_epoch(d, 1);
    CHECK_OK(batch_dynamic_begin(d));
    CHECK_EQ(batch_dynamic_warned(d), 0);
    stderr_restore(saved, path, text, sizeof text);
    CHECK_MSG(text[0] == '\0', "a warning with a new epoch each time: '%s'", text);
    saved = stderr_capture(path, sizeof path);
    CHECK_OK(batch_dynamic_begin(d)); /* epoch 1 again: the trap */
    int warned = batch_dynamic_warned(d);
    batch_dynamic_set_epoch(d, 1);
    CHECK_OK(batch_dynamic_begin(d)); /* the same value is no new epoch; still one warning */
    stderr_restore(saved, path, text, sizeof text);
    CHECK_EQ(warned, 1);
    check_one_warning(text, "dynamic batch sampler");
    batch_dynamic_destroy(d);
    dataset_close(ds);
    o.shuffle = 0; /* without shuffle every epoch is the same order anyway: nothing to warn about */
    CHECK_OK(batch_dynamic_create(ds = open_lengths(200, 5, 30), &o, &d));
    CHECK_OK(batch_dynamic_begin(d));
    CHECK_OK(batch_dynamic_begin(d));
    CHECK_EQ(batch_dynamic_warned(d), 0);
    batch_dynamic_destroy(d);
    dataset_close(ds);
}

/* Rank threads sharing one dataset, as chapter 2 runs them (and TSan checks). */
struct rank_steps {
    dataset_t *ds;
    uint64_t steps[4], first[4];
};

static int rank_dynamic(struct rank_ctx *ctx)
{
    struct rank_steps *rs = ctx->shared;
    struct batch_dynamic_options o;
    batch_dynamic_options_default(&o);
    o.world = (uint32_t)ctx->world;
    o.rank = (uint32_t)ctx->rank;
    o.budget = 900;
    batch_dynamic_t *d;
    int rc = batch_dynamic_create(rs->ds, &o, &d);
    if (rc == 0 && (rc = batch_dynamic_begin(d)) == 0) {
        uint64_t batch[256];
        rs->steps[ctx->rank] = batch_dynamic_len(d);
        int64_t c = batch_dynamic_get(d, 0, batch);
        rc = c < 0 ? (int)c : 0;
        rs->first[ctx->rank] = batch[0];
    }
    batch_dynamic_destroy(d);
    return rc;
}

TEST(batch_dynamic_on_rank_threads)
{
    struct rank_steps rs = {.ds = open_lengths(2000, 3, 200)};
    CHECK_OK(ranks_run(4, rank_dynamic, &rs, NULL, 0, NULL));
    for (int r = 1; r < 4; r++) {
        CHECK_EQ_U64(rs.steps[r], rs.steps[0]);
        CHECK(rs.first[r] != rs.first[0]); /* different batches: the deal is round-robin */
    }
    dataset_close(rs.ds);
}
