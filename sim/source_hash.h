/* source_hash: the bytes check of an in-flight copy's pinned source
 * (device_config's DEVICE_WRITE_CHECK_BYTES).
 *
 * Where it sits: under the simulated device (sim/device_sim.c), beside the
 * write trap (sim/write_guard.h), which it replaces when a program asks for
 * it. When an asynchronous copy out of pinned memory is issued, the device
 * takes one word per 4 KiB block of its source; when the host learns the copy
 * ended, it takes them again: a block whose word changed was written while
 * the copy could still be reading it (a loader slot handed back too early).
 * The words are the replica check's hash (transfer/kernels.h,
 * kernel_hash_chunks: 4 KiB of floats a chunk, in the device's widest
 * vectors): 1.7 us for 100 KiB in cache on a 2-core AMD EPYC, taken twice a
 * copy, against two mprotect calls of some 12 us each for a trap.
 *
 * What it cannot say: who wrote, and which byte (the message names the block).
 * A write that left the bytes as they were goes unseen (the copy reads the
 * same bytes either way); so does one made while the copy was being issued.
 */
#ifndef DDP_SOURCE_HASH_H
#define DDP_SOURCE_HASH_H

#include <stdint.h>

#define SOURCE_HASH_BLOCK 4096u /* bytes a word covers */

/* How many words a source of `bytes` bytes takes: ceil(bytes / 4 KiB). */
uint64_t source_hash_blocks(uint64_t bytes);

/* words[0 .. source_hash_blocks(bytes)): the hash of each block of
 * src[0..bytes). Never fails; any alignment. */
void source_hash_take(const void *src, uint64_t bytes, uint64_t *words);

/* The first block whose hash is no longer words[block], or -1 when none. */
int64_t source_hash_first_change(const void *src, uint64_t bytes, const uint64_t *words);

#endif
