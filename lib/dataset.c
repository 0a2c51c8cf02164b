/* dataset: the format-independent front of chapter 1 (see dataset.h): picks a
 * format from the spec, checks indices once for every format, dispatches. */
#include "dataset_impl.h"

#include "error.h"

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
    if (strcmp(spec, "synthetic") == 0)
        return dataset_synthetic_open(opt, out);
    if (strchr(spec, ','))
        return dataset_shards_open(spec, opt, out);
    size_t len = strlen(spec);
    if ((len >= 6 && strcmp(spec + len - 6, ".jsonl") == 0) || (len >= 5 && strcmp(spec + len - 5, ".json") == 0))
        return dataset_jsonl_open(spec, opt, out);
    return dataset_idx_open(spec, opt, out);
}

const struct dataset_info *dataset_info(const dataset_t *ds) { return &ds->info; }

const char *dataset_name(const dataset_t *ds) { return ds->name; }

int dataset_read(const dataset_t *ds, uint64_t index, void *dst, uint64_t cap, struct dataset_record *rec)
{
    if (index >= ds->info.length)
        return err_set(ERR_RANGE, "%s: record %llu is out of range (the dataset has %llu records)", ds->name,
                       (unsigned long long)index, (unsigned long long)ds->info.length);
    return ds->ops->read(ds, index, dst, cap, rec);
}

int dataset_length_of(const dataset_t *ds, uint64_t index, uint64_t *length)
{
    if (index >= ds->info.length)
        return err_set(ERR_RANGE, "%s: record %llu is out of range (the dataset has %llu records)", ds->name,
                       (unsigned long long)index, (unsigned long long)ds->info.length);
    return ds->ops->length_of(ds, index, length);
}

void dataset_close(dataset_t *ds)
{
    if (ds)
        ds->ops->close(ds);
}
