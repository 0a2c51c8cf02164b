# plot.gp: chapter 1's figure, the JSONL strategies side by side (see
# experiment.c, which writes the CSV). Called by plot_render() with
#   gnuplot -e "csv='.../jsonl_strategies.csv'; out='.../jsonl_strategies'" plot.gp
# and writes out.png and out.svg. Log scales: the strategies differ by orders
# of magnitude, which is the lesson.
set datafile separator ','
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.8 border -1
set boxwidth 0.8
set grid ytics
set logscale y
set xtics rotate by -30 scale 0 font ',9'
set key top right font ',9'
set format y '10^{%T}'

stats csv using 9 every ::1::1 nooutput name 'LINES'
stats csv using 10 every ::1::1 nooutput name 'FILEMIB'
title_text = sprintf("Reading a JSONL file of %d lines (%.0f MiB) by index: three strategies", LINES_max, FILEMIB_max)

do for [term in "png svg"] {
    if (term eq "png") {
        set terminal pngcairo size 1400,500 font 'sans,10'
        set output out.'.png'
    } else {
        set terminal svg size 1400,500 font 'sans,10' dynamic
        set output out.'.svg'
    }
    set multiplot layout 1,3 title title_text
    set key top right
    set title 'peak RSS of the process (MiB; heap part darker)'
    set format y '%g'
    plot csv using 2:xtic(1) skip 1 lc rgb '#9ecae1' title 'peak RSS', \
         '' using 3:xtic(1) skip 1 lc rgb '#08519c' title 'heap at end'
    set key off
    set title 'time to the first random sample (s)'
    plot csv using 5:xtic(1) skip 1 lc rgb '#fd8d3c'
    set title 'random-access reads per second'
    set format y '10^{%T}'
    plot csv using 6:xtic(1) skip 1 lc rgb '#31a354'
    unset multiplot
    set output
}
