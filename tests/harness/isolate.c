/* isolate: fork, capture stderr, enforce a deadline, explain the ending (see isolate.h). */
#include "isolate.h"

#include "check.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <poll.h>
#include <stdarg.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* The largest file a confined child may write (RLIMIT_FSIZE). */
#define ISOLATE_FILE_MAX (64ull << 20)

static long long isolate_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* What a crash usually means in the code under test, for whoever wrote it. */
static const char *isolate_signal_meaning(int sig)
{
    switch (sig) {
    case SIGSEGV: return " (a bad pointer: NULL, freed, or past the end of an array or mapping)";
    case SIGBUS: return " (a read of a mapped file past its end)";
    case SIGABRT: return " (abort(): a failed assert, or the C library found the heap corrupted)";
    case SIGFPE: return " (an integer division by zero)";
    case SIGXFSZ: return " (a file grew past the limit of a confined test: a loop that writes and never ends?)";
    default: return "";
    }
}

static void isolate_describe(int status, int timed_out, unsigned timeout_s, char *buf, size_t len)
{
    if (timed_out)
        snprintf(buf, len, "timed out after %u s (an endless loop, or a wait for what never comes)", timeout_s);
    else if (WIFSIGNALED(status))
        snprintf(buf, len, "killed by SIG%s%s", sigabbrev_np(WTERMSIG(status)) ? sigabbrev_np(WTERMSIG(status)) : "?",
                 isolate_signal_meaning(WTERMSIG(status)));
    else
        snprintf(buf, len, "exited with status %d", WEXITSTATUS(status));
}

/* Reads what is waiting on fd, keeping what fits in buf[*used .. len - 1)
 * and counting every byte in *total. */
static void isolate_drain(int fd, char *buf, size_t len, size_t *used, size_t *total)
{
    for (;;) {
        char chunk[4096];
        ssize_t n = read(fd, chunk, sizeof chunk);
        if (n <= 0)
            return;
        size_t keep = (size_t)n;
        if (*used + keep >= len)
            keep = len - 1 - *used;
        memcpy(buf + *used, chunk, keep);
        *used += keep;
        *total += (size_t)n;
    }
}

static int isolate_remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st, (void)flag, (void)ftw;
    return remove(path);
}

/* confined: the child's stdout goes to a pipe and it runs in the empty
 * directory `workdir`; writing to either fails it (see isolate_run_confined). */
static int isolate_run_in(void (*fn)(void), unsigned timeout_s, char *reason, size_t reason_len,
                          const char *workdir)
{
    /* fds: the child's stderr. out: its stdout, when confined. returned: one
     * byte the child writes only when fn() came back, so code that calls
     * exit(0) half-way cannot pass. */
    int fds[2], out[2] = {-1, -1}, returned[2];
    reason[0] = '\0';
    if (workdir && mkdir(workdir, 0700) != 0) {
        snprintf(reason, reason_len, "%s: %s", workdir, strerror(errno));
        return 0;
    }
    if (pipe(fds) != 0 || pipe(returned) != 0 || (workdir && pipe(out) != 0)) {
        snprintf(reason, reason_len, "pipe: %s", strerror(errno));
        return 0;
    }
    fflush(NULL);
    pid_t parent = getpid(), pid = fork();
    if (pid < 0) {
        snprintf(reason, reason_len, "fork: %s", strerror(errno));
        return 0;
    }
    if (pid == 0) {
        setpgid(0, 0); /* one group, so a timeout also kills what the test started */
        /* Its own group gets no Ctrl-C: without this, a test that hangs
         * would outlive a grader stopped by one, and spin on for ever. */
        if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != parent)
            _exit(1);
        close(fds[0]);
        close(returned[0]);
        dup2(fds[1], STDERR_FILENO);
        close(fds[1]);
        if (workdir) {
            close(out[0]);
            dup2(out[1], STDOUT_FILENO);
            close(out[1]);
            /* A learner's loop that never ends may write as it loops: 5 GB in a
             * 10 s test. The largest file a lab writes is a few MiB. */
            struct rlimit fsize = {ISOLATE_FILE_MAX, ISOLATE_FILE_MAX};
            setrlimit(RLIMIT_FSIZE, &fsize);
            if (chdir(workdir) != 0) {
                fprintf(stderr, "%s: %s\n", workdir, strerror(errno));
                _exit(1);
            }
        }
        fcntl(returned[1], F_SETFD, FD_CLOEXEC);
        fn();
        fflush(NULL);
        if (write(returned[1], "R", 1) != 1)
            _exit(1);
        _exit(0);
    }
    close(fds[1]);
    close(returned[1]);
    fcntl(fds[0], F_SETFL, O_NONBLOCK);
    if (workdir) {
        close(out[1]);
        fcntl(out[0], F_SETFL, O_NONBLOCK);
    }

    char printed[64]; /* the start of what a confined child wrote to stdout */
    size_t used = 0, said_total = 0, printed_used = 0, printed_total = 0;
    int status = 0, done = 0, timed_out = 0;
    long long deadline = isolate_now_ms() + (long long)timeout_s * 1000;
    while (!done) {
        struct pollfd pfd[2] = {{.fd = fds[0], .events = POLLIN}, {.fd = out[0], .events = POLLIN}};
        poll(pfd, workdir ? 2 : 1, 20);
        /* drain; keep what fits, discard the rest */
        isolate_drain(fds[0], reason, reason_len, &used, &said_total);
        if (workdir)
            isolate_drain(out[0], printed, sizeof printed, &printed_used, &printed_total);
        pid_t w = waitpid(pid, &status, WNOHANG);
        if (w == pid)
            done = 1;
        else if (isolate_now_ms() > deadline) {
            kill(-pid, SIGKILL);
            kill(pid, SIGKILL);
            waitpid(pid, &status, 0);
            timed_out = done = 1;
        }
    }
    close(fds[0]);
    if (workdir) {
        isolate_drain(out[0], printed, sizeof printed, &printed_used, &printed_total);
        close(out[0]);
    }
    char token = 0;
    int came_back = !timed_out && read(returned[0], &token, 1) == 1 && token == 'R';
    close(returned[0]);
    reason[used] = '\0';
    while (used > 0 && (reason[used - 1] == '\n' || reason[used - 1] == ' '))
        reason[--used] = '\0';
    int exited_0 = !timed_out && WIFEXITED(status) && WEXITSTATUS(status) == 0;
    char left[256] = ""; /* the first thing a confined child left in its directory */
    if (workdir) {
        DIR *d = opendir(workdir);
        for (struct dirent *e; d && !left[0] && (e = readdir(d));)
            if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0)
                snprintf(left, sizeof left, "%s", e->d_name);
        if (d)
            closedir(d);
        nftw(workdir, isolate_remove_entry, 16, FTW_DEPTH | FTW_PHYS);
    }
    if (exited_0 && came_back && !printed_total && !left[0])
        return 1;

    char ending[384];
    printed[printed_used] = '\0';
    for (char *c = printed; *c; c++) /* one line, in the reason's words */
        if (*c == '\n' || *c == '\r' || *c == '\t')
            *c = ' ';
    if (printed_total)
        snprintf(ending, sizeof ending, "the code under test printed %zu bytes to stdout (\"%s%s\"): it must print "
                 "nothing there; debug with fprintf(stderr, ...), shown when a test fails",
                 printed_total, printed, printed_total > printed_used ? "..." : "");
    else if (left[0])
        snprintf(ending, sizeof ending, "the code under test wrote '%s' in its working directory: it must write no "
                 "file of its own", left);
    else if (exited_0) /* exit(0) or _exit(0) before the test's end */
        snprintf(ending, sizeof ending, "exited with status 0 before the test returned (exit() in the code under test?)");
    else {
        isolate_describe(status, timed_out, timeout_s, ending, sizeof ending);
        if (used == 0 && !timed_out && WIFEXITED(status)) /* a failed CHECK always says why: this is exit() */
            strcat(ending, " without a word (exit() in the code under test?)");
    }
    if (used == 0)
        snprintf(reason, reason_len, "%s", ending);
    else if (used + strlen(ending) + 4 < reason_len)
        snprintf(reason + used, reason_len - used, " [%s]", ending);
    return 0;
}

int isolate_run(void (*fn)(void), unsigned timeout_s, char *reason, size_t reason_len)
{
    return isolate_run_in(fn, timeout_s, reason, reason_len, NULL);
}

int isolate_run_confined(void (*fn)(void), unsigned timeout_s, char *reason, size_t reason_len)
{
    return isolate_run_in(fn, timeout_s, reason, reason_len, check_tmp_path("workdir"));
}

void isolate_print_reason(FILE *f, const char *reason, const char *separator)
{
    for (const char *p = reason; *p; p++) {
        if (*p == '\n')
            fputs(separator, f);
        else
            fputc(*p, f);
    }
}

/* ---- the child's side: how a test ends, and where it writes ---------------- */

static char isolate_dir[256];

void check_fail(const char *file, int line, const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "%s:%d: ", file, line);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    fflush(stderr);
    _exit(1);
}

void check_skip(const char *fmt, ...)
{
    va_list ap;
    fputs("skipped: ", stderr);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    fflush(stderr);
}

const char *check_tmpdir(void)
{
    if (!isolate_dir[0]) {
        const char *base = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
        snprintf(isolate_dir, sizeof isolate_dir, "%s/ddp-test-XXXXXX", base);
        if (!mkdtemp(isolate_dir)) {
            perror("check: mkdtemp");
            exit(2);
        }
    }
    return isolate_dir;
}

const char *check_tmp_path(const char *name)
{
    static char paths[8][PATH_MAX];
    static int next;
    next = (next + 1) % 8;
    snprintf(paths[next], sizeof paths[next], "%s/%s", check_tmpdir(), name);
    return paths[next];
}

void isolate_tmpdir_remove(void)
{
    if (isolate_dir[0]) {
        char cmd[512];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", isolate_dir);
        if (system(cmd) != 0)
            fprintf(stderr, "check: could not remove %s\n", isolate_dir);
    }
}
