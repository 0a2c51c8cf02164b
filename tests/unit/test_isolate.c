/* test_isolate: the promise every unit test and lab grader rests on: code under
 * test that loops forever, crashes or fails a CHECK becomes a failed test with
 * a reason, and the run goes on (tests/harness/isolate.c). */
#include "check.h"
#include "isolate.h"

#include <signal.h>
#include <stdlib.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static void loops_forever(void)
{
    for (;;)
        pause();
}

/* A failed assert(). (Not SIGSEGV: ASan and TSan catch that one and exit with
 * their own report instead of dying by the signal.) */
static void crashes(void) { abort(); }

static void fails_a_check(void) { CHECK_EQ(6 * 7, 41); }

static void says_two_lines_then_exits_3(void)
{
    fprintf(stderr, "first line\nsecond line\n");
    _exit(3);
}

/* A learner's "give up" in the middle of the code under test. */
static void exits_3_without_a_word(void) { exit(3); }

static void passes(void) {}

static void skips(void) { CHECK_SKIP("no %s here", "GPU"); }

/* A learner's stub that ends the process "successfully" half-way. */
static void exits_0_before_its_end(void)
{
    _exit(0);
    CHECK_EQ(1, 2); /* never reached: the test's verdict must not be a pass */
}

/* A learner's debug print, and a debug dump into the working directory. */
static void prints_to_stdout(void) { printf("# x = 42\n"); }

static void writes_a_file_where_it_runs(void)
{
    FILE *f = fopen("debug.txt", "w");
    CHECK(f && fputs("dump\n", f) >= 0 && fclose(f) == 0);
}

/* A learner's scan that never ends, writing as it loops: 80 MiB. */
static void writes_without_end(void)
{
    static char mib[1 << 20];
    FILE *f = fopen(check_tmp_path("endless"), "w");
    for (int i = 0; f && i < 80; i++)
        fwrite(mib, 1, sizeof mib, f);
    if (f)
        fclose(f);
}

/* A test that hangs, after saying its pid on announce_fd. */
static int announce_fd = -1;
static void announces_then_hangs(void)
{
    pid_t me = getpid();
    if (write(announce_fd, &me, sizeof me) != sizeof me)
        _exit(1);
    loops_forever();
}

/* Whether pid is gone: no such process, or a zombie nobody reaped yet. */
static int process_gone(pid_t pid)
{
    char path[64], stat[256] = "";
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return 1;
    int got = fgets(stat, sizeof stat, f) != NULL;
    fclose(f);
    const char *state = strrchr(stat, ')');
    return !got || (state && state[1] == ' ' && state[2] == 'Z');
}

TEST(isolate_turns_a_hang_into_a_timeout)
{
    char reason[256];
    CHECK_EQ(isolate_run(loops_forever, 1, reason, sizeof reason), 0);
    CHECK_STR(reason, "timed out after 1 s (an endless loop, or a wait for what never comes)");
}

TEST(isolate_names_the_signal_of_a_crash)
{
    char reason[256];
    CHECK_EQ(isolate_run(crashes, 10, reason, sizeof reason), 0);
    CHECK_STR(reason, "killed by SIGABRT (abort(): a failed assert, or the C library found the heap corrupted)");
}

TEST(isolate_carries_the_failed_check_and_how_the_child_ended)
{
    char reason[512];
    CHECK_EQ(isolate_run(fails_a_check, 10, reason, sizeof reason), 0);
    CHECK_CONTAINS(reason, "6 * 7: expected 41, got 42");
    CHECK_CONTAINS(reason, "[exited with status 1]");
    CHECK_EQ(isolate_run(says_two_lines_then_exits_3, 10, reason, sizeof reason), 0);
    CHECK_STR(reason, "first line\nsecond line [exited with status 3]");
    CHECK_EQ(isolate_run(exits_3_without_a_word, 10, reason, sizeof reason), 0);
    CHECK_STR(reason, "exited with status 3 without a word (exit() in the code under test?)");
}

TEST(isolate_passes_a_test_that_returns)
{
    char reason[64];
    CHECK_EQ(isolate_run(passes, 10, reason, sizeof reason), 1);
}

TEST(isolate_fails_a_test_that_exits_0_before_returning)
{
    char reason[256];
    CHECK_EQ(isolate_run(exits_0_before_its_end, 10, reason, sizeof reason), 0);
    CHECK_STR(reason, "exited with status 0 before the test returned (exit() in the code under test?)");
}

/* The runner turns this reason into "PASS name (skipped: no GPU here)". */
TEST(isolate_passes_a_skip_with_its_reason)
{
    char reason[64];
    CHECK_EQ(isolate_run(skips, 10, reason, sizeof reason), 1);
    CHECK_STR(reason, "skipped: no GPU here");
}

TEST(isolate_keeps_a_long_reason_within_its_buffer)
{
    char reason[8];
    CHECK_EQ(isolate_run(says_two_lines_then_exits_3, 10, reason, sizeof reason), 0);
    CHECK_EQ(strlen(reason), 7);
}

TEST(isolate_confined_fails_a_print_to_stdout_and_quotes_it)
{
    char reason[512];
    CHECK_EQ(isolate_run_confined(prints_to_stdout, 10, reason, sizeof reason), 0);
    CHECK_STR(reason, "the code under test printed 9 bytes to stdout (\"# x = 42 \"): it must print nothing there; "
                      "debug with fprintf(stderr, ...), shown when a test fails");
    CHECK_EQ(isolate_run(prints_to_stdout, 10, reason, sizeof reason), 1); /* unit tests may print */
}

TEST(isolate_confined_fails_a_file_written_where_it_runs_and_removes_it)
{
    char reason[512];
    CHECK_EQ(isolate_run_confined(writes_a_file_where_it_runs, 10, reason, sizeof reason), 0);
    CHECK_CONTAINS(reason, "wrote 'debug.txt' in its working directory");
    CHECK(access("debug.txt", F_OK) != 0); /* not where the runner runs */
    CHECK(access(check_tmp_path("workdir"), F_OK) != 0);
    CHECK_EQ(isolate_run_confined(passes, 10, reason, sizeof reason), 1);
}

/* A grader stopped by Ctrl-C or kill takes its running test with it: the test
 * runs in a process group of its own, which the terminal's Ctrl-C misses. */
TEST(isolate_child_dies_with_its_runner)
{
    int fds[2];
    CHECK(pipe(fds) == 0);
    pid_t runner = fork();
    CHECK(runner >= 0);
    if (runner == 0) {
        char reason[64];
        announce_fd = fds[1];
        isolate_run(announces_then_hangs, 60, reason, sizeof reason);
        _exit(0);
    }
    pid_t test = 0;
    CHECK_EQ(read(fds[0], &test, sizeof test), sizeof test);
    kill(runner, SIGKILL);
    waitpid(runner, NULL, 0);
    for (int i = 0; i < 500 && !process_gone(test); i++)
        usleep(10000);
    int gone = process_gone(test);
    if (!gone)
        kill(test, SIGKILL);
    CHECK_MSG(gone, "the hanging test (pid %d) outlived its runner by 5 s", (int)test);
}

TEST(isolate_confined_stops_a_file_that_grows_without_end)
{
    char reason[512];
    struct stat st;
    CHECK_EQ(isolate_run_confined(writes_without_end, 10, reason, sizeof reason), 0);
    CHECK_CONTAINS(reason, "killed by SIGXFSZ (a file grew past the limit of a confined test");
    CHECK(stat(check_tmp_path("endless"), &st) == 0 && st.st_size <= (64 << 20));
    unlink(check_tmp_path("endless"));
}
