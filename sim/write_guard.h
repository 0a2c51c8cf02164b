/* write_guard: catches a host write into memory a copy is still reading.
 *
 * Where it sits: under the simulated device (sim/device_sim.c). While an
 * asynchronous copy reads a pinned host buffer, the device write-protects the
 * buffer's pages (mprotect PROT_READ): the copy engine can still read them,
 * but the first host write (a loader worker collating the next batch into a
 * slot handed back too early) traps. The SIGSEGV handler records where and
 * which thread, lifts the protection and lets the write go on, as a garbage
 * collector's write barrier does; the device reports the write as an error
 * naming the copy at its next call. No GPU tool can catch this: on a GPU the
 * DMA engine reads physical pages the CPU page tables know nothing about.
 *
 * What it cannot see: a write by the kernel on the program's behalf (read(2)
 * into the buffer fails with EFAULT instead of trapping), and writes to bytes
 * outside the copy that share a page with it (the guard is then dropped, not
 * reported). A write that traps just as its copy ends, the guard coming down,
 * goes on unreported. The handler chains to the one installed before it for
 * every fault that is not a guard's.
 *
 * Read write_guard_add() first.
 */
#ifndef DDP_WRITE_GUARD_H
#define DDP_WRITE_GUARD_H

#include <stdint.h>

/* What happened to a guard while it was up. */
struct write_guard_hit {
    int hit;            /* a write landed inside the guarded bytes */
    int dropped;        /* a write landed outside them on a shared page: guard lifted, nothing reported */
    uint64_t offset;    /* hit: the byte written, from the guarded start */
    int tid;            /* hit: the writing thread's id */
};

/* Write-protects the pages under [ptr, ptr + bytes) until write_guard_remove
 * (without an mprotect when they lie inside another armed guard's pages,
 * read-only already).
 * `flag` (may be NULL) is set to 1 by the handler on a hit, so the owner can
 * notice before the guard comes down. Returns the guard's id (>= 0), or -1
 * when it could not be put up (the table of WRITE_GUARD_MAX guards is full, or
 * mprotect refused): the copy then runs unguarded, never wrongly reported. */
#define WRITE_GUARD_MAX 1024
int write_guard_add(const void *ptr, uint64_t bytes, int *flag);

/* Lifts guard `id` and fills *out with what happened. */
void write_guard_remove(int id, struct write_guard_hit *out);
/* Lifts guards ids[0..n), n <= WRITE_GUARD_BATCH, filling out[i] for each:
 * as write_guard_remove on each, but pages they share, or that touch, come
 * down in one mprotect (each one a TLB flush on every core running us). */
#define WRITE_GUARD_BATCH 32
void write_guard_remove_all(const int *ids, int n, struct write_guard_hit *out);

/* Reads guard `id`'s state without lifting it. */
void write_guard_peek(int id, struct write_guard_hit *out);

#endif
