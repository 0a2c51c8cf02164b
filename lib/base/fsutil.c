/* fsutil: mkdir -p, atomic writes by rename, temporary files that do not
 * outlive their process, free-space checks (see fsutil.h). */
#include "base/fsutil.h"

#include "base/error.h"
#include "base/units.h"
#include "base/hash.h"
#include "base/sigreg.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

int fsutil_mkdir_p(const char *dir)
{
    char path[PATH_MAX];
    if (snprintf(path, sizeof path, "%s", dir) >= (int)sizeof path)
        return err_set(ERR_ARG, "%s: path too long", dir);
    for (char *p = path + 1;; p++) {
        if (*p == '/' || *p == '\0') {
            char saved = *p;
            *p = '\0';
            if (mkdir(path, 0777) != 0 && errno != EEXIST)
                return err_set(ERR_IO, "%s: cannot create directory: %s", path, strerror(errno));
            if (saved == '\0')
                break;
            *p = saved;
        }
    }
    return 0;
}

/* ---- temporary files: registered for the signal handler ------------------- */

static struct sigreg fsutil_open_tmps = SIGREG_INIT(sizeof(((struct fsutil_tmp *)0)->path));
static pthread_once_t fsutil_once = PTHREAD_ONCE_INIT;
static char fsutil_host[9];           /* this machine and PID namespace, 8 hex digits */
static _Atomic unsigned long fsutil_counter; /* <n>: unique within the process */

/* The signals whose default action ends the process and that a user, a
 * terminal, a pipe reader or a file-size limit sends to a writer. */
static const int fsutil_signals[] = {SIGINT, SIGTERM, SIGHUP, SIGPIPE, SIGXFSZ};

static void fsutil_unlink_entry(const struct sigreg_entry *e, void *arg)
{
    (void)arg;
    unlink(e->text);
}

void fsutil_tmp_remove_all(void)
{
    char buf[sizeof(((struct fsutil_tmp *)0)->path)];
    sigreg_each(&fsutil_open_tmps, fsutil_unlink_entry, NULL, buf, sizeof buf);
}

/* SA_RESETHAND has put the default action back on entry: re-raising the
 * signal ends the process the way the signal would have, exit status included. */
static void fsutil_on_signal(int sig)
{
    int saved = errno;
    fsutil_tmp_remove_all();
    raise(sig);
    errno = saved;
}

/* Once per process: the host tag, and the handlers where the actions are still
 * the default. The tag hashes the host name and the PID namespace
 * (/proc/self/ns/pid names it "pid:[inode]"), so pids are only compared
 * between processes that share both. */
static void fsutil_init(void)
{
    char id[512] = "";
    if (gethostname(id, 256) != 0)
        id[0] = '\0';
    id[255] = '\0';
    size_t n = strlen(id);
    ssize_t ns = readlink("/proc/self/ns/pid", id + n, sizeof id - n - 1);
    id[n + (ns > 0 ? (size_t)ns : 0)] = '\0';
    snprintf(fsutil_host, sizeof fsutil_host, "%08x", (unsigned)hash_fnv1a(HASH_FNV1A_BASIS, id, strlen(id)));
    for (size_t i = 0; i < sizeof fsutil_signals / sizeof fsutil_signals[0]; i++) {
        struct sigaction old, sa;
        if (sigaction(fsutil_signals[i], NULL, &old) != 0 || (old.sa_flags & SA_SIGINFO) || old.sa_handler != SIG_DFL)
            continue;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = fsutil_on_signal;
        sigemptyset(&sa.sa_mask);
        sa.sa_flags = SA_RESETHAND;
        sigaction(fsutil_signals[i], &sa, NULL);
    }
}

/* Removes "<base>.tmp-<host>-<pid>-<n>" files in `dir` whose pid no longer
 * runs. kill(pid, 0) fails with ESRCH only for a pid no process has; EPERM
 * means a live process of another user, whose file stays. */
static void fsutil_sweep_stale(const char *dir, const char *base)
{
    char prefix[NAME_MAX + 32];
    int plen = snprintf(prefix, sizeof prefix, "%s.tmp-%s-", base, fsutil_host);
    DIR *d = opendir(dir);
    if (!d || plen >= (int)sizeof prefix) {
        if (d)
            closedir(d);
        return;
    }
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        if (strncmp(e->d_name, prefix, (size_t)plen) != 0)
            continue;
        char *end;
        errno = 0;
        long pid = strtol(e->d_name + plen, &end, 10);
        if (errno || end == e->d_name + plen || *end != '-' || pid <= 0 || pid == (long)getpid())
            continue;
        if (kill((pid_t)pid, 0) != 0 && errno == ESRCH)
            unlinkat(dirfd(d), e->d_name, 0);
    }
    closedir(d);
}

int fsutil_tmp_open(struct fsutil_tmp *t, const char *final)
{
    pthread_once(&fsutil_once, fsutil_init);
    t->fd = -1;
    t->cleanup = NULL;
    if (snprintf(t->final, sizeof t->final, "%s", final) >= (int)sizeof t->final)
        return err_set(ERR_ARG, "%s: path too long", final);
    char dir[PATH_MAX], base[PATH_MAX];
    snprintf(dir, sizeof dir, "%s", final);
    snprintf(base, sizeof base, "%s", final);
    fsutil_sweep_stale(dirname(dir), basename(base));
    for (;;) {
        unsigned long n = atomic_fetch_add(&fsutil_counter, 1);
        if (snprintf(t->path, sizeof t->path, "%s.tmp-%s-%ld-%lu", final, fsutil_host, (long)getpid(), n) >=
            (int)sizeof t->path)
            return err_set(ERR_ARG, "%s: path too long", final);
        /* Registered before it exists, so no instant is left in which a signal
         * could leave it behind: removing a name not yet created is harmless. */
        t->cleanup = sigreg_add(&fsutil_open_tmps, 0, 0, t->path);
        t->fd = open(t->path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600); /* RDWR: a writer may map what it wrote */
        if (t->fd >= 0)
            return 0;
        int e = errno;
        sigreg_remove(&fsutil_open_tmps, t->cleanup);
        t->cleanup = NULL;
        if (e != EEXIST) /* EEXIST: left by a dead process that had our pid; take the next name */
            return err_set(ERR_IO, "%s: cannot create a temporary file beside it: %s", final, strerror(e));
    }
}

/* fsyncs the directory holding `path`, so a rename into it is on disk. */
static int fsutil_sync_dir(const char *path)
{
    char copy[PATH_MAX];
    snprintf(copy, sizeof copy, "%s", path);
    const char *dir = dirname(copy);
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return err_set(ERR_IO, "%s: cannot open its directory to sync it: %s", path, strerror(errno));
    int rc = fsync(fd) == 0 ? 0 : err_set(ERR_IO, "%s: fsync of its directory failed: %s", path, strerror(errno));
    close(fd);
    return rc;
}

int fsutil_tmp_finish(struct fsutil_tmp *t, int rc, unsigned flags)
{
    if (t->fd < 0)
        return rc < 0 ? rc : err_set(ERR_IO, "%s: the temporary file was never opened", t->final);
    if (rc == 0 && fchmod(t->fd, 0644) != 0)
        rc = err_set(ERR_IO, "%s: chmod failed: %s", t->path, strerror(errno));
    if (rc == 0 && (flags & FSUTIL_DURABLE) && fsync(t->fd) != 0)
        rc = err_set(ERR_IO, "%s: fsync failed: %s", t->path, strerror(errno));
    if (close(t->fd) != 0 && rc == 0)
        rc = err_set(ERR_IO, "%s: close failed: %s", t->path, strerror(errno));
    t->fd = -1;
    if (rc == 0 && rename(t->path, t->final) != 0)
        rc = err_set(ERR_IO, "%s: cannot rename into place: %s", t->final, strerror(errno));
    if (rc < 0)
        unlink(t->path);
    sigreg_remove(&fsutil_open_tmps, t->cleanup); /* after the rename: a signal before it still removes the file */
    t->cleanup = NULL;
    if (rc < 0)
        return rc;
    return (flags & FSUTIL_DURABLE) ? fsutil_sync_dir(t->final) : 0;
}

int fsutil_write_all(int fd, const void *buf, size_t n, const char *name)
{
    const char *p = buf;
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return err_set(ERR_IO, "%s: write failed: %s", name, w < 0 ? strerror(errno) : "no progress");
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

int fsutil_read_all(int fd, void *buf, size_t n, const char *name)
{
    char *p = buf;
    size_t done = 0;
    while (done < n) {
        ssize_t r = read(fd, p + done, n - done);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return err_set(ERR_IO, "%s: read failed: %s", name, strerror(errno));
        if (r == 0)
            return err_set(ERR_FORMAT, "%s: ends after %zu of %zu bytes", name, done, n);
        done += (size_t)r;
    }
    return 0;
}

/* ---- free space ------------------------------------------------------------ */

int fsutil_check_space(const char *path, uint64_t bytes, const char *what)
{
    char at[PATH_MAX];
    if (snprintf(at, sizeof at, "%s", path) >= (int)sizeof at)
        return err_set(ERR_ARG, "%s: path too long", path);
    struct statvfs fs;
    while (statvfs(at, &fs) != 0) { /* not made yet: ask its nearest existing parent */
        if (errno != ENOENT || strcmp(at, "/") == 0 || strcmp(at, ".") == 0)
            return err_set(ERR_IO, "%s: cannot tell the free space: %s", path, strerror(errno));
        char *cut = dirname(at);
        memmove(at, cut, strlen(cut) + 1);
    }
    /* f_bavail: blocks an unprivileged writer may still use (root may dig into
     * the reserve, but a check that passes for root only would mislead). */
    uint64_t avail;
    if (__builtin_mul_overflow((uint64_t)fs.f_bavail, (uint64_t)fs.f_frsize, &avail))
        avail = UINT64_MAX;
    if (bytes <= avail)
        return 0;
    char need[32], have[32];
    return err_set(ERR_RANGE, "%s needs %s, only %s are free on %s", what, units_format_bytes(bytes, need, sizeof need),
                   units_format_bytes(avail, have, sizeof have), at);
}
