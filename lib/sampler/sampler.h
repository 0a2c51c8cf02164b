/* sampler: which dataset indices each rank sees in each epoch (chapter 2).
 *
 * Where it sits: between the dataset (chapter 1), which only knows "record i",
 * and the loader (chapter 3), which fetches the indices this module hands it.
 * Every rank builds its own sampler with the same options except `rank`; no
 * communication is needed, because every rank computes the same epoch order
 * from the same seed and keeps only its own stride of it.
 *
 * Two modes:
 *   SAMPLER_TORCH    torch.utils.data.DistributedSampler, index for index:
 *                    the epoch's order is torch.randperm(n) drawn from a
 *                    generator seeded with seed + epoch (lib/base/rng.h), padded
 *                    or cut to a multiple of the world size, then split
 *                    indices[rank : total : world]. O(n) memory per rank.
 *   SAMPLER_FEISTEL  the same padding and split, but the order is a keyed
 *                    bijection of [0, n) computed index by index (a Feistel
 *                    network with cycle-walking): O(1) memory, any n. NOT
 *                    PyTorch's order; use it when n is too large to permute.
 *
 * Read sampler_create() first, then sampler_begin() / sampler_get().
 * Batching (fixed and token-budget) is in lib/sampler/batch.h.
 */
#ifndef DDP_SAMPLER_H
#define DDP_SAMPLER_H

#include <stdint.h>

/* torch.randperm's algorithm on the CPU. PyTorch up to 2.5 always used the
 * forward Fisher-Yates swap with random() % (n - i); from 2.6 on, n at or
 * above SAMPLER_RANDPERM_THRESHOLD uses the inside-out variant with
 * random64() % (i + 1) (aten/src/ATen/native/TensorFactories.cpp, randperm_cpu). */
enum sampler_randperm {
    SAMPLER_RANDPERM_AUTO,       /* PyTorch >= 2.6: swap below the threshold, inside-out above */
    SAMPLER_RANDPERM_SWAP,       /* PyTorch <= 2.5 for every n */
    SAMPLER_RANDPERM_INSIDE_OUT, /* the large-n algorithm, for any n */
};

/* UINT32_MAX / 20, PyTorch's switch between the two algorithms. */
#define SAMPLER_RANDPERM_THRESHOLD (UINT32_MAX / 20u)

enum sampler_mode { SAMPLER_TORCH, SAMPLER_FEISTEL };

/* A compact array of indices: 32-bit entries while every index fits (n <=
 * 2^32), 64-bit beyond. Exactly one of u32 / u64 is set when count > 0. */
typedef struct sampler_seq {
    uint64_t count;
    uint32_t *u32;
    uint64_t *u64;
} sampler_seq_t;

static inline uint64_t sampler_seq_at(const sampler_seq_t *s, uint64_t k)
{
    return s->u32 ? s->u32[k] : s->u64[k];
}

/* Allocates `count` entries, 32-bit when max_value fits in 32 bits. 0, or
 * ERR_NOMEM naming the count. */
int sampler_seq_alloc(sampler_seq_t *s, uint64_t count, uint64_t max_value);

/* Frees the entries and empties *s. Safe on an empty or zeroed seq. */
void sampler_seq_free(sampler_seq_t *s);

/* torch.randperm(n, generator=torch.Generator().manual_seed(seed)) into *out
 * (entries 32-bit when n <= 2^32). Returns 0, or ERR_NOMEM naming n. */
int sampler_randperm(uint64_t n, uint64_t seed, enum sampler_randperm algo, sampler_seq_t *out);

/* The algorithm sampler_randperm runs for n: SAMPLER_RANDPERM_SWAP or
 * SAMPLER_RANDPERM_INSIDE_OUT, AUTO decided by SAMPLER_RANDPERM_THRESHOLD. */
enum sampler_randperm sampler_pick_randperm(uint64_t n, enum sampler_randperm algo);

struct sampler_options {
    uint64_t size;    /* len(dataset) */
    uint32_t world;   /* num_replicas, >= 1 */
    uint32_t rank;    /* 0 .. world-1 */
    uint64_t seed;    /* any 64-bit pattern; seed + epoch wraps mod 2^64 (Python raises past 2^64-1) */
    int shuffle;      /* 0: the order is 0, 1, ..., n-1 */
    int drop_last;    /* 1: cut the tail to a multiple of world; 0: pad by repeating from the start */
    enum sampler_mode mode;
    enum sampler_randperm randperm;
};

/* PyTorch's defaults: shuffle on, seed 0, no drop_last, world 1, rank 0,
 * SAMPLER_TORCH with SAMPLER_RANDPERM_AUTO; size 0. */
void sampler_options_default(struct sampler_options *opt);

typedef struct sampler sampler_t;

/* Makes a sampler at epoch 0. ERR_ARG when world is 0 or rank >= world (the
 * ValueError of DistributedSampler), ERR_RANGE when the padded size does not
 * fit in 64 bits, ERR_NOMEM. */
int sampler_create(const struct sampler_options *opt, sampler_t **out);

/* DistributedSampler.set_epoch: the next sampler_begin() uses seed + epoch. */
void sampler_set_epoch(sampler_t *s, uint64_t epoch);

/* Computes this epoch's indices for this rank (SAMPLER_TORCH: permutes all n
 * and keeps this rank's num_samples; SAMPLER_FEISTEL: only sets the key).
 * Beyond PyTorch: the second time an epoch's shuffled order is asked for
 * without a set_epoch() in between, prints one warning on stderr (per sampler)
 * that every epoch will repeat the same order. 0, or ERR_NOMEM. */
int sampler_begin(sampler_t *s);

/* num_samples: how many indices this rank gets per epoch (the same on every rank). */
uint64_t sampler_len(const sampler_t *s);

/* Sets *index to the k-th index of this rank in the current epoch. Call
 * sampler_begin() first. 0, or ERR_RANGE when k >= sampler_len(). */
int sampler_get(const sampler_t *s, uint64_t k, uint64_t *index);

/* 1 once this sampler has printed its "same order again" warning, else 0. */
int sampler_warned(const sampler_t *s);

/* The "forgot set_epoch" trap, shared by every sampler that shuffles by
 * seed + epoch (this one and lib/sampler/batch.h's): PyTorch silently repeats the
 * order. Zero-initialised; one per sampler, hence one per rank. */
struct sampler_repeat {
    uint64_t last_epoch; /* the epoch begun last, when begun */
    int begun, warned;
};

/* Notes that `epoch` is being begun. The first time a shuffled epoch is begun
 * right after itself (no new set_epoch() value in between), prints one
 * warning on stderr naming `who`, the rank and the epoch, and returns 1;
 * otherwise 0. */
int sampler_repeat_check(struct sampler_repeat *r, const char *who, uint32_t rank, uint64_t epoch, int shuffle);

/* Frees everything. NULL is allowed. */
void sampler_destroy(sampler_t *s);

/* The keyed bijection behind SAMPLER_FEISTEL: a permutation of [0, n) chosen
 * by `key`, evaluated at x < n in O(1) memory (expected < 4 network passes). */
typedef struct sampler_feistel {
    uint64_t n;
    unsigned half_bits; /* the network permutes [0, 2^(2*half_bits)) >= n */
    uint64_t keys[4];
} sampler_feistel_t;

void sampler_feistel_init(sampler_feistel_t *f, uint64_t n, uint64_t key);
uint64_t sampler_feistel_at(const sampler_feistel_t *f, uint64_t x);

#endif
