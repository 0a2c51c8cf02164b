/* calibrate: the cost model's parameters measured on this machine, and the
 * memory-bandwidth bound that `make bench` compares the simulator's ring
 * all-reduce against.
 *
 * A simulated link hop copies a piece from the sender's buffer into a
 * channel slot of 256 KiB, which stays in cache, and the receiver copies or
 * adds it out again: two copies per byte sent, about one memcpy's worth of
 * memory traffic (the slot side is cache). ch5_memory_bound() counts it all.
 * So beta = 1 / (memcpy bandwidth), and gamma = the extra time per byte of
 * reading the receiver's own value and adding (measured with the same sum
 * kernel the simulator runs).
 */
#include "chapter5.h"

#include "comm/comm_backend.h"
#include "sim/comm_sim.h"
#include "base/error.h"
#include "base/measure.h"
#include "sim/launch.h"
#include "base/verdict.h"

#include <string.h>
#include <unistd.h>

#define CAL_BYTES (64u << 20) /* well past any cache, the size make bench uses */
/* Best of 3 passes: the other engineers on the machine add noise, never speed. */
#define CAL_PASSES 3

/* The simulator's reduction, dst = src + dst in float32, as a copy kernel. */
static void cal_sum_kernel(void *user, void *dst, const void *src, size_t bytes)
{
    (void)user;
    comm_reduce_sum3(COMM_FLOAT32, dst, src, dst, bytes / 4);
}

/* Bytes per second of `threads` concurrent copies (or sums) of `bytes` each,
 * the best of CAL_PASSES; 0 when it could not be measured (err_msg() says why). */
static double cal_bandwidth(int threads, size_t bytes, int sum)
{
    struct measure_copy spec = {.bytes = bytes, .trials = CAL_PASSES, .threads = threads, .clock = MEASURE_WALL,
                                .kernel = sum ? cal_sum_kernel : NULL};
    struct measure_bandwidth bw;
    return measure_copy(&spec, &bw) == 0 ? bw.best_bps : 0;
}

static int cal_cores(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

void ch5_calibrate(struct ch5_opts *opt, FILE *out)
{
    if (opt->hw) { /* the model is that system's (costmodel_from_hw), nothing of this machine's */
        struct link_profile peer;
        hw_peer_link(opt->hw, &peer);
        if (launch_leader())
            fprintf(out, "# model: modelled, %s, %s: %.1f GB/s a way, %.1f us a hop; reductions at %s %.0f GB/s / 3 "
                    "(--hw=%s; lib/transfer/hw.c cites each figure). The simulator's times are modelled on it too.\n",
                    opt->hw->title, peer.title, peer.bandwidth_bps / 1e9, peer.latency_s * 1e6, opt->hw->memory,
                    opt->hw->memory_bps / 1e9, opt->hw->name);
        if (launch_leader() && opt->node_size > 0 && opt->node_size < opt->world) { /* several nodes */
            struct link_profile node;
            hw_node_link(opt->hw, &node);
            fprintf(out, "# model: across nodes, %s: %.1f GB/s a port, %.1f us a hop, %d port(s) a node shared by "
                    "hier's %d rings\n", node.title, node.bandwidth_bps / opt->hw->nics / 1e9, node.latency_s * 1e6,
                    opt->hw->nics, opt->node_size);
        }
        return;
    }
    double copy = cal_bandwidth(1, CAL_BYTES / 4, 0), sum = cal_bandwidth(1, CAL_BYTES / 4, 1);
    if (opt->model.beta_s_per_b == 0)
        opt->model.beta_s_per_b = copy > 0 ? 1.0 / copy : 1e-9;
    if (opt->model.gamma_s_per_b == 0)
        opt->model.gamma_s_per_b = sum > 0 && copy > 0 && 1.0 / sum > 1.0 / copy ? 1.0 / sum - 1.0 / copy : 0;
    if (opt->model.cores == 0)
        opt->model.cores = cal_cores();
    opt->model.segment_bytes = strcmp(opt->backend, "sim") == 0 ? SIM_SLOT_BYTES : 0;
    if (launch_leader())
        fprintf(out, "# calibration: memcpy %.2f GB/s, float sum %.2f GB/s (16 MiB, 1 thread), %d online cores\n",
                copy / 1e9, sum / 1e9, cal_cores());
}

/* Trials of the bound and of the all-reduce: the machine is shared, and
 * other people's work only ever slows either side down, so the best of a few
 * trials is the fairest figure for both. */
#define CAL_TRIALS 7

int ch5_memory_bound(struct ch5_opts *opt)
{
    int W = opt->world;
    double S = (double)opt->max_bytes;
    int threads = W < opt->model.cores ? W : opt->model.cores;
    opt->min_bytes = opt->max_bytes;
    opt->nalgos = 1;
    opt->algos[0] = COMM_ALGO_RING;
    opt->iters = 3;
    opt->warmup = 1;
    opt->quiet = 1;
    opt->wall_clock = 1; /* the simulator's own copies on this host, not the modelled GPUs */
    double copy1 = 0, copyN = 0, t = 1e30;
    for (int trial = 0; trial < CAL_TRIALS; trial++) {
        double c1 = cal_bandwidth(1, CAL_BYTES, 0), cN = cal_bandwidth(threads, CAL_BYTES, 0);
        if (c1 <= 0 || cN <= 0)
            return err_wrap(ERR_NOMEM, "memory bound: memcpy of %u MiB per thread", CAL_BYTES >> 20);
        copy1 = c1 > copy1 ? c1 : copy1;
        copyN = cN > copyN ? cN : copyN;
        uint64_t wrong;
        double ti;
        int rc = ch5_sweep(opt, &wrong, &ti);
        if (rc < 0)
            return rc;
        if (wrong)
            return err_set(ERR_STATE, "the all-reduce gave %llu wrong elements", (unsigned long long)wrong);
        t = ti < t ? ti : t;
    }

    /* Memory traffic of the simulator's ring (sim/comm_sim_algos.c), all
     * ranks together. Each rank sends W-1 chunks in the reduce-scatter and
     * W-1 in the all-gather, and every chunk is sent W-1 times in each phase:
     * (W-1) S bytes per phase. A byte sent is copied twice: sim_send()
     * memcpys it from a buffer into a channel slot, sim_recv() takes it out.
     *   reduce-scatter, per byte: read the source buffer, write the slot;
     *     read the slot and the receiver's own input, write the sum:  5 accesses
     *   all-gather, per byte: read the buffer, write the slot; read the
     *     slot, write the result:                                     4 accesses
     * 9(W-1) S bytes loaded or stored, 4(W-1) S of them in the slots: 256
     * KiB reused at once, so cache, not memory. What is left, 5(W-1) S, is
     * the buffer traffic the bound prices at memcpy speed (a memcpy of B
     * bytes moves 2B: B read, B written). Some of it may still come from
     * cache: the chunk a rank forwards at step s+1 is the one it wrote at
     * step s, one 256 KiB piece earlier, so on a machine whose caches hold
     * a piece of every rank's buffers the ring can beat this "bound" (ratio
     * below 1). The floor no cache can lower is each rank reading its input
     * once and writing its result once: 2 W S. */
    double traffic = 5.0 * (W - 1) * S, slots = 4.0 * (W - 1) * S, floor_traffic = 2.0 * W * S;
    double bound = traffic / (2.0 * copyN), floor_s = floor_traffic / (2.0 * copyN);
    printf("memory bound: ring all-reduce of %.0f MiB float32 on %d ranks: 5(W-1)S = %.0f MiB of buffer traffic "
           "(plus %.0f MiB through the cached 256 KiB slots, not counted); floor 2WS = %.0f MiB\n",
           S / (1 << 20), W, traffic / (1 << 20), slots / (1 << 20), floor_traffic / (1 << 20));
    printf("memory bound: memcpy %.2f GB/s on 1 thread, %.2f GB/s on %d threads (the ranks share %d cores); "
           "best of %d trials each\n",
           copy1 / 1e9, copyN / 1e9, threads, opt->model.cores, CAL_TRIALS);
    printf("memory bound: %.1f ms at memcpy speed (floor %.1f ms); measured %.1f ms (out of place, mean of %d "
           "iterations)%s\n", bound * 1e3, floor_s * 1e3, t * 1e3, opt->iters,
           t < bound ? ": below the bound, so caches served part of the traffic" : "");
    char what[128];
    snprintf(what, sizeof what, "sim ring all-reduce, %.0f MiB float32, %d ranks", S / (1 << 20), W);
    struct verdict v = {.what = what, .figure = t * 1e3, .unit = "ms",
                        .peer = "memcpy time of its buffer traffic, same run", .peer_figure = bound * 1e3,
                        .peer_unit = "ms", .ratio = t / bound, .op = VERDICT_AT_MOST, .target = 2};
    int rc = verdict_print(stdout, &v);
    return rc < 0 ? rc : 0;
}
