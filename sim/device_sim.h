/* device_sim: the simulated device, backend "sim" of lib/transfer/device.h.
 *
 * Where it sits: behind the device interface, for every machine without a
 * GPU. What it models, and how:
 *
 *   device memory   host memory (mmap), so a CPU kernel can read a batch;
 *   copy engines    one thread per direction (H2D, D2H), each a FIFO: a copy
 *                   starts when the engine is free and the copy's stream has
 *                   reached it, takes α + S/B of the link (transfer/link.h),
 *                   and really moves the bytes (memcpy);
 *   compute engine  one more thread: a kernel takes its declared seconds
 *                   (device_kernel.fn's real run time is not counted); a
 *                   device operation (device_ops.h) takes what the modelled
 *                   GPU's profile says (device_config's gemm_flops and
 *                   gpu_memory_bps: max(2mnk / flops, bytes / bandwidth) for
 *                   a matrix product, bytes / bandwidth otherwise) plus a
 *                   launch;
 *   pageable copies staged by the calling thread through a bounce buffer of
 *                   two 1 MiB chunks, as the CUDA driver does: a host memcpy
 *                   into one chunk (modelled at DEVICE_SIM_HOST_MEMCPY_BPS on
 *                   the host's clock) while the engine moves the other. They
 *                   return when the last chunk has arrived;
 *   pinned memory   mmap + mlock: really page-locked, so its cost is this
 *                   machine's (when the OS refuses the lock, RLIMIT_MEMLOCK,
 *                   the memory is still treated as pinned, and the stats
 *                   count the refusal).
 *
 * Virtual time (DESIGN.md). Device time (what events and
 * device_event_elapsed report) is the model, and so is the host's: an
 * operation starts at the latest of its issue (the issuing thread's
 * modelled clock, base/vclock.h), its engine becoming free, its stream's
 * previous operation ending and the events its stream waits for, and ends
 * its modelled duration later, exactly, decided when it is issued. The
 * engines run the real work as fast as they can, never paced to a clock. A
 * host call that waits (a synchronize, a pageable copy, a query that answers
 * 1) waits for the real work and moves the host's clock to the modelled end;
 * a query answers 1 only when the modelled end is not after the host's time.
 * Nothing a program reads from the device depends on this machine's speed
 * or load (device_stats' engine_cpu_s and gemm_s stay measured, and are for
 * benchmarks only).
 *
 * The use-before-ready detector is always on: sim/device_race.h checks every
 * copy and kernel against the accesses before it, and host writes into
 * pinned buffers an asynchronous copy may still be reading are caught, by a
 * trap (sim/write_guard.h) or by the buffer's bytes (sim/source_hash.h), as
 * device_config's write_check says: the watch lasts from the copy's issue
 * until the host learns it is done (a synchronize, or a query that answers
 * 1), so a write before then is caught on any machine, however fast the
 * engine really was.
 * The first hazard breaks the device; every later call returns it.
 *
 * Read device_sim.c from dsim_schedule and the engine loop
 * (dsim_engine_main) outwards.
 */
#ifndef DDP_DEVICE_SIM_H
#define DDP_DEVICE_SIM_H

#include "base/vclock.h"
#include "transfer/device_backend.h"

#ifdef __cplusplus
extern "C" {
#endif

extern const struct device_backend_ops device_backend_sim;

/* The staging chunk of pageable copies (two of them make the bounce
 * buffer). Ours: the CUDA driver does not document its size. */
#define DEVICE_SIM_BOUNCE_BYTES (1u << 20)

/* The host's memcpy into and out of the bounce buffer, as modelled
 * (base/vclock.h: 10 GB/s, one server core's copy rate). */
#define DEVICE_SIM_HOST_MEMCPY_BPS VCLOCK_HOST_MEMCPY_BPS

#ifdef __cplusplus
}
#endif

#endif
