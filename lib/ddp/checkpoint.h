/* checkpoint: the model's parameters, and the whole training state, as
 * safetensors files.
 *
 * Where it sits: beside the training loop of chapter 6. Two kinds of file:
 *
 * - A model file (--init, --save): the model's state_dict, as
 *   torch.nn.Module.state_dict() names it (fc1.weight, ..., bn1.running_mean,
 *   bn1.num_batches_tracked), float32 (num_batches_tracked int64), metadata
 *   {"format": "pt"}. PyTorch loads it with a dozen lines of Python
 *   (tests/crosscheck/ddp_torch.py has them) and load_state_dict().
 *
 * - A checkpoint (--checkpoint=DIR, --resume=DIR): DIR/checkpoint.safetensors
 *   holds the same tensors, the optimizer's state ("optimizer.fc1.weight.
 *   momentum_buffer", ...), and in __metadata__ everything an exact resume
 *   needs: the optimizer steps taken, the epoch, the batches of that epoch
 *   already consumed (trained on, not merely prefetched), the seed, the world
 *   size, the per-rank batch, the accumulation, the training records, shuffle
 *   and drop_last, the bucket limits and layout, the compression. Rank 0
 *   writes it; the other ranks hold the same bits (lib/ddp/replica.h).
 *
 * The checksum covers the whole header, not only the tensors: the metadata
 * "checksum" lists, for every other metadata field and every tensor, its name
 * and 16 hex digits of FNV-1a (lib/base/hash.h) over the field's key and
 * value, or over the tensor's name, dtype, shape and bytes. It cannot cover
 * itself, and needs not: a damaged checksum entry no longer matches its
 * field. Each field is checked on its own, so the one edited or damaged is
 * named ("metadata \"step\" (\"3\") does not match its checksum"). FNV-1a
 * catches damage and edits by hand, not an attacker who recomputes it; so
 * every field is then checked for what it can be: numbers are digits as the
 * writer prints them (no sign, space, leading zero or overflow) within their
 * range, optimizer_steps equals step, compress is a known name, no key is
 * unknown, and the position (epoch, batch, step) must be one this run reaches
 * (checkpoint_check_position).
 *
 * Writing is atomic and durable: a temporary file beside the final one,
 * fsync, rename over it, fsync of the directory (lib/base/fsutil.h,
 * FSUTIL_DURABLE). A process killed at any instant, mid-write included,
 * leaves the previous checkpoint complete and loadable (a temporary
 * "checkpoint.safetensors.tmp-XXXXXX" may remain beside it; it is never
 * read).
 *
 * Loading checks everything before it changes anything: a file that is not a
 * safetensors file, not a checkpoint of this program ("foreign", an earlier
 * format included), damaged (a field against its checksum), with a field out
 * of its form or range, or of another model or optimizer is refused with a
 * message that names the file, the field and what is wrong, and the model and
 * optimizer are left as they were. checkpoint_check_resume() then compares
 * the run shape: resuming with another world size, batch, seed, training set
 * size, shuffle, drop_last or bucket layout would not continue the same run,
 * and is refused with the reason; checkpoint_check_position() refuses a
 * position this run does not reach.
 *
 * Read checkpoint_save() and checkpoint_load().
 */
#ifndef DDP_CHECKPOINT_H
#define DDP_CHECKPOINT_H

#include "ddp/model.h"
#include "ddp/optim.h"
#include "ddp/safetensors.h"

#include <stddef.h>
#include <stdint.h>

#define CHECKPOINT_FILE "checkpoint.safetensors"
#define CHECKPOINT_FORMAT "ddp-datapath checkpoint 2" /* __metadata__ "format"; 1 had no checksum of its header */
#define CHECKPOINT_TEXT_MAX 4096

/* The run a checkpoint belongs to, and where in it the checkpoint was taken. */
struct checkpoint_state {
    uint64_t step;                 /* optimizer steps taken (the optimizer's own count is saved too) */
    uint64_t epoch;                /* the epoch in progress */
    uint64_t batch;                /* batches of that epoch consumed: training resumes at this index */
    uint64_t seed;                 /* sampler, initialisation, augmentation */
    int world;                     /* ranks */
    int batch_size;                /* per rank */
    int accumulate;                /* micro-batches per optimizer step (no_sync) */
    uint64_t records;              /* training records the sampler splits (--train-size, or all) */
    int shuffle;                   /* the sampler shuffles (0: --no-shuffle) */
    int drop_last;                 /* each rank's last short batch dropped (--drop-last) */
    uint64_t first_bucket_bytes;   /* the reducer's limits ... */
    uint64_t bucket_cap_bytes;
    char compress[8];              /* "none", "fp16", "bf16" */
    int same_bits;                 /* written by a --same-bits run (the metadata "same_bits": 1; absent: 0) */
    char buckets[CHECKPOINT_TEXT_MAX]; /* reducer_layout_describe() */
};

/* ---- model files --------------------------------------------------------------------- */

/* Writes m's state_dict to `path` (atomically; fsync_flags as fsutil's).
 * 0 or ERR_IO / ERR_NOMEM naming the file. */
int checkpoint_save_model(const char *path, const model_t *m, unsigned fsync_flags);

/* Loads a model file into m: every parameter must be there with its exact
 * shape; buffers are loaded when present; any other tensor makes it foreign,
 * except in a training checkpoint, whose parameters load this way too, once
 * every field has passed its checksum (its optimizer's states are passed
 * over: a new run from where it stood).
 *
 * What a PyTorch user has loads too, as load_state_dict would take it:
 * - nn.Sequential's names for this model's shape: modules Linear,
 *   [BatchNorm1d,] ReLU, ..., Linear, the first Linear module 0, or 1 after
 *   a leading nn.Flatten(), so "0.weight", "2.weight", "4.weight" are fc1,
 *   fc2, fc3 (with BatchNorm1d, "1.running_mean" is bn1's and "3.weight"
 *   fc2's); a file whose lowest module is past 1 is another model, refused
 *   naming that tensor;
 * - F16, BF16 and F64 floats, converted to float32 as torch's
 *   .to(torch.float32) converts them (safetensors_read_f32: F64 rounded to
 *   nearest, ties to even). num_batches_tracked stays int64.
 * `note` (note_len bytes, may be NULL) says what it took, for the run's
 * banner: "nn.Sequential names 0, 2, 4 read as fc1, fc2, fc3; F64 converted
 * to float32, rounding to nearest even", or "".
 *
 * On error m is unchanged. 0, or ERR_IO / ERR_FORMAT naming the file and the
 * tensor as the file names it ("init.safetensors: fc1.weight has shape
 * [128, 784], expected [256, 784]"; "init.safetensors: unexpected tensor
 * conv1.weight: not a parameter or buffer of the 784-256-128-10 MLP"). */
int checkpoint_load_model(const char *path, model_t *m, char *note, size_t note_len);

/* ---- training checkpoints ------------------------------------------------------------- */

/* Writes DIR/checkpoint.safetensors (creating DIR), durably and atomically.
 * 0, or ERR_IO naming the directory or file (not writable, disk full). */
int checkpoint_save(const char *dir, const model_t *m, const optim_t *o, const struct checkpoint_state *s);

/* Writes a checkpoint file from its tensors and metadata, adding the
 * "checksum" entry over each of them (see the top of this file): what
 * checkpoint_save() does once it has built them, and how a test writes a
 * checkpoint whose fields it chose. Keys and names take no spaces; "checksum"
 * is not the caller's; no tensor is named as a metadata key or "checksum"
 * (the checksum names each field once). 0, or ERR_ARG / ERR_NOMEM / ERR_IO as
 * safetensors_write. */
int checkpoint_write_file(const char *path, const struct safetensors_entry *entries, size_t count,
                          const struct safetensors_meta *meta, size_t nmeta, unsigned fsync_flags);

/* The checkpoint file of `path`: path itself if it is a file, else
 * path/checkpoint.safetensors. Returns buf. */
const char *checkpoint_path(const char *path, char *buf, size_t len);

/* Loads a checkpoint (a directory or the file) into m and o, and its state
 * into *s. Everything is checked first; on error m and o are unchanged. 0,
 * or ERR_IO (missing, unreadable), ERR_FORMAT (not safetensors, foreign,
 * damaged, another model or optimizer: err_msg() names the file and says
 * which). */
int checkpoint_load(const char *path, model_t *m, optim_t *o, struct checkpoint_state *s);

/* Reads only where a checkpoint is and what run it belongs to (its
 * metadata), so that a resume can compare the run's shape before anything
 * else (checkpoint_check_resume). 0, or ERR_IO / ERR_FORMAT as
 * checkpoint_load. */
int checkpoint_read_state(const char *path, struct checkpoint_state *s);

/* Compares a loaded checkpoint's run with this run's: per-rank batch,
 * accumulation, seed, training records, shuffle, drop_last, bucket limits
 * and compression must be equal (the layout itself is restored with
 * reducer_layout_restore), and so must the world size, except that a run of
 * the same global batch (batch x world) may continue on another: exactly
 * with same_bits on both sides (no buckets then), and otherwise with a
 * warning. 0; 1 with the warning in *warning (the bits will differ, and why);
 * or ERR_STATE saying what differs and why that breaks an exact resume.
 * `path` names the checkpoint in the messages. */
int checkpoint_check_resume(const char *path, const struct checkpoint_state *saved,
                            const struct checkpoint_state *now, char *warning, size_t warning_len);

/* How far this run goes, for checkpoint_check_position. */
struct checkpoint_span {
    uint64_t epochs;     /* --epochs */
    uint64_t batches;    /* per rank and epoch; 0: not known ahead (a custom sampler's) */
    uint64_t max_steps;  /* --steps; 0: no limit */
};

/* Checks that a checkpoint's position is one this run reaches: its epoch
 * below `epochs`, its batch within the epoch's and where a step ends (a
 * multiple of the accumulation, or the epoch's end), its step the one that
 * epoch and batch are at (epoch x steps per epoch + the epoch's steps so far)
 * and not past max_steps. (The run's shape must already be the saved one:
 * checkpoint_check_resume.) 0, or ERR_STATE naming the field and the range
 * this run allows. */
int checkpoint_check_position(const char *path, const struct checkpoint_state *saved,
                              const struct checkpoint_span *run);

#endif
