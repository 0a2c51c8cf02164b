/* plot: where every chapter's measurements end up: a CSV file, and a PNG + SVG
 * rendered by gnuplot from the chapter's plot.gp. All of it goes to the
 * chapter's --out: by default PLOT_OUT_ROOT/chapter-N, under build/ (never
 * next to sources, never over the report's committed figures in
 * notebooks-out/, which only `make report` draws).
 *
 * A plot.gp script receives two variables: `csv` (the data file) and `out`
 * (the output path without extension); it sets its own terminals and writes
 * out.png and out.svg. See chapters/01-dataset/plot.gp for the pattern.
 */
#ifndef DDP_PLOT_H
#define DDP_PLOT_H

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

/* Opens `path` for writing a CSV, creating its directory. NULL with err_msg(). */
FILE *plot_csv_open(const char *path);

/* Runs `gnuplot -e "csv='CSV'; out='OUT'" SCRIPT`. Returns 0 when the PNG and
 * SVG were written, ERR_UNSUPPORTED when gnuplot is not installed (the CSV is
 * still there to plot elsewhere), ERR_IO when gnuplot failed. */
int plot_render(const char *script, const char *csv, const char *out);

/* plot_render, the script also given `title`: what this figure shows, for a
 * script that draws several (which run, which steps, which settings). A
 * script takes it with `exists("title")`; NULL gives none. */
int plot_render_titled(const char *script, const char *csv, const char *out, const char *title);

#endif
