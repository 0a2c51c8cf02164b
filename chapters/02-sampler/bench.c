/* bench: --bench, one rank's epoch timed in each sampler mode.
 *
 * Each mode runs in its own child process so that its peak resident memory
 * (getrusage's ru_maxrss of that child) is its own: the PyTorch-exact mode
 * holds a 4n-byte permutation for a moment, the Feistel mode nothing. The
 * time covers what a training loop pays per epoch: sampler_begin() and
 * reading every index of the rank, like Python's list(iter(sampler)).
 */
#include "chapter.h"

#include "base/clock.h"
#include "base/error.h"

#include <stdio.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#define CH2_BENCH_RUNS 3

struct ch2_bench_result {
    double seconds;
    uint64_t checksum; /* keeps the reads from being optimised away */
};

static int ch2_bench_child(const struct ch2_config *cfg, enum sampler_mode mode, struct ch2_bench_result *res)
{
    struct sampler_options opt = cfg->dist;
    opt.mode = mode;
    sampler_t *s;
    int rc = sampler_create(&opt, &s);
    if (rc < 0)
        return rc;
    sampler_set_epoch(s, cfg->epoch);
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

/* Runs one mode in a child; fills *res and *peak_kib (the child's peak RSS). */
static int ch2_bench_mode(const struct ch2_config *cfg, enum sampler_mode mode, struct ch2_bench_result *res,
                          long *peak_kib)
{
    int fd[2];
    if (pipe(fd) != 0)
        return err_set(ERR_IO, "bench: pipe failed");
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0)
        return err_set(ERR_IO, "bench: fork failed");
    if (pid == 0) {
        close(fd[0]);
        int rc = ch2_bench_child(cfg, mode, res);
        if (rc < 0)
            fprintf(stderr, "chapter-2: bench: %s\n", err_msg());
        _exit(rc == 0 && write(fd[1], res, sizeof *res) == (ssize_t)sizeof *res ? 0 : 1);
    }
    close(fd[1]);
    ssize_t got = read(fd[0], res, sizeof *res);
    close(fd[0]);
    int status;
    struct rusage ru;
    if (wait4(pid, &status, 0, &ru) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0 ||
        got != (ssize_t)sizeof *res)
        return err_set(ERR_IO, "bench: the %s child failed", mode == SAMPLER_TORCH ? "pytorch-exact" : "feistel");
    *peak_kib = ru.ru_maxrss;
    return 0;
}

int ch2_bench(const struct ch2_config *cfg)
{
    static const struct {
        enum sampler_mode mode;
        const char *name;
    } modes[] = {{SAMPLER_TORCH, "pytorch-exact"}, {SAMPLER_FEISTEL, "feistel"}};
    printf("bench: rank %u's indices for one epoch, n = %llu, world %u (best of %d runs, each in a child process)\n",
           cfg->dist.rank, (unsigned long long)cfg->dist.size, cfg->dist.world, CH2_BENCH_RUNS);
    printf("  %-14s %10s %16s %14s\n", "mode", "time_s", "indices_per_s", "peak_rss_MiB");
    for (size_t m = 0; m < sizeof modes / sizeof modes[0]; m++) {
        struct ch2_bench_result res = {0};
        long peak_kib = 0;
        /* The best of a few runs: the machine may be shared, and noise only
         * ever adds time. The peak memory is the largest seen. */
        for (int run = 0; run < CH2_BENCH_RUNS; run++) {
            struct ch2_bench_result one;
            long kib = 0;
            int rc = ch2_bench_mode(cfg, modes[m].mode, &one, &kib);
            if (rc < 0)
                return rc;
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
