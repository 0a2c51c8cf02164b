/* rendezvous: how processes started torchrun-style find each other: rank 0
 * listens on MASTER_ADDR:MASTER_PORT, every other rank connects, and rank 0
 * hands each of them the same bytes (for NCCL: its ncclUniqueId).
 *
 * Where it sits: under the NCCL backend's ENV launch mode (lib/comm/nccl/comm_nccl.cu),
 * before any collective exists. It plays the part of PyTorch's TCPStore in
 * init_process_group(init_method="env://"), reduced to the one exchange NCCL
 * needs. Plain TCP sockets; no CUDA, NCCL or MPI.
 *
 * Read first: rendezvous_env_read(), then rendezvous_bcast().
 *
 * The wire format (all integers big-endian): a rank sends
 *   "DDPR" magic, u32 version, i32 rank, i32 world, u64 bytes
 * and rank 0 answers with an i32 status (0, or the ERR_* it refuses with),
 * its i32 world, its u64 bytes, then the bytes. A mismatch in world or size
 * is refused and reported on both sides, naming the rank.
 */
#ifndef DDP_RENDEZVOUS_H
#define DDP_RENDEZVOUS_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The torchrun launch environment. Its variable names and meanings are
 * torchrun's (torch.distributed.run): RANK and WORLD_SIZE over the whole job,
 * LOCAL_RANK on this node, MASTER_ADDR:MASTER_PORT where rank 0 is reached.
 *
 * `port` is where our rank 0 listens, which is not always MASTER_PORT: with
 * torchrun's default (static) rendezvous the agent on node 0 already serves
 * its own TCPStore on MASTER_PORT and tells the workers so with
 * TORCHELASTIC_USE_AGENT_STORE=True (torch/distributed/elastic/agent/server/
 * local_elastic_agent.py). We do not speak TCPStore's protocol, so we take
 * the next port. DDP_RENDEZVOUS_PORT overrides both. */
struct rendezvous_env {
    int rank, world, local_rank;
    char master_addr[256];
    int master_port;
    int port;             /* where the rendezvous happens */
    const char *port_why; /* how `port` was chosen, for messages */
    /* Set by the caller, not read from the environment: the one address rank
     * 0 listens on (from rendezvous_if_addr(), as NCCL_SOCKET_IFNAME picks
     * NCCL's interface), and the interface's name for messages. NULL: every
     * interface. */
    const char *bind_addr, *bind_ifname;
    /* Set by the caller too: called on rank 0 once it listens, before it
     * waits for the others (a program says so then, not before a port that
     * turns out taken). NULL: nothing. */
    void (*listening)(const struct rendezvous_env *env, void *arg);
    void *listening_arg;
};

/* Reads RANK, WORLD_SIZE, LOCAL_RANK (default: RANK), MASTER_ADDR and
 * MASTER_PORT (1..65535), and picks the rendezvous port as above. All but
 * LOCAL_RANK are required, as in torch's env:// initialization;
 * LOCAL_WORLD_SIZE, when set, bounds LOCAL_RANK. Returns 0, or ERR_ARG
 * naming the variable that is missing or malformed, or the inconsistency
 * ("RANK=4 is not below WORLD_SIZE=4", "LOCAL_RANK=2 is not below
 * LOCAL_WORLD_SIZE=2"). */
int rendezvous_env_read(struct rendezvous_env *out);

typedef struct rendezvous rendezvous_t;

/* Rank 0's side, in two steps so a test can listen on port 0 (any free
 * port) and learn the port before the others connect. Listens on
 * `bind_addr` (NULL: every interface, for ranks on other nodes) at `port`.
 * Returns 0, ERR_ARG (bad address or port) or ERR_IO (the port is taken:
 * the message names it). */
int rendezvous_listen(const char *bind_addr, int port, rendezvous_t **out);

/* The port a listener is bound to. */
int rendezvous_port(const rendezvous_t *r);

/* Accepts ranks 1 .. world-1 (in any order) and sends each `bytes` from
 * blob. Returns 0 when every rank got them, ERR_TIMEOUT after timeout_s
 * naming the ranks that never came, ERR_ARG when a rank announces another
 * world size or blob size or a rank number out of range or twice (it is
 * refused and named), ERR_IO on a socket error. */
int rendezvous_serve(rendezvous_t *r, int world, const void *blob, size_t bytes, double timeout_s);

/* Closes the listener. NULL is a no-op. */
void rendezvous_close(rendezvous_t *r);

/* Rank `rank`'s side (1 .. world-1): connects to addr:port, retrying while
 * nobody listens yet (rank 0 may start last), until timeout_s; then receives
 * `bytes` into blob. Returns 0, ERR_TIMEOUT ("no rank 0 listening at
 * addr:port after N s: connection refused", or, when the attempts were
 * dropped rather than refused, "did not answer": a firewall?), ERR_ARG (addr does not resolve; or rank 0 refused
 * us: its reason; or what answers is another program, whose first bytes the
 * message shows), ERR_IO (connection lost mid-way). */
int rendezvous_fetch(const char *addr, int port, int rank, int world, void *blob, size_t bytes, double timeout_s);

/* The address of interface `ifname` (its first IPv4 one, else its first
 * IPv6 one) as text into addr[len], from getifaddrs(). Returns 0, or ERR_ARG
 * naming the interfaces that do have an address when ifname is not one of
 * them, ERR_RANGE when the address does not fit, or ERR_IO when the
 * interfaces cannot be listed. */
int rendezvous_if_addr(const char *ifname, char *addr, size_t len);

/* Both sides in one call: rank 0 listens on env->bind_addr (NULL: every
 * interface) at env->port, calls env->listening, and serves blob; the others
 * fetch it from env->master_addr:port. Returns what those return; a port
 * rank 0 cannot take is reported with env->port_why and the
 * DDP_RENDEZVOUS_PORT way out, and a rank that never came, with the one
 * address rank 0 listened on. */
int rendezvous_bcast(const struct rendezvous_env *env, void *blob, size_t bytes, double timeout_s);

#ifdef __cplusplus
}
#endif

#endif
