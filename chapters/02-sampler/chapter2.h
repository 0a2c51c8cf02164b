/* chapter2: what the pieces of build/chapter-2 share (main.c parses the
 * flags; check.c runs the simulator's partition check, sim/partition.h, and
 * prints it; bench.c times one rank). Read main.c first. */
#ifndef DDP_CHAPTER2_H
#define DDP_CHAPTER2_H

#include "sampler/batch.h"
#include "dataset/dataset.h"
#include "dataset/dataset_default.h"
#include "sampler/sampler.h"

#include <stdint.h>

enum ch2_sampler { CH2_DISTRIBUTED, CH2_FEISTEL, CH2_DYNAMIC };

struct ch2_config {
    enum ch2_sampler sampler;
    struct sampler_options dist;       /* distributed / feistel (rank set per thread) */
    struct batch_dynamic_options dyn;  /* dynamic (rank set per thread) */
    uint64_t epoch;                    /* --print-indices */
    uint64_t epochs;                   /* the check */
    uint64_t batch_size;               /* --batch-size: --print-indices prints batches; 0: indices */
    int set_epoch;                     /* 0: --no-set-epoch, the classic bug */
    int seed_negative;                 /* --seed was typed negative: print seeds signed, as Python does */
};

/* The partition check (sim/partition.h) on cfg->dist.world rank threads over
 * `ds`; prints the per-rank view and the verdicts. Returns 0 when every check passed, 1 when one
 * failed, or a negative ERR_* when the run itself failed. */
int ch2_check_distributed(const struct ch2_config *cfg, const dataset_t *ds);
int ch2_check_dynamic(const struct ch2_config *cfg, const dataset_t *ds);

/* --bench: one rank's epoch in PyTorch-exact and Feistel mode, each in a child
 * process, with its time and peak resident memory. 0 or a negative ERR_*. */
int ch2_bench(const struct ch2_config *cfg);

#endif
