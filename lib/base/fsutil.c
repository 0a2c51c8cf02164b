/* fsutil: mkdir -p and atomic writes by rename (see fsutil.h). */
#include "base/fsutil.h"

#include "base/error.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
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

int fsutil_tmp_open(struct fsutil_tmp *t, const char *final)
{
    t->fd = -1;
    if (snprintf(t->final, sizeof t->final, "%s", final) >= (int)sizeof t->final ||
        snprintf(t->path, sizeof t->path, "%s.tmp-XXXXXX", final) >= (int)sizeof t->path)
        return err_set(ERR_ARG, "%s: path too long", final);
    t->fd = mkostemp(t->path, O_CLOEXEC);
    if (t->fd < 0)
        return err_set(ERR_IO, "%s: cannot create a temporary file beside it: %s", final, strerror(errno));
    return 0;
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
    if (rc < 0) {
        unlink(t->path);
        return rc;
    }
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
