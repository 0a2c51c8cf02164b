/* partition: record every rank's shard on rank threads, then check that the
 * shards fit together (see partition.h). */
#include "sim/partition.h"

#include "base/error.h"
#include "base/mem.h"
#include "sim/launch.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The recorded run keeps every rank's indices of every epoch. */
#define PARTITION_MAX_EPOCHS 1000

static int partition_verdict(struct partition_verdict *v, const char *check, int ok, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Fills one verdict; returns 1, so callers count with n += partition_verdict(...). */
static int partition_verdict(struct partition_verdict *v, const char *check, int ok, const char *fmt, ...)
{
    v->check = check;
    v->ok = ok;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(v->detail, sizeof v->detail, fmt, ap);
    va_end(ap);
    return 1;
}

const struct partition_shard *partition_shard(const partition_run_t *run, uint64_t e, uint32_t r)
{
    return &run->shards[e * run->world + r];
}

void partition_run_free(partition_run_t *run)
{
    for (uint64_t i = 0; run->shards && i < run->epochs * run->world; i++) {
        free(run->shards[i].indices);
        free(run->shards[i].sizes);
    }
    free(run->shards);
    run->shards = NULL;
}

/* ---- recording: one thread per rank ------------------------------------------ */

static int partition_rank_distributed(struct launch_rank *r)
{
    partition_run_t *run = r->shared;
    struct sampler_options opt = run->dist;
    opt.rank = (uint32_t)r->rank;
    sampler_t *s;
    int rc = sampler_create(&opt, &s);
    for (uint64_t e = 0; rc == 0 && e < run->epochs && !ranks_aborted(r->group); e++) {
        if (run->set_epoch)
            sampler_set_epoch(s, e);
        if ((rc = sampler_begin(s)) < 0)
            break;
        struct partition_shard *sh = &run->shards[e * run->world + (uint64_t)r->rank];
        sh->count = sampler_len(s);
        if (!(sh->indices = malloc((sh->count ? sh->count : 1) * sizeof *sh->indices))) {
            rc = err_set(ERR_NOMEM, "epoch %llu: cannot hold %llu indices", (unsigned long long)e,
                         (unsigned long long)sh->count);
            break;
        }
        for (uint64_t k = 0; rc == 0 && k < sh->count; k++)
            rc = sampler_get(s, k, &sh->indices[k]);
    }
    sampler_destroy(s);
    return rc;
}

/* Reads every step of `d` into *sh (a batch holds at most max_samples indices). */
static int partition_collect(batch_dynamic_t *d, uint64_t max_samples, struct partition_shard *sh)
{
    sh->steps = batch_dynamic_len(d);
    sh->stats = batch_dynamic_stats(d);
    sh->sizes = malloc((sh->steps ? sh->steps : 1) * sizeof *sh->sizes);
    if (!sh->sizes)
        return err_set(ERR_NOMEM, "cannot hold %llu batches", (unsigned long long)sh->steps);
    uint64_t cap = 0;
    sh->count = 0;
    for (uint64_t s = 0; s < sh->steps; s++) {
        if (cap - sh->count < max_samples) {
            uint64_t want = sh->count + max_samples > 2 * cap ? sh->count + max_samples : 2 * cap;
            uint64_t *items = want <= SIZE_MAX / sizeof *items ? realloc(sh->indices, want * sizeof *items) : NULL;
            if (!items)
                return err_set(ERR_NOMEM, "cannot hold %llu indices of batches", (unsigned long long)want);
            sh->indices = items;
            cap = want;
        }
        int64_t count = batch_dynamic_get(d, s, sh->indices + sh->count);
        if (count < 0)
            return (int)count;
        sh->sizes[s] = (uint64_t)count;
        sh->count += (uint64_t)count;
    }
    return 0;
}

static int partition_rank_dynamic(struct launch_rank *r)
{
    partition_run_t *run = r->shared;
    struct batch_dynamic_options opt = run->dyn;
    opt.rank = (uint32_t)r->rank;
    batch_dynamic_t *d;
    int rc = batch_dynamic_create(run->ds, &opt, &d);
    for (uint64_t e = 0; rc == 0 && e < run->epochs && !ranks_aborted(r->group); e++) {
        if (run->set_epoch)
            batch_dynamic_set_epoch(d, e);
        if ((rc = batch_dynamic_begin(d)) == 0)
            rc = partition_collect(d, opt.max_samples, &run->shards[e * run->world + (uint64_t)r->rank]);
    }
    batch_dynamic_destroy(d);
    return rc;
}

/* Allocates the shards and runs fn on run->world rank threads. */
static int partition_record(partition_run_t *run, int (*fn)(struct launch_rank *r))
{
    if (run->epochs == 0 || run->epochs > PARTITION_MAX_EPOCHS)
        return err_set(ERR_ARG, "partition: %llu epochs (1 .. %d)", (unsigned long long)run->epochs,
                       PARTITION_MAX_EPOCHS);
    if (run->world == 0 || run->world > LAUNCH_MAX_THREADS)
        return err_set(ERR_ARG, "partition: a world of %u runs a thread per rank, at most %d", run->world,
                       LAUNCH_MAX_THREADS);
    /* Up front, what the whole run holds at once: every rank's order of the
     * epoch (its own sampler, 8 bytes an index at most) and every recorded
     * shard of every epoch (8 bytes an index; padding adds at most one per
     * rank). A size near 2^64 or past this machine stops here, not halfway. */
    uint64_t per_epoch = run->n > UINT64_MAX - run->world ? UINT64_MAX : run->n + run->world, words;
    if (__builtin_mul_overflow(per_epoch, run->epochs + run->world, &words))
        words = UINT64_MAX;
    size_t bytes;
    int rc = mem_check_array("partition: every rank's order and every epoch's shards", words, sizeof(uint64_t),
                             &bytes);
    if (rc < 0)
        return err_wrap(rc, "%llu records, %u ranks, %llu epochs", (unsigned long long)run->n, run->world,
                        (unsigned long long)run->epochs);
    run->shards = calloc(run->epochs * run->world, sizeof *run->shards);
    if (!run->shards)
        return err_set(ERR_NOMEM, "partition: out of memory for %llu shards",
                       (unsigned long long)(run->epochs * run->world));
    struct launch_config cfg = {.world = (int)run->world, .shared = run};
    rc = launch_run(&cfg, fn);
    if (rc < 0)
        partition_run_free(run);
    return rc;
}

int partition_run_distributed(const struct sampler_options *opt, uint64_t epochs, int set_epoch,
                              partition_run_t *run)
{
    *run = (partition_run_t){.dist = *opt, .n = opt->size, .world = opt->world, .epochs = epochs,
                             .set_epoch = set_epoch};
    return partition_record(run, partition_rank_distributed);
}

int partition_run_dynamic(const dataset_t *ds, const struct batch_dynamic_options *opt, uint64_t epochs,
                          int set_epoch, partition_run_t *run)
{
    *run = (partition_run_t){.dynamic = 1, .dyn = *opt, .ds = ds, .n = dataset_info(ds)->length,
                             .world = opt->world, .epochs = epochs, .set_epoch = set_epoch};
    return partition_record(run, partition_rank_dynamic);
}

/* ---- the tally: how often each index was handed out in one epoch --------------- */

struct partition_tally {
    uint32_t *count;
    uint64_t n;
    uint64_t covered; /* indices seen at least once */
    uint64_t repeats; /* sightings beyond the first */
};

/* Counts every index of epoch e's shards. ERR_RANGE names an index outside
 * the dataset and the rank that was given it. */
static int partition_tally(const partition_run_t *run, uint64_t e, struct partition_tally *t)
{
    *t = (struct partition_tally){.n = run->n, .count = calloc(run->n ? run->n : 1, sizeof *t->count)};
    if (!t->count)
        return err_set(ERR_NOMEM, "partition: cannot allocate the tally of %llu indices", (unsigned long long)run->n);
    for (uint32_t r = 0; r < run->world; r++) {
        const struct partition_shard *sh = partition_shard(run, e, r);
        for (uint64_t k = 0; k < sh->count; k++) {
            uint64_t index = sh->indices[k];
            if (index >= t->n) {
                free(t->count);
                t->count = NULL;
                return err_set(ERR_RANGE, "epoch %llu: rank %u was given index %llu (position %llu), outside the "
                               "dataset of %llu records", (unsigned long long)e, r, (unsigned long long)index,
                               (unsigned long long)k, (unsigned long long)t->n);
            }
            if (t->count[index] < UINT32_MAX)
                t->count[index]++;
        }
    }
    for (uint64_t i = 0; i < t->n; i++) {
        t->covered += t->count[i] > 0;
        t->repeats += t->count[i] > 1 ? t->count[i] - 1 : 0;
    }
    return 0;
}

/* ---- DistributedSampler ---------------------------------------------------------- */

/* drop_last keeps the first `total` entries of the epoch's order and drops
 * the rest: how many of those first entries some rank received. The order is
 * recomputed here from the options alone (randperm, the Feistel bijection, or
 * 0 .. n-1), independently of the ranks' split. */
static int partition_kept_prefix(const partition_run_t *run, uint64_t e, const struct partition_tally *t,
                                 uint64_t total, uint64_t *kept)
{
    const struct sampler_options *o = &run->dist;
    const uint64_t key = o->seed + (run->set_epoch ? e : 0);
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

/* Positions where two sequences differ, over the shorter one's length. */
static uint64_t partition_differences(const uint64_t *a, uint64_t na, const uint64_t *b, uint64_t nb)
{
    uint64_t d = 0, n = na < nb ? na : nb;
    for (uint64_t k = 0; k < n; k++)
        d += a[k] != b[k];
    return d;
}

static int partition_check_distributed(const partition_run_t *run, uint64_t e, struct partition_verdict *v)
{
    const struct sampler_options *o = &run->dist;
    const uint64_t world = run->world, n = run->n, len = partition_shard(run, e, 0)->count, total = len * world;
    struct partition_tally t;
    int rc = partition_tally(run, e, &t);
    if (rc < 0)
        return rc;
    uint64_t unequal = 0;
    for (uint32_t r = 0; r < world; r++)
        unequal += partition_shard(run, e, r)->count != len;
    int nv = 0;
    nv += partition_verdict(&v[nv], "equal counts", unequal == 0, "%llu indices on each of the %llu ranks",
                            (unsigned long long)len, (unsigned long long)world);
    uint64_t padding = o->drop_last || total < n ? 0 : total - n;
    nv += partition_verdict(&v[nv], "disjoint", t.repeats == padding, "%llu repeats; the padding adds %llu",
                            (unsigned long long)t.repeats, (unsigned long long)padding);
    if (o->drop_last) {
        uint64_t kept = 0;
        if ((rc = partition_kept_prefix(run, e, &t, total, &kept)) == 0)
            nv += partition_verdict(&v[nv], "coverage", t.covered == total && kept == total,
                                    "%llu distinct: the first %llu of the order, %llu dropped",
                                    (unsigned long long)t.covered, (unsigned long long)kept,
                                    (unsigned long long)(n - total));
    } else {
        nv += partition_verdict(&v[nv], "coverage", t.covered == n, "%llu distinct indices of %llu",
                                (unsigned long long)t.covered, (unsigned long long)n);
    }
    free(t.count);
    if (rc < 0)
        return rc;
    if (e > 0) {
        uint64_t diff = 0;
        for (uint32_t r = 0; r < world; r++) {
            const struct partition_shard *now = partition_shard(run, e, r), *before = partition_shard(run, e - 1, r);
            diff += partition_differences(now->indices, now->count, before->indices, before->count);
        }
        if (!o->shuffle)
            nv += partition_verdict(&v[nv], "same order", diff == 0, "shuffle is off: %llu positions changed",
                                    (unsigned long long)diff);
        else
            nv += partition_verdict(&v[nv], "new order", diff > 0 || n < PARTITION_ORDER_MIN_N,
                                    "%llu of %llu positions differ from epoch %llu", (unsigned long long)diff,
                                    (unsigned long long)total, (unsigned long long)e - 1);
    }
    return nv;
}

/* ---- the token-budget batch sampler ------------------------------------------------ */

/* Budget and size of every batch of one rank; adds its real and padded
 * tokens (longest x records) to *pad. */
static int partition_check_budgets(const partition_run_t *run, const struct partition_shard *sh, uint64_t *bad,
                                   struct batch_padding *pad)
{
    const struct batch_dynamic_options *o = &run->dyn;
    const uint64_t *idx = sh->indices;
    for (uint64_t s = 0; s < sh->steps; idx += sh->sizes[s], s++) {
        uint64_t longest;
        int rc = batch_padding_add(pad, run->ds, idx, sh->sizes[s], &longest);
        if (rc < 0)
            return rc;
        uint64_t size = o->type == BATCH_TOKEN ? longest * sh->sizes[s] : sh->sizes[s];
        *bad += sh->sizes[s] == 0 || sh->sizes[s] > o->max_samples || size > o->budget;
    }
    return 0;
}

/* Records in the first `steps` batches of sh. */
static uint64_t partition_items_in(const struct partition_shard *sh, uint64_t steps)
{
    uint64_t items = 0;
    for (uint64_t s = 0; s < steps; s++)
        items += sh->sizes[s];
    return items;
}

/* Whether n words at a and b are equal. An empty shard has NULL arrays, and
 * memcmp must not be handed NULL even for 0 bytes (C11 7.24.1). */
static int partition_same_words(const uint64_t *a, const uint64_t *b, uint64_t n)
{
    return n == 0 || memcmp(a, b, n * sizeof *a) == 0;
}

/* Whether a shard holds exactly these batches. */
static int partition_same_batches(const struct partition_shard *a, const uint64_t *items, const uint64_t *sizes,
                                  uint64_t steps)
{
    return a->steps == steps && partition_same_words(a->sizes, sizes, steps) &&
           partition_same_words(a->indices, items, partition_items_in(a, steps));
}

/* Records the sampler had to skip, counted here from the lengths rather than
 * taken from its statistics: longer than max_token_length, whose 0 means the
 * token budget (token batches) or no limit. */
static int partition_count_too_long(const partition_run_t *run, uint64_t *too_long)
{
    const struct batch_dynamic_options *o = &run->dyn;
    uint64_t limit = o->max_token_length ? o->max_token_length : o->type == BATCH_TOKEN ? o->budget : UINT64_MAX;
    *too_long = 0;
    for (uint64_t i = 0; i < run->n; i++) {
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
static int partition_count_copies(const partition_run_t *run, uint64_t e, uint64_t *copies,
                                  uint64_t *copied_records, uint64_t *overlapping)
{
    const uint64_t n = run->n;
    uint64_t total = 0;
    for (uint32_t r = 0; r < run->world; r++)
        total += partition_shard(run, e, r)->steps;
    const uint64_t none = UINT64_MAX;
    uint64_t *owner = malloc((n ? n : 1) * sizeof *owner);                /* record -> first batch holding it */
    const uint64_t **start = malloc((total ? total : 1) * sizeof *start); /* batch -> its records */
    uint64_t *size = malloc((total ? total : 1) * sizeof *size);
    if (!owner || !start || !size) {
        free(owner), free(start), free(size);
        return err_set(ERR_NOMEM, "partition: cannot allocate the copy check of %llu batches",
                       (unsigned long long)total);
    }
    for (uint64_t i = 0; i < n; i++)
        owner[i] = none;
    *copies = *copied_records = *overlapping = 0;
    uint64_t g = 0;
    for (uint32_t r = 0; r < run->world; r++) {
        const struct partition_shard *sh = partition_shard(run, e, r);
        const uint64_t *idx = sh->indices;
        for (uint64_t s = 0; s < sh->steps; idx += sh->sizes[s], s++, g++) {
            uint64_t m = sh->sizes[s], seen = 0;
            start[g] = idx, size[g] = m;
            for (uint64_t k = 0; k < m; k++)
                seen += idx[k] < n && owner[idx[k]] != none;
            if (seen == 0) {
                for (uint64_t k = 0; k < m; k++)
                    if (idx[k] < n)
                        owner[idx[k]] = g;
            } else if (seen == m && size[owner[idx[0]]] == m &&
                       partition_same_words(start[owner[idx[0]]], idx, m)) {
                ++*copies, *copied_records += m;
            } else {
                ++*overlapping;
            }
        }
    }
    free(owner), free(start), free(size);
    return 0;
}

static int partition_check_dynamic(const partition_run_t *run, uint64_t e, struct partition_verdict *v)
{
    const struct batch_dynamic_options *o = &run->dyn;
    const uint64_t world = run->world, n = run->n;
    const struct partition_shard *first = partition_shard(run, e, 0);
    uint64_t placed = 0, bad = 0, unequal = 0;
    struct batch_padding pad = {0};
    int rc = 0;
    for (uint32_t r = 0; rc == 0 && r < world; r++) {
        const struct partition_shard *sh = partition_shard(run, e, r);
        unequal += sh->steps != first->steps;
        placed += sh->count;
        rc = partition_check_budgets(run, sh, &bad, &pad);
    }
    uint64_t too_long = 0, copies = 0, copied = 0, overlapping = 0;
    if (rc == 0 && (rc = partition_count_too_long(run, &too_long)) == 0 && o->start_step == 0)
        rc = partition_count_copies(run, e, &copies, &copied, &overlapping);
    struct partition_tally t;
    if (rc < 0 || (rc = partition_tally(run, e, &t)) < 0)
        return rc;
    uint64_t want = n - too_long;
    int nv = 0;
    nv += partition_verdict(&v[nv], "equal steps", unequal == 0, "%llu steps on every rank",
                            (unsigned long long)first->steps);
    nv += partition_verdict(&v[nv], "budget", bad == 0, "%llu batches over %llu %s or %llu records",
                            (unsigned long long)bad, (unsigned long long)o->budget,
                            o->type == BATCH_TOKEN ? "tokens" : "records", (unsigned long long)o->max_samples);
    nv += partition_verdict(&v[nv], "skipped", too_long == first->stats.skipped,
                            "%llu records too long, %llu by the sampler's count", (unsigned long long)too_long,
                            (unsigned long long)first->stats.skipped);
    if (o->start_step == 0) {
        nv += partition_verdict(&v[nv], "disjoint",
                                overlapping == 0 && copies == first->stats.padded_batches && copies < world &&
                                    t.repeats == copied,
                                "%llu overlapping; %llu repeats of %llu padding, %llu records",
                                (unsigned long long)overlapping, (unsigned long long)copies,
                                (unsigned long long)first->stats.padded_batches, (unsigned long long)copied);
        nv += partition_verdict(&v[nv], "coverage", t.covered == want && placed - t.repeats == want,
                                "%llu distinct of %llu kept records; repeats %llu", (unsigned long long)t.covered,
                                (unsigned long long)want, (unsigned long long)t.repeats);
    } else {
        nv += partition_verdict(&v[nv], "coverage", -1, "not checked: the run resumed at step %llu",
                                (unsigned long long)o->start_step);
    }
    free(t.count);
    nv += partition_verdict(&v[nv], "efficiency", -1, "%.1f%% of the padded tokens are real ones",
                            pad.padded ? 100.0 * (double)pad.real / (double)pad.padded : 100.0);
    if (e > 0) {
        const struct partition_shard *prev = partition_shard(run, e - 1, 0);
        int same = partition_same_batches(prev, first->indices, first->sizes, first->steps);
        if (!o->shuffle)
            nv += partition_verdict(&v[nv], "same order", same, "shuffle is off: rank 0's batches %s",
                                    same ? "repeat" : "changed");
        else
            nv += partition_verdict(&v[nv], "new order", !same || n < PARTITION_ORDER_MIN_N,
                                    "rank 0's batches %s epoch %llu's", same ? "repeat" : "differ from",
                                    (unsigned long long)e - 1);
    }
    return nv;
}

int partition_check_epoch(const partition_run_t *run, uint64_t e, struct partition_verdict *v)
{
    if (e >= run->epochs || !run->shards)
        return err_set(ERR_ARG, "partition: epoch %llu was not recorded (%llu epochs)", (unsigned long long)e,
                       (unsigned long long)run->epochs);
    return run->dynamic ? partition_check_dynamic(run, e, v) : partition_check_distributed(run, e, v);
}

int partition_check_resume(const partition_run_t *run, struct partition_verdict *v)
{
    if (!run->dynamic || !run->shards)
        return err_set(ERR_ARG, "partition: the resume check is for a recorded token-budget run");
    const struct partition_shard *full = partition_shard(run, 0, 0);
    struct batch_dynamic_options opt = run->dyn;
    opt.rank = 0;
    opt.start_step += full->steps / 2;
    batch_dynamic_t *d;
    int rc = batch_dynamic_create(run->ds, &opt, &d);
    if (rc < 0)
        return rc;
    struct partition_shard tail = {0};
    if ((rc = batch_dynamic_begin(d)) == 0)
        rc = partition_collect(d, opt.max_samples, &tail);
    if (rc == 0) {
        uint64_t skip = full->steps / 2;
        int same = partition_same_batches(&tail, full->indices + partition_items_in(full, skip), full->sizes + skip,
                                          full->steps - skip);
        partition_verdict(v, "resume", same, "start_step %llu gives the last %llu steps of epoch 0",
                          (unsigned long long)opt.start_step, (unsigned long long)tail.steps);
    }
    free(tail.indices);
    free(tail.sizes);
    batch_dynamic_destroy(d);
    return rc;
}
