/* fsutil: the file-system steps every stage that reads or writes a file shares.
 *
 * Where it sits: under everything that touches a file. The dataset caches (a
 * gzipped IDX file inflated once, a JSONL offset index or length table), the
 * chapters' generated data, CSV and plots, the Chrome trace and the
 * checkpoints and model files of full DDP all write the same way: into a
 * temporary file beside the final one, then rename(2) into place, which is
 * atomic on POSIX. A reader therefore sees the old file or the new one, never
 * half of one, whatever moment the writer is killed at.
 *
 *     struct fsutil_tmp t;
 *     if ((rc = fsutil_tmp_open(&t, "data.offsets", NULL)) < 0) return rc;
 *     rc = fsutil_write_all(t.fd, buf, n, t.final);
 *     return fsutil_tmp_finish(&t, rc, FSUTIL_DURABLE);   (renames, or removes on rc < 0)
 *
 * What may be written: a regular file (replaced whole) or a new name. A
 * directory, a FIFO, a device node, a socket, a symbolic link to one of those
 * or a dangling one is refused, naming the flag that gave the path, and left
 * as it was: a rename onto /dev/null or a FIFO would replace the node with a
 * regular file (as root, the system's own /dev/full). A symbolic link to a
 * regular file is followed: the file it names is replaced, the link stays.
 * fsutil_check_output() lets a program check a path before minutes of work;
 * the write checks again just before its rename, as the path may have
 * changed.
 *
 * What may be read: fsutil_open_read() opens without blocking and refuses
 * anything but a regular file. Opening a FIFO for reading waits for a writer,
 * forever if none comes; a device is no dataset or checkpoint either.
 *
 * A full disk or a file-size limit is an error, not a death: writes that fail
 * with ENOSPC or EDQUOT say the disk is full, and SIGXFSZ, which `ulimit -f`
 * sends to a process writing past the limit and which would kill it without a
 * word, is ignored from the first fsutil_tmp_open() on (where its action was
 * the default), so the write fails with EFBIG and says "file size limit
 * (ulimit -f) reached writing X". Either way the temporary file is removed and
 * the previous file, the last good checkpoint, stays whole.
 *
 * No temporary file outlives its process:
 * - a temporary file is named "<final>.tmp-<host>-<pid>-<n>": <host> is 8 hex
 *   digits naming this machine and PID namespace, <pid> the writer;
 * - while it is open, SIGINT, SIGQUIT, SIGTERM, SIGHUP, SIGPIPE, SIGUSR1,
 *   SIGUSR2, SIGALRM and SIGXCPU (a CPU-time limit) remove it before the
 *   process dies of the signal as it would have (the handler is installed at
 *   the first fsutil_tmp_open(), for each of these signals whose action is
 *   still the default: a program with its own handler, or one that ignores the
 *   signal, keeps it, and may call fsutil_tmp_remove_all() itself); so does
 *   exit() (one rank's failure ends the job while rank 0 is saving);
 * - SIGKILL cannot be caught, so fsutil_tmp_open() sweeps the temporary files
 *   of the same final name that a process of this machine and namespace left
 *   when it died: those whose pid no longer runs (a reader may call
 *   fsutil_tmp_sweep(), as resuming from a checkpoint does). A file of a live
 *   process, of another machine (a shared file system) or of another container
 *   is never touched.
 *
 * Read fsutil_tmp_open() first.
 */
#ifndef DDP_FSUTIL_H
#define DDP_FSUTIL_H

#include <limits.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>

/* Creates directory `dir` and its parents (mkdir -p). 0, ERR_ARG (path too
 * long) or ERR_IO naming the component that could not be made, or that is
 * there but is not a directory (a file, a FIFO: "x: a FIFO, not a directory"). */
int fsutil_mkdir_p(const char *dir);

/* 1 when path is a symbolic link (whatever it names, or nothing), else 0. */
int fsutil_is_link(const char *path);

/* Checks that `path` may be written as an output (see the top of this file):
 * a regular file, a symbolic link to one, or a name that does not exist yet.
 * `what` names where the path came from in messages ("--save"; NULL: the
 * path alone). 0; ERR_ARG for an empty path; ERR_IO naming `what` and the
 * path and saying what it is ("--save: /dev/null: a character device, not a
 * regular file: refusing to write over it"), or under a node that is no
 * directory ("--save: x/file/m.safetensors: x/file is a regular file, not a
 * directory: nothing can be written under it"); ERR_ARG for a path, or a
 * name in it, longer than the system takes. A path it cannot look at (a
 * missing directory, no permission) passes: the write says why it fails. */
int fsutil_check_output(const char *path, const char *what);

/* The same for a directory outputs go into (--out, --checkpoint): a
 * directory, a symbolic link to one, or a name that does not exist yet
 * (fsutil_mkdir_p makes it). */
int fsutil_check_output_dir(const char *dir, const char *what);

/* Whether `path` can be written now, where fsutil_check_output cannot tell
 * (a missing directory, no permission, a read-only disk): a temporary file is
 * made beside it, as writing it will, and removed again. 0, or the error of
 * fsutil_tmp_open (ERR_IO naming the path and why). */
int fsutil_probe_output(const char *path);

/* Whether two outputs `a` and `b` are the same file, so that the one written
 * last would replace the other ("--save=m --trace=m"): each path is resolved
 * (symbolic links followed: a link to a regular file is written through),
 * or, where it does not exist yet, its directory is. A directory that does
 * not exist yet either is compared as written. 1 or 0. */
int fsutil_same_output(const char *a, const char *b);

/* Opens `path` for reading without ever blocking: O_NONBLOCK, so a FIFO opens
 * at once instead of waiting for a writer, then fstat, refusing anything but
 * a regular file, then O_NONBLOCK cleared (reads of a regular file are never
 * "would block"; the flag is gone for whoever reads or maps it). *fd and *st
 * (st may be NULL), or ERR_IO naming `what` and the path ("--init: x: not a
 * regular file (a FIFO)"; "x: cannot open: No such file or directory"). */
int fsutil_open_read(const char *path, const char *what, int *fd, struct stat *st);

/* A temporary file being written, to be renamed onto `final`. */
struct fsutil_tmp {
    int fd;                     /* open for writing; -1 once finished */
    char path[PATH_MAX + 64];   /* "<final>.tmp-<host>-<pid>-<n>" */
    char final[PATH_MAX];       /* the file it replaces: a symbolic link's target */
    const char *what;           /* as given to fsutil_tmp_open(), for messages */
    void *cleanup;              /* its entry in the list the signal handler removes */
};

/* Checks `final` with fsutil_check_output(final, what) (`what`, NULL or a
 * string that outlives the write, names the flag it came from), then creates
 * "<final>.tmp-<host>-<pid>-<n>" beside it (same directory, so the rename
 * cannot cross file systems), opens it for writing and registers it for
 * removal on the signals above; first removes the stale temporary files of
 * `final` (see the top of this file). When `final` is a symbolic link to a
 * regular file, t->final is the file it names. 0, or ERR_ARG (path too
 * long) / ERR_IO (refused, or the directory is not writable) naming `final`. */
int fsutil_tmp_open(struct fsutil_tmp *t, const char *final, const char *what);

enum {
    FSUTIL_DURABLE = 1, /* fsync the file before the rename and the directory after
                         * it, so the new file survives a power cut, not only a kill */
};

/* Ends the write. With rc == 0: makes the file 0644 (it was created 0600),
 * closes it, checks `final` again (fsutil_check_output: it may have become a
 * FIFO meanwhile), renames the file onto it (fsyncs as `flags` ask) and
 * returns 0, or ERR_IO naming the step that failed. With rc < 0 (the writer
 * failed), or when any step fails: removes the temporary file and returns the
 * error. Either way t->fd is closed and nothing is left behind but, on
 * success, `final`. */
int fsutil_tmp_finish(struct fsutil_tmp *t, int rc, unsigned flags);

/* Removes the temporary files a dead writer of `final` left (the sweep
 * fsutil_tmp_open() makes), for a reader of `final` that writes nothing. */
void fsutil_tmp_sweep(const char *final);

/* Output files another program writes under names it makes itself: gnuplot,
 * told out='STEM', writes STEM.png and STEM.svg. fsutil_parts_open() checks
 * each "<final><suffix>" (fsutil_check_output), makes STEM a temporary name
 * of `final` ("<final>.tmp-<host>-<pid>-<n>", created empty so that no other
 * writer takes it; the sweep above knows its parts) and registers each
 * "<STEM><suffix>" for removal on the signals above. fsutil_parts_finish()
 * renames each part onto "<final><suffix>" when rc == 0 and the program wrote
 * it as a regular file, else removes every part; the stem goes either way. */
#define FSUTIL_PARTS_MAX 4
struct fsutil_parts {
    struct fsutil_tmp stem;                 /* stem.path: STEM, to give the program */
    const char *const *suffixes;            /* NULL-terminated, at most FSUTIL_PARTS_MAX */
    void *cleanup[FSUTIL_PARTS_MAX];
    void *writer;                           /* the running program's entry, for the handler */
};
int fsutil_parts_open(struct fsutil_parts *p, const char *final, const char *const *suffixes, const char *what);
int fsutil_parts_finish(struct fsutil_parts *p, int rc);

/* The program that writes the parts runs in a child: removing its parts on a
 * signal would not stop it writing them again a moment later, and they would
 * outlive us. fsutil_parts_fork() forks that child and registers it, the
 * signals above blocked in this thread meanwhile so that none falls between
 * the two (the child gets the mask back): a signal, or exit(), that removes
 * the temporary files first kills the child (SIGKILL) and waits for it.
 * Returns the pid in the parent, 0 in the child (which should exec, or
 * _exit), or ERR_IO naming the output (fork failed). fsutil_parts_wait() waits
 * for it to end, takes its registration back while it is a zombie (so its
 * pid cannot be another process's by then) and reaps it into *status; 0, or
 * ERR_IO. */
pid_t fsutil_parts_fork(struct fsutil_parts *p);
int fsutil_parts_wait(struct fsutil_parts *p, pid_t pid, int *status);

/* Removes every temporary file this process has open through fsutil_tmp_open(),
 * after killing and reaping the children of fsutil_parts_fork() that still
 * run. Async-signal-safe: for a program's own signal handlers, and for the
 * fatal ones (mapfile's SIGBUS). The writers' descriptors stay open; their
 * fsutil_tmp_finish() will fail. */
void fsutil_tmp_remove_all(void);

/* Writes all n bytes to fd, resuming after short writes and EINTR. 0, or ERR_IO
 * naming `name`: a full disk and a file-size limit say so (see the top of this
 * file). */
int fsutil_write_all(int fd, const void *buf, size_t n, const char *name);

/* Reads exactly n bytes from fd, resuming after short reads and EINTR. 0, or
 * ERR_IO naming `name` (ERR_FORMAT when the end came first: "ends after K of N bytes"). */
int fsutil_read_all(int fd, void *buf, size_t n, const char *name);

/* Checks, before writing, that `bytes` more bytes fit on the file system that
 * holds `path` (a file or directory; the nearest existing parent is asked).
 * 0, or ERR_RANGE naming `what` with the bytes it needs and those available
 * ("... needs 2.6 TiB, 73.7 GiB are free on <dir>"), or ERR_IO. A check, not a
 * reservation: a concurrent writer can still fill the disk first, and then
 * the write itself fails with ENOSPC. */
int fsutil_check_space(const char *path, uint64_t bytes, const char *what);

#endif
