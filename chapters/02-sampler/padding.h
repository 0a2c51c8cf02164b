/* padding.h: chapter 2's plotted experiment (build/chapter-2 --plot): how
 * much of a step is padding when records of different lengths are batched,
 * for PyTorch's plain batch sampler and for the token-budget sampler. See
 * padding.c; main.c only parses the flags and calls it. */
#ifndef CH2_PADDING_H
#define CH2_PADDING_H

#include "dataset/dataset.h"
#include "sampler/batch.h"

#define CH2_PADDING_PLOT "padding" /* its CSV, PNG and SVG in out_dir */

/* Runs the experiment over `ds` on opt->world ranks (seed, shuffle,
 * randperm and sort_size from `opt`; the budgets are its own), prints the
 * table, writes out_dir/padding.csv and draws chapters/02-sampler/plot.gp
 * into out_dir/padding.png and .svg (without gnuplot: says so, and the CSV
 * stays). 0, or a negative ERR_* with err_msg() naming what failed. */
int ch2_padding_plot(const dataset_t *ds, const struct batch_dynamic_options *opt, const char *out_dir);

#endif
