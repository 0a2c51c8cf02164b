/* test_write_guard: the write trap under the simulated device's
 * use-before-ready detector (sim/write_guard.h), driven directly.
 *
 * A write that traps races with its guard: the copy that ends lifts the guard
 * while the writer's fault is on its way to the handler, or a write traps on a
 * page as another guard goes up on it. Each such interleaving is forced here,
 * never hoped for: the test stands between the guard and the kernel twice, as
 * a SIGSEGV handler in front of the guard's own (it runs before the guard's
 * handler sees the fault) and as this program's mprotect, which takes the
 * place of libc's for the guard's calls (it runs at the moment the guard is
 * about to change a page). Every write into a guarded page must then either be
 * reported as the detector's finding or go through; none may kill the process,
 * and a fault that is no guard's must still be a crash.
 */
#include "check.h"
#include "sim/write_guard.h"

#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

static size_t test_page_bytes(void) { return (size_t)sysconf(_SC_PAGESIZE); }

/* n fresh writable pages. */
static volatile uint8_t *test_pages(size_t n)
{
    void *p = mmap(NULL, n * test_page_bytes(), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(p != MAP_FAILED);
    return p;
}

/* ---- this program's mprotect: a step run just before the guard changes a page ---- */

static void (*_Atomic test_step)(void); /* run once, then cleared */
static _Atomic int test_step_prot;
static const volatile uint8_t *_Atomic test_step_page;

/* Runs `step` the next time the guard asks for `prot` on a range holding `page`. */
static void test_before_mprotect(int prot, const volatile uint8_t *page, void (*step)(void))
{
    atomic_store(&test_step_prot, prot);
    atomic_store(&test_step_page, page);
    atomic_store(&test_step, step);
}

static atomic_int test_lifts;    /* mprotect calls that made pages writable */
static atomic_int test_protects; /* ... and read-only */

int mprotect(void *addr, size_t len, int prot)
{
    if (prot == (PROT_READ | PROT_WRITE))
        atomic_fetch_add(&test_lifts, 1);
    if (prot == PROT_READ)
        atomic_fetch_add(&test_protects, 1);
    const volatile uint8_t *page = atomic_load(&test_step_page);
    if (page && prot == atomic_load(&test_step_prot) && (const volatile uint8_t *)addr <= page &&
        page < (const volatile uint8_t *)addr + len) {
        void (*step)(void) = atomic_exchange(&test_step, NULL);
        if (step)
            step();
    }
    return (int)syscall(SYS_mprotect, addr, len, prot);
}

/* ---- a SIGSEGV handler in front of the guard's ---------------------------------- */

static struct sigaction test_guard_handler; /* the guard's, called by ours */
static atomic_int test_faults;              /* faults seen, retries included */
static atomic_int test_lift_on_fault = -1;  /* a guard to remove as the next fault arrives */
static struct write_guard_hit test_lifted;  /* what that removal said */

static void test_front(int sig, siginfo_t *si, void *ctx)
{
    atomic_fetch_add(&test_faults, 1);
    int id = atomic_exchange(&test_lift_on_fault, -1);
    if (id >= 0) /* the copy ends, and its guard comes down, after the write trapped and before the guard's handler runs */
        write_guard_remove(id, &test_lifted);
    test_guard_handler.sa_sigaction(sig, si, ctx);
}

/* Puts test_front in front of the guard's handler (installed by the first guard). */
static void test_front_install(void)
{
    struct write_guard_hit hit;
    int id = write_guard_add((const void *)test_pages(1), 1, NULL);
    CHECK(id >= 0);
    write_guard_remove(id, &hit);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = test_front;
    sa.sa_flags = SA_SIGINFO;
    sigemptyset(&sa.sa_mask);
    CHECK(sigaction(SIGSEGV, &sa, &test_guard_handler) == 0);
    CHECK(test_guard_handler.sa_flags & SA_SIGINFO);
}

static void test_front_still_there(void)
{
    struct sigaction now;
    CHECK(sigaction(SIGSEGV, NULL, &now) == 0);
    CHECK_MSG((now.sa_flags & SA_SIGINFO) && now.sa_sigaction == test_front,
              "the guard gave a fault of its own up as a crash: SIGSEGV's action was reset, so the next "
              "guarded write kills the process");
}

/* A write into guarded bytes is caught: reported at `offset`, by this thread. */
static void test_caught(volatile uint8_t *buf, uint64_t bytes, uint64_t offset)
{
    int id = write_guard_add((const void *)buf, bytes, NULL);
    CHECK(id >= 0);
    buf[offset] = 3;
    struct write_guard_hit hit;
    write_guard_remove(id, &hit);
    CHECK_MSG(hit.hit && hit.offset == offset && hit.tid == (int)syscall(SYS_gettid),
              "a write into byte %llu of a guard came back as hit %d at byte %llu by thread %d",
              (unsigned long long)offset, hit.hit, (unsigned long long)hit.offset, hit.tid);
    CHECK_EQ(buf[offset], 3);
}

/* ---- a guard coming down while a write traps on it ------------------------------ */

/* The loader refills a slot at byte 0 each time it reuses it. A write caught
 * there once, then a write at the same byte that traps just as the slot's next
 * copy ends: the fault reaches the handler with no guard up any more. The write
 * must go through, unreported (the copy had ended), and the next one be caught. */
TEST(write_guard_write_trapped_as_its_guard_comes_down_goes_through)
{
    volatile uint8_t *slot = test_pages(1);
    test_front_install();
    test_caught(slot, 64, 0);
    int id = write_guard_add((const void *)slot, 64, NULL);
    CHECK(id >= 0);
    atomic_store(&test_lift_on_fault, id);
    slot[0] = 2;
    CHECK_EQ(atomic_load(&test_lift_on_fault), -1); /* it trapped, and the guard came down */
    CHECK(!test_lifted.hit && !test_lifted.dropped);
    CHECK_EQ(slot[0], 2);
    test_front_still_there();
    test_caught(slot, 64, 0);
}

static volatile uint8_t *test_slot;

static void *test_writer(void *arg)
{
    (void)arg;
    test_slot[0] = 7;
    return NULL;
}

static pthread_t test_writer_thread;

/* Between the guard's state and its pages: another thread writes, and traps
 * (the page is still read-only) until this removal has lifted it. */
static void test_write_during_lift(void)
{
    CHECK(pthread_create(&test_writer_thread, NULL, test_writer, NULL) == 0);
    while (atomic_load(&test_faults) < 3) /* it traps, again and again: the guard is on its way down */
        sched_yield();
}

/* A write that traps while the copy's end is lifting the guard: the guard is
 * already down but its page not yet writable, for as many retries as that
 * takes. The write must wait for the page and then go through, unreported. */
TEST(write_guard_write_while_its_guard_comes_down_waits_for_the_page)
{
    test_slot = test_pages(1);
    test_front_install();
    int id = write_guard_add((const void *)test_slot, 64, NULL);
    CHECK(id >= 0);
    test_before_mprotect(PROT_READ | PROT_WRITE, test_slot, test_write_during_lift);
    struct write_guard_hit hit;
    write_guard_remove(id, &hit);
    CHECK(pthread_join(test_writer_thread, NULL) == 0);
    CHECK(!hit.hit && !hit.dropped);
    CHECK_EQ(test_slot[0], 7);
    test_front_still_there();
}

/* ---- a guard going up while a write traps on its page ---------------------------- */

static volatile uint8_t *test_shared;

static void test_write_shared_page(void) { test_shared[250] = 5; }

/* Two copies from one page, the second's running on into the next: the
 * first's guard is up, and a write into the second's bytes traps on it just
 * before the second's protection goes up. The write is the second's hit (its
 * guard was up), and once both guards are down the pages are writable: no
 * read-only page is left behind with no guard to answer for it. */
TEST(write_guard_write_as_a_guard_goes_up_leaves_no_page_read_only)
{
    test_shared = test_pages(2);
    int first = write_guard_add((const void *)test_shared, 100, NULL);
    CHECK(first >= 0);
    test_before_mprotect(PROT_READ, test_shared, test_write_shared_page);
    int second = write_guard_add((const void *)(test_shared + 200), test_page_bytes(), NULL);
    CHECK(second >= 0);
    CHECK(atomic_load(&test_step) == NULL); /* the write came in between */
    struct write_guard_hit hit;
    write_guard_remove(second, &hit);
    CHECK(hit.hit && hit.offset == 50);
    write_guard_remove(first, &hit);
    CHECK(hit.dropped);
    CHECK_EQ(test_shared[250], 5);
    test_shared[0] = 6; /* no guard is up */
    CHECK_EQ(test_shared[0], 6);
}

/* ---- one guard's hit and its neighbours ------------------------------------------ */

/* A guard over two pages and another on its second page: a write caught on
 * the first page lifts the first guard, and the second stays up. */
TEST(write_guard_hit_keeps_a_neighbour_on_a_shared_page_up)
{
    size_t page = test_page_bytes();
    volatile uint8_t *buf = test_pages(2);
    int wide = write_guard_add((const void *)buf, page + 100, NULL);
    int next = write_guard_add((const void *)(buf + page + 200), 100, NULL);
    CHECK(wide >= 0 && next >= 0);
    buf[10] = 1;
    buf[page + 250] = 2;
    struct write_guard_hit hit;
    write_guard_remove(next, &hit);
    CHECK_MSG(hit.hit && hit.offset == 50, "a write into the second guard's bytes after the first one's hit was "
              "not caught (hit %d, byte %llu)", hit.hit, (unsigned long long)hit.offset);
    write_guard_remove(wide, &hit);
    CHECK(hit.hit && hit.offset == 10);
}

/* A batch's images and labels, whose guards share a page, come down
 * together in one mprotect (each one flushes the TLB of every core running
 * the process); a third guard on that page stays up and still catches. */
TEST(write_guard_remove_all_lifts_shared_pages_at_once)
{
    size_t page = test_page_bytes();
    volatile uint8_t *buf = test_pages(3);
    int ids[2] = {write_guard_add((const void *)buf, page + 100, NULL),
                  write_guard_add((const void *)(buf + page + 100), 50, NULL)};
    int third = write_guard_add((const void *)(buf + page + 3000), page, NULL);
    CHECK(ids[0] >= 0 && ids[1] >= 0 && third >= 0);
    struct write_guard_hit hits[2], hit;
    int lifts = atomic_load(&test_lifts);
    write_guard_remove_all(ids, 2, hits);
    CHECK_EQ(atomic_load(&test_lifts) - lifts, 1);
    CHECK(!hits[0].hit && !hits[0].dropped && !hits[1].hit && !hits[1].dropped);
    buf[10] = 1; /* the first page is the host's again */
    buf[page + 3001] = 2;
    write_guard_remove(third, &hit);
    CHECK_MSG(hit.hit && hit.offset == 1, "a write into the third guard's bytes was not caught (hit %d, byte %llu)",
              hit.hit, (unsigned long long)hit.offset);
}

/* A batch's labels, on the last page of its images: the images' guard has
 * made that page read-only already, so the labels' guard goes up without an
 * mprotect (each one flushes the TLB of every core running the process), and
 * still catches a write into its bytes, before and after the images' guard
 * comes down. A guard reaching past the images' pages protects them itself. */
TEST(write_guard_inside_an_armed_guards_pages_adds_no_mprotect)
{
    size_t page = test_page_bytes();
    volatile uint8_t *buf = test_pages(3);
    int protects = atomic_load(&test_protects);
    int images = write_guard_add((const void *)buf, page + 100, NULL);
    CHECK(images >= 0 && atomic_load(&test_protects) - protects == 1);
    int labels = write_guard_add((const void *)(buf + page + 100), 50, NULL);
    CHECK_MSG(labels >= 0 && atomic_load(&test_protects) - protects == 1,
              "a guard on pages another armed guard protects called mprotect again");
    buf[page + 110] = 1;
    struct write_guard_hit hit;
    write_guard_remove(labels, &hit);
    CHECK(hit.hit && hit.offset == 10);
    write_guard_remove(images, &hit);
    CHECK(hit.dropped); /* written on its page, outside its bytes */
    images = write_guard_add((const void *)buf, page + 100, NULL);
    labels = write_guard_add((const void *)(buf + page + 100), 50, NULL);
    CHECK(images >= 0 && labels >= 0);
    write_guard_remove(images, &hit);
    CHECK(!hit.hit && !hit.dropped);
    buf[10] = 2; /* the images' first page is the host's again */
    buf[page + 120] = 3;
    write_guard_remove(labels, &hit);
    CHECK_MSG(hit.hit && hit.offset == 20, "a write into a guard's bytes after the guard whose pages it shared came "
              "down was not caught (hit %d, byte %llu)", hit.hit, (unsigned long long)hit.offset);
    protects = atomic_load(&test_protects);
    images = write_guard_add((const void *)buf, page + 100, NULL);
    int beyond = write_guard_add((const void *)(buf + page + 100), page, NULL);
    CHECK(images >= 0 && beyond >= 0 && atomic_load(&test_protects) - protects == 2);
    buf[2 * page + 10] = 4;
    write_guard_remove(beyond, &hit);
    CHECK(hit.hit && hit.offset == page - 90);
    write_guard_remove(images, &hit);
    buf[page + 120] = 5; /* no guard is up */
    CHECK_EQ(buf[page + 120], 5);
}

static volatile uint8_t *test_reused;
static int test_neighbour, test_elsewhere;

/* The neighbour's copy ends, and the next copy's guard takes its slot, on
 * another page. */
static void test_reuse_slot(void)
{
    struct write_guard_hit hit;
    write_guard_remove(test_neighbour, &hit);
    test_elsewhere = write_guard_add((const void *)(test_reused + 2 * test_page_bytes() + 10), 50, NULL);
}

/* A hit lifts a guard's pages and protects again the one it shares with a
 * neighbour; just then the neighbour comes down and its slot is armed again
 * for a copy elsewhere. The shared page must not stay read-only for a guard
 * that is no longer there. */
TEST(write_guard_slot_reused_during_a_hit_leaves_no_page_read_only)
{
    size_t page = test_page_bytes();
    test_reused = test_pages(3);
    int wide = write_guard_add((const void *)test_reused, page + 100, NULL);
    test_neighbour = write_guard_add((const void *)(test_reused + page + 200), 100, NULL);
    CHECK(wide >= 0 && test_neighbour >= 0);
    test_before_mprotect(PROT_READ, test_reused + page, test_reuse_slot);
    test_reused[10] = 1; /* the wide guard's hit: its second page is protected again for the neighbour */
    CHECK(atomic_load(&test_step) == NULL);
    CHECK_EQ(test_elsewhere, test_neighbour); /* the same slot, armed again */
    test_reused[page + 250] = 2;              /* no guard covers this page now */
    struct write_guard_hit hit;
    write_guard_remove(test_elsewhere, &hit);
    CHECK(!hit.hit && !hit.dropped);
    write_guard_remove(wide, &hit);
    CHECK(hit.hit && hit.offset == 10);
    CHECK_EQ(test_reused[page + 250], 2);
}

static int test_peek_id;
static struct write_guard_hit test_peeked;

static void test_peek(void) { write_guard_peek(test_peek_id, &test_peeked); }

/* A hit is seen whole or not yet: looked at while the handler is still lifting
 * the pages, it is not a hit with no byte or thread recorded yet. */
TEST(write_guard_hit_is_seen_whole_or_not_at_all)
{
    volatile uint8_t *buf = test_pages(1);
    test_peek_id = write_guard_add((const void *)buf, 64, NULL);
    CHECK(test_peek_id >= 0);
    test_before_mprotect(PROT_READ | PROT_WRITE, buf, test_peek);
    buf[10] = 1;
    CHECK(atomic_load(&test_step) == NULL);
    CHECK_MSG(!test_peeked.hit || (test_peeked.offset == 10 && test_peeked.tid == (int)syscall(SYS_gettid)),
              "a hit was seen before its record: byte %llu, thread %d", (unsigned long long)test_peeked.offset,
              test_peeked.tid);
    struct write_guard_hit hit;
    write_guard_remove(test_peek_id, &hit);
    CHECK(hit.hit && hit.offset == 10);
}

/* ---- a fault that is no guard's -------------------------------------------------- */

/* A write into a read-only page no guard ever covered, after guards came and
 * went: the process dies of it, as it would without the detector (neither
 * retried for ever nor swallowed), or the handler before ours (a sanitizer's)
 * reports it and exits. */
TEST(write_guard_fault_of_no_guard_is_still_a_crash)
{
    volatile uint8_t *buf = test_pages(1);
    test_caught(buf, 64, 0);
    void *ro = mmap(NULL, test_page_bytes(), PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(ro != MAP_FAILED);
    pid_t kid = fork();
    CHECK(kid >= 0);
    if (kid == 0) {
        int null = open("/dev/null", O_WRONLY);
        if (null < 0 || dup2(null, STDERR_FILENO) < 0) /* a sanitizer's report is not this test's failure */
            _exit(4);
        *(volatile uint8_t *)ro = 1;
        _exit(0);
    }
    int status;
    CHECK_EQ(waitpid(kid, &status, 0), kid);
    /* SIGABRT: a sanitizer told to abort on an error (the suites' abort_on_error=1) */
    int crashed = WIFSIGNALED(status) ? WTERMSIG(status) == SIGSEGV || WTERMSIG(status) == SIGABRT
                                      : WEXITSTATUS(status) != 0 && WEXITSTATUS(status) != 4;
    CHECK_MSG(crashed, "a write into a read-only page ended with status 0x%x, not SIGSEGV", status);
}
