/* augment: reproducible per-sample augmentations for the loader (chapter 3).
 *
 * Where it sits: a loader_transform_fn, run by a loader worker on each record
 * right after dataset_read() copied it into the batch slot. Its randomness comes
 * only from the sample's seed, loader_sample_seed(base seed, epoch, index), so
 * sample i of epoch e is augmented the same way whichever worker loads it and
 * however many workers there are. PyTorch seeds each worker's generator
 * (base_seed + worker_id), so there the same sample's augmentation depends on
 * which worker happened to get its batch. Read loader.h first.
 */
#ifndef DDP_AUGMENT_H
#define DDP_AUGMENT_H

#include "loader/loader.h"

#include <stdint.h>

/* A random horizontal flip of rows × cols images of one byte per pixel
 * (torchvision's RandomHorizontalFlip(p)). */
struct augment_hflip {
    uint32_t rows, cols; /* 28 × 28 for Fashion-MNIST */
    double p;            /* probability of flipping; torchvision's default is 0.5 */
};

/* A loader_transform_fn; `user` is a struct augment_hflip. Flips the image
 * with probability p, decided by s->seed alone. ERR_FORMAT, naming the sample,
 * when the record is not rows × cols bytes. */
int augment_hflip(void *user, const struct loader_sample *s, void *data, uint64_t bytes);

/* Whether augment_hflip flips a sample of this seed with probability p (for
 * tests and for explaining a batch). */
int augment_hflip_decision(uint64_t seed, double p);

#endif
