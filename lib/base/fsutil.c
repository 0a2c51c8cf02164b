/* fsutil: mkdir -p, the outputs that may be written and the inputs that may
 * be read, atomic writes by rename, temporary files that do not outlive
 * their process, free-space checks (see fsutil.h). */
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
#include <sys/wait.h>
#include <unistd.h>

/* What a node that is not a regular file is, for messages. */
static const char *fsutil_kind(mode_t mode)
{
    return S_ISDIR(mode) ? "a directory" : S_ISFIFO(mode) ? "a FIFO" : S_ISCHR(mode) ? "a character device"
         : S_ISBLK(mode) ? "a block device" : S_ISSOCK(mode) ? "a socket" : S_ISLNK(mode) ? "a symbolic link"
         : S_ISREG(mode) ? "a regular file" : "an unknown kind of file";
}

/* "what: path" or "path", the head of every message about a path ("..." at
 * the end when cut). */
static const char *fsutil_name(char *buf, size_t cap, const char *what, const char *path)
{
    if (snprintf(buf, cap, "%s%s%s", what ? what : "", what ? ": " : "", path) >= (int)cap && cap > 4)
        memcpy(buf + cap - 4, "...", 4);
    return buf;
}

int fsutil_mkdir_p(const char *dir)
{
    char path[PATH_MAX];
    if (snprintf(path, sizeof path, "%s", dir) >= (int)sizeof path)
        return err_set(ERR_ARG, "%s: path too long", dir);
    for (char *p = path + 1;; p++) {
        if (*p == '/' || *p == '\0') {
            char saved = *p;
            *p = '\0';
            struct stat st;
            if (mkdir(path, 0777) != 0 && errno != EEXIST)
                return err_set(ERR_IO, "%s: cannot create directory: %s", path, strerror(errno));
            if (stat(path, &st) == 0 && !S_ISDIR(st.st_mode)) /* EEXIST: there, but maybe a file or a FIFO */
                return err_set(ERR_IO, "%s: %s, not a directory", path, fsutil_kind(st.st_mode));
            if (saved == '\0')
                break;
            *p = saved;
        }
    }
    return 0;
}

/* ---- what may be written, what may be read --------------------------------- */

/* A path under a node that is no directory ("file/sub"): no write can ever
 * make it, so it is refused now, naming that node, not after the run. */
static int fsutil_under_non_dir(const char *path, const char *what)
{
    char name[PATH_MAX + 64], parent[PATH_MAX];
    struct stat st;
    snprintf(parent, sizeof parent, "%s", path);
    for (char *slash; (slash = strrchr(parent, '/')) && slash != parent;) {
        *slash = '\0';
        if (stat(parent, &st) == 0 && !S_ISDIR(st.st_mode))
            return err_set(ERR_IO, "%s: %s is %s, not a directory: nothing can be written under it",
                           fsutil_name(name, sizeof name, what, path), parent, fsutil_kind(st.st_mode));
    }
    return 1; /* not found again (the path changed meanwhile): the write will say */
}

/* The node `path` names, a symbolic link followed: 0 and *st; 1 when nothing
 * is there (a new name, or a path the write will report on); ERR_IO when it
 * is a dangling link, or under a node that is not a directory; ERR_ARG when
 * the path or one of its names is longer than the system takes. */
static int fsutil_node(const char *path, const char *what, struct stat *st)
{
    struct stat lst;
    char name[PATH_MAX + 64], target[PATH_MAX];
    if (lstat(path, &lst) != 0) {
        if (errno == ENAMETOOLONG)
            return err_set(ERR_ARG, "%s: %s (%zu characters)", fsutil_name(name, sizeof name, what, path),
                           strerror(ENAMETOOLONG), strlen(path));
        return errno == ENOTDIR ? fsutil_under_non_dir(path, what) : 1;
    }
    if (!S_ISLNK(lst.st_mode)) {
        *st = lst;
        return 0;
    }
    if (stat(path, st) == 0)
        return 0;
    ssize_t n = readlink(path, target, sizeof target - 1);
    target[n > 0 ? n : 0] = '\0';
    return err_set(ERR_IO, "%s: a symbolic link to '%s', which cannot be reached (%s): refusing to write through it",
                   fsutil_name(name, sizeof name, what, path), target, strerror(errno));
}

static int fsutil_check_node(const char *path, const char *what, int want_dir)
{
    char name[PATH_MAX + 64];
    if (!path || !*path)
        return err_set(ERR_ARG, "%s: an empty path: name a %s", what ? what : "output",
                       want_dir ? "directory" : "file");
    struct stat st;
    int rc = fsutil_node(path, what, &st);
    if (rc != 0)
        return rc < 0 ? rc : 0;
    if (want_dir ? S_ISDIR(st.st_mode) : S_ISREG(st.st_mode))
        return 0;
    return err_set(ERR_IO, "%s: %s, not a %s: refusing to write %s it", fsutil_name(name, sizeof name, what, path),
                   fsutil_kind(st.st_mode), want_dir ? "directory" : "regular file", want_dir ? "into" : "over");
}

int fsutil_is_link(const char *path)
{
    struct stat st;
    return lstat(path, &st) == 0 && S_ISLNK(st.st_mode);
}

int fsutil_check_output(const char *path, const char *what) { return fsutil_check_node(path, what, 0); }

int fsutil_check_output_dir(const char *dir, const char *what) { return fsutil_check_node(dir, what, 1); }

int fsutil_probe_output(const char *path)
{
    struct fsutil_tmp t;
    int rc = fsutil_tmp_open(&t, path, NULL);
    if (rc == 0)
        rc = fsutil_tmp_finish(&t, ERR_STATE, 0) == ERR_STATE ? 0 : ERR_IO; /* rc < 0: it only removes the file */
    return rc;
}

/* The file `path` names once written, into out[PATH_MAX] (see fsutil_same_output). */
static void fsutil_resolve(const char *path, char *out)
{
    char dir[PATH_MAX], name[PATH_MAX], real[PATH_MAX];
    if (realpath(path, out))
        return;
    snprintf(dir, sizeof dir, "%s", path); /* dirname() and basename() may write into their argument */
    snprintf(name, sizeof name, "%s", path);
    if (!realpath(dirname(dir), real) || snprintf(out, PATH_MAX, "%s/%s", real, basename(name)) >= PATH_MAX)
        snprintf(out, PATH_MAX, "%s", path);
}

int fsutil_same_output(const char *a, const char *b)
{
    char ra[PATH_MAX], rb[PATH_MAX];
    fsutil_resolve(a, ra);
    fsutil_resolve(b, rb);
    return strcmp(ra, rb) == 0;
}

int fsutil_open_read(const char *path, const char *what, int *fd, struct stat *st)
{
    char name[PATH_MAX + 64];
    struct stat own;
    st = st ? st : &own;
    *fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (*fd < 0)
        return err_set(ERR_IO, "%s: cannot open: %s", fsutil_name(name, sizeof name, what, path), strerror(errno));
    int rc = 0;
    if (fstat(*fd, st) != 0)
        rc = err_set(ERR_IO, "%s: cannot stat: %s", fsutil_name(name, sizeof name, what, path), strerror(errno));
    else if (!S_ISREG(st->st_mode))
        rc = err_set(ERR_IO, "%s: not a regular file (%s)", fsutil_name(name, sizeof name, what, path),
                     fsutil_kind(st->st_mode));
    else if (fcntl(*fd, F_SETFL, fcntl(*fd, F_GETFL) & ~O_NONBLOCK) != 0)
        rc = err_set(ERR_IO, "%s: fcntl: %s", fsutil_name(name, sizeof name, what, path), strerror(errno));
    if (rc < 0) {
        close(*fd);
        *fd = -1;
    }
    return rc;
}

/* The message of a write, fsync or close of `path` that failed with `e`: the
 * two a user can act on, a full disk and a file-size limit, in words. */
static int fsutil_write_error(const char *what, const char *path, const char *step, int e)
{
    const char *w = what ? what : "", *sep = what ? ": " : "";
    if (e == EFBIG)
        return err_set(ERR_IO, "%s%sfile size limit (ulimit -f) reached writing %s (%s)", w, sep, path, step);
    if (e == ENOSPC || e == EDQUOT)
        return err_set(ERR_IO, "%s%sthe disk is full writing %s (%s: %s)", w, sep, path, step, strerror(e));
    return err_set(ERR_IO, "%s%s%s: %s failed: %s", w, sep, path, step, strerror(e));
}

/* ---- temporary files: registered for the signal handler ------------------- */

static struct sigreg fsutil_open_tmps = SIGREG_INIT(sizeof(((struct fsutil_tmp *)0)->path));
static struct sigreg fsutil_writers = SIGREG_INIT(1); /* children writing parts: begin is the pid */
static pthread_once_t fsutil_once = PTHREAD_ONCE_INIT;
static char fsutil_host[9];           /* this machine and PID namespace, 8 hex digits */
static _Atomic unsigned long fsutil_counter; /* <n>: unique within the process */

/* The signals whose default action ends the process and that come to a
 * writer from outside: a terminal (Ctrl-C, Ctrl-\, a hang-up), a pipe reader,
 * a user or a scheduler (kill; SIGUSR1 or SIGUSR2 as a job's warning, which
 * mpirun forwards to every rank; an alarm), a CPU-time limit. (SIGXFSZ is
 * ignored instead: see fsutil.h.) */
static const int fsutil_signals[] = {SIGINT, SIGQUIT, SIGTERM, SIGHUP, SIGPIPE,
                                     SIGUSR1, SIGUSR2, SIGALRM, SIGXCPU};

static void fsutil_unlink_entry(const struct sigreg_entry *e, void *arg)
{
    (void)arg;
    unlink(e->text);
}

/* SIGKILL: a writer must not get to write one more byte after the kill. */
static void fsutil_kill_entry(const struct sigreg_entry *e, void *arg)
{
    (void)arg;
    pid_t pid = (pid_t)e->begin;
    if (kill(pid, SIGKILL) == 0)
        while (waitpid(pid, NULL, 0) < 0 && errno == EINTR) {
        }
}

void fsutil_tmp_remove_all(void)
{
    char buf[sizeof(((struct fsutil_tmp *)0)->path)];
    sigreg_each(&fsutil_writers, fsutil_kill_entry, NULL, buf, sizeof buf);
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

/* Once per process: the host tag, the handlers where the actions are still
 * the default, SIGXFSZ ignored where it was the default, and the removal at
 * exit. The tag hashes the host name and the PID namespace
 * (/proc/self/ns/pid names it "pid:[inode]"), so pids are only compared
 * between processes that share both. */
static void fsutil_init(void)
{
    struct sigaction xfsz;
    if (sigaction(SIGXFSZ, NULL, &xfsz) == 0 && !(xfsz.sa_flags & SA_SIGINFO) && xfsz.sa_handler == SIG_DFL)
        signal(SIGXFSZ, SIG_IGN);
    atexit(fsutil_tmp_remove_all);
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

void fsutil_tmp_sweep(const char *final)
{
    pthread_once(&fsutil_once, fsutil_init);
    char dir[PATH_MAX], base[PATH_MAX];
    if (snprintf(dir, sizeof dir, "%s", final) >= (int)sizeof dir)
        return;
    snprintf(base, sizeof base, "%s", final);
    fsutil_sweep_stale(dirname(dir), basename(base));
}

/* Sweeps, then creates t->path, a temporary file of t->final (set), for
 * writing. */
static int fsutil_tmp_create(struct fsutil_tmp *t)
{
    char name[PATH_MAX + 64];
    fsutil_tmp_sweep(t->final);
    for (;;) {
        unsigned long n = atomic_fetch_add(&fsutil_counter, 1);
        if (snprintf(t->path, sizeof t->path, "%s.tmp-%s-%ld-%lu", t->final, fsutil_host, (long)getpid(), n) >=
            (int)sizeof t->path)
            return err_set(ERR_ARG, "%s: path too long", fsutil_name(name, sizeof name, t->what, t->final));
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
            return err_set(ERR_IO, "%s: cannot create a temporary file beside it: %s",
                           fsutil_name(name, sizeof name, t->what, t->final), strerror(e));
    }
}

/* Sets up t for `final`: nothing open yet. */
static int fsutil_tmp_init(struct fsutil_tmp *t, const char *final, const char *what)
{
    pthread_once(&fsutil_once, fsutil_init);
    t->fd = -1;
    t->cleanup = NULL;
    t->what = what;
    t->path[0] = '\0';
    if (snprintf(t->final, sizeof t->final, "%s", final) >= (int)sizeof t->final)
        return err_set(ERR_ARG, "%s%s%.200s...: path too long", what ? what : "", what ? ": " : "", final);
    return 0;
}

int fsutil_tmp_open(struct fsutil_tmp *t, const char *final, const char *what)
{
    int rc = fsutil_tmp_init(t, final, what);
    if (rc == 0)
        rc = fsutil_check_output(final, what);
    if (rc < 0)
        return rc;
    /* A link to a regular file (the check refused any other): write the file
     * it names, beside it, and leave the link a link. */
    char real[PATH_MAX];
    if (fsutil_is_link(final) && realpath(final, real))
        snprintf(t->final, sizeof t->final, "%s", real);
    return fsutil_tmp_create(t);
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
    char name[PATH_MAX + 64];
    fsutil_name(name, sizeof name, t->what, t->final);
    if (t->fd < 0)
        return rc < 0 ? rc : err_set(ERR_IO, "%s: the temporary file was never opened", name);
    if (rc == 0 && fchmod(t->fd, 0644) != 0)
        rc = err_set(ERR_IO, "%s: chmod failed: %s", t->path, strerror(errno));
    /* a file system that allocates late (NFS, XFS's delayed allocation) may
     * only say at fsync or close that the disk is full */
    if (rc == 0 && (flags & FSUTIL_DURABLE) && fsync(t->fd) != 0)
        rc = fsutil_write_error(t->what, t->final, "fsync", errno);
    if (close(t->fd) != 0 && rc == 0)
        rc = fsutil_write_error(t->what, t->final, "close", errno);
    t->fd = -1;
    if (rc == 0)
        rc = fsutil_check_output(t->final, t->what); /* again: the path may have changed since the open */
    if (rc == 0 && rename(t->path, t->final) != 0)
        rc = err_set(ERR_IO, "%s: cannot rename into place: %s", name, strerror(errno));
    if (rc < 0)
        unlink(t->path);
    sigreg_remove(&fsutil_open_tmps, t->cleanup); /* after the rename: a signal before it still removes the file */
    t->cleanup = NULL;
    if (rc < 0)
        return rc;
    return (flags & FSUTIL_DURABLE) ? fsutil_sync_dir(t->final) : 0;
}

/* ---- output files another program writes ------------------------------------ */

/* "<a><suffix>" into out[PATH_MAX + 64]. */
static int fsutil_part_name(char *out, const char *a, const char *suffix)
{
    return snprintf(out, PATH_MAX + 64, "%s%s", a, suffix) < PATH_MAX + 64 ? 0
                                                                            : err_set(ERR_ARG, "%s: path too long", a);
}

int fsutil_parts_open(struct fsutil_parts *p, const char *final, const char *const *suffixes, const char *what)
{
    p->suffixes = suffixes;
    p->writer = NULL;
    memset(p->cleanup, 0, sizeof p->cleanup);
    int rc = fsutil_tmp_init(&p->stem, final, what), k;
    char part[PATH_MAX + 64];
    for (k = 0; rc == 0 && suffixes[k]; k++)
        if (k == FSUTIL_PARTS_MAX)
            rc = err_set(ERR_ARG, "%s: more than %d parts", final, FSUTIL_PARTS_MAX);
        else if ((rc = fsutil_part_name(part, final, suffixes[k])) == 0)
            rc = fsutil_check_output(part, what);
    if (rc == 0)
        rc = fsutil_tmp_create(&p->stem);
    for (k = 0; rc == 0 && suffixes[k]; k++)
        if ((rc = fsutil_part_name(part, p->stem.path, suffixes[k])) == 0)
            p->cleanup[k] = sigreg_add(&fsutil_open_tmps, 0, 0, part);
    return rc < 0 ? fsutil_parts_finish(p, rc) : 0;
}

pid_t fsutil_parts_fork(struct fsutil_parts *p)
{
    sigset_t block, old;
    sigemptyset(&block);
    for (size_t i = 0; i < sizeof fsutil_signals / sizeof fsutil_signals[0]; i++)
        sigaddset(&block, fsutil_signals[i]);
    pthread_sigmask(SIG_BLOCK, &block, &old);
    pid_t pid = fork();
    int e = errno;
    if (pid == 0) {
        pthread_sigmask(SIG_SETMASK, &old, NULL);
        return 0;
    }
    if (pid > 0)
        p->writer = sigreg_add(&fsutil_writers, (uintptr_t)pid, (uintptr_t)pid + 1, "");
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    char name[PATH_MAX + 64];
    return pid > 0 ? pid
                   : err_set(ERR_IO, "%s: cannot start the program that writes it: fork failed: %s",
                             fsutil_name(name, sizeof name, p->stem.what, p->stem.final), strerror(e));
}

int fsutil_parts_wait(struct fsutil_parts *p, pid_t pid, int *status)
{
    siginfo_t info;
    int rc = 0;
    while (waitid(P_PID, (id_t)pid, &info, WEXITED | WNOWAIT) != 0)
        if (errno != EINTR) {
            rc = err_set(ERR_IO, "waiting for process %ld: %s", (long)pid, strerror(errno));
            break;
        }
    sigreg_remove(&fsutil_writers, p->writer); /* before the reaping: the pid is still the zombie's */
    p->writer = NULL;
    while (waitpid(pid, status, 0) < 0)
        if (errno != EINTR)
            return rc < 0 ? rc : err_set(ERR_IO, "waiting for process %ld: %s", (long)pid, strerror(errno));
    return rc;
}

/* Renames the part the program wrote at `part` onto `final`, checked again. */
static int fsutil_part_place(const char *part, const char *final, const char *what)
{
    char name[PATH_MAX + 64], real[PATH_MAX];
    struct stat st;
    fsutil_name(name, sizeof name, what, final);
    if (lstat(part, &st) != 0 || !S_ISREG(st.st_mode))
        return err_set(ERR_IO, "%s: was not written", name);
    if (chmod(part, 0644) != 0)
        return err_set(ERR_IO, "%s: chmod failed: %s", part, strerror(errno));
    int rc = fsutil_check_output(final, what);
    if (rc < 0)
        return rc;
    if (fsutil_is_link(final) && realpath(final, real))
        final = real; /* a link to a regular file: replace that file, as fsutil_tmp_open() does */
    if (rename(part, final) != 0)
        return err_set(ERR_IO, "%s: cannot rename into place: %s", name, strerror(errno));
    return 0;
}

int fsutil_parts_finish(struct fsutil_parts *p, int rc)
{
    char part[PATH_MAX + 64], final[PATH_MAX + 64];
    for (int k = 0; p->stem.path[0] && k < FSUTIL_PARTS_MAX && p->suffixes[k]; k++) {
        /* both names fit: fsutil_parts_open() made them */
        fsutil_part_name(part, p->stem.path, p->suffixes[k]);
        fsutil_part_name(final, p->stem.final, p->suffixes[k]);
        if (rc == 0)
            rc = fsutil_part_place(part, final, p->stem.what);
        if (rc < 0)
            unlink(part);
        sigreg_remove(&fsutil_open_tmps, p->cleanup[k]); /* after the unlink: a signal before it still removes it */
        p->cleanup[k] = NULL;
    }
    if (p->stem.fd >= 0) { /* the stem only reserved the name */
        close(p->stem.fd);
        p->stem.fd = -1;
        unlink(p->stem.path);
    }
    sigreg_remove(&fsutil_open_tmps, p->stem.cleanup);
    p->stem.cleanup = NULL;
    return rc;
}

/* ---- whole reads and writes ----------------------------------------------------- */

int fsutil_write_all(int fd, const void *buf, size_t n, const char *name)
{
    const char *p = buf;
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0)
            return fsutil_write_error(NULL, name, "write", errno);
        if (w == 0)
            return err_set(ERR_IO, "%s: write failed: no progress", name);
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
