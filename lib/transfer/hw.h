/* hw: named hardware profiles, the GPU systems the simulator models.
 *
 * Where it sits: beside link.h, under the device. A profile names a GPU and
 * the system around it: its compute and memory peaks, the PCIe link to its
 * host (a link.h profile, so the simulated device's copies are timed as with
 * --link), the link to the other GPUs of its node (NVLink, or PCIe), and the
 * network between nodes. Chapters 4 and 6 give the simulated device the
 * profile's host link (--hw=NAME); chapter 5 prices its cost model with the
 * GPU-to-GPU link (comm/costmodel_hw.h). Every figure is a modelled one, from
 * a public datasheet or NCCL's own model, cited in hw.c: no GPU was measured.
 *
 * Read hw_profile_find() first, then hw.c's table and its sources.
 */
#ifndef DDP_HW_H
#define DDP_HW_H

#include "transfer/link.h"

#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

/* A node's network: one kind of port, nominal rate and latency. */
struct hw_net {
    const char *name;  /* "ndr" */
    const char *title; /* "InfiniBand NDR" */
    double port_bps;   /* one port, one direction, bytes per second (nominal data rate) */
    double latency_s;  /* a message's fixed cost between nodes, seconds */
};

/* A GPU and the system it sits in. Figures as the datasheets give them:
 * the bidirectional ones are both directions together. */
struct hw_profile {
    const char *name;        /* "h100-sxm", what --hw takes */
    const char *title;       /* "H100 SXM5 80GB" */
    double fp32_flops;       /* peak FP32 (CUDA cores, dense, no tensor cores), FLOP/s */
    double sgemm_share;      /* the share of fp32_flops cuBLAS's SGEMM reaches: measured (hw.c cites it) or assumed */
    const char *memory;      /* "HBM3" */
    double memory_bps;       /* peak device-memory bandwidth, bytes per second */
    int pcie_gen;            /* the host link: PCIe of this generation, x16 */
    double pcie_bidir_bps;   /* the datasheet's PCIe figure, both directions, bytes per second */
    const char *peer;        /* the GPU-to-GPU path: "NVLink 4 through NVSwitch" */
    double nvlink_bidir_bps; /* its NVLink figure, both directions; 0: the GPUs talk over PCIe */
    const char *net;         /* the network, a hw_net name */
    int nics;                /* network ports per node */
    const char *sources;     /* where the figures come from, in short */
};

/* The rate the GPU's matrix products run at, FLOP/s: fp32_flops x
 * sgemm_share. The simulated device times a GEMM's 2mnk FLOPs at it. */
double hw_gemm_flops(const struct hw_profile *hw);

/* The profiles' names, for --help texts (hw_profile_names() at run time). */
#define HW_NAMES "h100-sxm, h100-pcie, a100, rtx4090"

/* *out = the named profile. ERR_ARG "unknown hardware profile 'NAME' (known:
 * h100-sxm, ...)" otherwise. */
int hw_profile_find(const char *name, const struct hw_profile **out);

/* The known profile names, comma-separated, for --help and messages. */
const char *hw_profile_names(void);

/* The network profile a hardware profile's nodes use (hw->net). */
const struct hw_net *hw_net_of(const struct hw_profile *hw);

/* The GPU's link to its host, as the simulated device times copies with it:
 * link.h's profile of hw->pcie_gen, titled with the GPU. */
void hw_host_link(const struct hw_profile *hw, struct link_profile *out);

/* The link from one GPU to the next inside a node, one direction: NVLink at
 * half its bidirectional figure (theoretical), or the host link's modelled
 * rate when the GPUs talk over PCIe; latency NCCL's per-hop figure for that
 * path. */
void hw_peer_link(const struct hw_profile *hw, struct link_profile *out);

/* A node's way out, one direction: hw->nics ports of its network together,
 * latency the network's. For the hierarchical all-reduce's inter-node step. */
void hw_node_link(const struct hw_profile *hw, struct link_profile *out);

/* Every profile with its key figures and sources, for --hw=list. */
void hw_print_list(FILE *f);

/* The value of a program's --hw flag: "list" prints every profile on stdout
 * and returns 1 (the program then exits 0); a profile's name sets *out and
 * returns 0; anything else is ERR_ARG naming --hw and the known names. */
int hw_flag_parse(const char *text, const struct hw_profile **out);

#ifdef __cplusplus
}
#endif

#endif
