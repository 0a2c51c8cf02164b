# plot.gp: chapter 5's figure: bus bandwidth against message size for each
# backend and all-reduce algorithm, the table's (points: modelled on the
# simulator, measured with mpi, nccl or --wall-clock) and predicted by the
# alpha-beta-gamma cost model (dashed), from the CSV that
# build/chapter-5 --plot writes (columns: backend, algo, ..., bytes = 4,
# busbw = 8, model_busbw = 14). Only the series with rows are drawn.
# gnuplot -e "csv='...'; out='...'" plot.gp  ->  out.png and out.svg
set datafile separator ","
set key top left
set logscale x 2
set format x "%.0b %BB"
set xlabel "message size"
set ylabel "bus bandwidth (GB/s)"
set title "all-reduce bus bandwidth (nccl-tests' busbw = algbw x 2(W-1)/W)"
set grid
known = "sim:ring sim:tree sim:naive sim:hier mpi:default mpi:ring mpi:tree mpi:naive nccl:default"
backend(s) = s[1:strstrt(s, ":") - 1]
algo(s) = s[strstrt(s, ":") + 1:]
is(s) = strcol(1) eq backend(s) && strcol(2) eq algo(s)
sel(s, v) = is(s) ? v : 1/0
# keep the series that have rows in this CSV
series = ""
do for [k in known] {
    stats csv every ::1 using (is(k) ? 1 : 0) nooutput
    if (STATS_sum > 0) { series = series." ".k }
}
# one size alone: a range around it (gnuplot would warn that the range is empty)
stats csv every ::1 using 4 nooutput
if (STATS_min == STATS_max) { set xrange [STATS_min / 2 : STATS_max * 2] }
set terminal pngcairo size 900,560
set output out.".png"
plot for [i=1:words(series)] csv every ::1 using 4:(sel(word(series, i), $8)) \
         with linespoints pt 7 lc i title word(series, i)." table", \
     for [i=1:words(series)] csv every ::1 using 4:(sel(word(series, i), $14)) \
         with lines dt 2 lc i title word(series, i)." model"
set terminal svg size 900,560
set output out.".svg"
replot
