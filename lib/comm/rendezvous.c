/* rendezvous: rank 0 hands the same bytes to every other rank over TCP (see
 * rendezvous.h). Every socket is non-blocking and every wait is a poll()
 * bounded by one deadline, so a missing rank is a timeout that names it,
 * never a hang. */
#include "comm/rendezvous.h"

#include "base/clock.h"
#include "base/error.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define RDV_MAGIC 0x44445052u /* "DDPR" */
#define RDV_VERSION 1u
#define RDV_HELLO_BYTES 24
#define RDV_REPLY_BYTES 16

/* ---- the environment ------------------------------------------------------- */

/* An integer variable in [lo, hi]; `fallback` when unset and fallback >= lo. */
static int rdv_env_int(const char *name, int lo, int hi, int fallback, int *out)
{
    const char *text = getenv(name);
    if (!text || !*text) {
        if (fallback >= lo) {
            *out = fallback;
            return 0;
        }
        return err_set(ERR_ARG, "%s is not set (torchrun sets RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, "
                       "MASTER_PORT)", name);
    }
    char *end;
    errno = 0;
    long v = strtol(text, &end, 10);
    if (errno || *end || end == text || v < lo || v > hi)
        return err_set(ERR_ARG, "%s='%s': expected an integer from %d to %d", name, text, lo, hi);
    *out = (int)v;
    return 0;
}

/* The rendezvous port (see struct rendezvous_env in rendezvous.h). */
static int rdv_env_port(struct rendezvous_env *e)
{
    const char *own = getenv("DDP_RENDEZVOUS_PORT");
    if (own && *own) {
        e->port_why = "DDP_RENDEZVOUS_PORT";
        return rdv_env_int("DDP_RENDEZVOUS_PORT", 1, 65535, -1, &e->port);
    }
    const char *agent_store = getenv("TORCHELASTIC_USE_AGENT_STORE");
    if (agent_store && strcmp(agent_store, "True") == 0) {
        if (e->master_port == 65535)
            return err_set(ERR_ARG, "MASTER_PORT=65535 leaves no next port for the rendezvous (torchrun's agent "
                           "holds MASTER_PORT); set DDP_RENDEZVOUS_PORT");
        e->port = e->master_port + 1;
        e->port_why = "MASTER_PORT + 1, as torchrun's agent serves its own store on MASTER_PORT";
        return 0;
    }
    e->port = e->master_port;
    e->port_why = "MASTER_PORT";
    return 0;
}

int rendezvous_env_read(struct rendezvous_env *out)
{
    memset(out, 0, sizeof *out);
    int rc;
    if ((rc = rdv_env_int("WORLD_SIZE", 1, INT_MAX, -1, &out->world)) < 0 ||
        (rc = rdv_env_int("RANK", 0, INT_MAX, -1, &out->rank)) < 0 ||
        (rc = rdv_env_int("LOCAL_RANK", 0, INT_MAX, out->rank, &out->local_rank)) < 0 ||
        (rc = rdv_env_int("MASTER_PORT", 1, 65535, -1, &out->master_port)) < 0)
        return rc;
    if (out->rank >= out->world)
        return err_set(ERR_ARG, "RANK=%d is not below WORLD_SIZE=%d", out->rank, out->world);
    const char *addr = getenv("MASTER_ADDR");
    if (!addr || !*addr)
        return err_set(ERR_ARG, "MASTER_ADDR is not set (the host of rank 0; 127.0.0.1 on one node)");
    if (strlen(addr) >= sizeof out->master_addr)
        return err_set(ERR_ARG, "MASTER_ADDR is %zu characters long; at most %zu", strlen(addr),
                       sizeof out->master_addr - 1);
    strcpy(out->master_addr, addr);
    return rdv_env_port(out);
}

/* ---- bytes on the wire ------------------------------------------------------- */

static void rdv_put32(unsigned char *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (unsigned char)(v >> (24 - 8 * i));
}

static uint32_t rdv_get32(const unsigned char *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static void rdv_put64(unsigned char *p, uint64_t v)
{
    rdv_put32(p, (uint32_t)(v >> 32));
    rdv_put32(p + 4, (uint32_t)v);
}

static uint64_t rdv_get64(const unsigned char *p) { return (uint64_t)rdv_get32(p) << 32 | rdv_get32(p + 4); }

/* Waits for `events` on fd until deadline_ns. 1 ready, 0 timed out, -1 error. */
static int rdv_wait(int fd, short events, uint64_t deadline_ns)
{
    for (;;) {
        uint64_t now = clock_now_ns();
        if (now >= deadline_ns)
            return 0;
        uint64_t left_ms = (deadline_ns - now + 999999) / 1000000;
        struct pollfd p = {.fd = fd, .events = events};
        int n = poll(&p, 1, left_ms > INT_MAX ? INT_MAX : (int)left_ms);
        if (n > 0)
            return 1;
        if (n < 0 && errno != EINTR)
            return -1;
    }
}

/* Sends (dir 1) or receives (dir 0) exactly n bytes before deadline_ns.
 * 0, or -1 with errno (ETIMEDOUT, or ECONNRESET when the peer closed). */
static int rdv_move(int fd, void *buf, size_t n, int dir, uint64_t deadline_ns)
{
    unsigned char *p = buf;
    while (n > 0) {
        int ready = rdv_wait(fd, dir ? POLLOUT : POLLIN, deadline_ns);
        if (ready <= 0) {
            if (ready == 0)
                errno = ETIMEDOUT;
            return -1;
        }
        ssize_t k = dir ? send(fd, p, n, MSG_NOSIGNAL) : recv(fd, p, n, 0);
        if (k == 0) {
            errno = ECONNRESET;
            return -1;
        }
        if (k < 0) {
            if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)
                continue;
            return -1;
        }
        p += k;
        n -= (size_t)k;
    }
    return 0;
}

static uint64_t rdv_deadline(double timeout_s) { return clock_now_ns() + (uint64_t)(timeout_s * 1e9); }

static int rdv_resolve(const char *addr, int port, int passive, struct addrinfo **out)
{
    char service[16];
    snprintf(service, sizeof service, "%d", port);
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
                             .ai_flags = passive ? AI_PASSIVE : 0};
    int rc = getaddrinfo(addr, service, &hints, out);
    if (rc != 0)
        return err_set(ERR_ARG, "rendezvous: address '%s' port %d does not resolve: %s", addr ? addr : "*", port,
                       gai_strerror(rc));
    return 0;
}

/* ---- rank 0 ------------------------------------------------------------------ */

struct rendezvous {
    int fd;
    int port;
};

int rendezvous_listen(const char *bind_addr, int port, rendezvous_t **out)
{
    *out = NULL;
    if (port < 0 || port > 65535)
        return err_set(ERR_ARG, "rendezvous: port %d is not from 0 to 65535", port);
    struct addrinfo *ai;
    int rc = rdv_resolve(bind_addr, port, 1, &ai);
    if (rc < 0)
        return rc;
    int fd = -1, saved = 0;
    for (struct addrinfo *a = ai; a && fd < 0; a = a->ai_next) {
        fd = socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
        if (fd < 0) {
            saved = errno;
            continue;
        }
        int one = 1; /* a job restarted at once must not find its port in TIME_WAIT */
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        if (bind(fd, a->ai_addr, a->ai_addrlen) != 0 || listen(fd, SOMAXCONN) != 0) {
            saved = errno;
            close(fd);
            fd = -1;
        }
    }
    freeaddrinfo(ai);
    if (fd < 0)
        return err_set(ERR_IO, "rendezvous: rank 0 cannot listen on %s port %d: %s", bind_addr ? bind_addr : "*",
                       port, strerror(saved));
    struct sockaddr_storage sa;
    socklen_t len = sizeof sa;
    if (getsockname(fd, (struct sockaddr *)&sa, &len) != 0) {
        int saved_name = errno;
        close(fd);
        return err_set(ERR_IO, "rendezvous: rank 0 cannot read back its listening port: %s", strerror(saved_name));
    }
    rendezvous_t *r = malloc(sizeof *r);
    if (!r) {
        close(fd);
        return err_set(ERR_NOMEM, "rendezvous: out of memory");
    }
    r->fd = fd;
    r->port = ntohs(sa.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&sa)->sin6_port
                                             : ((struct sockaddr_in *)&sa)->sin_port);
    *out = r;
    return 0;
}

int rendezvous_port(const rendezvous_t *r) { return r->port; }

void rendezvous_close(rendezvous_t *r)
{
    if (!r)
        return;
    close(r->fd);
    free(r);
}

/* "2, 3 and 7": the ranks in 1..world-1 not marked in `came`. */
static void rdv_missing(const unsigned char *came, int world, char *buf, size_t len)
{
    size_t used = 0;
    int listed = 0;
    buf[0] = '\0';
    for (int r = 1; r < world && used + 16 < len; r++) {
        if (came[r])
            continue;
        used += (size_t)snprintf(buf + used, len - used, "%s%d", listed ? ", " : "", r);
        listed++;
    }
}

/* Reads one rank's hello from fd and answers it. Returns the rank served,
 * RDV_STRAY for a connection that is not one of ours (ignored), or a
 * negative ERR_* when a rank of this job is misconfigured. */
#define RDV_STRAY INT_MAX
static int rdv_answer(int fd, int world, const unsigned char *came, const void *blob, size_t bytes,
                      uint64_t deadline_ns)
{
    unsigned char hello[RDV_HELLO_BYTES], reply[RDV_REPLY_BYTES];
    /* a silent connection must not eat the whole timeout of the job */
    uint64_t hello_deadline = clock_now_ns() + 5000000000ull;
    if (rdv_move(fd, hello, sizeof hello, 0, hello_deadline < deadline_ns ? hello_deadline : deadline_ns) < 0 ||
        rdv_get32(hello) != RDV_MAGIC || rdv_get32(hello + 4) != RDV_VERSION)
        return RDV_STRAY;
    int rank = (int)rdv_get32(hello + 8), their_world = (int)rdv_get32(hello + 12);
    uint64_t their_bytes = rdv_get64(hello + 16);
    int rc = 0;
    if (their_world != world || their_bytes != bytes)
        rc = err_set(ERR_ARG, "rendezvous: rank %d says the job has %d ranks and a %llu-byte id; rank 0 says %d "
                     "ranks and %zu bytes (WORLD_SIZE differs between the ranks?)", rank, their_world,
                     (unsigned long long)their_bytes, world, bytes);
    else if (rank < 1 || rank >= world)
        rc = err_set(ERR_ARG, "rendezvous: a process announced rank %d, which is not from 1 to %d", rank, world - 1);
    else if (came[rank])
        rc = err_set(ERR_ARG, "rendezvous: rank %d connected twice (two processes with RANK=%d?)", rank, rank);
    rdv_put32(reply, (uint32_t)rc);
    rdv_put32(reply + 4, (uint32_t)world);
    rdv_put64(reply + 8, bytes);
    if (rdv_move(fd, reply, sizeof reply, 1, deadline_ns) < 0 ||
        (rc == 0 && rdv_move(fd, (void *)blob, bytes, 1, deadline_ns) < 0))
        return rc < 0 ? rc : err_set(ERR_IO, "rendezvous: sending the id to rank %d: %s", rank, strerror(errno));
    return rc < 0 ? rc : rank;
}

int rendezvous_serve(rendezvous_t *r, int world, const void *blob, size_t bytes, double timeout_s)
{
    if (world < 1)
        return err_set(ERR_ARG, "rendezvous: world %d", world);
    unsigned char *came = calloc((size_t)world, 1);
    if (!came)
        return err_set(ERR_NOMEM, "rendezvous: out of memory for %d ranks", world);
    uint64_t deadline = rdv_deadline(timeout_s);
    int rc = 0;
    for (int left = world - 1; left > 0 && rc == 0;) {
        int ready = rdv_wait(r->fd, POLLIN, deadline);
        if (ready == 0) {
            char missing[256];
            rdv_missing(came, world, missing, sizeof missing);
            rc = err_set(ERR_TIMEOUT, "rendezvous: rank 0 at port %d: rank(s) %s of %d never connected within %g s "
                         "(are they started, with MASTER_ADDR/MASTER_PORT pointing here?)", r->port, missing, world,
                         timeout_s);
            break;
        }
        int fd = ready < 0 ? -1 : accept4(r->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (ready > 0 && (errno == EAGAIN || errno == EINTR || errno == ECONNABORTED))
                continue;
            rc = err_set(ERR_IO, "rendezvous: rank 0 at port %d: accept: %s", r->port, strerror(errno));
            break;
        }
        int got = rdv_answer(fd, world, came, blob, bytes, deadline);
        close(fd);
        if (got < 0)
            rc = got;
        else if (got != RDV_STRAY) {
            came[got] = 1;
            left--;
        }
    }
    free(came);
    return rc;
}

/* ---- ranks 1 .. world-1 ---------------------------------------------------------- */

/* One connection attempt to any address of ai, bounded by deadline_ns.
 * Returns a connected non-blocking socket, or -1 with errno. */
static int rdv_connect(const struct addrinfo *ai, uint64_t deadline_ns)
{
    int saved = ECONNREFUSED;
    for (const struct addrinfo *a = ai; a; a = a->ai_next) {
        int fd = socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
        if (fd < 0) {
            saved = errno;
            continue;
        }
        if (connect(fd, a->ai_addr, a->ai_addrlen) == 0)
            return fd;
        if (errno == EINPROGRESS && rdv_wait(fd, POLLOUT, deadline_ns) > 0) {
            int err = 0;
            socklen_t len = sizeof err;
            getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
            if (err == 0)
                return fd;
            errno = err;
        }
        saved = errno == EINPROGRESS ? ETIMEDOUT : errno;
        close(fd);
    }
    errno = saved;
    return -1;
}

int rendezvous_fetch(const char *addr, int port, int rank, int world, void *blob, size_t bytes, double timeout_s)
{
    struct addrinfo *ai;
    int rc = rdv_resolve(addr, port, 0, &ai);
    if (rc < 0)
        return rc;
    uint64_t deadline = rdv_deadline(timeout_s), pause_ns = 10000000; /* 10 ms, doubling to 1 s */
    int fd;
    while ((fd = rdv_connect(ai, deadline)) < 0 && clock_now_ns() + pause_ns < deadline) {
        clock_sleep_ns(pause_ns); /* rank 0 is not listening yet: it may start last */
        pause_ns = pause_ns * 2 > 1000000000 ? 1000000000 : pause_ns * 2;
    }
    int saved = errno;
    freeaddrinfo(ai);
    if (fd < 0)
        return err_set(ERR_TIMEOUT, "rendezvous: rank %d: no rank 0 listening at %s:%d after %g s (last error: %s)",
                       rank, addr, port, timeout_s, strerror(saved));
    unsigned char hello[RDV_HELLO_BYTES], reply[RDV_REPLY_BYTES];
    rdv_put32(hello, RDV_MAGIC);
    rdv_put32(hello + 4, RDV_VERSION);
    rdv_put32(hello + 8, (uint32_t)rank);
    rdv_put32(hello + 12, (uint32_t)world);
    rdv_put64(hello + 16, bytes);
    if (rdv_move(fd, hello, sizeof hello, 1, deadline) < 0 || rdv_move(fd, reply, sizeof reply, 0, deadline) < 0)
        rc = err_set(errno == ETIMEDOUT ? ERR_TIMEOUT : ERR_IO, "rendezvous: rank %d: talking to rank 0 at %s:%d: %s",
                     rank, addr, port, strerror(errno));
    else if ((int32_t)rdv_get32(reply) != 0)
        rc = err_set(ERR_ARG, "rendezvous: rank %d: rank 0 at %s:%d refused us: it has %d ranks and a %llu-byte id, "
                     "we have %d and %zu (or our RANK is out of range or taken)", rank, addr, port,
                     (int)rdv_get32(reply + 4), (unsigned long long)rdv_get64(reply + 8), world, bytes);
    else if (rdv_move(fd, blob, bytes, 0, deadline) < 0)
        rc = err_set(ERR_IO, "rendezvous: rank %d: receiving %zu bytes from rank 0 at %s:%d: %s", rank, bytes, addr,
                     port, strerror(errno));
    close(fd);
    return rc;
}

int rendezvous_bcast(const struct rendezvous_env *env, void *blob, size_t bytes, double timeout_s)
{
    if (env->rank != 0)
        return rendezvous_fetch(env->master_addr, env->port, env->rank, env->world, blob, bytes, timeout_s);
    if (env->world == 1)
        return 0;
    rendezvous_t *r;
    int rc = rendezvous_listen(NULL, env->port, &r);
    if (rc == ERR_IO) /* most often: torchrun's agent or another job holds the port */
        return err_wrap(rc, "rendezvous port %d, from %s (if another process holds it, set DDP_RENDEZVOUS_PORT "
                        "to a free port for every rank)", env->port, env->port_why);
    if (rc < 0)
        return rc;
    rc = rendezvous_serve(r, env->world, blob, bytes, timeout_s);
    rendezvous_close(r);
    return rc;
}
