/* plot: where every chapter's measurements end up: a CSV file, and a PNG + SVG
 * rendered by gnuplot from the chapter's plot.gp. All of it goes to the
 * chapter's --out: by default PLOT_OUT_ROOT/chapter-N, under build/ (never
 * next to sources, never over the report's committed figures in
 * notebooks-out/, which only `make report` draws).
 *
 * A plot.gp script receives two variables: `csv` (the data file) and `out`
 * (an output path without extension: a temporary name, which plot_render
 * renames onto the one asked for once gnuplot succeeded); it sets its own
 * terminals and writes out.png and out.svg. See chapters/01-dataset/plot.gp
 * for the pattern. Every file goes through lib/base/fsutil.h: written whole
 * or not at all, and never over a FIFO or a device.
 */
#ifndef DDP_PLOT_H
#define DDP_PLOT_H

#include "base/fsutil.h"

#include <stdio.h>

/* The default --out of every chapter is PLOT_OUT_ROOT "/chapter-N": a lesson
 * run from the repository root writes where git looks away and `make clean`
 * cleans, so following the READMEs leaves the repository as it was. */
#define PLOT_OUT_ROOT "build/out"

/* The files of one plot in `dir` (a chapter's --out): csv = dir/NAME.csv,
 * out = dir/NAME (plot_render's OUT); either may be NULL when the CSV and the
 * picture are named differently. 0, or ERR_ARG when a path does not fit in
 * PLOT_PATH_MAX. */
#define PLOT_PATH_MAX 4096
int plot_paths(const char *dir, const char *name, char csv[PLOT_PATH_MAX], char out[PLOT_PATH_MAX]);

/* Checks, before a run that ends by writing plot NAME into `dir`, that its
 * files (NAME.csv, NAME.png, NAME.svg) may be written there
 * (fsutil_check_output), so that a FIFO or a device in their place stops the
 * run before its minutes, not after. `what` names the flag `dir` came from.
 * 0, or the error naming the file. */
int plot_check(const char *dir, const char *name, const char *what);

/* Checks that none of those files is `input`, a file the run reads (its
 * --data: a path, or a comma-separated list of them), which the plot would
 * replace once it read it (fsutil_same_output). `what` names the flag `dir`
 * came from. 0, or ERR_ARG naming both. */
int plot_check_input(const char *dir, const char *name, const char *input, const char *what);

/* A CSV being written: the rows go to memory, and plot_csv_close() writes
 * them at once through a temporary file renamed onto the path (fsutil.h), so
 * a run that fails leaves the old CSV or none, never half of one. */
struct plot_csv {
    FILE *f;               /* fprintf() the rows here */
    char *text;            /* what f holds (open_memstream) */
    size_t len;
    struct fsutil_tmp tmp; /* made at the open: a path that cannot be written fails there */
};

/* Opens a CSV to write at `path`, creating its directory; `what` names the
 * flag the path came from ("--out"; NULL: none) in messages. 0, or ERR_IO
 * naming the path (a FIFO or a device there is refused, and left as it is;
 * fsutil_check_output()); nothing to close then. */
int plot_csv_open(struct plot_csv *c, const char *path, const char *what);

/* Ends the CSV: with rc == 0, writes the rows and renames the file into place;
 * with rc < 0 (the writer failed), writes nothing. Returns rc, or the first
 * error of the write (a full disk, a file-size limit, named). */
int plot_csv_close(struct plot_csv *c, int rc);

/* Runs `gnuplot -e "csv='CSV'; out='STEM'" SCRIPT` and renames STEM.png and
 * STEM.svg onto OUT.png and OUT.svg: STEM is a temporary name beside OUT
 * (fsutil_parts_open), so a FIFO or a device at OUT.png is refused, never
 * handed to gnuplot, and a failed plot leaves the old pictures; a signal
 * that ends the program ends gnuplot first (fsutil_parts_fork), so that no
 * picture is written under the temporary name after it. `what` names
 * the flag OUT came from ("--out"; NULL: none). Returns 0 when the PNG and SVG
 * were written, ERR_UNSUPPORTED when gnuplot is not installed (the CSV is
 * still there to plot elsewhere), ERR_IO when gnuplot failed (killed by a
 * file-size limit included: it says so), ERR_ARG naming `what` and OUT when
 * the paths (and the title) do not fit the command line it gives gnuplot.
 * SCRIPT is a path from the repository's root ("chapters/04-transfer/plot.gp"),
 * found under the current directory or, run from anywhere else, under the
 * repository the program was built in (ERR_IO naming it when neither has it). */
int plot_render(const char *script, const char *csv, const char *out, const char *what);

/* plot_render, the script also given `title`: what this figure shows, for a
 * script that draws several (which run, which steps, which settings). A
 * script takes it with `exists("title")`; NULL gives none. */
int plot_render_titled(const char *script, const char *csv, const char *out, const char *title, const char *what);

#endif
