/* bench: --bench, one rank's epoch timed in each sampler mode.
 *
 * Each mode runs in its own child process (lib/base/measure.h) so that its
 * peak resident memory is its own: the PyTorch-exact mode
 * holds a 4n-byte permutation for a moment, the Feistel mode nothing. The
 * time covers what a training loop pays per epoch: sampler_begin() and
 * reading every index of the rank, like Python's list(iter(sampler)).
 */
#include "chapter2.h"

#include "base/clock.h"
#include "base/error.h"
#include "base/measure.h"

#include <stdio.h>

#define CH2_BENCH_RUNS 3

struct ch2_bench_result {
    double seconds;
    uint64_t checksum; /* keeps the reads from being optimised away */
};

/* What one child times: a mode of the sampler the flags describe. */
struct ch2_bench_call {
    const struct ch2_config *cfg;
    enum sampler_mode mode;
};

/* Runs in the child process (measure_in_child): one epoch of one rank. */
static int ch2_bench_child(void *arg, void *out)
{
    const struct ch2_bench_call *call = arg;
    struct ch2_bench_result *res = out;
    struct sampler_options opt = call->cfg->dist;
    opt.mode = call->mode;
    sampler_t *s;
    int rc = sampler_create(&opt, &s);
    if (rc < 0)
        return rc;
    sampler_set_epoch(s, call->cfg->epoch);
    double t0 = clock_now_s();
    rc = sampler_begin(s);
    uint64_t sum = 0, index = 0;
    for (uint64_t k = 0; rc == 0 && k < sampler_len(s); k++) {
        rc = sampler_get(s, k, &index);
        sum = sum * 31 + index;
    }
    *res = (struct ch2_bench_result){clock_now_s() - t0, sum};
    sampler_destroy(s);
    return rc;
}

int ch2_bench(const struct ch2_config *cfg)
{
    static const struct {
        enum sampler_mode mode;
        const char *name;
    } modes[] = {{SAMPLER_TORCH, "pytorch-exact"}, {SAMPLER_FEISTEL, "feistel"}};
    printf("timing rank %u's indices for one epoch, n = %llu, world %u (best of %d runs, each in a child process)\n",
           cfg->dist.rank, (unsigned long long)cfg->dist.size, cfg->dist.world, CH2_BENCH_RUNS);
    printf("  %-14s %10s %16s %14s\n", "mode", "time_s", "indices_per_s", "peak_rss_MiB");
    for (size_t m = 0; m < sizeof modes / sizeof modes[0]; m++) {
        struct ch2_bench_result res = {0};
        uint64_t peak_kib = 0;
        /* The best of a few runs: the machine may be shared, and noise only
         * ever adds time. The peak memory is the largest seen. */
        for (int run = 0; run < CH2_BENCH_RUNS; run++) {
            struct ch2_bench_result one;
            uint64_t kib = 0;
            struct ch2_bench_call call = {cfg, modes[m].mode};
            int rc = measure_in_child(ch2_bench_child, &call, &one, sizeof one, &kib);
            if (rc < 0)
                return err_wrap(rc, "bench: %s", modes[m].name);
            if (run == 0 || one.seconds < res.seconds)
                res = one;
            peak_kib = kib > peak_kib ? kib : peak_kib;
        }
        uint64_t count = (cfg->dist.size + (cfg->dist.drop_last ? 0 : cfg->dist.world - 1)) / cfg->dist.world;
        printf("  %-14s %10.4f %16.3g %14.1f\n", modes[m].name, res.seconds,
               res.seconds > 0 ? (double)count / res.seconds : 0.0, (double)peak_kib / 1024.0);
    }
    return 0;
}
