/* measure: memcpy bandwidth and a child's peak RSS (see measure.h). */
#include "base/measure.h"

#include "base/clock.h"
#include "base/error.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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

int measure_memcpy(size_t bytes, int trials, enum measure_clock clock, struct measure_bandwidth *out)
{
    if (bytes == 0 || trials < 1 || trials > 1000)
        return err_set(ERR_ARG, "measure_memcpy: %zu bytes x %d trials (need bytes > 0, 1 to 1000 trials)", bytes,
                       trials);
    char *a = malloc(bytes), *b = malloc(bytes);
    double *secs = malloc((size_t)trials * sizeof *secs);
    if (!a || !b || !secs) {
        free(a);
        free(b);
        free(secs);
        return err_set(ERR_NOMEM, "measure_memcpy: out of memory for two buffers of %zu bytes", bytes);
    }
    memset(a, 1, bytes); /* fault every page in before timing */
    memset(b, 2, bytes);
    for (int t = 0; t < trials; t++) {
        uint64_t t0 = measure_now_ns(clock);
        memcpy(t % 2 ? a : b, t % 2 ? b : a, bytes);
        uint64_t dt = measure_now_ns(clock) - t0;
        secs[t] = dt > 0 ? (double)dt * 1e-9 : 1e-9; /* a clock tick coarser than the copy */
    }
    /* read the copies back so they cannot be optimised away */
    volatile char sink = (char)(a[bytes / 2] + b[bytes / 3]);
    (void)sink;
    qsort(secs, (size_t)trials, sizeof *secs, measure_cmp_double);
    *out = (struct measure_bandwidth){
        .best_bps = (double)bytes / secs[0],
        .median_bps = (double)bytes / secs[trials / 2],
        .bytes = bytes,
        .trials = trials,
    };
    free(a);
    free(b);
    free(secs);
    return 0;
}

/* What the child sends back before its result. */
struct measure_child_head {
    int rc;
    char msg[512];
};

static int measure_read_all(int fd, void *buf, size_t n)
{
    char *p = buf;
    while (n > 0) {
        ssize_t r = read(fd, p, n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return -1;
        p += r;
        n -= (size_t)r;
    }
    return 0;
}

static void measure_write_all(int fd, const void *buf, size_t n)
{
    const char *p = buf;
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            _exit(3);
        p += w;
        n -= (size_t)w;
    }
}

int measure_in_child(int (*fn)(void *arg, void *result), void *arg, void *result, size_t result_size,
                     uint64_t *peak_kib)
{
    int fds[2];
    if (pipe(fds) != 0)
        return err_set(ERR_IO, "measure: pipe failed: %s", strerror(errno));
    fflush(NULL); /* or the child's exit would print the parent's buffered output twice */
    pid_t pid = fork();
    if (pid < 0) {
        close(fds[0]);
        close(fds[1]);
        return err_set(ERR_IO, "measure: fork failed: %s", strerror(errno));
    }
    if (pid == 0) {
        close(fds[0]);
        struct measure_child_head head = {0};
        head.rc = fn(arg, result);
        if (head.rc < 0)
            snprintf(head.msg, sizeof head.msg, "%s", err_msg());
        measure_write_all(fds[1], &head, sizeof head);
        if (head.rc >= 0 && result_size > 0)
            measure_write_all(fds[1], result, result_size);
        _exit(0);
    }
    close(fds[1]);
    struct measure_child_head head;
    int got = measure_read_all(fds[0], &head, sizeof head) == 0 &&
              (head.rc < 0 || result_size == 0 || measure_read_all(fds[0], result, result_size) == 0);
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
