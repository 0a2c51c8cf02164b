/* write_guard: mprotect-based write traps for in-flight copies (see write_guard.h).
 *
 * A guard is a slot of a fixed table: the guarded bytes, their pages, and a
 * state word: a kind (FREE, ARMED, TAKING, HIT, DROPPED) and how many times
 * the slot was armed, so that a compare-and-swap on the word never takes a
 * later guard in the same slot for the one whose range was read. The handler
 * touches only atomics, mprotect, gettid and sched_yield, which are safe in a
 * signal handler on Linux.
 *
 * Why a trap of ours is never taken for a crash. By the time the handler looks,
 * the guard that made the page read-only may be armed still (the handler takes
 * it: a hit, or dropped), or already taken by the end of its copy or by
 * another thread's trap, its pages lifted or about to be. Every change to the
 * guards (add, remove, a handler's take) counts itself in wg_changing while it
 * runs and advances wg_epoch when it is done, and none leaves a page read-only
 * that no armed guard covers: whoever protects a page for a guard looks at
 * that guard again afterwards and lifts the page if it has gone. So a trap
 * that finds no guard armed is retried while a change runs, or once when one
 * ended since this thread's previous trap (the page is writable by then);
 * otherwise it is no guard's, and goes to the handler installed before ours.
 */
#include "sim/write_guard.h"

#include <assert.h>
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

enum { WG_FREE, WG_ARMED, WG_TAKING, WG_HIT, WG_DROPPED, WG_KINDS = 8 };

/* A state word: kind + WG_KINDS * (times the slot was armed). */
static int wg_kind(uint64_t word) { return (int)(word % WG_KINDS); }
static uint64_t wg_as(uint64_t word, int kind) { return word - (uint64_t)wg_kind(word) + (uint64_t)kind; }

struct write_guard {
    _Atomic uint64_t state;
    _Atomic uintptr_t lo, hi;   /* the guarded bytes */
    _Atomic uintptr_t plo, phi; /* their pages */
    _Atomic uint64_t offset;
    _Atomic int tid;
    int *_Atomic flag;
};

static struct write_guard wg_table[WRITE_GUARD_MAX];
static pthread_mutex_t wg_mu = PTHREAD_MUTEX_INITIALIZER; /* adds and removes, one at a time */
static pthread_once_t wg_once = PTHREAD_ONCE_INIT;
static struct sigaction wg_previous;
static int wg_installed;
static _Atomic int wg_changing;        /* changes running now */
static _Atomic uint64_t wg_epoch;      /* changes done */
static _Thread_local uint64_t wg_seen; /* wg_epoch at this thread's last fault */

/* A fault that is not ours: hand it to whoever was there before. */
static void wg_chain(int sig, siginfo_t *si, void *ctx)
{
    if (wg_previous.sa_flags & SA_SIGINFO) {
        if (wg_previous.sa_sigaction) {
            wg_previous.sa_sigaction(sig, si, ctx);
            return;
        }
    } else if (wg_previous.sa_handler != SIG_DFL && wg_previous.sa_handler != SIG_IGN) {
        wg_previous.sa_handler(sig);
        return;
    }
    /* The default action: reinstate it and return; the instruction faults again and the process dies as it
     * would have without us. */
    struct sigaction dfl;
    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    sigaction(sig, &dfl, NULL);
}

static void wg_change_begin(void) { atomic_fetch_add(&wg_changing, 1); }

static void wg_change_end(void)
{
    atomic_fetch_add(&wg_epoch, 1); /* before the count drops: a fault sees one or the other */
    atomic_fetch_sub(&wg_changing, 1);
}

/* Makes the pages [plo, phi) writable, except those they share with a guard
 * still armed. Each page protected again for such a guard is lifted again if
 * that guard was taken meanwhile (its taker may have lifted it before us). */
static void wg_lift(uintptr_t plo, uintptr_t phi)
{
    mprotect((void *)plo, phi - plo, PROT_READ | PROT_WRITE);
    for (int i = 0; i < WRITE_GUARD_MAX; i++) {
        struct write_guard *o = &wg_table[i];
        uint64_t word = atomic_load(&o->state);
        if (wg_kind(word) != WG_ARMED)
            continue;
        uintptr_t a = atomic_load(&o->plo), b = atomic_load(&o->phi);
        a = a > plo ? a : plo;
        b = b < phi ? b : phi;
        if (a >= b)
            continue;
        mprotect((void *)a, b - a, PROT_READ);
        if (atomic_load(&o->state) != word)
            mprotect((void *)a, b - a, PROT_READ | PROT_WRITE);
    }
}

/* The fault at `a` lands on guard g's pages while it is armed (state `word`):
 * takes it, a hit when `a` is one of its bytes, dropped otherwise, and lifts
 * its pages. Returns 0 when `a` is not on its pages or another change took
 * it first. */
static int wg_take(struct write_guard *g, uint64_t word, uintptr_t a)
{
    uintptr_t plo = atomic_load(&g->plo), phi = atomic_load(&g->phi);
    uintptr_t lo = atomic_load(&g->lo), hi = atomic_load(&g->hi);
    if (a < plo || a >= phi)
        return 0;
    wg_change_begin();
    int took = atomic_compare_exchange_strong(&g->state, &word, wg_as(word, WG_TAKING));
    if (took) {
        int inside = a >= lo && a < hi;
        wg_lift(plo, phi); /* first: once remove() sees the hit, the pages are the owner's again */
        if (inside) {      /* recorded whole before anyone can see the hit */
            atomic_store(&g->offset, a - lo);
            atomic_store(&g->tid, (int)syscall(SYS_gettid));
            int *flag = atomic_load(&g->flag);
            if (flag)
                __atomic_store_n(flag, 1, __ATOMIC_SEQ_CST);
        }
        atomic_store(&g->state, wg_as(word, inside ? WG_HIT : WG_DROPPED));
    }
    wg_change_end();
    return took;
}

static void wg_handler(int sig, siginfo_t *si, void *ctx)
{
    int saved_errno = errno;
    uintptr_t a = (uintptr_t)si->si_addr;
    int ours = 0;
    if (si->si_code == SEGV_ACCERR) {
        for (int i = 0; i < WRITE_GUARD_MAX; i++) { /* every armed guard on this page is taken, one per fault */
            uint64_t word = atomic_load(&wg_table[i].state);
            if (wg_kind(word) == WG_ARMED && wg_take(&wg_table[i], word, a))
                ours = 1;
        }
        if (!ours && atomic_load(&wg_changing) > 0) { /* the page's guard is on its way down: wait for it */
            syscall(SYS_sched_yield);
            ours = 1;
        }
        uint64_t epoch = atomic_load(&wg_epoch);
        ours = ours || epoch != wg_seen; /* a change done since this thread last trapped: try again */
        wg_seen = epoch;
    }
    errno = saved_errno;
    if (!ours)
        wg_chain(sig, si, ctx);
}

static uintptr_t wg_page_bytes; /* set once, in wg_install: devices of several rank threads guard at once */

static void wg_install(void)
{
    wg_page_bytes = (uintptr_t)sysconf(_SC_PAGESIZE);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = wg_handler;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigemptyset(&sa.sa_mask);
    wg_installed = sigaction(SIGSEGV, &sa, &wg_previous) == 0;
}

/* Frees guard g (wg_mu held, inside a change) and fills *out with what
 * happened. A hit being recorded is waited for. Returns 1 when it was still
 * armed: its pages, read-only still, are then the caller's to lift. */
static int wg_release(struct write_guard *g, struct write_guard_hit *out)
{
    uint64_t word = atomic_load(&g->state);
    for (;;) {
        if (wg_kind(word) == WG_TAKING) { /* a handler is lifting its pages: a moment */
            sched_yield();
            word = atomic_load(&g->state);
        } else if (wg_kind(word) != WG_ARMED || atomic_compare_exchange_strong(&g->state, &word, wg_as(word, WG_FREE))) {
            break;
        }
    }
    memset(out, 0, sizeof *out);
    if (wg_kind(word) == WG_ARMED)
        return 1;
    out->hit = wg_kind(word) == WG_HIT;
    out->dropped = wg_kind(word) == WG_DROPPED;
    out->offset = out->hit ? atomic_load(&g->offset) : 0;
    out->tid = out->hit ? atomic_load(&g->tid) : 0;
    atomic_store(&g->state, wg_as(word, WG_FREE));
    return 0;
}

/* Frees guards ids[0..n) (wg_mu held), filling out[i] for each, and lifts the
 * pages of those still armed: pages that touch or overlap are lifted in one
 * call (a copy's labels share a page with its images), since every call
 * makes each core that runs this process flush its TLB. While they come down
 * a trap on them waits (wg_changing), as for one guard. */
static void wg_free_all(const int *ids, int n, struct write_guard_hit *out)
{
    int armed[WRITE_GUARD_BATCH], na = 0;
    assert(n <= WRITE_GUARD_BATCH);
    wg_change_begin();
    for (int i = 0; i < n; i++)
        if (wg_release(&wg_table[ids[i]], &out[i])) { /* kept in order of their first page */
            int k = na++;
            for (; k > 0 && atomic_load(&wg_table[armed[k - 1]].plo) > atomic_load(&wg_table[ids[i]].plo); k--)
                armed[k] = armed[k - 1];
            armed[k] = ids[i];
        }
    for (int i = 0; i < na;) {
        uintptr_t plo = atomic_load(&wg_table[armed[i]].plo), phi = atomic_load(&wg_table[armed[i]].phi);
        for (i++; i < na && atomic_load(&wg_table[armed[i]].plo) <= phi; i++)
            if (atomic_load(&wg_table[armed[i]].phi) > phi)
                phi = atomic_load(&wg_table[armed[i]].phi);
        wg_lift(plo, phi);
    }
    wg_change_end();
}

static void wg_free(int id, struct write_guard_hit *out) { wg_free_all(&id, 1, out); }

/* Whether the pages [plo, phi) lie inside those of a guard other than `id`
 * that is armed: they are read-only already (a batch's labels on the last
 * page of its images), and an mprotect would only flush every core's TLB
 * again. Read after guard id is armed: should that guard be taken from now
 * on, its lift protects id's pages again (wg_lift); taken before, it is not
 * armed here, and the caller protects them itself. */
static int wg_covered(int id, uintptr_t plo, uintptr_t phi)
{
    for (int i = 0; i < WRITE_GUARD_MAX; i++) {
        const struct write_guard *o = &wg_table[i];
        if (i != id && wg_kind(atomic_load(&o->state)) == WG_ARMED && atomic_load(&o->plo) <= plo &&
            phi <= atomic_load(&o->phi))
            return 1;
    }
    return 0;
}

int write_guard_add(const void *ptr, uint64_t bytes, int *flag)
{
    pthread_once(&wg_once, wg_install);
    if (!wg_installed || bytes == 0)
        return -1;
    uintptr_t page = wg_page_bytes, lo = (uintptr_t)ptr, hi = lo + bytes;
    uintptr_t plo = lo & ~(page - 1), phi = (hi + page - 1) & ~(page - 1);
    pthread_mutex_lock(&wg_mu);
    int id = -1;
    for (int i = 0; i < WRITE_GUARD_MAX && id < 0; i++)
        if (wg_kind(atomic_load(&wg_table[i].state)) == WG_FREE)
            id = i;
    if (id >= 0) {
        struct write_guard *g = &wg_table[id];
        wg_change_begin();
        atomic_store(&g->lo, lo);
        atomic_store(&g->hi, hi);
        atomic_store(&g->plo, plo);
        atomic_store(&g->phi, phi);
        atomic_store(&g->offset, 0);
        atomic_store(&g->tid, 0);
        atomic_store(&g->flag, flag);
        uint64_t word = wg_as(atomic_load(&g->state) + WG_KINDS, WG_ARMED);
        atomic_store(&g->state, word); /* before the pages trap, so a trap always finds it */
        int protected = wg_covered(id, plo, phi) || mprotect((void *)plo, phi - plo, PROT_READ) == 0;
        if (protected && atomic_load(&g->state) != word) /* a write on a page it shares took it meanwhile */
            wg_lift(plo, phi);
        wg_change_end();
        if (!protected) {
            struct write_guard_hit ignored;
            wg_free(id, &ignored);
            id = -1;
        }
    }
    pthread_mutex_unlock(&wg_mu);
    return id;
}

void write_guard_peek(int id, struct write_guard_hit *out)
{
    const struct write_guard *g = &wg_table[id];
    uint64_t word = atomic_load(&g->state);
    memset(out, 0, sizeof *out);
    out->hit = wg_kind(word) == WG_HIT;
    out->dropped = wg_kind(word) == WG_DROPPED;
    if (out->hit) {
        out->offset = atomic_load(&g->offset);
        out->tid = atomic_load(&g->tid);
    }
}

void write_guard_remove(int id, struct write_guard_hit *out) { write_guard_remove_all(&id, 1, out); }

void write_guard_remove_all(const int *ids, int n, struct write_guard_hit *out)
{
    pthread_mutex_lock(&wg_mu);
    wg_free_all(ids, n, out);
    pthread_mutex_unlock(&wg_mu);
}
