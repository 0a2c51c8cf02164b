# plot.gp: chapter 4's first figure: host-to-device copy rate against copy
# size, one series per kind of host memory, the link's model (the simulator
# only) and the wire's limit (flat), from the CSV build/chapter-4 writes
# (columns: bytes, pageable_sync, pinned_sync, pinned_async,
# write_combined_async, registered_async, model, limit; GB/s).
# title (build/chapter-4 gives it): what the copies ran on, "simulated
# device, PCIe Gen4 x16" or the GPU's name and its link. On the simulator
# pinned async, write-combined, registered and the model are the same
# numbers: each series has its own marker (nested: filled circle, open
# circle, open square, cross) and dash style, so all four show where they
# coincide; a log y axis keeps the slow synchronous copies apart from the
# floor.
# gnuplot -e "csv='...'; out='...'[; title='...']" plot.gp  ->  out.png and out.svg
set datafile separator ","
stats csv every ::1 using 7 nooutput
has_model = STATS_max > 0
stats csv every ::1 using 8 nooutput
has_limit = STATS_max > 0
ran_on = exists("title") ? title : "device not given"
simulated = strstrt(ran_on, "simulated device") == 1
set title "host-to-device copies: rate against size\n".ran_on font ",13" noenhanced
set key below horizontal maxcols 2 spacing 1.5 width -4
set logscale x 2
set format x "%.0b %BB"
set logscale y 10
set format y "%g"
set xlabel "copy size"
set ylabel "GB/s (1e9 bytes per second), log scale"
set grid xtics ytics mytics
same = simulated ? " (= pinned)" : ""
positive(v) = v > 0 ? v : 1/0
# one size alone: a range around it (gnuplot would warn that the range is empty)
stats csv every ::1 using 1 nooutput
if (STATS_min == STATS_max) { set xrange [STATS_min / 2 : STATS_max * 2] }
set terminal pngcairo size 960,680
set output out.".png"
plot csv every ::1 using 1:(positive($4)) with linespoints lw 7 lc rgb "#a6cee3" pt 7 ps 2.2 \
         title "pinned, asynchronous", \
     csv every ::1 using 1:(positive($5)) with linespoints lw 2 dt 2 lc rgb "#e66101" pt 6 ps 3.0 \
         title "write-combined, asynchronous".same, \
     csv every ::1 using 1:(positive($6)) with linespoints lw 2 dt 3 lc rgb "#5e3c99" pt 4 ps 3.6 \
         title "registered, asynchronous".same, \
     csv every ::1 using 1:(has_model ? positive($7) : 1/0) with linespoints lw 1.5 dt 4 lc rgb "black" pt 2 ps 1.6 \
         title (has_model ? "model: S / (alpha + S/B)" : ""), \
     csv every ::1 using 1:(positive($3)) with linespoints lw 2 lc rgb "#1b9e77" pt 5 ps 1.4 \
         title "pinned, synchronous", \
     csv every ::1 using 1:(positive($2)) with linespoints lw 2 lc rgb "#e7298a" pt 9 ps 1.6 \
         title "pageable (synchronous)", \
     csv every ::1 using 1:(has_limit ? positive($8) : 1/0) with lines lw 2 lc rgb "#e31a1c" \
         title (has_limit ? "the wire's limit" : "")
set terminal svg size 960,680
set output out.".svg"
replot
