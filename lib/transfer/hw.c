/* hw: the hardware profiles' table and the links it implies (see hw.h).
 *
 * Every figure below is a modelled one: a vendor's peak or nominal figure,
 * NCCL's own latency model, or (the GEMMs' share of the peak) someone else's
 * published measurement, never a measurement of ours. Units as the
 * sources give them: GB/s and TB/s are 1e9 and 1e12 bytes per second, Gb/s
 * 1e9 bits per second, TFLOP/s 1e12 floating-point operations per second.
 *
 * GPUs (peak figures, theoretical; the H100 and A100 figures read in
 * reproductions of NVIDIA's datasheet tables, which agree with each other):
 * - H100 SXM5 80GB and H100 PCIe 80GB: NVIDIA H100 Tensor Core GPU datasheet
 *   (nvidia.com, 2022-2023), "H100 SXM" and "H100 PCIe" columns: FP32 67 and
 *   51 teraFLOPS; GPU memory bandwidth 3.35 TB/s (HBM3) and 2 TB/s (HBM2e);
 *   interconnect "NVLink: 900GB/s, PCIe Gen5: 128GB/s" (SXM) and "NVLink:
 *   600GB/s, PCIe Gen5: 128GB/s" (PCIe). Both NVLink figures are
 *   bidirectional, all links of the GPU together: 450 and 300 GB/s a way.
 * - A100 SXM4 80GB: NVIDIA A100 Tensor Core GPU datasheet (nvidia.com,
 *   r4), "A100 80GB SXM" column: FP32 19.5 TFLOPS, GPU memory bandwidth
 *   2,039 GB/s (HBM2e), "NVLink: 600GB/s, PCIe Gen4: 64GB/s".
 * - GeForce RTX 4090: NVIDIA's launch figures (September 2022; the Ada
 *   GPU Architecture whitepaper's RTX 4090 column): peak FP32 82.6 TFLOPS at
 *   the 2.52 GHz boost clock, 24 GB GDDR6X at 21 Gbps on 384 bits = 1,008
 *   GB/s; a PCIe Gen4 x16 card (no GB/s figure given, so pcie_bidir_bps is
 *   0); no NVLink connector. We read these figures in reproductions of
 *   NVIDIA's tables, not in the whitepaper itself.
 * - The datasheets' PCIe figures are both directions before line encoding:
 *   Gen5 x16 = 32 GT/s x 16 lanes / 8 x 2 = 128 GB/s. link.c derives the
 *   model's figures from PCI-SIG's rates with the encoding: 63.0 GB/s a way
 *   for Gen5 (128 / 2 x 128/130), times its packet efficiency for B.
 *   test_hw checks that the two agree.
 *
 * GEMMs (sgemm_share): the share of the FP32 peak cuBLAS's FP32 SGEMM on
 * the CUDA cores (cublasSgemm) reaches, from others' published runs:
 * - H100 SXM: 50.49 TFLOP/s on an "NVIDIA H100 80GB HBM3" (the SXM5 part) for
 *   m = n = k = 8192, 45.68 at 4096 and 21.82 at 2048: the repository
 *   waynehacking8/blackwell-tensorcore-kernels on GitHub,
 *   results/bench_sm90a.csv. 50.49 of the datasheet's 67 is 75 %.
 * - RTX 4090: "cuBLAS SGEMM ... 47,611.8" GFLOPS (2.887 ms) for 4096 x 4096
 *   matrices: the repository annanyapr/Fast-CUDA-Kernels on GitHub,
 *   README.md. 47.6 of the launch figure's 82.6 is 58 % (at 4096: the H100's
 *   own run reached 68 % there, 75 % at 8192).
 * - H100 PCIe and A100: no run found; they take the H100 SXM's 75 %, an
 *   assumption (the H100 PCIe is the same GH100 chip).
 * Products far smaller than 4096 reach less (the recipe's, a few
 * microseconds, are bound by their launches anyway).
 *
 * GPU to GPU:
 * - h100-sxm and a100: NVLink through NVSwitch (HGX / DGX boards): every
 *   GPU reaches every other at its full NVLink figure.
 * - h100-pcie: the datasheet's 600 GB/s NVLink is a bridge joining two cards
 *   (NVIDIA H100 PCIe product brief, PB-11133-001, on its NVLink bridge; we
 *   did not re-read that section for this table). A ring of 4 or 8 GPUs
 *   crosses PCIe between the pairs, and a ring runs at its slowest hop, so
 *   the profile models PCIe Gen5 for every hop (the bridge is not modelled).
 * - rtx4090: no NVLink; peer traffic crosses PCIe Gen4 through the host.
 *   Each GPU sends on its own link and receives on its own, so a hop is
 *   modelled at one PCIe link's rate a way (a lower bound on its time: the
 *   host's memory or root complex may be slower still).
 *
 * Latencies (alpha): NCCL's tuning model, src/graph/tuning.cc, table hwLat
 * (as in the releases whose tables have Hopper and Blackwell rows; older
 * ones differ), Ring with the Simple protocol (the one NCCL uses for large
 * messages), microseconds per hop: NVLink 3.4, PCI 5.7, NET 14.0. NCCL has
 * one NET figure for every network, so ndr, hdr and 100gbe share it. (Its
 * per-collective base latency, baseLat, is left out: our cost model has no
 * such term.)
 *
 * Networks (nominal port rates, one direction):
 * - ndr: InfiniBand NDR, 400 Gb/s a port. A DGX H100 has "four OSFP ports
 *   serving eight single-port NVIDIA ConnectX-7 VPI, ... up to 400 Gb/s
 *   InfiniBand/Ethernet", the eight being its compute fabric, one a GPU
 *   (NVIDIA DGX BasePOD reference architecture, "Core Components", and its
 *   deployment guide, "Networking", docs.nvidia.com).
 * - hdr: InfiniBand HDR, 200 Gb/s a port. A DGX A100 has 8 single-port
 *   ConnectX-6 HDR adapters for its compute fabric (NVIDIA DGX A100
 *   datasheet, 2020; read in reproductions, not in NVIDIA's PDF).
 * - 100gbe: 100 Gigabit Ethernet (IEEE 802.3), 100 Gb/s a port. One a node
 *   for the h100-pcie and rtx4090 profiles: our assumption of a plain
 *   server or workstation, not a vendor's figure.
 */
#include "transfer/hw.h"

#include "base/error.h"

#include <string.h>

/* NCCL's per-hop latencies (src/graph/tuning.cc, hwLat, Ring/Simple), seconds */
#define HW_LATENCY_NVLINK_S 3.4e-6
#define HW_LATENCY_PCI_S 5.7e-6
#define HW_LATENCY_NET_S 14.0e-6

static const struct hw_net hw_nets[] = {
    {"ndr", "InfiniBand NDR", 400e9 / 8, HW_LATENCY_NET_S},
    {"hdr", "InfiniBand HDR", 200e9 / 8, HW_LATENCY_NET_S},
    {"100gbe", "100 Gigabit Ethernet", 100e9 / 8, HW_LATENCY_NET_S},
};

static const struct hw_profile hw_profiles[] = {
    {"h100-sxm", "H100 SXM5 80GB", 67e12, 0.75, "HBM3", 3.35e12, 5, 128e9, "NVLink 4 through NVSwitch", 900e9, "ndr", 8,
     "H100 datasheet; DGX BasePOD ref. arch.; NCCL tuning.cc"},
    {"h100-pcie", "H100 PCIe 80GB", 51e12, 0.75, "HBM2e", 2.0e12, 5, 128e9, "PCIe Gen5 (NVLink bridge pairs not modelled)",
     0, "100gbe", 1, "H100 datasheet; NCCL tuning.cc; 1x 100GbE assumed"},
    {"a100", "A100 SXM4 80GB", 19.5e12, 0.75, "HBM2e", 2.039e12, 4, 64e9, "NVLink 3 through NVSwitch", 600e9, "hdr", 8,
     "A100 datasheet; DGX A100 datasheet; NCCL tuning.cc"},
    {"rtx4090", "GeForce RTX 4090", 82.6e12, 0.58, "GDDR6X", 1.008e12, 4, 0, "PCIe Gen4 through the host (no NVLink)", 0,
     "100gbe", 1, "RTX 4090 launch figures; NCCL tuning.cc; 1x 100GbE assumed"},
};

#define HW_COUNT(a) (sizeof(a) / sizeof((a)[0]))

const char *hw_profile_names(void) { return HW_NAMES; }

double hw_gemm_flops(const struct hw_profile *hw) { return hw->fp32_flops * hw->sgemm_share; }

int hw_profile_find(const char *name, const struct hw_profile **out)
{
    for (size_t i = 0; name && i < HW_COUNT(hw_profiles); i++)
        if (strcmp(name, hw_profiles[i].name) == 0) {
            *out = &hw_profiles[i];
            return 0;
        }
    return err_set(ERR_ARG, "unknown hardware profile '%s' (known: %s)", name ? name : "", hw_profile_names());
}

const struct hw_net *hw_net_of(const struct hw_profile *hw)
{
    for (size_t i = 0; i < HW_COUNT(hw_nets); i++)
        if (strcmp(hw->net, hw_nets[i].name) == 0)
            return &hw_nets[i];
    return NULL; /* not reached: test_hw resolves every profile's network */
}

void hw_host_link(const struct hw_profile *hw, struct link_profile *out)
{
    char name[16];
    snprintf(name, sizeof name, "pcie%d", hw->pcie_gen);
    link_profile_find(name, out); /* a generation link.c knows: test_hw checks every profile's */
    snprintf(out->title, sizeof out->title, "PCIe Gen%d x16 (%s)", hw->pcie_gen, hw->title);
}

void hw_peer_link(const struct hw_profile *hw, struct link_profile *out)
{
    if (hw->nvlink_bidir_bps > 0) {
        memset(out, 0, sizeof *out);
        snprintf(out->name, sizeof out->name, "nvlink");
        snprintf(out->title, sizeof out->title, "%s", hw->peer);
        out->limit_bps = out->bandwidth_bps = hw->nvlink_bidir_bps / 2;
        out->latency_s = HW_LATENCY_NVLINK_S;
        return;
    }
    hw_host_link(hw, out);
    snprintf(out->title, sizeof out->title, "%s", hw->peer);
    out->latency_s = HW_LATENCY_PCI_S;
}

void hw_node_link(const struct hw_profile *hw, struct link_profile *out)
{
    const struct hw_net *net = hw_net_of(hw);
    memset(out, 0, sizeof *out);
    snprintf(out->name, sizeof out->name, "%s", net->name);
    snprintf(out->title, sizeof out->title, "%dx %s", hw->nics, net->title);
    out->limit_bps = out->bandwidth_bps = hw->nics * net->port_bps;
    out->latency_s = net->latency_s;
}

void hw_print_list(FILE *f)
{
    fprintf(f, "hardware profiles (--hw=NAME): modelled figures from public datasheets and NCCL's latency model,\n"
               "cited in lib/transfer/hw.c; GB/s = 1e9 bytes/s, one direction unless said\n");
    for (size_t i = 0; i < HW_COUNT(hw_profiles); i++) {
        const struct hw_profile *hw = &hw_profiles[i];
        struct link_profile host, peer, node;
        hw_host_link(hw, &host);
        hw_peer_link(hw, &peer);
        hw_node_link(hw, &node);
        fprintf(f, "  %-10s %s: FP32 %.1f TFLOP/s peak (GEMMs at %.0f %% of it), %s %.0f GB/s\n", hw->name, hw->title,
                hw->fp32_flops / 1e12, 100 * hw->sgemm_share, hw->memory, hw->memory_bps / 1e9);
        char datasheet[64] = "";
        if (hw->pcie_bidir_bps > 0)
            snprintf(datasheet, sizeof datasheet, " (datasheet: %.0f GB/s both ways, before encoding)",
                     hw->pcie_bidir_bps / 1e9);
        fprintf(f, "             host link  PCIe Gen%d x16: %.1f GB/s limit%s, %.1f GB/s modelled, %.0f us a copy\n",
                hw->pcie_gen, host.limit_bps / 1e9, datasheet, host.bandwidth_bps / 1e9, host.latency_s * 1e6);
        fprintf(f, "             GPU to GPU %s: %.1f GB/s, %.1f us a hop\n", peer.title, peer.bandwidth_bps / 1e9,
                peer.latency_s * 1e6);
        fprintf(f, "             network    %s: %.1f GB/s a node (%.0f Gb/s a port), %.1f us\n", node.title,
                node.bandwidth_bps / 1e9, hw_net_of(hw)->port_bps * 8 / 1e9, node.latency_s * 1e6);
        fprintf(f, "             sources    %s\n", hw->sources);
    }
}

int hw_flag_parse(const char *text, const struct hw_profile **out)
{
    if (strcmp(text, "list") == 0) {
        hw_print_list(stdout);
        return 1;
    }
    int rc = hw_profile_find(text, out);
    return rc < 0 ? err_wrap(ERR_ARG, "--hw") : 0;
}
