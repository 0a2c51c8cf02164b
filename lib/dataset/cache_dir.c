/* cache_dir: the one rule for where rebuildable files go (read cache_dir.h first). */
#include "dataset/cache_dir.h"

#include "base/error.h"
#include "base/fsutil.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The /tmp fallback must be ours: anyone may create /tmp/ddp-datapath-<uid>
 * first, and we would then read and write files they control. */
static int cache_dir_check_owner(const char *dir)
{
    struct stat st;
    if (lstat(dir, &st) != 0)
        return errno == ENOENT ? 0 : err_set(ERR_IO, "%s: cannot stat the cache directory: %s", dir, strerror(errno));
    if (!S_ISDIR(st.st_mode) || st.st_uid != getuid())
        return err_set(ERR_IO, "%s: the cache directory is not a directory of this user's (set DDP_CACHE_DIR)", dir);
    return 0;
}

/* Fills buf; returns 1 for the /tmp fallback, 0 for the others, ERR_ARG if too long. */
static int cache_dir_choose(char *buf, size_t len)
{
    const char *ddp = getenv("DDP_CACHE_DIR"), *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    int n, fallback = 0;
    if (ddp && *ddp)
        n = snprintf(buf, len, "%s", ddp);
    else if (xdg && xdg[0] == '/')
        n = snprintf(buf, len, "%s/ddp-datapath", xdg);
    else if (home && *home)
        n = snprintf(buf, len, "%s/.cache/ddp-datapath", home);
    else {
        n = snprintf(buf, len, "/tmp/ddp-datapath-%lu", (unsigned long)getuid());
        fallback = 1;
    }
    if (n < 0 || (size_t)n >= len)
        return err_set(ERR_ARG, "the cache directory's path is too long (over %zu bytes)", len - 1);
    return fallback;
}

int cache_dir_path(char *buf, size_t len)
{
    int rc = cache_dir_choose(buf, len);
    if (rc == 1)
        rc = cache_dir_check_owner(buf);
    return rc;
}

int cache_dir_create(char *buf, size_t len)
{
    int rc = cache_dir_choose(buf, len);
    if (rc == 1) {
        if (mkdir(buf, 0700) != 0 && errno != EEXIST)
            return err_set(ERR_IO, "%s: cannot create the cache directory: %s", buf, strerror(errno));
        return cache_dir_check_owner(buf);
    }
    return rc < 0 ? rc : fsutil_mkdir_p(buf);
}
