# plot.gp: chapter 3's experiment (build/chapter-3 --plot). Left: the share of
# its time the trainer waited for data, against the number of workers, one line
# per per-sample decode cost. Right: the samples/s the trainer reached.
# Variables: csv (loader_sweep.csv), out (path without extension).
set datafile separator ","
# the decode costs, each once, in the CSV's order (rows go by cost); read by
# gnuplot itself: the CSV's path is never handed to a shell
works = ""
stats csv every ::1 using (w = sprintf(" %d", $1), strstrt(works . " ", w . " ") == 0 ? works = works . w : 0, 0) nooutput
set key top right box opaque
set grid
set xlabel "worker threads"
set xtics (0, 1, 2, 4, 8)
stats csv every ::1 using 2 nooutput # one worker count alone: a range around it, not gnuplot's warning
if (STATS_min == STATS_max) { set xrange [STATS_min - 1 : STATS_max + 1] }

do for [fmt in "png svg"] {
    if (fmt eq "png") { set terminal pngcairo size 1200,480 font ",10"; set output out . ".png" }
    else { set terminal svg size 1200,480 dynamic font ",10"; set output out . ".svg" }
    set multiplot layout 1,2 title "chapter 3: does the loader keep the trainer fed?"
    set ylabel "data-wait fraction (0 = fed, 1 = starved)"
    set yrange [0:1]
    plot for [w in works] csv using 2:($1 == w ? $7 : NaN) every ::1 with linespoints lw 2 pt 7 \
        title sprintf("%s us/sample", w), \
        0.1 with lines dt 2 lc rgb "gray" title "10%: starving above"
    set ylabel "samples/s reached by the trainer"
    set yrange [0:*]
    plot for [w in works] csv using 2:($1 == w ? $5 : NaN) every ::1 with linespoints lw 2 pt 7 \
        title sprintf("%s us/sample", w)
    unset multiplot
    set output
}
