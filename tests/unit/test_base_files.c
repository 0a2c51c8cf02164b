/* test_base_files: lib/base/fsutil and lib/base/measure keep their contracts.
 * An atomic write leaves the final file or nothing (never a *.tmp-* beside
 * it), a failed write leaves the old file as it was, and mkdir -p makes every
 * parent; a child's result, message and peak RSS come back, and a child that
 * dies is named as dead. */
#include "check.h"
#include "base/clock.h"
#include "base/error.h"
#include "base/fsutil.h"
#include "base/measure.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Number of entries in dir whose name contains ".tmp-". */
static int count_tmp(const char *dir)
{
    DIR *d = opendir(dir);
    int n = 0;
    for (struct dirent *e; d && (e = readdir(d));)
        n += strstr(e->d_name, ".tmp-") != NULL;
    if (d)
        closedir(d);
    return n;
}

static void read_text(const char *path, char *buf, size_t cap)
{
    FILE *f = fopen(path, "r");
    CHECK_MSG(f, "%s: cannot open", path);
    size_t n = fread(buf, 1, cap - 1, f);
    buf[n] = '\0';
    fclose(f);
}

TEST(fsutil_mkdir_p_makes_parents)
{
    char dir[512];
    snprintf(dir, sizeof dir, "%s/a/b/c", check_tmpdir());
    CHECK_OK(fsutil_mkdir_p(dir));
    struct stat st;
    CHECK(stat(dir, &st) == 0 && S_ISDIR(st.st_mode));
    CHECK_OK(fsutil_mkdir_p(dir)); /* existing: fine */
}

TEST(fsutil_atomic_write_replaces_and_leaves_no_tmp)
{
    char path[512], text[64];
    snprintf(path, sizeof path, "%s/out.txt", check_tmpdir());
    for (int round = 0; round < 2; round++) {
        struct fsutil_tmp t;
        CHECK_OK(fsutil_tmp_open(&t, path));
        const char *body = round ? "second\n" : "first\n";
        CHECK_OK(fsutil_tmp_finish(&t, fsutil_write_all(t.fd, body, strlen(body), t.path), FSUTIL_DURABLE));
        read_text(path, text, sizeof text);
        CHECK_STR(text, body);
    }
    struct stat st;
    CHECK(stat(path, &st) == 0);
    CHECK_EQ(st.st_mode & 0777, 0644);
    CHECK_EQ(count_tmp(check_tmpdir()), 0);
}

TEST(fsutil_failed_write_keeps_the_old_file)
{
    char path[512], text[64];
    snprintf(path, sizeof path, "%s/keep.txt", check_tmpdir());
    struct fsutil_tmp t;
    CHECK_OK(fsutil_tmp_open(&t, path));
    CHECK_OK(fsutil_tmp_finish(&t, fsutil_write_all(t.fd, "old\n", 4, t.path), 0));
    CHECK_OK(fsutil_tmp_open(&t, path));
    CHECK_OK(fsutil_write_all(t.fd, "half", 4, t.path));
    CHECK_EQ(fsutil_tmp_finish(&t, err_set(ERR_FORMAT, "the writer failed"), 0), ERR_FORMAT);
    read_text(path, text, sizeof text);
    CHECK_STR(text, "old\n");
    CHECK_EQ(count_tmp(check_tmpdir()), 0);
}

TEST(fsutil_unwritable_directory_is_named)
{
    CHECK_ERR(({
                  struct fsutil_tmp t;
                  fsutil_tmp_open(&t, "/proc/no-such-dir/file");
              }),
              ERR_IO, "/proc/no-such-dir/file");
}

TEST(measure_memcpy_reports_a_rate)
{
    struct measure_bandwidth bw;
    CHECK_OK(measure_memcpy(1 << 20, 5, MEASURE_WALL, &bw));
    CHECK(bw.best_bps >= bw.median_bps && bw.median_bps > 0);
    CHECK_EQ(bw.trials, 5);
    CHECK_OK(measure_memcpy(1 << 20, 3, MEASURE_THREAD_CPU, &bw));
    CHECK(bw.best_bps > 0);
    CHECK_ERR(measure_memcpy(0, 3, MEASURE_WALL, &bw), ERR_ARG, "bytes");
}

/* A kernel that counts its calls and copies, so a test sees it ran. */
static void counting_kernel(void *user, void *dst, const void *src, size_t bytes)
{
    __atomic_add_fetch((int *)user, 1, __ATOMIC_RELAXED);
    memcpy(dst, src, bytes);
}

TEST(measure_copy_runs_every_thread_every_trial)
{
    int calls = 0;
    struct measure_copy spec = {.bytes = 1 << 16, .trials = 4, .threads = 3, .clock = MEASURE_WALL,
                                .kernel = counting_kernel, .user = &calls};
    struct measure_bandwidth bw;
    CHECK_OK(measure_copy(&spec, &bw));
    CHECK_EQ(calls, 12);
    CHECK_EQ(bw.bytes, 3u << 16); /* a trial counts every thread's bytes */
    CHECK(bw.best_bps >= bw.median_bps && bw.median_bps > 0 && bw.mean_bps > 0);
    spec.threads = 0;
    CHECK_ERR(measure_copy(&spec, &bw), ERR_ARG, "threads");
}

TEST(measure_gather_copies_records_in_order)
{
    uint64_t order[] = {3, 0, 2, 2, 1};
    struct measure_bandwidth bw;
    CHECK_OK(measure_gather(4096, 4, order, 5, 2, 3, MEASURE_THREAD_CPU, &bw));
    CHECK_EQ(bw.bytes, 5u * 4096);
    CHECK(bw.best_bps > 0);
    order[4] = 4;
    CHECK_ERR(measure_gather(4096, 4, order, 5, 2, 3, MEASURE_WALL, &bw), ERR_ARG, "index 4 at position 4");
    CHECK_ERR(measure_gather(1ull << 40, 1ull << 40, order, 4, 2, 3, MEASURE_WALL, &bw), ERR_ARG, "overflow");
}

static int child_allocates(void *arg, void *result)
{
    size_t mib = *(size_t *)arg;
    char *p = malloc(mib << 20);
    if (!p)
        return err_set(ERR_NOMEM, "no memory");
    memset(p, 7, mib << 20); /* touch it, so it counts as resident */
    *(long *)result = p[12345] + 35;
    free(p);
    return 0;
}

static int child_fails(void *arg, void *result)
{
    (void)arg;
    (void)result;
    return err_set(ERR_FORMAT, "the child's own words");
}

static int child_dies(void *arg, void *result)
{
    (void)arg;
    (void)result;
    raise(SIGKILL);
    return 0;
}

TEST(measure_in_child_returns_result_and_peak)
{
    size_t small = 1, big = 64;
    long result = 0;
    uint64_t peak_small = 0, peak_big = 0;
    CHECK_OK(measure_in_child(child_allocates, &small, &result, sizeof result, &peak_small));
    CHECK_EQ(result, 42);
    CHECK_OK(measure_in_child(child_allocates, &big, &result, sizeof result, &peak_big));
    /* the 64 MiB child's peak exceeds the 1 MiB child's by most of 63 MiB */
    CHECK_MSG(peak_big > peak_small + 48 * 1024, "peaks %llu and %llu KiB", (unsigned long long)peak_small,
              (unsigned long long)peak_big);
}

TEST(measure_in_child_carries_errors_and_deaths)
{
    long result;
    uint64_t peak;
    CHECK_ERR(measure_in_child(child_fails, NULL, &result, sizeof result, &peak), ERR_FORMAT, "the child's own words");
    CHECK_ERR(measure_in_child(child_dies, NULL, &result, sizeof result, &peak), ERR_IO, "signal 9");
}

TEST(clock_thread_cpu_counts_work_not_sleep)
{
    uint64_t t0 = clock_thread_cpu_ns();
    clock_sleep_ns(50 * 1000000ull);
    uint64_t slept = clock_thread_cpu_ns() - t0;
    t0 = clock_thread_cpu_ns();
    clock_spin_ns(50 * 1000000ull);
    uint64_t spun = clock_thread_cpu_ns() - t0;
    CHECK_MSG(slept < spun, "sleeping used %llu ns of CPU, spinning %llu", (unsigned long long)slept,
              (unsigned long long)spun);
}
