# plot.gp: chapter 5's figure: bus bandwidth against message size for each
# all-reduce algorithm, measured (points) and predicted by the alpha-beta-gamma
# cost model (dashed), from the CSV build/chapter-5 --plot writes.
# gnuplot -e "csv='...'; out='...'" plot.gp  ->  out.png and out.svg
set datafile separator ","
set key top left
set logscale x 2
set format x "%.0b %BB"
set xlabel "message size"
set ylabel "bus bandwidth (GB/s)"
set title "all-reduce bus bandwidth, simulator (ranks are threads)"
set grid
sel(a, v) = (strcol(2) eq a) ? v : 1/0
set terminal pngcairo size 900,560
set output out.".png"
algos = "ring tree naive"
plot for [i=1:3] csv every ::1 using 4:(sel(word(algos, i), $8)) with linespoints pt 7 lc i title word(algos, i)." measured", \
     for [i=1:3] csv every ::1 using 4:(sel(word(algos, i), $14)) with lines dt 2 lc i title word(algos, i)." model"
set terminal svg size 900,560
set output out.".svg"
replot
