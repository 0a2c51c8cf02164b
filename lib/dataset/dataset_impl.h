/* dataset_impl: what a dataset format module provides behind dataset.h.
 * Only the dataset_*.c files include this; everyone else sees dataset.h. */
#ifndef DDP_DATASET_IMPL_H
#define DDP_DATASET_IMPL_H

#include "dataset/dataset.h"

struct dataset_ops {
    int (*read)(const dataset_t *ds, uint64_t index, void *dst, uint64_t cap, struct dataset_record *rec);
    /* Optional: dataset_read_batch() with every index already checked. NULL:
     * dataset.c loops over read. */
    int (*read_batch)(const dataset_t *ds, const uint64_t *indices, uint32_t count, void *dst, uint64_t stride,
                      struct dataset_record *recs);
    int (*length_of)(const dataset_t *ds, uint64_t index, uint64_t *length);
    /* dataset_check_record() with the index already checked. */
    int (*check)(const dataset_t *ds, uint64_t index, uint32_t classes);
    void (*close)(dataset_t *ds);
};

struct dataset {
    const struct dataset_ops *ops;
    struct dataset_info info;
    char name[256];
    void *impl; /* the format's own state */
};

/* Each format's opener; dataset_open() picks one from the spec. */
int dataset_synthetic_open(const struct dataset_options *opt, dataset_t **out);
int dataset_idx_open(const char *path, const struct dataset_options *opt, dataset_t **out);
int dataset_jsonl_open(const char *path, const struct dataset_options *opt, dataset_t **out);
/* `list` is comma-separated paths, each opened with dataset_open(). */
int dataset_shards_open(const char *list, const struct dataset_options *opt, dataset_t **out);

#endif
