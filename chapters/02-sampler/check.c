/* check: chapter 2's default run, as the lesson shows it. The simulator
 * (sim/partition.h) runs every rank as a thread that builds its own sampler,
 * exactly as every process of a real job does, records what each would train
 * on, and checks what no single rank can see: that the shards fit together.
 * This file prints it: each epoch's seed, a compact view of every rank's
 * share, and the simulator's verdicts.
 */
#include "chapter2.h"

#include "base/error.h"
#include "sim/partition.h"

#include <stdio.h>

/* How many per-rank indices the compact view shows at each end. */
#define CH2_VIEW_HEAD 6
#define CH2_VIEW_TAIL 2

struct ch2_verdicts {
    int passed, failed;
};

/* Prints the verdicts of one epoch (or the resume check) and counts them. */
static void ch2_print_verdicts(const struct partition_verdict *v, int n, struct ch2_verdicts *count)
{
    for (int i = 0; i < n; i++) {
        if (v[i].ok < 0) { /* a figure, not a verdict */
            printf("  %-13s %s\n", v[i].check, v[i].detail);
            continue;
        }
        printf("  %-13s %-58s %s\n", v[i].check, v[i].detail, v[i].ok ? "ok" : "FAIL");
        if (v[i].ok)
            count->passed++;
        else
            count->failed++;
    }
}

static int ch2_summary(const struct ch2_verdicts *v)
{
    printf("%s: %d checks passed, %d failed\n", v->failed ? "FAIL" : "PASS", v->passed, v->failed);
    return v->failed ? 1 : 0;
}

static void ch2_print_view(uint32_t rank, const uint64_t *idx, uint64_t count, const char *unit)
{
    printf("  rank %u: %llu %s:", rank, (unsigned long long)count, unit);
    for (uint64_t k = 0; k < count; k++) {
        if (k == CH2_VIEW_HEAD && count > CH2_VIEW_HEAD + CH2_VIEW_TAIL) {
            printf(" ...");
            k = count - CH2_VIEW_TAIL;
        }
        printf(" %llu", (unsigned long long)idx[k]);
    }
    putchar('\n');
}

/* The first four ranks and the last, each on a line. */
static void ch2_print_views(const partition_run_t *run, uint64_t e)
{
    for (uint32_t r = 0; r < run->world; r++) {
        const struct partition_shard *sh = partition_shard(run, e, r);
        if (r < 4 || r == run->world - 1) {
            if (run->dynamic)
                ch2_print_view(r, sh->sizes, sh->steps, "steps, batch sizes");
            else
                ch2_print_view(r, sh->indices, sh->count, "indices");
        } else if (r == 4) {
            printf("  ...\n");
        }
    }
}

/* A seed as Python shows it: signed when --seed was typed negative (-1 is
 * the bit pattern 2^64 - 1 here). */
static const char *ch2_seed_text(const struct ch2_config *cfg, uint64_t seed, char buf[24])
{
    if (cfg->seed_negative)
        snprintf(buf, 24, "%lld", (long long)(int64_t)seed);
    else
        snprintf(buf, 24, "%llu", (unsigned long long)seed);
    return buf;
}

/* Every epoch's header, views and verdicts, then the summary: 0 when all
 * passed, 1 when one failed, or a negative ERR_*. */
static int ch2_report(const struct ch2_config *cfg, const partition_run_t *run)
{
    struct ch2_verdicts count = {0};
    struct partition_verdict v[PARTITION_MAX_VERDICTS];
    for (uint64_t e = 0; e < run->epochs; e++) {
        if (run->dynamic) {
            const struct batch_dynamic_stats *st = &partition_shard(run, e, 0)->stats;
            printf("epoch %llu: %llu batches (%llu of them repeats to reach a multiple of %u ranks), %llu records "
                   "skipped as too long\n",
                   (unsigned long long)e, (unsigned long long)st->batches, (unsigned long long)st->padded_batches,
                   run->world, (unsigned long long)st->skipped);
        } else {
            char seed[24];
            printf("epoch %llu: generator seeded with seed + epoch = %s%s\n", (unsigned long long)e,
                   ch2_seed_text(cfg, run->dist.seed + (cfg->set_epoch ? e : 0), seed),
                   cfg->set_epoch ? "" : " (set_epoch() was never called)");
        }
        ch2_print_views(run, e);
        int n = partition_check_epoch(run, e, v);
        if (n < 0)
            return n;
        ch2_print_verdicts(v, n, &count);
    }
    if (run->dynamic) {
        int rc = partition_check_resume(run, v);
        if (rc < 0)
            return rc;
        ch2_print_verdicts(v, 1, &count);
    }
    return ch2_summary(&count);
}

int ch2_check_distributed(const struct ch2_config *cfg, const dataset_t *ds)
{
    struct sampler_options opt = cfg->dist;
    opt.size = dataset_info(ds)->length;
    opt.mode = cfg->sampler == CH2_FEISTEL ? SAMPLER_FEISTEL : SAMPLER_TORCH;
    char seed[24];
    printf("chapter 2: %s on %u rank threads over %s (%llu records), seed %s, %s, %s\n",
           cfg->sampler == CH2_FEISTEL ? "the Feistel sampler (O(1) memory, not PyTorch's order)"
                                       : "DistributedSampler",
           opt.world, dataset_name(ds), (unsigned long long)opt.size, ch2_seed_text(cfg, opt.seed, seed),
           opt.shuffle ? "shuffled" : "not shuffled", opt.drop_last ? "drop_last" : "padded");
    partition_run_t run;
    int rc = partition_run_distributed(&opt, cfg->epochs, cfg->set_epoch, &run);
    if (rc == 0)
        rc = ch2_report(cfg, &run);
    partition_run_free(&run);
    return rc;
}

int ch2_check_dynamic(const struct ch2_config *cfg, const dataset_t *ds)
{
    const struct batch_dynamic_options *o = &cfg->dyn;
    char seed[24];
    printf("chapter 2: the token-budget batch sampler on %u rank threads over %s (%llu records), seed %s,\n"
           "  budget %llu %s, at most %llu records a batch, buffers of %llu x %u records sorted by length%s\n",
           o->world, dataset_name(ds), (unsigned long long)dataset_info(ds)->length, ch2_seed_text(cfg, o->seed, seed),
           (unsigned long long)o->budget, o->type == BATCH_TOKEN ? "tokens" : "records",
           (unsigned long long)o->max_samples, (unsigned long long)o->sort_size, o->world,
           o->start_step ? ", resumed" : "");
    partition_run_t run;
    int rc = partition_run_dynamic(ds, o, cfg->epochs, cfg->set_epoch, &run);
    if (rc == 0)
        rc = ch2_report(cfg, &run);
    partition_run_free(&run);
    return rc;
}
