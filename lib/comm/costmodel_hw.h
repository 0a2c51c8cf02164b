/* costmodel_hw: the all-reduce cost model priced from a named hardware
 * profile instead of from this machine.
 *
 * Where it sits: between transfer/hw.h (a GPU system's modelled figures) and
 * comm/costmodel.h (the alpha-beta-gamma model chapter 5 prints beside its
 * measurements). With --hw=NAME chapter 5 predicts what the all-reduce would
 * cost on that system's GPUs, one rank a GPU, inside one node or, with
 * --topology, across nodes of its network.
 */
#ifndef DDP_COSTMODEL_HW_H
#define DDP_COSTMODEL_HW_H

#include "comm/costmodel.h"
#include "transfer/hw.h"

/* Fills *m from hw, for ranks on a GPU each:
 *   alpha  the GPU-to-GPU hop's latency (hw_peer_link: NCCL's figure)
 *   beta   1 / that link's rate, one direction
 *   gamma  3 / the device memory's bandwidth: a reduction reads two operands
 *          and writes the result, 3 bytes of memory traffic a byte reduced
 *   alpha_o, beta_o  across nodes: one port of the node's network (hw_node_link:
 *          its latency, its rate / hw->nics), inter_ports = hw->nics
 * with no segments and cores 0 (one each: a GPU a rank): the textbook model.
 * node_size is left as it was: the topology is the caller's. */
void costmodel_from_hw(struct costmodel *m, const struct hw_profile *hw);

#endif
