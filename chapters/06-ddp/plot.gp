# plot.gp: chapter 6's Gantt chart: a few training steps of every rank, one
# row per activity (data wait, copy, forward, backward, each bucket's
# all-reduce, the communication the step waited for, optimizer, replica
# check), bars along the rank's host clock (modelled time on the simulator,
# the wall clock on a GPU), from the CSV build/chapter-6 writes
# (timeline_write_gantt_csv: rank,row,lane,label,step,start_ms,end_ms,share).
# On the simulator the last rows are the links each all-reduce kept busy, as
# the cost model charged it: GPU links in a node, the network between nodes,
# the GPUs adding; a link's bar is as tall as the share of those links in
# use (a flat ring across nodes uses one port of a node's eight).
# An all-reduce bar beside the backward bar ran under it (overlap); one after
# it, and the "exposed communication" bar under it, is time the step waited.
# gnuplot -e "csv='...'; out='...'" plot.gp  ->  out.png and out.svg
set datafile separator ","
stats csv every ::1 using 2 nooutput
rows = STATS_max + 1
stats csv every ::1 using 7 nooutput
span = STATS_max
set xlabel "time (ms; modelled on the simulator), from the first bar shown"
# title (optional): "which run: which steps; which buckets" (build/chapter-6 gives it), on two lines
if (exists("title")) { cut = strstrt(title, ": "); heading = cut ? title[1:cut - 1] . "\n" . title[cut + 2:] : title } \
else { heading = "every rank's training steps: where the time goes, and what overlaps" }
set title heading noenhanced
set yrange [rows:-1]
set xrange [0:span * 1.02]
set ytics font ",8"
set grid x
set style fill solid 0.85 border lc "black"
set key off
# colours by lane: data, copy, forward, backward, exposed communication, optimizer, check, save, eval,
# links in a node, network, adds, buckets
colour(l) = l == 0 ? 0x999999 : l == 1 ? 0x8c564b : l == 2 ? 0x1f77b4 : l == 3 ? 0x2ca02c : l == 4 ? 0xd62728 : \
            l == 5 ? 0x9467bd : l == 6 ? 0xbcbd22 : l == 7 ? 0x7f7f7f : l == 8 ? 0x17becf : \
            l == 9 ? 0x98df8a : l == 10 ? 0xff9896 : l == 11 ? 0xaec7e8 : 0xff7f0e
height = 900 < rows * 22 + 120 ? rows * 22 + 120 : 900
set terminal pngcairo size 1200,height
set output out.".png"
plot csv every ::1 using (($6 + $7) / 2):2:6:7:($2 - 0.4 * $8):($2 + 0.4 * $8):(colour($3)):ytic(4) \
     with boxxyerror lc rgb variable
set terminal svg size 1200,height
set output out.".svg"
replot
