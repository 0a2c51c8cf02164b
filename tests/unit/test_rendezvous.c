/* test_rendezvous: the torchrun-style TCP rendezvous (lib/comm/rendezvous.c), on
 * the loopback interface only: rank 0 and the other ranks are threads of this
 * process. The environment parser, a 4-rank exchange, ranks that start before
 * rank 0, and each failure named: a rank that never comes, no rank 0, a world
 * mismatch, a rank number used twice, stray and silent connections (served
 * around, never in the way), another program answering on rank 0's port, a
 * rank 0 reached by IPv6 and IPv4, timeouts too short to mean anything; --ifname's
 * interface lookup and a rank 0 bound to one address (the runs across two real
 * nodes, and the firewall, are tests/mpi/two_nodes.sh's). */
#include "check.h"
#include "base/clock.h"
#include "base/error.h"
#include "comm/rendezvous.h"

#include <math.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define ID_BYTES 128 /* NCCL_UNIQUE_ID_BYTES */

/* ---- the environment ----------------------------------------------------------- */

static void env_set(const char *rank, const char *world, const char *local, const char *addr, const char *port)
{
    const char *names[] = {"RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"};
    const char *values[] = {rank, world, local, addr, port};
    for (int i = 0; i < 5; i++)
        values[i] ? setenv(names[i], values[i], 1) : unsetenv(names[i]);
}

TEST(rendezvous_env_torchrun)
{
    struct rendezvous_env e;
    env_set("3", "8", "1", "node0.example", "29500");
    CHECK_OK(rendezvous_env_read(&e));
    CHECK_EQ(e.rank, 3);
    CHECK_EQ(e.world, 8);
    CHECK_EQ(e.local_rank, 1);
    CHECK_STR(e.master_addr, "node0.example");
    CHECK_EQ(e.master_port, 29500);
    env_set("2", "4", NULL, "127.0.0.1", "29500"); /* LOCAL_RANK defaults to RANK */
    CHECK_OK(rendezvous_env_read(&e));
    CHECK_EQ(e.local_rank, 2);
}

TEST(rendezvous_env_errors_name_the_variable)
{
    struct rendezvous_env e;
    env_set("0", NULL, NULL, "127.0.0.1", "29500");
    CHECK_ERR(rendezvous_env_read(&e), ERR_ARG, "WORLD_SIZE is not set");
    env_set("4", "4", NULL, "127.0.0.1", "29500");
    CHECK_ERR(rendezvous_env_read(&e), ERR_ARG, "RANK=4 is not below WORLD_SIZE=4");
    env_set("1x", "4", NULL, "127.0.0.1", "29500");
    CHECK_ERR(rendezvous_env_read(&e), ERR_ARG, "RANK='1x': expected 0 to 2147483647");
    env_set(" 1", "4", NULL, "127.0.0.1", "29500"); /* strtol would skip the space */
    CHECK_ERR(rendezvous_env_read(&e), ERR_ARG, "RANK=' 1'");
    env_set("1", "4", NULL, "127.0.0.1", "29500 ");
    CHECK_ERR(rendezvous_env_read(&e), ERR_ARG, "MASTER_PORT='29500 '");
    env_set("0", "4", NULL, "127.0.0.1", "70000");
    CHECK_ERR(rendezvous_env_read(&e), ERR_ARG, "MASTER_PORT='70000'");
    env_set("0", "4", NULL, NULL, "29500");
    CHECK_ERR(rendezvous_env_read(&e), ERR_ARG, "MASTER_ADDR is not set");
    env_set("0", "0", NULL, "127.0.0.1", "29500");
    CHECK_ERR(rendezvous_env_read(&e), ERR_ARG, "WORLD_SIZE='0'");
}

/* LOCAL_RANK picks the GPU: one past its node's ranks, or past the job's, was
 * taken as it came ("local rank 5" in a job of 1) */
TEST(rendezvous_env_local_rank_within_its_node)
{
    struct rendezvous_env e;
    env_set("1", "4", "1", "127.0.0.1", "29500");
    setenv("LOCAL_WORLD_SIZE", "2", 1);
    CHECK_OK(rendezvous_env_read(&e));
    env_set("3", "4", "2", "127.0.0.1", "29500");
    CHECK_ERR(rendezvous_env_read(&e), ERR_ARG, "LOCAL_RANK=2 is not below LOCAL_WORLD_SIZE=2");
    setenv("LOCAL_WORLD_SIZE", "8", 1);
    CHECK_ERR(rendezvous_env_read(&e), ERR_ARG, "LOCAL_WORLD_SIZE='8': expected 1 to 4");
    unsetenv("LOCAL_WORLD_SIZE");
    env_set("0", "1", "5", "127.0.0.1", "29500");
    CHECK_ERR(rendezvous_env_read(&e), ERR_ARG, "LOCAL_RANK=5 is not below WORLD_SIZE=1");
}

/* Where rank 0 listens: MASTER_PORT, unless torchrun's agent holds it
 * (TORCHELASTIC_USE_AGENT_STORE=True: the next port) or DDP_RENDEZVOUS_PORT
 * says otherwise. */
TEST(rendezvous_env_port_steps_around_torchruns_store)
{
    struct rendezvous_env e;
    env_set("1", "2", NULL, "127.0.0.1", "29500");
    unsetenv("DDP_RENDEZVOUS_PORT");
    unsetenv("TORCHELASTIC_USE_AGENT_STORE");
    CHECK_OK(rendezvous_env_read(&e));
    CHECK_EQ(e.port, 29500);
    setenv("TORCHELASTIC_USE_AGENT_STORE", "False", 1); /* torchrun --standalone: MASTER_PORT is free */
    CHECK_OK(rendezvous_env_read(&e));
    CHECK_EQ(e.port, 29500);
    setenv("TORCHELASTIC_USE_AGENT_STORE", "True", 1);
    CHECK_OK(rendezvous_env_read(&e));
    CHECK_EQ(e.master_port, 29500);
    CHECK_EQ(e.port, 29501);
    CHECK_CONTAINS(e.port_why, "torchrun's agent");
    setenv("DDP_RENDEZVOUS_PORT", "41000", 1);
    CHECK_OK(rendezvous_env_read(&e));
    CHECK_EQ(e.port, 41000);
    setenv("DDP_RENDEZVOUS_PORT", "0", 1);
    CHECK_ERR(rendezvous_env_read(&e), ERR_ARG, "DDP_RENDEZVOUS_PORT='0'");
    unsetenv("DDP_RENDEZVOUS_PORT");
    env_set("1", "2", NULL, "127.0.0.1", "65535");
    CHECK_ERR(rendezvous_env_read(&e), ERR_ARG, "MASTER_PORT=65535 leaves no next port");
}

/* A port that is taken is reported with how it was chosen and the way out. */
TEST(rendezvous_taken_port_names_the_way_out)
{
    rendezvous_t *holder; /* plays torchrun's agent */
    CHECK_OK(rendezvous_listen(NULL, 0, &holder));
    char port[16];
    snprintf(port, sizeof port, "%d", rendezvous_port(holder));
    env_set("0", "2", NULL, "127.0.0.1", port);
    unsetenv("DDP_RENDEZVOUS_PORT");
    unsetenv("TORCHELASTIC_USE_AGENT_STORE");
    struct rendezvous_env e;
    CHECK_OK(rendezvous_env_read(&e));
    unsigned char id[ID_BYTES];
    CHECK_ERR(rendezvous_bcast(&e, id, ID_BYTES, 1), ERR_IO, "Address already in use");
    CHECK_CONTAINS(err_msg(), "from MASTER_PORT (if another process holds it, set DDP_RENDEZVOUS_PORT");
    rendezvous_close(holder);
}

/* ---- exchanges over loopback ------------------------------------------------------ */

struct peer {
    pthread_t thread;
    const char *addr;
    int port, rank, world;
    size_t bytes;
    double timeout_s;
    uint64_t start_delay_ns;
    unsigned char blob[ID_BYTES];
    int rc;
    char msg[512];
};

static void *peer_main(void *arg)
{
    struct peer *p = arg;
    if (p->start_delay_ns)
        clock_sleep_ns(p->start_delay_ns);
    p->rc = rendezvous_fetch(p->addr, p->port, p->rank, p->world, p->blob, p->bytes, p->timeout_s);
    snprintf(p->msg, sizeof p->msg, "%s", err_msg());
    return NULL;
}

static void peer_start_at(struct peer *p, const char *addr, int port, int rank, int world, double timeout_s)
{
    memset(p, 0, sizeof *p);
    p->addr = addr, p->port = port, p->rank = rank, p->world = world, p->bytes = ID_BYTES, p->timeout_s = timeout_s;
    CHECK(pthread_create(&p->thread, NULL, peer_main, p) == 0);
}

static void peer_start(struct peer *p, int port, int rank, int world, double timeout_s)
{
    peer_start_at(p, "127.0.0.1", port, rank, world, timeout_s);
}

static void blob_fill(unsigned char *blob)
{
    for (int i = 0; i < ID_BYTES; i++)
        blob[i] = (unsigned char)(i * 37 + 11);
}

/* Rank 0 listening on a free loopback port, with its id in `id`. */
static rendezvous_t *rank0_listen(unsigned char *id)
{
    blob_fill(id);
    rendezvous_t *r;
    CHECK_OK(rendezvous_listen("127.0.0.1", 0, &r));
    return r;
}

/* A port nobody listens on right now (bound, then released). */
static int free_port(void)
{
    rendezvous_t *r;
    CHECK_OK(rendezvous_listen("127.0.0.1", 0, &r));
    int port = rendezvous_port(r);
    rendezvous_close(r);
    return port;
}

TEST(rendezvous_four_ranks_get_the_same_bytes)
{
    unsigned char id[ID_BYTES];
    rendezvous_t *r = rank0_listen(id);
    CHECK(rendezvous_port(r) > 0);
    struct peer peers[3];
    for (int i = 0; i < 3; i++)
        peer_start(&peers[i], rendezvous_port(r), 3 - i, 4, 10);
    CHECK_OK(rendezvous_serve(r, 4, id, ID_BYTES, 10));
    rendezvous_close(r);
    for (int i = 0; i < 3; i++) {
        pthread_join(peers[i].thread, NULL);
        CHECK_MSG(peers[i].rc == 0, "rank %d: %s", peers[i].rank, peers[i].msg);
        CHECK(memcmp(peers[i].blob, id, ID_BYTES) == 0);
    }
}

/* Rank 0 on every interface is reached by IPv6 and IPv4 alike: it once
 * listened on 0.0.0.0 alone, and MASTER_ADDR=::1 was refused. */
TEST(rendezvous_rank_0_takes_ipv6_and_ipv4)
{
    int probe = socket(AF_INET6, SOCK_STREAM, 0);
    struct sockaddr_in6 lo6 = {.sin6_family = AF_INET6, .sin6_addr = IN6ADDR_LOOPBACK_INIT};
    int have_ipv6 = probe >= 0 && bind(probe, (struct sockaddr *)&lo6, sizeof lo6) == 0;
    if (probe >= 0)
        close(probe);
    if (!have_ipv6)
        CHECK_SKIP("this host has no IPv6 loopback (::1)");
    unsigned char id[ID_BYTES];
    blob_fill(id);
    rendezvous_t *r;
    CHECK_OK(rendezvous_listen(NULL, 0, &r));
    struct peer a, b;
    peer_start_at(&a, "::1", rendezvous_port(r), 1, 3, 10);
    peer_start_at(&b, "127.0.0.1", rendezvous_port(r), 2, 3, 10);
    CHECK_OK(rendezvous_serve(r, 3, id, ID_BYTES, 10));
    rendezvous_close(r);
    pthread_join(a.thread, NULL);
    pthread_join(b.thread, NULL);
    CHECK_MSG(a.rc == 0 && b.rc == 0, "::1: %s; 127.0.0.1: %s", a.msg, b.msg);
    CHECK(memcmp(a.blob, id, ID_BYTES) == 0 && memcmp(b.blob, id, ID_BYTES) == 0);
}

/* Ranks started before rank 0 retry until it listens (torchrun starts them in
 * any order). */
TEST(rendezvous_ranks_wait_for_a_late_rank_0)
{
    unsigned char id[ID_BYTES];
    blob_fill(id);
    int port = free_port();
    struct peer p;
    peer_start(&p, port, 1, 2, 10);
    clock_sleep_ns(300000000); /* the peer has been refused a few times by now */
    rendezvous_t *r;
    CHECK_OK(rendezvous_listen("127.0.0.1", port, &r));
    CHECK_OK(rendezvous_serve(r, 2, id, ID_BYTES, 10));
    rendezvous_close(r);
    pthread_join(p.thread, NULL);
    CHECK_MSG(p.rc == 0, "%s", p.msg);
    CHECK(memcmp(p.blob, id, ID_BYTES) == 0);
}

TEST(rendezvous_names_the_ranks_that_never_came)
{
    unsigned char id[ID_BYTES];
    rendezvous_t *r = rank0_listen(id);
    struct peer a, b;
    peer_start(&a, rendezvous_port(r), 1, 5, 10);
    peer_start(&b, rendezvous_port(r), 3, 5, 10);
    CHECK_ERR(rendezvous_serve(r, 5, id, ID_BYTES, 0.5), ERR_TIMEOUT, "rank(s) 2, 4 of 5 never connected");
    rendezvous_close(r);
    pthread_join(a.thread, NULL);
    pthread_join(b.thread, NULL);
    CHECK_EQ(a.rc, 0);
    CHECK_EQ(b.rc, 0);
}

TEST(rendezvous_no_rank_0_is_a_timeout)
{
    unsigned char blob[ID_BYTES];
    int port = free_port();
    CHECK_ERR(rendezvous_fetch("127.0.0.1", port, 1, 2, blob, ID_BYTES, 0.3), ERR_TIMEOUT, "no rank 0 listening at");
    /* refused, not dropped: nothing listens there (the dropped case needs a firewall: tests/mpi/two_nodes.sh) */
    CHECK_CONTAINS(err_msg(), "after 0.3 s: connection refused (rank 0 not started? or it listens on another");
    /* and it is after 0.3 s: the retries once stopped when the next pause would pass the deadline, 0.15 s in
     * (up to a second early on any timeout), missing a rank 0 that started in time */
    uint64_t t0 = clock_now_ns();
    CHECK_ERR(rendezvous_fetch("127.0.0.1", port, 1, 2, blob, ID_BYTES, 0.3), ERR_TIMEOUT, "after 0.3 s");
    CHECK_MSG(clock_now_ns() - t0 >= 300000000, "gave up after %.3f s of its 0.3", (clock_now_ns() - t0) / 1e9);
}

/* --ifname's lookup: lo is 127.0.0.1 on every Linux machine */
TEST(rendezvous_if_addr_names_the_interfaces)
{
    char addr[64];
    CHECK_OK(rendezvous_if_addr("lo", addr, sizeof addr));
    CHECK_STR(addr, "127.0.0.1");
    CHECK_ERR(rendezvous_if_addr("no-such-if0", addr, sizeof addr), ERR_ARG, "no interface 'no-such-if0'");
    CHECK_CONTAINS(err_msg(), "the interfaces with an IPv4 address are: ");
    CHECK_CONTAINS(err_msg(), "lo (127.0.0.1)");
    CHECK_ERR(rendezvous_if_addr("lo", addr, 9), ERR_RANGE, "address 127.0.0.1 does not fit in 9 bytes");
}

/* Rank 0 bound to one address says so when a rank never comes: the likeliest cause */
TEST(rendezvous_bound_rank_0_names_its_address)
{
    char port[16];
    snprintf(port, sizeof port, "%d", free_port());
    env_set("0", "2", NULL, "127.0.0.1", port);
    unsetenv("DDP_RENDEZVOUS_PORT");
    unsetenv("TORCHELASTIC_USE_AGENT_STORE");
    struct rendezvous_env e;
    CHECK_OK(rendezvous_env_read(&e));
    e.bind_addr = "127.0.0.1";
    e.bind_ifname = "lo";
    unsigned char id[ID_BYTES];
    CHECK_ERR(rendezvous_bcast(&e, id, ID_BYTES, 0.3), ERR_TIMEOUT, "rank(s) 1 of 2 never connected within 0.3 s");
    CHECK_CONTAINS(err_msg(), "; rank 0 listened on 127.0.0.1 (interface lo) only");
}

TEST(rendezvous_world_mismatch_is_named_on_both_sides)
{
    unsigned char id[ID_BYTES];
    rendezvous_t *r = rank0_listen(id);
    struct peer p;
    peer_start(&p, rendezvous_port(r), 1, 3, 10);
    CHECK_ERR(rendezvous_serve(r, 2, id, ID_BYTES, 10), ERR_ARG, "rank 1 says the job has 3 ranks");
    rendezvous_close(r);
    pthread_join(p.thread, NULL);
    CHECK_EQ(p.rc, ERR_ARG);
    CHECK_CONTAINS(p.msg, "refused us: it has 2 ranks");
}

TEST(rendezvous_rank_used_twice)
{
    unsigned char id[ID_BYTES];
    rendezvous_t *r = rank0_listen(id);
    struct peer a, b;
    peer_start(&a, rendezvous_port(r), 1, 3, 10);
    peer_start(&b, rendezvous_port(r), 1, 3, 10);
    /* or another job's rank 1, whose rank 0 found the port taken */
    CHECK_ERR(rendezvous_serve(r, 3, id, ID_BYTES, 10), ERR_ARG,
              "rank 1 connected twice (two processes with RANK=1, or two jobs on one MASTER_PORT?)");
    rendezvous_close(r);
    pthread_join(a.thread, NULL);
    pthread_join(b.thread, NULL);
    /* the first to connect is served, the second refused: which one that is, the scheduler decides */
    CHECK_MSG((a.rc == 0 && b.rc == ERR_ARG) || (a.rc == ERR_ARG && b.rc == 0),
              "the two peers claiming rank 1 got %d and %d: one must be served (0), the other refused (%d)", a.rc,
              b.rc, ERR_ARG);
}

/* Rank 0 serves a world of 2 whose rank 1 starts now; both must succeed
 * within timeout_s. Closes r. */
static void serve_rank_1_and_close(rendezvous_t *r, const unsigned char *id, double timeout_s)
{
    struct peer p;
    peer_start(&p, rendezvous_port(r), 1, 2, 10);
    CHECK_OK(rendezvous_serve(r, 2, id, ID_BYTES, timeout_s));
    rendezvous_close(r);
    pthread_join(p.thread, NULL);
    CHECK_MSG(p.rc == 0, "%s", p.msg);
    CHECK(memcmp(p.blob, id, ID_BYTES) == 0);
}

/* A connection to localhost:port that has said nothing yet. */
static int loopback_connection(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    CHECK(fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof sa) == 0);
    return fd;
}

/* Something that is not a rank (a port scanner, a health check) connects
 * first: it is ignored, and the real rank is served. */
TEST(rendezvous_ignores_a_stray_connection)
{
    unsigned char id[ID_BYTES];
    rendezvous_t *r = rank0_listen(id);
    int fd = loopback_connection(rendezvous_port(r));
    CHECK(write(fd, "GET / HTTP/1.0\r\n\r\n\r\n", 20) == 20);
    close(fd);
    serve_rank_1_and_close(r, id, 10);
}

/* Three connections that never say a word reach rank 0 first. Served one
 * after the other, each would hold rank 0 for its 5 s of silence, and rank 1,
 * waiting behind them, would be reported as never connected. */
TEST(rendezvous_serves_around_silent_connections)
{
    unsigned char id[ID_BYTES];
    rendezvous_t *r = rank0_listen(id);
    int silent[3];
    for (int i = 0; i < 3; i++)
        silent[i] = loopback_connection(rendezvous_port(r));
    serve_rank_1_and_close(r, id, 4);
    for (int i = 0; i < 3; i++)
        close(silent[i]);
}

/* More silent connections than rank 0 keeps at once: the oldest make room,
 * the ranks still get through, and a timeout says what else came. */
TEST(rendezvous_survives_a_flood_of_silent_connections)
{
    unsigned char id[ID_BYTES];
    rendezvous_t *r = rank0_listen(id);
    enum { FLOOD = 300 };
    int silent[FLOOD];
    for (int i = 0; i < FLOOD; i++)
        silent[i] = loopback_connection(rendezvous_port(r));
    struct peer p;
    peer_start(&p, rendezvous_port(r), 2, 3, 10);
    CHECK_ERR(rendezvous_serve(r, 3, id, ID_BYTES, 1), ERR_TIMEOUT, "rank(s) 1 of 3 never connected within 1 s");
    CHECK_CONTAINS(err_msg(), "other connection(s) were not ranks of this job and were ignored");
    rendezvous_close(r);
    pthread_join(p.thread, NULL);
    CHECK_MSG(p.rc == 0, "rank 2 behind the flood: %s", p.msg);
    for (int i = 0; i < FLOOD; i++)
        close(silent[i]);
}

/* Another program on rank 0's port: it takes the hello and answers with its
 * own bytes, then hangs up. */
struct impostor {
    pthread_t thread;
    int fd;
    const void *answer;
    size_t len;
};

static void *impostor_main(void *arg)
{
    struct impostor *m = arg;
    int c = accept(m->fd, NULL, NULL);
    char hello[24];
    if (c >= 0 && recv(c, hello, sizeof hello, MSG_WAITALL) == (ssize_t)sizeof hello)
        (void)!write(c, m->answer, m->len);
    if (c >= 0)
        close(c);
    return NULL;
}

/* Rank 1 fetches from an impostor answering `answer`; returns its result. */
static int fetch_from_impostor(const void *answer, size_t len)
{
    struct impostor m = {.answer = answer, .len = len};
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t sl = sizeof sa;
    m.fd = socket(AF_INET, SOCK_STREAM, 0);
    CHECK(m.fd >= 0 && bind(m.fd, (struct sockaddr *)&sa, sizeof sa) == 0 && listen(m.fd, 4) == 0 &&
          getsockname(m.fd, (struct sockaddr *)&sa, &sl) == 0);
    CHECK(pthread_create(&m.thread, NULL, impostor_main, &m) == 0);
    unsigned char blob[ID_BYTES];
    int rc = rendezvous_fetch("127.0.0.1", ntohs(sa.sin_port), 1, 2, blob, ID_BYTES, 10);
    pthread_join(m.thread, NULL);
    close(m.fd);
    return rc;
}

/* An HTTP server, or torchrun's store, on the port is named as another
 * program: its bytes are neither taken for a refusal with a nonsense world
 * nor, when they happen to start with a zero status, for the id. */
TEST(rendezvous_another_program_on_the_port_is_named)
{
    const char http[] = "HTTP/1.1 400 Bad Request\r\nconnection: close\r\n\r\n";
    CHECK_ERR(fetch_from_impostor(http, sizeof http - 1), ERR_ARG,
              "is not our rank 0 (it said \"HTTP/1.1 400 Bad\"): another program listens on that port");
    unsigned char zeros[16 + ID_BYTES] = {0};
    CHECK_ERR(fetch_from_impostor(zeros, sizeof zeros), ERR_ARG, "is not our rank 0 (it said \"................\")");
}

/* Deadlines shorter than a thread's wait for a core would name ranks that
 * are only starting; NaN and absurd ones are refused too. */
TEST(rendezvous_refuses_timeouts_that_mean_nothing)
{
    unsigned char id[ID_BYTES];
    rendezvous_t *r = rank0_listen(id);
    CHECK_ERR(rendezvous_serve(r, 2, id, ID_BYTES, 1e-300), ERR_ARG, "timeout must be 0.01 .. 1e+06 s");
    CHECK_ERR(rendezvous_serve(r, 2, id, ID_BYTES, NAN), ERR_ARG, "timeout must be");
    CHECK_ERR(rendezvous_fetch("127.0.0.1", rendezvous_port(r), 1, 2, id, ID_BYTES, 1e300), ERR_ARG,
              "timeout must be");
    rendezvous_close(r);
}
