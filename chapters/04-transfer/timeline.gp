# timeline.gp: chapter 4's second figure: a few training steps on the device,
# copy and compute as bars along device time, with one device buffer (copy
# and compute take turns) and with two (the copy of batch k+1 runs under the
# compute of batch k), from the CSV build/chapter-4 writes (columns: buffers,
# step, what = copy|compute, start_ms, end_ms).
# gnuplot -e "csv='...'; out='...'" timeline.gp  ->  out.png and out.svg
set datafile separator ","
set xlabel "device time (ms)"
set title "copy and compute over a few steps: one buffer, then two (double buffering)"
set yrange [-0.2:4.4]
set ytics ("one buffer: copy" 3.6, "one buffer: compute" 2.8, "two buffers: copy" 1.2, "two buffers: compute" 0.4)
set xrange [0:*]
set grid x
set style fill solid 0.8 border lc "black"
set key off
row(b, w) = (b == 1 ? 2.8 : 0.4) + (w eq "copy" ? 0.8 : 0)
set terminal pngcairo size 1000,420
set output out.".png"
plot csv every ::1 using (($4 + $5) / 2):(row($1, strcol(3))):4:5:(row($1, strcol(3)) - 0.3):(row($1, strcol(3)) + 0.3):(strcol(3) eq "copy" ? 3 : 2) \
         with boxxyerror lc variable, \
     csv every ::1 using (($4 + $5) / 2):(row($1, strcol(3))):(sprintf("%d", $2)) with labels tc "white"
set terminal svg size 1000,420
set output out.".svg"
replot
