/* test_base_files: lib/base/fsutil, lib/base/mapfile and lib/base/measure
 * keep their contracts. An atomic write leaves the final file or nothing (never
 * a *.tmp-* beside it), a failed write leaves the old file as it was, a
 * SIGINT or SIGTERM mid-write removes the temporary file, and the next writer
 * sweeps those a SIGKILL left, never a live process's; sizes that cannot fit
 * are refused before writing; mkdir -p makes every parent; a mapped file
 * truncated under a reader is named; a child's result, message and peak RSS
 * come back, and a child that dies is named as dead. */
#include "check.h"
#include "base/clock.h"
#include "base/error.h"
#include "base/fsutil.h"
#include "base/mapfile.h"
#include "isolate.h"
#include "base/measure.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
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

/* A child opens a temporary file, writes, tells us, and waits; we send `sig`.
 * The child must die of that signal, as it would have, and leave no file. */
static void tmp_removed_on(int sig, const char *name)
{
    char dir[512], path[600];
    snprintf(dir, sizeof dir, "%s/%s", check_tmpdir(), name);
    CHECK_OK(fsutil_mkdir_p(dir));
    snprintf(path, sizeof path, "%s/out.bin", dir);
    int ready[2];
    CHECK_EQ(pipe(ready), 0);
    pid_t kid = fork();
    CHECK(kid >= 0);
    if (kid == 0) {
        struct fsutil_tmp t;
        if (fsutil_tmp_open(&t, path) < 0 || fsutil_write_all(t.fd, "half", 4, t.path) < 0)
            _exit(3);
        (void)!write(ready[1], "x", 1);
        for (;;)
            pause();
    }
    char c;
    CHECK_EQ(read(ready[0], &c, 1), 1);
    CHECK_EQ(count_tmp(dir), 1);
    CHECK_EQ(kill(kid, sig), 0);
    int status;
    CHECK_EQ(waitpid(kid, &status, 0), kid);
    CHECK_MSG(WIFSIGNALED(status) && WTERMSIG(status) == sig, "status %#x", status);
    CHECK_EQ(count_tmp(dir), 0);
    CHECK(access(path, F_OK) != 0);
}

TEST(fsutil_tmp_removed_on_sigint_and_sigterm)
{
    tmp_removed_on(SIGINT, "int");
    tmp_removed_on(SIGTERM, "term");
    tmp_removed_on(SIGHUP, "hup");
}

/* A program that ignores SIGINT (nohup, a shell's background job) keeps
 * ignoring it: the handler goes only where the action was the default. */
TEST(fsutil_ignored_signal_stays_ignored)
{
    char path[600];
    snprintf(path, sizeof path, "%s/ignored.bin", check_tmpdir());
    pid_t kid = fork();
    CHECK(kid >= 0);
    if (kid == 0) {
        signal(SIGINT, SIG_IGN);
        struct fsutil_tmp t;
        if (fsutil_tmp_open(&t, path) < 0)
            _exit(3);
        raise(SIGINT);
        _exit(fsutil_tmp_finish(&t, 0, 0) == 0 ? 0 : 4);
    }
    int status;
    CHECK_EQ(waitpid(kid, &status, 0), kid);
    CHECK_MSG(WIFEXITED(status) && WEXITSTATUS(status) == 0, "status %#x", status);
    CHECK(access(path, F_OK) == 0);
}

/* The name of a temporary file of `final` as a process `pid` of this host
 * would make it: the same as ours, with our pid replaced. */
static void tmp_name_of(const char *ours, pid_t pid, char *out, size_t cap)
{
    char mine[32];
    snprintf(mine, sizeof mine, "-%ld-", (long)getpid());
    const char *at = strstr(ours, mine);
    CHECK_MSG(at != NULL, "%s does not hold our pid", ours);
    snprintf(out, cap, "%.*s-%ld-%s", (int)(at - ours), ours, (long)pid, at + strlen(mine));
}

static void touch(const char *path)
{
    FILE *f = fopen(path, "w");
    CHECK_MSG(f != NULL, "cannot create %s", path);
    fclose(f);
}

TEST(fsutil_sweeps_only_dead_writers_tmp_files)
{
    char dir[512], path[600], dead[1200], live[1200], foreign[1200], other[1200];
    snprintf(dir, sizeof dir, "%s/sweep", check_tmpdir());
    CHECK_OK(fsutil_mkdir_p(dir));
    snprintf(path, sizeof path, "%s/data.offsets", dir);
    struct fsutil_tmp t;
    CHECK_OK(fsutil_tmp_open(&t, path));
    /* a process that has exited (its pid is free: nothing runs as it now) */
    pid_t gone = fork();
    if (gone == 0)
        _exit(0);
    CHECK_EQ(waitpid(gone, NULL, 0), gone);
    /* one still running */
    pid_t running = fork();
    if (running == 0) {
        for (;;)
            pause();
    }
    tmp_name_of(t.path, gone, dead, sizeof dead);
    tmp_name_of(t.path, running, live, sizeof live);
    snprintf(foreign, sizeof foreign, "%s/data.offsets.tmp-00000000-%ld-0", dir, (long)gone); /* another host */
    snprintf(other, sizeof other, "%s/other.offsets%s", dir, strstr(dead, ".tmp-")); /* another final name */
    touch(dead);
    touch(live);
    touch(foreign);
    touch(other);
    CHECK_OK(fsutil_tmp_finish(&t, 0, 0));
    struct fsutil_tmp again;
    int rc = fsutil_tmp_open(&again, path); /* sweeps */
    kill(running, SIGKILL); /* first: a failed check must not leave it running */
    waitpid(running, NULL, 0);
    CHECK_OK(rc);
    CHECK_MSG(access(dead, F_OK) != 0, "%s: a dead writer's file was kept", dead);
    CHECK_MSG(access(live, F_OK) == 0, "%s: a live writer's file was removed", live);
    CHECK_MSG(access(foreign, F_OK) == 0, "%s: another host's file was removed", foreign);
    CHECK_MSG(access(other, F_OK) == 0, "%s: another file's temporary was removed", other);
    CHECK_MSG(access(again.path, F_OK) == 0, "%s: our own file is gone", again.path);
    CHECK_OK(fsutil_tmp_finish(&again, 0, 0));
}

TEST(fsutil_check_space_refuses_what_cannot_fit)
{
    char sub[600];
    snprintf(sub, sizeof sub, "%s/not/made/yet/file", check_tmpdir());
    CHECK_OK(fsutil_check_space(sub, 1000, "a small file"));
    CHECK_ERR(fsutil_check_space(sub, UINT64_MAX, "the corpus"), ERR_RANGE, "the corpus needs 16.0 EiB, only ");
    CHECK_CONTAINS(err_msg(), " are free on ");
}

/* A mapped file cut short under its reader: the read's SIGBUS becomes a
 * message naming the file and exit status 1, and a SIGBUS that is not about
 * our mappings still ends the process as SIGBUS. Each runs in a child
 * (isolate_run()), which says how it ended. */
static char mapped_path[600];

static void read_past_a_truncation(void)
{
    int fd = open(mapped_path, O_RDONLY);
    const void *map;
    CHECK(fd >= 0);
    CHECK_OK(mapfile_map(fd, 65536, mapped_path, &map));
    CHECK_EQ(truncate(mapped_path, 4096), 0);
    (void)((const volatile char *)map)[40000]; /* past the new end */
}

static void raise_a_foreign_sigbus(void)
{
    int fd = open(mapped_path, O_RDONLY);
    const void *map;
    CHECK(fd >= 0);
    CHECK_OK(mapfile_map(fd, 4096, mapped_path, &map));
    struct rlimit none = {0, 0}; /* no core file from the test */
    setrlimit(RLIMIT_CORE, &none);
    raise(SIGBUS); /* sent, not a fault in our mapping: not ours to explain */
}

TEST(mapfile_truncated_while_mapped_is_named)
{
    snprintf(mapped_path, sizeof mapped_path, "%s/mapped.bin", check_tmpdir());
    FILE *f = fopen(mapped_path, "wb");
    static char page[65536];
    CHECK(f && fwrite(page, 1, sizeof page, f) == sizeof page);
    fclose(f);
    char said[4096];
    CHECK(!isolate_run(read_past_a_truncation, 20, said, sizeof said));
    CHECK_CONTAINS(said, "mapped.bin: truncated while mapped: it had 65536 bytes when it was opened and has 4096 now, "
                         "and a read of byte 40000 faulted (SIGBUS)");
    CHECK_CONTAINS(said, "[exited with status 1]");
    CHECK(!isolate_run(raise_a_foreign_sigbus, 20, said, sizeof said));
    /* Not claimed: SIGBUS's own default action, or a sanitizer's handler that was there before ours */
    CHECK_MSG(!strstr(said, "truncated while mapped") &&
                  (strstr(said, "killed by SIGBUS") || strstr(said, "Sanitizer: BUS on unknown address")),
              "%s", said);
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
