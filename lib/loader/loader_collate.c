/* loader_collate: the built-in collate functions of the loader (see
 * loader.h): how one batch's records become one block of rows in a ring slot.
 *
 * Where it sits: inside a loader worker, once per batch, between the dataset
 * read and the trainer. A collate sees only struct loader_job and reads its
 * samples with loader_read_sample() / loader_read_rows(), so these two are
 * also the pattern for a collate of your own (loader_options.collate).
 *
 *   loader_collate_stack  fixed-size records, row after row (the default)
 *   loader_collate_pad    variable-length records, each row padded with zeros
 *                         to the batch's longest
 */
#include "loader/loader.h"

#include "base/error.h"

#include <stdint.h>
#include <string.h>

int loader_collate_stack(void *user, struct loader_job *job)
{
    (void)user;
    uint64_t rb = dataset_info(job->ds)->record_bytes;
    struct loader_batch *b = job->out;
    if (rb == 0)
        return err_set(ERR_ARG, "batch %llu: the stacking collate needs fixed-size records (use loader_collate_pad)",
                       (unsigned long long)job->batch);
    if (rb * job->count > job->cap)
        return err_set(ERR_RANGE, "batch %llu: %u records of %llu bytes do not fit a slot of %llu bytes",
                       (unsigned long long)job->batch, job->count, (unsigned long long)rb,
                       (unsigned long long)job->cap);
    struct dataset_record *recs = job->recs;
    int rc = loader_read_rows(job, b->data, rb, recs);
    if (rc < 0)
        return rc;
    for (uint32_t i = 0; i < job->count; i++) {
        b->labels[i] = recs[i].label;
        b->lengths[i] = recs[i].bytes;
    }
    b->stride = rb;
    b->bytes = rb * job->count;
    return 0;
}

int loader_collate_pad(void *user, struct loader_job *job)
{
    (void)user;
    struct loader_batch *b = job->out;
    uint8_t *data = b->data;
    /* Pass 1: records packed end to end (we do not know the longest yet), one
     * read at a time, since no fixed stride describes packed rows. */
    uint64_t used = 0, longest = 0;
    for (uint32_t i = 0; i < job->count; i++) {
        struct dataset_record rec;
        int rc = loader_read_sample(job, i, data + used, job->cap - used, &rec);
        if (rc < 0)
            return err_wrap(rc, "batch %llu (slot of %llu bytes)", (unsigned long long)job->batch,
                            (unsigned long long)job->cap);
        b->labels[i] = rec.label;
        b->lengths[i] = rec.bytes;
        used += rec.bytes;
        if (rec.bytes > longest)
            longest = rec.bytes;
    }
    if (longest * job->count > job->cap)
        return err_set(ERR_RANGE, "batch %llu: %u records padded to %llu bytes need %llu bytes, the slot has %llu",
                       (unsigned long long)job->batch, job->count, (unsigned long long)longest,
                       (unsigned long long)(longest * job->count), (unsigned long long)job->cap);
    /* Pass 2: spread the rows to stride `longest`, last row first. Row i starts
     * packed at or before i × longest (every earlier row is at most `longest`),
     * so moving from the end never overwrites a row not yet moved. */
    for (uint32_t i = job->count; i-- > 0;) {
        used -= b->lengths[i];
        memmove(data + i * longest, data + used, b->lengths[i]);
        memset(data + i * longest + b->lengths[i], 0, longest - b->lengths[i]);
    }
    b->stride = longest;
    b->bytes = longest * job->count;
    return 0;
}
