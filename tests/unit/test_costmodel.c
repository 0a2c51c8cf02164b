/* test_costmodel: the alpha-beta-gamma model of all-reduce time
 * (lib/comm/costmodel.h) on hand-computed cases: the textbook ring without a
 * topology, and the flat ring against hierarchical all-reduce on NODESxGPUS
 * with two link classes. It prints the 1x8, 2x8 and 8x8 predictions that
 * chapter 5's README quotes.
 *
 * The figures: 450 GB/s per direction inside a node, NVLink 4 on an H100 SXM
 * (NVIDIA H100 datasheet: 900 GB/s of NVLink bandwidth, both directions
 * together); 50 GB/s across nodes, one InfiniBand NDR port per GPU (400
 * Gb/s, NVIDIA ConnectX-7 datasheet). Bandwidth terms only (alpha = gamma =
 * 0), so each number is bytes over links and can be checked by hand.
 * Last, the link timeline (costmodel_allreduce_spans): which link each step
 * of ring and hier keeps busy, ending where costmodel_allreduce does. */
#include "check.h"
#include "base/error.h"
#include "comm/costmodel.h"
#include "comm/costmodel_hw.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#define MIB256 268435456.0
#define NVLINK_BPS 450e9 /* bytes per second, one direction */
#define NDR_BPS 50e9     /* 400 Gb/s */

/* `got` within 1e-12 of `want`, relatively. */
static void check_time(double got, double want, const char *what)
{
    CHECK_MSG(fabs(got - want) <= 1e-12 * fabs(want) + 1e-300, "%s: got %.12g s, want %.12g s", what, got, want);
}

/* The two link classes of the datasheets on nodes of `gpus`. */
static struct costmodel model_cluster(int gpus)
{
    return (struct costmodel){.beta_s_per_b = 1 / NVLINK_BPS, .beta_inter_s_per_b = 1 / NDR_BPS, .node_size = gpus};
}

TEST(without_a_topology_the_ring_is_the_textbook_one)
{
    struct costmodel m = {.alpha_s = 2e-6, .beta_s_per_b = 1e-9, .gamma_s_per_b = 5e-10};
    double n = 1 << 20;
    /* 2(W-1) alpha + 2(W-1)/W n beta + (W-1)/W n gamma, W = 4 */
    check_time(costmodel_allreduce(&m, COMM_ALGO_RING, 4, n), 6 * 2e-6 + 1.5 * n * 1e-9 + 0.75 * n * 5e-10, "ring");
    /* one node: hier is the ring */
    check_time(costmodel_allreduce(&m, COMM_ALGO_HIER, 4, n), costmodel_allreduce(&m, COMM_ALGO_RING, 4, n), "hier");
    /* inter-node figures given, but one node: nothing crosses */
    m.beta_inter_s_per_b = 1;
    m.alpha_inter_s = 1;
    check_time(costmodel_allreduce(&m, COMM_ALGO_RING, 4, n), 6 * 2e-6 + 1.5 * n * 1e-9 + 0.75 * n * 5e-10,
               "ring, inter link unused");
}

TEST(one_node_of_8_nvlink)
{
    struct costmodel m = model_cluster(8);
    /* 2 x 7 steps of n/8 bytes over NVLink */
    double want = 14 * (MIB256 / 8) / NVLINK_BPS;
    double ring = costmodel_allreduce(&m, COMM_ALGO_RING, 8, MIB256);
    double hier = costmodel_allreduce(&m, COMM_ALGO_HIER, 8, MIB256);
    check_time(ring, want, "1x8 ring");
    check_time(hier, want, "1x8 hier");
    printf("# 1x8, 256 MiB: ring %.3f ms, hier %.3f ms, ratio %.2f\n", ring * 1e3, hier * 1e3, ring / hier);
}

TEST(two_and_eight_nodes_of_8_hier_against_ring)
{
    const int nodes[] = {2, 8};
    for (int k = 0; k < 2; k++) {
        int N = nodes[k], G = 8, W = N * G;
        struct costmodel m = model_cluster(G);
        /* ring: 2(W-1) steps of n/W, each at the pace of the InfiniBand hop */
        double ring_want = 2.0 * (W - 1) * (MIB256 / W) / NDR_BPS;
        /* hier: 7 + 7 NVLink steps of n/8, and 2(N-1) InfiniBand steps of n/(8N) */
        double hier_want = 14 * (MIB256 / 8) / NVLINK_BPS + 2.0 * (N - 1) * (MIB256 / 8 / N) / NDR_BPS;
        double ring = costmodel_allreduce(&m, COMM_ALGO_RING, W, MIB256);
        double hier = costmodel_allreduce(&m, COMM_ALGO_HIER, W, MIB256);
        char what[32];
        snprintf(what, sizeof what, "%dx8 ring", N);
        check_time(ring, ring_want, what);
        snprintf(what, sizeof what, "%dx8 hier", N);
        check_time(hier, hier_want, what);
        CHECK(hier < ring);
        printf("# %dx8, 256 MiB: ring %.3f ms, hier %.3f ms, ratio %.2f\n", N, ring * 1e3, hier * 1e3, ring / hier);
    }
    /* the hand arithmetic, once in figures: 2x8 ring 1.875 n / 50 GB/s = 10.066 ms; hier 1.715 ms */
    struct costmodel m = model_cluster(8);
    CHECK(fabs(costmodel_allreduce(&m, COMM_ALGO_RING, 16, MIB256) - 10.0663296e-3) < 1e-9);
    CHECK(fabs(costmodel_allreduce(&m, COMM_ALGO_HIER, 16, MIB256) - 1.71500487e-3) < 1e-9);
}

TEST(latency_and_reduction_terms_on_2x2)
{
    /* alpha 1 inside, 10 across, bandwidth free (a tiny beta only selects the inter link) */
    struct costmodel m = {.alpha_s = 1, .alpha_inter_s = 10, .beta_inter_s_per_b = 1e-300, .node_size = 2};
    /* ring: 2(W-1) = 6 steps at the inter link's alpha; hier: 1 + 2 x 1 across + 1 */
    check_time(costmodel_allreduce(&m, COMM_ALGO_RING, 4, 1000), 60, "ring alpha");
    check_time(costmodel_allreduce(&m, COMM_ALGO_HIER, 4, 1000), 1 + 20 + 1, "hier alpha");
    /* gamma: the ring adds (W-1)/W n = 750 bytes; hier (G-1)/G n + (N-1)/N n/G = 500 + 250 */
    struct costmodel g = {.gamma_s_per_b = 1, .node_size = 2};
    check_time(costmodel_allreduce(&g, COMM_ALGO_RING, 4, 1000), 750, "ring gamma");
    check_time(costmodel_allreduce(&g, COMM_ALGO_HIER, 4, 1000), 750, "hier gamma");
}

TEST(one_gpu_per_node_hier_is_the_ring_over_the_network)
{
    struct costmodel m = model_cluster(1);
    double n = 1e6;
    check_time(costmodel_allreduce(&m, COMM_ALGO_HIER, 4, n), costmodel_allreduce(&m, COMM_ALGO_RING, 4, n), "4x1");
    check_time(costmodel_allreduce(&m, COMM_ALGO_RING, 4, n), 6 * (n / 4) / NDR_BPS, "4x1 ring on InfiniBand");
}

/* One port a node for 8 ranks: hier's 8 rings across nodes share it, 8 times
 * a port's time per byte; the flat ring's one crossing flow has it whole. */
TEST(hier_rings_share_a_node_with_fewer_ports)
{
    struct costmodel m = model_cluster(8);
    m.inter_ports = 1;
    double hier_want = 14 * (MIB256 / 8) / NVLINK_BPS + 2.0 * (MIB256 / 16) * 8 / NDR_BPS;
    check_time(costmodel_allreduce(&m, COMM_ALGO_HIER, 16, MIB256), hier_want, "2x8 hier, one port");
    check_time(costmodel_allreduce(&m, COMM_ALGO_RING, 16, MIB256), 30 * (MIB256 / 16) / NDR_BPS, "2x8 ring, one port");
    m.inter_ports = 8; /* a port a GPU: no sharing */
    check_time(costmodel_allreduce(&m, COMM_ALGO_HIER, 16, MIB256),
               14 * (MIB256 / 8) / NVLINK_BPS + 2.0 * (MIB256 / 16) / NDR_BPS, "2x8 hier, eight ports");
}

/* --hw=h100-sxm prices the hops across nodes from its network: 8 NDR ports a node */
TEST(a_hardware_profile_sets_the_link_across_nodes)
{
    const struct hw_profile *hw;
    CHECK_OK(hw_profile_find("h100-sxm", &hw));
    struct costmodel m = {.node_size = 8};
    costmodel_from_hw(&m, hw);
    CHECK_EQ(m.node_size, 8);
    CHECK_EQ(m.inter_ports, 8);
    check_time(1 / m.beta_inter_s_per_b, NDR_BPS, "one NDR port");
    check_time(1 / m.beta_s_per_b, NVLINK_BPS, "NVLink 4 one way");
    CHECK(m.alpha_inter_s > m.alpha_s);
}

/* The other collectives (the simulator's modelled time for each), worked by
 * hand on 4 ranks, alpha 1 us, beta 1 ns/B, gamma 0.1 ns/B, n = 1 MB. */
TEST(broadcast_reduce_scatter_allgather_barrier_by_hand)
{
    struct costmodel m = {.alpha_s = 1e-6, .beta_s_per_b = 1e-9, .gamma_s_per_b = 1e-10};
    double n = 1e6;
    /* barrier: ceil(log2 4) = 2 alphas */
    CHECK(fabs(costmodel_collective(&m, COMM_BARRIER, COMM_ALGO_RING, 4, 0) - 2e-6) < 1e-15);
    /* all-gather: 3 alpha + 3/4 n beta */
    CHECK(fabs(costmodel_collective(&m, COMM_ALLGATHER, COMM_ALGO_RING, 4, n) - 7.53e-4) < 1e-12);
    /* reduce-scatter: 3 alpha + 3/4 n (beta + gamma) */
    CHECK(fabs(costmodel_collective(&m, COMM_REDUCE_SCATTER, COMM_ALGO_RING, 4, n) - 8.28e-4) < 1e-12);
    /* broadcast, long: scatter + all-gather, (2 + 3) alpha + 2 x 3/4 n beta beats the tree's 2 (alpha + n beta) */
    CHECK(fabs(costmodel_collective(&m, COMM_BROADCAST, COMM_ALGO_RING, 4, n) - 1.505e-3) < 1e-12);
    /* broadcast, short (1000 B): the binomial tree, 2 (alpha + n beta) = 4 us, beats 6.5 us */
    CHECK(fabs(costmodel_collective(&m, COMM_BROADCAST, COMM_ALGO_RING, 4, 1000) - 4e-6) < 1e-15);
    /* all-reduce is costmodel_allreduce; one rank costs nothing */
    CHECK(costmodel_collective(&m, COMM_ALLREDUCE, COMM_ALGO_RING, 4, n) == costmodel_allreduce(&m, COMM_ALGO_RING, 4, n));
    CHECK(costmodel_collective(&m, COMM_BROADCAST, COMM_ALGO_RING, 1, n) == 0);
    /* two nodes of 2: the flat algorithm goes at the network's pace */
    m.node_size = 2;
    m.alpha_inter_s = 1e-5;
    m.beta_inter_s_per_b = 1e-8;
    CHECK(fabs(costmodel_collective(&m, COMM_BARRIER, COMM_ALGO_RING, 4, 0) - 2e-5) < 1e-15);
    CHECK(fabs(costmodel_collective(&m, COMM_ALLGATHER, COMM_ALGO_RING, 4, n) - (3e-5 + 7.5e-3)) < 1e-12);
}

/* The spans of ring and hier on `topo` (node size) and `world`: in order of
 * start, each inside its step, ending at costmodel_allreduce's time; a span
 * count the caller checks. */
static int check_spans(const struct costmodel *m, enum comm_algo algo, int world, double bytes, const char *what)
{
    struct costmodel_span sp[512];
    int n = costmodel_allreduce_spans(m, algo, world, bytes, NULL, 0);
    CHECK_MSG(n > 0 && n <= 512, "%s: %d spans", what, n);
    if (n <= 0 || n > 512)
        return n;
    CHECK_EQ(costmodel_allreduce_spans(m, algo, world, bytes, sp, 512), n);
    double end = 0;
    for (int i = 0; i < n; i++) {
        CHECK_MSG(sp[i].end_s >= sp[i].start_s && sp[i].share > 0 && sp[i].share <= 1, "%s: span %d", what, i);
        CHECK_MSG(i == 0 || sp[i].start_s >= sp[i - 1].start_s, "%s: span %d starts before span %d", what, i, i - 1);
        CHECK_MSG(i == 0 || sp[i].step >= sp[i - 1].step, "%s: span %d's step goes back", what, i);
        end = fmax(end, sp[i].end_s);
    }
    check_time(end, costmodel_allreduce(m, algo, world, bytes), what);
    return n;
}

/* 2x8 on the datasheets' figures, alpha and gamma too: the flat ring's 30
 * steps keep one network port of 8 busy and NVLink a ninth of each step;
 * hier's 7 + 7 NVLink steps surround 2 steps on all 8 ports. */
TEST(link_timeline_of_ring_and_hier_on_2x8)
{
    struct costmodel m = model_cluster(8);
    m.alpha_s = 1e-6;
    m.alpha_inter_s = 5e-6;
    m.gamma_s_per_b = 1 / 1e12;
    m.inter_ports = 8;
    /* ring: 30 steps of a network and an NVLink span, 15 of them followed by an addition */
    CHECK_EQ(check_spans(&m, COMM_ALGO_RING, 16, MIB256, "2x8 ring"), 30 * 2 + 15);
    /* hier: 7 NVLink + 7 additions, 1 network + 1 addition, 1 network, 7 NVLink */
    CHECK_EQ(check_spans(&m, COMM_ALGO_HIER, 16, MIB256, "2x8 hier"), 7 * 2 + 2 + 1 + 7);
    struct costmodel_span sp[75];
    CHECK_EQ(costmodel_allreduce_spans(&m, COMM_ALGO_RING, 16, MIB256, sp, 75), 75);
    CHECK(sp[0].lane == COSTMODEL_LANE_ACROSS && sp[1].lane == COSTMODEL_LANE_INSIDE && sp[2].lane == COSTMODEL_LANE_REDUCE);
    check_time(sp[0].share, 1.0 / 8, "ring: one port of 8");
    check_time(sp[1].share, 7.0 / 8, "ring: 7 of a node's 8 hops on NVLink");
    check_time(sp[0].end_s - sp[0].start_s, 5e-6 + MIB256 / 16 / NDR_BPS, "a ring step on the network");
    check_time(sp[1].end_s - sp[1].start_s, 1e-6 + MIB256 / 16 / NVLINK_BPS, "its NVLink hops");
    CHECK(sp[74].lane == COSTMODEL_LANE_INSIDE && sp[74].step == 29 && strcmp(sp[74].phase, "all-gather") == 0);
    CHECK_EQ(costmodel_allreduce_spans(&m, COMM_ALGO_HIER, 16, MIB256, sp, 75), 24);
    CHECK(sp[13].lane == COSTMODEL_LANE_REDUCE && sp[14].lane == COSTMODEL_LANE_ACROSS);
    check_time(sp[14].share, 1, "hier: every port");
    CHECK(strcmp(sp[14].phase, "all-reduce across nodes") == 0 && strcmp(sp[23].phase, "all-gather in the node") == 0);
    /* a short array gets the first spans and the count of all */
    CHECK_EQ(costmodel_allreduce_spans(&m, COMM_ALGO_HIER, 16, MIB256, sp, 3), 24);
    /* hier with one port a node: the 8 rings share it (slower) and use all of it */
    m.inter_ports = 1;
    check_spans(&m, COMM_ALGO_HIER, 16, MIB256, "2x8 hier, one port");
}

TEST(link_timeline_on_one_node_and_of_nothing)
{
    struct costmodel m = model_cluster(8);
    m.gamma_s_per_b = 1 / 1e12;
    /* one node: NVLink only, 14 steps and 7 additions; hier is the same ring */
    CHECK_EQ(check_spans(&m, COMM_ALGO_RING, 8, MIB256, "1x8 ring"), 21);
    CHECK_EQ(check_spans(&m, COMM_ALGO_HIER, 8, MIB256, "1x8 hier"), 21);
    CHECK_EQ(check_spans(&m, COMM_ALGO_DEFAULT, 8, 1000, "1x8 default"), 21);
    /* a GPU a node: the network only */
    m.node_size = 1;
    CHECK_EQ(check_spans(&m, COMM_ALGO_HIER, 4, 1e6, "4x1 hier"), 6 + 3);
    CHECK_EQ(costmodel_allreduce_spans(&m, COMM_ALGO_RING, 1, 1e6, NULL, 0), 0);
    CHECK_EQ(costmodel_allreduce_spans(&m, COMM_ALGO_RING, 4, 0, NULL, 0), 0);
    /* tree and naive have no link timeline: refused, named */
    CHECK_EQ(costmodel_allreduce_spans(&m, COMM_ALGO_TREE, 4, 1e6, NULL, 0), ERR_ARG);
    CHECK(strstr(err_msg(), "tree") != NULL);
    CHECK_EQ(costmodel_allreduce_spans(&m, COMM_ALGO_NAIVE, 4, 1e6, NULL, 0), ERR_ARG);
}

/* Rank 0's host-link bytes of one all-reduce of n, into and out of its GPU. */
static void check_host(int world, int gpus, int nvlink, enum comm_algo algo, double want_in, double want_out,
                       const char *what)
{
    double in, out;
    costmodel_host_link_bytes(world, gpus, nvlink, algo, MIB256, &in, &out);
    check_time(in, want_in, what);
    check_time(out, want_out, what);
}

TEST(host_link_bytes_by_algorithm_and_topology)
{
    const double n = MIB256;
    /* GPUs that talk over PCIe: every byte rank 0 moves crosses its host link */
    check_host(8, 8, 0, COMM_ALGO_RING, 14 * n / 8, 14 * n / 8, "1x8 pcie ring");
    check_host(8, 8, 0, COMM_ALGO_HIER, 14 * n / 8, 14 * n / 8, "1x8 pcie hier");
    check_host(8, 8, 0, COMM_ALGO_TREE, 3 * n, 3 * n, "1x8 pcie tree: children 1, 2, 4");
    check_host(8, 8, 0, COMM_ALGO_NAIVE, 7 * n, 7 * n, "1x8 pcie naive");
    /* hier moves the ring's bytes over PCIe: 2(G-1)/G n + 2(N-1)/N n/G = 2(W-1)/W n */
    check_host(16, 8, 0, COMM_ALGO_HIER, 30 * n / 16, 30 * n / 16, "2x8 pcie hier");
    check_host(16, 8, 0, COMM_ALGO_RING, 30 * n / 16, 30 * n / 16, "2x8 pcie ring");
    /* NVLink inside a node: only the network's bytes cross PCIe */
    check_host(8, 8, 1, COMM_ALGO_RING, 0, 0, "1x8 nvlink ring");
    check_host(8, 8, 1, COMM_ALGO_HIER, 0, 0, "1x8 nvlink hier");
    check_host(16, 8, 1, COMM_ALGO_RING, 30 * n / 16, 0, "2x8 nvlink ring: in from rank 15, out to rank 1");
    check_host(16, 8, 1, COMM_ALGO_HIER, n / 8, n / 8, "2x8 nvlink hier: 2(N-1)/N n/G");
    check_host(64, 8, 1, COMM_ALGO_HIER, 2.0 * 7 / 8 * n / 8, 2.0 * 7 / 8 * n / 8, "8x8 nvlink hier");
    check_host(16, 8, 1, COMM_ALGO_TREE, n, n, "2x8 nvlink tree: child 8 only");
    check_host(16, 8, 1, COMM_ALGO_NAIVE, 8 * n, 8 * n, "2x8 nvlink naive: the 8 ranks of node 1");
    /* a GPU a node: everything crosses, NVLink or not */
    check_host(4, 1, 1, COMM_ALGO_RING, 1.5 * n, 1.5 * n, "4x1 ring");
    check_host(4, 1, 1, COMM_ALGO_HIER, 1.5 * n, 1.5 * n, "4x1 hier");
    check_host(1, 1, 0, COMM_ALGO_RING, 0, 0, "one rank");
}
