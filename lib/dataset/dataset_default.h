/* dataset_default: the dataset a program opens when its user names none.
 *
 * Where it sits: at the front of the first stage, for the chapter programs and
 * anything else that wants "real data if there is some": Fashion-MNIST's
 * training images where Debian's dataset-fashion-mnist package installed
 * them, else the synthetic dataset of the same shape (dataset_options_default:
 * 60000 records of 784 bytes, labels 0..9), so every program also runs on a
 * machine without it. Read dataset_open_default().
 */
#ifndef DDP_DATASET_DEFAULT_H
#define DDP_DATASET_DEFAULT_H

#include "dataset/dataset.h"

#include <stddef.h>

/* Where the dataset-fashion-mnist package puts the training images. */
#define DATASET_DEFAULT_PATH "/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz"

/* DATASET_DEFAULT_PATH when it is there to read, else NULL. */
const char *dataset_default_path(void);

/* Opens DATASET_DEFAULT_PATH with `opt` (NULL: defaults), or, when it is not
 * installed or does not open, the synthetic dataset `opt` describes. `why`
 * (why_len bytes; may be NULL) gets one sentence for the user: which of the
 * two, and why the synthetic one stands in (not installed, or the file's own
 * error). Returns 0 and *out, or the synthetic dataset's error. */
int dataset_open_default(const struct dataset_options *opt, dataset_t **out, char *why, size_t why_len);

#endif
