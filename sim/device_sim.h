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
 *   compute engine  one more thread: a kernel takes its modelled seconds plus
 *                   however long its real work (device_kernel.fn) ran;
 *   pageable copies staged by the calling thread through a bounce buffer of
 *                   two 1 MiB chunks, as the CUDA driver does: a host memcpy
 *                   into one chunk while the engine moves the other. They
 *                   return when the last chunk has arrived;
 *   pinned memory   mmap + mlock: really page-locked, so its cost is this
 *                   machine's (when the OS refuses the lock, RLIMIT_MEMLOCK,
 *                   the memory is still treated as pinned, and the stats
 *                   count the refusal).
 *
 * Two clocks. Device time (what events and device_event_elapsed report) is
 * the model: an operation starts at the latest of its issue (the host's wall
 * time), its engine becoming free and its stream's previous operation
 * ending, and ends its modelled duration later, exactly. The engines then
 * pace themselves to the wall clock: an operation completes for the host
 * no earlier than its modelled end. When this machine cannot keep up (a
 * memcpy slower than the modelled link, a thread woken late), the real
 * completion comes later than the model says; device_stats' lag_s and
 * late_ops count by how much, and device time stays the model's.
 *
 * The use-before-ready detector is always on: sim/device_race.h checks every
 * copy and kernel against the accesses before it, sim/write_guard.h traps
 * host writes into pinned buffers an asynchronous copy is still reading.
 * The first hazard breaks the device; every later call returns it.
 *
 * Read device_sim.c from the engine loop (dsim_engine_main) outwards.
 */
#ifndef DDP_DEVICE_SIM_H
#define DDP_DEVICE_SIM_H

#include "transfer/device_backend.h"

#ifdef __cplusplus
extern "C" {
#endif

extern const struct device_backend_ops device_backend_sim;

/* The staging chunk of pageable copies (two of them make the bounce
 * buffer). Ours: the CUDA driver does not document its size. */
#define DEVICE_SIM_BOUNCE_BYTES (1u << 20)

#ifdef __cplusplus
}
#endif

#endif
