/* fsutil: the file-system steps every stage that writes a file shares.
 *
 * Where it sits: under everything that writes. The dataset caches (a gzipped
 * IDX file inflated once, a JSONL offset index), the chapters' CSV and plots,
 * and the checkpoints of full DDP all write the same way: into a temporary
 * file beside the final one, then rename(2) into place, which is atomic on
 * POSIX. A reader therefore sees the old file or the new one, never half of
 * one, whatever moment the writer is killed at.
 *
 *     struct fsutil_tmp t;
 *     if ((rc = fsutil_tmp_open(&t, "data.offsets")) < 0) return rc;
 *     rc = fsutil_write_all(t.fd, buf, n, t.path);
 *     return fsutil_tmp_finish(&t, rc, FSUTIL_DURABLE);   (renames, or removes on rc < 0)
 *
 * Read fsutil_tmp_open() first.
 */
#ifndef DDP_FSUTIL_H
#define DDP_FSUTIL_H

#include <limits.h>
#include <stddef.h>

/* Creates directory `dir` and its parents (mkdir -p). 0, ERR_ARG (path too
 * long) or ERR_IO naming the component that could not be made. */
int fsutil_mkdir_p(const char *dir);

/* A temporary file being written, to be renamed onto `final`. */
struct fsutil_tmp {
    int fd;                     /* open for writing; -1 once finished */
    char path[PATH_MAX + 16];   /* "<final>.tmp-XXXXXX" */
    char final[PATH_MAX];
};

/* Creates "<final>.tmp-XXXXXX" beside `final` (same directory, so the rename
 * cannot cross file systems) and opens it for writing. 0, or ERR_ARG (path too
 * long) / ERR_IO (the directory is not writable) naming `final`. */
int fsutil_tmp_open(struct fsutil_tmp *t, const char *final);

enum {
    FSUTIL_DURABLE = 1, /* fsync the file before the rename and the directory after
                         * it, so the new file survives a power cut, not only a kill */
};

/* Ends the write. With rc == 0: makes the file 0644 (mkstemp makes it 0600),
 * closes it, renames it onto `final` (fsyncs as `flags` ask) and returns 0, or
 * ERR_IO naming the step that failed. With rc < 0 (the writer failed), or when
 * any step fails: removes the temporary file and returns the error. Either
 * way t->fd is closed and nothing is left behind but, on success, `final`. */
int fsutil_tmp_finish(struct fsutil_tmp *t, int rc, unsigned flags);

/* Writes all n bytes to fd, resuming after short writes and EINTR. 0, or ERR_IO
 * naming `name` (a full disk says so). */
int fsutil_write_all(int fd, const void *buf, size_t n, const char *name);

#endif
