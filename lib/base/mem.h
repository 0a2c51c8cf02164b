/* mem: what a size costs in memory, checked before it reaches malloc.
 *
 * Where it sits: under every place where a number from the command line or a
 * file header becomes an allocation: a batch of --batch-size indices, a
 * sampler's permutation of --size records, the loader's ring of padded
 * batches, a collective's buffers. Two things go wrong there. The product
 * count x size wraps around 64 bits (2305843009213693953 x 8 is 8), so
 * malloc succeeds with a tiny buffer and the writes run past it. Or the
 * product is honest but larger than the machine: with Linux's overcommit,
 * malloc may still succeed and the process is killed when it touches the
 * pages. mem_check_array() refuses both with a message that names the size.
 *
 * Read mem_check_array() first.
 */
#ifndef DDP_MEM_H
#define DDP_MEM_H

#include <stddef.h>
#include <stdint.h>

/* The share of physical memory one request may take: the rest is the
 * system's and the other processes'. */
#define MEM_USABLE_FRACTION 0.8

/* This machine's physical memory in bytes (sysconf), or 0 when unknown. */
uint64_t mem_physical_bytes(void);

/* count x size into *bytes, when that fits size_t and MEM_USABLE_FRACTION of
 * physical memory. Returns 0, or ERR_NOMEM with err_msg() = "<what>: COUNT x
 * SIZE bytes overflows 64 bits" or "<what>: needs 26.0 GiB, more than this
 * machine can hold (80% of its 23.4 GiB)". `what` names the thing and where
 * its size came from ("--batch-size=N: a batch of indices"). */
int mem_check_array(const char *what, uint64_t count, uint64_t size, size_t *bytes);

/* The same for a total already computed (several buffers, a ring of slots). */
int mem_check_fits(const char *what, uint64_t bytes);

#endif
