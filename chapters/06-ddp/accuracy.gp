# accuracy.gp: chapter 6's accuracy figure (chapters/06-ddp/plots.sh draws it
# from the last make bench): the test accuracy after each epoch of the recipe
# at 1, 2, 4 and 8 ranks, the same global batch. Left: the curves, with the
# chapter's target (0.89). Right: each curve minus the first one (the 4-rank
# recipe), in points, with the bench's allowed spread (0.5 points).
# Columns of accuracy.csv: epoch, then one per run, the 4-rank recipe first,
# headed "W ranks x batch B" (the header line names the curves: no every ::1).
# gnuplot -e "csv='...'; out='...'[; title='...']" accuracy.gp  ->  out.png and out.svg
set datafile separator ","
set key bottom right box opaque
set grid
set xlabel "epoch"
set xtics 1
stats csv every ::1 using 1 nooutput # the columns, counted by gnuplot: the CSV's path is never handed to a shell
cols = STATS_columns
do for [fmt in "png svg"] {
    if (fmt eq "png") { set terminal pngcairo size 1200,480 font ",10"; set output out . ".png" }
    else { set terminal svg size 1200,480 dynamic font ",10"; set output out . ".svg" }
    set multiplot layout 1,2 title (exists("title") ? title : "chapter 6: test accuracy per epoch") noenhanced
    set ylabel "test accuracy (%)"
    set yrange [*:*]
    plot for [i=2:cols] csv using 1:(100 * column(i)) with linespoints lw 2 pt 7 \
        title columnheader(i), \
        89 with lines dt 2 lc rgb "black" title "target: 89 %"
    set ylabel "difference from the 4-rank curve (points)"
    set yrange [-1.5:1.5]
    plot for [i=3:cols] csv using 1:(100 * (column(i) - column(2))) with linespoints lw 2 pt 7 \
        lc (i - 1) title columnheader(i), \
        0.5 with lines dt 2 lc rgb "black" title "allowed spread: 0.5 points", \
        -0.5 with lines dt 2 lc rgb "black" notitle
    unset multiplot
    set output
}
