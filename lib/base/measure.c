/* measure: copy bandwidths (memcpy on one or more threads, a gather of
 * records) and a child's peak RSS (see measure.h). */
#include "base/measure.h"

#include "base/clock.h"
#include "base/error.h"
#include "base/fsutil.h"
#include "base/mem.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

static uint64_t measure_now_ns(enum measure_clock clock)
{
    return clock == MEASURE_THREAD_CPU ? clock_thread_cpu_ns() : clock_now_ns();
}

static int measure_cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

void measure_sort(double *v, size_t n) { qsort(v, n, sizeof *v, measure_cmp_double); }

/* Fills *out from the seconds of each trial (sorted here). */
static void measure_summarize(double *secs, int trials, size_t bytes, struct measure_bandwidth *out)
{
    double total = 0;
    for (int t = 0; t < trials; t++)
        total += secs[t];
    measure_sort(secs, (size_t)trials);
    *out = (struct measure_bandwidth){
        .best_bps = (double)bytes / secs[0],
        .median_bps = (double)bytes / secs[trials / 2],
        .mean_bps = (double)bytes * trials / total,
        .bytes = bytes,
        .trials = trials,
    };
}

/* Seconds since t0 on `clock`, never 0 (a clock tick coarser than the work). */
static double measure_since(enum measure_clock clock, uint64_t t0)
{
    uint64_t dt = measure_now_ns(clock) - t0;
    return dt > 0 ? (double)dt * 1e-9 : 1e-9;
}

/* ---- copies on one or more threads ----------------------------------------- */

/* Every thread starts each trial together. A barrier of our own rather than
 * pthread_barrier_t, because it can be called off: a thread that never
 * started must not leave the others waiting for it. */
struct measure_barrier {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int n, waiting, cancelled;
    unsigned gen;
};

/* 0 once all n threads arrived, -1 when the barrier was called off. */
static int measure_barrier_wait(struct measure_barrier *b)
{
    pthread_mutex_lock(&b->mu);
    unsigned gen = b->gen;
    if (!b->cancelled && ++b->waiting == b->n) {
        b->waiting = 0;
        b->gen++;
        pthread_cond_broadcast(&b->cv);
    }
    while (!b->cancelled && gen == b->gen)
        pthread_cond_wait(&b->cv, &b->mu);
    int rc = gen != b->gen ? 0 : -1;
    pthread_mutex_unlock(&b->mu);
    return rc;
}

static void measure_barrier_cancel(struct measure_barrier *b)
{
    pthread_mutex_lock(&b->mu);
    b->cancelled = 1;
    pthread_cond_broadcast(&b->cv);
    pthread_mutex_unlock(&b->mu);
}

/* One copying thread: its buffers and the seconds of each of its trials. */
struct measure_worker {
    const struct measure_copy *spec;
    struct measure_barrier *start;
    char *a, *b;
    double *secs;
    pthread_t thread;
};

static void *measure_worker_main(void *arg)
{
    struct measure_worker *w = arg;
    const struct measure_copy *spec = w->spec;
    memset(w->a, 1, spec->bytes); /* fault every page in before timing */
    memset(w->b, 2, spec->bytes);
    for (int t = 0; t < spec->trials; t++) {
        if (measure_barrier_wait(w->start) < 0)
            return NULL;
        char *dst = t % 2 ? w->a : w->b, *src = t % 2 ? w->b : w->a;
        uint64_t t0 = measure_now_ns(spec->clock);
        if (spec->kernel)
            spec->kernel(spec->user, dst, src, spec->bytes);
        else
            memcpy(dst, src, spec->bytes);
        w->secs[t] = measure_since(spec->clock, t0);
    }
    /* read the copies back so they cannot be optimised away */
    volatile char sink = (char)(w->a[spec->bytes / 2] + w->b[spec->bytes / 3]);
    (void)sink;
    return NULL;
}

int measure_copy(const struct measure_copy *spec, struct measure_bandwidth *out)
{
    if (spec->bytes == 0 || spec->trials < 1 || spec->trials > 1000 || spec->threads < 1 || spec->threads > 256)
        return err_set(ERR_ARG, "measure: %zu bytes x %d trials on %d threads (need bytes > 0, 1 to 1000 trials, "
                       "1 to 256 threads)", spec->bytes, spec->trials, spec->threads);
    if (spec->bytes > SIZE_MAX / 2 / (size_t)spec->threads)
        return err_set(ERR_ARG, "measure: %d threads x 2 buffers of %zu bytes overflow", spec->threads, spec->bytes);
    int n = spec->threads, rc = 0, started = 0;
    struct measure_worker *w = calloc((size_t)n, sizeof *w);
    double *secs = malloc((size_t)n * (size_t)spec->trials * sizeof *secs);
    struct measure_barrier start = {.n = n};
    pthread_mutex_init(&start.mu, NULL);
    pthread_cond_init(&start.cv, NULL);
    if (!w || !secs)
        rc = err_set(ERR_NOMEM, "measure: out of memory for %d threads", n);
    for (int i = 0; rc == 0 && i < n; i++) {
        w[i] = (struct measure_worker){.spec = spec, .start = &start, .a = malloc(spec->bytes),
                                       .b = malloc(spec->bytes), .secs = secs + (size_t)i * (size_t)spec->trials};
        if (!w[i].a || !w[i].b)
            rc = err_set(ERR_NOMEM, "measure: out of memory for two buffers of %zu bytes (thread %d of %d)",
                         spec->bytes, i, n);
    }
    /* thread 0 is the caller; the others start, and all meet at each trial's barrier */
    for (started = 1; rc == 0 && started < n; started++) {
        int e = pthread_create(&w[started].thread, NULL, measure_worker_main, &w[started]);
        if (e) {
            rc = err_set(ERR_IO, "measure: cannot start copying thread %d of %d: %s", started, n, strerror(e));
            break;
        }
    }
    if (rc == 0)
        measure_worker_main(&w[0]);
    else
        measure_barrier_cancel(&start); /* the threads that did start stop at their next trial */
    for (int i = 1; i < started; i++)
        pthread_join(w[i].thread, NULL);
    if (rc == 0) {
        /* a trial lasts as long as its slowest thread */
        for (int t = 0; t < spec->trials; t++)
            for (int i = 1; i < n; i++)
                if (secs[(size_t)i * (size_t)spec->trials + (size_t)t] > secs[t])
                    secs[t] = secs[(size_t)i * (size_t)spec->trials + (size_t)t];
        measure_summarize(secs, spec->trials, spec->bytes * (size_t)n, out);
    }
    for (int i = 0; w && i < n; i++) {
        free(w[i].a);
        free(w[i].b);
    }
    pthread_cond_destroy(&start.cv);
    pthread_mutex_destroy(&start.mu);
    free(w);
    free(secs);
    return rc;
}

int measure_memcpy(size_t bytes, int trials, enum measure_clock clock, struct measure_bandwidth *out)
{
    struct measure_copy spec = {.bytes = bytes, .trials = trials, .threads = 1, .clock = clock};
    return measure_copy(&spec, out);
}

/* ---- gathering records --------------------------------------------------------- */

int measure_gather(size_t record_bytes, uint64_t records, const uint64_t *order, uint64_t count, uint64_t window,
                   int trials, enum measure_clock clock, struct measure_bandwidth *out)
{
    size_t src_bytes, dst_bytes, trial_bytes;
    if (record_bytes == 0 || records == 0 || count == 0 || window == 0 || trials < 1 || trials > 1000)
        return err_set(ERR_ARG, "measure_gather: records of %zu bytes, %llu of them, %llu gathered into %llu, %d "
                       "trials (need each above 0, at most 1000 trials)", record_bytes, (unsigned long long)records,
                       (unsigned long long)count, (unsigned long long)window, trials);
    if (__builtin_mul_overflow(record_bytes, records, &src_bytes) ||
        __builtin_mul_overflow(record_bytes, window, &dst_bytes) ||
        __builtin_mul_overflow(record_bytes, count, &trial_bytes))
        return err_set(ERR_ARG, "measure_gather: %llu records of %zu bytes overflow the address space",
                       (unsigned long long)(records > count ? records : count), record_bytes);
    for (uint64_t i = 0; i < count; i++)
        if (order[i] >= records)
            return err_set(ERR_ARG, "measure_gather: index %llu at position %llu is past the %llu records",
                           (unsigned long long)order[i], (unsigned long long)i, (unsigned long long)records);
    int rc = mem_check_fits("measure_gather: a copy of the records and a batch buffer",
                            src_bytes > SIZE_MAX - dst_bytes ? UINT64_MAX : (uint64_t)(src_bytes + dst_bytes));
    if (rc < 0)
        return rc;
    uint8_t *src = malloc(src_bytes), *dst = malloc(dst_bytes);
    double *secs = malloc((size_t)trials * sizeof *secs);
    if (!src || !dst || !secs) {
        free(src);
        free(dst);
        free(secs);
        return err_set(ERR_NOMEM, "measure_gather: out of memory for %zu + %zu bytes", src_bytes, dst_bytes);
    }
    memset(src, 1, src_bytes); /* fault every page in before timing */
    memset(dst, 2, dst_bytes);
    for (int t = 0; t < trials; t++) {
        uint64_t t0 = measure_now_ns(clock);
        for (uint64_t i = 0; i < count; i++)
            memcpy(dst + (i % window) * record_bytes, src + order[i] * record_bytes, record_bytes);
        __asm__ volatile("" : : "r"(dst) : "memory"); /* the copies are used */
        secs[t] = measure_since(clock, t0);
    }
    measure_summarize(secs, trials, trial_bytes, out);
    free(src);
    free(dst);
    free(secs);
    return 0;
}

/* What the child sends back before its result. */
struct measure_child_head {
    int rc;
    char msg[512];
};

int measure_in_child(int (*fn)(void *arg, void *result), void *arg, void *result, size_t result_size,
                     uint64_t *peak_kib)
{
    int fds[2];
    if (pipe(fds) != 0)
        return err_set(ERR_IO, "measure: pipe failed: %s", strerror(errno));
    fflush(NULL); /* or the child's exit would print the parent's buffered output twice */
    pid_t parent = getpid(), pid = fork();
    if (pid < 0) {
        close(fds[0]);
        close(fds[1]);
        return err_set(ERR_IO, "measure: fork failed: %s", strerror(errno));
    }
    if (pid == 0) {
        /* A parent killed (SIGTERM to its pid alone, as a scheduler sends it)
         * takes the child along: left alone it would go on for its whole
         * measurement, minutes and gigabytes for a large strategy. SIGTERM,
         * so that fsutil's handler removes the child's temporary files; and
         * a parent that died before the prctl is gone already. */
        prctl(PR_SET_PDEATHSIG, SIGTERM);
        if (getppid() != parent)
            _exit(3);
        close(fds[0]);
        struct measure_child_head head = {0};
        head.rc = fn(arg, result);
        if (head.rc < 0)
            snprintf(head.msg, sizeof head.msg, "%s", err_msg());
        if (fsutil_write_all(fds[1], &head, sizeof head, "the result pipe") < 0 ||
            (head.rc >= 0 && result_size > 0 && fsutil_write_all(fds[1], result, result_size, "the result pipe") < 0))
            _exit(3);
        _exit(0);
    }
    close(fds[1]);
    struct measure_child_head head;
    int got = fsutil_read_all(fds[0], &head, sizeof head, "the result pipe") == 0 &&
              (head.rc < 0 || result_size == 0 || fsutil_read_all(fds[0], result, result_size, "the result pipe") == 0);
    close(fds[0]);
    int status = 0;
    struct rusage ru;
    memset(&ru, 0, sizeof ru);
    while (wait4(pid, &status, 0, &ru) < 0 && errno == EINTR) {
    }
    if (peak_kib)
        *peak_kib = (uint64_t)ru.ru_maxrss; /* Linux reports kilobytes */
    if (WIFSIGNALED(status))
        return err_set(ERR_IO, "measure: the child process was killed by signal %d (%s)%s", WTERMSIG(status),
                       strsignal(WTERMSIG(status)), WTERMSIG(status) == SIGKILL ? ": out of memory?" : "");
    if (!got || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
        return err_set(ERR_IO, "measure: the child process died before it reported (status %#x)", status);
    if (head.rc < 0)
        return err_set(head.rc, "%s", head.msg);
    return head.rc;
}
