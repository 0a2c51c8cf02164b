/* allreduce: the gradients' all-reduce at the end of each step of chapter
 * 4's loop (--algo), seen from one GPU's host link.
 *
 * The loop runs one GPU of --topology's cluster; the others copy their own
 * batches at the same time (the link's share, main.c). Each step's
 * all-reduce of --grad-bytes is the one comm/costmodel.h prices, and
 * costmodel_host_link_bytes() says how much of it crosses this GPU's PCIe
 * link: all of it where the node's GPUs talk over PCIe (NCCL's peer-to-peer
 * or shared-memory paths both go through the GPU's x16), only the network's
 * part where they have NVLink (the network card sits beside the GPU on PCIe).
 * Those bytes are real copies on the device's copy engines: out of the GPU
 * (device to pinned host memory) and into it (the other way), each engine a
 * direction, as PCIe is full duplex, in pieces of at most NCCL's buffer
 * (NCCL_BUFFSIZE, 4 MiB by default: NCCL's environment variables page), each
 * paying the link's fixed cost. The ones into the GPU queue on the same
 * engine as the next batches' copies, which is the lesson: on a PCIe machine
 * the gradients and the input share the wire.
 *
 * What is not here: the reduction itself (one GPU has nothing to add) and
 * the time the NVLink and network parts take: chapters 5 and 6 run and time
 * the whole collective. Called by loop.c (main.c reads --algo's names here).
 */
#include "chapter4.h"

#include "base/error.h"
#include "base/units.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static const char *const ch4_algo_names[] = {"ring", "tree", "naive", "hier", NULL};
static const enum comm_algo ch4_algo_values[] = {COMM_ALGO_RING, COMM_ALGO_TREE, COMM_ALGO_NAIVE, COMM_ALGO_HIER};

#define CH4_NCCL_BUFFSIZE (4u << 20)

const char *const *ch4_algo_choices(void) { return ch4_algo_names; }

enum comm_algo ch4_algo_of(int choice) { return ch4_algo_values[choice]; }

/* The gradients' bytes (--grad-bytes, else a batch's), and a step's bytes
 * into and out of this GPU over its host link: costmodel_host_link_bytes()
 * on the flags' topology. */
static uint64_t ch4_allreduce_traffic(const struct ch4_opts *o, uint64_t batch_bytes, uint64_t *in, uint64_t *out)
{
    uint64_t grads = o->grad_bytes ? o->grad_bytes : batch_bytes;
    double din, dout;
    costmodel_host_link_bytes(o->nodes * o->node_gpus, o->node_gpus, o->nvlink, o->algo, (double)grads, &din, &dout);
    *in = (uint64_t)floor(din); /* whole bytes: a ring's 2(W-1)/W n may not be */
    *out = (uint64_t)floor(dout);
    return grads;
}

void ch4_allreduce_describe(const struct ch4_opts *o, uint64_t batch_bytes)
{
    uint64_t in, out, bytes = ch4_allreduce_traffic(o, batch_bytes, &in, &out);
    char g[32], i[32], t[32];
    int world = o->nodes * o->node_gpus;
    printf("   each step ends with the all-reduce (--algo=%s) of %s of gradients over %d GPUs (%dx%d);\n"
           "   this GPU's host link carries %s of it in and %s out each step: %s\n",
           comm_algo_name(o->algo), units_format_bytes(bytes, g, sizeof g), world, o->nodes, o->node_gpus,
           units_format_bytes(in, i, sizeof i), units_format_bytes(out, t, sizeof t),
           o->nvlink ? "the GPUs of a node talk over\n   NVLink, so only what comes from or goes to other nodes "
                       "crosses it (the network card sits beside the GPU\n   on PCIe)"
                     : "the GPUs talk over\n   PCIe, so every byte this GPU sends or receives crosses it");
    printf("   (modelled: the reduction, and the time on NVLink and the network, are chapters 5 and 6)\n");
}

int ch4_allreduce_check(const struct ch4_opts *o, uint64_t batch_bytes)
{
    if (!o->allreduce)
        return 0;
    uint64_t in, out, bytes = ch4_allreduce_traffic(o, batch_bytes, &in, &out);
    uint64_t most = in > out ? in : out;
    if (most <= CH4_ALLREDUCE_MAX_STEP_BYTES)
        return 0;
    char g[32], m[32], cap[32];
    return err_set(ERR_ARG, "--algo=%s on %dx%d with %s of gradients (--grad-bytes, else a batch): this GPU's host "
                   "link would carry %s of it each step, and the simulator copies those bytes for real: at most %s "
                   "a step (fewer gradients, or another --algo)", comm_algo_name(o->algo), o->nodes, o->node_gpus,
                   units_format_bytes(bytes, g, sizeof g), units_format_bytes(most, m, sizeof m),
                   units_format_bytes(CH4_ALLREDUCE_MAX_STEP_BYTES, cap, sizeof cap));
}

/* The piece `done` bytes into `total` starts at: its offset in the gradients
 * (which the traffic goes round, when it is larger) and its size, at most
 * NCCL's buffer and never past the gradients' end. */
static uint64_t ch4_piece(const struct ch4_allreduce *a, uint64_t done, uint64_t total, uint64_t *offset)
{
    *offset = done % a->bytes;
    uint64_t n = total - done;
    n = n < a->piece ? n : a->piece;
    return n < a->bytes - *offset ? n : a->bytes - *offset;
}

/* Seconds `total` bytes take on `link` in a's pieces. */
static double ch4_pieces_s(const struct ch4_allreduce *a, const struct link_profile *link, uint64_t total)
{
    double s = 0;
    uint64_t offset;
    for (uint64_t done = 0, n; done < total; done += n) {
        n = ch4_piece(a, done, total, &offset);
        s += link_copy_seconds(link, n);
    }
    return s;
}

void ch4_allreduce_close(struct ch4_allreduce *a)
{
    if (!a->dev)
        return;
    device_event_destroy(a->computed);
    device_event_destroy(a->sent);
    device_event_destroy(a->received);
    device_stream_destroy(a->to_host);
    device_stream_destroy(a->to_gpu);
    device_host_free(a->dev, a->send);
    device_host_free(a->dev, a->recv);
    device_free(a->dev, a->grads);
    device_free(a->dev, a->reduced);
    memset(a, 0, sizeof *a);
}

int ch4_allreduce_open(const struct ch4_opts *o, device_t *dev, uint64_t batch_bytes, struct ch4_allreduce *a)
{
    memset(a, 0, sizeof *a);
    if (!o->allreduce)
        return 0;
    a->dev = dev;
    a->bytes = ch4_allreduce_traffic(o, batch_bytes, &a->in_bytes, &a->out_bytes);
    a->piece = a->bytes < CH4_NCCL_BUFFSIZE ? a->bytes : CH4_NCCL_BUFFSIZE;
    a->in_s = ch4_pieces_s(a, &o->loop_link, a->in_bytes);
    a->out_s = ch4_pieces_s(a, &o->loop_link, a->out_bytes);
    int rc = device_malloc(dev, a->bytes, "gradients", &a->grads);
    if (rc == 0)
        rc = device_malloc(dev, a->bytes, "reduced gradients", &a->reduced);
    if (rc == 0)
        rc = device_host_alloc(dev, DEVICE_HOST_PINNED, a->piece, "all-reduce send buffer", &a->send);
    if (rc == 0)
        rc = device_host_alloc(dev, DEVICE_HOST_PINNED, a->piece, "all-reduce receive buffer", &a->recv);
    if (rc == 0)
        rc = device_stream_create(dev, "all-reduce out", &a->to_host);
    if (rc == 0)
        rc = device_stream_create(dev, "all-reduce in", &a->to_gpu);
    if (rc == 0)
        rc = device_event_create(dev, &a->computed);
    if (rc == 0)
        rc = device_event_create(dev, &a->sent);
    if (rc == 0)
        rc = device_event_create(dev, &a->received);
    if (rc == 0)
        memset(a->recv, 0, a->piece);
    if (rc)
        ch4_allreduce_close(a);
    return rc;
}

/* `total` bytes between device buffer `dev_buf` (a->bytes long) and host
 * buffer `host` (a->piece long) on stream s, in a's pieces. */
static int ch4_allreduce_copies(struct ch4_allreduce *a, device_stream_t *s, enum device_dir dir, uint8_t *dev_buf,
                                void *host, uint64_t total, int64_t batch)
{
    int rc = 0;
    uint64_t offset;
    for (uint64_t done = 0, n; rc == 0 && done < total; done += n) {
        n = ch4_piece(a, done, total, &offset);
        rc = dir == DEVICE_H2D ? device_copy_async(s, dev_buf + offset, host, n, DEVICE_H2D, batch)
                               : device_copy_async(s, host, dev_buf + offset, n, DEVICE_D2H, batch);
    }
    return rc;
}

int ch4_allreduce_step(struct ch4_allreduce *a, device_stream_t *compute, int64_t batch)
{
    if (!a->dev)
        return 0;
    /* the step's backward has written the gradients: both directions start there */
    int rc = device_event_record(a->computed, compute);
    if (rc == 0)
        rc = device_stream_wait_event(a->to_host, a->computed);
    if (rc == 0)
        rc = device_stream_wait_event(a->to_gpu, a->computed);
    if (rc == 0)
        rc = ch4_allreduce_copies(a, a->to_host, DEVICE_D2H, a->grads, a->send, a->out_bytes, batch);
    if (rc == 0)
        rc = ch4_allreduce_copies(a, a->to_gpu, DEVICE_H2D, a->reduced, a->recv, a->in_bytes, batch);
    if (rc == 0)
        rc = device_event_record(a->sent, a->to_host);
    if (rc == 0)
        rc = device_event_record(a->received, a->to_gpu);
    /* the optimizer reads the reduced gradients, and the next backward overwrites these */
    if (rc == 0)
        rc = device_stream_wait_event(compute, a->sent);
    if (rc == 0)
        rc = device_stream_wait_event(compute, a->received);
    return rc;
}
