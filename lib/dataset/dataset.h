/* dataset: records by index, without loading the file into memory (chapter 1).
 *
 * Where it sits: the first stage of the data path. The sampler decides which
 * indices a rank sees; the loader's workers call dataset_read() to copy each
 * record straight into a batch slot. Every format is behind this one interface:
 *
 *   IDX       MNIST / Fashion-MNIST images (+ labels), plain or gzipped  (dataset_idx.c)
 *   JSONL     one record per line, sidecar offset index, mmapped         (dataset_jsonl.c)
 *   shards    a list of files addressed by one global index              (dataset_shards.c)
 *   synthetic deterministic, seeded, any size: tests and fallback        (dataset_synthetic.c)
 *
 * Reads cost O(1) memory per record and are safe from many threads at once on
 * one open dataset. Read dataset_open() first.
 */
#ifndef DDP_DATASET_H
#define DDP_DATASET_H

#include <stdint.h>

typedef struct dataset dataset_t;

enum dataset_kind { DATASET_SYNTHETIC, DATASET_IDX, DATASET_JSONL, DATASET_SHARDS };

struct dataset_options {
    /* synthetic: how many records, how big, and the seed of their content.
     * With synthetic_min_bytes < synthetic_bytes, record i is between the two
     * (a variable-length dataset for token-budget batching); else all are
     * synthetic_bytes long. Labels are in [0, 10). */
    uint64_t synthetic_records;
    uint64_t synthetic_bytes;
    uint64_t synthetic_min_bytes;
    uint64_t seed;
    /* JSONL: the integer field that gives a record's length ("num_tokens");
     * NULL: the length is the line's byte count. Other formats have no fields:
     * dataset_open() refuses one (ERR_ARG) rather than ignore it. */
    const char *length_field;
};

/* Fills the defaults: 60000 synthetic records of 784 bytes (Fashion-MNIST's
 * training-set shape), seed 0, byte lengths. */
void dataset_options_default(struct dataset_options *opt);

struct dataset_info {
    enum dataset_kind kind;
    uint64_t length;           /* number of records */
    uint64_t record_bytes;     /* bytes of every record when fixed-size, else 0 */
    uint64_t max_record_bytes; /* an upper bound on any record's size: size read buffers with it */
    int has_labels;            /* records carry a class label */
    uint32_t rows, cols;       /* image shape for IDX (0 otherwise) */
};

struct dataset_record {
    uint64_t bytes;  /* bytes written to dst (the record's size) */
    uint64_t length; /* length for batching: the length field, or bytes */
    int64_t label;   /* class label, or -1 */
};

/* Opens `spec`: "synthetic", a path to an IDX images file (labels are found
 * beside it), a .jsonl file, or a shard list "a.jsonl,b.jsonl". Returns 0 and
 * sets *out, or a negative ERR_* with err_msg() naming the file and the byte
 * offset or record at fault. `opt` may be NULL for the defaults. */
int dataset_open(const char *spec, const struct dataset_options *opt, dataset_t **out);

/* The dataset's shape. Never fails. */
const struct dataset_info *dataset_info(const dataset_t *ds);

/* A short description for messages and summaries ("idx:train-images-idx3-ubyte.gz"). */
const char *dataset_name(const dataset_t *ds);

/* Copies record `index` into dst (capacity `cap` bytes) and describes it in
 * *rec. ERR_RANGE for an index past the end, ERR_RANGE when cap is too small,
 * ERR_FORMAT for a malformed record, each naming the index. Thread-safe. */
int dataset_read(const dataset_t *ds, uint64_t index, void *dst, uint64_t cap, struct dataset_record *rec);

/* Copies the `count` records indices[0..count) into rows `stride` bytes
 * apart starting at dst (count x stride bytes; a row holds at most `stride`
 * bytes, and the bytes of a row past its record are left as they were) and
 * describes record i in recs[i]. The same result as dataset_read() on each
 * index in turn, but a format may read the batch in one tight loop: IDX does,
 * and reads random records 1.3-1.4x faster so (chapter 1's README,
 * "Measured"). This is how the loader's default collate reads a batch.
 *
 * Every index is checked before anything is copied: ERR_RANGE naming the
 * first index past the end and its position in the batch, with dst and recs
 * untouched. Any other failure (ERR_RANGE for a record longer than `stride`,
 * ERR_FORMAT) names the index and its position; the rows before that
 * position are written, those after it are not, and the failing row is not
 * written for ERR_RANGE and holds unspecified bytes for ERR_FORMAT (a JSONL
 * record is checked against its index on the copy it was read into).
 * count 0 reads nothing and returns 0. Thread-safe. */
int dataset_read_batch(const dataset_t *ds, const uint64_t *indices, uint32_t count, void *dst, uint64_t stride,
                       struct dataset_record *recs);

/* The record's batching length without copying it (token-budget samplers ask
 * this for every index). 0 or ERR_RANGE / ERR_FORMAT. */
int dataset_length_of(const dataset_t *ds, uint64_t index, uint64_t *length);

/* Validates record `index` beyond what dataset_read() checks, the way
 * `chapter-1 --check` does: a JSONL record must be one JSON value in UTF-8
 * (RFC 8259, RFC 3629); a record's label, when records have labels, must be
 * below `classes` (0: any label). Shards check each record as their own
 * file would. 0, or ERR_FORMAT naming the file and the byte offset (and the
 * line, for JSONL) at fault, or a read's error. It parses: for validation and
 * tools, not for the training loop's reads. Thread-safe. */
int dataset_check_record(const dataset_t *ds, uint64_t index, uint32_t classes);

/* Unmaps and frees everything. NULL is allowed. */
void dataset_close(dataset_t *ds);

#endif
