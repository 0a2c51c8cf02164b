/* plot: CSV files and gnuplot rendering (see plot.h). */
#include "base/plot.h"

#include "base/error.h"
#include "base/fsutil.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

int plot_paths(const char *dir, const char *name, char csv[PLOT_PATH_MAX], char out[PLOT_PATH_MAX])
{
    if ((csv && snprintf(csv, PLOT_PATH_MAX, "%s/%s.csv", dir, name) >= PLOT_PATH_MAX) ||
        (out && snprintf(out, PLOT_PATH_MAX, "%s/%s", dir, name) >= PLOT_PATH_MAX))
        return err_set(ERR_ARG, "output directory too long (%zu characters): %.60s...", strlen(dir), dir);
    return 0;
}

FILE *plot_csv_open(const char *path)
{
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (slash) {
        *slash = '\0';
        if (fsutil_mkdir_p(dir) != 0)
            return NULL;
    }
    FILE *f = fopen(path, "w");
    if (!f)
        err_set(ERR_IO, "%s: cannot write: %s", path, strerror(errno));
    return f;
}

static int plot_have_gnuplot(void)
{
    return system("command -v gnuplot >/dev/null 2>&1") == 0;
}

int plot_render(const char *script, const char *csv, const char *out)
{
    if (!plot_have_gnuplot())
        return err_set(ERR_UNSUPPORTED, "gnuplot is not installed: %s not rendered (data in %s)", out, csv);
    if (access(script, R_OK) != 0)
        return err_set(ERR_IO, "%s: cannot read the plot script: %s (run from the repository root)", script,
                       strerror(errno));
    if (strchr(csv, '\'') || strchr(out, '\'')) /* they go to gnuplot inside '...' */
        return err_set(ERR_ARG, "%s: a quote (') in an output path cannot be passed to gnuplot", out);
    char vars[2 * PLOT_PATH_MAX + 32];
    if (snprintf(vars, sizeof vars, "csv='%s'; out='%s'", csv, out) >= (int)sizeof vars)
        return err_set(ERR_ARG, "%s: output path too long for gnuplot", out);
    pid_t pid = fork();
    if (pid < 0)
        return err_set(ERR_IO, "fork for gnuplot: %s", strerror(errno));
    if (pid == 0) {
        execlp("gnuplot", "gnuplot", "-e", vars, script, (char *)NULL);
        _exit(127);
    }
    int status;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        return err_set(ERR_IO, "gnuplot %s failed (status %d)", script, status);
    return 0;
}
