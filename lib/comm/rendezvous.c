/* rendezvous: rank 0 hands the same bytes to every other rank over TCP (see
 * rendezvous.h). Every socket is non-blocking and every wait is a poll()
 * bounded by one deadline, so a missing rank is a timeout that names it,
 * never a hang. */
#include "comm/rendezvous.h"

#include "base/cli.h"
#include "base/clock.h"
#include "base/error.h"
#include "comm/comm.h"

#include <errno.h>
#include <arpa/inet.h>
#include <fcntl.h>
#include <ifaddrs.h>
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
    uint64_t v;
    int rc = cli_parse_env(name, text, (uint64_t)lo, (uint64_t)hi, &v);
    if (rc == 0)
        *out = (int)v;
    return rc;
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
    /* LOCAL_RANK picks this rank's GPU: a node holds at most the job, and LOCAL_WORLD_SIZE of it when set */
    int local_world;
    if ((rc = rdv_env_int("LOCAL_WORLD_SIZE", 1, out->world, out->world, &local_world)) < 0)
        return err_wrap(rc, "the ranks on this node, at most WORLD_SIZE");
    if (out->local_rank >= local_world)
        return err_set(ERR_ARG, "LOCAL_RANK=%d is not below %s=%d", out->local_rank,
                       getenv("LOCAL_WORLD_SIZE") && *getenv("LOCAL_WORLD_SIZE") ? "LOCAL_WORLD_SIZE" : "WORLD_SIZE",
                       local_world);
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
        uint64_t left = deadline_ns - now, left_ms = left / 1000000 + (left % 1000000 != 0);
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

/* The rendezvous waits as the communicators do: COMM_MIN_TIMEOUT_S ..
 * COMM_MAX_TIMEOUT_S (comm.h says why), so a tiny timeout cannot blame a
 * rank that was only being started. */
static int rdv_check_timeout(double timeout_s)
{
    if (!(timeout_s >= COMM_MIN_TIMEOUT_S && timeout_s <= COMM_MAX_TIMEOUT_S)) /* NaN too */
        return err_set(ERR_ARG, "rendezvous: timeout must be %g .. %g s, got %g s", COMM_MIN_TIMEOUT_S,
                       COMM_MAX_TIMEOUT_S, timeout_s);
    return 0;
}

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

/* A listening socket on address a (IPv6 taking IPv4 too when dual), or -1
 * with the error in *saved. */
static int rdv_listen_on(const struct addrinfo *a, int dual, int *saved)
{
    int fd = socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) {
        *saved = errno;
        return -1;
    }
    int one = 1, v6only = !dual; /* SO_REUSEADDR: a job restarted at once must not find its port in TIME_WAIT */
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if ((dual && setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &v6only, sizeof v6only) != 0) ||
        bind(fd, a->ai_addr, a->ai_addrlen) != 0 || listen(fd, SOMAXCONN) != 0) {
        *saved = errno;
        close(fd);
        return -1;
    }
    return fd;
}

int rendezvous_listen(const char *bind_addr, int port, rendezvous_t **out)
{
    *out = NULL;
    if (port < 0 || port > 65535)
        return err_set(ERR_ARG, "rendezvous: port %d is not from 0 to 65535", port);
    struct addrinfo *ai;
    int rc = rdv_resolve(bind_addr, port, 1, &ai);
    if (rc < 0)
        return rc;
    /* Every interface: IPv6's "::" first, taking IPv4 too, so that a
     * MASTER_ADDR of ::1 or of the host's IPv6 address reaches rank 0 as
     * 127.0.0.1 does; "0.0.0.0" where the host has no IPv6. */
    int fd = -1, saved = 0;
    for (struct addrinfo *a = ai; a && fd < 0 && !bind_addr; a = a->ai_next)
        if (a->ai_family == AF_INET6)
            fd = rdv_listen_on(a, 1, &saved);
    for (struct addrinfo *a = ai; a && fd < 0; a = a->ai_next)
        if (bind_addr || a->ai_family != AF_INET6)
            fd = rdv_listen_on(a, 0, &saved);
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

/* Rank 0 serves every connection at once: a connection that says nothing
 * (a port scanner, a health check, a rank of another job stuck half-way)
 * must not delay the ranks behind it. Each accepted connection is a small
 * state machine (read the 24-byte hello, then write the reply and the
 * bytes), all of them driven by one poll() over the listener and every
 * connection. */
#define RDV_SILENCE_NS 5000000000ull /* a connection silent this long is dropped */
#define RDV_MAX_CONNS 256            /* more at once: the oldest silent one is dropped */

struct rdv_conn {
    int fd;
    uint64_t silent_until; /* the hello must be complete by then */
    unsigned char hello[RDV_HELLO_BYTES];
    size_t got;            /* hello bytes received */
    int rank;              /* > 0 once its hello was accepted: then sending */
    size_t sent;           /* bytes of the answer sent */
};

struct rdv_server {
    rendezvous_t *r;
    int world;
    size_t bytes;
    unsigned char *answer; /* the reply (status 0, world, bytes) and the bytes */
    size_t answer_len;
    unsigned char *came;   /* came[rank]: its hello was accepted */
    int served;            /* ranks that got the whole answer */
    struct rdv_conn conns[RDV_MAX_CONNS];
    int nconns;
    unsigned strays;       /* connections dropped: not one of ours, or silent */
};

/* Closes connection i; rdv_compact() removes it after the round, so the
 * others keep their order (first connected, first served). */
static void rdv_drop(struct rdv_server *sv, int i, int stray)
{
    close(sv->conns[i].fd);
    sv->conns[i].fd = -1;
    sv->strays += (unsigned)stray;
}

static void rdv_compact(struct rdv_server *sv)
{
    int kept = 0;
    for (int i = 0; i < sv->nconns; i++)
        if (sv->conns[i].fd >= 0)
            sv->conns[kept++] = sv->conns[i];
    sv->nconns = kept;
}

/* Checks a complete hello. 0 (the rank is reserved), 1 for a connection
 * that is not one of ours, or a negative ERR_* for a rank of this job that
 * is misconfigured: it is told so (best effort), and the rendezvous fails. */
static int rdv_accept_hello(struct rdv_server *sv, struct rdv_conn *k)
{
    if (rdv_get32(k->hello) != RDV_MAGIC || rdv_get32(k->hello + 4) != RDV_VERSION)
        return 1;
    int rank = (int)rdv_get32(k->hello + 8), their_world = (int)rdv_get32(k->hello + 12);
    uint64_t their_bytes = rdv_get64(k->hello + 16);
    int rc = 0;
    if (their_world != sv->world || their_bytes != sv->bytes)
        rc = err_set(ERR_ARG, "rendezvous: rank %d says the job has %d ranks and a %llu-byte id; rank 0 says %d "
                     "ranks and %zu bytes (WORLD_SIZE differs between the ranks?)", rank, their_world,
                     (unsigned long long)their_bytes, sv->world, sv->bytes);
    else if (rank < 1 || rank >= sv->world)
        rc = err_set(ERR_ARG, "rendezvous: a process announced rank %d, which is not from 1 to %d", rank,
                     sv->world - 1);
    else if (sv->came[rank])
        rc = err_set(ERR_ARG, "rendezvous: rank %d connected twice (two processes with RANK=%d, or two jobs on one "
                     "MASTER_PORT?)", rank, rank);
    if (rc < 0) {
        unsigned char refusal[RDV_REPLY_BYTES];
        memcpy(refusal, sv->answer, sizeof refusal);
        rdv_put32(refusal, (uint32_t)rc);
        char keep[1024];
        snprintf(keep, sizeof keep, "%s", err_msg()); /* the refusal is ours to report, not a send error */
        (void)rdv_move(k->fd, refusal, sizeof refusal, 1, clock_deadline_ns(1000000000ull));
        return err_set(rc, "%s", keep);
    }
    sv->came[rank] = 1;
    k->rank = rank;
    return 0;
}

/* Moves connection i along after poll() said it is ready: reads its hello,
 * or writes its answer. 0 (dropped or not), or a negative ERR_*. */
static int rdv_progress(struct rdv_server *sv, int i)
{
    struct rdv_conn *k = &sv->conns[i];
    if (k->rank == 0) {
        ssize_t n = recv(k->fd, k->hello + k->got, sizeof k->hello - k->got, 0);
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
            return 0;
        if (n <= 0) { /* closed or failed before saying who it is */
            rdv_drop(sv, i, 1);
            return 0;
        }
        k->got += (size_t)n;
        if (k->got < sizeof k->hello)
            return 0;
        int rc = rdv_accept_hello(sv, k);
        if (rc != 0) {
            rdv_drop(sv, i, rc > 0);
            return rc < 0 ? rc : 0;
        }
        /* accepted: answer at once (an empty socket buffer takes it whole) */
    }
    ssize_t n = send(k->fd, sv->answer + k->sent, sv->answer_len - k->sent, MSG_NOSIGNAL);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
        return 0;
    if (n < 0)
        return err_set(ERR_IO, "rendezvous: sending the id to rank %d: %s", k->rank, strerror(errno));
    k->sent += (size_t)n;
    if (k->sent == sv->answer_len) {
        sv->served++;
        rdv_drop(sv, i, 0);
    }
    return 0;
}

/* Accepts every pending connection; when the table is full, the oldest
 * connection still silent makes room. 0 or ERR_IO. */
static int rdv_accept_all(struct rdv_server *sv)
{
    for (;;) {
        int fd = accept4(sv->r->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR || errno == ECONNABORTED)
                return 0;
            return err_set(ERR_IO, "rendezvous: rank 0 at port %d: accept: %s", sv->r->port, strerror(errno));
        }
        if (sv->nconns == RDV_MAX_CONNS) {
            int oldest = -1;
            for (int i = 0; i < sv->nconns; i++)
                if (sv->conns[i].rank == 0 &&
                    (oldest < 0 || sv->conns[i].silent_until < sv->conns[oldest].silent_until))
                    oldest = i;
            if (oldest < 0) { /* every slot is sending to a rank: this one waits in no queue */
                close(fd);
                sv->strays++;
                continue;
            }
            rdv_drop(sv, oldest, 1);
            rdv_compact(sv);
        }
        sv->conns[sv->nconns++] = (struct rdv_conn){.fd = fd, .silent_until = clock_deadline_ns(RDV_SILENCE_NS)};
    }
}

/* One round: poll the listener and every connection until something is
 * ready, a silent connection's time is up, or the deadline; then act. 0 or
 * a negative ERR_*. */
static int rdv_round(struct rdv_server *sv, struct pollfd *fds, uint64_t deadline_ns)
{
    uint64_t now = clock_now_ns(), wake = deadline_ns;
    fds[0] = (struct pollfd){.fd = sv->r->fd, .events = POLLIN};
    for (int i = 0; i < sv->nconns; i++) {
        fds[1 + i] = (struct pollfd){.fd = sv->conns[i].fd, .events = sv->conns[i].rank ? POLLOUT : POLLIN};
        if (sv->conns[i].rank == 0 && sv->conns[i].silent_until < wake)
            wake = sv->conns[i].silent_until;
    }
    uint64_t left = wake > now ? wake - now : 0, left_ms = left / 1000000 + (left % 1000000 != 0);
    int n = poll(fds, (nfds_t)(1 + sv->nconns), left_ms > INT_MAX ? INT_MAX : (int)left_ms);
    if (n < 0 && errno != EINTR)
        return err_set(ERR_IO, "rendezvous: rank 0 at port %d: poll: %s", sv->r->port, strerror(errno));
    int rc = 0;
    for (int i = 0; n > 0 && rc == 0 && i < sv->nconns; i++)
        if (fds[1 + i].revents)
            rc = rdv_progress(sv, i);
    now = clock_now_ns();
    for (int i = 0; rc == 0 && i < sv->nconns; i++)
        if (sv->conns[i].fd >= 0 && sv->conns[i].rank == 0 && sv->conns[i].silent_until <= now)
            rdv_drop(sv, i, 1);
    rdv_compact(sv);
    if (rc == 0 && n > 0 && fds[0].revents)
        rc = rdv_accept_all(sv);
    return rc;
}

int rendezvous_serve(rendezvous_t *r, int world, const void *blob, size_t bytes, double timeout_s)
{
    int rc = rdv_check_timeout(timeout_s);
    if (rc < 0)
        return rc;
    if (world < 1)
        return err_set(ERR_ARG, "rendezvous: world %d", world);
    struct rdv_server *sv = calloc(1, sizeof *sv);
    struct pollfd *fds = calloc(1 + RDV_MAX_CONNS, sizeof *fds);
    unsigned char *came = calloc((size_t)world, 1);
    unsigned char *answer = bytes <= SIZE_MAX - RDV_REPLY_BYTES ? malloc(RDV_REPLY_BYTES + bytes) : NULL;
    if (!sv || !fds || !came || !answer) {
        free(sv);
        free(fds);
        free(came);
        free(answer);
        return err_set(ERR_NOMEM, "rendezvous: out of memory for %d ranks and a %zu-byte id", world, bytes);
    }
    sv->r = r;
    sv->world = world;
    sv->bytes = bytes;
    sv->came = came;
    sv->answer = answer;
    sv->answer_len = RDV_REPLY_BYTES + bytes;
    rdv_put32(sv->answer, 0);
    rdv_put32(sv->answer + 4, (uint32_t)world);
    rdv_put64(sv->answer + 8, bytes);
    if (bytes)
        memcpy(sv->answer + RDV_REPLY_BYTES, blob, bytes);
    uint64_t deadline = clock_deadline_s(timeout_s);
    while (rc == 0 && sv->served < world - 1) {
        if (clock_now_ns() >= deadline) {
            char missing[256], strays[96] = "";
            rdv_missing(sv->came, world, missing, sizeof missing);
            if (sv->strays)
                snprintf(strays, sizeof strays, "; %u other connection(s) were not ranks of this job and were "
                         "ignored", sv->strays);
            rc = err_set(ERR_TIMEOUT, "rendezvous: rank 0 at port %d: rank(s) %s of %d never connected within %g s "
                         "(are they started, with MASTER_ADDR/MASTER_PORT pointing here?)%s", r->port, missing,
                         world, timeout_s, strays);
            break;
        }
        rc = rdv_round(sv, fds, deadline);
    }
    for (int i = 0; i < sv->nconns; i++)
        if (sv->conns[i].fd >= 0)
            close(sv->conns[i].fd);
    free(sv);
    free(fds);
    free(came);
    free(answer);
    return rc;
}

/* ---- the interface rank 0 listens on --------------------------------------------- */

/* The text form of an interface address; 0, or -1 when it is not IPv4 or IPv6. */
static int rdv_addr_text(const struct sockaddr *sa, char *buf, size_t len)
{
    if (!sa || (sa->sa_family != AF_INET && sa->sa_family != AF_INET6))
        return -1;
    const void *raw = sa->sa_family == AF_INET ? (const void *)&((const struct sockaddr_in *)sa)->sin_addr
                                               : (const void *)&((const struct sockaddr_in6 *)sa)->sin6_addr;
    return inet_ntop(sa->sa_family, raw, buf, (socklen_t)len) ? 0 : -1;
}

int rendezvous_if_addr(const char *ifname, char *addr, size_t len)
{
    struct ifaddrs *all;
    if (getifaddrs(&all) != 0)
        return err_set(ERR_IO, "rendezvous: cannot list the network interfaces: %s", strerror(errno));
    int found = 0;
    char text[INET6_ADDRSTRLEN], names[512] = "";
    size_t used = 0;
    for (int family = AF_INET; !found && family != -1; family = family == AF_INET ? AF_INET6 : -1)
        for (struct ifaddrs *i = all; !found && i; i = i->ifa_next)
            if (i->ifa_addr && i->ifa_addr->sa_family == family && strcmp(i->ifa_name, ifname) == 0 &&
                rdv_addr_text(i->ifa_addr, text, sizeof text) == 0)
                found = 1;
    if (found && strlen(text) >= len) {
        freeifaddrs(all);
        return err_set(ERR_RANGE, "rendezvous: interface %s's address %s does not fit in %zu bytes", ifname, text,
                       len);
    }
    if (found)
        strcpy(addr, text);
    for (struct ifaddrs *i = all; !found && i && used + 64 < sizeof names; i = i->ifa_next)
        if (rdv_addr_text(i->ifa_addr, text, sizeof text) == 0 && i->ifa_addr->sa_family == AF_INET)
            used += (size_t)snprintf(names + used, sizeof names - used, "%s%s (%s)", used ? ", " : "", i->ifa_name,
                                     text);
    freeifaddrs(all);
    if (!found)
        return err_set(ERR_ARG, "rendezvous: no interface '%s' with an address here; the interfaces with an IPv4 "
                       "address are: %s", ifname, used ? names : "none");
    return 0;
}

/* ---- ranks 1 .. world-1 ---------------------------------------------------------- */

/* Whether a reply came from a rank 0 of ours: it serves the world and size
 * we announced, or refuses us (ERR_ARG, the only refusal) with its own. */
static int rdv_reply_ours(const unsigned char *reply, int world, size_t bytes)
{
    int32_t status = (int32_t)rdv_get32(reply);
    int32_t their_world = (int32_t)rdv_get32(reply + 4);
    return status == 0 ? their_world == world && rdv_get64(reply + 8) == bytes : status == ERR_ARG && their_world >= 1;
}

/* A reply's bytes as text, '.' for what does not print, into buf[RDV_REPLY_BYTES + 1]. */
static const char *rdv_printable(const unsigned char *reply, char *buf)
{
    for (int i = 0; i < RDV_REPLY_BYTES; i++)
        buf[i] = reply[i] >= 0x20 && reply[i] < 0x7f && reply[i] != '"' ? (char)reply[i] : '.';
    buf[RDV_REPLY_BYTES] = '\0';
    return buf;
}

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
    int rc = rdv_check_timeout(timeout_s);
    if (rc < 0)
        return rc;
    struct addrinfo *ai;
    rc = rdv_resolve(addr, port, 0, &ai);
    if (rc < 0)
        return rc;
    uint64_t deadline = clock_deadline_s(timeout_s), pause_ns = 10000000; /* 10 ms, doubling to 1 s */
    int fd, refused = 0; /* once refused, nothing listened: whatever the attempt the deadline cut short says */
    uint64_t now;
    while ((fd = rdv_connect(ai, deadline)) < 0) {
        refused |= errno == ECONNREFUSED;
        if ((now = clock_now_ns()) >= deadline)
            break;
        /* rank 0 is not listening yet: it may start last, even in the timeout's last second */
        clock_sleep_ns(pause_ns < deadline - now ? pause_ns : deadline - now);
        pause_ns = pause_ns * 2 > 1000000000 ? 1000000000 : pause_ns * 2;
    }
    int saved = refused ? ECONNREFUSED : errno;
    freeaddrinfo(ai);
    /* Refused: nothing listens at addr:port (rank 0 not started, or listening on
     * another address only). Timed out: the SYNs went unanswered, which a closed
     * port never does; a firewall that drops them does. */
    if (fd < 0 && saved == ECONNREFUSED)
        return err_set(ERR_TIMEOUT, "rendezvous: rank %d: no rank 0 listening at %s:%d after %g s: connection "
                       "refused (rank 0 not started? or it listens on another interface only, as with --ifname=lo?)",
                       rank, addr, port, timeout_s);
    if (fd < 0 && saved == ETIMEDOUT)
        return err_set(ERR_TIMEOUT, "rendezvous: rank %d: rank 0 at %s:%d did not answer within %g s: the connection "
                       "attempts were dropped, not refused (a firewall dropping port %d on the way or on rank 0's "
                       "node?)", rank, addr, port, timeout_s, port);
    if (fd < 0)
        return err_set(ERR_TIMEOUT, "rendezvous: rank %d: no rank 0 listening at %s:%d after %g s (last error: %s)",
                       rank, addr, port, timeout_s, strerror(saved));
    unsigned char hello[RDV_HELLO_BYTES], reply[RDV_REPLY_BYTES];
    rdv_put32(hello, RDV_MAGIC);
    rdv_put32(hello + 4, RDV_VERSION);
    rdv_put32(hello + 8, (uint32_t)rank);
    rdv_put32(hello + 12, (uint32_t)world);
    rdv_put64(hello + 16, bytes);
    char said[RDV_REPLY_BYTES + 1];
    if (rdv_move(fd, hello, sizeof hello, 1, deadline) < 0 || rdv_move(fd, reply, sizeof reply, 0, deadline) < 0)
        rc = err_set(errno == ETIMEDOUT ? ERR_TIMEOUT : ERR_IO, "rendezvous: rank %d: talking to rank 0 at %s:%d: %s",
                     rank, addr, port, strerror(errno));
    else if (!rdv_reply_ours(reply, world, bytes))
        rc = err_set(ERR_ARG, "rendezvous: rank %d: what answers at %s:%d is not our rank 0 (it said \"%s\"): "
                     "another program listens on that port", rank, addr, port,
                     rdv_printable(reply, said));
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
    int rc = rendezvous_listen(env->bind_addr, env->port, &r);
    if (rc == ERR_IO) /* most often: torchrun's agent or another job holds the port */
        return err_wrap(rc, "rendezvous port %d, from %s (if another process holds it, set DDP_RENDEZVOUS_PORT "
                        "to a free port for every rank)", env->port, env->port_why);
    if (rc < 0)
        return rc;
    if (env->listening)
        env->listening(env, env->listening_arg);
    rc = rendezvous_serve(r, env->world, blob, bytes, timeout_s);
    rendezvous_close(r);
    if (rc == ERR_TIMEOUT && env->bind_addr) { /* the likeliest cause, when rank 0 chose one interface */
        char said[1024];
        snprintf(said, sizeof said, "%s", err_msg());
        rc = err_set(rc, "%s; rank 0 listened on %s (interface %s) only: ranks that reach it by another address "
                     "cannot connect", said, env->bind_addr, env->bind_ifname ? env->bind_ifname : "?");
    }
    return rc;
}
