/* batch: fixed-size and token-budget batch samplers (see batch.h). */
#include "sampler/batch.h"

#include "base/error.h"
#include "base/mem.h"
#include "base/rng.h"

#include <stdlib.h>

/* ---- fixed-size batches: torch.utils.data.BatchSampler ---------------------- */

static uint64_t stream_sampler_len(const void *self) { return sampler_len(self); }

static int stream_sampler_get(const void *self, uint64_t k, uint64_t *index) { return sampler_get(self, k, index); }

struct index_stream index_stream_of_sampler(const sampler_t *s)
{
    return (struct index_stream){.len = stream_sampler_len, .get = stream_sampler_get, .self = s};
}

static uint64_t stream_array_len(const void *self) { return ((const struct index_array *)self)->count; }

static int stream_array_get(const void *self, uint64_t k, uint64_t *index)
{
    const struct index_array *a = self;
    if (k >= a->count)
        return err_set(ERR_RANGE, "index stream: position %llu is past the %llu indices of the array",
                       (unsigned long long)k, (unsigned long long)a->count);
    *index = a->indices[k];
    return 0;
}

struct index_stream index_stream_of_array(const struct index_array *a)
{
    return (struct index_stream){.len = stream_array_len, .get = stream_array_get, .self = a};
}

int batch_sampler_init(batch_sampler_t *b, struct index_stream src, uint64_t batch_size, int drop_last)
{
    if (batch_size == 0)
        return err_set(ERR_ARG, "batch sampler: batch_size must be at least 1");
    if (!src.len || !src.get)
        return err_set(ERR_ARG, "batch sampler: the index stream has no len or get");
    *b = (batch_sampler_t){.src = src, .batch_size = batch_size, .drop_last = drop_last};
    return 0;
}

uint64_t batch_sampler_len(const batch_sampler_t *b)
{
    uint64_t n = b->src.len(b->src.self);
    return n / b->batch_size + (!b->drop_last && n % b->batch_size != 0);
}

int64_t batch_sampler_get(const batch_sampler_t *b, uint64_t batch, uint64_t *out)
{
    if (batch >= batch_sampler_len(b))
        return err_set(ERR_RANGE, "batch sampler: batch %llu is past the %llu batches of an epoch",
                       (unsigned long long)batch, (unsigned long long)batch_sampler_len(b));
    uint64_t n = b->src.len(b->src.self), first = batch * b->batch_size;
    uint64_t count = n - first < b->batch_size ? n - first : b->batch_size;
    for (uint64_t k = 0; k < count; k++) {
        int rc = b->src.get(b->src.self, first + k, &out[k]);
        if (rc < 0)
            return rc;
    }
    return (int64_t)count;
}

/* ---- batch streams ------------------------------------------------------------ */

static uint64_t stream_batches_len(const void *self) { return batch_sampler_len(self); }

static int64_t stream_batches_get(const void *self, uint64_t batch, uint64_t *out)
{
    return batch_sampler_get(self, batch, out);
}

struct batch_stream batch_stream_of_sampler(const batch_sampler_t *b)
{
    return (struct batch_stream){.len = stream_batches_len, .get = stream_batches_get, .max_size = b->batch_size,
                                 .self = b};
}

static uint64_t stream_batch_array_len(const void *self) { return ((const struct batch_array *)self)->batches; }

static int64_t stream_batch_array_get(const void *self, uint64_t batch, uint64_t *out)
{
    const struct batch_array *a = self;
    if (batch >= a->batches)
        return err_set(ERR_RANGE, "batch stream: batch %llu is past the %llu batches of the array",
                       (unsigned long long)batch, (unsigned long long)a->batches);
    uint64_t first = a->offsets[batch], end = a->offsets[batch + 1];
    if (end < first || (batch == 0 && first != 0))
        return err_set(ERR_ARG, "batch stream: batch %llu runs from offset %llu to %llu (offsets start at 0 and "
                       "never decrease)", (unsigned long long)batch, (unsigned long long)first,
                       (unsigned long long)end);
    for (uint64_t k = first; k < end; k++)
        out[k - first] = a->indices[k];
    return (int64_t)(end - first);
}

struct batch_stream batch_stream_of_array(const struct batch_array *a)
{
    uint64_t most = 0;
    for (uint64_t b = 0; b < a->batches; b++)
        if (a->offsets[b + 1] > a->offsets[b] && a->offsets[b + 1] - a->offsets[b] > most)
            most = a->offsets[b + 1] - a->offsets[b];
    return (struct batch_stream){.len = stream_batch_array_len, .get = stream_batch_array_get, .max_size = most,
                                 .self = a};
}

/* ---- token-budget batches --------------------------------------------------- */

struct batch_span {
    uint64_t first, count; /* a run of d->items */
};

/* One record of a sorting buffer. `pos` (its place in the epoch order) breaks
 * ties, so equal lengths keep the shuffled order whatever qsort does. */
struct batch_entry {
    uint64_t length, index, pos;
};

struct batch_dynamic {
    const dataset_t *ds;
    struct batch_dynamic_options opt;
    uint64_t epoch;
    int ready;
    struct sampler_repeat repeat;
    sampler_seq_t items;       /* every placed index, batch after batch */
    struct batch_span *spans;  /* the epoch's batches, padding repeats at the end */
    uint64_t span_count, span_cap;
    struct batch_dynamic_stats stats;
};

void batch_dynamic_options_default(struct batch_dynamic_options *opt)
{
    *opt = (struct batch_dynamic_options){
        .world = 1,
        .shuffle = 1,
        .sort_size = 100,
        .budget = 4096,
        .max_samples = 256,
        .type = BATCH_TOKEN,
        .randperm = SAMPLER_RANDPERM_AUTO,
    };
}

int batch_dynamic_create(const dataset_t *ds, const struct batch_dynamic_options *opt, batch_dynamic_t **out)
{
    *out = NULL;
    if (opt->world == 0)
        return err_set(ERR_ARG, "dynamic batch sampler: the world size must be at least 1");
    if (opt->rank >= opt->world)
        return err_set(ERR_ARG, "dynamic batch sampler: invalid rank %u, rank should be in the interval [0, %u]",
                       opt->rank, opt->world - 1);
    if (opt->sort_size == 0 || opt->budget == 0 || opt->max_samples == 0)
        return err_set(ERR_ARG, "dynamic batch sampler: %s must be at least 1",
                       opt->sort_size == 0 ? "sort_size" : opt->budget == 0 ? "the budget" : "max_samples");
    if (opt->type == BATCH_TOKEN && opt->max_token_length > opt->budget)
        return err_set(ERR_ARG,
                       "dynamic batch sampler: max_token_length %llu is above the token budget %llu: "
                       "such a record could never fit a batch",
                       (unsigned long long)opt->max_token_length, (unsigned long long)opt->budget);
    batch_dynamic_t *d = calloc(1, sizeof *d);
    if (!d)
        return err_set(ERR_NOMEM, "dynamic batch sampler: out of memory");
    d->ds = ds;
    d->opt = *opt;
    if (d->opt.max_token_length == 0)
        d->opt.max_token_length = opt->type == BATCH_TOKEN ? opt->budget : UINT64_MAX;
    *out = d;
    return 0;
}

void batch_dynamic_set_epoch(batch_dynamic_t *d, uint64_t epoch)
{
    d->epoch = epoch;
    d->ready = 0;
}

static int batch_entry_cmp(const void *a, const void *b)
{
    const struct batch_entry *x = a, *y = b;
    if (x->length != y->length)
        return x->length < y->length ? -1 : 1;
    return x->pos < y->pos ? -1 : x->pos > y->pos;
}

static int batch_span_push(batch_dynamic_t *d, uint64_t first, uint64_t count)
{
    if (d->span_count == d->span_cap) {
        uint64_t cap = d->span_cap ? 2 * d->span_cap : 1024;
        struct batch_span *p = realloc(d->spans, cap * sizeof *p);
        if (!p)
            return err_set(ERR_NOMEM, "dynamic batch sampler: cannot grow the batch list to %llu batches",
                           (unsigned long long)cap);
        d->spans = p;
        d->span_cap = cap;
    }
    d->spans[d->span_count++] = (struct batch_span){first, count};
    return 0;
}

/* Does a record of `length` still fit a batch of `count` records whose
 * longest is `longest`? Token budget: the padded batch, longest x count. */
static int batch_fits(const struct batch_dynamic_options *o, uint64_t longest, uint64_t count, uint64_t length)
{
    if (count + 1 > o->max_samples)
        return 0;
    if (o->type == BATCH_EXAMPLE)
        return count + 1 <= o->budget;
    uint64_t widest = length > longest ? length : longest;
    return widest <= o->budget / (count + 1);
}

/* Sorts one buffer by length and cuts it into batches appended to d. */
static int batch_cut_buffer(batch_dynamic_t *d, struct batch_entry *e, uint64_t count, uint64_t *placed)
{
    qsort(e, count, sizeof *e, batch_entry_cmp);
    uint64_t first = *placed, longest = 0;
    for (uint64_t j = 0; j < count; j++) {
        if (*placed > first && !batch_fits(&d->opt, longest, *placed - first, e[j].length)) {
            int rc = batch_span_push(d, first, *placed - first);
            if (rc < 0)
                return rc;
            first = *placed;
            longest = 0;
        }
        if (d->items.u32)
            d->items.u32[*placed] = (uint32_t)e[j].index;
        else
            d->items.u64[*placed] = e[j].index;
        (*placed)++;
        longest = e[j].length > longest ? e[j].length : longest;
    }
    return *placed > first ? batch_span_push(d, first, *placed - first) : 0;
}

static void batch_dynamic_clear(batch_dynamic_t *d)
{
    sampler_seq_free(&d->items);
    d->span_count = 0;
    d->stats = (struct batch_dynamic_stats){0};
    d->ready = 0;
}

int batch_dynamic_begin(batch_dynamic_t *d)
{
    batch_dynamic_clear(d);
    sampler_repeat_check(&d->repeat, "dynamic batch sampler", d->opt.rank, d->epoch, d->opt.shuffle);
    const struct batch_dynamic_options *o = &d->opt;
    const uint64_t n = dataset_info(d->ds)->length, epoch_seed = o->seed + d->epoch;
    uint64_t buffer = o->sort_size > UINT64_MAX / o->world ? UINT64_MAX : o->sort_size * o->world;
    if (buffer > n)
        buffer = n;
    sampler_seq_t order = {0};
    struct batch_entry *e = NULL;
    int rc = o->shuffle ? sampler_randperm(n, epoch_seed, o->randperm, &order) : 0;
    if (rc == 0)
        rc = sampler_seq_alloc(&d->items, n, n ? n - 1 : 0);
    size_t bytes = 0;
    if (rc == 0 && buffer > 0 &&
        (rc = mem_check_array("dynamic batch sampler: the sorting buffer", buffer, sizeof *e, &bytes)) == 0 &&
        !(e = malloc(bytes)))
        rc = err_set(ERR_NOMEM, "dynamic batch sampler: cannot allocate a sorting buffer of %llu records",
                     (unsigned long long)buffer);
    uint64_t placed = 0;
    for (uint64_t start = 0; rc == 0 && start < n; start += buffer) {
        uint64_t m = n - start < buffer ? n - start : buffer, kept = 0;
        for (uint64_t j = 0; rc == 0 && j < m; j++) {
            uint64_t index = order.count ? sampler_seq_at(&order, start + j) : start + j, length;
            if ((rc = dataset_length_of(d->ds, index, &length)) < 0)
                rc = err_wrap(rc, "dynamic batch sampler: epoch %llu", (unsigned long long)d->epoch);
            else if (length > o->max_token_length)
                d->stats.skipped++;
            else
                e[kept++] = (struct batch_entry){length, index, start + j};
        }
        if (rc == 0)
            rc = batch_cut_buffer(d, e, kept, &placed);
    }
    free(e);
    sampler_seq_free(&order);
    d->stats.records = placed;
    d->stats.batches = d->span_count;
    /* Pad to a multiple of world with repeats picked from the seed, so that
     * every rank gets the same number of steps: a rank with one batch fewer
     * would skip the last all-reduce and leave the others waiting in it. */
    rng_t g;
    rng_seed(&g, epoch_seed);
    uint64_t real = d->span_count;
    while (rc == 0 && real > 0 && d->span_count % o->world != 0) {
        const struct batch_span *pick = &d->spans[rng_random64(&g) % real];
        rc = batch_span_push(d, pick->first, pick->count);
    }
    if (rc < 0) {
        batch_dynamic_clear(d);
        return rc;
    }
    d->stats.padded_batches = d->span_count - real;
    d->stats.batches = d->span_count;
    d->ready = 1;
    return 0;
}

uint64_t batch_dynamic_len(const batch_dynamic_t *d)
{
    uint64_t steps = d->span_count / d->opt.world;
    return d->ready && steps > d->opt.start_step ? steps - d->opt.start_step : 0;
}

int64_t batch_dynamic_get(const batch_dynamic_t *d, uint64_t step, uint64_t *out)
{
    if (!d->ready)
        return err_set(ERR_STATE, "dynamic batch sampler: rank %u: call batch_dynamic_begin() before reading epoch %llu",
                       d->opt.rank, (unsigned long long)d->epoch);
    if (step >= batch_dynamic_len(d))
        return err_set(ERR_RANGE, "dynamic batch sampler: rank %u: step %llu is past the %llu steps left in epoch %llu",
                       d->opt.rank, (unsigned long long)step, (unsigned long long)batch_dynamic_len(d),
                       (unsigned long long)d->epoch);
    /* Round-robin deal: global batch g goes to rank g % world at step g / world. */
    const struct batch_span *b = &d->spans[(d->opt.start_step + step) * d->opt.world + d->opt.rank];
    for (uint64_t k = 0; k < b->count; k++)
        out[k] = sampler_seq_at(&d->items, b->first + k);
    return (int64_t)b->count;
}

int batch_dynamic_warned(const batch_dynamic_t *d) { return d->repeat.warned; }

struct batch_dynamic_stats batch_dynamic_stats(const batch_dynamic_t *d) { return d->stats; }

void batch_dynamic_destroy(batch_dynamic_t *d)
{
    if (!d)
        return;
    sampler_seq_free(&d->items);
    free(d->spans);
    free(d);
}

static uint64_t stream_dynamic_len(const void *self) { return batch_dynamic_len(self); }

static int64_t stream_dynamic_get(const void *self, uint64_t step, uint64_t *out)
{
    return batch_dynamic_get(self, step, out);
}

struct batch_stream batch_stream_of_dynamic(const batch_dynamic_t *d)
{
    return (struct batch_stream){.len = stream_dynamic_len, .get = stream_dynamic_get,
                                 .max_size = d->opt.max_samples, .self = d};
}

/* ---- padding ---------------------------------------------------------------- */

int batch_padding_add(struct batch_padding *p, const dataset_t *ds, const uint64_t *indices, uint64_t count,
                      uint64_t *longest)
{
    uint64_t widest = 0, real = 0;
    for (uint64_t k = 0; k < count; k++) {
        uint64_t length;
        int rc = dataset_length_of(ds, indices[k], &length);
        if (rc < 0)
            return rc;
        real += length;
        widest = length > widest ? length : widest;
    }
    p->batches++;
    p->real += real;
    p->padded += widest * count;
    if (longest)
        *longest = widest;
    return 0;
}

int batch_padding_add_stream(struct batch_padding *p, const dataset_t *ds, struct batch_stream s)
{
    size_t bytes;
    int rc = mem_check_array("a batch of indices", s.max_size ? s.max_size : 1, sizeof(uint64_t), &bytes);
    uint64_t *batch = rc == 0 ? malloc(bytes) : NULL;
    if (rc == 0 && !batch)
        rc = err_set(ERR_NOMEM, "cannot allocate a batch of %llu indices", (unsigned long long)s.max_size);
    uint64_t batches = rc == 0 ? s.len(s.self) : 0;
    for (uint64_t b = 0; rc == 0 && b < batches; b++) {
        int64_t count = s.get(s.self, b, batch);
        rc = count < 0 ? (int)count : batch_padding_add(p, ds, batch, (uint64_t)count, NULL);
    }
    free(batch);
    return rc;
}
