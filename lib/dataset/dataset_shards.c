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
 * without. A mix is refused at open, naming the shard that differs, and so
 * is a file listed twice. Every shard is opened with dataset_open() and
 * checked with dataset_check_record() as a file of its own would be: a shard
 * list never accepts what its files alone would refuse.
 */
#include "dataset/dataset_impl.h"

#include "base/error.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

struct shard {
    dataset_t *ds;
    uint64_t first; /* global index of its record 0 */
    dev_t dev;      /* the file it was opened from (both 0 for "synthetic") */
    ino_t ino;
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

/* An error of shard k's own dataset, said of the global index too. */
static int shards_wrap(const dataset_t *ds, int rc, uint64_t index, size_t k, uint64_t local)
{
    return err_wrap(rc, "%s: record %llu (shard %zu, local record %llu)", ds->name, (unsigned long long)index, k,
                    (unsigned long long)local);
}

static int shards_read(const dataset_t *ds, uint64_t index, void *dst, uint64_t cap, struct dataset_record *rec)
{
    const struct shards *s = ds->impl;
    size_t k = shards_find(s, index);
    uint64_t local = index - s->shard[k].first;
    int rc = dataset_read(s->shard[k].ds, local, dst, cap, rec);
    return rc < 0 ? shards_wrap(ds, rc, index, k, local) : 0;
}

static int shards_length_of(const dataset_t *ds, uint64_t index, uint64_t *length)
{
    const struct shards *s = ds->impl;
    size_t k = shards_find(s, index);
    uint64_t local = index - s->shard[k].first;
    int rc = dataset_length_of(s->shard[k].ds, local, length);
    return rc < 0 ? shards_wrap(ds, rc, index, k, local) : 0;
}

/* A shard's records get exactly the checks they get in a file of their own. */
static int shards_check(const dataset_t *ds, uint64_t index, uint32_t classes)
{
    const struct shards *s = ds->impl;
    size_t k = shards_find(s, index);
    uint64_t local = index - s->shard[k].first;
    int rc = dataset_check_record(s->shard[k].ds, local, classes);
    return rc < 0 ? shards_wrap(ds, rc, index, k, local) : 0;
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

static const struct dataset_ops shards_ops = {
    .read = shards_read, .length_of = shards_length_of, .check = shards_check, .close = shards_close};

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

/* Refuses shard k when it is a file already listed: each of its records would
 * be read twice an epoch, which is almost always a mistake in the list (and
 * weighting a file is a sampler's job, not the shard list's). Files are told
 * apart by device and inode, so "a.jsonl" and "./a.jsonl" are the same. */
static int shards_check_distinct(struct shards *s, size_t k, const char *path)
{
    struct stat st;
    if (strcmp(path, "synthetic") == 0 || stat(path, &st) != 0)
        return 0;
    s->shard[k].dev = st.st_dev;
    s->shard[k].ino = st.st_ino;
    for (size_t i = 0; i < k; i++)
        if (s->shard[i].ino == st.st_ino && s->shard[i].dev == st.st_dev)
            return err_set(ERR_ARG, "shards: shard %zu (%s) is the same file as shard %zu (%s): its records would be "
                           "read twice every epoch; list each file once", k, path, i,
                           dataset_name(s->shard[i].ds));
    return 0;
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
        if (rc == 0)
            rc = shards_check_distinct(s, k, path);
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
