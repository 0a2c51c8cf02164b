/* test_hw: the hardware profiles (lib/transfer/hw.h) and the cost model
 * priced from them (lib/comm/costmodel_hw.h).
 *
 * Every listed name resolves and an unknown one is refused with the list;
 * every figure is positive; the figures agree with each other and with their
 * sources' arithmetic: NVLink a way is half the datasheet's bidirectional
 * figure, the datasheet's PCIe figure is link.c's PCI-SIG derivation (both
 * ways, before encoding), NVLink is faster than PCIe, a newer GPU is not
 * slower than an older one on the same path, and the cost model reads them.
 */
#include "check.h"
#include "base/error.h"
#include "comm/costmodel_hw.h"
#include "transfer/device.h"
#include "transfer/hw.h"
#include "transfer/link.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The names hw_profile_names() lists, into names[], NULL-terminated. */
static int test_names(char *buf, size_t len, const char **names, int max)
{
    snprintf(buf, len, "%s", hw_profile_names());
    int n = 0;
    for (char *save, *tok = strtok_r(buf, ", ", &save); tok && n < max - 1; tok = strtok_r(NULL, ", ", &save))
        names[n++] = tok;
    names[n] = NULL;
    return n;
}

static int test_close(double a, double b) { return fabs(a - b) <= 1e-9 * fabs(b); }

TEST(hw_names_resolve)
{
    char buf[256];
    const char *names[16];
    CHECK_EQ(test_names(buf, sizeof buf, names, 16), 4);
    for (int i = 0; names[i]; i++) {
        const struct hw_profile *hw = NULL;
        CHECK_OK(hw_profile_find(names[i], &hw));
        CHECK_STR(hw->name, names[i]);
        CHECK_MSG(hw_net_of(hw) != NULL, "%s: network '%s' is not a profile", hw->name, hw->net);
    }
    const struct hw_profile *hw;
    CHECK_ERR(hw_profile_find("h200", &hw), ERR_ARG,
              "unknown hardware profile 'h200' (known: h100-sxm, h100-pcie, a100, rtx4090)");
    CHECK_ERR(hw_profile_find(NULL, &hw), ERR_ARG, "unknown hardware profile ''");
    CHECK_ERR(hw_profile_find("H100-SXM", &hw), ERR_ARG, "known: h100-sxm"); /* names are exact */
}

TEST(hw_figures_positive_and_consistent)
{
    char buf[256];
    const char *names[16];
    test_names(buf, sizeof buf, names, 16);
    for (int i = 0; names[i]; i++) {
        const struct hw_profile *hw;
        CHECK_OK(hw_profile_find(names[i], &hw));
        CHECK_MSG(hw->fp32_flops > 1e12 && hw->memory_bps > 1e11 && hw->nics > 0, "%s: a figure is not positive",
                  hw->name);
        /* SGEMM reaches a share of the peak, never all of it */
        CHECK_MSG(hw->sgemm_share > 0.3 && hw->sgemm_share < 1, "%s: SGEMM at %g of the peak", hw->name,
                  hw->sgemm_share);
        CHECK(test_close(hw_gemm_flops(hw), hw->fp32_flops * hw->sgemm_share));
        struct link_profile host, pcie, peer, node;
        char pname[16];
        snprintf(pname, sizeof pname, "pcie%d", hw->pcie_gen);
        CHECK_OK(link_profile_find(pname, &pcie));
        hw_host_link(hw, &host);
        /* the host link is link.c's profile, only retitled */
        CHECK_STR(host.name, pname);
        CHECK(host.limit_bps == pcie.limit_bps && host.bandwidth_bps == pcie.bandwidth_bps &&
              host.latency_s == pcie.latency_s);
        CHECK_CONTAINS(host.title, hw->title);
        /* the datasheet's PCIe figure is both directions before 128b/130b encoding */
        if (hw->pcie_bidir_bps > 0)
            CHECK_MSG(test_close(hw->pcie_bidir_bps / 2 * 128.0 / 130.0, host.limit_bps),
                      "%s: datasheet %g B/s both ways, link.c %g a way", hw->name, hw->pcie_bidir_bps, host.limit_bps);
        hw_peer_link(hw, &peer);
        CHECK(peer.bandwidth_bps > 0 && peer.latency_s > 0);
        if (hw->nvlink_bidir_bps > 0) {
            CHECK(test_close(peer.bandwidth_bps, hw->nvlink_bidir_bps / 2)); /* one direction */
            CHECK_MSG(peer.bandwidth_bps > 4 * host.bandwidth_bps, "%s: NVLink %g B/s, PCIe %g", hw->name,
                      peer.bandwidth_bps, host.bandwidth_bps);
        } else {
            CHECK(peer.bandwidth_bps == host.bandwidth_bps); /* the GPUs talk over PCIe */
        }
        hw_node_link(hw, &node);
        CHECK(test_close(node.bandwidth_bps, hw->nics * hw_net_of(hw)->port_bps));
        CHECK(node.latency_s >= peer.latency_s); /* leaving the node costs more than a hop inside it */
    }
}

TEST(hw_figures_against_each_other)
{
    const struct hw_profile *h100, *h100p, *a100, *rtx;
    CHECK_OK(hw_profile_find("h100-sxm", &h100));
    CHECK_OK(hw_profile_find("h100-pcie", &h100p));
    CHECK_OK(hw_profile_find("a100", &a100));
    CHECK_OK(hw_profile_find("rtx4090", &rtx));
    /* the brief's figures: 900 GB/s bidirectional = 450 a way; A100's 600 = 300 */
    struct link_profile l;
    hw_peer_link(h100, &l);
    CHECK(test_close(l.bandwidth_bps, 450e9));
    hw_peer_link(a100, &l);
    CHECK(test_close(l.bandwidth_bps, 300e9));
    CHECK(test_close(a100->fp32_flops, 19.5e12));
    /* the two measured SGEMM shares (hw.c): 50.49 of 67 TFLOP/s, 47.6 of 82.6 */
    CHECK(test_close(h100->sgemm_share, 0.75) && test_close(rtx->sgemm_share, 0.58));
    /* and the simulated device is timed by that rate, the profile's own */
    struct device_config dc;
    device_config_default(&dc);
    device_config_hw(&dc, rtx);
    CHECK(test_close(dc.gemm_flops, 82.6e12 * 0.58));
    /* the SXM part out-runs the PCIe card of the same GPU, HBM3 out-runs HBM2e and GDDR6X */
    CHECK(h100->fp32_flops > h100p->fp32_flops && h100->memory_bps > h100p->memory_bps);
    CHECK(h100->memory_bps > a100->memory_bps && a100->memory_bps > rtx->memory_bps);
    struct link_profile a, b;
    hw_host_link(h100, &a);
    hw_host_link(a100, &b);
    CHECK(a.bandwidth_bps > b.bandwidth_bps); /* Gen5 over Gen4 */
    hw_node_link(h100, &a);
    hw_node_link(rtx, &b);
    CHECK(test_close(a.bandwidth_bps, 8 * 50e9) && test_close(b.bandwidth_bps, 12.5e9));
}

TEST(hw_costmodel)
{
    const struct hw_profile *h100, *rtx;
    CHECK_OK(hw_profile_find("h100-sxm", &h100));
    CHECK_OK(hw_profile_find("rtx4090", &rtx));
    struct costmodel m = {.segment_bytes = 1 << 18, .cores = 2}, r;
    costmodel_from_hw(&m, h100);
    CHECK(test_close(m.alpha_s, 3.4e-6) && test_close(m.beta_s_per_b, 1 / 450e9));
    CHECK(test_close(m.gamma_s_per_b, 3 / 3.35e12));
    CHECK(m.segment_bytes == 0 && m.cores == 0);
    /* a ring on NVLink beats the same ring over PCIe, at any size */
    costmodel_from_hw(&r, rtx);
    CHECK(costmodel_allreduce(&m, COMM_ALGO_RING, 8, 4) < costmodel_allreduce(&r, COMM_ALGO_RING, 8, 4));
    CHECK(costmodel_allreduce(&m, COMM_ALGO_RING, 8, 1 << 30) < costmodel_allreduce(&r, COMM_ALGO_RING, 8, 1 << 30));
    /* the textbook ring: 2(W-1) alpha + 2(W-1)/W n beta + (W-1)/W n gamma */
    double n = 1 << 30, want = 14 * m.alpha_s + 14.0 / 8 * n * m.beta_s_per_b + 7.0 / 8 * n * m.gamma_s_per_b;
    CHECK(test_close(costmodel_allreduce(&m, COMM_ALGO_RING, 8, n), want));
}

TEST(hw_list_names_every_profile)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    CHECK(f != NULL);
    hw_print_list(f);
    fclose(f);
    char buf[256];
    const char *names[16];
    test_names(buf, sizeof buf, names, 16);
    for (int i = 0; names[i]; i++)
        CHECK_CONTAINS(text, names[i]);
    CHECK_CONTAINS(text, "NVLink 4 through NVSwitch: 450.0 GB/s");
    CHECK_CONTAINS(text, "8x InfiniBand NDR");
    CHECK_CONTAINS(text, "H100 datasheet");
    free(text);
}
