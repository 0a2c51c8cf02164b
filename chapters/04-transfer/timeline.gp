# timeline.gp: chapter 4's second figure: a few training steps on the device,
# copy and compute as bars along device time, with one device buffer (copy
# and compute take turns) and with two (the copy of batch k+1 runs under the
# compute of batch k), from the CSV build/chapter-4 writes (columns: buffers,
# step, what = copy|compute|allreduce, start_ms, end_ms). With --algo each
# step's all-reduce sends some of its bytes into the GPU on the copies' link:
# those are drawn in the copy lane, in red, and `title` says so.
# gnuplot -e "csv='...'; out='...'[; title='...']" timeline.gp  ->  out.png and out.svg
set datafile separator ","
set xlabel "device time (ms)"
set title "copy and compute over a few steps: one buffer, then two (double buffering)".(exists("title") ? "\n".title : "") noenhanced
set yrange [-0.2:4.4]
set ytics ("one buffer: copy" 3.6, "one buffer: compute" 2.8, "two buffers: copy" 1.2, "two buffers: compute" 0.4)
set xrange [0:*]
set grid x
set style fill solid 0.8 border lc "black"
set key off
row(b, w) = (b == 1 ? 2.8 : 0.4) + (w eq "compute" ? 0 : 0.8)
colour(w) = w eq "copy" ? 3 : w eq "compute" ? 2 : 7
set terminal pngcairo size 1000,420
set output out.".png"
plot csv every ::1 using (($4 + $5) / 2):(row($1, strcol(3))):4:5:(row($1, strcol(3)) - 0.3):(row($1, strcol(3)) + 0.3):(colour(strcol(3))) \
         with boxxyerror lc variable, \
     csv every ::1 using (($4 + $5) / 2):(row($1, strcol(3))):(sprintf("%d", $2)) with labels tc "white"
set terminal svg size 1000,420
set output out.".svg"
replot
