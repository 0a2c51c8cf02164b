/* partition: chapter 2's default run. Every rank is a thread (sim/ranks.h)
 * that builds its own sampler, exactly as every process of a real job does,
 * and records what it would train on; the main thread then checks what no
 * single rank can see: that the shards fit together.
 */
#include "chapter.h"

#include "base/error.h"
#include "sim/ranks.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* How many per-rank indices the compact view shows at each end. */
#define CH2_VIEW_HEAD 6
#define CH2_VIEW_TAIL 2
/* Below this many records two epochs may shuffle to the same order by chance
 * (1 in n!), so "the order changes" is reported but not required. */
#define CH2_ORDER_MIN_N 20

struct ch2_verdicts {
    int passed, failed;
};

static void ch2_verdict(struct ch2_verdicts *v, int ok, const char *what, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static void ch2_verdict(struct ch2_verdicts *v, int ok, const char *what, const char *fmt, ...)
{
    char text[160];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    printf("  %-13s %-58s %s\n", what, text, ok ? "ok" : "FAIL");
    if (ok)
        v->passed++;
    else
        v->failed++;
}

static int ch2_summary(const struct ch2_verdicts *v)
{
    printf("%s: %d checks passed, %d failed\n", v->failed ? "FAIL" : "PASS", v->passed, v->failed);
    return v->failed ? 1 : 0;
}

/* How often each index was handed out in one epoch, over all ranks. */
struct ch2_tally {
    uint32_t *count;
    uint64_t n;
};

static int ch2_tally_reset(struct ch2_tally *t, uint64_t n)
{
    free(t->count);
    t->n = n;
    t->count = calloc(n ? n : 1, sizeof *t->count);
    return t->count ? 0 : err_set(ERR_NOMEM, "cannot allocate the tally of %llu indices", (unsigned long long)n);
}

/* Counts `index`; returns 0, or ERR_RANGE when a sampler handed out an index
 * outside the dataset. */
static int ch2_tally_add(struct ch2_tally *t, uint64_t index)
{
    if (index >= t->n)
        return err_set(ERR_RANGE, "index %llu is outside the dataset of %llu records", (unsigned long long)index,
                       (unsigned long long)t->n);
    if (t->count[index] < UINT32_MAX)
        t->count[index]++;
    return 0;
}

/* Indices seen at least once, and the repeats beyond the first sighting. */
static void ch2_tally_sum(const struct ch2_tally *t, uint64_t *covered, uint64_t *repeats)
{
    *covered = *repeats = 0;
    for (uint64_t i = 0; i < t->n; i++) {
        *covered += t->count[i] > 0;
        *repeats += t->count[i] > 1 ? t->count[i] - 1 : 0;
    }
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

/* Positions where two sequences of the same length differ. */
static uint64_t ch2_differences(const uint64_t *a, const uint64_t *b, uint64_t count)
{
    uint64_t d = 0;
    for (uint64_t k = 0; k < count; k++)
        d += a[k] != b[k];
    return d;
}

/* ---- DistributedSampler / Feistel -------------------------------------------- */

struct ch2_dist_run {
    const struct ch2_config *cfg;
    struct sampler_options opt;
    uint64_t **got;  /* [epoch * world + rank]: that rank's indices */
    uint64_t *lens;  /* [epoch * world + rank]: how many that rank got */
    uint64_t len;    /* room per rank and epoch: sampler_len() of one rank */
};

static int ch2_rank_distributed(struct rank_ctx *ctx)
{
    struct ch2_dist_run *run = ctx->shared;
    struct sampler_options opt = run->opt;
    opt.rank = (uint32_t)ctx->rank;
    sampler_t *s;
    int rc = sampler_create(&opt, &s);
    for (uint64_t e = 0; rc == 0 && e < run->cfg->epochs && !ranks_aborted(ctx->group); e++) {
        if (run->cfg->set_epoch)
            sampler_set_epoch(s, e);
        if ((rc = sampler_begin(s)) < 0)
            break;
        uint64_t slot = e * (uint64_t)ctx->world + (uint64_t)ctx->rank, *out = run->got[slot];
        if (sampler_len(s) > run->len) {
            rc = err_set(ERR_RANGE, "epoch %llu: %llu indices, more than rank 0's %llu", (unsigned long long)e,
                         (unsigned long long)sampler_len(s), (unsigned long long)run->len);
            break;
        }
        run->lens[slot] = sampler_len(s);
        for (uint64_t k = 0; rc == 0 && k < sampler_len(s); k++)
            rc = sampler_get(s, k, &out[k]);
    }
    sampler_destroy(s);
    return rc;
}

/* drop_last keeps the first `total` entries of the epoch's order and drops
 * the rest: how many of those first entries some rank received. The order is
 * recomputed here from the options alone (randperm, the Feistel bijection, or
 * 0 .. n-1), independently of the ranks' split. */
static int ch2_kept_prefix(const struct ch2_dist_run *run, uint64_t e, const struct ch2_tally *t, uint64_t total,
                           uint64_t *kept)
{
    const struct sampler_options *o = &run->opt;
    const uint64_t key = o->seed + (run->cfg->set_epoch ? e : 0);
    sampler_seq_t order = {0};
    sampler_feistel_t f;
    int rc = 0;
    if (o->shuffle && o->mode == SAMPLER_TORCH)
        rc = sampler_randperm(o->size, key, o->randperm, &order);
    else if (o->shuffle)
        sampler_feistel_init(&f, o->size, key);
    *kept = 0;
    for (uint64_t k = 0; rc == 0 && k < total; k++) {
        uint64_t index = order.count ? sampler_seq_at(&order, k) : o->shuffle ? sampler_feistel_at(&f, k) : k;
        *kept += t->count[index] > 0;
    }
    sampler_seq_free(&order);
    return rc;
}

static int ch2_check_epoch(const struct ch2_dist_run *run, uint64_t e, struct ch2_tally *t, struct ch2_verdicts *v)
{
    const struct sampler_options *o = &run->opt;
    const uint64_t world = o->world, n = o->size, total = run->len * world;
    char seed[24];
    printf("epoch %llu: generator seeded with seed + epoch = %s%s\n", (unsigned long long)e,
           ch2_seed_text(run->cfg, o->seed + (run->cfg->set_epoch ? e : 0), seed),
           run->cfg->set_epoch ? "" : " (set_epoch() was never called)");
    int rc = ch2_tally_reset(t, n);
    uint64_t unequal = 0;
    for (uint64_t r = 0; rc == 0 && r < world; r++) {
        const uint64_t *idx = run->got[e * world + r], len = run->lens[e * world + r];
        if (r < 4 || r == world - 1)
            ch2_print_view((uint32_t)r, idx, len, "indices");
        else if (r == 4)
            printf("  ...\n");
        unequal += len != run->lens[e * world];
        for (uint64_t k = 0; rc == 0 && k < len; k++)
            rc = ch2_tally_add(t, idx[k]);
    }
    if (rc < 0)
        return rc;
    uint64_t covered, repeats;
    ch2_tally_sum(t, &covered, &repeats);
    ch2_verdict(v, unequal == 0, "equal counts", "%llu indices on each of the %llu ranks",
                (unsigned long long)run->lens[e * world], (unsigned long long)world);
    uint64_t padding = o->drop_last ? 0 : total - n;
    ch2_verdict(v, repeats == padding, "disjoint", "%llu repeats; the padding adds %llu", (unsigned long long)repeats,
                (unsigned long long)padding);
    if (o->drop_last) {
        uint64_t kept;
        if ((rc = ch2_kept_prefix(run, e, t, total, &kept)) < 0)
            return rc;
        ch2_verdict(v, covered == total && kept == total, "coverage",
                    "%llu distinct: the first %llu of the order, %llu dropped", (unsigned long long)covered,
                    (unsigned long long)kept, (unsigned long long)(n - total));
    } else {
        ch2_verdict(v, covered == n, "coverage", "%llu distinct indices of %llu", (unsigned long long)covered,
                    (unsigned long long)n);
    }
    if (e > 0) {
        uint64_t diff = 0;
        for (uint64_t r = 0; r < world; r++) {
            uint64_t now = run->lens[e * world + r], before = run->lens[(e - 1) * world + r];
            diff += ch2_differences(run->got[e * world + r], run->got[(e - 1) * world + r], now < before ? now : before);
        }
        if (!o->shuffle)
            ch2_verdict(v, diff == 0, "same order", "shuffle is off: %llu positions changed", (unsigned long long)diff);
        else
            ch2_verdict(v, diff > 0 || n < CH2_ORDER_MIN_N, "new order", "%llu of %llu positions differ from epoch %llu",
                        (unsigned long long)diff, (unsigned long long)total, (unsigned long long)e - 1);
    }
    return 0;
}

int ch2_check_distributed(const struct ch2_config *cfg, const dataset_t *ds)
{
    struct ch2_dist_run run = {.cfg = cfg, .opt = cfg->dist};
    run.opt.size = dataset_info(ds)->length;
    run.opt.mode = cfg->sampler == CH2_FEISTEL ? SAMPLER_FEISTEL : SAMPLER_TORCH;
    sampler_t *probe;
    int rc = sampler_create(&run.opt, &probe);
    if (rc < 0)
        return rc;
    run.len = sampler_len(probe);
    sampler_destroy(probe);
    const uint64_t world = run.opt.world, slots = cfg->epochs * world;
    char seed[24];
    printf("chapter 2: %s on %llu rank threads over %s (%llu records), seed %s, %s, %s\n",
           cfg->sampler == CH2_FEISTEL ? "the Feistel sampler (O(1) memory, not PyTorch's order)"
                                       : "DistributedSampler",
           (unsigned long long)world, dataset_name(ds), (unsigned long long)run.opt.size,
           ch2_seed_text(cfg, run.opt.seed, seed), run.opt.shuffle ? "shuffled" : "not shuffled",
           run.opt.drop_last ? "drop_last" : "padded");
    run.got = calloc(slots, sizeof *run.got);
    run.lens = calloc(slots, sizeof *run.lens);
    if (!run.got || !run.lens)
        rc = err_set(ERR_NOMEM, "out of memory");
    for (uint64_t i = 0; rc == 0 && i < slots; i++)
        if (!(run.got[i] = malloc((run.len ? run.len : 1) * sizeof **run.got)))
            rc = err_set(ERR_NOMEM, "cannot hold %llu indices per rank and epoch", (unsigned long long)run.len);
    if (rc == 0)
        rc = ranks_run((int)world, ch2_rank_distributed, &run, NULL, 0, NULL);
    struct ch2_verdicts v = {0};
    struct ch2_tally t = {0};
    for (uint64_t e = 0; rc == 0 && e < cfg->epochs; e++)
        rc = ch2_check_epoch(&run, e, &t, &v);
    free(t.count);
    for (uint64_t i = 0; run.got && i < slots; i++)
        free(run.got[i]);
    free(run.got);
    free(run.lens);
    return rc < 0 ? rc : ch2_summary(&v);
}

/* ---- the token-budget batch sampler ----------------------------------------- */

struct ch2_batches {
    uint64_t steps;
    uint64_t *items; /* indices, batch after batch */
    uint64_t *sizes; /* records per batch */
    struct batch_dynamic_stats stats;
};

struct ch2_dyn_run {
    const struct ch2_config *cfg;
    const dataset_t *ds;
    struct ch2_batches *got; /* [epoch * world + rank] */
};

/* Reads every step of `d` into *b (allocating it; a batch holds at most
 * max_samples indices). */
static int ch2_collect(batch_dynamic_t *d, uint64_t max_samples, struct ch2_batches *b)
{
    b->steps = batch_dynamic_len(d);
    b->stats = batch_dynamic_stats(d);
    b->sizes = malloc((b->steps ? b->steps : 1) * sizeof *b->sizes);
    if (!b->sizes)
        return err_set(ERR_NOMEM, "cannot hold %llu batches", (unsigned long long)b->steps);
    uint64_t at = 0, cap = 0;
    for (uint64_t s = 0; s < b->steps; s++) {
        if (cap - at < max_samples) {
            uint64_t want = at + max_samples > 2 * cap ? at + max_samples : 2 * cap;
            uint64_t *items = want <= SIZE_MAX / sizeof *items ? realloc(b->items, want * sizeof *items) : NULL;
            if (!items)
                return err_set(ERR_NOMEM, "cannot hold %llu indices of batches", (unsigned long long)want);
            b->items = items;
            cap = want;
        }
        int64_t count = batch_dynamic_get(d, s, b->items + at);
        if (count < 0)
            return (int)count;
        b->sizes[s] = (uint64_t)count;
        at += (uint64_t)count;
    }
    return 0;
}

static void ch2_batches_free(struct ch2_batches *b)
{
    free(b->items);
    free(b->sizes);
    *b = (struct ch2_batches){0};
}

static int ch2_rank_dynamic(struct rank_ctx *ctx)
{
    struct ch2_dyn_run *run = ctx->shared;
    struct batch_dynamic_options opt = run->cfg->dyn;
    opt.rank = (uint32_t)ctx->rank;
    batch_dynamic_t *d;
    int rc = batch_dynamic_create(run->ds, &opt, &d);
    for (uint64_t e = 0; rc == 0 && e < run->cfg->epochs && !ranks_aborted(ctx->group); e++) {
        if (run->cfg->set_epoch)
            batch_dynamic_set_epoch(d, e);
        if ((rc = batch_dynamic_begin(d)) == 0)
            rc = ch2_collect(d, opt.max_samples, &run->got[e * (uint64_t)ctx->world + (uint64_t)ctx->rank]);
    }
    batch_dynamic_destroy(d);
    return rc;
}

/* Budget and size of every batch of one rank; adds the real and padded
 * tokens (longest x records) to the running sums. */
static int ch2_check_budgets(const struct ch2_dyn_run *run, const struct ch2_batches *b, uint64_t *bad,
                             uint64_t *real, uint64_t *padded)
{
    const struct batch_dynamic_options *o = &run->cfg->dyn;
    const uint64_t *idx = b->items;
    for (uint64_t s = 0; s < b->steps; idx += b->sizes[s], s++) {
        uint64_t longest = 0;
        for (uint64_t k = 0; k < b->sizes[s]; k++) {
            uint64_t length;
            int rc = dataset_length_of(run->ds, idx[k], &length);
            if (rc < 0)
                return rc;
            *real += length;
            longest = length > longest ? length : longest;
        }
        *padded += longest * b->sizes[s];
        uint64_t size = o->type == BATCH_TOKEN ? longest * b->sizes[s] : b->sizes[s];
        *bad += b->sizes[s] == 0 || b->sizes[s] > o->max_samples || size > o->budget;
    }
    return 0;
}

/* Records in the first `steps` batches of b. */
static uint64_t ch2_items_in(const struct ch2_batches *b, uint64_t steps)
{
    uint64_t items = 0;
    for (uint64_t s = 0; s < steps; s++)
        items += b->sizes[s];
    return items;
}

/* Whether two runs handed out the same batches. */
static int ch2_same_batches(const struct ch2_batches *a, const uint64_t *items, const uint64_t *sizes, uint64_t steps)
{
    return a->steps == steps && memcmp(a->sizes, sizes, steps * sizeof *sizes) == 0 &&
           memcmp(a->items, items, ch2_items_in(a, steps) * sizeof *items) == 0;
}

/* Records the sampler had to skip, counted here from the lengths rather than
 * taken from its statistics: longer than max_token_length, whose 0 means the
 * token budget (token batches) or no limit. */
static int ch2_count_too_long(const struct ch2_dyn_run *run, uint64_t *too_long)
{
    const struct batch_dynamic_options *o = &run->cfg->dyn;
    uint64_t limit = o->max_token_length ? o->max_token_length : o->type == BATCH_TOKEN ? o->budget : UINT64_MAX;
    *too_long = 0;
    for (uint64_t i = 0; i < dataset_info(run->ds)->length; i++) {
        uint64_t length;
        int rc = dataset_length_of(run->ds, i, &length);
        if (rc < 0)
            return rc;
        *too_long += length > limit;
    }
    return 0;
}

/* Disjoint apart from padding, checked from the batches alone: every batch
 * either holds only records no earlier batch had, or is an exact copy of the
 * batch that first held its first record (a padding repeat). Counts those
 * copies, the records in them, and the batches that break the rule. */
static int ch2_count_copies(const struct ch2_batches *all, uint64_t world, uint64_t n, uint64_t *copies,
                            uint64_t *copied_records, uint64_t *overlapping)
{
    uint64_t total = 0;
    for (uint64_t r = 0; r < world; r++)
        total += all[r].steps;
    const uint64_t none = UINT64_MAX;
    uint64_t *owner = malloc((n ? n : 1) * sizeof *owner);         /* record -> first batch holding it */
    const uint64_t **start = malloc((total ? total : 1) * sizeof *start); /* batch -> its records */
    uint64_t *size = malloc((total ? total : 1) * sizeof *size);
    if (!owner || !start || !size) {
        free(owner), free(start), free(size);
        return err_set(ERR_NOMEM, "cannot allocate the copy check of %llu batches", (unsigned long long)total);
    }
    for (uint64_t i = 0; i < n; i++)
        owner[i] = none;
    *copies = *copied_records = *overlapping = 0;
    uint64_t g = 0;
    for (uint64_t r = 0; r < world; r++) {
        const uint64_t *idx = all[r].items;
        for (uint64_t s = 0; s < all[r].steps; idx += all[r].sizes[s], s++, g++) {
            uint64_t m = all[r].sizes[s], seen = 0;
            start[g] = idx, size[g] = m;
            for (uint64_t k = 0; k < m; k++)
                seen += idx[k] < n && owner[idx[k]] != none;
            if (seen == 0) {
                for (uint64_t k = 0; k < m; k++)
                    if (idx[k] < n)
                        owner[idx[k]] = g;
            } else if (seen == m && size[owner[idx[0]]] == m &&
                       memcmp(start[owner[idx[0]]], idx, m * sizeof *idx) == 0) {
                ++*copies, *copied_records += m;
            } else {
                ++*overlapping;
            }
        }
    }
    free(owner), free(start), free(size);
    return 0;
}

static int ch2_check_dynamic_epoch(const struct ch2_dyn_run *run, uint64_t e, struct ch2_tally *t,
                                   struct ch2_verdicts *v)
{
    const struct batch_dynamic_options *o = &run->cfg->dyn;
    const uint64_t world = o->world, n = dataset_info(run->ds)->length;
    const struct ch2_batches *all = &run->got[e * world];
    printf("epoch %llu: %llu batches (%llu of them repeats to reach a multiple of %llu ranks), %llu records "
           "skipped as too long\n",
           (unsigned long long)e, (unsigned long long)all[0].stats.batches,
           (unsigned long long)all[0].stats.padded_batches, (unsigned long long)world,
           (unsigned long long)all[0].stats.skipped);
    int rc = ch2_tally_reset(t, n);
    uint64_t placed = 0, bad = 0, real = 0, padded = 0, unequal = 0;
    for (uint64_t r = 0; rc == 0 && r < world; r++) {
        const struct ch2_batches *b = &all[r];
        if (r < 4 || r == world - 1)
            ch2_print_view((uint32_t)r, b->sizes, b->steps, "steps, batch sizes");
        else if (r == 4)
            printf("  ...\n");
        unequal += b->steps != all[0].steps;
        uint64_t items = ch2_items_in(b, b->steps);
        placed += items;
        for (uint64_t k = 0; rc == 0 && k < items; k++)
            rc = ch2_tally_add(t, b->items[k]);
        if (rc == 0)
            rc = ch2_check_budgets(run, b, &bad, &real, &padded);
    }
    uint64_t too_long = 0, copies = 0, copied = 0, overlapping = 0;
    if (rc == 0 && (rc = ch2_count_too_long(run, &too_long)) == 0 && o->start_step == 0)
        rc = ch2_count_copies(all, world, n, &copies, &copied, &overlapping);
    if (rc < 0)
        return rc;
    uint64_t covered, repeats, want = n - too_long;
    ch2_tally_sum(t, &covered, &repeats);
    ch2_verdict(v, unequal == 0, "equal steps", "%llu steps on every rank", (unsigned long long)all[0].steps);
    ch2_verdict(v, bad == 0, "budget", "%llu batches over %llu %s or %llu records", (unsigned long long)bad,
                (unsigned long long)o->budget, o->type == BATCH_TOKEN ? "tokens" : "records",
                (unsigned long long)o->max_samples);
    ch2_verdict(v, too_long == all[0].stats.skipped, "skipped", "%llu records too long, %llu by the sampler's count",
                (unsigned long long)too_long, (unsigned long long)all[0].stats.skipped);
    if (o->start_step == 0) {
        ch2_verdict(v, overlapping == 0 && copies == all[0].stats.padded_batches && copies < world && repeats == copied,
                    "disjoint", "%llu overlapping; %llu repeats of %llu padding, %llu records",
                    (unsigned long long)overlapping, (unsigned long long)copies,
                    (unsigned long long)all[0].stats.padded_batches, (unsigned long long)copied);
        ch2_verdict(v, covered == want && placed - repeats == want, "coverage",
                    "%llu distinct of %llu kept records; repeats %llu", (unsigned long long)covered,
                    (unsigned long long)want, (unsigned long long)repeats);
    } else {
        printf("  %-13s not checked: the run resumed at step %llu\n", "coverage", (unsigned long long)o->start_step);
    }
    printf("  %-13s %.1f%% of the padded tokens are real ones\n", "efficiency",
           padded ? 100.0 * (double)real / (double)padded : 100.0);
    if (e > 0) {
        const struct ch2_batches *prev = &run->got[(e - 1) * world];
        int same = ch2_same_batches(prev, all[0].items, all[0].sizes, all[0].steps);
        if (!o->shuffle)
            ch2_verdict(v, same, "same order", "shuffle is off: rank 0's batches %s", same ? "repeat" : "changed");
        else
            ch2_verdict(v, !same || n < CH2_ORDER_MIN_N, "new order", "rank 0's batches %s epoch %llu's",
                        same ? "repeat" : "differ from", (unsigned long long)e - 1);
    }
    return 0;
}

/* Resuming epoch 0 at its middle step must give exactly the tail of the
 * uninterrupted run: what a restart from a checkpoint relies on. */
static int ch2_check_resume(const struct ch2_dyn_run *run, struct ch2_verdicts *v)
{
    const struct ch2_batches *full = &run->got[0];
    struct batch_dynamic_options opt = run->cfg->dyn;
    opt.rank = 0;
    opt.start_step += full->steps / 2;
    batch_dynamic_t *d;
    int rc = batch_dynamic_create(run->ds, &opt, &d);
    if (rc < 0)
        return rc;
    struct ch2_batches tail = {0};
    if ((rc = batch_dynamic_begin(d)) == 0)
        rc = ch2_collect(d, opt.max_samples, &tail);
    if (rc == 0) {
        uint64_t skip = full->steps / 2;
        int same = ch2_same_batches(&tail, full->items + ch2_items_in(full, skip), full->sizes + skip,
                                    full->steps - skip);
        ch2_verdict(v, same, "resume", "start_step %llu gives the last %llu steps of epoch 0",
                    (unsigned long long)opt.start_step, (unsigned long long)tail.steps);
    }
    ch2_batches_free(&tail);
    batch_dynamic_destroy(d);
    return rc;
}

int ch2_check_dynamic(const struct ch2_config *cfg, const dataset_t *ds)
{
    const struct batch_dynamic_options *o = &cfg->dyn;
    const uint64_t world = o->world, slots = cfg->epochs * world;
    char seed[24];
    printf("chapter 2: the token-budget batch sampler on %llu rank threads over %s (%llu records), seed %s,\n"
           "  budget %llu %s, at most %llu records a batch, buffers of %llu x %llu records sorted by length%s\n",
           (unsigned long long)world, dataset_name(ds), (unsigned long long)dataset_info(ds)->length,
           ch2_seed_text(cfg, o->seed, seed), (unsigned long long)o->budget, o->type == BATCH_TOKEN ? "tokens" : "records",
           (unsigned long long)o->max_samples, (unsigned long long)o->sort_size, (unsigned long long)world,
           o->start_step ? ", resumed" : "");
    struct ch2_dyn_run run = {.cfg = cfg, .ds = ds, .got = calloc(slots, sizeof *run.got)};
    if (!run.got)
        return err_set(ERR_NOMEM, "out of memory");
    int rc = ranks_run((int)world, ch2_rank_dynamic, &run, NULL, 0, NULL);
    struct ch2_verdicts v = {0};
    struct ch2_tally t = {0};
    for (uint64_t e = 0; rc == 0 && e < cfg->epochs; e++)
        rc = ch2_check_dynamic_epoch(&run, e, &t, &v);
    if (rc == 0)
        rc = ch2_check_resume(&run, &v);
    free(t.count);
    for (uint64_t i = 0; i < slots; i++)
        ch2_batches_free(&run.got[i]);
    free(run.got);
    return rc < 0 ? rc : ch2_summary(&v);
}
