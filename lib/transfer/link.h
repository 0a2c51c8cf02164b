/* link: the wire between host memory and a GPU, as a cost model and a limit.
 *
 * Where it sits: under the device (transfer/device.h). The simulated device
 * times every copy with it, α + S/B (latency plus bytes over bandwidth, the
 * alpha-beta model chapter 5 uses for messages); the chapter compares measured
 * copy rates with its limit. Named profiles give the PCIe generations GPUs sit
 * on; a real GPU's limit comes from the generation and width the system
 * reports (sysfs).
 *
 * Two figures per link, kept apart on purpose:
 *   limit_bps      what the wire carries: transfer rate x lanes x line
 *                  encoding. Nothing can beat it; benchmarks divide by it.
 *   bandwidth_bps  what a copy gets after packet overheads: the model's B.
 *
 * Read link_profile_find() first.
 */
#ifndef DDP_LINK_H
#define DDP_LINK_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

struct link_profile {
    char name[16];        /* "pcie4", or "custom" */
    char title[80];       /* "PCIe Gen4 x16" */
    double limit_bps;     /* the wire's limit, bytes per second, one direction */
    double bandwidth_bps; /* B: a long copy's modelled rate, bytes per second */
    double latency_s;     /* α: a copy's fixed cost, seconds */
};

/* The default profile's name: PCIe Gen4 x16, what A100-class training GPUs
 * sit on. */
#define LINK_DEFAULT "pcie4"

/* Fills *out with the named profile: "pcie3", "pcie4" or "pcie5" (x16 each).
 * ERR_ARG naming the profile and listing the known ones otherwise. */
int link_profile_find(const char *name, struct link_profile *out);

/* The known profile names, comma-separated, for --help and messages. */
const char *link_profile_names(void);

/* Replaces the bandwidth (GB/s, 1e9 bytes) and/or the latency (microseconds)
 * of *l; a negative value leaves that figure alone. A custom bandwidth also
 * becomes the limit (there is no wire to compare it with) and the profile is
 * renamed "custom". ERR_ARG for a bandwidth that is not in (0, 10000] GB/s or
 * a latency not in [0, 1e6] us, naming which. */
int link_profile_set(struct link_profile *l, double gbps, double latency_us);

/* The share of *l each GPU gets when `gpus` GPUs copy at once through
 * `links` such links (a PCIe switch's uplinks to the host): bandwidth and
 * limit divided by gpus / links, the title saying so; nothing changes when
 * each GPU has a link of its own. A static share: every GPU copies all the
 * time, as in a data-parallel job's steady state, where each rank's loader
 * copies its next batch while the step computes. ERR_ARG unless 1 <= links
 * <= gpus and links divides gpus (every link carries as many GPUs). */
int link_profile_share(struct link_profile *l, int gpus, int links);

/* α + S/B: the modelled seconds of one copy of `bytes` bytes. */
double link_copy_seconds(const struct link_profile *l, uint64_t bytes);

/* The size at which a copy spends as long on its latency as on its bytes
 * (S = α B): below it latency dominates, and the rate is under half of B. */
double link_half_size(const struct link_profile *l);

/* The PCIe limit, bytes per second one way, of generation `gen` (1..5) and
 * `width` lanes (1..32). ERR_RANGE for anything else. */
int link_pcie_limit(int gen, int width, double *bps);

/* Reads the link a PCI device trained at from sysfs
 * (/sys/bus/pci/devices/BUS_ID/current_link_speed and _width) and fills *out:
 * the limit from the generation and width, and B with the same packet
 * efficiency as the named profiles (latency left at 0). `bus_id` is the
 * domain:bus:device.function form ("0000:3b:00.0"). ERR_IO or ERR_FORMAT,
 * naming the file, when the system does not say. */
int link_from_sysfs(const char *bus_id, struct link_profile *out);

#ifdef __cplusplus
}
#endif

#endif
