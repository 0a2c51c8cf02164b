/* link: named PCIe profiles, the α + S/B copy model and the limit a real link
 * reports (see link.h).
 *
 * Where the figures come from:
 * - Transfer rates and line encodings are the PCI Express Base Specifications
 *   (PCI-SIG): 2.5 GT/s (1.0) and 5 GT/s (2.0) with 8b/10b encoding; 8 GT/s
 *   (3.0), 16 GT/s (4.0) and 32 GT/s (5.0) with 128b/130b. One lane moves one
 *   bit per transfer each way, so x16 at 16 GT/s carries 16e9 x 16 x 128/130
 *   / 8 = 31.5 GB/s per direction.
 * - Packet efficiency: a DMA moves its data in transaction-layer packets of at
 *   most MaxPayloadSize bytes, 256 on typical x86 servers, and each packet adds
 *   a 4-byte framing token (3.0 and later), a 16-byte header (64-bit
 *   addresses) and a 4-byte LCRC: 256 / (256 + 24) = 91.4 % of the wire at
 *   best (flow-control and acknowledgement packets take a little more). B is
 *   the limit times that.
 * - Latency α = 5 us: the fixed cost of one cudaMemcpyAsync measured at 5 to 7
 *   us per call (Wu et al., "DualPath", arXiv 2602.21548, section 5.2). We
 *   take the low end for every generation: it is dominated by the driver and
 *   the DMA engine's setup, not the wire.
 */
#include "transfer/link.h"

#include "base/error.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LINK_PACKET_EFFICIENCY (256.0 / (256.0 + 24.0))
#define LINK_LATENCY_S 5e-6

static const struct {
    const char *name, *title;
    int gen;
} link_profiles[] = {
    {"pcie3", "PCIe Gen3 x16", 3},
    {"pcie4", "PCIe Gen4 x16", 4},
    {"pcie5", "PCIe Gen5 x16", 5},
};

const char *link_profile_names(void) { return "pcie3, pcie4, pcie5"; }

int link_pcie_limit(int gen, int width, double *bps)
{
    static const double gts[] = {0, 2.5, 5, 8, 16, 32};
    if (gen < 1 || gen > 5)
        return err_set(ERR_RANGE, "PCIe generation %d: only 1 to 5 are known", gen);
    if (width < 1 || width > 32)
        return err_set(ERR_RANGE, "PCIe width x%d: a link has 1 to 32 lanes", width);
    double encoding = gen <= 2 ? 8.0 / 10.0 : 128.0 / 130.0;
    *bps = gts[gen] * 1e9 * width * encoding / 8;
    return 0;
}

int link_profile_find(const char *name, struct link_profile *out)
{
    for (size_t i = 0; name && i < sizeof link_profiles / sizeof link_profiles[0]; i++) {
        if (strcmp(name, link_profiles[i].name) != 0)
            continue;
        memset(out, 0, sizeof *out);
        snprintf(out->name, sizeof out->name, "%s", link_profiles[i].name);
        snprintf(out->title, sizeof out->title, "%s", link_profiles[i].title);
        link_pcie_limit(link_profiles[i].gen, 16, &out->limit_bps);
        out->bandwidth_bps = out->limit_bps * LINK_PACKET_EFFICIENCY;
        out->latency_s = LINK_LATENCY_S;
        return 0;
    }
    return err_set(ERR_ARG, "unknown link profile '%s' (known: %s)", name ? name : "", link_profile_names());
}

int link_profile_set(struct link_profile *l, double gbps, double latency_us)
{
    if (gbps >= 0 || gbps != gbps) {
        if (!(gbps > 0 && gbps <= 10000))
            return err_set(ERR_ARG, "link bandwidth: expected more than 0 and at most 10000 GB/s, got %g", gbps);
        l->bandwidth_bps = l->limit_bps = gbps * 1e9;
        snprintf(l->name, sizeof l->name, "custom");
        snprintf(l->title, sizeof l->title, "a %g GB/s link", gbps);
    }
    if (latency_us >= 0 || latency_us != latency_us) {
        if (!(latency_us >= 0 && latency_us <= 1e6))
            return err_set(ERR_ARG, "link latency: expected 0 to 1000000 us, got %g", latency_us);
        l->latency_s = latency_us * 1e-6;
    }
    return 0;
}

int link_profile_share(struct link_profile *l, int gpus, int links)
{
    if (gpus < 1 || links < 1 || links > gpus || gpus % links != 0)
        return err_set(ERR_ARG, "%d GPUs on %d host links: each link carries as many GPUs, so the links are a "
                       "divisor of %d (1 to %d)", gpus, links, gpus > 0 ? gpus : 1, gpus > 0 ? gpus : 1);
    int per = gpus / links;
    if (per == 1)
        return 0;
    l->bandwidth_bps /= per;
    l->limit_bps /= per;
    size_t n = strlen(l->title);
    snprintf(l->title + n, sizeof l->title - n, ", shared by %d GPUs", per);
    return 0;
}

double link_copy_seconds(const struct link_profile *l, uint64_t bytes)
{
    return l->latency_s + (double)bytes / l->bandwidth_bps;
}

double link_half_size(const struct link_profile *l) { return l->latency_s * l->bandwidth_bps; }

/* Reads one line of a sysfs file into buf. */
static int link_read_sysfs(const char *bus_id, const char *file, char *buf, size_t len)
{
    char path[256];
    snprintf(path, sizeof path, "/sys/bus/pci/devices/%s/%s", bus_id, file);
    FILE *f = fopen(path, "r");
    if (!f)
        return err_set(ERR_IO, "%s: %s", path, strerror(errno));
    int ok = fgets(buf, (int)len, f) != NULL;
    fclose(f);
    return ok ? 0 : err_set(ERR_FORMAT, "%s: empty", path);
}

int link_from_sysfs(const char *bus_id, struct link_profile *out)
{
    char speed[64], width[64];
    int rc = link_read_sysfs(bus_id, "current_link_speed", speed, sizeof speed);
    if (rc == 0)
        rc = link_read_sysfs(bus_id, "current_link_width", width, sizeof width);
    if (rc)
        return rc;
    char *end;
    double gts = strtod(speed, &end); /* "16.0 GT/s PCIe" */
    long lanes = strtol(width, NULL, 10);
    static const double rates[] = {2.5, 5, 8, 16, 32};
    int gen = 0;
    for (int g = 0; g < 5; g++)
        if (gts > rates[g] * 0.99 && gts < rates[g] * 1.01)
            gen = g + 1;
    if (!gen || end == speed)
        return err_set(ERR_FORMAT, "PCI device %s: link speed '%.*s' is not a known PCIe rate", bus_id,
                       (int)strcspn(speed, "\n"), speed);
    rc = link_pcie_limit(gen, (int)lanes, &out->limit_bps);
    if (rc)
        return err_wrap(rc, "PCI device %s: ", bus_id);
    snprintf(out->name, sizeof out->name, "pcie%d", gen);
    snprintf(out->title, sizeof out->title, "PCIe Gen%d x%ld", gen, lanes);
    out->bandwidth_bps = out->limit_bps * LINK_PACKET_EFFICIENCY;
    out->latency_s = 0;
    return 0;
}
