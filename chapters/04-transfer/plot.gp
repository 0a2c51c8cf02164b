# plot.gp: chapter 4's first figure: host-to-device copy rate against
# copy size, one line per kind of host memory, the link's model (dashed, the
# simulator only) and the wire's limit (flat), from the CSV build/chapter-4
# writes (columns: bytes, pageable_sync, pinned_sync, pinned_async,
# write_combined_async, registered_async, model, limit; GB/s).
# gnuplot -e "csv='...'; out='...'" plot.gp  ->  out.png and out.svg
set datafile separator ","
set key bottom right
set logscale x 2
set format x "%.0b %BB"
set xlabel "copy size"
set ylabel "GB/s (1e9 bytes per second)"
set title "host-to-device copies: rate against size"
set grid
set yrange [0:*]
stats csv every ::1 using 7 nooutput
has_model = STATS_max > 0
stats csv every ::1 using 8 nooutput
has_limit = STATS_max > 0
set terminal pngcairo size 900,560
set output out.".png"
plot csv every ::1 using 1:2 with linespoints pt 7 lc 1 title "pageable (synchronous)", \
     csv every ::1 using 1:3 with linespoints pt 7 lc 2 title "pinned, synchronous", \
     csv every ::1 using 1:4 with linespoints pt 7 lc 3 title "pinned, asynchronous", \
     csv every ::1 using 1:5 with linespoints pt 6 lc 4 title "write-combined, asynchronous", \
     csv every ::1 using 1:6 with linespoints pt 4 lc 5 title "registered, asynchronous", \
     csv every ::1 using 1:(has_model ? $7 : 1/0) with lines dt 2 lc 8 title "model: S / (alpha + S/B)", \
     csv every ::1 using 1:(has_limit ? $8 : 1/0) with lines lw 2 lc 7 title "the link's limit"
set terminal svg size 900,560
set output out.".svg"
replot
