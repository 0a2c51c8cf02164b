/* launch_check: `chapter-5 --launch-check`, for ranks started torchrun-style.
 * Before any collective, every rank must reach rank 0; most multi-node hangs
 * at start-up ("NCCL timeout at init") are this step failing: a wrong
 * MASTER_ADDR, a closed port, a WORLD_SIZE that differs between nodes. This
 * check runs the same TCP rendezvous the NCCL backend uses for its id
 * (lib/comm/rendezvous.c), with a token from rank 0 in place of the id, so it
 * needs no GPU: every rank prints the token it got, and they must agree. */
#include "chapter5.h"

#include "base/clock.h"
#include "base/error.h"
#include "base/hash.h"
#include "comm/rendezvous.h"

#include <stdint.h>
#include <stdio.h>
#include <unistd.h>

struct ch5_listening {
    const char *where; /* " on ADDR (IFNAME) only", or "" */
    double timeout_s;
};

/* Rank 0, once its port is open: what it listens on and waits for. */
static void ch5_say_listening(const struct rendezvous_env *env, void *arg)
{
    const struct ch5_listening *l = arg;
    printf("rank 0 of %d: listening%s on port %d (%s), waiting %g s for %d rank(s)\n", env->world, l->where,
           env->port, env->port_why, l->timeout_s, env->world - 1);
    fflush(stdout);
}

int ch5_launch_check(double timeout_s, const char *ifname)
{
    struct rendezvous_env env;
    int rc = rendezvous_env_read(&env);
    if (rc < 0)
        return err_wrap(rc, "--launch-check is for ranks started torchrun-style");
    char bind_addr[64], where[160] = "";
    if (ifname && env.rank == 0) { /* only rank 0 listens: another node may name its interfaces otherwise */
        if ((rc = rendezvous_if_addr(ifname, bind_addr, sizeof bind_addr)) < 0)
            return err_wrap(rc, "--ifname=%s", ifname);
        env.bind_addr = bind_addr;
        env.bind_ifname = ifname;
        snprintf(where, sizeof where, " on %s (%s) only", bind_addr, ifname);
    }
    struct ch5_listening listening = {where, timeout_s};
    env.listening = ch5_say_listening;
    env.listening_arg = &listening;
    unsigned char token[8] = {0}; /* rank 0's, different every run: proof that the bytes came from it */
    if (env.rank == 0) {
        uint64_t t = hash_splitmix64(clock_now_ns() ^ (uint64_t)getpid() << 32);
        for (int i = 0; i < 8; i++)
            token[i] = (unsigned char)(t >> (8 * i));
    }
    if ((rc = rendezvous_bcast(&env, token, sizeof token, timeout_s)) == ERR_TIMEOUT) { /* a rank only slow to start */
        char said[1200];
        snprintf(said, sizeof said, "%s", err_msg());
        err_set(rc, "%s; --timeout=SECONDS waits longer", said);
    }
    if (rc < 0)
        return err_wrap(rc, "rank %d of %d", env.rank, env.world);
    printf("rank %d of %d (local rank %d): reached rank 0 at %s:%d, token ", env.rank, env.world, env.local_rank,
           env.master_addr, env.port);
    for (int i = 0; i < 8; i++)
        printf("%02x", token[i]);
    printf("\n");
    fflush(stdout);
    return 0;
}
