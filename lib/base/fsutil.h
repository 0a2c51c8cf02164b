/* fsutil: the file-system steps every stage that writes a file shares.
 *
 * Where it sits: under everything that writes. The dataset caches (a gzipped
 * IDX file inflated once, a JSONL offset index or length table), the
 * chapters' generated data, CSV and plots, and the checkpoints of full DDP all
 * write the same way: into a temporary file beside the final one, then
 * rename(2) into place, which is atomic on POSIX. A reader therefore sees the
 * old file or the new one, never half of one, whatever moment the writer is
 * killed at.
 *
 *     struct fsutil_tmp t;
 *     if ((rc = fsutil_tmp_open(&t, "data.offsets")) < 0) return rc;
 *     rc = fsutil_write_all(t.fd, buf, n, t.path);
 *     return fsutil_tmp_finish(&t, rc, FSUTIL_DURABLE);   (renames, or removes on rc < 0)
 *
 * No temporary file outlives its process:
 * - a temporary file is named "<final>.tmp-<host>-<pid>-<n>": <host> is 8 hex
 *   digits naming this machine and PID namespace, <pid> the writer;
 * - while it is open, SIGINT, SIGTERM, SIGHUP, SIGPIPE and SIGXFSZ remove it
 *   before the process dies of the signal as it would have (the handler is
 *   installed at the first fsutil_tmp_open(), for each of these signals whose
 *   action is still the default: a program with its own handler, or one that
 *   ignores the signal, keeps it, and may call fsutil_tmp_remove_all() itself);
 * - SIGKILL cannot be caught, so fsutil_tmp_open() sweeps the temporary files
 *   of the same final name that a process of this machine and namespace left
 *   when it died: those whose pid no longer runs. A file of a live process, of
 *   another machine (a shared file system) or of another container is never
 *   touched.
 *
 * Read fsutil_tmp_open() first.
 */
#ifndef DDP_FSUTIL_H
#define DDP_FSUTIL_H

#include <limits.h>
#include <stddef.h>
#include <stdint.h>

/* Creates directory `dir` and its parents (mkdir -p). 0, ERR_ARG (path too
 * long) or ERR_IO naming the component that could not be made. */
int fsutil_mkdir_p(const char *dir);

/* A temporary file being written, to be renamed onto `final`. */
struct fsutil_tmp {
    int fd;                     /* open for writing; -1 once finished */
    char path[PATH_MAX + 64];   /* "<final>.tmp-<host>-<pid>-<n>" */
    char final[PATH_MAX];
    void *cleanup;              /* its entry in the list the signal handler removes */
};

/* Creates "<final>.tmp-<host>-<pid>-<n>" beside `final` (same directory, so
 * the rename cannot cross file systems), opens it for writing and registers
 * it for removal on the signals above; first removes the stale temporary
 * files of `final` (see the top of this file). 0, or ERR_ARG (path too long)
 * / ERR_IO (the directory is not writable) naming `final`. */
int fsutil_tmp_open(struct fsutil_tmp *t, const char *final);

enum {
    FSUTIL_DURABLE = 1, /* fsync the file before the rename and the directory after
                         * it, so the new file survives a power cut, not only a kill */
};

/* Ends the write. With rc == 0: makes the file 0644 (it was created 0600),
 * closes it, renames it onto `final` (fsyncs as `flags` ask) and returns 0, or
 * ERR_IO naming the step that failed. With rc < 0 (the writer failed), or when
 * any step fails: removes the temporary file and returns the error. Either
 * way t->fd is closed and nothing is left behind but, on success, `final`. */
int fsutil_tmp_finish(struct fsutil_tmp *t, int rc, unsigned flags);

/* Removes every temporary file this process has open through fsutil_tmp_open().
 * Async-signal-safe: for a program's own signal handlers, and for the fatal
 * ones (mapfile's SIGBUS). The writers' descriptors stay open; their
 * fsutil_tmp_finish() will fail. */
void fsutil_tmp_remove_all(void);

/* Writes all n bytes to fd, resuming after short writes and EINTR. 0, or ERR_IO
 * naming `name` (a full disk says so). */
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
