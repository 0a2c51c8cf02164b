/* costmodel_hw: the cost model from a hardware profile (see costmodel_hw.h). */
#include "comm/costmodel_hw.h"

void costmodel_from_hw(struct costmodel *m, const struct hw_profile *hw)
{
    struct link_profile peer;
    hw_peer_link(hw, &peer);
    m->alpha_s = peer.latency_s;
    m->beta_s_per_b = 1.0 / peer.bandwidth_bps;
    m->gamma_s_per_b = 3.0 / hw->memory_bps;
    m->segment_bytes = 0;
    m->cores = 0;
    struct link_profile node; /* across nodes (a topology of several): one port per flow, the node's ports shared */
    hw_node_link(hw, &node);
    m->alpha_inter_s = node.latency_s;
    m->beta_inter_s_per_b = hw->nics / node.bandwidth_bps;
    m->inter_ports = hw->nics;
}
