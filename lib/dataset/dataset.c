/* dataset: the format-independent front of chapter 1 (see dataset.h): picks a
 * format from the spec, checks indices once for every format, dispatches. */
#include "dataset/dataset_impl.h"

#include "base/error.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void dataset_options_default(struct dataset_options *opt)
{
    memset(opt, 0, sizeof *opt);
    opt->synthetic_records = 60000; /* Fashion-MNIST's training set: 60000 images of 28x28 */
    opt->synthetic_bytes = 784;
    opt->synthetic_min_bytes = 784;
}

int dataset_open(const char *spec, const struct dataset_options *opt, dataset_t **out)
{
    struct dataset_options defaults;
    if (!opt) {
        dataset_options_default(&defaults);
        opt = &defaults;
    }
    *out = NULL;
    if (!spec || !*spec)
        return err_set(ERR_ARG, "dataset: empty dataset name");
    if (opt->length_field && !*opt->length_field)
        return err_set(ERR_ARG, "%s: the length field's name is empty", spec);
    if (strchr(spec, ','))
        return dataset_shards_open(spec, opt, out);
    size_t len = strlen(spec);
    if ((len >= 6 && strcmp(spec + len - 6, ".jsonl") == 0) || (len >= 5 && strcmp(spec + len - 5, ".json") == 0))
        return dataset_jsonl_open(spec, opt, out);
    int synthetic = strcmp(spec, "synthetic") == 0;
    if (opt->length_field) /* a flag that would do nothing is refused, not ignored */
        return err_set(ERR_ARG, "%s: a length field (\"%s\") is a field of JSONL records; %s records have none: "
                       "their length is their size in bytes", spec, opt->length_field, synthetic ? "synthetic" : "IDX");
    return synthetic ? dataset_synthetic_open(opt, out) : dataset_idx_open(spec, opt, out);
}

const struct dataset_info *dataset_info(const dataset_t *ds) { return &ds->info; }

const char *dataset_name(const dataset_t *ds) { return ds->name; }

/* The one range check of every read. `position` is the index's place in a
 * batch, named in the message, or -1 outside a batch. */
static int dataset_check_index(const dataset_t *ds, uint64_t index, int64_t position)
{
    if (index < ds->info.length)
        return 0;
    char at[48] = "";
    if (position >= 0)
        snprintf(at, sizeof at, " at position %lld of the batch", (long long)position);
    return err_set(ERR_RANGE, "%s: record %llu%s is out of range (the dataset has %llu records)", ds->name,
                   (unsigned long long)index, at, (unsigned long long)ds->info.length);
}

int dataset_read(const dataset_t *ds, uint64_t index, void *dst, uint64_t cap, struct dataset_record *rec)
{
    int rc = dataset_check_index(ds, index, -1);
    return rc < 0 ? rc : ds->ops->read(ds, index, dst, cap, rec);
}

int dataset_read_batch(const dataset_t *ds, const uint64_t *indices, uint32_t count, void *dst, uint64_t stride,
                       struct dataset_record *recs)
{
    for (uint32_t i = 0; i < count; i++) {
        int rc = dataset_check_index(ds, indices[i], i);
        if (rc < 0)
            return rc;
    }
    if (ds->ops->read_batch)
        return ds->ops->read_batch(ds, indices, count, dst, stride, recs);
    uint8_t *row = dst;
    for (uint32_t i = 0; i < count; i++, row += stride) {
        int rc = ds->ops->read(ds, indices[i], row, stride, &recs[i]);
        if (rc < 0)
            return err_wrap(rc, "position %u of the batch", i);
    }
    return 0;
}

int dataset_length_of(const dataset_t *ds, uint64_t index, uint64_t *length)
{
    int rc = dataset_check_index(ds, index, -1);
    return rc < 0 ? rc : ds->ops->length_of(ds, index, length);
}

int dataset_check_record(const dataset_t *ds, uint64_t index, uint32_t classes)
{
    int rc = dataset_check_index(ds, index, -1);
    return rc < 0 || !ds->ops->check ? rc : ds->ops->check(ds, index, classes);
}

void dataset_close(dataset_t *ds)
{
    if (ds)
        ds->ops->close(ds);
}
