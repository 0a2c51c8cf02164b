/* dataset_shards: several files read as one dataset through one global index.
 *
 * Where it sits: behind dataset.h. A corpus too big for one file is split in N
 * files (a training corpus's `data_split_num` shards); the spec "a.jsonl,b.jsonl,c.jsonl"
 * opens each with dataset_open() and numbers their records one after the
 * other: shard 0's records first, then shard 1's. The sampler then sees one
 * index space, exactly as PyTorch's ConcatDataset presents its parts, and
 * finding a global index's shard is a binary search over the cumulative
 * counts (bisect_right over cumulative_sizes, as ConcatDataset does).
 *
 * The shards must agree on what a record is: all fixed-size with the same
 * size (and image shape) or all variable-size, and all with labels or all
 * without. A mix is refused at open, naming the shard that differs.
 */
#include "dataset/dataset_impl.h"

#include "base/error.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct shard {
    dataset_t *ds;
    uint64_t first; /* global index of its record 0 */
};

struct shards {
    size_t count;
    struct shard *shard;
};

/* The shard holding global index `index` (< the total): the last one whose
 * first record is at or before it. */
static size_t shards_find(const struct shards *s, uint64_t index)
{
    size_t lo = 0, hi = s->count; /* invariant: shard[lo].first <= index < shard[hi].first */
    while (hi - lo > 1) {
        size_t mid = lo + (hi - lo) / 2;
        if (s->shard[mid].first <= index)
            lo = mid;
        else
            hi = mid;
    }
    return lo;
}

static int shards_read(const dataset_t *ds, uint64_t index, void *dst, uint64_t cap, struct dataset_record *rec)
{
    const struct shards *s = ds->impl;
    size_t k = shards_find(s, index);
    uint64_t local = index - s->shard[k].first;
    int rc = dataset_read(s->shard[k].ds, local, dst, cap, rec);
    if (rc < 0)
        return err_wrap(rc, "%s: record %llu (shard %zu, local record %llu)", ds->name, (unsigned long long)index, k,
                        (unsigned long long)local);
    return 0;
}

static int shards_length_of(const dataset_t *ds, uint64_t index, uint64_t *length)
{
    const struct shards *s = ds->impl;
    size_t k = shards_find(s, index);
    uint64_t local = index - s->shard[k].first;
    int rc = dataset_length_of(s->shard[k].ds, local, length);
    if (rc < 0)
        return err_wrap(rc, "%s: record %llu (shard %zu, local record %llu)", ds->name, (unsigned long long)index, k,
                        (unsigned long long)local);
    return 0;
}

static void shards_close(dataset_t *ds)
{
    struct shards *s = ds->impl;
    if (s) {
        for (size_t k = 0; k < s->count; k++)
            dataset_close(s->shard[k].ds);
        free(s->shard);
        free(s);
    }
    free(ds);
}

static const struct dataset_ops shards_ops = {.read = shards_read, .length_of = shards_length_of, .close = shards_close};

/* "variable-size records" or "784-byte records (28x28)", for messages. */
static const char *shards_describe(const struct dataset_info *info, char *buf, size_t len)
{
    if (!info->record_bytes)
        snprintf(buf, len, "variable-size records");
    else if (info->rows)
        snprintf(buf, len, "%llu-byte records (%ux%u)", (unsigned long long)info->record_bytes, info->rows, info->cols);
    else
        snprintf(buf, len, "%llu-byte records", (unsigned long long)info->record_bytes);
    return buf;
}

/* Refuses shard k when its records differ in kind from shard 0's. */
static int shards_check_agree(const struct shards *s, size_t k)
{
    const struct dataset_info *a = dataset_info(s->shard[0].ds), *b = dataset_info(s->shard[k].ds);
    const char *na = dataset_name(s->shard[0].ds), *nb = dataset_name(s->shard[k].ds);
    char da[64], db[64];
    if (a->record_bytes != b->record_bytes || a->rows != b->rows || a->cols != b->cols)
        return err_set(ERR_FORMAT,
                       "shards disagree on the record size: shard 0 (%s) has %s, shard %zu (%s) has %s; all shards "
                       "must have the same fixed size, or all be variable",
                       na, shards_describe(a, da, sizeof da), k, nb, shards_describe(b, db, sizeof db));
    if (a->has_labels != b->has_labels)
        return err_set(ERR_FORMAT, "shards disagree on labels: shard 0 (%s) %s labels, shard %zu (%s) %s; all shards "
                       "must have labels or none", na, a->has_labels ? "has" : "has no", k, nb,
                       b->has_labels ? "has" : "has none");
    return 0;
}

int dataset_shards_open(const char *list, const struct dataset_options *opt, dataset_t **out)
{
    *out = NULL;
    dataset_t *ds = calloc(1, sizeof *ds);
    struct shards *s = calloc(1, sizeof *s);
    size_t n = 1;
    for (const char *p = list; *p; p++)
        n += *p == ',';
    if (s)
        s->shard = calloc(n, sizeof *s->shard);
    if (!ds || !s || !s->shard) {
        free(ds);
        if (s)
            free(s->shard);
        free(s);
        return err_set(ERR_NOMEM, "shards: out of memory for %zu shards", n);
    }
    ds->ops = &shards_ops;
    ds->impl = s;
    if (snprintf(ds->name, sizeof ds->name, "shards:%s", list) >= (int)sizeof ds->name)
        strcpy(ds->name + sizeof ds->name - 4, "...");

    int rc = 0;
    uint64_t total = 0, max_bytes = 0;
    const char *p = list;
    for (size_t k = 0; k < n && rc == 0; k++) {
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        char path[4096];
        if (len == 0)
            rc = err_set(ERR_ARG, "shards: shard %zu of \"%s\" has an empty name", k, list);
        else if (len >= sizeof path)
            rc = err_set(ERR_ARG, "shards: shard %zu's name is too long", k);
        if (rc < 0)
            break;
        memcpy(path, p, len);
        path[len] = '\0';
        rc = dataset_open(path, opt, &s->shard[k].ds);
        if (rc < 0) {
            rc = err_wrap(rc, "shard %zu", k);
            break;
        }
        s->count = k + 1;
        s->shard[k].first = total;
        const struct dataset_info *info = dataset_info(s->shard[k].ds);
        total += info->length;
        if (info->max_record_bytes > max_bytes)
            max_bytes = info->max_record_bytes;
        rc = shards_check_agree(s, k);
        p += len + 1;
    }
    if (rc < 0) {
        shards_close(ds);
        return rc;
    }
    const struct dataset_info *first = dataset_info(s->shard[0].ds);
    ds->info = *first;
    ds->info.kind = DATASET_SHARDS;
    ds->info.length = total;
    ds->info.max_record_bytes = max_bytes;
    *out = ds;
    return 0;
}
