# links.gp: chapter 5's link timeline: one all-reduce on a modelled cluster,
# one row per algorithm and link class (the GPUs' links inside a node, the
# network across nodes, the GPUs adding what they received), one bar per
# ring step, as tall as the share of those links in use (a flat ring across
# nodes crosses each node boundary with one flow: one port of a node's eight,
# a thin bar; hier's rings use every port). From the CSV build/chapter-5
# --links writes (algo,row,label,lane,phase,step,bytes,start_ms,end_ms,share).
# gnuplot -e "csv='...'; out='...'; title='...'" links.gp  ->  out.png and out.svg
set datafile separator ","
stats csv every ::1 using 2 nooutput
rows = STATS_max + 1
stats csv every ::1 using 9 nooutput
span = STATS_max
if (!exists("title")) { title = "one all-reduce (modelled): which link is busy when" }
set title title noenhanced
set xlabel "time (ms, modelled), from the all-reduce's start; a bar's height: the share of those links in use"
set yrange [rows - 0.4:-0.6]
set xrange [0:span * 1.02]
set grid x
set style fill solid 0.85 border lc "black"
set key off
# colours by lane: inside a node, across nodes, adds
colour(l) = l == 0 ? 0x2ca02c : l == 1 ? 0xd62728 : 0x1f77b4
do for [term in "png svg"] {
    if (term eq "png") { set terminal pngcairo size 1200,120 + rows * 60; set output out.".png" } \
    else { set terminal svg size 1200,120 + rows * 60; set output out.".svg" }
    plot csv every ::1 using (($8 + $9) / 2):2:8:9:($2 - 0.4 * $10):($2 + 0.4 * $10):(colour($4)):ytic(3) \
         with boxxyerror lc rgb variable
}
