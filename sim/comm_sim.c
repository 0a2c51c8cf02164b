/* comm_sim: the thread simulator's communicator: worlds, the rendezvous that
 * every collective starts with, the watchdog, the fingerprint and result
 * checks, and the faults (see comm_sim.h for the path of one collective;
 * comm_sim_algos.c moves the bytes). */
#include "sim/comm_sim.h"

#include "base/clock.h"
#include "base/error.h"
#include "base/half.h"
#include "base/vclock.h"
#include "comm/costmodel_hw.h"
#include "transfer/device.h"
#include "comm/comm_checks.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the world ----------------------------------------------------------- */

static int sim_world_create(const struct comm_world_options *opt, comm_world_t **out)
{
    struct sim_world *w = calloc(1, sizeof *w);
    if (!w)
        return err_set(ERR_NOMEM, "sim: cannot allocate a world");
    w->base.ops = &comm_backend_sim;
    w->world = opt->world;
    w->node_size = opt->node_size > 0 ? opt->node_size : opt->world;
    w->hang_s = opt->hang_s > 0 ? opt->hang_s : 0;
    if (opt->node_size < 0 || opt->world % w->node_size != 0) {
        free(w);
        return err_set(ERR_ARG, "sim: a world of %d ranks cannot be cut into nodes of %d (the topology NODESxGPUS "
                       "needs world = NODES x GPUS)", opt->world, opt->node_size);
    }
    int rc = faults_parse(opt->faults, opt->world, &w->faults, &w->nfaults);
    if (rc < 0) {
        free(w);
        return rc;
    }
    size_t links = (size_t)opt->world * (size_t)opt->world;
    w->ranks = calloc((size_t)opt->world, sizeof *w->ranks);
    w->chans = calloc(links, sizeof *w->chans);
    w->chan_ready = calloc(links, 1);
    if (!w->ranks || !w->chans || !w->chan_ready) {
        free(w->ranks);
        free(w->chans);
        free(w->chan_ready);
        free(w->faults);
        free(w);
        return err_set(ERR_NOMEM, "sim: cannot allocate a world of %d ranks", opt->world);
    }
    /* each collective's modelled time: the profile's links (NVLink inside a node, the network across) */
    const struct hw_profile *hw = opt->hw;
    if (!hw && (rc = hw_profile_find(DEVICE_GPU_DEFAULT, &hw)) < 0) {
        free(w->ranks);
        free(w->chans);
        free(w->chan_ready);
        free(w->faults);
        free(w);
        return rc;
    }
    costmodel_from_hw(&w->model, hw);
    w->model.node_size = w->node_size;
    atomic_init(&w->broken, 0);
    pthread_mutex_init(&w->lock, NULL);
    channel_cond_init(&w->cond);
    *out = (comm_world_t *)w;
    return 0;
}

static void sim_thread_forget_world(struct sim_world *w);

static void sim_world_destroy(comm_world_t *cw)
{
    struct sim_world *w = (struct sim_world *)cw;
    sim_thread_forget_world(w);
    for (int i = 0; i < w->world * w->world; i++)
        if (w->chan_ready[i])
            channel_destroy(&w->chans[i]);
    pthread_mutex_destroy(&w->lock);
    pthread_cond_destroy(&w->cond);
    free(w->chans);
    free(w->chan_ready);
    free(w->ranks);
    free(w->faults);
    free(w);
}

int sim_channel(struct sim_world *w, int src, int dst, channel_t **out)
{
    size_t i = (size_t)src * (size_t)w->world + (size_t)dst;
    int rc = 0;
    pthread_mutex_lock(&w->lock);
    if (!w->chan_ready[i]) {
        rc = channel_init(&w->chans[i], SIM_SLOTS, SIM_SLOT_BYTES, &w->broken);
        w->chan_ready[i] = rc == 0;
    }
    pthread_mutex_unlock(&w->lock);
    *out = rc == 0 ? &w->chans[i] : NULL;
    return rc;
}

/* Whether collective `seq` fails because a rank that never started it failed
 * in its own code; w->lock held. */
static int sim_aborted_before(const struct sim_world *w, uint64_t seq)
{
    return w->aborted && seq >= w->abort_seq;
}

/* Breaks the world with `msg` as its diagnosis (unless a rank's abort left
 * one first); w->lock held. Returns non-zero when this call was the first
 * failure. */
static int sim_world_break_locked(struct sim_world *w, const char *msg)
{
    if (atomic_load(&w->broken))
        return 0;
    if (!w->aborted)
        snprintf(w->base.diagnosis, sizeof w->base.diagnosis, "%s", msg);
    atomic_store(&w->broken, 1);
    pthread_cond_broadcast(&w->cond);
    for (int i = 0; i < w->world * w->world; i++)
        if (w->chan_ready[i])
            channel_wake(&w->chans[i]);
    return 1;
}

int sim_world_fail(struct sim_world *w, int code, const char *fmt, ...)
{
    char msg[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    pthread_mutex_lock(&w->lock);
    sim_world_break_locked(w, msg);
    pthread_mutex_unlock(&w->lock);
    return err_set(code, "%s", msg);
}

void sim_rank_story(const struct sim_world *w, int r, char *buf, size_t len)
{
    const struct sim_rank *k = &w->ranks[r];
    char last[160] = "has completed no collective";
    if (k->has_last) {
        char d[128];
        snprintf(last, sizeof last, "last completed %s", comm_coll_describe(&k->last, d, sizeof d));
    }
    char at[128];
    switch (k->state) {
    case SIM_NOT_OPENED: snprintf(buf, len, "never opened its communicator"); break;
    case SIM_RUNNING:
        if (k->activity[0])
            snprintf(buf, len, "running its own code (%s), in no collective; %s", k->activity, last);
        else
            snprintf(buf, len, "running its own code, in no collective; %s", last);
        break;
    case SIM_DELAYED: snprintf(buf, len, "%s; %s", k->note, last); break;
    case SIM_WAITING:
        snprintf(buf, len, "waiting at %s; %s", comm_coll_describe(&k->at, at, sizeof at), last);
        break;
    case SIM_MOVING:
        snprintf(buf, len, "moving data in %s; %s", comm_coll_describe(&k->at, at, sizeof at), last);
        break;
    case SIM_EXITED: snprintf(buf, len, "exited (closed its communicator); %s", last); break;
    case SIM_KILLED: snprintf(buf, len, "%s; %s", k->note, last); break;
    }
}

/* What rank r, which reached the collective only at modelled time
 * arrive_ns > t, was doing at t: in an injected delay, or running its own
 * code with the activity it had said last before t. w->lock held. */
static void sim_rank_story_at(const struct sim_world *w, int r, uint64_t t, char *buf, size_t len)
{
    const struct sim_rank *k = &w->ranks[r];
    char last[160] = "has completed no collective";
    if (k->has_last) {
        char d[128];
        snprintf(last, sizeof last, "last completed %s", comm_coll_describe(&k->last, d, sizeof d));
    }
    if (k->delay_to_ns > k->delay_from_ns && t >= k->delay_from_ns && t < k->delay_to_ns) {
        snprintf(buf, len, "%s; %s", k->note, last);
        return;
    }
    const char *act = NULL;
    uint64_t since = 0;
    unsigned first = k->nmarks > SIM_ACTIVITY_MARKS ? k->nmarks - SIM_ACTIVITY_MARKS : 0;
    for (unsigned i = first; i < k->nmarks; i++) { /* in the order said: the last one said by t */
        const struct sim_activity_mark *m = &k->marks[i % SIM_ACTIVITY_MARKS];
        if (m->since_ns <= t && (!act || m->since_ns >= since)) {
            act = m->text;
            since = m->since_ns;
        }
    }
    if (act && act[0])
        snprintf(buf, len, "running its own code (%s), in no collective; %s", act, last);
    else
        snprintf(buf, len, "running its own code, in no collective; %s", last);
}

/* ---- rendezvous and watchdog ------------------------------------------- */

/* The wall-clock safety net: how long a rank waits in real time for the
 * others before it gives up. The watchdog proper is modelled (see
 * sim_modelled_watchdog): a rank late in modelled time, or gone, is seen
 * there whatever the wall clock says. This one is only for real hangs, a
 * thread that truly never comes (a bug, a deadlock), which the model cannot
 * see; so it must be long enough that no load trips it: a rank's real work
 * between two collectives (a step, a checkpoint written to a slow disk
 * under two busy neighbours) takes seconds, never a minute; and ten times
 * the configured timeout keeps it past any wait that a long timeout says is
 * normal. Either way a real hang still ends. */
#define SIM_WALL_MIN_S 60.0
static double sim_wall_margin_s(const struct sim_world *w, double timeout_s)
{
    if (w->hang_s > 0) /* comm_world_options.hang_s: a test of the net itself */
        return w->hang_s;
    return timeout_s * 10 > SIM_WALL_MIN_S ? timeout_s * 10 : SIM_WALL_MIN_S;
}

/* t + dt, saturated. */
static uint64_t sim_add_ns(uint64_t t, uint64_t dt)
{
    return dt > UINT64_MAX - t ? UINT64_MAX : t + dt;
}

/* Compares what the ranks posted; runs in the last rank to arrive, with
 * w->lock held and every other rank waiting. 0 or ERR_* with msg set. */
typedef int (*sim_check_fn)(struct sim_world *w, const struct comm_coll_desc *d, char *msg, size_t len);

/* The watchdog's report, written by the first rank whose wait expired; w->lock held. */
static void sim_watchdog_report(struct sim_world *w, int rank, const struct comm_coll_desc *d, const char *phase,
                                double timeout_s, uint64_t deadline_ns, const char *wall, char *msg, size_t len)
{
    char desc[128], arrived[256] = "", missing[1536] = "";
    size_t na = 0, nm = 0;
    for (int r = 0; r < w->world; r++) {
        /* arrived by the deadline (the wall net: arrived at all) */
        if (w->ranks[r].arrived && (wall || w->ranks[r].arrive_ns <= deadline_ns)) {
            na += (size_t)snprintf(arrived + na, sizeof arrived - na, "%s%d", na ? ", " : "", r);
        } else if (nm < sizeof missing) {
            char story[320];
            if (w->ranks[r].arrived) /* came, but after the deadline: what it did at the deadline */
                sim_rank_story_at(w, r, deadline_ns, story, sizeof story);
            else
                sim_rank_story(w, r, story, sizeof story);
            nm += (size_t)snprintf(missing + nm, sizeof missing - nm, "%s  rank %d: %s", nm ? "\n" : "", r, story);
        }
        if (na >= sizeof arrived)
            na = sizeof arrived - 1;
        if (nm >= sizeof missing)
            nm = sizeof missing - 1;
    }
    if (wall)
        snprintf(msg, len,
                 "watchdog: %s: no progress for %.3g s of wall-clock time on rank %d, waiting for every rank to "
                 "reach its %s (%s)\n  arrived: rank%s %s\n  missing:\n%s",
                 comm_coll_describe(d, desc, sizeof desc), timeout_s, rank, phase, wall,
                 strchr(arrived, ',') ? "s" : "", arrived, missing);
    else
        snprintf(msg, len,
                 "watchdog: %s timed out after %.3g s on rank %d, waiting for every rank to reach its %s\n"
                 "  arrived: rank%s %s\n  missing:\n%s",
                 comm_coll_describe(d, desc, sizeof desc), timeout_s, rank, phase, strchr(arrived, ',') ? "s" : "",
                 arrived, missing);
}

/* A rank that will never come to the rendezvous under way: killed by a
 * fault, or its communicator closed and its thread ended (it finished its
 * loop and exited: sim_thread_ended). */
static int sim_rank_gone(const struct sim_rank *k)
{
    return !k->arrived && (k->state == SIM_KILLED || (k->state == SIM_EXITED && k->ended));
}

/* The modelled watchdog; w->lock held. A rank that arrives at modelled time
 * a waits until a + its timeout. Once every rank has arrived or is gone (in
 * wall time that is as soon as the last one decides), the deadlines are
 * known: if a rank arrived after the earliest deadline, or one is gone,
 * that deadline passed with the collective incomplete, and the watchdog of
 * the rank that had it (the earliest arrival; the lowest rank of equals)
 * fires: its report lists the ranks there by then, and what each other one
 * was doing at that modelled instant. The same ranks, the same times, the
 * same report, whatever the wall clock did. Returns 1 when it fired (the
 * world is broken, w->wd_rank says whose watchdog it was). */
static int sim_modelled_watchdog(struct sim_world *w)
{
    if (w->count == 0 || atomic_load(&w->broken))
        return 0;
    int gone = 0, first = -1;
    uint64_t deadline = UINT64_MAX;
    for (int r = 0; r < w->world; r++) {
        const struct sim_rank *k = &w->ranks[r];
        gone += sim_rank_gone(k);
        /* a rank whose collective a rank's abort ended is released by the abort, not late: it may just not
         * have run since (a loaded machine), while the ranks that failed it end their threads */
        if (!k->arrived || sim_aborted_before(w, k->at.seq))
            continue;
        uint64_t dl = sim_add_ns(k->arrive_ns, k->timeout_ns);
        if (first < 0 || dl < deadline)
            first = r, deadline = dl;
    }
    if (first < 0 || w->count + gone < w->world)
        return 0;
    int late = gone > 0;
    for (int r = 0; r < w->world; r++)
        late |= w->ranks[r].arrived && w->ranks[r].arrive_ns > deadline;
    if (!late)
        return 0;
    char msg[2048];
    const struct sim_rank *k = &w->ranks[first];
    sim_watchdog_report(w, first, &k->at, k->phase, k->timeout_s, deadline, NULL, msg, sizeof msg);
    w->wd_fired = 1;
    w->wd_rank = first;
    w->wd_gen = w->gen;
    sim_world_break_locked(w, msg);
    return 1;
}

/* The modelled end of collective d, every rank arrived: the latest arrival
 * plus the cost model's time for its collective, algorithm, world, bytes and
 * topology (costmodel_collective); w->lock held. */
static uint64_t sim_modelled_end(const struct sim_world *w, const struct comm_coll_desc *d)
{
    uint64_t start = 0;
    for (int r = 0; r < w->world; r++)
        start = w->ranks[r].arrive_ns > start ? w->ranks[r].arrive_ns : start;
    uint64_t cost = costmodel_coll_ns(&w->model, d, w->algo, w->world);
    return cost > UINT64_MAX - start ? UINT64_MAX : start + cost;
}

/* Rank `rank` arrives; the last to arrive runs `check` and releases the rest.
 * The caller has posted what `check` reads into w->ranks[rank]. With end_ns
 * (a collective's start; the caller posted its arrive_ns), the last to arrive
 * also fixes the collective's modelled end, which every rank gets in
 * *end_ns: the latest arrival plus the cost model's time for it (one
 * computation, in integer ns, so all ranks see the same). Returns the
 * check's verdict, ERR_TIMEOUT (this rank's wait expired: the watchdog report
 * is the message and the world is broken) or ERR_PEER (the world broke). */
static int sim_rendezvous(struct sim_world *w, int rank, const struct comm_coll_desc *d, uint64_t deadline_ns,
                          double timeout_s, const char *phase, sim_check_fn check, uint64_t *end_ns)
{
    char msg[2048];
    int rc = 0;
    pthread_mutex_lock(&w->lock);
    struct sim_rank *me = &w->ranks[rank];
    me->state = SIM_WAITING;
    me->at = *d;
    me->phase = phase;
    me->timeout_s = timeout_s;
    me->timeout_ns = vclock_ns_of_s(timeout_s);
    if (atomic_load(&w->broken) || sim_aborted_before(w, d->seq))
        goto broken;
    me->arrived = 1;
    uint64_t gen = w->gen;
    ++w->count;
    if (sim_modelled_watchdog(w))
        goto fired;
    int last = w->count == w->world;
    if (last) {
        w->rdv_rc = check ? check(w, d, w->rdv_msg, sizeof w->rdv_msg) : 0;
        if (end_ns)
            w->rdv_end_ns = sim_modelled_end(w, d);
        if (w->rdv_rc < 0) /* every rank gets the verdict; the world's diagnosis keeps it */
            sim_world_break_locked(w, w->rdv_msg);
        for (int r = 0; r < w->world; r++)
            w->ranks[r].arrived = 0;
        w->count = 0;
        w->gen++; /* the others are woken once the lock is free (below): woken now, they would sleep on it */
    }
    struct timespec ts = channel_deadline(deadline_ns);
    while (w->gen == gen && !atomic_load(&w->broken) && !sim_aborted_before(w, d->seq)) {
        if (pthread_cond_timedwait(&w->cond, &w->lock, &ts) == ETIMEDOUT && w->gen == gen &&
            !atomic_load(&w->broken) && !sim_aborted_before(w, d->seq)) {
            sim_watchdog_report(w, rank, d, phase, sim_wall_margin_s(w, timeout_s), 0,
                                "the wall-clock safety net for real hangs: a rank that never came, though "
                                "not gone",
                                msg, sizeof msg);
            sim_world_break_locked(w, msg);
            pthread_mutex_unlock(&w->lock);
            return err_set(ERR_TIMEOUT, "%s", msg);
        }
    }
    if (w->gen != gen) {
        rc = w->rdv_rc;
        if (rc < 0)
            err_set(rc, "%s", w->rdv_msg);
        if (end_ns) /* no later rendezvous can overwrite it before this rank has arrived there */
            *end_ns = w->rdv_end_ns;
        me->state = SIM_MOVING;
        pthread_mutex_unlock(&w->lock);
        if (last)
            pthread_cond_broadcast(&w->cond);
        return rc;
    }
fired:
    if (w->wd_fired && w->wd_rank == rank && w->wd_gen == gen) { /* its own watchdog fired */
        me->arrived = 0;
        snprintf(msg, sizeof msg, "%s", w->base.diagnosis);
        pthread_mutex_unlock(&w->lock);
        return err_set(ERR_TIMEOUT, "%s", msg);
    }
broken:
    me->arrived = 0;
    snprintf(msg, sizeof msg, "%s", w->base.diagnosis);
    pthread_mutex_unlock(&w->lock);
    char desc[128];
    return err_set(ERR_PEER, "%s aborted on rank %d: another rank failed first: %s",
                   comm_coll_describe(d, desc, sizeof desc), rank, msg);
}

/* The ranks' posted fingerprints, or their result checksums, gathered for
 * comm_checks; w->lock held. ERR_NOMEM, as a verdict, when the copy fails. */
static int sim_check_fingerprints(struct sim_world *w, const struct comm_coll_desc *d, char *msg, size_t len)
{
    (void)d;
    struct comm_fingerprint *fps = malloc((size_t)w->world * sizeof *fps);
    int rc = fps ? 0 : err_set(ERR_NOMEM, "sim: cannot gather %d fingerprints", w->world);
    for (int r = 0; fps && r < w->world; r++)
        fps[r] = w->ranks[r].fp;
    if (rc == 0)
        rc = comm_checks_compare_fingerprints(fps, w->world);
    free(fps);
    if (rc < 0)
        snprintf(msg, len, "%s", err_msg());
    return rc;
}

/* The start rendezvous's check: the fingerprints, then, when they agree on
 * an all-gather of a few words, its data (sim_allgather_direct). */
static int sim_check_start(struct sim_world *w, const struct comm_coll_desc *d, char *msg, size_t len)
{
    int rc = sim_check_fingerprints(w, d, msg, len);
    if (rc == 0 && sim_allgather_is_direct(d, w->world))
        sim_allgather_direct(w);
    return rc;
}

/* The first element where rank odd's result differs from rank ref's, printed
 * (comm_checks_detail_fn; ctx is the world, whose ranks are all posted). */
static void sim_first_difference(const void *ctx, int odd, int ref, char *buf, size_t len)
{
    const struct sim_world *w = ctx;
    enum comm_dtype dtype = w->ranks[ref].at.dtype;
    size_t es = comm_dtype_size(dtype), n = w->ranks[ref].result_bytes / es;
    const unsigned char *a = w->ranks[ref].result, *b = w->ranks[odd].result;
    for (size_t i = 0; i < n; i++) {
        if (memcmp(a + i * es, b + i * es, es) == 0)
            continue;
        double va, vb;
        if (dtype == COMM_FLOAT32) {
            float fa, fb;
            memcpy(&fa, a + i * es, 4);
            memcpy(&fb, b + i * es, 4);
            va = fa, vb = fb;
        } else if (dtype == COMM_FLOAT64) {
            memcpy(&va, a + i * es, 8);
            memcpy(&vb, b + i * es, 8);
        } else if (dtype == COMM_FLOAT16 || dtype == COMM_BFLOAT16) {
            uint16_t ha, hb;
            memcpy(&ha, a + i * es, 2);
            memcpy(&hb, b + i * es, 2);
            va = dtype == COMM_FLOAT16 ? half_to_float(ha) : half_bf16_to_float(ha);
            vb = dtype == COMM_FLOAT16 ? half_to_float(hb) : half_bf16_to_float(hb);
        } else {
            snprintf(buf, len, "element %zu differs", i);
            return;
        }
        snprintf(buf, len, "element %zu: rank %d has %.9g, rank %d has %.9g", i, odd, vb, ref, va);
        return;
    }
    snprintf(buf, len, "no element differs");
}

static int sim_check_results(struct sim_world *w, const struct comm_coll_desc *d, char *msg, size_t len)
{
    uint64_t *sums = malloc((size_t)w->world * sizeof *sums);
    int rc = sums ? 0 : err_set(ERR_NOMEM, "sim: cannot gather %d checksums", w->world);
    for (int r = 0; sums && r < w->world; r++)
        sums[r] = w->ranks[r].checksum;
    if (rc == 0)
        rc = comm_checks_compare_results(d, sums, w->world, sim_first_difference, w);
    free(sums);
    if (rc < 0)
        snprintf(msg, len, "%s", err_msg());
    return rc;
}

/* ---- faults --------------------------------------------------------------- */

/* An injected delay of f->ms before collective d, from modelled time
 * `from`: no real sleep, the rank reaches d that much later in modelled
 * time (the watchdog sees it there, sim_rank_story_at tells it). Returns
 * the delay's modelled end. */
static uint64_t sim_delay(struct sim_world *w, int rank, const struct fault *f, const struct comm_coll_desc *d,
                          uint64_t from)
{
    char what[32];
    pthread_mutex_lock(&w->lock);
    struct sim_rank *me = &w->ranks[rank];
    snprintf(me->note, sizeof me->note, "sleeping in an injected delay of %llu ms before collective #%llu (%s)",
             (unsigned long long)f->ms, (unsigned long long)d->seq, fault_describe(f, what, sizeof what));
    me->delay_from_ns = from;
    me->delay_to_ns = sim_add_ns(from, fault_delay_ns(f));
    pthread_mutex_unlock(&w->lock);
    return me->delay_to_ns;
}

/* Flips the lowest bits of the middle element of rank's result: rank + 1
 * XORed into its low 16 bits (every type is 2 bytes or more), so rank 0's
 * lowest bit. Two ranks flipped at one collective then differ from each
 * other, as independent faults would: flipped the same, they would agree,
 * and two of three would outvote the healthy rank. */
static void sim_flip(const struct comm_coll_desc *d, size_t elements, int rank)
{
    if (elements == 0)
        return;
    unsigned char *x = (unsigned char *)d->recvbuf + (elements / 2) * comm_dtype_size(d->dtype);
    unsigned bits = (unsigned)rank + 1;
    x[0] ^= (unsigned char)bits; /* little-endian: the lowest byte first */
    x[1] ^= (unsigned char)(bits >> 8);
}

/* ---- the backend ----------------------------------------------------------- */

static int sim_launch_resolve(enum comm_launch requested, enum comm_launch *out)
{
    if (requested != COMM_LAUNCH_AUTO && requested != COMM_LAUNCH_THREADS)
        return err_set(ERR_UNSUPPORTED, "sim: ranks are threads of one process (launch mode 'threads' only)");
    *out = COMM_LAUNCH_THREADS;
    return 0;
}

static void sim_mark_exited(struct sim_world *w, int rank)
{
    pthread_mutex_lock(&w->lock);
    if (w->ranks[rank].state != SIM_KILLED)
        w->ranks[rank].state = SIM_EXITED;
    pthread_mutex_unlock(&w->lock);
}

/* ---- rank threads that end -------------------------------------------------------- */

/* The modelled watchdog must know when a rank will never come: a rank
 * killed by a fault, or one whose thread has ended (it returned from its
 * rank function, its communicator closed: it finished its loop). A closed
 * communicator alone does not say it: the rank may still fail in its own
 * code, and that failure (its abort) is then the diagnosis. So sim_open
 * registers the opening thread; when that thread ends (a thread-specific
 * key's destructor, run before pthread_join returns), every world it had a
 * rank in learns. A world destroyed first is forgotten. */
struct sim_thread_reg {
    struct sim_world *w; /* NULL once the world is destroyed */
    int rank;
    pthread_t thread;
    struct sim_thread_reg *next;
};
static pthread_mutex_t sim_regs_lock = PTHREAD_MUTEX_INITIALIZER;
static struct sim_thread_reg *sim_regs;
static pthread_key_t sim_thread_key;
static pthread_once_t sim_thread_once = PTHREAD_ONCE_INIT;

static void sim_thread_ended(void *unused)
{
    (void)unused;
    pthread_t self = pthread_self();
    pthread_mutex_lock(&sim_regs_lock);
    for (struct sim_thread_reg **p = &sim_regs; *p;) {
        struct sim_thread_reg *g = *p;
        if (!pthread_equal(g->thread, self)) {
            p = &g->next;
            continue;
        }
        if (g->w) {
            pthread_mutex_lock(&g->w->lock);
            g->w->ranks[g->rank].ended = 1;
            sim_modelled_watchdog(g->w); /* the ranks waiting for it know now */
            pthread_mutex_unlock(&g->w->lock);
        }
        *p = g->next;
        free(g);
    }
    pthread_mutex_unlock(&sim_regs_lock);
}

static void sim_thread_key_init(void) { (void)pthread_key_create(&sim_thread_key, sim_thread_ended); }

/* The calling thread holds rank `rank` of w (sim_open). Without memory the
 * rank is only never declared gone (the wall-clock net remains). */
static void sim_thread_register(struct sim_world *w, int rank)
{
    (void)pthread_once(&sim_thread_once, sim_thread_key_init);
    struct sim_thread_reg *g = malloc(sizeof *g);
    if (!g)
        return;
    *g = (struct sim_thread_reg){.w = w, .rank = rank, .thread = pthread_self()};
    pthread_mutex_lock(&sim_regs_lock);
    g->next = sim_regs;
    sim_regs = g;
    pthread_mutex_unlock(&sim_regs_lock);
    (void)pthread_setspecific(sim_thread_key, &sim_regs); /* any non-NULL value: the destructor runs */
}

static void sim_thread_forget_world(struct sim_world *w)
{
    pthread_mutex_lock(&sim_regs_lock);
    for (struct sim_thread_reg *g = sim_regs; g; g = g->next)
        if (g->w == w)
            g->w = NULL;
    pthread_mutex_unlock(&sim_regs_lock);
}

static void *sim_progress_main(void *arg);

static int sim_open(comm_t *c, const struct comm_config *cfg)
{
    struct sim_world *w = (struct sim_world *)cfg->shared;
    if (cfg->world != 0 && cfg->world != w->world)
        return err_set(ERR_ARG, "sim: configured world %d, but the shared world has %d ranks", cfg->world, w->world);
    if (cfg->rank < 0 || cfg->rank >= w->world)
        return err_set(ERR_ARG, "sim: rank %d is not in a world of %d", cfg->rank, w->world);
    enum comm_algo algo = cfg->algo == COMM_ALGO_DEFAULT ? COMM_ALGO_RING : cfg->algo;
    struct sim_comm *sc = calloc(1, sizeof *sc);
    if (!sc)
        return err_set(ERR_NOMEM, "sim: rank %d: cannot allocate its communicator", cfg->rank);
    pthread_mutex_lock(&w->lock);
    int rc = 0;
    if (w->ranks[cfg->rank].state != SIM_NOT_OPENED && w->ranks[cfg->rank].state != SIM_EXITED)
        rc = err_set(ERR_STATE, "sim: rank %d is already open in this world", cfg->rank);
    else if (w->algo_set && w->algo != algo)
        rc = err_set(ERR_ARG, "sim: rank %d asks for algorithm %s, but the others use %s", cfg->rank,
                     comm_algo_name(algo), comm_algo_name(w->algo));
    if (rc == 0) {
        w->algo_set = 1;
        w->algo = algo;
        w->ranks[cfg->rank] = (struct sim_rank){.state = SIM_RUNNING};
    }
    pthread_mutex_unlock(&w->lock);
    if (rc == 0)
        sim_thread_register(w, cfg->rank);
    if (rc < 0) {
        free(sc);
        return rc;
    }
    sc->w = w;
    sc->c = c;
    c->rank = cfg->rank;
    c->world = w->world;
    c->algo = algo;
    c->impl = sc;
    pthread_mutex_init(&sc->qlock, NULL);
    pthread_cond_init(&sc->qcond, NULL);
    return 0;
}

static void sim_run_queue(struct sim_comm *sc, const struct sim_req *upto);

/* Collectives queued and not yet waited for are still run (their buffers
 * are the caller's promise): by the progress thread, which then ends, or
 * here. */
static void sim_close(comm_t *c)
{
    struct sim_comm *sc = c->impl;
    if (sc->has_progress) {
        pthread_mutex_lock(&sc->qlock);
        sc->stopping = 1;
        pthread_cond_broadcast(&sc->qcond);
        pthread_mutex_unlock(&sc->qlock);
        pthread_join(sc->progress, NULL);
    } else {
        sim_run_queue(sc, NULL);
    }
    for (struct sim_req *sr = sc->head, *next; sr; sr = next) {
        next = sr->next;
        free(sr);
    }
    pthread_mutex_destroy(&sc->qlock);
    pthread_cond_destroy(&sc->qcond);
    sim_mark_exited(sc->w, c->rank);
    free(sc);
}

/* Elements in the result buffer of d on a world of `world`. */
static size_t sim_result_count(const struct comm_coll_desc *d, int world)
{
    return d->coll == COMM_ALLGATHER ? d->count * (size_t)world : d->count;
}

/* Runs one collective on the thread that runs the queue (see struct
 * sim_comm): faults, rendezvous, data, checks. 0 or ERR_* with err_msg() set
 * (on this thread). *end_ns = its modelled end (vclock ns; issue_ns: when its
 * rank issued it), or 0 when it did not start. */
static int sim_execute(struct sim_comm *sc, const struct comm_coll_desc *d, uint64_t issue_ns, uint64_t *end_ns)
{
    comm_t *c = sc->c;
    struct sim_world *w = sc->w;
    int rank = c->rank;
    char what[32], desc[128];
    struct fault *f;
    *end_ns = 0;

    if (sc->killed)
        return err_set(ERR_STATE, "%s: this rank was killed earlier (%s)", comm_coll_describe(d, desc, sizeof desc),
                       w->ranks[rank].note);
    if ((f = faults_take(w->faults, w->nfaults, FAULT_KILL, rank, d->seq))) {
        pthread_mutex_lock(&w->lock);
        snprintf(w->ranks[rank].note, sizeof w->ranks[rank].note,
                 "killed by --fault=%s before collective #%llu", fault_describe(f, what, sizeof what),
                 (unsigned long long)d->seq);
        w->ranks[rank].state = SIM_KILLED;
        sim_modelled_watchdog(w); /* the ranks waiting for it know now */
        pthread_mutex_unlock(&w->lock);
        sc->killed = 1;
        return err_set(ERR_STATE, "%s", w->ranks[rank].note);
    }
    /* modelled time: it starts when this rank issued it, or when this rank's previous one ended */
    uint64_t arrive = issue_ns > sc->free_ns ? issue_ns : sc->free_ns;
    if ((f = faults_take(w->faults, w->nfaults, FAULT_DELAY, rank, d->seq)))
        arrive = sim_delay(w, rank, f, d, arrive);

    uint64_t deadline = clock_deadline_s(sim_wall_margin_s(w, c->timeout_s));
    comm_fingerprint_of(d, &w->ranks[rank].fp);
    w->ranks[rank].arrive_ns = arrive;
    int rc = sim_rendezvous(w, rank, d, deadline, c->timeout_s, "start", sim_check_start, &sc->free_ns);
    if (rc < 0)
        return rc;
    *end_ns = sc->free_ns;

    if (d->coll != COMM_BARRIER) {
        struct sim_exec x = {.w = w, .sc = sc, .rank = rank, .world = c->world, .algo = c->algo, .d = d,
                             .deadline_ns = deadline};
        rc = sim_algo_run(&x);
        if (rc < 0)
            return rc;
        if (d->op == COMM_AVG && (d->coll == COMM_ALLREDUCE || d->coll == COMM_REDUCE_SCATTER))
            comm_reduce_divide(d->dtype, d->recvbuf, d->count, c->world);
        size_t n = sim_result_count(d, c->world);
        if (faults_take(w->faults, w->nfaults, FAULT_FLIP, rank, d->seq))
            sim_flip(d, n, rank);
        if (c->check == COMM_CHECK_RESULTS && d->coll != COMM_REDUCE_SCATTER) {
            struct sim_rank *me = &w->ranks[rank];
            me->result = d->recvbuf;
            me->result_bytes = n * comm_dtype_size(d->dtype);
            me->checksum = comm_checksum(d->recvbuf, me->result_bytes);
            rc = sim_rendezvous(w, rank, d, deadline, c->timeout_s, "result check", sim_check_results, NULL);
            if (rc < 0)
                return rc;
        }
    }

    pthread_mutex_lock(&w->lock);
    w->ranks[rank].state = SIM_RUNNING;
    w->ranks[rank].last = *d;
    w->ranks[rank].has_last = 1;
    pthread_mutex_unlock(&w->lock);
    return 0;
}

/* A request's done_ns: the modelled end; on the wall clock (a real device's
 * vclock_use_wall), now. */
static uint64_t sim_done_ns(uint64_t end)
{
    return vclock_is_wall() ? vclock_now_ns() : end;
}

/* The first queued collective not yet run, or NULL. qlock held. */
static struct sim_req *sim_queue_next(const struct sim_comm *sc)
{
    struct sim_req *sr = sc->head;
    while (sr && sr->finished)
        sr = sr->next;
    return sr;
}

/* Runs queued collective sr on this thread and marks it finished. Called and
 * returns with qlock held; drops it while the collective runs. */
static void sim_run_one(struct sim_comm *sc, struct sim_req *sr)
{
    pthread_mutex_unlock(&sc->qlock);
    err_clear();
    uint64_t end;
    int rc = sim_execute(sc, &sr->req->desc, sr->req->issue_ns, &end);
    pthread_mutex_lock(&sc->qlock);
    sr->status = rc;
    sr->req->done_ns = sim_done_ns(end);
    if (rc < 0)
        snprintf(sr->msg, sizeof sr->msg, "%s", err_msg());
    sr->finished = 1;
}

/* The rank's own thread runs its queue, in order, up to and including
 * `upto` (NULL: all of it): a modelled clock without a progress thread. */
static void sim_run_queue(struct sim_comm *sc, const struct sim_req *upto)
{
    pthread_mutex_lock(&sc->qlock);
    for (struct sim_req *sr; (sr = sim_queue_next(sc)) != NULL;) {
        int last = sr == upto;
        sim_run_one(sc, sr);
        if (last)
            break;
    }
    pthread_mutex_unlock(&sc->qlock);
}

/* The progress thread: runs the queue in order until close. */
static void *sim_progress_main(void *arg)
{
    struct sim_comm *sc = arg;
    pthread_mutex_lock(&sc->qlock);
    for (;;) {
        struct sim_req *sr = sim_queue_next(sc);
        if (!sr) {
            if (sc->stopping)
                break;
            pthread_cond_wait(&sc->qcond, &sc->qlock);
            continue;
        }
        sim_run_one(sc, sr);
        /* the waiter is woken with the lock free: woken under it, it would sleep on it once more */
        pthread_mutex_unlock(&sc->qlock);
        pthread_cond_broadcast(&sc->qcond);
        pthread_mutex_lock(&sc->qlock);
    }
    pthread_mutex_unlock(&sc->qlock);
    return NULL;
}

/* Queues the collective, or, for a blocking call with nothing queued before
 * it, runs it right here: the same order, two thread hand-offs fewer. On the
 * wall clock the progress thread, started with the first queued one, is
 * woken to run it now; on a modelled clock it waits in the queue for this
 * thread (see struct sim_comm). The skip fault is decided here, on the
 * rank's own thread: a skipped call never happened. */
static int sim_start(comm_t *c, comm_request_t *req)
{
    struct sim_comm *sc = c->impl;
    if (faults_take(sc->w->faults, sc->w->nfaults, FAULT_SKIP, c->rank, req->desc.seq))
        return COMM_START_SKIPPED;
    pthread_mutex_lock(&sc->qlock);
    int inline_ok = req->blocking && !sim_queue_next(sc);
    pthread_mutex_unlock(&sc->qlock);
    if (inline_ok) {
        /* only this thread adds to the queue, so it stays empty while we run */
        uint64_t end;
        req->status = sim_execute(sc, &req->desc, req->issue_ns, &end);
        req->done_ns = sim_done_ns(end);
        if (req->status < 0)
            snprintf(req->err_buf, sizeof req->err_buf, "%s", err_msg());
        req->done = 1;
        return 0;
    }
    struct sim_req *sr = calloc(1, sizeof *sr);
    if (!sr)
        return err_set(ERR_NOMEM, "rank %d: cannot queue collective #%llu", c->rank,
                       (unsigned long long)req->desc.seq);
    sr->req = req;
    if (vclock_is_wall() && !sc->has_progress) {
        if (pthread_create(&sc->progress, NULL, sim_progress_main, sc) != 0) {
            free(sr);
            return err_set(ERR_NOMEM, "rank %d: cannot start the progress thread for collective #%llu", c->rank,
                           (unsigned long long)req->desc.seq);
        }
        sc->has_progress = 1;
    }
    req->impl = sr;
    pthread_mutex_lock(&sc->qlock);
    if (sc->tail)
        sc->tail->next = sr;
    else
        sc->head = sr;
    sc->tail = sr;
    pthread_mutex_unlock(&sc->qlock);
    if (sc->has_progress)
        pthread_cond_broadcast(&sc->qcond); /* once the lock is free (sim_progress_main) */
    return 0;
}

/* Runs the queue up to req, or waits for the progress thread to (their
 * waits all have deadlines, so this ends), then unlinks it. */
static int sim_wait(comm_t *c, comm_request_t *req)
{
    struct sim_comm *sc = c->impl;
    struct sim_req *sr = req->impl;
    if (!sc->has_progress)
        sim_run_queue(sc, sr);
    pthread_mutex_lock(&sc->qlock);
    while (!sr->finished)
        pthread_cond_wait(&sc->qcond, &sc->qlock);
    struct sim_req **link = &sc->head, *prev = NULL;
    while (*link != sr) {
        prev = *link;
        link = &(*link)->next;
    }
    *link = sr->next;
    if (sc->tail == sr)
        sc->tail = prev;
    pthread_mutex_unlock(&sc->qlock);
    int rc = sr->status;
    if (rc < 0)
        err_set(rc, "%s", sr->msg);
    free(sr);
    return rc;
}

uint64_t comm_sim_bytes_sent(const comm_t *c)
{
    return c->ops == &comm_backend_sim ? ((const struct sim_comm *)c->impl)->bytes_sent : 0;
}

/* comm_set_activity: kept for the watchdog's story of this rank. */
static void sim_activity(comm_t *c, const char *what)
{
    struct sim_comm *sc = c->impl;
    struct sim_rank *k = &sc->w->ranks[c->rank];
    pthread_mutex_lock(&sc->w->lock);
    snprintf(k->activity, sizeof k->activity, "%s", what ? what : "");
    struct sim_activity_mark *m = &k->marks[k->nmarks++ % SIM_ACTIVITY_MARKS];
    m->since_ns = vclock_now_ns(); /* the rank's own thread: its modelled clock */
    snprintf(m->text, sizeof m->text, "%s", what ? what : "");
    pthread_mutex_unlock(&sc->w->lock);
}

/* Rank `rank` failed in its own code before it started collective `seq`:
 * its message becomes the diagnosis, and that collective and every later one
 * fail (see comm_sim.h), waking the ranks waiting at their rendezvous or in
 * an injected delay. Channels are not woken: the data phases under way
 * finish. A rank killed by a fault is dead: it tells nobody, and the
 * watchdog names it. */
static void sim_abort_from(struct sim_world *w, int rank, uint64_t seq, const char *msg)
{
    pthread_mutex_lock(&w->lock);
    if (!atomic_load(&w->broken) && !w->aborted &&
        (rank < 0 || rank >= w->world || w->ranks[rank].state != SIM_KILLED)) {
        snprintf(w->base.diagnosis, sizeof w->base.diagnosis, "%s", msg);
        w->aborted = 1;
        w->abort_seq = seq;
        pthread_cond_broadcast(&w->cond);
    }
    pthread_mutex_unlock(&w->lock);
}

/* comm_world_abort: the rank's communicator is closed, so every collective
 * it started has ended; whatever has not completed, it never joined. */
static void sim_world_abort(comm_world_t *cw, int rank, const char *msg)
{
    sim_abort_from((struct sim_world *)cw, rank, 0, msg);
}

/* comm_abort: from the failing rank's open communicator; the collectives it
 * queued and has not run yet still run: its progress thread's, or here,
 * now, since this rank may not wait for them. */
static void sim_abort(comm_t *c, const char *msg)
{
    struct sim_comm *sc = c->impl;
    sim_abort_from(sc->w, c->rank, c->next_seq, msg);
    if (!sc->has_progress)
        sim_run_queue(sc, NULL);
}

static const struct costmodel *sim_cost_model(const comm_t *c, enum comm_algo *algo)
{
    const struct sim_world *w = ((const struct sim_comm *)c->impl)->w;
    *algo = w->algo;
    return &w->model;
}

const struct comm_backend_ops comm_backend_sim = {
    .name = "sim",
    .device_memory = 1, /* the stand-in for NCCL: the simulated device's memory, which the host can read */
    .activity = sim_activity,
    .abort = sim_abort,
    .world_abort = sim_world_abort,
    /* a shared failure: every rank records the same message, so the world's diagnosis (what the rank
     * launcher prints) is it, not the first rank's return ("rank 2: ..."); nothing is left to run */
    .settled = sim_abort,
    .launch_resolve = sim_launch_resolve,
    .world_create = sim_world_create,
    .world_destroy = sim_world_destroy,
    .open = sim_open,
    .close = sim_close,
    .start = sim_start,
    .wait = sim_wait,
    .cost_model = sim_cost_model,
};
