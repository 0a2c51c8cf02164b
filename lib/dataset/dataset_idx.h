/* dataset_idx: the IDX format of MNIST / Fashion-MNIST, the part of it that
 * callers other than dataset_open() need (chapter 1).
 *
 * Where it sits: behind dataset.h. dataset_open("train-images-idx3-ubyte.gz")
 * lands in dataset_idx.c, which maps the file (or, for a gzipped file, a
 * decompressed cache of it) and serves records straight from the mapping. This
 * header adds two things the generic interface has no words for: where the
 * bytes really live (the files and caches behind an open dataset, for the
 * chapter's summary) and a writer, so tests and benchmarks can produce IDX
 * files from any fixed-size dataset.
 *
 * The format (LeCun et al., http://yann.lecun.com/exdb/mnist/, "THE IDX FILE
 * FORMAT"): bytes 0-1 are zero, byte 2 is the element type (0x08 unsigned
 * byte, 0x09 signed byte, 0x0B short, 0x0C int, 0x0D float, 0x0E double),
 * byte 3 the number of dimensions; then one big-endian uint32 per dimension;
 * then the elements, big-endian, last dimension fastest. A record is one slice
 * along dimension 0 (one 28x28 image of an idx3 file, one label of an idx1).
 */
#ifndef DDP_DATASET_IDX_H
#define DDP_DATASET_IDX_H

#include "dataset/dataset.h"

#include <stdint.h>

/* The files behind an open IDX dataset. Paths are as given (images) or as
 * found beside it (labels); the caches are the decompressed copies that are
 * actually mapped when a file is gzipped. */
struct dataset_idx_files {
    const char *images;       /* the path that was opened */
    const char *labels;       /* the labels file found beside it, or NULL */
    const char *images_cache; /* the decompressed copy mapped for a gzipped file, or NULL */
    const char *labels_cache;
    uint64_t images_bytes, labels_bytes;             /* sizes on disk of the two files */
    uint64_t images_cache_bytes, labels_cache_bytes; /* sizes of their caches (0 without) */
    int caches_built; /* how many caches this open had to (re)build by decompressing */
};

/* The files of `ds` if it is an IDX dataset, else NULL. Never fails. */
const struct dataset_idx_files *dataset_idx_files(const dataset_t *ds);

/* Writes every record of the fixed-size dataset `src` as an unsigned-byte IDX
 * file at `images_path` (idx3 of rows x cols when rows*cols equals the record
 * size, else idx2 of records x bytes), and its labels as an idx1 file at
 * `labels_path` (NULL: no labels file). Each file is written to a temporary
 * name and renamed into place, so a reader never sees half a file. Returns 0,
 * or ERR_ARG (variable-size records, labels outside 0..255, too many records
 * for IDX's 32-bit dimensions), ERR_IO naming the file, or the error of the
 * record that could not be read. */
int dataset_idx_write(const dataset_t *src, uint32_t rows, uint32_t cols, const char *images_path,
                      const char *labels_path);

#endif
