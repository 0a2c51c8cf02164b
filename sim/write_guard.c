/* write_guard: mprotect-based write traps for in-flight copies (see write_guard.h).
 *
 * A guard is a slot of a fixed table: the guarded bytes, their pages, and a
 * state (FREE, ARMED, HIT, DROPPED) that the SIGSEGV handler changes with one
 * compare-and-swap. The handler touches only atomics, mprotect and gettid,
 * which are safe in a signal handler on Linux. A lifted guard keeps its
 * range, so a write that trapped just before the lift finds it, returns and
 * retries on the now writable page instead of being taken for a crash.
 */
#include "sim/write_guard.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

enum { WG_FREE, WG_ARMED, WG_HIT, WG_DROPPED };

struct write_guard {
    _Atomic int state;
    _Atomic uintptr_t lo, hi;   /* the guarded bytes */
    _Atomic uintptr_t plo, phi; /* their pages */
    _Atomic uint64_t offset;
    _Atomic int tid;
    int *_Atomic flag;
};

static struct write_guard wg_table[WRITE_GUARD_MAX];
static pthread_mutex_t wg_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t wg_once = PTHREAD_ONCE_INIT;
static struct sigaction wg_previous;
static int wg_installed;
static int wg_next; /* round robin: a lifted guard's range stays findable as long as possible */
static _Thread_local uintptr_t wg_retried; /* the last address this thread retried */

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

static void wg_handler(int sig, siginfo_t *si, void *ctx)
{
    int saved_errno = errno;
    uintptr_t a = (uintptr_t)si->si_addr;
    int ours = 0;
    if (si->si_code == SEGV_ACCERR) {
        for (int i = 0; i < WRITE_GUARD_MAX; i++) {
            struct write_guard *g = &wg_table[i];
            if (atomic_load(&g->state) != WG_ARMED || a < atomic_load(&g->plo) || a >= atomic_load(&g->phi))
                continue;
            int armed = WG_ARMED;
            int inside = a >= atomic_load(&g->lo) && a < atomic_load(&g->hi);
            if (atomic_compare_exchange_strong(&g->state, &armed, inside ? WG_HIT : WG_DROPPED)) {
                if (inside) {
                    atomic_store(&g->offset, a - atomic_load(&g->lo));
                    atomic_store(&g->tid, (int)syscall(SYS_gettid));
                    int *flag = atomic_load(&g->flag);
                    if (flag)
                        __atomic_store_n(flag, 1, __ATOMIC_SEQ_CST);
                }
                uintptr_t plo = atomic_load(&g->plo);
                mprotect((void *)plo, atomic_load(&g->phi) - plo, PROT_READ | PROT_WRITE);
            }
            ours = 1; /* every armed guard on this page is lifted the same way, one per fault */
        }
        /* A guard lifted while this fault was on its way: retry once. */
        for (int i = 0; !ours && i < WRITE_GUARD_MAX; i++)
            if (a >= atomic_load(&wg_table[i].plo) && a < atomic_load(&wg_table[i].phi) && wg_retried != a)
                ours = 1;
    }
    wg_retried = ours ? a : 0;
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


int write_guard_add(const void *ptr, uint64_t bytes, int *flag)
{
    pthread_once(&wg_once, wg_install);
    if (!wg_installed || bytes == 0)
        return -1;
    uintptr_t page = wg_page_bytes, lo = (uintptr_t)ptr, hi = lo + bytes;
    uintptr_t plo = lo & ~(page - 1), phi = (hi + page - 1) & ~(page - 1);
    pthread_mutex_lock(&wg_mu);
    int id = -1;
    for (int k = 0; k < WRITE_GUARD_MAX && id < 0; k++) {
        int i = (wg_next + k) % WRITE_GUARD_MAX;
        if (atomic_load(&wg_table[i].state) == WG_FREE)
            id = i;
    }
    if (id >= 0) {
        struct write_guard *g = &wg_table[id];
        wg_next = (id + 1) % WRITE_GUARD_MAX;
        atomic_store(&g->lo, lo);
        atomic_store(&g->hi, hi);
        atomic_store(&g->plo, plo);
        atomic_store(&g->phi, phi);
        atomic_store(&g->offset, 0);
        atomic_store(&g->tid, 0);
        atomic_store(&g->flag, flag);
        atomic_store(&g->state, WG_ARMED); /* before the pages trap, so a trap always finds it */
        if (mprotect((void *)plo, phi - plo, PROT_READ) != 0) {
            atomic_store(&g->state, WG_FREE);
            id = -1;
        }
    }
    pthread_mutex_unlock(&wg_mu);
    return id;
}

static void wg_read(const struct write_guard *g, int state, struct write_guard_hit *out)
{
    memset(out, 0, sizeof *out);
    out->hit = state == WG_HIT;
    out->dropped = state == WG_DROPPED;
    if (out->hit) {
        out->offset = atomic_load(&g->offset);
        out->tid = atomic_load(&g->tid);
    }
}

void write_guard_peek(int id, struct write_guard_hit *out)
{
    const struct write_guard *g = &wg_table[id];
    wg_read(g, atomic_load(&g->state), out);
}

void write_guard_remove(int id, struct write_guard_hit *out)
{
    struct write_guard *g = &wg_table[id];
    pthread_mutex_lock(&wg_mu);
    int state = WG_ARMED;
    uintptr_t plo = atomic_load(&g->plo), phi = atomic_load(&g->phi);
    if (atomic_compare_exchange_strong(&g->state, &state, WG_FREE)) {
        mprotect((void *)plo, phi - plo, PROT_READ | PROT_WRITE);
        /* Pages this guard shared with another that is still up must stay protected. */
        for (int i = 0; i < WRITE_GUARD_MAX; i++) {
            struct write_guard *o = &wg_table[i];
            if (atomic_load(&o->state) != WG_ARMED)
                continue;
            uintptr_t a = atomic_load(&o->plo) > plo ? atomic_load(&o->plo) : plo;
            uintptr_t b = atomic_load(&o->phi) < phi ? atomic_load(&o->phi) : phi;
            if (a < b) {
                mprotect((void *)a, b - a, PROT_READ);
                /* a write that hit o in between has lifted o's protection (the handler moves o off
                 * ARMED before its own mprotect): lift it again, or the page stays read-only unguarded */
                if (atomic_load(&o->state) != WG_ARMED)
                    mprotect((void *)a, b - a, PROT_READ | PROT_WRITE);
            }
        }
        wg_read(g, WG_ARMED, out);
    } else {
        wg_read(g, state, out);
        atomic_store(&g->state, WG_FREE);
    }
    pthread_mutex_unlock(&wg_mu);
}
