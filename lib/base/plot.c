/* plot: CSV files and gnuplot rendering (see plot.h). */
#include "base/plot.h"

#include "base/error.h"
#include "base/fsutil.h"

#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
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

int plot_check(const char *dir, const char *name, const char *what)
{
    static const char *const files[] = {".csv", ".png", ".svg"};
    char out[PLOT_PATH_MAX], file[PLOT_PATH_MAX + 8];
    int rc = plot_paths(dir, name, NULL, out);
    for (size_t k = 0; rc == 0 && k < sizeof files / sizeof files[0]; k++) {
        snprintf(file, sizeof file, "%s%s", out, files[k]);
        rc = fsutil_check_output(file, what);
    }
    return rc;
}

int plot_check_input(const char *dir, const char *name, const char *input, const char *what)
{
    static const char *const files[] = {".csv", ".png", ".svg"};
    char out[PLOT_PATH_MAX], file[PLOT_PATH_MAX + 8], one[PLOT_PATH_MAX];
    int rc = plot_paths(dir, name, NULL, out);
    for (const char *p = input; rc == 0 && p && *p;) {
        size_t n = strcspn(p, ",");
        snprintf(one, sizeof one, "%.*s", (int)(n < sizeof one ? n : sizeof one - 1), p);
        for (size_t k = 0; rc == 0 && k < sizeof files / sizeof files[0]; k++) {
            snprintf(file, sizeof file, "%s%s", out, files[k]);
            if (fsutil_same_output(file, one))
                rc = err_set(ERR_ARG, "%s: %s is %s, which this run reads: it would be replaced", what, file, one);
        }
        p += n + (p[n] == ',');
    }
    return rc;
}

int plot_csv_open(struct plot_csv *c, const char *path, const char *what)
{
    c->text = NULL;
    c->len = 0;
    c->f = NULL;
    char dir[PLOT_PATH_MAX];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    int rc = 0;
    if (slash) {
        *slash = '\0';
        if ((rc = fsutil_mkdir_p(dir)) < 0)
            return what ? err_wrap(rc, "%s", what) : rc;
    }
    if ((rc = fsutil_tmp_open(&c->tmp, path, what)) < 0)
        return rc;
    if (!(c->f = open_memstream(&c->text, &c->len)))
        return fsutil_tmp_finish(&c->tmp, err_set(ERR_NOMEM, "%s: out of memory", path), 0);
    return 0;
}

int plot_csv_close(struct plot_csv *c, int rc)
{
    if (fclose(c->f) != 0 && rc == 0) /* the rows are in c->text now */
        rc = err_set(ERR_NOMEM, "%s: out of memory for its rows", c->tmp.final);
    if (rc == 0 && (rc = fsutil_write_all(c->tmp.fd, c->text, c->len, c->tmp.final)) < 0 && c->tmp.what)
        err_wrap(rc, "%s", c->tmp.what);
    free(c->text);
    c->f = NULL;
    c->text = NULL;
    return fsutil_tmp_finish(&c->tmp, rc, 0);
}

/* Whether an executable gnuplot is on PATH, as execlp() will look for it;
 * searched here, not by a shell: system() ignores SIGINT while its shell
 * runs, and a Ctrl-C then would be lost or read as "not installed". */
static int plot_have_gnuplot(void)
{
    const char *path = getenv("PATH");
    if (!path || !*path)
        path = "/bin:/usr/bin"; /* execlp's default */
    for (const char *dir = path;; dir++) {
        const char *end = strchr(dir, ':');
        size_t len = end ? (size_t)(end - dir) : strlen(dir);
        char file[PATH_MAX];
        struct stat st;
        /* an empty entry is the current directory */
        if (snprintf(file, sizeof file, "%.*s%sgnuplot", (int)len, dir, len ? "/" : "") < (int)sizeof file &&
            stat(file, &st) == 0 && S_ISREG(st.st_mode) && access(file, X_OK) == 0)
            return 1;
        if (!end)
            return 0;
        dir = end;
    }
}

/* Runs gnuplot on `vars` and `script`, writing `parts`; 0, or ERR_IO saying
 * how it ended. */
static int plot_run_gnuplot(const char *script, const char *vars, struct fsutil_parts *parts)
{
    pid_t pid = fsutil_parts_fork(parts); /* a signal that removes the parts ends gnuplot first */
    if (pid < 0)
        return (int)pid;
    if (pid == 0) {
        /* fsutil ignores SIGXFSZ for its own writes, and an ignored signal
         * stays ignored across exec: give gnuplot the default back, so a
         * file-size limit ends it instead of leaving it a cut picture */
        signal(SIGXFSZ, SIG_DFL);
        execlp("gnuplot", "gnuplot", "-e", vars, script, (char *)NULL);
        _exit(127);
    }
    int status, rc = fsutil_parts_wait(parts, pid, &status);
    if (rc < 0)
        return rc;
    if (WIFSIGNALED(status) && WTERMSIG(status) == SIGXFSZ)
        return err_set(ERR_IO, "gnuplot %s: file size limit (ulimit -f) reached writing its pictures", script);
    if (WIFSIGNALED(status))
        return err_set(ERR_IO, "gnuplot %s was killed by signal %d (%s)", script, WTERMSIG(status),
                       strsignal(WTERMSIG(status)));
    if (WEXITSTATUS(status) == 127) /* the child's _exit when execlp failed */
        return err_set(ERR_IO, "gnuplot %s: gnuplot could not be started", script);
    if (WEXITSTATUS(status) != 0)
        return err_set(ERR_IO, "gnuplot %s failed (exit status %d; its messages are above)", script,
                       WEXITSTATUS(status));
    return 0;
}

/* Appends `text` to dst, which holds *n characters of cap: as it is, or
 * `quoted` as the inside of a gnuplot single-quoted string ('' stands for one
 * quote). 0, or -1 when it does not fit (dst is then cut short: not for use). */
static int plot_append(char *dst, size_t cap, size_t *n, const char *text, int quoted)
{
    for (const char *p = text; *p; p++) {
        size_t need = quoted && *p == '\'' ? 2 : 1;
        if (*n + need >= cap)
            return -1;
        if (need == 2)
            dst[(*n)++] = '\'';
        dst[(*n)++] = *p;
    }
    dst[*n] = '\0';
    return 0;
}

/* The plot script `script`, a path from the repository's root as the
 * chapters name it: under the current directory when it is there, else under
 * the repository the program runs from, found above the program's own file
 * (build/chapter-4 sits a folder below the root, build/tools/X two). 0 with
 * its path in found[PATH_MAX], or ERR_IO naming the script and where it was
 * looked for. */
static int plot_find_script(const char *script, char found[PATH_MAX])
{
    snprintf(found, PATH_MAX, "%s", script);
    if (access(found, R_OK) == 0)
        return 0;
    int err = errno;
    char program[PATH_MAX], dir[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", program, sizeof program - 1);
    program[n > 0 ? n : 0] = '\0';
    snprintf(dir, sizeof dir, "%s", program);
    char *slash;
    for (int up = 0; script[0] != '/' && up < 3 && (slash = strrchr(dir, '/')) && slash != dir; up++) {
        *slash = '\0';
        if (snprintf(found, PATH_MAX, "%s/%s", dir, script) < PATH_MAX && access(found, R_OK) == 0)
            return 0;
    }
    return err_set(ERR_IO, "%s: cannot read the plot script: %s (looked under the current directory and above the "
                   "program%s%s)", script, strerror(err), program[0] ? ", " : "", program);
}

int plot_render(const char *script, const char *csv, const char *out, const char *what)
{
    return plot_render_titled(script, csv, out, NULL, what);
}

int plot_render_titled(const char *script, const char *csv, const char *out, const char *title, const char *what)
{
    static const char *const pictures[] = {".png", ".svg", NULL};
    if (!plot_have_gnuplot())
        return err_set(ERR_UNSUPPORTED, "gnuplot is not installed: %s not rendered (data in %s)", out, csv);
    char path[PATH_MAX];
    if (plot_find_script(script, path) < 0)
        return ERR_IO;
    script = path;
    int fd; /* gnuplot reads it: a FIFO there would hold it forever */
    if (fsutil_open_read(script, NULL, &fd, NULL) < 0)
        return ERR_IO;
    close(fd);
    struct fsutil_parts parts;
    int rc = fsutil_parts_open(&parts, out, pictures, what);
    if (rc < 0)
        return rc;
    /* gnuplot -e "csv='CSV'; out='STEM'[; title='TITLE']", every piece bounded */
    const struct {
        const char *text;
        int quoted;
    } pieces[] = {{"csv='", 0}, {csv, 1}, {"'; out='", 0}, {parts.stem.path, 1},
                  {title ? "'; title='" : "", 0}, {title ? title : "", 1}, {"'", 0}};
    char vars[3 * PLOT_PATH_MAX];
    size_t n = 0;
    int fits = 1;
    for (size_t i = 0; fits && i < sizeof pieces / sizeof pieces[0]; i++)
        fits = plot_append(vars, sizeof vars, &n, pieces[i].text, pieces[i].quoted) == 0;
    if (!fits) {
        char titled[48] = "";
        if (title)
            snprintf(titled, sizeof titled, ", the title %zu", strlen(title));
        rc = err_set(ERR_ARG, "%s%s%s: too long for gnuplot's command line (%zu characters here): the CSV's path has "
                              "%zu characters, the pictures' %zu%s, and each quote counts twice",
                     what ? what : "", what ? ": " : "", out, sizeof vars - 1, strlen(csv), strlen(parts.stem.path),
                     titled);
    } else
        rc = plot_run_gnuplot(script, vars, &parts);
    return fsutil_parts_finish(&parts, rc);
}
