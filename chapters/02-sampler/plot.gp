# plot.gp: chapter 2's figure (build/chapter-2 --plot, padding.c): records of
# different lengths batched at the same memory per step, T tokens (log 2
# axis). Left: the share of each padded batch that is padding, for the plain
# batch sampler (B = T / the longest record) and the token-budget sampler.
# Right: the real tokens a step carries. Columns of padding.csv:
# budget_tokens = 1, plain_batch = 2, padding % = 3, 4, real tokens per step = 5, 6.
# gnuplot -e "csv='...'; out='...'[; title='...']" plot.gp  ->  out.png and out.svg
set datafile separator ","
set key top left box opaque
set grid
set logscale x 2
set xlabel "memory per step: T tokens in a padded batch (plain: B = T / longest record)"
set format x "%.0f"
label(i) = i == 1 ? "plain BatchSampler, B = T / longest" : "token budget T, sorted buffers"
colour(i) = i == 1 ? "#d62728" : "#1f77b4"

do for [fmt in "png svg"] {
    if (fmt eq "png") { set terminal pngcairo size 1200,480 font ",10"; set output out . ".png" }
    else { set terminal svg size 1200,480 dynamic font ",10"; set output out . ".svg" }
    set multiplot layout 1,2 title (exists("title") ? title : "chapter 2: padding at the same memory per step") noenhanced
    set ylabel "padding, % of the padded tokens"
    set yrange [0:100]
    unset logscale y
    set format y "%.0f"
    plot for [i=1:2] csv using 1:(column(2 + i)) every ::1 with linespoints lw 2 pt 7 lc rgb colour(i) \
        title label(i)
    set ylabel "real tokens per step (mean over every rank's steps)"
    set yrange [*:*]
    set logscale y 2
    plot for [i=1:2] csv using 1:(column(4 + i)) every ::1 with linespoints lw 2 pt 7 lc rgb colour(i) \
        title label(i), \
        csv using 1:1 every ::1 with lines dt 2 lc rgb "black" title "T: the memory, all real"
    unset multiplot
    set output
}
