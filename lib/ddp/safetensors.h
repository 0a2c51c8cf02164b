/* safetensors: reads and writes the safetensors format, in which parameters
 * and checkpoints are stored so that PyTorch (and anything else that reads
 * the format) loads them in a few lines.
 *
 * Where it sits: under lib/ddp/checkpoint.h (training state) and the
 * chapter's --init / --save files. The format (huggingface/safetensors,
 * README "Format"):
 *
 *     8 bytes     N, the header's size, unsigned little-endian
 *     N bytes     a JSON object: for each tensor, "name": {"dtype": "F32",
 *                 "shape": [256, 784], "data_offsets": [begin, end]}, and an
 *                 optional "__metadata__": {string: string}; padded with spaces
 *     the rest    the tensors' bytes, little-endian, row-major; offsets count
 *                 from the start of this section
 *
 * The reader treats every file as hostile. It reads the whole file into
 * memory (a snapshot: a file changed or truncated under it cannot fault the
 * process, as a mapping could) and checks, before anything is used: that N
 * fits in the file and in the reference implementation's 100 MiB limit, that
 * the header is one JSON object (jansson: valid UTF-8, no duplicate keys),
 * that each entry has a known dtype, a shape of non-negative integers whose
 * byte size does not overflow, and offsets inside the data section whose
 * length matches dtype and shape, and that the tensors tile the data section
 * exactly: no overlap, no gap, no trailing bytes (as the reference
 * implementation demands). Every error names the file and what is wrong in it.
 *
 * The writer builds the header with jansson, pads it so the data starts on
 * an 8-byte boundary, and writes through lib/base/fsutil: a temporary file
 * renamed into place, so a reader never sees half a file.
 *
 * Read safetensors_open() and safetensors_read(), then safetensors_write().
 */
#ifndef DDP_SAFETENSORS_H
#define DDP_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#define SAFETENSORS_MAX_HEADER (100u << 20) /* the reference implementation's limit */
#define SAFETENSORS_MAX_DIMS 8
#define SAFETENSORS_MAX_NAME 255

/* The format's element types (the reference implementation's Dtype names). */
enum safetensors_dtype {
    SAFETENSORS_BOOL,
    SAFETENSORS_U8,
    SAFETENSORS_I8,
    SAFETENSORS_I16,
    SAFETENSORS_U16,
    SAFETENSORS_F16,
    SAFETENSORS_BF16,
    SAFETENSORS_I32,
    SAFETENSORS_U32,
    SAFETENSORS_F32,
    SAFETENSORS_F64,
    SAFETENSORS_I64,
    SAFETENSORS_U64,
    SAFETENSORS_DTYPE_COUNT
};

const char *safetensors_dtype_name(enum safetensors_dtype t); /* "F32" */
size_t safetensors_dtype_size(enum safetensors_dtype t);      /* bytes per element */

/* ---- writing ---------------------------------------------------------------- */

struct safetensors_entry {
    const char *name;             /* unique, 1..255 bytes, not "__metadata__" */
    enum safetensors_dtype dtype;
    int ndim;                     /* 0 (a scalar) .. SAFETENSORS_MAX_DIMS */
    int64_t shape[SAFETENSORS_MAX_DIMS];
    const void *data;             /* numel x dtype size bytes */
};

struct safetensors_meta {
    const char *key, *value;
};

/* Writes the tensors, in the order given, and the metadata to `path`,
 * atomically (fsutil_tmp_open / fsutil_tmp_finish with `fsync_flags`, e.g.
 * FSUTIL_DURABLE). 0, or ERR_ARG (a bad entry, named), ERR_NOMEM, ERR_IO
 * naming the file; on failure nothing is left behind and an existing `path`
 * is untouched. */
int safetensors_write(const char *path, const struct safetensors_entry *entries, size_t count,
                      const struct safetensors_meta *meta, size_t nmeta, unsigned fsync_flags);

/* ---- reading ---------------------------------------------------------------- */

struct safetensors_tensor {
    const char *name;
    enum safetensors_dtype dtype;
    int ndim;
    int64_t shape[SAFETENSORS_MAX_DIMS];
    size_t numel, bytes;
    const void *data; /* inside the file's bytes: may be unaligned, memcpy from it */
};

typedef struct safetensors safetensors_t;

/* Reads and checks `path` (see the top of this file). 0, or ERR_IO (cannot
 * read it), ERR_FORMAT (not a valid safetensors file: err_msg() names the
 * file and the problem), ERR_NOMEM. */
int safetensors_open(const char *path, safetensors_t **out);
void safetensors_close(safetensors_t *st);

const char *safetensors_path(const safetensors_t *st);
size_t safetensors_count(const safetensors_t *st);
/* Tensors in the order of their data (by offset). */
const struct safetensors_tensor *safetensors_at(const safetensors_t *st, size_t i);
/* The tensor called `name`, or NULL. */
const struct safetensors_tensor *safetensors_find(const safetensors_t *st, const char *name);
/* The __metadata__ value of `key`, or NULL. */
const char *safetensors_meta(const safetensors_t *st, const char *key);
/* How many __metadata__ entries there are, and the key of the i-th, in the
 * file's order (for checks that must see every key, not only known ones). */
size_t safetensors_meta_count(const safetensors_t *st);
const char *safetensors_meta_key(const safetensors_t *st, size_t i);

/* Copies tensor `name` into dst after checking that it exists, has `dtype`
 * and exactly the shape shape[0..ndim). 0, or ERR_FORMAT naming the file, the
 * tensor and both shapes or dtypes ("model.safetensors: fc1.weight has shape
 * [128, 784], expected [256, 784]"; "... has no tensor fc1.weight"). */
int safetensors_read(const safetensors_t *st, const char *name, enum safetensors_dtype dtype, int ndim,
                     const int64_t *shape, void *dst);

/* Copies tensor `name` into dst as float32, converting the other float types
 * as torch's tensor.to(torch.float32) (and so load_state_dict's copy_) does:
 * F16 and BF16 exactly (a signaling NaN comes out quiet), F64 rounded to the
 * nearest float32, ties to even, past float32's range to infinity. 0, or
 * ERR_FORMAT naming the tensor: missing, of another shape, or not a float. */
int safetensors_read_f32(const safetensors_t *st, const char *name, int ndim, const int64_t *shape, float *dst);

#endif
