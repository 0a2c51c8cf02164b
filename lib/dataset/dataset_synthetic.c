/* dataset_synthetic: a deterministic dataset of any size, computed, not stored.
 *
 * Where it sits: behind dataset.h, for tests and as the fallback when
 * Fashion-MNIST is not installed. Record i's bytes, size and label are pure
 * functions of (seed, i), so every rank and every worker sees the same record
 * without any file, and a test can recompute what a record must contain.
 */
#include "dataset/dataset_impl.h"

#include "base/error.h"
#include "base/hash.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct synthetic {
    uint64_t seed;
    uint64_t min_bytes, max_bytes;
};

static uint64_t synthetic_bytes_of(const struct synthetic *s, uint64_t index)
{
    uint64_t span = s->max_bytes - s->min_bytes + 1;
    return span == 1 ? s->max_bytes : s->min_bytes + hash_splitmix64(s->seed ^ hash_splitmix64(index)) % span;
}

static uint64_t synthetic_label_of(const struct synthetic *s, uint64_t index)
{
    return hash_splitmix64(index ^ ~s->seed) % 10;
}

static int synthetic_read(const dataset_t *ds, uint64_t index, void *dst, uint64_t cap, struct dataset_record *rec)
{
    const struct synthetic *s = ds->impl;
    uint64_t bytes = synthetic_bytes_of(s, index);
    if (bytes > cap)
        return err_set(ERR_RANGE, "%s: record %llu has %llu bytes, the buffer only %llu", ds->name,
                       (unsigned long long)index, (unsigned long long)bytes, (unsigned long long)cap);
    uint8_t *out = dst;
    uint64_t state = hash_splitmix64(s->seed + 0x51ed270b27u) ^ index;
    for (uint64_t i = 0; i < bytes; i += 8) {
        uint64_t word = hash_splitmix64(state + i);
        memcpy(out + i, &word, bytes - i < 8 ? bytes - i : 8);
    }
    rec->bytes = rec->length = bytes;
    rec->label = (int64_t)synthetic_label_of(s, index);
    return 0;
}

static int synthetic_length_of(const dataset_t *ds, uint64_t index, uint64_t *length)
{
    *length = synthetic_bytes_of(ds->impl, index);
    return 0;
}

static int synthetic_check(const dataset_t *ds, uint64_t index, uint32_t classes)
{
    uint64_t label = synthetic_label_of(ds->impl, index);
    if (classes == 0 || label < classes)
        return 0;
    return err_set(ERR_FORMAT, "%s: record %llu: label %llu is outside 0..%u", ds->name, (unsigned long long)index,
                   (unsigned long long)label, classes - 1);
}

static void synthetic_close(dataset_t *ds)
{
    free(ds->impl);
    free(ds);
}

static const struct dataset_ops synthetic_ops = {
    .read = synthetic_read, .length_of = synthetic_length_of, .check = synthetic_check, .close = synthetic_close};

int dataset_synthetic_open(const struct dataset_options *opt, dataset_t **out)
{
    uint64_t min = opt->synthetic_min_bytes, max = opt->synthetic_bytes;
    if (max == 0)
        return err_set(ERR_ARG, "synthetic: records must have at least 1 byte");
    if (min == 0 || min > max)
        min = max;
    dataset_t *ds = calloc(1, sizeof *ds);
    struct synthetic *s = calloc(1, sizeof *s);
    if (!ds || !s) {
        free(ds);
        free(s);
        return err_set(ERR_NOMEM, "synthetic: out of memory");
    }
    *s = (struct synthetic){.seed = opt->seed, .min_bytes = min, .max_bytes = max};
    ds->ops = &synthetic_ops;
    ds->impl = s;
    ds->info = (struct dataset_info){
        .kind = DATASET_SYNTHETIC,
        .length = opt->synthetic_records,
        .record_bytes = min == max ? max : 0,
        .max_record_bytes = max,
        .has_labels = 1,
    };
    snprintf(ds->name, sizeof ds->name, "synthetic:%llu", (unsigned long long)opt->synthetic_records);
    *out = ds;
    return 0;
}
