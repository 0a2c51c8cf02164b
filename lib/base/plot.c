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

/* Appends `text` to dst as a gnuplot single-quoted string ('' inside stands for
 * one quote). 0, or ERR_ARG when it does not fit in cap. */
static int plot_quote(char *dst, size_t cap, const char *text)
{
    size_t n = strlen(dst);
    for (const char *p = text; *p; p++) {
        if (n + 3 >= cap)
            return ERR_ARG;
        if (*p == '\'')
            dst[n++] = '\'';
        dst[n++] = *p;
    }
    dst[n] = '\0';
    return 0;
}

int plot_render(const char *script, const char *csv, const char *out)
{
    return plot_render_titled(script, csv, out, NULL);
}

int plot_render_titled(const char *script, const char *csv, const char *out, const char *title)
{
    if (!plot_have_gnuplot())
        return err_set(ERR_UNSUPPORTED, "gnuplot is not installed: %s not rendered (data in %s)", out, csv);
    if (access(script, R_OK) != 0)
        return err_set(ERR_IO, "%s: cannot read the plot script: %s (run from the repository root)", script,
                       strerror(errno));
    char vars[3 * PLOT_PATH_MAX];
    snprintf(vars, sizeof vars, "csv='");
    int rc = plot_quote(vars, sizeof vars, csv);
    if (rc == 0) {
        strcat(vars, "'; out='");
        rc = plot_quote(vars, sizeof vars, out);
    }
    if (rc == 0 && title) {
        strcat(vars, "'; title='");
        rc = plot_quote(vars, sizeof vars, title);
    }
    if (rc == 0 && strlen(vars) + 2 < sizeof vars)
        strcat(vars, "'");
    else
        return err_set(ERR_ARG, "%s: output path or title too long for gnuplot", out);
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
